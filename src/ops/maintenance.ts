/**
 * Store maintenance: `fsck` (the store holds nothing resume or the auditor would refuse, and the Merkle tree
 * is the tree of the entries) and `gc` (removes blobs no manifest references, older than a grace period).
 */
import type { Digest } from '../../store/hash/digest.js';
import {
  checkBooleanOption,
  quoted,
  isHandoffLedgerError,
  namedCancel,
  readOptionFields,
  StoreError,
  typeWithArticle,
} from '../../store/errors.js';
import { ChainChecker, type ManifestRuleCode } from '../../manifests/chain/checker.js';
import type { Manifest } from '../../manifests/format/manifest.js';
import type { FindingCode } from '../../manifests/audit/findings.js';
import { checkSignal, LedgerError, throwIfCancelled } from '../errors.js';
import { ManifestError } from '../../manifests/errors.js';
import type { ChainHead, LogEntry, ManifestLog } from '../../manifests/log/log.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import type { Ledger } from '../ledger/ledger.js';
import { decodeSummary } from '../summary/summary.js';
import { summaryDigestAndIdOf } from './export.js';
import { counted } from '../../manifests/encoding/printable.js';
import { isValidId } from '../../manifests/format/id-pattern.js';

/**
 * What fsck reports. Where a problem means what an auditor's finding means, it has the auditor's code
 * (docs/AUDIT.md); the rest are problems only a store can have, documented there under "fsck".
 */
export const FSCK_STORE_CODES = {
  SCOPE_MISMATCH: 'an entry is stored under another session than its signed manifest names',
  SEQ_MISMATCH: 'an entry is stored under another seq than its signed manifest names',
  PRINCIPAL_MISMATCH: 'the principal stored with an entry is not the one its manifest is signed for',
  ID_MISMATCH: 'the id stored with an entry is not the hash of its payload',
  HEAD_MISMATCH: 'a head names no stored entry with its id',
  ROLLBACK: "a chain was cut back: its head is below the session's watermark, or entries lie beyond the head",
  POSITION_GAP: 'the global log positions are not 0, 1, 2, …',
  BLOB_UNREADABLE: 'a summary blob could not be read (unsafe path, storage failure)',
  TREE_DAMAGED: 'a stored Merkle tree node cannot be read',
  TREE_NODE_MISMATCH: 'a stored Merkle tree node is not the hash of the entries it covers',
  TREE_SIZE: 'the stored tree has another number of leaves than the log has entries',
  TREE_ROOT: 'the stored tree root is not the root of the entries',
  SESSION_HEADS_ROOT: "the stored session-heads index (or its committed root) is not the index of the chains' heads",
  OWNER_MISMATCH: "a chain's owner record names another principal than the one its seq 0 is signed for",
  KEY_SIGNED_AFTER_CLOSE:
    "a signing key's log record has its newest signed createdAt at or after the window end it records",
  KEY_WINDOW_MISMATCH:
    "a signing key's window closed in the log is not where trust.json ends it (notAfter, or revokedAt if earlier)",
  KEY_RECORD_BEHIND: "a key signed a stored manifest newer than its log record's newest signed createdAt",
  ID_POSITION_MISMATCH:
    "a manifest id's position record (what an inclusion proof by id reads) is missing, names another position than the manifest's, or names an id the log does not hold",
  RECORD_CORRUPT:
    'a stored log record (entry, head, grant, inline blob, signing key, …) cannot be parsed; the rest is still checked',
  PIN_MISMATCH:
    "the log's tree does not extend the checkpoint this root pinned (the ledger's ROLLBACK or FORK, named in the message)",
} as const;

export type FsckStoreCode = keyof typeof FSCK_STORE_CODES;

