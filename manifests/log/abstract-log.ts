/**
 * The shared front of every manifest log backend (in the manner of abstract-level): the public methods
 * check their arguments and the signal once, here, then call the backend's `_head`, `_append`, … with
 * values already known good. Ids reach a backend only in their grammar (ids.ts), so no backend's key
 * scheme can be confused by a separator inside one. Isomorphic.
 */
import { isDigest, type Digest } from '../../store/hash/digest.js';
import {
  isUint8Array,
  readOptionFields,
  refuseNonSignal,
  shownBytes,
  shownValue,
  throwIfAborted,
} from '../../store/errors.js';
import { ManifestError, rollbackRefused } from '../errors.js';
import { invalidIdMessage, isValidId } from '../format/id-pattern.js';
import { cutBackProblems, headProblems, indexFacts, type CutBackFacts, type HeadProblem } from '../chain/head-rules.js';
import type { NodeId } from '../tlog/tree.js';
import { KEY_BITS, type HeadsNode, type NodePath } from '../tlog/session-heads.js';
import { isManifestTimestamp } from '../format/manifest-core.js';
import { isNewOrigin, isValidOrigin, NEW_ORIGIN_RULE, ORIGIN_RULE } from '../format/checkpoint.js';
import type {
  AppendOptions,
  AppendRequest,
  ChainHead,
  GrantRecord,
  GrantTable,
  HeadWindow,
  InlineBlob,
  InlineBlobTable,
  InlineDeleteOptions,
  LogEntry,
  LogTreeHead,
  ManifestLog,
  SigningKeyRecord,
  SigningKeyTable,
} from './log.js';

function checkId(value: unknown, name: string, wildcard = false): string {
  if (isValidId(value) || (wildcard && value === '*')) return value as string;
  throw new ManifestError('INVALID_ID', invalidIdMessage(name, value));
}

function checkCount(value: unknown, name: string, min = 0): number {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min) return value;
  throw new ManifestError('INVALID_ARGUMENT', `${name} must be a non-negative integer, got ${shownValue(value)}`);
}

/**
 * The highest seq a log stores: PostgreSQL keeps seqs in `integer` columns, and every backend holds the same
 * bound so that none accepts what another refuses. Reads above it find nothing; writes above it are refused.
 */
export const MAX_SEQ = 2 ** 31 - 1;

/** A seq to write: a non-negative integer up to MAX_SEQ. */
function checkSeq(value: unknown, name: string): number {
  const seq = checkCount(value, name);
  if (seq <= MAX_SEQ) return seq;
  throw new ManifestError('INVALID_ARGUMENT', `${name} must be at most ${MAX_SEQ}, got ${seq}`);
}

/**
 * The longest `by` (who made a grant change: free text such as an operator id or a ticket) a grant record may carry, in
 * UTF-16 code units as JavaScript counts a string's length (at most 3 KiB of UTF-8): every row of the grant table is
 * read whole by each `list`, and the CLI prints it on one line.
 */
export const MAX_GRANT_BY_UNITS = 1024;

/** NUL (PostgreSQL's text cannot hold it) or a lone surrogate (UTF-8 storage replaces it): not stored as given. */
const UNSTORABLE_TEXT = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The options of `ManifestLog.readSnapshot`, read once: the signal, an AbortSignal or none (`INVALID_ARGUMENT`
 * otherwise, as an unknown field), and `CANCELLED` (its reason the cause) when it has aborted already.
 * @throws ManifestError `INVALID_ARGUMENT`, `CANCELLED`
 */
export function readSnapshotSignal(options: unknown): AbortSignal | undefined {
  const { signal } = readOptionFields(options, ['signal'], 'read snapshot options', ManifestError) as {
    signal?: unknown;
  };
  refuseNonSignal(signal, ManifestError, 'read snapshot options: ');
  throwIfAborted(signal, ManifestError);
  return signal;
}

/**
 * A grant's time (`at`) as every backend stores it and reads it back: text that `Date.parse` reads as a date. A stored
 * grant whose `at` is not one is `RECORD_CORRUPT` on every read (each backend's), as a grant with any other bad field.
 */
export function isGrantTime(value: unknown): value is string {
  return typeof value === 'string' && !Number.isNaN(Date.parse(value));
}

