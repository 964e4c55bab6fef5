/**
 * `export`: writes an audit bundle (manifests/audit/bundle.ts) from a ledger's log and blobs. Node only.
 *
 * Atomic and durable: everything is written into a private staging directory next to the target,
 * every file and directory is fsynced, and only then is it published into the target, claimed at the start as an
 * empty 0700 directory (an existing target is `BUNDLE_EXISTS`), by mkdir and link(2), which never replace, with
 * `bundle.json` last (./export-publish.ts): a directory anyone else put at the target, however late, is never
 * replaced. A failure at any step leaves no bundle (and removes the claim while it is still ours and empty).
 * Envelopes are copied byte for byte as stored; export verifies nothing (that is the auditor's job), so a manifest
 * that does not verify yields a bundle whose verification shows it, and a blob the store cannot return intact
 * (missing, corrupt, over the size limit or the size its manifests say, or not a regular file at its path) is left
 * out and listed, and verify reports it missing. A log record the export needs but cannot read at all (`RECORD_CORRUPT`: there is no envelope
 * to copy, and nothing to show an auditor where it was) stops it instead: no bundle, and an error that names the
 * record and says to run fsck. A `--session` export reads that session's chain alone, so only its own records can
 * stop it; a full or `--principal` export reads the whole log.
 */