/** The auditor's codes that fsck reports with the same meaning. */
export type FsckAuditCode = Extract<
  FindingCode,
  | ManifestRuleCode
  | 'SEQ_NOT_ZERO'
  | 'SEQ_GAP'
  | 'PREV_MISMATCH'
  | 'TIME_REVERSED'
  | 'BLOB_MISSING'
  | 'BLOB_SIZE'
  | 'BLOB_DIGEST'
  | 'SUMMARY_INVALID'
>;

export type FsckFindingCode = FsckAuditCode | FsckStoreCode;
import { fsckTree } from './fsck-tree.js';
import { fsckIdPositions, LeafIds } from './fsck-ids.js';
import { fsckSessionHeads, type ChainHeads } from './fsck-heads.js';
import { fsckBlobTimes, fsckInlineBlobs } from './fsck-inline.js';
import { TieredBlobStore } from '../ledger/blob-tiers.js';
import { storedOriginDamage } from '../ledger/checkpoints.js';
import { fsckSigningKeys } from './fsck-keys.js';

export interface FsckFinding {
  code: FsckFindingCode;
  session?: string | undefined;
  seq?: number | undefined;
  message: string;
}

export interface FsckReport {
  ok: boolean;
  chains: number;
  manifests: number;
  blobsChecked: number;
  findings: FsckFinding[];
  /** What fsck cannot check, because nothing signs it (printed with every report, clean or not). */
  notVerified: string;
}

/**
 * Grants are records of the log only: no signature covers them, so a writer of the database can grant a principal
 * another's session undetectably. A session's owner is checked (the principal of its signed seq 0).
 */
export const FSCK_NOT_VERIFIED =
  'grant and revocation records (unsigned: anyone who can write the database can change who may read a session)';

/** A corrupt stored record (`RECORD_CORRUPT`) becomes a finding, and fsck goes on with what it can still read. */
function recordProblem(err: unknown, findings: FsckFinding[], session?: string): void {
  if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
  findings.push({ code: err.code, ...(session !== undefined ? { session } : {}), message: err.message });
}

/**
 * A record that several walks stop at (the head check's, the heads', the entries', a session's lookup, the tree's, the
 * session-heads index's) is reported once, where it was first met: its message names the record, and the one finding
 * carries a session once any walk knew it.
 */
function oneFindingPerRecord(findings: FsckFinding[]): FsckFinding[] {
  const first = new Map<string, number>();
  const kept: FsckFinding[] = [];
  for (const f of findings) {
    if (f.code !== 'RECORD_CORRUPT') {
      kept.push(f);
      continue;
    }
    const at = first.get(f.message);
    if (at === undefined) {
      first.set(f.message, kept.length);
      kept.push(f);
    } else if (kept[at]!.session === undefined && f.session !== undefined) {
      kept[at] = { code: f.code, session: f.session, message: f.message };
    }
  }
  return kept;
}

/** The blob a manifest names: present, its size, its digest (re-hashed by the store), a valid summary. */
async function checkBlob(
  ledger: Ledger,
  ref: Manifest['summary'],
): Promise<{ code: FsckFindingCode; message: string } | undefined> {
  let bytes: Uint8Array;
  try {
    // The inline copy itself where the log holds one: a read of a damaged one falls back to an intact file copy.
    const options = { maxBytes: Math.max(ref.size, 1) };
    bytes =
      ledger.blobs instanceof TieredBlobStore
        ? await ledger.blobs.getWithoutFallback(ref.digest, options)
        : await ledger.blobs.get(ref.digest, options);
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    const code = (
      { BLOB_NOT_FOUND: 'BLOB_MISSING', BLOB_INTEGRITY: 'BLOB_DIGEST', BLOB_TOO_LARGE: 'BLOB_SIZE' } as const
    )[err.code as 'BLOB_NOT_FOUND' | 'BLOB_INTEGRITY' | 'BLOB_TOO_LARGE'];
    return { code: code ?? 'BLOB_UNREADABLE', message: err.message };
  }
  if (bytes.length !== ref.size)
    return { code: 'BLOB_SIZE', message: `blob is ${bytes.length} bytes, manifest says ${ref.size}` };
  try {
    decodeSummary(bytes);
  } catch (err) {
    if (!(err instanceof LedgerError)) throw err;
    return { code: 'SUMMARY_INVALID', message: err.message };
  }
  return undefined;
}

