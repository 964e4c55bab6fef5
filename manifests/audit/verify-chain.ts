/**
 * The offline auditor (docs/DESIGN.md, "Offline audit"), as a checklist of named steps:
 *
 *   1. verifyLines     strict, bounded line parse                     LINE_* / ENVELOPE_INVALID
 *   2-5.               payload type, trusted key for host and time,   PAYLOAD_TYPE, KEY_*, SIGNATURE_INVALID,
 *                      strict Ed25519 signature, strict schema        MANIFEST_INVALID
 *   6. ChainTracker    per session: duplicates, then scope, forks, order, seq from 0, prev links, time
 *                      (fed each verified line as its outcome arrives)
 *   7. verifyBlobs     digest, size, summary schema (bundles with blobs)
 *   8. verifyBundle    bundle.json's counts against the lines         COUNT_MISMATCH
 *                      its filters against the auditor's scope/expect SCOPE_UNCONFIRMED, SCOPE_UNEXPECTED
 *   9. verifyTree      the signed checkpoint: lines = its leaves (full), inclusion proofs (filtered), --since,
 *                      the witnesses' cosignatures (quorum)
 *  10. verifySessionHeads  completeness: each chain ends at its head proven in the checkpoint's session-heads index
 *
 * Every problem in the input is a finding in the report; only the verifier's own failures throw.
 * Isomorphic: the signature backend and the per-line executor (e.g. worker threads) are injected.
 */
import { FindingSink, type AuditReport, type Finding } from './findings.js';
import { parseBundleHeader, type BundleHeader, type BundleReader } from './bundle.js';
import { isSignatureVerifier, nobleVerifier, type SignatureVerifier } from '../crypto/ed25519.js';
import { byHostThenKeyId, sameKeyRevoked, trustDigest, type TrustStore } from '../format/trust.js';
import { verifyBlobs, type BlobCheckOptions } from './verify-blobs.js';
import { checkpointSigners, openSince, startTreeCheck, verifyTree, type CheckpointSummary } from './verify-tree.js';
import { verifySessionHeads, type CompletenessCoverage } from './verify-heads.js';
import { assertWitnessPolicy, witnessCoverage, type WitnessCoverage, type WitnessPolicy } from './verify-witnesses.js';
import { auditUsage, readAuditOptions } from './errors.js';
import { shownValue, type NamesEveryField } from '../../store/errors.js';
import { counted } from '../encoding/printable.js';
import { ChainTracker, type AuditScope } from './chain-rules.js';
import {
  checkLineTrust,
  inlineLineVerifier,
  splitLineRuns,
  splitLines,
  verifyRawLine,
  type LineOutcome,
  type LineVerifier,
  type RawLine,
} from './verify-line.js';

export type { AuditScope } from './chain-rules.js';

export interface AuditProgress {
  lines: number;
  bytes: number;
  totalBytes?: number | undefined;
}

export interface VerifyChainOptions {
  /** The pinned trust store. Keys inside a bundle are never trusted. */
  trust: TrustStore;
  /** Signature backend (default: the portable noble verifier; Node: manifests/crypto/ed25519.node.ts). */
  verifier?: SignatureVerifier | undefined;
  /** Runs steps 1-5 (default: in this thread). manifests/audit/verify-workers.node.ts spreads them over threads. */
  lineVerifier?: LineVerifier | undefined;
  /** Chains outside this scope are `OUT_OF_SCOPE`. verifyBundle defaults it to the header's filters. */
  scope?: AuditScope | undefined;
  /** Findings kept in the report (default 100,000); counts always count all of them. */
  maxFindings?: number | undefined;
  /** Lines per batch handed to the line verifier (default 1,000). */
  batchSize?: number | undefined;
  onProgress?: ((progress: AuditProgress) => void) | undefined;
}

/**
 * What the auditor expects the bundle to be: the whole log (`full`: every leaf and every session head are held to the
 * checkpoint) or a filtered export (`filtered`: inclusion and session-head proofs). Never the unsigned header's call.
 */
export type BundleExpectation = 'full' | 'filtered';

export interface VerifyBundleOptions extends VerifyChainOptions, BlobCheckOptions {
  /**
   * The auditor's expectation. `full`: the bundle is checked as the whole log whatever its header declares (filters
   * there are `SCOPE_UNEXPECTED`). `filtered`: the header's filters are accepted as its scope (none there is
   * `SCOPE_UNEXPECTED`). Absent: filters only the header declares, the auditor's `scope` not naming them, are
   * `SCOPE_UNCONFIRMED`. Anything else is a `USAGE` error.
   */
  expect?: BundleExpectation | undefined;
  /** The auditor's earlier checkpoint (signed note text): the bundle's checkpoint must extend it (step 9). */
  since?: string | undefined;
  /**
   * Pinned witnesses (C2SP cosignature/v1 keys) and a quorum: the checkpoint counts only with that many
   * valid cosignatures by distinct pinned witnesses (step 9d); unknown cosigners are ignored.
   */
  witnesses?: WitnessPolicy | undefined;
}