import { constants } from 'node:fs';
import { lstat, readdir, readFile, realpath, rmdir, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { isDigest, type Digest } from '../../store/hash/digest.js';
import type { BlobStore } from '../../store/blob-store.js';
import { TieredBlobStore } from '../ledger/blob-tiers.js';
import {
  checkBooleanOption,
  isUint8Array,
  quoted,
  readOptionFields,
  StoreError,
  type NamesEveryField,
  typeWithArticle,
} from '../../store/errors.js';
import { nodeFsOps, type FsOps } from '../../store/fs/ops.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { isProcessAlive } from '../../store/fs/process.js';
import { publishBundle } from './export-publish.js';
import { ManifestError } from '../../manifests/errors.js';
import { AuditError, auditUsage } from '../../manifests/audit/errors.js';
import { checkSignal, isHandoffLedgerError, LedgerError } from '../errors.js';
import {
  BUNDLE_FORMAT,
  BUNDLE_HEADER_FILE,
  BUNDLE_MANIFESTS_FILE,
  BUNDLE_VERSION,
  bundleBlobPath,
  serializeBundleHeader,
  type BundleHeader,
} from '../../manifests/audit/bundle.js';
import { parseEnvelope } from '../../manifests/crypto/envelope.js';
import { manifestId } from '../../manifests/format/manifest-core.js';
import { invalidIdMessage, isValidId } from '../../manifests/format/id-pattern.js';
import type { LogEntry, ManifestLog } from '../../manifests/log/log.js';
import { LedgerTelemetry } from '../telemetry/telemetry.js';
import {
  BUNDLE_CHECKPOINT_FILE,
  BUNDLE_CONSISTENCY_FILE,
  BUNDLE_HEADS_FILE,
  BUNDLE_PROOFS_FILE,
} from '../../manifests/audit/bundle.js';
import { sessionHeadsOf } from '../../manifests/tlog/session-heads.js';
import { checkpointVerifiers, type TrustStore } from '../../manifests/format/trust.js';
import {
  consistencyFile,
  inclusionProofLines,
  sessionHeadLines,
  sessionHeadProofs,
  sinceSize,
  type SessionHeadProofs,
} from './export-tree.js';

export interface ExportOptions {
  /** Target directory; must not exist. */
  out: string;
  /**
   * Only chains in which this principal published at least one manifest (whole chains, so they verify), as the
   * signed payloads say (`signedScopeOf`), never the unsigned principal column stored beside them.
   */
  principal?: string | undefined;
  /**
   * Only this session's chain, read by the session stored beside each entry: an entry there whose signed payload
   * names another session stops the export (`RECORD_CORRUPT`).
   */
  session?: string | undefined;
  /** Also copy every referenced summary blob (re-hashed by the blob store as it is read). */
  withBlobs?: boolean | undefined;
  /** An auditor's earlier checkpoint (signed note): the bundle carries a consistency proof from it. */
  since?: string | undefined;
  /** Clock for `exportedAt` (tests). */
  clock?: (() => Date) | undefined;
  /** Filesystem operations (fault injection). */
  fs?: FsOps | undefined;
  /**
   * Cancels the export (LedgerError `CANCELLED`: the staging directory and the claim are removed, nothing is left)
   * until it begins to publish into the target; from then on it completes (a bundle is published whole or not at all).
   */
  signal?: AbortSignal | undefined;
}

export interface ExportResult {
  dir: string;
  header: BundleHeader;
  /**
   * Blobs the store could not return intact (absent, corrupt, over the size limit, larger than their manifests say:
   * `BLOB_INTEGRITY`, refused before they are read, or not a regular file at their path): not in the bundle, so
   * `verify` reports them.
   */
  unavailableBlobs: Array<{ digest: Digest; code: string }>;
}

/** What export needs from a ledger (a `Ledger` is one). */
export interface ExportSource {
  readonly host: string;
  readonly log: ManifestLog;
  readonly blobs: BlobStore;
  /** Where the export's span and metrics go (a ledger's own); default the global OpenTelemetry API. */
  readonly telemetry?: LedgerTelemetry | undefined;
  /**
   * The store's root directory (a `Ledger` has one): an `out` inside it is refused (`INVALID_ARGUMENT`), for the
   * store manages what is there (its keys, its log, staging files an open clears).
   */
  readonly root?: string | undefined;
  /**
   * The signed checkpoint to cut the bundle at (a `Ledger` has one); without it the bundle has no tree files. For a
   * filtered export of a log with a session-heads index, the checkpoint of the log's current tree (its heads are
   * proven from the log as it is): an older one is taken again until it is current, `BUNDLE_IO` after 20 tries. Without
   * a session-heads line, one of a tree past the log's read snapshot is taken again the same way (the chains are
   * chosen from the snapshot).
   */
  checkpoint?(): Promise<{
    note: string;
    /** `origin`: what an auditor's `since` checkpoint must be of (a Ledger's checkpoint has it). */
    checkpoint: { size: number; origin?: string | undefined; extensions?: readonly string[] | undefined };
  }>;
  /** The trusted keys (for `since`: the earlier checkpoint may be signed by a rotated checkpoint key). */
  trustStore?(): TrustStore;
  /**
   * Runs the export as an operation of the source (a `Ledger`: `CLOSED` once it is closing, and its `close()` waits
   * for the export, which so never reads a store closed under it).
   */
  maintenance?<T>(call: () => Promise<T>): Promise<T>;
}

/**
 * What the blob store says of one blob it cannot return intact (a symlink, directory or other non-file planted at
 * its path is `UNSAFE_PATH`; an unreadable inline record `RECORD_CORRUPT`): that blob is left out and listed.
 */
const UNAVAILABLE_BLOB = new Set([
  'BLOB_NOT_FOUND',
  'BLOB_INTEGRITY',
  'BLOB_TOO_LARGE',
  'UNSAFE_PATH',
  'RECORD_CORRUPT',
]);

const CREATE = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW;
const FLUSH_BYTES = 1024 * 1024;

/** @throws LedgerError `CANCELLED` when `signal` was aborted, `INVALID_ARGUMENT` when it is not an AbortSignal */
function checkCancelled(signal: AbortSignal | undefined): void {
  checkSignal(signal);
  if (signal?.aborted)
    throw new LedgerError('CANCELLED', 'export cancelled; no bundle was written', { cause: signal.reason });
}

function ioError(step: string, err: unknown): AuditError {
  if (err instanceof AuditError) return err;
  // The failure by its errno code (`ENOENT (no such file or directory)`), not the errno's message, which repeats the
  // path the step already names quoted, raw.
  return new AuditError('BUNDLE_IO', `export: ${step} failed: ${errnoText(err)}`, { cause: err });
}

/** A stored envelope's payload, its bytes and as JSON, read without verification, or undefined when it is not one. */
function readPayload(envelope: string): { bytes: Uint8Array; json: Record<string, unknown> } | undefined {
  try {
    const bytes = parseEnvelope(envelope).payload;
    const json: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return typeof json === 'object' && json !== null ? { bytes, json: json as Record<string, unknown> } : undefined;
  } catch {
    return undefined;
  }
}

/** A stored envelope's payload as JSON, read without verification, or undefined when it is not one. */
function payloadOf(envelope: string): Record<string, unknown> | undefined {
  return readPayload(envelope)?.json;
}

const digestNamedBy = (payload: Record<string, unknown> | undefined): Digest | undefined => {
  const digest = (payload?.summary as { digest?: unknown } | undefined)?.digest;
  return isDigest(digest) ? digest : undefined;
};

/**
 * The summary digest a stored envelope names, read without verification (export copies, it does not judge; gc
 * keeps the blob of every manifest, verified or not), or undefined when the envelope names none.
 */
export function summaryDigestOf(envelope: string): Digest | undefined {
  return digestNamedBy(payloadOf(envelope));
}

/**
 * As `summaryDigestOf`, with the size the payload claims for the summary (unverified), `undefined` when it claims none
 * that is a byte count.
 */
function summaryRefOf(envelope: string): { digest: Digest; size: number | undefined } | undefined {
  const payload = payloadOf(envelope);
  const digest = digestNamedBy(payload);
  if (!digest) return undefined;
  const size = (payload?.summary as { size?: unknown }).size;
  return { digest, size: Number.isSafeInteger(size) && (size as number) >= 0 ? (size as number) : undefined };
}

/**
 * The store's own read limit (`maxBlobBytes`) where it has one (a store of this package's: the file tier's, behind a
 * ledger's tiers), else none: a bound taken from a manifest never reads more than the store would.
 */
function storeReadLimit(blobs: BlobStore): number {
  const files: unknown = blobs instanceof TieredBlobStore ? blobs.files : blobs;
  const max = (files as { maxBlobBytes?: unknown }).maxBlobBytes;
  return typeof max === 'number' ? max : Infinity;
}

/**
 * As `summaryDigestOf`, with the manifest id of the envelope's payload (what the log stores as the entry's id and
 * commits to in its tree), or undefined when the envelope names no summary.
 */
export function summaryDigestAndIdOf(envelope: string): { digest: Digest; id: Digest } | undefined {
  const payload = readPayload(envelope);
  const digest = digestNamedBy(payload?.json);
  return payload && digest ? { digest, id: manifestId(payload.bytes) } : undefined;
}

/**
 * The principal and session a stored envelope's signed payload names (unverified, as `summaryDigestOf`), or
 * undefined when it names no valid ids. The log's `principal` and `session` columns beside the envelope are not
 * signed: a database writer can change them without breaking a signature, so they never decide whose chain is whose.
 */
export function signedScopeOf(envelope: string): { principal: string; session: string } | undefined {
  const payload = payloadOf(envelope);
  const { principal, session } = payload ?? {};
  return typeof principal === 'string' && isValidId(principal) && typeof session === 'string' && isValidId(session)
    ? { principal, session }
    : undefined;
}

/**
 * The entries an export looks at, in global log order: with `--session S`, S's chain alone (its seq order is its
 * global order), so that the export neither reads nor depends on any other session's records (an unreadable one
 * stops only an export that needs it); else the whole log.
 */
function entriesFor(log: ManifestLog, session: string | undefined): AsyncIterable<LogEntry> {
  return session === undefined ? log.entries() : log.chain(session);
}

/**
 * An entry read as part of `chain`'s chain whose signed manifest is of another session: the session stored beside it
 * was changed, so the chain read by that column is not the session's (entries may have been moved into it, or out).
 * The export refuses rather than hand an auditor a bundle assembled by a column nobody signed (fsck: `SCOPE_MISMATCH`).
 */
function misfiled(e: LogEntry, chain: string, signed: string): ManifestError {
  return new ManifestError(
    'RECORD_CORRUPT',
    `the log entry at position ${e.position} is stored in session ${chain}'s chain (seq ${e.seq}) but holds a ` +
      `manifest signed for session ${signed}`,
  );
}

/** The filter, and for a filtered export the sessions it may hold (a superset: later appends included). */
async function selectSessions(
  log: ManifestLog,
  o: ExportOptions,
  /** The cut's size: only entries below it are looked at (they no longer change). */
  limit: number,
): Promise<{ selected: (session: string) => boolean; candidates: Set<string> }> {
  if (o.principal === undefined)
    return {
      selected: (s) => o.session === undefined || s === o.session,
      candidates: new Set(o.session === undefined ? [] : [o.session]),
    };
  const sessions = new Set<string>();
  for await (const e of entriesFor(log, o.session)) {
    if (e.position >= limit) break;
    checkCancelled(o.signal);
    // Whose manifest it is, the signed payload says. Only an envelope whose payload cannot be read falls back on
    // the unsigned columns: its chain is then exported, and its verification shows the damage (leaving it out
    // would hide it). A column that names P beside a payload that names another principal selects nothing.
    const scope = signedScopeOf(e.envelope) ?? { principal: e.principal, session: e.session };
    if (scope.principal === o.principal && (o.session === undefined || scope.session === o.session))
      sessions.add(scope.session);
  }
  const candidates = new Set(sessions);
  if (o.session !== undefined) candidates.add(o.session);
  return { selected: (s) => sessions.has(s), candidates };
}

/** Attempts at a cut whose session-heads proofs match it, while appends keep moving the log on. */
const CUT_ATTEMPTS = 20;

type Cut = Awaited<ReturnType<NonNullable<ExportSource['checkpoint']>>>;

/**
 * The cut of an export and, for a filtered one, its sessions and their head proofs at that cut. A filtered bundle
 * proves each session's head from the session-heads index, which only holds the log's latest state: the proofs must
 * be read at the very tree the checkpoint signs. Where the log offers a read snapshot, the snapshot is taken first
 * and the checkpoint right after; when no append landed between the two (the checkpoint's tree is the snapshot's),
 * the selection and the proofs are read from the snapshot at leisure, however long the log or busy its writers. Only
 * an append within that instant (a round trip or two; not the scan, not the pin's write) costs another attempt.
 * Without a snapshot the proofs are read from the live log right after the cut and its selection.
 */
async function cutFor(
  source: ExportSource,
  options: ExportOptions,
  filtered: boolean,
): Promise<{
  cut: Cut | undefined;
  selected: (session: string) => boolean;
  headProofs: SessionHeadProofs | undefined;
}> {
  const log = source.log;
  for (let attempt = 1; ; attempt++) {
    checkCancelled(options.signal);
    const settled = async (view: ManifestLog, before?: { size: number }) => {
      const cut = source.checkpoint ? await source.checkpoint() : undefined;
      const root = cut && filtered ? sessionHeadsOf(cut.checkpoint.extensions ?? []) : undefined;
      // Proofs must be read at the checkpoint's own tree. Without a session-heads line an older checkpoint cuts too,
      // but not one past the snapshot: the sessions are selected from the snapshot, which lacks the entries after it
      // (a session the principal began there would be left out of the bundle, and no heads file would show it).
      if (
        before &&
        cut &&
        (root instanceof Uint8Array ? cut.checkpoint.size !== before.size : cut.checkpoint.size > before.size)
      )
        return undefined; // moved on
      const { selected, candidates } = await selectSessions(view, options, cut?.checkpoint.size ?? Infinity);
      if (!(root instanceof Uint8Array)) return { cut, selected, headProofs: undefined };
      const headProofs = await sessionHeadProofs(view, candidates, root, () => checkCancelled(options.signal));
      return headProofs ? { cut, selected, headProofs } : undefined;
    };
    const found =
      filtered && source.checkpoint && log.readSnapshot
        ? await log
            .readSnapshot(async (view) => settled(view, await view.treeHead()), { signal: options.signal })
            .catch((err: unknown) => {
              // The snapshot's CANCELLED (a ManifestError: its connection or a read ended at the abort) is export's.
              if (isHandoffLedgerError(err) && err.code === 'CANCELLED') checkCancelled(options.signal);
              throw err;
            })
        : await settled(log);
    if (found) return found;
    if (attempt === CUT_ATTEMPTS)
      throw new AuditError(
        'BUNDLE_IO',
        `export: the log moved on during each of ${CUT_ATTEMPTS} attempts to prove session heads at a checkpoint; retry when appends pause`,
      );
    // Out of step with the writers' rhythm before the next attempt.
    await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 5 * attempt)));
  }
}