/** Options of `fsck`. */
export interface FsckOptions {
  /** Aborts the check (`CANCELLED`). */
  signal?: AbortSignal | undefined;
  /** Read and check the blobs (default true); false skips them. */
  checkBlobs?: boolean | undefined;
}

/**
 * The ledger a maintenance call is given: a `Ledger` (openLedger), else `INVALID_ARGUMENT` (not a TypeError of its
 * first use), before anything is read.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function checkLedger(ledger: unknown, what: string): void {
  if (typeof ledger !== 'object' || ledger === null || typeof (ledger as Partial<Ledger>).maintenance !== 'function')
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `${what} needs a Ledger (from openLedger), not ${typeWithArticle(ledger)}`,
    );
}

/**
 * Checks the whole store with the rules resume and the auditor apply: the log's head check, every
 * chain through the shared chain checker, every referenced blob, the global positions. Changes nothing. A chain
 * whose records are corrupt is reported (`RECORD_CORRUPT`) and the other chains are still checked.
 * @throws LedgerError `CANCELLED` (the signal aborted), `INVALID_ARGUMENT` (no Ledger, options that are not an object
 *   or null, a signal that is none, or an options field that throws as it is read), `CLOSED`;
 *   a storage failure of the log as it is (ManifestError `STORAGE_FAILED`)
 */
export async function fsck(ledger: Ledger, given: FsckOptions = {}): Promise<FsckReport> {
  try {
    return await fsckOnce(ledger, given);
  } catch (err) {
    throw namedCancel(err, 'fsck'); // `operation cancelled` of a wait that does not know the call, named
  }
}

async function fsckOnce(ledger: Ledger, given: FsckOptions): Promise<FsckReport> {
  checkLedger(ledger, 'fsck');
  // `null` from JavaScript callers too; each field read once (a getter that throws: INVALID_ARGUMENT).
  const options = readOptionFields(given, ['signal', 'checkBlobs'], 'fsck options', LedgerError) as FsckOptions;
  checkBooleanOption(options.checkBlobs, 'checkBlobs', LedgerError);
  throwIfCancelled(options.signal);
  // One moment of the log where it can give one (PostgreSQL): the passes below then see no append land between
  // them, which on a live shared store read as a rollback (entries no head named), a tree of another size, a
  // session-heads root of other heads.
  const { log } = ledger;
  return ledger.maintenance(() =>
    log.readSnapshot
      ? log
          .readSnapshot((view) => fsckLog(ledger, view, options), { signal: options.signal })
          .catch((err: unknown) => {
            // The snapshot's CANCELLED (a ManifestError: its connection, one still being made, or a read waiting for a
            // lock, ended at the abort) is fsck's: a LedgerError, the signal's reason as the cause.
            if (isHandoffLedgerError(err) && err.code === 'CANCELLED') throwIfCancelled(options.signal);
            throw err;
          })
      : fsckLog(ledger, log, options),
  );
}