function checkDigest(value: unknown, name: string): Digest {
  if (isDigest(value)) return value;
  throw new ManifestError('INVALID_ID', `${name} is not a blake3 digest: ${shownValue(value, 80)}`);
}

function checkObject<T>(value: unknown, name: string): Partial<T> {
  if (value === undefined) return {};
  if (typeof value === 'object' && value !== null) return value as Partial<T>;
  throw new ManifestError('INVALID_ARGUMENT', `${name} must be an object`);
}

function checkKeyId(value: unknown): string {
  // Key ids become LevelDB key suffixes and SQL values: printable ASCII, like the manifest's own rule.
  if (typeof value === 'string' && /^[\x21-\x7e]{1,256}$/.test(value)) return value;
  throw new ManifestError('INVALID_ARGUMENT', `keyId is not a printable key id: ${shownValue(value, 80)}`);
}

/**
 * ISO-8601 UTC with milliseconds: the one form whose text order is time order (the logs compare it as text). The
 * manifest schema's rule (`timestampSchema` is a string refined by `isManifestTimestamp`), without zod's parse on
 * every append.
 */
function checkTime(value: unknown, name: string): string {
  if (isManifestTimestamp(value)) return value;
  throw new ManifestError('INVALID_ARGUMENT', `${name} is not an ISO-8601 UTC time with milliseconds`);
}

/**
 * Tree node ids, each read once: a level from 0 to 63 (PostgreSQL's column holds no more; no tree of 2^53 leaves
 * reaches it) and a safe non-negative integer index. Before this check a fractional or negative index was reported
 * missing (TREE_DAMAGED) by the embedded log and STORAGE_FAILED by PostgreSQL.
 */
function checkNodeIds(ids: unknown): NodeId[] {
  if (!Array.isArray(ids)) throw new ManifestError('INVALID_ARGUMENT', 'tree node ids must be an array');
  return ids.map((id: unknown, i) => {
    const name = `tree node id ${i}`;
    const { level, index } = readOptionFields(
      checkObject(id, name),
      ['level', 'index'],
      name,
      ManifestError,
      'allowed',
    );
    const levelOk = typeof level === 'number' && Number.isInteger(level) && level >= 0 && level < 64;
    if (!levelOk || typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0)
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `${name} is not a node of a tree (a level from 0 to 63 and a non-negative integer index)`,
      );
    return { level, index };
  });
}

/**
 * Session-heads index paths, each read once: a depth from 0 to 256 (KEY_BITS) and a 32-byte Uint8Array prefix with no
 * bit set past the depth (what names a node: the first `depth` bits of a key, the rest zero). Before this check a list
 * that was no array, or a path that was no object, was a TypeError on the embedded log and STORAGE_FAILED on
 * PostgreSQL; a prefix with a byte set past its depth's bytes named a stored node on the embedded log (its key holds
 * only those bytes) and none on PostgreSQL (which compares all 32).
 */
function checkNodePaths(paths: unknown): NodePath[] {
  if (!Array.isArray(paths)) throw new ManifestError('INVALID_ARGUMENT', 'session-heads node paths must be an array');
  return paths.map((path: unknown, i) => {
    const name = `session-heads node path ${i}`;
    const { depth, prefix } = readOptionFields(
      checkObject(path, name),
      ['depth', 'prefix'],
      name,
      ManifestError,
      'allowed',
    );
    const depthOk = typeof depth === 'number' && Number.isInteger(depth) && depth >= 0 && depth <= KEY_BITS;
    if (!depthOk || !isUint8Array(prefix) || prefix.length !== KEY_BITS / 8 || !zeroPast(prefix, depth))
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `${name} is not a node of the index (a depth from 0 to ${KEY_BITS} and a 32-byte prefix with no bit set past it)`,
      );
    return { depth, prefix };
  });
}

/** True when no bit of `prefix` past its first `depth` is set. */
function zeroPast(prefix: Uint8Array, depth: number): boolean {
  for (let bit = depth; bit < prefix.length * 8; bit++) if ((prefix[bit >> 3]! >> (7 - (bit & 7))) & 1) return false;
  return true;
}