async function writeAll(fs: FsOps, path: string, data: Uint8Array | AsyncIterable<Uint8Array>): Promise<void> {
  const h: FileHandle = await fs.open(path, CREATE, 0o600);
  try {
    // A blob is what the source's store returned: a Uint8Array of another realm is bytes too, not chunks to iterate.
    if (isUint8Array(data)) await fs.write(h, data);
    else for await (const chunk of data) await fs.write(h, chunk);
    await fs.fsync(h);
  } finally {
    await fs.close(h);
  }
}

/**
 * Exports the chains selected by `options` into a new bundle directory.
 * @throws LedgerError `INVALID_ID` (bad filter id), `INVALID_ARGUMENT` (no Ledger or source, no `out` path, an `out`
 *   inside the source's root, a signal that is none, an options field that throws as it is read), `CANCELLED`, `CLOSED`; AuditError `BUNDLE_EXISTS` (target exists), `BUNDLE_IO` (any file step),
 *   `USAGE` (a `since` that is no checkpoint of this log: not its origin, not signed by its checkpoint keys, larger
 *   than the cut or with another root at its size; or a `since` given a source without checkpoints);
 *   ManifestError `RECORD_CORRUPT` (a log record export needs cannot be read, or `session`'s chain holds an entry
 *   signed for another session: no bundle; run fsck); other
 *   ManifestError/StoreError from the log or blob store pass through.
 */
