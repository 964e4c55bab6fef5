/**
 * Steps 1-5 of the offline audit, for one line of manifests.jsonl: bounded line split, strict JSON
 * parse, then the single-manifest checklist of verify-manifest.ts (payload type → trusted key for host
 * and time → strict Ed25519 signature → strict schema). Each failure becomes a finding with the line
 * number; nothing a line contains can make these functions throw. Isomorphic.
 */
import { joinChunks } from '../../store/bounded-body.js';
import type { Digest } from '../../store/hash/digest.js';
import { isSignatureVerifier, type SignatureVerifier } from '../crypto/ed25519.js';
import { MAX_ENVELOPE_BYTES } from '../crypto/envelope.js';
import type { Finding } from './findings.js';
import type { TrustStore } from '../format/trust.js';
import { checkStoreList, checkStoreObject } from '../format/trust-lookup.js';
import { shownValue } from '../../store/errors.js';
import { auditUsage } from './errors.js';
import { verifyEnvelopeWith } from '../crypto/verify-manifest.js';
import { lineFinding, manifestFinding, verifiedLineOf } from './verify-line-fast.js';

/** Lines longer than this are findings, never parsed: an envelope is a few hundred bytes. */
export const MAX_LINE_BYTES = MAX_ENVELOPE_BYTES;

/** One line of a bundle as split from bytes: its text, or why there is none. */
export interface RawLine {
  /** 1-based. */
  line: number;
  /** Undefined when the line is over the bound or not UTF-8. */
  text?: string;
  /** Byte length, when over the bound (the bytes were skipped, never buffered). */
  tooLong?: number;
  notUtf8?: boolean;
  /** False only for a final line with no newline. */
  terminated: boolean;
  /** Bytes consumed including the newline, for progress. */
  bytes: number;
}

// ignoreBOM keeps a byte-order mark in the text, so a BOM-prefixed line fails JSON.parse instead of being silently accepted.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Splits a byte stream into `\n`-terminated lines, holding at most `maxLineBytes` of any one line in
 * memory: a 10 MB line is counted and skipped, never decoded or parsed.
 */
export async function* splitLines(
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  maxLineBytes = MAX_LINE_BYTES,
): AsyncGenerator<RawLine> {
  for await (const run of splitLineRuns(chunks, maxLineBytes)) yield* run;
}

/** A run is cut at this many lines, so a chunk of millions of short lines is never held as objects at once. */
const RUN_LINES = 1024;

/**
 * `splitLines`, a chunk at a time: the lines each chunk completes, in one array (none for a chunk inside
 * one long line). The auditor loops over a run synchronously instead of taking one async step a line.
 */
export async function* splitLineRuns(
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  maxLineBytes = MAX_LINE_BYTES,
): AsyncGenerator<RawLine[]> {
  let parts: Uint8Array[] = [];
  let length = 0;
  let overflow = false;
  let line = 0;
  const finish = (terminated: boolean): RawLine => {
    line++;
    const bytes = length + (terminated ? 1 : 0);
    let out: RawLine;
    if (overflow) {
      out = { line, tooLong: length, terminated, bytes };
    } else {
      try {
        out = { line, text: decoder.decode(joinChunks(parts, length)), terminated, bytes };
      } catch {
        out = { line, notUtf8: true, terminated, bytes };
      }
    }
    parts = [];
    length = 0;
    overflow = false;
    return out;
  };
  const take = (piece: Uint8Array): void => {
    length += piece.length;
    if (overflow) return;
    if (length > maxLineBytes) {
      overflow = true;
      parts = [];
    } else if (piece.length > 0) {
      parts.push(piece.slice());
    }
  };
  for await (const chunk of chunks) {
    let run: RawLine[] = [];
    let start = 0;
    for (;;) {
      if (length === 0 && !overflow) {
        // The whole lines ahead in this chunk, none over the bound, are decoded in one call and split at '\n'
        // (no copy per line; a browser's TextDecoder costs far more per call than per byte). 0x0A is never
        // part of a UTF-8 sequence, so the run decodes iff each of its lines does, and its i-th '\n'-separated
        // piece is the i-th line's text. A run that does not decode falls back to one call a line.
        const ends: number[] = [];
        let at = start;
        for (;;) {
          const nl = chunk.indexOf(10, at);
          if (nl < 0 || nl - at > maxLineBytes) break;
          ends.push(nl);
          at = nl + 1;
        }
        if (ends.length > 0) {
          let texts: string[] | undefined;
          try {
            texts = decoder.decode(chunk.subarray(start, ends[ends.length - 1])).split('\n');
          } catch {
            texts = undefined;
          }
          let from = start;
          for (let i = 0; i < ends.length; i++) {
            const to = ends[i]!;
            line++;
            if (texts) {
              run.push({ line, text: texts[i]!, terminated: true, bytes: to - from + 1 });
              if (run.length >= RUN_LINES) {
                yield run;
                run = [];
              }
            } else {
              let text: string | undefined;
              try {
                text = decoder.decode(chunk.subarray(from, to));
              } catch {
                text = undefined;
              }
              run.push(
                text === undefined
                  ? { line, notUtf8: true, terminated: true, bytes: to - from + 1 }
                  : { line, text, terminated: true, bytes: to - from + 1 },
              );
              if (run.length >= RUN_LINES) {
                yield run;
                run = [];
              }
            }
            from = to + 1;
          }
          start = at;
        }
      }
      const nl = chunk.indexOf(10, start);
      if (nl < 0) {
        take(chunk.subarray(start));
        break;
      }
      if (nl === start && length === 0 && !overflow) {
        // An empty line: no slice, no decode (a bundle of millions of them must stay linear and cheap).
        run.push({ line: ++line, text: '', terminated: true, bytes: 1 });
      } else {
        take(chunk.subarray(start, nl));
        run.push(finish(true));
      }
      if (run.length >= RUN_LINES) {
        yield run;
        run = [];
      }
      start = nl + 1;
    }
    if (run.length > 0) yield run;
  }
  if (length > 0 || overflow) yield [finish(false)];
}