const REQUEST_FIELDS = ['session', 'principal', 'seq', 'prev', 'id', 'envelope', 'blob', 'signed'] as const;

/**
 * The append request, each field read once into a request of its own (a getter that throws: `INVALID_ARGUMENT` naming
 * it), checked, and handed to the backend: what is checked is what is appended. A backend reads the request again when
 * it writes (the embedded log builds its batch later, after its reads): a caller that changed its object after the call
 * (a field, the blob's digest) had that written, unchecked, at a seq and under a session nothing had judged.
 */
function checkRequest(request: unknown): AppendRequest {
  if (typeof request !== 'object' || request === null)
    throw new ManifestError('INVALID_ARGUMENT', 'append request must be an object');
  const r = readOptionFields(request, REQUEST_FIELDS, 'append request', ManifestError, 'allowed');
  const checked: AppendRequest = {
    session: checkId(r.session, 'session'),
    principal: checkId(r.principal, 'principal'),
    seq: checkSeq(r.seq, 'seq'),
    prev: r.prev === null ? null : checkDigest(r.prev, 'prev'),
    id: checkDigest(r.id, 'id'),
    envelope: r.envelope as string,
  };
  if (typeof r.envelope !== 'string' || r.envelope.length === 0)
    throw new ManifestError('INVALID_ARGUMENT', 'envelope must be a non-empty string');
  // Stored exactly as given by every backend, or refused by all (PostgreSQL's text would replace a lone surrogate).
  if (UNSTORABLE_TEXT.test(r.envelope))
    throw new ManifestError('INVALID_ARGUMENT', 'envelope must be a string without NUL or lone surrogates');
  // Checked before the append is queued or its transaction begins: a malformed blob failed the embedded log's whole
  // batch (other sessions' appends with it) or PostgreSQL's insert (STORAGE_FAILED), and was stored as other bytes.
  if (r.blob !== undefined) {
    const blob = readOptionFields(
      checkObject<InlineBlob>(r.blob, 'blob'),
      ['digest', 'bytes'],
      'blob',
      ManifestError,
      'allowed',
    );
    const digest = checkDigest(blob.digest, 'blob.digest');
    if (!isUint8Array(blob.bytes))
      throw new ManifestError('INVALID_ARGUMENT', `blob.bytes must be a Uint8Array, not ${shownBytes(blob.bytes)}`);
    checked.blob = { digest, bytes: blob.bytes };
  }
  if (r.signed !== undefined) {
    const signed = readOptionFields(
      checkObject<{ keyId: string; createdAt: string }>(r.signed, 'signed'),
      ['keyId', 'createdAt'],
      'signed',
      ManifestError,
      'allowed',
    );
    checked.signed = { keyId: checkKeyId(signed.keyId), createdAt: checkTime(signed.createdAt, 'signed.createdAt') };
  }
  return checked;
}

export abstract class AbstractManifestLog implements ManifestLog {
  readonly grants: GrantTable;

  readonly signingKeys: SigningKeyTable;

  /** @param grants, signingKeys the backend's tables; callers reach them through the checked front. */
  protected constructor(grants: GrantTable, signingKeys: SigningKeyTable) {
    this.grants = new CheckedGrantTable(grants);
    this.signingKeys = new CheckedSigningKeyTable(signingKeys);
  }

  async head(session: string): Promise<ChainHead | undefined> {
    return this._head(checkId(session, 'session'));
  }

  async appendHead(session: string): Promise<ChainHead | undefined> {
    return this._appendHead(checkId(session, 'session'));
  }

  /** `appendHead` for a valid id: the stored head, unless the backend holds it in memory. */
  protected _appendHead(session: string): Promise<ChainHead | undefined> {
    return this._head(session);
  }

  async entry(session: string, seq: number): Promise<LogEntry | undefined> {
    const checked = checkId(session, 'session');
    // No log holds a seq above MAX_SEQ: nothing to ask the backend (PostgreSQL could not even compare it).
    if (checkCount(seq, 'seq') > MAX_SEQ) return undefined;
    return this._entry(checked, seq);
  }

  async headWindow(session: string): Promise<HeadWindow> {
    return this._headWindow(checkId(session, 'session'));
  }