export async function exportBundle(source: ExportSource, options: ExportOptions): Promise<ExportResult> {
  return exportBundleAs(source, options, LIBRARY_WORDS);
}

/**
 * How a caller names export's options where its refusals name them: the library's `since` as a caller of
 * `exportBundle` wrote it, the CLI's `--since` (as the auditor's settings are named by each caller: SettingWords).
 */
export interface ExportWords {
  since: string;
}

const LIBRARY_WORDS: ExportWords = { since: 'since' };

/** `exportBundle`, its refusals naming its options in `words` (the CLI's flags). Not part of the package's API. */
export async function exportBundleAs(
  source: ExportSource,
  options: ExportOptions,
  words: ExportWords,
): Promise<ExportResult> {
  checkSource(source);
  // Each field read once, for the span (its principal and session, under the telemetry's `identifiers`) and the export
  // alike: a getter asked twice could name one session on the span and export another. A refusal of the options is the
  // export's own, inside its span and after the ledger's CLOSED, as before.
  let read: ExportOptions | undefined;
  let refused: { error: unknown } | undefined;
  try {
    read = readOptionFields(options, EXPORT_FIELDS, 'export options', LedgerError) as ExportOptions;
  } catch (error) {
    refused = { error };
  }
  const exported = async () => {
    if (refused) throw refused.error;
    return exportTraced(source, read as ExportOptions, words);
  };
  return (source.telemetry ?? new LedgerTelemetry()).run(
    'export',
    { scope: read, host: source.host },
    () => (source.maintenance ? source.maintenance(exported) : exported()),
    (r) => ({
      attributes: {
        'handoff_ledger.manifests': r.header.counts.manifests,
        'handoff_ledger.chains': r.header.counts.chains,
        'handoff_ledger.blobs': r.header.counts.blobs ?? 0,
        'handoff_ledger.blobs_unavailable': r.unavailableBlobs.length,
      },
    }),
  );
}

/**
 * What `exportBundle` exports from: a `Ledger` or another source with a log and a blob store, else `INVALID_ARGUMENT`
 * (not a TypeError of its first use), before anything is read or written.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function checkSource(source: unknown): void {
  const s = source as Partial<Record<'log' | 'blobs', unknown>> | null;
  if (
    typeof source !== 'object' ||
    s === null ||
    typeof s.log !== 'object' ||
    s.log === null ||
    typeof s.blobs !== 'object' ||
    s.blobs === null
  )
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `exportBundle needs a Ledger or an ExportSource { host, log, blobs }, not ${typeWithArticle(source)}`,
    );
}

/** Every field of ExportOptions: read once, and a field left out of the list fails to compile. */
const EXPORT_FIELDS = [
  'out',
  'principal',
  'session',
  'withBlobs',
  'since',
  'clock',
  'fs',
  'signal',
] as const satisfies ReadonlyArray<keyof ExportOptions>;
const everyExportField: NamesEveryField<ExportOptions, typeof EXPORT_FIELDS> = true;
void everyExportField;