/** What a bundle audit checked: the unsigned header may not silently decide it, so the report says. */
export interface AuditCoverage {
  /** Step 7 ran (the bundle carries blobs, or `requireBlobs` made their absence findings). */
  blobs: boolean;
  blobsRequired: boolean;
  /**
   * Step 7 held each blob to the summary schema too (the `checkSummary` option, which the CLI and the page pass:
   * `storedSummaryProblem`); false when no blobs were checked, or no check was given (digests and sizes only).
   */
  summaries: boolean;
  /** The scope chains were held to (step 6, `OUT_OF_SCOPE`); absent when none was declared or asked for. */
  scope?: AuditScope | undefined;
  /** Who declared each part of the scope: the auditor's options, the bundle's unsigned header, or neither. */
  scopeFrom: 'auditor' | 'header' | 'auditor and header' | 'none';
  /** The auditor's expectation (the `expect` option), `none` when not stated. */
  expect: BundleExpectation | 'none';
  /**
   * Which checks steps 9 and 10 ran: the full bundle's (its lines are the checkpoint's leaves, every head recomputed)
   * or the filtered one's (per-line inclusion proofs, session-head proofs). Filtered only when the header declares
   * filters and the auditor did not expect a full bundle; unconfirmed, that is a finding (`SCOPE_UNCONFIRMED`).
   */
  bundle: BundleExpectation;
  /**
   * Step 10: whether each chain was held to its session's head committed in the checkpoint (a missing tail is a
   * finding), and if not, why not.
   */
  completeness: CompletenessCoverage;
  /**
   * Step 9c, when the auditor gave an earlier checkpoint (`since`): its size, and whether the bundle's checkpoint was
   * shown to extend it (no `CONSISTENCY_*` or `CHECKPOINT_*` finding). Absent without `since`.
   */
  since?: { size: number; extended: boolean } | undefined;
  /**
   * The trust store the bundle was verified under (the `trust` option: with several `--trust` files, their merge):
   * its `trustDigest` and how many manifest and checkpoint keys it lists. Which of them signed is `signers`.
   */
  trust: TrustCoverage;
  /**
   * The pinned witnesses the checkpoint was held to (the `witnesses` option: `--witness-keys` and `--quorum`): their
   * `witnessDigest`, how many distinct keys, and the quorum. Absent when none were given (as `since` is).
   */
  witnesses?: WitnessCoverage | undefined;
  /**
   * Who signed what verified: the trusted keys whose signatures verified on the manifests (one count a verified line:
   * they add up to `counts.manifests`) and on the bundle's checkpoint, each sorted by host then key id. Only keys of the
   * trust store appear, each once: the lists are bounded by the store, whatever the bundle names.
   */
  signers: SignerCoverage;
}

/** A trusted key (its trust store entry's host and key id) and how many verified signatures it made. */
export interface SignerCount {
  host: string;
  keyId: string;
  count: number;
}

/** `checked.signers`: the manifest keys and the checkpoint keys whose signatures verified. */
export interface SignerCoverage {
  manifests: SignerCount[];
  /** The bundle's checkpoint's (`checkpoint.signedBy`), by their trust entries; none without a verified checkpoint. */
  checkpoints: SignerCount[];
}

/** The trust a report was checked under: bounded whatever the store's size (up to 10,000 keys of each kind). */
export interface TrustCoverage {
  /** `blake3:` of the canonical JSON of the store, its keys sorted (`trustDigest`). */
  digest: string;
  keys: number;
  checkpointKeys: number;
}

export interface BundleAuditReport extends AuditReport {
  /** The bundle's (unsigned) header, when it has one. */
  header?: BundleHeader | undefined;
  /** The verified checkpoint the bundle was checked against (step 9). */
  checkpoint?: CheckpointSummary | undefined;
  checked: AuditCoverage;
}

/** A batch is also cut by bytes: a thousand padded 64 KiB lines must not sit in memory at once. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** FORK findings get both envelopes as evidence, read back from the bundle; at most this many forks get them. */
const MAX_FORK_EVIDENCE = 1000;