  async *chain(session: string, options?: { fromSeq?: number | undefined }): AsyncIterable<LogEntry> {
    // Read once (a getter that throws: INVALID_ARGUMENT naming it, not an uncoded error).
    const { fromSeq } = readOptionFields(checkObject(options, 'options'), ['fromSeq'], 'chain options', ManifestError);
    const checked = checkId(session, 'session');
    const from = fromSeq === undefined ? 0 : checkCount(fromSeq, 'fromSeq');
    if (from > MAX_SEQ) return; // no log holds a seq above MAX_SEQ
    yield* this._chain(checked, from);
  }

  async *entries(options?: { afterPosition?: number | undefined }): AsyncIterable<LogEntry> {
    const { afterPosition } = readOptionFields(
      checkObject(options, 'options'),
      ['afterPosition'],
      'entries options',
      ManifestError,
    );
    // -1, "after nothing", is the start too: a tailing reader passes its last position or -1.
    const after = afterPosition === undefined ? -1 : checkCount(afterPosition, 'afterPosition', -1);
    yield* this._entries(after === -1 ? undefined : after);
  }

  heads(): AsyncIterable<ChainHead> {
    return this._heads();
  }

  async append(request: AppendRequest, options?: AppendOptions): Promise<LogEntry> {
    const { signal } = readOptionFields(checkObject(options, 'options'), ['signal'], 'append options', ManifestError);
    refuseNonSignal(signal, ManifestError);
    const checked = checkRequest(request);
    throwIfAborted(signal, ManifestError);
    return this._append(checked, signal);
  }

  /** `holdHead`'s arguments checked as `append` checks its own, for a backend that holds heads. */
  protected checkHold(session: unknown, options: unknown): { session: string; signal: AbortSignal | undefined } {
    const { signal } = readOptionFields(checkObject(options, 'options'), ['signal'], 'hold options', ManifestError);
    refuseNonSignal(signal, ManifestError);
    const checked = checkId(session, 'session');
    throwIfAborted(signal, ManifestError);
    return { session: checked, signal };
  }

  /** An append request checked as `append` checks it (a held head's append). */
  protected checkRequest(request: unknown): AppendRequest {
    return checkRequest(request);
  }

  async getWatermark(session: string): Promise<number | undefined> {
    return this._getWatermark(checkId(session, 'session'));
  }

  async setWatermark(session: string, seq: number): Promise<void> {
    return this._setWatermark(checkId(session, 'session'), checkSeq(seq, 'seq'));
  }

  async checkHeads(options?: { signal?: AbortSignal | undefined }): Promise<HeadProblem[]> {
    const { signal } = readOptionFields(
      checkObject(options, 'options'),
      ['signal'],
      'checkHeads options',
      ManifestError,
    );
    refuseNonSignal(signal, ManifestError);
    throwIfAborted(signal, ManifestError);
    return this._checkHeads(signal);
  }

  async close(): Promise<void> {
    return this._close();
  }

  /**
   * Walks every head, then every session with a watermark but no head, through the head rules, each session's facts
   * read in one round from one committed state (`_headWindow`): an append landing during the walk is not taken for
   * a rollback (a head read before it beside an entry or watermark read after it). A backend that can gather the
   * same facts in fewer round trips overrides this (PostgreSQL does). `signal` is looked at before each session's
   * facts are read (one flag read beside a round of reads): `CANCELLED` once it aborted.
   */
  protected async _checkHeads(signal?: AbortSignal): Promise<HeadProblem[]> {
    const problems: HeadProblem[] = [];
    // A corrupt record is a problem to report, not a reason to stop: the other sessions are still checked.
    const corrupt = (session: string, err: unknown) => {
      if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
      problems.push({ session, code: 'RECORD_CORRUPT', problem: err.message });
    };
    const check = async (session: string) => {
      throwIfAborted(signal, ManifestError);
      try {
        // Not held to the session-heads index here (every session's path at every open): each is at its first read.
        problems.push(...headProblems(await this._headWindow(session, { index: false })));
      } catch (err) {
        corrupt(session, err);
      }
    };
    try {
      // By session name: a damaged head is that session's problem (its head window reads it), and the walk goes on.
      for await (const session of this._headSessions()) await check(session);
    } catch (err) {
      corrupt('(unknown)', err);
    }
    try {
      for await (const session of this._headlessSessions()) await check(session);
    } catch (err) {
      corrupt('(unknown)', err);
    }
    return problems;
  }