/**
 * The options of an export, each field read once (a getter that throws: `INVALID_ARGUMENT`), and `out` a non-empty
 * path (`''` would name the working directory).
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function exportOptions(given: unknown): ExportOptions {
  const options = readOptionFields(given, EXPORT_FIELDS, 'export options', LedgerError) as ExportOptions;
  if (typeof options.out !== 'string' || options.out === '')
    throw new LedgerError('INVALID_ARGUMENT', 'export needs { out }: the path of a directory that does not exist');
  checkBooleanOption(options.withBlobs, 'withBlobs', LedgerError);
  return options;
}

/**
 * The real path `path` names, through its nearest existing ancestor (the rest appended as given): a bundle's target
 * does not exist yet, and a symlink on the way to it may lead into the root by another name.
 */
async function realPathOf(path: string): Promise<string> {
  const rest: string[] = [];
  for (let p = path; ; p = dirname(p)) {
    try {
      return join(await realpath(p), ...rest.reverse());
    } catch {
      if (dirname(p) === p) return path;
      rest.push(basename(p));
    }
  }
}

/**
 * Whether `path` lies strictly inside the store root `root`, judged on real paths (a symlink on the way to either, or
 * a part of `path` that does not exist yet, included). The CLI's other file outputs (`keys export --out`) ask it too.
 */
export async function isInsideRoot(root: string, path: string): Promise<boolean> {
  const [realRoot, realPath] = await Promise.all([realPathOf(resolve(root)), realPathOf(resolve(path))]);
  const inside = relative(realRoot, realPath);
  return !(inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside));
}

/**
 * Refuses an export target strictly inside the store's root: the store manages what is there (an open cleared its
 * `tmp/` whole, a bundle there with it), so the evidence would not be safe there. The root itself exists, which the
 * claim's mkdir refuses (`BUNDLE_EXISTS`).
 * @throws LedgerError `INVALID_ARGUMENT`
 */
async function refuseOutInsideRoot(root: string, out: string): Promise<void> {
  if (!(await isInsideRoot(root, out))) return;
  throw new LedgerError(
    'INVALID_ARGUMENT',
    `export: ${quoted(out)} is inside the store's root ${quoted(root)}, whose files the store manages (its keys, its log, staging files an open clears): export the bundle outside it`,
  );
}

async function exportTraced(source: ExportSource, given: ExportOptions, words: ExportWords): Promise<ExportResult> {
  const options = exportOptions(given);
  const fs = options.fs ?? nodeFsOps;
  for (const [name, v] of [
    ['principal', options.principal],
    ['session', options.session],
  ] as const) {
    // The ledger's refusal of an invalid id, as every other command gives it (exit 1), not the auditor's USAGE.
    if (v !== undefined && !isValidId(v)) throw new LedgerError('INVALID_ID', invalidIdMessage(name, v));
  }
  checkCancelled(options.signal);
  const out = resolve(options.out);
  if (typeof source.root === 'string') await refuseOutInsideRoot(source.root, out);
  // What an export killed here before left beside the target: its claim and staging, when its process is gone.
  await removeDeadExports(fs, dirname(out));
  // The target is claimed first, as an empty private directory: rename(2) would replace an empty directory
  // created at `out` by anyone later, so the only directory the final rename may replace is this claim.
  try {
    await fs.mkdir(out, 0o700);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      throw new AuditError('BUNDLE_EXISTS', `${quoted(out)} ${await existingKind(fs, out)}; export never overwrites`);
    throw ioError(`creating ${quoted(out)}`, err);
  }
  const identity = () => claimIdentity(fs, out);
  const claim = await identity().catch(async (err: unknown) => {
    // Made by us a moment ago and not yet looked at: removed if still empty (rmdir removes nothing else).
    await rmdir(out).catch(() => {});
    throw ioError(`checking ${quoted(out)}`, err);
  });
  // The claim held open while the export runs, so its inode cannot be reused by a directory made in its place: then
  // its device and inode name it, whatever the platform reports as its birth time (libuv gives the change time where
  // statx is missing, and publishing into the claim changes that). Where a directory cannot be held open, as before.
  const held = await holdClaim(fs, out, claim);
  const current = held ? () => heldIdentity(fs, out) : identity;
  // Whether the target is still the claim made above. An error looking (other than its absence) is the I/O error it
  // is, not a claim taken by someone else.
  const stillOurClaim = async () =>
    (await current().catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw ioError(`checking ${quoted(out)}`, err);
    })) === (held?.identity ?? claim);
  try {
    return await claimedExport(source, options, fs, out, claim, stillOurClaim, words);
  } finally {
    await held?.handle.close().catch(() => {});
  }
}

