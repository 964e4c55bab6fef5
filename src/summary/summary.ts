/**
 * The structured handoff summary (v1). A Harness hands `summaryJsonSchema` to the model as its
 * structured-output schema (or as the input schema of the `submit_handoff` tool); the library
 * validates what comes back before anything is stored.
 */
import { isAscii } from 'node:buffer';
import { z } from 'zod';
import { canonicalBytes, canonicalChunks } from '../../manifests/encoding/canonical.js';
import { LedgerError } from '../errors.js';
import { shownValue, StoreError } from '../../store/errors.js';
import { StreamingJsonDecoder } from './decoder.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';
import {
  MAX_TEXT_UNITS,
  NON_BLANK_PATTERN,
  RELATIVE_PATH,
  parseStoredSummary,
  someSummaryString,
  summaryContentProblem,
  summarySchema,
  type Summary,
} from '../../manifests/format/summary.js';

export const DEFAULT_MAX_SUMMARY_BYTES = 1024 * 1024;

/** A byte bound given as an option (`maxSummaryBytes`, `inlineSummaryBytes`): NaN or Infinity would compare as no bound. */
export function checkByteBound(name: string, value: unknown): void {
  if (value !== undefined && (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)) {
    throw new LedgerError('INVALID_ARGUMENT', `${name} must be a non-negative integer, not ${shownValue(value)}`);
  }
}

export { NON_BLANK_PATTERN, RELATIVE_PATH, summarySchema, type Summary };

/** A JSON Schema object node as the schema forms carry it (the index signature lets SDK types accept it). */
export interface JsonSchemaObject {
  type: 'object';
  properties: Record<string, Record<string, unknown>>;
  required: string[];
  additionalProperties: false;
  [keyword: string]: unknown;
}

/**
 * The JSON Schema (draft 2020-12) of a summary, for structured-output APIs and tool definitions. It
 * carries every rule JSON Schema can express (lengths, counts, the path pattern, non-blank task and
 * state); `summarySchemaFor` (src/summary/schema-forms.ts) derives each provider's dialect from it.
 */
export const summaryJsonSchema: JsonSchemaObject = deepFreeze(
  z.toJSONSchema(summarySchema, { target: 'draft-2020-12' }) as JsonSchemaObject,
);

/** Shared schema objects are frozen: one caller's edit must not change what every other caller sends. */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** The rules beyond the schema, shared by publish (validate) and resume (decode) so they cannot drift. */
function checkContent(summary: Summary): void {
  const problem = summaryContentProblem(summary);
  if (problem) throw new LedgerError(problem.code, problem.message);
}

/** What `validateSummary` returns: the summary as validated, and its stored form. */
export interface ValidatedSummary {
  summary: Summary;
  /** The canonical (RFC 8785) UTF-8 bytes that are stored and hashed. */
  bytes: Uint8Array;
}

/**
 * `summarySchema.safeParse` of a value of the caller's: a getter or a proxy that throws while the schema reads it is a
 * summary that cannot be read, thrown as `unreadable(err)` says.
 */
export function readSummaryValue(
  value: unknown,
  unreadable: (err: unknown) => Error,
): ReturnType<typeof summarySchema.safeParse> {
  try {
    return summarySchema.safeParse(value);
  } catch (err) {
    throw unreadable(err);
  }
}

/** Schema, content rules and a first size bound (each UTF-16 code unit takes at least one byte). */
function checkSummary(value: unknown, maxBytes: number): { summary: Summary; atLeast: number } {
  checkByteBound('maxBytes', maxBytes);
  if (value === undefined || value === null || value === '') {
    throw new LedgerError('SUMMARY_EMPTY', 'the summary is empty');
  }
  const parsed = readSummaryValue(
    value,
    (err) =>
      new LedgerError('SUMMARY_INVALID', 'summary: reading it failed (a getter or proxy of it threw: the cause)', {
        cause: err,
      }),
  );
  if (!parsed.success) {
    // Only a text over the whole-text bound is a matter of size; too many items or a line, path or label over
    // its own bound is a summary the schema refuses, as resume and the auditor say of the same bytes.
    const tooLarge = parsed.error.issues.every(
      (i) => i.code === 'too_big' && i.origin === 'string' && Number(i.maximum) === MAX_TEXT_UNITS,
    );
    throw new LedgerError(
      tooLarge ? 'SUMMARY_TOO_LARGE' : 'SUMMARY_INVALID',
      `summary: ${describeZodError(parsed.error, { escaped: true, schema: summarySchema })}`,
    );
  }
  const summary = parsed.data;
  checkContent(summary);
  let atLeast = 0;
  someSummaryString(summary, (s) => {
    atLeast += s.length;
    return false;
  });
  if (atLeast > maxBytes) {
    throw new LedgerError(
      'SUMMARY_TOO_LARGE',
      `the summary is at least ${atLeast} bytes, over the limit of ${maxBytes}`,
    );
  }
  return { summary, atLeast };
}