  protected abstract _head(session: string): Promise<ChainHead | undefined>;
  protected abstract _entry(session: string, seq: number): Promise<LogEntry | undefined>;
  /**
   * `headWindow` for a valid id. `index: false`: the head is not held to the session-heads index (HeadWindow.index is
   * left undefined), as the head check of every session at open does.
   */
  protected abstract _headWindow(session: string, options?: { index?: boolean }): Promise<HeadWindow>;
  protected abstract _chain(session: string, fromSeq: number): AsyncIterable<LogEntry>;
  /** Entries after `afterPosition` (undefined: from the start). */
  protected abstract _entries(afterPosition: number | undefined): AsyncIterable<LogEntry>;
  protected abstract _heads(): AsyncIterable<ChainHead>;
  // The Merkle tree over the log (manifests/tlog/): each backend stores it in its own append batch.
  abstract treeHead(): Promise<LogTreeHead>;
  async treeNodes(ids: NodeId[]): Promise<Uint8Array[]> {
    return this._treeNodes(checkNodeIds(ids));
  }
  /** Stored node hashes for ids already checked (each a level from 0 to 63 and a safe non-negative index). */
  protected abstract _treeNodes(ids: NodeId[]): Promise<Uint8Array[]>;
  async sessionHeadNodes(paths: NodePath[]): Promise<Array<HeadsNode | undefined>> {
    return this._sessionHeadNodes(checkNodePaths(paths));
  }
  /** Stored session-heads index nodes at paths already checked (each names a node: checkNodePaths). */
  protected abstract _sessionHeadNodes(paths: NodePath[]): Promise<Array<HeadsNode | undefined>>;
  async entryAt(position: number): Promise<LogEntry | undefined> {
    return this._entryAt(checkCount(position, 'position'));
  }
  /** The entry at a position already checked (a safe non-negative integer), or `undefined`. */
  protected abstract _entryAt(position: number): Promise<LogEntry | undefined>;
  async positionOf(id: Digest): Promise<number | undefined> {
    return this._positionOf(checkDigest(id, 'id'));
  }
  /** The lowest position of an id already checked (a blake3 digest), or `undefined`. */
  protected abstract _positionOf(id: Digest): Promise<number | undefined>;
  origin(): Promise<string | undefined>;
  origin(proposed: string): Promise<string>;
  async origin(proposed?: string): Promise<string | undefined> {
    // What a ledger could sign checkpoints under (isValidOrigin), else nothing is stored: PostgreSQL's text could not
    // hold a NUL or a lone surrogate as given, and the embedded log stored anything.
    if (proposed !== undefined && (typeof proposed !== 'string' || !isValidOrigin(proposed)))
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `origin ${shownValue(proposed, 80)} is not a valid origin (${ORIGIN_RULE})`,
      );
    // A name the CLI would print escaped is not given to a log that has none; one stored already (a log named before
    // the rule) is answered as ever, whatever is proposed.
    if (proposed !== undefined && !isNewOrigin(proposed)) {
      const stored = await this._origin(undefined);
      if (stored === undefined)
        throw new ManifestError(
          'INVALID_ARGUMENT',
          `origin ${shownValue(proposed, 80)} is refused: ${NEW_ORIGIN_RULE}`,
        );
      return stored;
    }
    return this._origin(proposed);
  }
  /** The stored origin, storing `proposed` (a valid origin) first when none is. */
  protected abstract _origin(proposed: string | undefined): Promise<string | undefined>;

  /**
   * Set at open when the stored tree cannot be the tree of the stored entries (LevelDB: a damaged tree or index record,
   * leaves and positions that disagree; PostgreSQL: more leaves than positions, or fewer while a node past them is
   * stored; either: a position the tree built at open reached holding no entry): every append is refused with it.
   */
  protected treeDamage: string | undefined;

  /** The tree damage found at open, which refuses every append (ManifestLog.appendRefusal). */
  appendRefusal(): ManifestError | undefined {
    return this.treeDamage === undefined
      ? undefined
      : new ManifestError('TREE_DAMAGED', `${this.treeDamage}; run fsck`);
  }

  /**
   * What an append to `session` would be refused with whatever it holds (ManifestLog.sessionAppendRefusal): the
   * store's `appendRefusal()`, else `ROLLBACK` when the chain was cut back, judged by the rule the backend's append
   * judges by (`cutBackProblems`) on the facts it reads (`_cutBackFacts`), else the session's path in the session-heads
   * index not whole (`indexDamage`: `TREE_DAMAGED` / `RECORD_CORRUPT`, as the append's index update refuses it, met
   * after the rule there too).
   */
  async sessionAppendRefusal(session: string): Promise<ManifestError | undefined> {
    const checked = checkId(session, 'session');
    const refused = this.appendRefusal();
    if (refused) return refused;
    const facts = await this._cutBackFacts(checked);
    const [problem] = cutBackProblems(facts);
    if (problem !== undefined) return rollbackRefused(checked, problem);
    return facts.indexDamage && new ManifestError(facts.indexDamage.code, facts.indexDamage.problem);
  }

  /**
   * The facts an append to `session` judges a cut-back chain by, as it would read them now. By default the session's
   * head window as committed, its head held to the session-heads index (`HeadWindow.index`: a `ROLLBACK` is
   * `indexProblem`, a path not whole `indexDamage`, as both logs' own facts give them: `indexFacts`). A log whose
   * append reads them from its own memory overrides it with that.
   */
  protected async _cutBackFacts(session: string): Promise<CutBackFacts> {
    const window = await this._headWindow(session);
    return { ...window, ...indexFacts(window.index) };
  }

  /** The append itself; the request is well-formed and the signal was not aborted when it was called. */
  protected abstract _append(request: AppendRequest, signal: AbortSignal | undefined): Promise<LogEntry>;
  protected abstract _getWatermark(session: string): Promise<number | undefined>;
  protected abstract _setWatermark(session: string, seq: number): Promise<void>;
  /**
   * The sessions that have a head, for `_checkHeads`: by default those `_heads` lists, which ends at a head record it
   * cannot parse. A backend that can list them without parsing each head (the embedded log: its `h!` keys) overrides
   * it, so that a damaged head is reported as its session's problem and the sessions after it are still checked.
   */
  protected async *_headSessions(): AsyncIterable<string> {
    for await (const head of this._heads()) yield head.session;
  }
  /** Sessions that have a watermark but no head (their chain was removed), for `_checkHeads`. */
  protected abstract _headlessSessions(): AsyncIterable<string>;
  protected abstract _close(): Promise<void>;
}