async function claimedExport(
  source: ExportSource,
  options: ExportOptions,
  fs: FsOps,
  out: string,
  claim: string,
  stillOurClaim: () => Promise<boolean>,
  words: ExportWords,
): Promise<ExportResult> {
  // Beside the target, who claimed it: a later export there removes the claim and the staging if this one dies.
  const token = `${process.pid}.${randomBytes(8).toString('hex')}`;
  const owner = join(dirname(out), `${EXPORT_PREFIX}${token}.claim`);
  const record: ExportOwner = { host: hostname(), pid: process.pid, out, claim };
  await writeFile(owner, JSON.stringify(record), { mode: 0o600, flag: 'wx' }).catch(async (err: unknown) => {
    if (await stillOurClaim().catch(() => false)) await rmdir(out).catch(() => {});
    throw ioError(`writing ${quoted(owner)}`, err);
  });
  try {
    return await exportInto(source, options, fs, out, stillOurClaim, token, words);
  } catch (err) {
    // Only the claim itself, still empty and still ours, is removed; whatever replaced it is left alone.
    if (await stillOurClaim().catch(() => false)) await rmdir(out).catch(() => {});
    if (err instanceof ManifestError && err.code === 'RECORD_CORRUPT')
      throw new ManifestError(
        'RECORD_CORRUPT',
        `export: ${err.message}; no bundle was written (a record that cannot be read cannot be copied, and leaving ` +
          'it out would hide it from the auditor): run `handoff-ledger fsck` to list the damage, then repair the ' +
          'store or restore it from a backup',
        { cause: err },
      );
    throw err;
  } finally {
    // The record stays while the staging does (its removal failed: it holds links to the summaries): a later export
    // beside this target removes both once this process is gone, and never a published bundle.
    const staging = join(dirname(out), `${EXPORT_PREFIX}${token}.partial`);
    if (
      !(await lstat(staging).then(
        () => true,
        () => false,
      ))
    )
      await unlink(owner).catch(() => {});
  }
}

const EXPORT_PREFIX = '.handoff-ledger-export.';

/** What an export records beside its target while it runs (`<prefix><pid>.<hex>.claim`). */
interface ExportOwner {
  host: string;
  pid: number;
  out: string;
  claim: string;
}

/**
 * What is at an existing target, for `BUNDLE_EXISTS`: a file given as `--out` is said to be one (export makes a
 * directory there, so "already exists" alone read as if a bundle were there).
 */
async function existingKind(fs: FsOps, out: string): Promise<string> {
  const st = await fs.lstat(out).catch(() => undefined);
  if (st === undefined || st.isDirectory()) return 'already exists';
  const kind = st.isFile()
    ? 'a regular file'
    : st.isSymbolicLink()
      ? 'a symbolic link'
      : 'a special file (a FIFO, socket or device)';
  return `is ${kind}, not a new directory: export writes the bundle as a directory it makes there`;
}

/**
 * A claimed target's identity, by inode, birth time in nanoseconds, owner and mode (what the record beside it keeps,
 * and what judges the claim where it cannot be held open: `holdClaim`): a directory made in place of a
 * removed one often gets the same inode number back. Not the change time: publishing adds entries to the claim.
 */
async function claimIdentity(fs: FsOps, out: string): Promise<string> {
  const st = await fs.lstat(out, { bigint: true });
  return st.isDirectory() ? `${st.dev}:${st.ino}:${st.birthtimeNs}:${st.uid}:${st.mode}` : 'not a directory';
}

/** A directory's identity while it is held open: device, inode, owner and mode (no time: see `holdClaim`). */
const inodeIdentity = (st: { dev: bigint; ino: bigint; uid: bigint; mode: bigint; isDirectory(): boolean }): string =>
  st.isDirectory() ? `${st.dev}:${st.ino}:${st.uid}:${st.mode}` : 'not a directory';

/** What stands at `out` now, as `inodeIdentity` names the held claim. */
async function heldIdentity(fs: FsOps, out: string): Promise<string> {
  return inodeIdentity(await fs.lstat(out, { bigint: true }));
}

/**
 * The claim made at `out`, held open for the export (a directory descriptor): while it is open its inode is not freed,
 * so no directory made in its place (the claim removed, another made) can get its inode number back, and device and
 * inode name it without a birth time. The birth time `claimIdentity` compares is no time of birth where Node has no
 * statx (libuv then reports the change time, which every entry published into the claim moves: each export was
 * BUNDLE_EXISTS). `undefined` where a directory cannot be opened (then `claimIdentity` judges, as before).
 * @throws AuditError `BUNDLE_EXISTS` when the directory opened is not the claim looked at a moment before
 */