/** Steps 1-5 over every line, in batches, keeping verified entries in file order. */
async function verifyLines(
  runs: AsyncIterable<RawLine[]> | Iterable<RawLine[]>,
  options: VerifyChainOptions,
  sink: FindingSink,
  totalBytes?: number,
): Promise<{ chains: ChainTracker; lines: number; verified: number; signers: SignerTally }> {
  const ctx = { trust: options.trust, verifier: options.verifier ?? nobleVerifier };
  const executor = options.lineVerifier ?? inlineLineVerifier(ctx);
  const batchSize = options.batchSize ?? 1000;
  // Step 6 starts as outcomes arrive, while later batches are being verified. Duplicates are findings at once and
  // are not kept: a bundle of one valid line repeated costs no memory per line.
  const chains = new ChainTracker(sink);
  // A batch holds the lines for the line verifier and, in their places among them, the findings decided without it
  // (`decided[k]` goes before the batch's k-th outcome). Every finding of steps 1-5 reaches the sink in file order,
  // whatever the verifier's concurrency: the sink keeps the first `maxFindings`, so the report's list must not depend
  // on how many batches were in flight when a line was decided (worker threads, WebCrypto, the page's pool).
  type Decided = { at: number; finding: Finding };
  // `sent`: the lines given to the line verifier; `count`: all the batch's lines, those decided here included.
  type Batch = { done: Promise<LineOutcome[]>; sent: number; decided: Decided[]; bytes: number; count: number };
  const inflight: Batch[] = [];
  let batch: Array<{ line: number; text: string }> = [];
  let decided: Decided[] = [];
  let batchBytes = 0;
  let lines = 0;
  let bytes = 0;
  let lastLine = 0;

  let verified = 0;
  const signers = new SignerTally();
  const take = (outcome: LineOutcome): void => {
    if (!outcome.ok) return sink.add(outcome.finding);
    verified++;
    // The tally's copy of the key id is kept in the entry: one string a key, not one a manifest.
    outcome.entry.keyId = signers.add(outcome.entry);
    chains.add(outcome.entry);
  };
  const decide = (finding: Finding): void => void decided.push({ at: batch.length, finding });
  const settleOldest = async (): Promise<void> => {
    const b = inflight.shift()!;
    const outcomes: unknown = await b.done;
    // One outcome a line, in their order: a caller's line verifier that answers otherwise would have its outcomes
    // given to other lines (findings named at the wrong line, entries left out or made up), or a TypeError.
    if (!Array.isArray(outcomes) || outcomes.length !== b.sent)
      throw auditUsage(
        `the lineVerifier's verifyLines must give one outcome a line, in their order: it gave ${
          Array.isArray(outcomes) ? `${outcomes.length} for a batch of ${b.sent}` : shownValue(outcomes)
        }`,
      );
    let d = 0;
    for (let k = 0; k <= outcomes.length; k++) {
      while (d < b.decided.length && b.decided[d]!.at === k) sink.add(b.decided[d++]!.finding);
      if (k < outcomes.length) take(outcomes[k] as LineOutcome);
    }
    lines += b.count;
    bytes += b.bytes;
    options.onProgress?.({ lines, bytes, totalBytes });
  };
  const dispatch = async (): Promise<void> => {
    if (batch.length === 0 && decided.length === 0) return;
    // Lines all decided here (a run of empty lines) are no work for the line verifier.
    const done = batch.length > 0 ? executor.verifyLines(batch) : Promise.resolve([]);
    done.catch(() => {}); // awaited in order below; this only keeps an early rejection from being "unhandled"
    inflight.push({ done, sent: batch.length, decided, bytes: batchBytes, count: batch.length + decided.length });
    batch = [];
    decided = [];
    batchBytes = 0;
    while (inflight.length > executor.concurrency) await settleOldest();
  };

  try {
    // Runs of lines, each looped over synchronously: one async step a run, not one a line.
    for await (const run of runs) {
      for (const raw of run) {
        lastLine = raw.line;
        if (!raw.terminated) {
          // A cut-off final line: reported as such; kept only if what is there still verifies completely. What it
          // holds is reported too (a bad signature, an untrusted key), unless it is not JSON: that is the cut's doing.
          const outcome = verifyRawLine(raw, ctx);
          decide({
            code: 'LINE_TRUNCATED',
            line: raw.line,
            message: `last line (${raw.bytes} bytes) has no terminating newline`,
          });
          if (outcome.ok) batch.push({ line: raw.line, text: raw.text! });
          else if (outcome.finding.code !== 'LINE_NOT_JSON') decide(outcome.finding);
          batchBytes += raw.bytes;
        } else if (raw.text === undefined || raw.text.length === 0) {
          // Findings decided without the line verifier (over-long, not UTF-8, empty): never sent to a thread.
          decide((verifyRawLine(raw, ctx) as Extract<LineOutcome, { ok: false }>).finding);
          batchBytes += raw.bytes;
        } else {
          batch.push({ line: raw.line, text: raw.text });
          batchBytes += raw.bytes;
        }
        if (batch.length + decided.length >= batchSize || batchBytes >= MAX_BATCH_BYTES) await dispatch();
      }
    }
    await dispatch();
    while (inflight.length > 0) await settleOldest();
  } finally {
    if (!options.lineVerifier) await executor.close();
  }
  return { chains, lines: lastLine, verified, signers };
}