const GRANT_STATES: ReadonlySet<unknown> = new Set(['granted', 'revoked']);

/** The grant table behind the same front: ids in their grammar (`'*'` for a session), records well-formed. */
class CheckedGrantTable implements GrantTable {
  constructor(private readonly inner: GrantTable) {}

  async get(principal: string, session: string): Promise<GrantRecord | undefined> {
    return this.inner.get(checkId(principal, 'principal'), checkId(session, 'session', true));
  }

  async forSession(principal: string, session: string): Promise<{ here?: GrantRecord; everywhere?: GrantRecord }> {
    checkId(principal, 'principal');
    checkId(session, 'session', true);
    if (this.inner.forSession) return this.inner.forSession(principal, session);
    const [here, everywhere] = await Promise.all([this.inner.get(principal, session), this.inner.get(principal, '*')]);
    return { ...(here ? { here } : {}), ...(everywhere ? { everywhere } : {}) };
  }

  async put(record: GrantRecord): Promise<void> {
    // Each field read once (a getter that throws: INVALID_ARGUMENT), and what is checked is what is stored.
    const r = readOptionFields(
      checkObject<GrantRecord>(record, 'grant record'),
      ['principal', 'session', 'state', 'at', 'by'],
      'grant record',
      ManifestError,
      'allowed', // a record, not options: one read back from a table may carry more
    );
    checkId(r.principal, 'principal');
    checkId(r.session, 'session', true);
    if (!GRANT_STATES.has(r.state))
      throw new ManifestError('INVALID_ARGUMENT', `grant state must be 'granted' or 'revoked'`);
    // Date.parse reads past a NUL, which PostgreSQL's text cannot hold: refused by every backend.
    if (!isGrantTime(r.at) || UNSTORABLE_TEXT.test(r.at))
      throw new ManifestError('INVALID_ARGUMENT', 'grant time (at) must be an ISO date');
    if (r.by !== undefined && (typeof r.by !== 'string' || UNSTORABLE_TEXT.test(r.by)))
      throw new ManifestError('INVALID_ARGUMENT', 'grant author (by) must be a string without NUL or lone surrogates');
    if (typeof r.by === 'string' && r.by.length > MAX_GRANT_BY_UNITS)
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `grant author (by) is ${r.by.length} characters long; at most ${MAX_GRANT_BY_UNITS} are stored`,
      );
    return this.inner.put(r as unknown as GrantRecord);
  }

  async list(filter?: { principal?: string; session?: string }): Promise<GrantRecord[]> {
    const f = readOptionFields(checkObject(filter, 'filter'), ['principal', 'session'], 'filter', ManifestError);
    if (f.principal !== undefined) checkId(f.principal, 'principal');
    if (f.session !== undefined) checkId(f.session, 'session', true);
    return this.inner.list(f as { principal?: string; session?: string });
  }
}