async function holdClaim(
  fs: FsOps,
  out: string,
  claim: string,
): Promise<{ handle: FileHandle; identity: string } | undefined> {
  let handle: FileHandle;
  try {
    handle = await fs.open(out, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const st = await handle.stat({ bigint: true });
    const identity = inodeIdentity(st);
    // Nothing is in the claim yet, so its birth time (or change time) has not moved: it is still the claim looked at,
    // and the directory held is the one at `out`.
    if ((await claimIdentity(fs, out)) !== claim || !claim.startsWith(`${st.dev}:${st.ino}:`))
      throw new AuditError(
        'BUNDLE_EXISTS',
        `${quoted(out)} was replaced as the export claimed it; export never overwrites`,
      );
    return { handle, identity };
  } catch (err) {
    await handle.close().catch(() => {});
    if (err instanceof AuditError) throw err;
    return undefined;
  }
}

/**
 * Removes what exports of this host killed before they finished left in `dir` (judged by their process, gone): the
 * staging directory (it holds copies of the summaries) and the claimed target, while it is still that claim and not a
 * bundle (no bundle.json). Anything else is left as it is; an export still running is never touched.
 */
async function removeDeadExports(fs: FsOps, dir: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return; // the parent is judged when the target is claimed
  }
  for (const name of names) {
    if (!name.startsWith(EXPORT_PREFIX) || !name.endsWith('.claim')) continue;
    const path = join(dir, name);
    let owner: Partial<ExportOwner>;
    try {
      // Only a record this user wrote, a small regular file: in a shared directory another user could plant one
      // naming a directory of ours (or a FIFO that would block the read).
      const st = await lstat(path);
      if (!st.isFile() || st.size > 4096 || (process.getuid !== undefined && st.uid !== process.getuid())) continue;
      owner = JSON.parse(await readFile(path, 'utf8')) as Partial<ExportOwner>;
    } catch {
      continue;
    }
    // JSON that is no record (`null`: reading its host was a TypeError that failed every export into this directory).
    if (typeof owner !== 'object' || owner === null || Array.isArray(owner)) continue;
    if (owner.host !== hostname() || typeof owner.pid !== 'number' || isProcessAlive(owner.pid)) continue;
    const token = name.slice(EXPORT_PREFIX.length, -'.claim'.length);
    await fs.rm(join(dir, `${EXPORT_PREFIX}${token}.partial`)).catch(() => {});
    if (typeof owner.out === 'string' && dirname(owner.out) === dir) {
      const still = await claimIdentity(fs, owner.out).catch(() => undefined);
      const published = await fs.lstat(join(owner.out, BUNDLE_HEADER_FILE)).then(
        () => true,
        () => false,
      );
      if (still === owner.claim && !published) await fs.rm(owner.out).catch(() => {});
    }
    await unlink(path).catch(() => {});
  }
}