/**
 * Verified signatures per trusted key (host, key id). Only a line that verified is counted, and it verified only under
 * a key its host lists in the trust store: at most one tally per entry of the store, whatever keys a bundle names.
 */
class SignerTally {
  private readonly byHost = new Map<string, Map<string, SignerCount>>();

  /** Counts one signature by the key; returns its key id as the tally keeps it. */
  add(entry: { host: string; keyId: string }): string {
    let byKey = this.byHost.get(entry.host);
    if (!byKey) this.byHost.set(entry.host, (byKey = new Map()));
    const known = byKey.get(entry.keyId);
    if (known) {
      known.count++;
      return known.keyId;
    }
    byKey.set(entry.keyId, { host: entry.host, keyId: entry.keyId, count: 1 });
    return entry.keyId;
  }

  /** The tallies, by host then key id. */
  list(): SignerCount[] {
    return [...this.byHost.values()]
      .flatMap((byKey) => [...byKey.values()].map((c) => ({ ...c })))
      .sort(byHostThenKeyId);
  }
}

function report(
  sink: FindingSink,
  lines: number,
  verified: number,
  chains: AuditReport['chains'],
  blobsChecked: number,
): AuditReport {
  // Line-ordered; bundle-level findings (no line) last.
  const findings = [...sink.findings].sort((a: Finding, b: Finding) => (a.line ?? Infinity) - (b.line ?? Infinity));
  return {
    ok: sink.total === 0,
    findings,
    chains,
    counts: {
      lines,
      manifests: verified,
      chains: chains.length,
      findings: sink.total,
      byCode: sink.counts(),
      blobsChecked,
    },
    findingsTruncated: sink.truncated,
  };
}

const CHAIN_FIELDS = [
  'trust',
  'verifier',
  'lineVerifier',
  'scope',
  'maxFindings',
  'batchSize',
  'onProgress',
] as const satisfies ReadonlyArray<keyof VerifyChainOptions>;
const everyChainField: NamesEveryField<VerifyChainOptions, typeof CHAIN_FIELDS> = true;
void everyChainField;
/** The option names `verifyBundle` knows (`auditBundle` adds its `telemetry`). */
export const BUNDLE_FIELDS = [
  ...CHAIN_FIELDS,
  'hash',
  'checkSummary',
  'requireBlobs',
  'expect',
  'since',
  'witnesses',
] as const satisfies ReadonlyArray<keyof VerifyBundleOptions>;
const everyBundleField: NamesEveryField<VerifyBundleOptions, typeof BUNDLE_FIELDS> = true;
void everyBundleField;

/**
 * The options both audits share, as their types say, before any line is read: each is `USAGE` naming it. A verifier
 * without `verify` failed every signature check, so that each valid manifest was reported `MANIFEST_INVALID` (a
 * caller's slip read as a tampered bundle); a line verifier without `verifyLines`, or an `onProgress` that is no
 * function, was a TypeError; a scope that is no object was no scope at all, and a `maxFindings` or `batchSize` that
 * is no count was taken as one.
 */
function checkChainOptions(options: VerifyChainOptions, what: string): void {
  const refuse = (name: string, wanted: string, value: unknown) =>
    auditUsage(`${what}'s ${name} must be ${wanted}, not ${shownValue(value)}`);
  const { verifier, lineVerifier, scope, maxFindings, batchSize, onProgress } = options as Partial<
    Record<keyof VerifyChainOptions, unknown>
  >;
  if (verifier !== undefined && !isSignatureVerifier(verifier))
    throw refuse('verifier', 'a SignatureVerifier { verify(signature, message, publicKey) }', verifier);
  if (lineVerifier !== undefined) {
    const v = lineVerifier as Partial<LineVerifier> | null;
    if (
      typeof v?.verifyLines !== 'function' ||
      typeof v.close !== 'function' ||
      !Number.isSafeInteger(v.concurrency) ||
      (v.concurrency as number) < 1
    )
      throw refuse('lineVerifier', 'a LineVerifier { concurrency, verifyLines(batch), close() }', lineVerifier);
  }
  if (scope !== undefined) {
    const sc = scope as Partial<Record<keyof AuditScope, unknown>> | null;
    if (
      typeof sc !== 'object' ||
      sc === null ||
      (sc.session !== undefined && typeof sc.session !== 'string') ||
      (sc.principal !== undefined && typeof sc.principal !== 'string')
    )
      throw refuse('scope', '{ session?, principal? } of ids', scope);
  }
  if (maxFindings !== undefined && (!Number.isSafeInteger(maxFindings) || (maxFindings as number) < 0))
    throw refuse('maxFindings', 'a whole number from 0', maxFindings);
  if (batchSize !== undefined && (!Number.isSafeInteger(batchSize) || (batchSize as number) < 1))
    throw refuse('batchSize', 'a whole number from 1', batchSize);
  if (onProgress !== undefined && typeof onProgress !== 'function')
    throw refuse('onProgress', 'a function', onProgress);
}