/**
 * Validates a summary and encodes it canonically (publish step 2).
 * @throws LedgerError `SUMMARY_INVALID` (schema, unknown fields, lone surrogates), `SUMMARY_EMPTY`
 *   (blank task/state and no next steps), `SUMMARY_INCOMPLETE` (flagged incomplete),
 *   `SUMMARY_TOO_LARGE` (canonical bytes over `maxBytes`)
 */
export function validateSummary(value: unknown, maxBytes: number = DEFAULT_MAX_SUMMARY_BYTES): ValidatedSummary {
  const { summary } = checkSummary(value, maxBytes);
  return { summary, bytes: encodeSummary(summary, maxBytes) };
}

function encodeSummary(summary: Summary, maxBytes: number): Uint8Array {
  const bytes = canonicalBytes(summary);
  if (bytes.length > maxBytes) {
    throw new LedgerError('SUMMARY_TOO_LARGE', `the summary is ${bytes.length} bytes, over the limit of ${maxBytes}`);
  }
  return bytes;
}

/** From this much text (UTF-16 code units) on, a summary is encoded while it is written, not before. */
export const STREAM_SUMMARY_FROM = 1024 * 1024;

export interface PreparedSummary {
  summary: Summary;
  /**
   * The canonical bytes, or for a large summary the same bytes as a stream of pieces encoded as the
   * blob store pulls them (each valid until the next is pulled). A stream's size is checked by the
   * blob store against its `maxBytes` (`BLOB_TOO_LARGE`) as it goes.
   */
  source: Uint8Array | AsyncIterable<Uint8Array>;
}

/**
 * Validates a summary and prepares its canonical bytes for the blob store: all at once for a small
 * summary, as a stream for a large one (the encoding overlaps the write, and no second copy of a large
 * summary is held in memory). `wholeUpTo`: a summary that may be at most this many bytes is encoded all at once
 * whatever its size (the ledger's `inlineSummaryBytes`: one stored inline needs its bytes whole).
 * @throws LedgerError as `validateSummary`
 */
export function prepareSummary(
  value: unknown,
  maxBytes: number = DEFAULT_MAX_SUMMARY_BYTES,
  wholeUpTo = 0,
): PreparedSummary {
  const { summary, atLeast } = checkSummary(value, maxBytes);
  if (atLeast < STREAM_SUMMARY_FROM || atLeast <= wholeUpTo)
    return { summary, source: encodeSummary(summary, maxBytes) };
  const pieces = canonicalChunks(summary); // throws here, before any byte is written, on what JCS refuses
  return {
    summary,
    source: (async function* () {
      yield* pieces;
    })(),
  };
}

// A byte order mark is kept, so JSON.parse refuses it as the streamed decoder does: one verdict on the same bytes.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The schema and the content rules on a parsed stored summary. */
function checkStored(value: unknown): Summary {
  const parsed = parseStoredSummary(value);
  if ('problem' in parsed) throw new LedgerError(parsed.problem.code, parsed.problem.message);
  return parsed.summary;
}

/**
 * The text of stored summary bytes, as `decoder.decode(bytes)` makes it (a differential test holds the two together):
 * bytes that are all ASCII (what a summary of plain text encodes to) are copied as Latin-1, which for ASCII is the same
 * text, without the UTF-8 decoder's validation and transcoding; any other bytes go through the fatal decoder (a byte
 * order mark, 0xEF 0xBB 0xBF, is not ASCII, so it is kept there as before). ~3 µs less at 64 KiB (benchmarks/README.md,
 * 2026-12-05, afternoon).
 * @throws TypeError from the decoder for bytes that are not UTF-8
 */