async function fsckLog(ledger: Ledger, log: ManifestLog, options: FsckOptions): Promise<FsckReport> {
  const findings: FsckFinding[] = [];
  const trust = ledger.trustStore();
  // Per blob, the sizes manifests claimed for it that were checked: the size is each manifest's own claim.
  const checked = new Map<Digest, Set<number>>();
  const headed = new Set<string>();
  const newestSigned = new Map<string, string>();
  let chains = 0;
  let manifests = 0;
  // The rollback or fork a diagnosing open (or an earlier call) found: the rest below says where the log differs.
  const failed = ledger.checkpointFailure;
  if (failed) findings.push({ code: 'PIN_MISMATCH', message: `${failed.code}: ${failed.message}` });
  // The log's origin record: one that is no valid origin opens only to diagnose (src/ledger/open.ts), and is named here.
  const origin = await log.origin();
  const originDamage = origin === undefined ? undefined : storedOriginDamage(origin);
  if (originDamage) findings.push({ code: 'RECORD_CORRUPT', message: originDamage.message });
  try {
    // Looked at between chains (PostgreSQL: between pages of them), as at open: a store of many chains stops promptly.
    for (const p of await log.checkHeads({ signal: options.signal })) {
      findings.push({ code: p.code, session: p.session, message: p.problem });
      headed.add(p.session); // reported already: the entries walk below need not say it again
    }
  } catch (err) {
    // The log's CANCELLED (a ManifestError) is fsck's: a LedgerError, the signal's reason as the cause.
    throwIfCancelled(options.signal);
    recordProblem(err, findings);
  }
  // Every head, kept for the session-heads check below once the walk has seen them all.
  let heads: ChainHeads | undefined = [];
  // The sessions the head walk checked (or named), and, once it stopped early, those the global walk met after it.
  const walked = new Set<string>();
  const unwalked = new Set<string>();
  try {
    for await (const head of log.heads()) {
      headed.add(head.session);
      walked.add(head.session);
      // A head record keyed by no session id (written behind the log's back) heads no chain the log can read: named,
      // not walked (reading its chain is refused INVALID_ID, which ended fsck).
      if (!isValidId(head.session)) {
        findings.push({
          code: 'RECORD_CORRUPT',
          session: head.session,
          message: `manifest log head record of session ${quoted(head.session)} is corrupt: its session is not a valid id`,
        });
        continue;
      }
      chains++;
      heads.push({ session: head.session, head: { seq: head.seq, id: head.id } });
      try {
        manifests += await checkChain(ledger, log, head, trust, { checked, newestSigned }, findings, options);
      } catch (err) {
        recordProblem(err, findings, head.session);
      }
    }
  } catch (err) {
    heads = undefined; // not all of them: the session-heads check walks them itself
    recordProblem(err, findings);
  }
  let position = 0;
  try {
    for await (const entry of log.entries()) {
      if (entry.position !== position)
        findings.push({
          code: 'POSITION_GAP',
          session: entry.session,
          seq: entry.seq,
          message: `global position ${entry.position}, expected ${position}`,
        });
      position = entry.position + 1;
      // The head walk stopped at a damaged head record: the chains after it were not walked, and theirs are looked up
      // one by one below, not taken for chains with no head.
      if (heads === undefined && !walked.has(entry.session) && isValidId(entry.session)) {
        unwalked.add(entry.session);
      } else if (!headed.has(entry.session)) {
        headed.add(entry.session);
        findings.push({ code: 'ROLLBACK', session: entry.session, message: 'entries exist, but no head names them' });
      }
    }
  } catch (err) {
    recordProblem(err, findings);
  }
  for (const session of unwalked) {
    throwIfCancelled(options.signal);
    try {
      const head = await log.head(session);
      if (!head) {
        // Unless the head check named it already.
        if (!headed.has(session))
          findings.push({ code: 'ROLLBACK', session, message: 'entries exist, but no head names them' });
        headed.add(session);
        continue;
      }
      chains++;
      manifests += await checkChain(ledger, log, head, trust, { checked, newestSigned }, findings, options);
    } catch (err) {
      recordProblem(err, findings, session);
    }
  }
  // The tree over the global order must be exactly the tree of the entries. Its walk keeps each leaf's manifest id
  // (32 bytes a position) for the id → position records, which must lead every id to its manifest's leaf.
  const leafIds = new LeafIds();
  try {
    findings.push(...(await fsckTree(log, options.signal, leafIds)));
  } catch (err) {
    recordProblem(err, findings);
  }
  try {
    findings.push(...(await fsckIdPositions(log, leafIds, options.signal)));
  } catch (err) {
    recordProblem(err, findings);
  }
  // The session-heads index must be exactly the index of the heads (checkpoints commit its root).
  try {
    // The tree head is read by both: a damage it meets (a finding of no session) is named once.
    for (const f of await fsckSessionHeads(log, heads, options.signal))
      if (f.session !== undefined || !findings.some((g) => g.code === f.code && g.message === f.message))
        findings.push(f);
  } catch (err) {
    recordProblem(err, findings);
  }
  findings.push(...(await fsckInlineBlobs(log, options.signal)));
  // Grant records: unsigned (FSCK_NOT_VERIFIED), but one that cannot be parsed refuses the calls of the principal it
  // names. The listing stops at the first such record (named), as the inline blob listing does.
  throwIfCancelled(options.signal);
  try {
    await log.grants.list();
  } catch (err) {
    recordProblem(err, findings);
  }
  // The file tier's (the inline tier's were checked above), with the blobs: a walk of every stored blob.
  if (options.checkBlobs !== false) {
    const files = ledger.blobs instanceof TieredBlobStore ? ledger.blobs.files : ledger.blobs;
    findings.push(...(await fsckBlobTimes(files, new Set(checked.keys()), options.signal)));
  }
  findings.push(...(await fsckSigningKeys(log, await ledger.storeTrust(), newestSigned, options.signal, trust)));
  const reported = oneFindingPerRecord(findings);
  return {
    ok: reported.length === 0,
    chains,
    manifests,
    blobsChecked: checked.size,
    findings: reported,
    notVerified: FSCK_NOT_VERIFIED,
  };
}