async function exportInto(
  source: ExportSource,
  options: ExportOptions,
  fs: FsOps,
  out: string,
  stillOurClaim: () => Promise<boolean>,
  token: string,
  words: ExportWords,
): Promise<ExportResult> {
  const parent = dirname(out);
  // Not derived from the target's name: a basename near NAME_MAX (255) would make it too long (ENAMETOOLONG).
  const staging = join(parent, `${EXPORT_PREFIX}${token}.partial`);
  const filtered = options.principal !== undefined || options.session !== undefined;
  // The cut: the bundle holds exactly the manifests of this checkpoint's tree (later appends are left out). A
  // filtered bundle also proves each session's head at the cut, from a read snapshot of that very tree (`cutFor`).
  // A principal's sessions are chosen from the entries below the cut: a session the principal began just before
  // the cut is in the cut's tree, and so in the bundle.
  const { cut, selected, headProofs } = await cutFor(source, options, filtered);
  const limit = cut?.checkpoint.size ?? Infinity;
  if (options.since !== undefined && !cut) throw auditUsage(`${words.since} needs a store with checkpoints`);
  // The keys the earlier checkpoint is checked under, read once (and named when one of them, revoked since, signed it).
  const sinceTrust = options.since !== undefined && cut && source.trustStore ? source.trustStore() : undefined;
  const oldSize =
    options.since === undefined || !cut
      ? undefined
      : await sinceSize(
          options.since,
          sinceTrust ? checkpointVerifiers(sinceTrust, cut.checkpoint.origin) : [],
          { origin: cut.checkpoint.origin, size: limit },
          source.log,
          sinceTrust,
          words.since,
        );
  const positions: number[] = [];
  const lastOf = new Map<string, { seq: number; id: string }>();
  const counts = { manifests: 0, chains: 0, blobs: 0 };
  const unavailableBlobs: ExportResult['unavailableBlobs'] = [];
  let step = 'creating the staging directory';
  try {
    await fs.mkdir(staging, 0o700);
    step = `writing ${BUNDLE_MANIFESTS_FILE}`;
    const sessions = new Set<string>();
    // Each summary digest with the largest size a manifest of the bundle claims for it (undefined: none claims one).
    const digests = new Map<Digest, number | undefined>();
    await writeAll(
      fs,
      join(staging, BUNDLE_MANIFESTS_FILE),
      (async function* () {
        const encoder = new TextEncoder();
        let buffered: string[] = [];
        let size = 0;
        for await (const e of entriesFor(source.log, options.session)) {
          if (e.position >= limit) break;
          checkCancelled(options.signal);
          // A filter takes an entry by its signed payload's session (the session column is not signed), as
          // `selectSessions` does; only an envelope whose payload cannot be read is placed by the column.
          const session = filtered ? (signedScopeOf(e.envelope)?.session ?? e.session) : e.session;
          if (options.session !== undefined && session !== options.session) throw misfiled(e, options.session, session);
          if (!selected(session)) continue;
          positions.push(e.position);
          lastOf.set(session, { seq: e.seq, id: e.id });
          counts.manifests++;
          sessions.add(session);
          if (options.withBlobs) {
            const ref = summaryRefOf(e.envelope);
            if (ref) {
              const claimed = digests.get(ref.digest);
              digests.set(ref.digest, claimed === undefined ? ref.size : Math.max(claimed, ref.size ?? 0));
            }
          }
          buffered.push(e.envelope, '\n');
          size += e.envelope.length + 1;
          if (size >= FLUSH_BYTES) {
            yield encoder.encode(buffered.join(''));
            buffered = [];
            size = 0;
          }
        }
        if (buffered.length > 0) yield encoder.encode(buffered.join(''));
      })(),
    );
    counts.chains = sessions.size;
    if (options.withBlobs) {
      step = 'writing blobs';
      await fs.mkdir(join(staging, 'blobs'), 0o700);
      await fs.mkdir(join(staging, 'blobs', 'blake3'), 0o700);
      const storeLimit = storeReadLimit(source.blobs);
      for (const [digest, claimed] of digests) {
        checkCancelled(options.signal);
        // Read up to the size the manifests claim (within the store's own limit), as resume reads a summary: a stored
        // blob larger than that is not the one they name, and is refused before it is read, not read up to the
        // store's limit (1 GiB by default) to be refused by its digest.
        const bound = claimed === undefined ? undefined : Math.min(claimed, storeLimit);
        let bytes: Uint8Array;
        try {
          bytes = await source.blobs.get(digest, { signal: options.signal, maxBytes: bound });
        } catch (err) {
          checkCancelled(options.signal);
          let code = (err as { code?: string }).code;
          if (code === undefined || !UNAVAILABLE_BLOB.has(code)) throw err;
          // Over the manifests' size, within the store's limit: not the blob they name (resume's BLOB_INTEGRITY).
          if (code === 'BLOB_TOO_LARGE' && bound !== undefined && bound === claimed && bound < storeLimit)
            code = 'BLOB_INTEGRITY';
          unavailableBlobs.push({ digest, code });
          continue;
        }
        await writeAll(fs, join(staging, bundleBlobPath(digest)), bytes);
        counts.blobs++;
      }
      await fs.fsyncDir(join(staging, 'blobs', 'blake3'));
      await fs.fsyncDir(join(staging, 'blobs'));
    }
    checkCancelled(options.signal);
    if (cut) {
      step = 'writing the checkpoint and proofs';
      await writeAll(fs, join(staging, BUNDLE_CHECKPOINT_FILE), new TextEncoder().encode(cut.note));
      if (filtered)
        await writeAll(
          fs,
          join(staging, BUNDLE_PROOFS_FILE),
          inclusionProofLines(source.log, positions, limit, () => checkCancelled(options.signal)),
        );
      if (headProofs) {
        const proven = [...sessions, ...(options.session !== undefined ? [options.session] : [])];
        await writeAll(fs, join(staging, BUNDLE_HEADS_FILE), sessionHeadLines(headProofs, proven, lastOf));
      }
      if (oldSize !== undefined)
        await writeAll(fs, join(staging, BUNDLE_CONSISTENCY_FILE), await consistencyFile(source.log, oldSize, limit));
    }
    step = `writing ${BUNDLE_HEADER_FILE}`;
    const header: BundleHeader = {
      format: BUNDLE_FORMAT,
      version: BUNDLE_VERSION,
      exportedAt: (options.clock?.() ?? new Date()).toISOString(),
      host: source.host,
      counts: {
        manifests: counts.manifests,
        chains: counts.chains,
        ...(options.withBlobs ? { blobs: counts.blobs } : {}),
      },
      filters: {
        ...(options.principal !== undefined ? { principal: options.principal } : {}),
        ...(options.session !== undefined ? { session: options.session } : {}),
      },
    };
    await writeAll(fs, join(staging, BUNDLE_HEADER_FILE), new TextEncoder().encode(serializeBundleHeader(header)));
    await fs.fsyncDir(staging);
    // The last moment to cancel: publishing, once begun, completes.
    checkCancelled(options.signal);
    // The bundle becomes one when its header is linked into our claim, last; nothing at the target is ever
    // replaced (./export-publish.ts says why not a rename).
    step = `publishing the bundle into ${quoted(out)}`;
    await publishBundle(fs, staging, out, parent, stillOurClaim);
    await fs.rm(staging).catch(() => {});
    return { dir: out, header, unavailableBlobs };
  } catch (err) {
    await fs.rm(staging).catch(() => {});
    if ((err as { code?: string }).code === 'ENOTEMPTY' || (err as { code?: string }).code === 'EEXIST') {
      throw new AuditError('BUNDLE_EXISTS', `${quoted(out)} appeared during the export; export never overwrites`, {
        cause: err,
      });
    }
    if (
      err instanceof StoreError ||
      err instanceof ManifestError ||
      err instanceof AuditError ||
      err instanceof LedgerError
    )
      throw err;
    throw ioError(step, err);
  }
}