export function summaryText(bytes: Uint8Array): string {
  if (isAscii(bytes)) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  return decoder.decode(bytes);
}

/**
 * Parses stored summary bytes (already digest-verified) back into a summary.
 * @throws LedgerError `SUMMARY_INVALID`; `SUMMARY_EMPTY` or `SUMMARY_INCOMPLETE` when the bytes parse but break
 *   the content rule publish enforces
 */
export function decodeSummary(bytes: Uint8Array): Summary {
  let value: unknown;
  try {
    value = JSON.parse(summaryText(bytes));
  } catch (err) {
    throw new LedgerError('SUMMARY_INVALID', 'stored summary is not UTF-8 JSON', { cause: err });
  }
  return checkStored(value);
}

/**
 * Decodes a stored summary of `size` bytes while its chunks arrive (a large summary on resume; see
 * src/summary/decoder.ts), with `decodeSummary`'s result. The stream's own verdict comes first: when
 * decoding fails, the rest is still read, so a blob that does not match its digest is reported as the
 * store reports it (`BLOB_INTEGRITY`), not as an invalid summary.
 * @param what names the summary in the message of a size mismatch
 * @throws LedgerError `SUMMARY_INVALID` (`SUMMARY_EMPTY`, `SUMMARY_INCOMPLETE` for bytes that break a content
 *   rule); StoreError from the stream; StoreError `BLOB_INTEGRITY` when
 *   the stream holds other than `size` bytes
 */
export async function decodeSummaryStream(
  chunks: AsyncIterable<Uint8Array>,
  size: number,
  what = 'the stored summary',
): Promise<Summary> {
  // Made at the first chunk, once the store has found the blob and checked it against its size limit.
  let decoding: StreamingJsonDecoder | undefined;
  let failure: unknown;
  let total = 0;
  let value: unknown;
  try {
    for await (const chunk of chunks) {
      total += chunk.length;
      if (failure !== undefined) continue;
      try {
        decoding ??= new StreamingJsonDecoder(size, { loneSurrogates: 'replace' });
        decoding.push(chunk);
      } catch (err) {
        failure = err;
      }
    }
    if (total !== size) throw new StoreError('BLOB_INTEGRITY', `${what} is ${total} bytes, the manifest says ${size}`);
    try {
      if (failure !== undefined) throw failure;
      value = (decoding ??= new StreamingJsonDecoder(size, { loneSurrogates: 'replace' })).end();
    } catch (err) {
      throw new LedgerError('SUMMARY_INVALID', 'stored summary is not UTF-8 JSON', { cause: err });
    }
  } finally {
    decoding?.release(); // its arena serves the next decode, also after a failure
  }
  // JSON.parse keeps a lone surrogate escape, and `decodeSummary` judges it after the schema and the other content
  // rules: a U+FFFD in its place gets the same verdicts from those (one UTF-16 unit, not blank), then the same refusal.
  const summary = checkStored(value);
  if (decoding.sawLoneSurrogate)
    throw new LedgerError('SUMMARY_INVALID', 'the summary contains a lone surrogate (not valid UTF-8)');
  return summary;
}

/**
 * From this size on (bytes), resume decodes a stored summary with `decodeSummaryStream` as its chunks are read,
 * not with `decodeSummary` after reading it whole. A JS string over 128 KiB is a large object V8 places in
 * freshly mapped memory, a page fault per 4 KiB page as it is written (more than the copy itself): the
 * whole-buffer path makes two such strings (the text, then JSON.parse's copy of each long string) plus a fresh
 * buffer for the bytes, the streamed one only the summary's strings (benchmarks/README.md). Below it, the whole-buffer
 * path is the faster one.
 */
export const STREAM_DECODE_FROM = 128 * 1024;

/** True where `decodeSummaryStream` can run (it needs WebAssembly SIMD). */
export const canDecodeStream = (): boolean => StreamingJsonDecoder.available();