/** One chain through the shared checker, its blobs, and its owner record against its signed seq 0. Returns the entries read. */
async function checkChain(
  ledger: Ledger,
  log: ManifestLog,
  head: ChainHead,
  trust: TrustStore,
  seen: { checked: Map<Digest, Set<number>>; newestSigned: Map<string, string> },
  findings: FsckFinding[],
  options: FsckOptions,
): Promise<number> {
  let manifests = 0;
  const checker = new ChainChecker(head.session, { trust, verifier: ledger.verifier });
  for await (const entry of log.chain(head.session)) {
    throwIfCancelled(options.signal);
    manifests++;
    const at = { session: head.session, seq: entry.seq };
    const { verified, findings: broken } = checker.check(entry);
    for (const f of broken) findings.push({ ...f, ...at });
    const m = verified?.manifest;
    if (m && !((seen.newestSigned.get(m.keyId) ?? '') >= m.createdAt)) seen.newestSigned.set(m.keyId, m.createdAt);
    // The owner record decides who may read the session; seq 0's signed principal is what it must say.
    if (m && m.seq === 0 && m.session === head.session && head.owner !== m.principal)
      findings.push({
        code: 'OWNER_MISMATCH',
        ...at,
        message: `the chain head names owner ${head.owner}; seq 0 was signed for ${m.principal}`,
      });
    const ref = m?.summary;
    const sizes = ref && seen.checked.get(ref.digest as Digest);
    if (ref && options.checkBlobs !== false && !sizes?.has(ref.size)) {
      if (sizes) sizes.add(ref.size);
      else seen.checked.set(ref.digest as Digest, new Set([ref.size]));
      const problem = await checkBlob(ledger, ref);
      if (problem) findings.push({ ...problem, ...at });
    }
  }
  return manifests;
}

export interface GcReport {
  scanned: number;
  referenced: number;
  removed: Digest[];
  keptYoung: number;
}