const isSyncIterable = (lines: Iterable<string> | AsyncIterable<string>): lines is Iterable<string> =>
  typeof (lines as Iterable<string>)[Symbol.iterator] === 'function';

/** Lines as runs of raw lines; an array's (or any synchronous iterable's) are cut without an async step. */
function runsOf(lines: Iterable<string> | AsyncIterable<string>): AsyncIterable<RawLine[]> | Iterable<RawLine[]> {
  const RUN = 1024;
  // A line that is no string is the caller's mistake, refused by name: never converted (String() of an object whose
  // toString throws threw its TypeError, and an object's text is no line of any bundle).
  const raw = (line: number, text: unknown): RawLine => {
    if (typeof text !== 'string')
      throw auditUsage(`verifyChain takes the envelope lines as strings: line ${line} is ${shownValue(text)}`);
    return { line, text, terminated: true, bytes: text.length + 1 };
  };
  if (isSyncIterable(lines)) {
    const sync = lines;
    return (function* () {
      let run: RawLine[] = [];
      let line = 0;
      for (const text of sync) {
        run.push(raw(++line, text));
        if (run.length === RUN) {
          yield run;
          run = [];
        }
      }
      if (run.length > 0) yield run;
    })();
  }
  return (async function* () {
    let line = 0;
    for await (const text of lines) yield [raw(++line, text)];
  })();
}

/**
 * Verifies envelope lines (e.g. a ManifestLog's `entries()` mapped to `envelope`) through steps 1-6.
 * Line numbers are 1-based positions in `lines`.
 * @throws AuditError `USAGE` for lines that are not an iterable of strings (a whole file's text is one string; a line
 *   that is no string, when the iteration reaches it) or options without a trust store; `WORKER_FAILED` when an injected line verifier fails (never for bad input)
 */
export async function verifyChain(
  lines: Iterable<string> | AsyncIterable<string>,
  options: VerifyChainOptions,
): Promise<AuditReport> {
  // A string is an Iterable<string> to the type checker: the text of a manifests.jsonl passed whole would be walked one
  // character at a time (verifyBundle takes a file's text, through memoryBundleReader).
  if (
    typeof lines !== 'object' ||
    lines === null ||
    (!isSyncIterable(lines) && typeof (lines as AsyncIterable<string>)[Symbol.asyncIterator] !== 'function')
  )
    throw auditUsage(
      `verifyChain takes the envelope lines as an iterable of strings (an array, an async iterable), not ${
        typeof lines === 'string'
          ? 'one string (split it into lines, or give its text to verifyBundle through memoryBundleReader)'
          : lines === null
            ? 'null'
            : typeof lines
      }`,
    );
  options = readAuditOptions<VerifyChainOptions>(options, CHAIN_FIELDS, 'verifyChain');
  checkChainOptions(options, 'verifyChain');
  // verifyBundle takes its trust's digest first (trustCoverage); verifyChain only looked at it being an object.
  checkLineTrust(options.trust, 'verifyChain');
  // A store taken alone follows a merge's rule: a public key revoked in one listing is revoked in every listing of it.
  options = { ...options, trust: sameKeyRevoked(options.trust) };
  const sink = new FindingSink(options.maxFindings ?? 100_000);
  const { chains: tracker, lines: count, verified } = await verifyLines(runsOf(lines), options, sink);
  return report(sink, count, verified, tracker.finish(options.scope), 0);
}

export function scopeOf(header: BundleHeader | undefined): AuditScope | undefined {
  const f = header?.filters;
  return f && (f.session !== undefined || f.principal !== undefined) ? f : undefined;
}