/** The signing-key table behind the same front: key ids printable, the chosen window end a valid time. */
class CheckedSigningKeyTable implements SigningKeyTable {
  constructor(private readonly inner: SigningKeyTable) {}

  async get(keyId: string): Promise<SigningKeyRecord | undefined> {
    return this.inner.get(checkKeyId(keyId));
  }

  async close(keyId: string, choose: (record: SigningKeyRecord | undefined) => string): Promise<string> {
    if (typeof choose !== 'function') throw new ManifestError('INVALID_ARGUMENT', 'choose must be a function');
    return this.inner.close(checkKeyId(keyId), (record) => checkTime(choose(record), 'window end'));
  }

  keyIds(): AsyncIterable<string> {
    return this.inner.keyIds();
  }
}

/**
 * The inline blob table behind the same front, which each backend wraps its own in: digests in their grammar
 * (`INVALID_ID`, as the log's ids), delete options well-formed (`INVALID_ARGUMENT`, as BlobStore.delete refuses them).
 * Before it, PostgreSQL answered a malformed digest as absent where the embedded log threw, and a `storedBeforeMs` of
 * NaN removed the blob from the embedded log (no bound) while Infinity removed it from PostgreSQL.
 */
export class CheckedInlineBlobTable implements InlineBlobTable {
  /** The inner table's clock, where it has one of its own (InlineBlobTable.clock). */
  readonly clock?: () => Promise<number>;

  constructor(private readonly inner: InlineBlobTable) {
    if (inner.clock) this.clock = () => inner.clock!();
  }

  async get(digest: Digest): Promise<Uint8Array | undefined> {
    return this.inner.get(checkDigest(digest, 'digest'));
  }

  async stat(digest: Digest): Promise<{ size: number; storedAtMs: number } | undefined> {
    return this.inner.stat(checkDigest(digest, 'digest'));
  }

  list(): AsyncIterable<Digest> {
    return this.inner.list();
  }

  async delete(digest: Digest, options?: InlineDeleteOptions): Promise<boolean> {
    const checked = checkDigest(digest, 'digest');
    const { storedBeforeMs, signal } = readOptionFields(
      checkObject(options, 'options'),
      ['storedBeforeMs', 'signal'],
      'inline blob delete options',
      ManifestError,
    );
    refuseNonSignal(signal, ManifestError, 'inline blob delete options: ');
    throwIfAborted(signal, ManifestError);
    const withSignal = signal === undefined ? {} : { signal };
    if (storedBeforeMs === undefined) return this.inner.delete(checked, withSignal);
    if (typeof storedBeforeMs !== 'number' || !Number.isFinite(storedBeforeMs))
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `storedBeforeMs must be a finite number, got ${shownValue(storedBeforeMs)}`,
      );
    return this.inner.delete(checked, { storedBeforeMs, ...withSignal });
  }
}