/** Options of `gc`. */
export interface GcOptions {
  /** Only blobs stored more than this many ms ago are removed. */
  graceMs: number;
  /** Report what would be removed, remove nothing. */
  dryRun?: boolean | undefined;
  /**
   * Now, in ms since epoch (default: the clock the store dates blobs by, PostgreSQL: the server's; where the blob files
   * and the log's inline blobs are dated by two clocks, the earlier of them: TieredBlobStore.clock); a finite number,
   * else `INVALID_ARGUMENT`.
   */
  now?: number | undefined;
  /**
   * Aborts the collection (`CANCELLED`) between blobs: each blob is removed whole or not at all, and a delete waiting
   * behind another call on the same blob (a put or delete that hangs) ends at the abort with that blob kept. The
   * error's message counts the blobs removed before it (the others stay).
   */
  signal?: AbortSignal | undefined;
}

/**
 * Removes blobs that no manifest references and that were stored more than `graceMs` ago. A blob
 * of a publish in flight is younger than any sensible grace period, so it is never taken from under
 * the manifest about to reference it; a publish whose summary equals an old orphan refreshes its storage time
 * when it re-puts the bytes, and the delete itself re-checks that time. Every manifest counts as a reference,
 * verified or not, whether the global order or a chain reaches it; a manifest gc cannot read stops it
 * (`RECORD_CORRUPT`) before anything is removed.
 * @throws LedgerError `INVALID_ARGUMENT` (no Ledger, a `graceMs` that is not a non-negative number, a `now` that is not
 *   a finite number, a `signal` that is not an AbortSignal, an options field that throws as it is read: before anything
 *   is read), `CANCELLED` (the signal aborted: the blobs removed before it stay removed, the rest stay), `CLOSED`,
 *   `ROLLBACK` / `FORK` (the log does not extend its pinned checkpoint), `RECORD_CORRUPT`, and the log check's other codes
 *   (as `Ledger.checkpoint`: ManifestError `TREE_DAMAGED`, `KEY_REVOKED`, `LOCKED`, …); StoreError `BLOB_INTEGRITY`,
 *   `STORAGE_FAILED`, `UNSAFE_PATH` (a blob directory swapped for a symbolic link: gc stops there)
 */
export async function gc(ledger: Ledger, given: GcOptions): Promise<GcReport> {
  checkLedger(ledger, 'gc');
  let options: GcOptions | undefined;
  return ledger.telemetry.run(
    'gc',
    { host: ledger.host },
    () => {
      options = gcOptions(given);
      return ledger.maintenance(() => collect(ledger, options!));
    },
    (r) => ({
      attributes: {
        'handoff_ledger.blobs_scanned': r.scanned,
        'handoff_ledger.blobs_removed': r.removed.length,
        'handoff_ledger.blobs_kept_young': r.keptYoung,
        'handoff_ledger.dry_run': options?.dryRun === true,
      },
    }),
  );
}

/**
 * gc's options, each field read once and checked, before anything is read or written.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function gcOptions(given: unknown): GcOptions {
  const options = readOptionFields(
    given,
    ['graceMs', 'dryRun', 'now', 'signal'],
    'gc options',
    LedgerError,
  ) as GcOptions;
  checkSignal(options.signal);
  checkBooleanOption(options.dryRun, 'dryRun', LedgerError);
  if (typeof options.graceMs !== 'number' || !Number.isFinite(options.graceMs) || options.graceMs < 0)
    throw new LedgerError('INVALID_ARGUMENT', 'gc needs { graceMs }: a non-negative number of milliseconds');
  // A now that is no instant would make the cutoff NaN or infinite: every unreferenced blob old enough, the blob of a
  // publish in flight included (a dry run reported it removable, a real run stopped at the store's delete).
  if (options.now !== undefined && options.now !== null && !Number.isFinite(options.now))
    throw new LedgerError('INVALID_ARGUMENT', 'gc: now must be a finite number of milliseconds since the epoch');
  // An aborted signal: nothing read, nothing removed.
  if (options.signal?.aborted) throw gcCancelled(options.signal, 0);
  return options;
}

/** How the message of gc's `CANCELLED` begins (the CLI says which signal instead). */
export const GC_CANCELLED = 'gc cancelled';