/** The auditor's scope, completed (never replaced) by the header's: the header can add constraints, not drop them. */
export function auditScope(
  asked: AuditScope | undefined,
  header: BundleHeader | undefined,
): Pick<AuditCoverage, 'scope' | 'scopeFrom'> {
  const declared = scopeOf(header);
  const mine = asked && (asked.session !== undefined || asked.principal !== undefined) ? asked : undefined;
  if (!mine && !declared) return { scopeFrom: 'none' };
  if (!mine) return { scope: declared, scopeFrom: 'header' };
  const scope: AuditScope = { ...declared, ...stripUndefined(mine) };
  const headerAdds =
    declared !== undefined &&
    ((declared.session !== undefined && mine.session === undefined) ||
      (declared.principal !== undefined && mine.principal === undefined));
  return { scope, scopeFrom: headerAdds ? 'auditor and header' : 'auditor' };
}

const describeScope = (scope: AuditScope): string =>
  Object.entries(stripUndefined(scope))
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

/**
 * Step 8, the header's filters against the auditor's expectation and scope: the unsigned header alone must not switch
 * the full bundle's checks for the filtered ones (which a full bundle with whole chains left out, its proofs derived
 * from itself, passes). Filters only the header declares count once the auditor confirmed them, by naming them
 * (`scope`) or by expecting a filtered bundle.
 */
function checkDeclaredScope(
  header: BundleHeader | undefined,
  asked: AuditScope | undefined,
  expect: BundleExpectation | undefined,
  sink: FindingSink,
): void {
  const declared = scopeOf(header);
  if (expect === 'full' && declared)
    sink.add({
      code: 'SCOPE_UNEXPECTED',
      message: `expected a full bundle (--expect full), but bundle.json declares filters (${describeScope(declared)}): it is not the whole log; checked as a full bundle`,
      evidence: { expected: 'full', actual: 'filtered' },
    });
  else if (expect === 'filtered' && !declared)
    sink.add({
      code: 'SCOPE_UNEXPECTED',
      message: `expected a filtered bundle (--expect filtered), but ${header ? 'bundle.json declares no filters' : 'the bundle has no bundle.json'}: checked as a full bundle`,
      evidence: { expected: 'filtered', actual: 'full' },
    });
  else if (expect === undefined && declared) {
    const unnamed: AuditScope = {
      ...(declared.session !== undefined && asked?.session === undefined ? { session: declared.session } : {}),
      ...(declared.principal !== undefined && asked?.principal === undefined ? { principal: declared.principal } : {}),
    };
    if (unnamed.session === undefined && unnamed.principal === undefined) return;
    const flags = Object.entries(unnamed)
      .map(([k, v]) => `--${k} ${v}`)
      .join(' ');
    sink.add({
      code: 'SCOPE_UNCONFIRMED',
      message: `bundle.json declares ${describeScope(unnamed)}, which the auditor did not ask for: the unsigned header alone does not make this a filtered bundle (a full one with whole chains left out would pass its checks). If that is the scope you asked for, name it (${flags}) or expect a filtered bundle (--expect filtered)`,
    });
  }
}

/**
 * The session whose head completeness must prove though the bundle may hold none of it. Not when a principal
 * narrows the scope (the bundle may then rightly hold nothing of an existing session, and the index, keyed by
 * session, cannot tell); but only the auditor's own `principal` waives the auditor's own `session`: the header is
 * unsigned, and a principal it names must not switch off a check the auditor asked for.
 */
function askedSession(asked: AuditScope | undefined, merged: AuditScope | undefined): string | undefined {
  if (asked?.session !== undefined) return asked.principal === undefined ? asked.session : undefined;
  return merged?.session !== undefined && merged.principal === undefined ? merged.session : undefined;
}

function stripUndefined(scope: AuditScope): AuditScope {
  return {
    ...(scope.session !== undefined ? { session: scope.session } : {}),
    ...(scope.principal !== undefined ? { principal: scope.principal } : {}),
  };
}

/** Reads back the exact envelope texts of the lines a FORK finding names (the first passes keep no line text). */
async function attachForkEnvelopes(reader: BundleReader, findings: Finding[]): Promise<void> {
  const forks = findings.filter((f) => f.code === 'FORK' && f.evidence?.lines).slice(0, MAX_FORK_EVIDENCE);
  if (forks.length === 0) return;
  const wanted = new Map<number, string>();
  for (const f of forks) for (const l of f.evidence!.lines!) wanted.set(l, '');
  let left = wanted.size;
  for await (const raw of splitLines(reader.manifests())) {
    if (!wanted.has(raw.line)) continue;
    wanted.set(raw.line, raw.text ?? '');
    if (--left === 0) break;
  }
  for (const f of forks) f.evidence!.envelopes = f.evidence!.lines!.map((l) => wanted.get(l) ?? '');
}

/**
 * The store a bundle is verified under: the caller's, with `mergeTrust`'s rule for a store taken alone (every listing of
 * a public key revoked from the earliest revocation any listing of it carries: `sameKeyRevoked`).
 * @throws AuditError `USAGE` for a trust that is no store
 */