/** What the chain steps need from a manifest that passed every per-line step. */
export interface VerifiedLine {
  line: number;
  id: Digest;
  host: string;
  /** The key that signed it, listed for `host` in the trust store (`checked.signers` counts them). */
  keyId: string;
  principal: string;
  session: string;
  seq: number;
  prev: Digest | null;
  createdAt: string;
  summary: { digest: Digest; size: number };
}

export type LineOutcome = { ok: true; entry: VerifiedLine } | { ok: false; finding: Finding };

/** What a line is verified with: the trusted keys and the signature check. */
export interface LineVerifyContext {
  trust: TrustStore;
  verifier: SignatureVerifier;
}

/**
 * Verifies one line's text. The envelope is parsed once here and handed over as a value, so the
 * payload bytes hashed and verified are exactly the base64-decoded bytes of this line (never re-serialized).
 */
export function verifyLineText(line: number, text: string, ctx: LineVerifyContext): LineOutcome {
  // Step 1: strict line parse (the length bound was enforced by the splitter, before this parse).
  if (text.length > MAX_LINE_BYTES) return lineFinding('LINE_TOO_LONG', line, `line is over ${MAX_LINE_BYTES} bytes`);
  // Without a parse attempt: a thrown SyntaxError costs microseconds, and a bundle of empty lines has millions.
  if (text.length === 0) return lineFinding('LINE_NOT_JSON', line, 'empty line');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return lineFinding('LINE_NOT_JSON', line, 'line is not JSON');
  }
  // Steps 2-5: payload type, trusted key for host and time, signature, schema.
  try {
    return { ok: true, entry: verifiedLineOf(line, verifyEnvelopeWith(value, ctx)) };
  } catch (err) {
    return manifestFinding(line, err);
  }
}

/** Verifies a raw line from the splitter (over-long or non-UTF-8 lines never reach JSON.parse). */
export function verifyRawLine(raw: RawLine, ctx: LineVerifyContext): LineOutcome {
  if (raw.tooLong !== undefined) {
    return lineFinding(
      'LINE_TOO_LONG',
      raw.line,
      `line is ${raw.tooLong} bytes, over the bound of ${MAX_LINE_BYTES}; skipped unparsed`,
    );
  }
  if (raw.notUtf8 || raw.text === undefined) return lineFinding('LINE_NOT_JSON', raw.line, 'line is not UTF-8');
  return verifyLineText(raw.line, raw.text, ctx);
}

/**
 * Runs the per-line steps over batches of lines: in this thread by default, or spread over worker
 * threads (manifests/audit/verify-workers.node.ts, Node only). Results come back in input order.
 */
export interface LineVerifier {
  /** How many batches to keep in flight (1 for the in-thread verifier). */
  readonly concurrency: number;
  /** One outcome a line of `batch`, in its order: an answer of another length is `USAGE` (verifyChain, verifyBundle). */
  verifyLines(batch: Array<{ line: number; text: string }>): Promise<LineOutcome[]>;
  close(): Promise<void>;
}

/**
 * A trust store as the line checks use it, looked at where a JavaScript caller hands one over: an object whose `keys`
 * is a list (and `checkpointKeys` one or absent), as `checkStoreObject` and `checkStoreList` judge the lookups' store.
 * One that is none made every valid manifest `MANIFEST_INVALID` (a lookup's TypeError read as the line's fault).
 * @throws AuditError `USAGE` naming `what`
 */
export function checkLineTrust(trust: unknown, what: string): void {
  try {
    checkStoreObject(trust);
    checkStoreList((trust as TrustStore).keys, 'keys');
    checkStoreList((trust as TrustStore).checkpointKeys, 'checkpointKeys');
  } catch (err) {
    throw auditUsage(`${what}'s trust is not a trust store (read one with parseTrustStore)`, { cause: err });
  }
}

/**
 * The in-thread line verifier over `ctx`: its trust store and signature verifier (absent: the portable one).
 * @throws AuditError `USAGE` for a context that is no object, a trust that is no trust store or a verifier without
 *   `verify` (each made every valid manifest a finding that it does not verify)
 */
export function inlineLineVerifier(ctx: LineVerifyContext): LineVerifier {
  if (typeof ctx !== 'object' || ctx === null)
    throw auditUsage(`inlineLineVerifier needs { trust, verifier }, not ${shownValue(ctx)}`);
  checkLineTrust(ctx.trust, 'inlineLineVerifier');
  const verifier = ctx.verifier as unknown;
  if (verifier !== undefined && !isSignatureVerifier(verifier))
    throw auditUsage(
      `inlineLineVerifier's verifier must be a SignatureVerifier { verify(signature, message, publicKey) }, not ${shownValue(verifier)}`,
    );
  return {
    concurrency: 1,
    async verifyLines(batch) {
      return batch.map((l) => verifyLineText(l.line, l.text, ctx));
    },
    async close() {},
  };
}