/**
 * gc's `CANCELLED`, saying what the run removed before the abort: whole blobs only, each either removed or kept. Its
 * cause is the signal's reason, as every `CANCELLED` of the ledger's (not the store's error of a delete it cut short).
 */
function gcCancelled(signal: AbortSignal, removed: number): LedgerError {
  const done =
    removed === 0
      ? 'no blob was removed'
      : `${counted(removed, 'unreferenced blob')} removed before it (each whole), the others stay`;
  return new LedgerError('CANCELLED', `${GC_CANCELLED}: ${done}`, { cause: signal.reason });
}

async function collect(ledger: Ledger, options: GcOptions): Promise<GcReport> {
  // Not against a log that does not extend the pinned checkpoint: collecting there could delete the evidence.
  await ledger.checkLog();
  // The grace is measured on the clock the store records storage times by (PostgreSQL: the server's), not this
  // host's: a host clock ahead of the server's would take blobs younger than the grace (of two tiers dated by two
  // clocks, the earlier: TieredBlobStore.clock). And from before the walk
  // of the manifests: a publish that stores its blob and commits while the walk runs is one the walk may not see,
  // and a walk that outlasts the grace would otherwise find that blob old enough to take.
  const now = options.now ?? (ledger.blobs.clock ? await ledger.blobs.clock() : Date.now());
  const { signal } = options;
  const referenced = await referencedDigests(ledger, signal);
  const cutoff = now - options.graceMs;
  const removed: Digest[] = [];
  let scanned = 0;
  let keptYoung = 0;
  const stopIfAborted = () => {
    // A dry run removes nothing: its list is what it would have removed.
    if (signal?.aborted) throw gcCancelled(signal, options.dryRun ? 0 : removed.length);
  };
  for await (const digest of ledger.blobs.list()) {
    // Between blobs: a blob whose delete resolved is counted removed before the abort is heeded.
    stopIfAborted();
    scanned++;
    if (referenced.has(digest)) continue;
    const st = await ledger.blobs.stat(digest);
    if (!st) continue;
    // A storage time that is no instant (a PostgreSQL row's `±infinity`, written under the store) would keep the blob
    // for ever or let any grace pass: not judged; fsck reports it.
    if (!Number.isFinite(st.storedAtMs))
      throw new StoreError(
        'BLOB_INTEGRITY',
        `gc: blob ${digest}: its storage time is not a time (${st.storedAtMs}); run fsck`,
      );
    if (st.storedAtMs > cutoff) {
      keptYoung++;
      continue;
    }
    // Judged again by the store itself at the delete: a publish that re-put these bytes since the stat keeps them.
    // The signal ends a delete only while it waits its turn (nothing of the blob removed: CANCELLED).
    if (!options.dryRun && !(await deleteOrCancelled(ledger, digest, cutoff + 1, signal, removed.length))) {
      keptYoung++;
      continue;
    }
    removed.push(digest);
  }
  return { scanned, referenced: referenced.size, removed, keptYoung };
}

/** The store's conditional delete of one blob; its `CANCELLED` (any layer's) becomes gc's, counting what was removed. */
async function deleteOrCancelled(
  ledger: Ledger,
  digest: Digest,
  storedBeforeMs: number,
  signal: AbortSignal | undefined,
  removedBefore: number,
): Promise<boolean> {
  try {
    return await ledger.blobs.delete(digest, signal ? { storedBeforeMs, signal } : { storedBeforeMs });
  } catch (err) {
    if (signal?.aborted && isHandoffLedgerError(err) && err.code === 'CANCELLED')
      throw gcCancelled(signal, removedBefore);
    throw err;
  }
}