function verifiedTrust(trust: TrustStore): TrustStore {
  try {
    return sameKeyRevoked(trust);
  } catch (err) {
    throw auditUsage("verifyBundle's trust is not a trust store (read one with parseTrustStore)", { cause: err });
  }
}

/** The report's `checked.trust`, taken before any work. @throws AuditError `USAGE` for a trust that is no store */
function trustCoverage(trust: TrustStore): TrustCoverage {
  try {
    return {
      digest: trustDigest(trust),
      keys: trust.keys.length,
      checkpointKeys: trust.checkpointKeys?.length ?? 0,
    };
  } catch (err) {
    throw auditUsage("verifyBundle's trust is not a trust store (read one with parseTrustStore)", { cause: err });
  }
}

/**
 * Why `reader` is no `BundleReader`, as a suffix of the USAGE message, or `undefined` when it is one: an object whose
 * `header` and `manifests` are functions, and `manifestsSize`, `readBlob` and `treeFile` functions or absent. An object
 * without them failed later as a TypeError ("reader.header is not a function"), a member that throws as it is read
 * as that member's error.
 */
function readerProblem(reader: unknown): string | undefined {
  if (typeof reader !== 'object' || reader === null) return '';
  for (const name of ['header', 'manifests', 'manifestsSize', 'readBlob', 'treeFile'] as const) {
    let member: unknown;
    try {
      member = (reader as Record<string, unknown>)[name];
    } catch {
      return `: reading its ${name} failed`;
    }
    const optional = name !== 'header' && name !== 'manifests';
    if (typeof member !== 'function' && !(optional && member === undefined))
      return `: its ${name} is ${shownValue(member)}, not a function${optional ? ' (or absent)' : ''}`;
  }
  return undefined;
}

/**
 * Verifies a bundle through every step: header, lines (1-5), chains (6), blobs (7), counts (8), checkpoint (9),
 * completeness (10).
 * @throws AuditError `BUNDLE_INVALID` (no parseable header where the reader has one), `BUNDLE_IO`
 *   (from the reader), `WORKER_FAILED`; `USAGE` for no reader (or an object without its `header` and `manifests`
 *   methods, or with an optional one that is no function), options without a trust store or a witness policy
 *   that cannot be met, or a `since` that does not verify under the pinned checkpoint keys (`since: the earlier
 *   checkpoint does not verify: …`, before any of the bundle is read)
 */
export async function verifyBundle(reader: BundleReader, options: VerifyBundleOptions): Promise<BundleAuditReport> {
  return verifyBundleAs(reader, options, { since: 'since' });
}

/** The names a refusal gives an option: the library's (`since`) or the command line's and the page's (`--since`). */
export interface AuditOptionNames {
  since: string;
}

/**
 * `verifyBundle`, its refusals naming the options as `names` says: the command line and the auditor's page call it
 * with their `--since`. Not exported from the package: the library's callers gave `since`.
 */