/**
 * Every summary digest a stored manifest names. The entries are reached two ways, through the global order and
 * through every chain, so an entry one index lost (a position gap, a head that no longer names it) still keeps its
 * blob. A manifest gc cannot read is not taken to reference nothing: gc refuses (`RECORD_CORRUPT`, naming it) and
 * removes nothing, and fsck says what is wrong. Nor is a manifest neither way reaches (both its indexes lost, or its
 * record): the tree holds a leaf for every committed manifest, so a position below its size that no walk reached
 * is a manifest gc cannot see, and gc refuses the same way. So does an entry whose id is not the id of the manifest
 * it holds: the manifest the log committed there (its id, leaf and position record) is no longer stored, and the blob
 * it names is unknown.
 */
async function referencedDigests(ledger: Ledger, signal: AbortSignal | undefined): Promise<Set<string>> {
  const referenced = new Set<string>();
  // Taken first: a manifest appended during the walk lies beyond it, and its blob is younger than the grace anyway.
  const { size } = await ledger.log.treeHead();
  const reached = new Uint8Array(size);
  const note = (entry: LogEntry): void => {
    if (signal?.aborted) throw gcCancelled(signal, 0); // nothing removed yet
    if (Number.isSafeInteger(entry.position) && entry.position >= 0 && entry.position < size)
      reached[entry.position] = 1;
    const stored = summaryDigestAndIdOf(entry.envelope);
    if (stored === undefined)
      throw new LedgerError(
        'RECORD_CORRUPT',
        `gc removes nothing: the manifest at ${quoted(entry.session)} seq ${entry.seq} cannot be read, ` +
          'so the blob it names is unknown (fsck reports it)',
      );
    // A record holding another manifest than the one its id names (the one the log committed: its leaf, its position
    // record) has lost that manifest, and with it the blob the lost one names.
    if (stored.id !== entry.id)
      throw new LedgerError(
        'RECORD_CORRUPT',
        `gc removes nothing: the entry at ${quoted(entry.session)} seq ${entry.seq} holds another manifest ` +
          'than its id names, so the blob that manifest names is unknown (fsck reports it)',
      );
    referenced.add(stored.digest);
  };
  for await (const entry of ledger.log.entries()) note(entry);
  for await (const head of ledger.log.heads()) {
    // A damaged head record, as one that cannot be parsed (the log's RECORD_CORRUPT): not the log's INVALID_ID.
    if (!isValidId(head.session))
      throw new LedgerError(
        'RECORD_CORRUPT',
        `gc removes nothing: the head record of session ${quoted(head.session)} names no valid session, ` +
          'so the chain it heads cannot be read (fsck reports it)',
      );
    for await (const entry of ledger.log.chain(head.session)) note(entry);
  }
  const missing = reached.indexOf(0);
  if (missing >= 0)
    throw new LedgerError(
      'RECORD_CORRUPT',
      `gc removes nothing: the log's tree holds ${counted(size, 'manifest')}, and the manifest at position ${missing} is reached ` +
        'neither through the global order nor through a chain, so the blob it names is unknown (fsck reports it)',
    );
  return referenced;
}

/** Parses durations like `90s`, `30m`, `24h`, `7d`, `0`: a whole number with a unit `ms`, `s`, `m`, `h` or `d`; a number alone is seconds. */
export function parseDuration(text: string): number {
  if (typeof text !== 'string')
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `not a duration: ${typeWithArticle(text)} (use text such as 30m, 24h, 7d)`,
    );
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new LedgerError('INVALID_ARGUMENT', `not a duration: ${quoted(text)} (use e.g. 30m, 24h, 7d)`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[
    (m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'
  ];
  const ms = Number(m[1]) * unit;
  // Digits past 2^53 ms (285,000 years) lose their value, and enough of them make Infinity: no duration.
  if (!Number.isSafeInteger(ms))
    throw new LedgerError('INVALID_ARGUMENT', `not a duration: ${quoted(text)} is too long (use e.g. 30m, 24h, 7d)`);
  return ms;
}