export async function verifyBundleAs(
  reader: BundleReader,
  options: VerifyBundleOptions,
  names: AuditOptionNames,
): Promise<BundleAuditReport> {
  const notReader = readerProblem(reader);
  if (notReader !== undefined)
    throw auditUsage(`verifyBundle takes a bundle reader (bundleDirReader, memoryBundleReader)${notReader}`);
  options = readAuditOptions<VerifyBundleOptions>(options, BUNDLE_FIELDS, 'verifyBundle');
  checkChainOptions(options, 'verifyBundle');
  if (options.expect !== undefined && options.expect !== 'full' && options.expect !== 'filtered')
    throw auditUsage(`verifyBundle's expect must be 'full' or 'filtered', not ${shownValue(options.expect)}`);
  if (options.witnesses) {
    try {
      assertWitnessPolicy(options.witnesses);
    } catch (err) {
      throw auditUsage((err as Error).message, { cause: err });
    }
  }
  options = { ...options, trust: verifiedTrust(options.trust) };
  const trust = trustCoverage(options.trust);
  let witnesses: WitnessCoverage | undefined;
  try {
    witnesses = options.witnesses ? witnessCoverage(options.witnesses) : undefined;
  } catch (err) {
    throw auditUsage((err as Error).message, { cause: err });
  }
  const since = options.since === undefined ? undefined : openSince(options.since, options, names.since);
  const headerText = await reader.header();
  const header = headerText === undefined ? undefined : parseBundleHeader(headerText);
  const sink = new FindingSink(options.maxFindings ?? 100_000);
  const totalBytes = await reader.manifestsSize?.();
  // Step 9 is a filtered bundle's (inclusion proofs) or a full one's (the root). The header's filters choose the
  // filtered checks unless the auditor expects a full bundle; filters the auditor did not confirm are a finding (step 8).
  const filtered = scopeOf(header) !== undefined && options.expect !== 'full';
  // The checkpoint is read and opened once; leaves are hashed only when it verifies, to hold them against it.
  const tree = await startTreeCheck(reader, filtered, options, since);
  const runs = tree.leaves ? tree.leaves.tap(splitLineRuns(reader.manifests())) : splitLineRuns(reader.manifests());
  const { chains: tracker, lines, verified, signers } = await verifyLines(runs, options, sink, totalBytes);
  // Expecting the whole log, the auditor takes no scope from the header.
  const coverage = auditScope(options.scope, options.expect === 'full' ? undefined : header);
  const chains = tracker.finish(coverage.scope);
  await attachForkEnvelopes(reader, sink.findings);
  const { checked: blobsChecked, present: blobsHeld } = await verifyBlobs(tracker.entries, reader, options, sink);
  // Step 8: the header is unsigned, so this only catches accidental truncation (see docs/AUDIT.md, Limitations).
  if (header && header.counts.manifests !== lines) {
    sink.add({
      code: 'COUNT_MISMATCH',
      message: `bundle.json counts ${counted(header.counts.manifests, 'manifest')}; manifests.jsonl has ${counted(lines, 'line')}`,
      evidence: { expected: header.counts.manifests, actual: lines },
    });
  }
  // Its chains and blobs, as the verified manifests hold them: a line that fails steps 1-5 names no chain or blob the
  // auditor can trust, so with one the bundle may rightly hold fewer than counted, never more.
  if (header) {
    const whole = verified === lines;
    const held = { chains: tracker.heads().length, blobs: blobsHeld };
    for (const what of ['chains', 'blobs'] as const) {
      if (what === 'blobs' && !reader.readBlob) continue;
      // `counts.blobs` is present iff the bundle carries blobs: a header without it, of a bundle that does, counts none.
      const uncounted = header.counts[what] === undefined;
      const said = header.counts[what] ?? 0;
      if (held[what] > said || (whole && held[what] !== said))
        sink.add({
          code: 'COUNT_MISMATCH',
          message:
            what === 'chains'
              ? `bundle.json counts ${counted(said, 'chain')}; its manifests hold ${counted(held.chains, 'chain')}`
              : `bundle.json counts ${uncounted ? 'no blobs (it has no counts.blobs)' : counted(said, 'blob')}; its manifests name ${counted(held.blobs, 'blob')} the bundle holds`,
          evidence: { expected: said, actual: held[what] },
        });
    }
  }
  checkDeclaredScope(header, options.scope, options.expect, sink);
  // Step 9: a filtered bundle holds some leaves, so it is checked by inclusion proofs instead of the root.
  const checkpoint = await verifyTree(reader, tree, filtered, options, sink);
  // Step 10: completeness. A bundle filtered by the auditor alone still proves (or not) the asked-for session.
  const completeness: CompletenessCoverage = checkpoint
    ? await verifySessionHeads(
        reader,
        checkpoint.extensions,
        // A full bundle's root covers every chain, also those outside the auditor's own scope.
        filtered ? chains : tracker.heads(),
        filtered,
        askedSession(options.scope, coverage.scope),
        sink,
        filtered ? tracker.heads() : undefined,
      )
    : { checked: false, reason: 'no verified checkpoint' };
  const blobs = reader.readBlob !== undefined || options.requireBlobs === true;
  const checked: AuditCoverage = {
    blobs,
    blobsRequired: options.requireBlobs === true,
    summaries: blobs && options.checkSummary !== undefined,
    ...coverage,
    expect: options.expect ?? 'none',
    bundle: filtered ? 'filtered' : 'full',
    completeness,
    trust,
    ...(witnesses ? { witnesses } : {}),
    signers: {
      manifests: signers.list(),
      checkpoints: checkpoint && tree.opened?.ok ? checkpointSigners(tree.opened.note, options.trust) : [],
    },
  };
  // An earlier checkpoint that does not verify was refused (USAGE) before the bundle was read: one given here opened.
  if (tree.since) {
    const counts = sink.counts() as Record<string, number | undefined>;
    const failed = Object.keys(counts).some(
      (c) => (counts[c] ?? 0) > 0 && (c.startsWith('CONSISTENCY_') || c.startsWith('CHECKPOINT_')),
    );
    checked.since = { size: tree.since.checkpoint.size, extended: !failed };
  }
  const result: BundleAuditReport = { ...report(sink, lines, verified, chains, blobsChecked), checked };
  if (header) result.header = header;
  if (checkpoint) result.checkpoint = checkpoint;
  return result;
}
