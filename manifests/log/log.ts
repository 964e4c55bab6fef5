/**
 * The manifest log contract: per-session hash chains plus one global order, and the durable grant
 * table. Every backend (LevelDB, PostgreSQL) extends AbstractManifestLog (./abstract-log.ts), which checks
 * arguments once, and runs the same conformance suite.
 */
import type { Digest } from '../../store/hash/digest.js';
import type { HeadProblem } from '../chain/head-rules.js';
import type { NodeId, TreeHead } from '../tlog/tree.js';
import type { HeadsNode, NodePath } from '../tlog/session-heads.js';
import type { ManifestError } from '../errors.js';

/** One record of `ManifestLog.idPositions`: the position `positionOf` answers for `id`, or why it cannot. */
export type IdPositionRecord = { id: string; position: number } | { id: string; corrupt: ManifestError };

/** The log's tree head with its session-heads index root (manifests/tlog/session-heads.ts), read together. */
export interface LogTreeHead extends TreeHead {
  /** The root of the index of every session's head at `size` entries (absent: the log keeps no index). */
  sessionHeads?: Uint8Array | undefined;
}

/** One appended manifest, as stored. */
export interface LogEntry {
  /** Position in the global log (0, 1, 2, … in append order across all sessions). */
  position: number;
  session: string;
  seq: number;
  id: Digest;
  /** The principal that published it (also inside the signed payload). */
  principal: string;
  /** The DSSE envelope exactly as stored: one line of JSON. */
  envelope: string;
}

export interface ChainHead {
  session: string;
  seq: number;
  id: Digest;
  /** The principal that published seq 0: the session's owner. */
  owner: string;
}

/**
 * A session's head with the entries around it, read in one round from one committed state (`headWindow`):
 * what resume needs, and what the head rules (manifests/chain/head-rules.ts) judge.
 */
export interface HeadWindow {
  session: string;
  head: ChainHead | undefined;
  /** The stored entry at the head's seq (undefined: none, or no head). */
  entryAtHead: LogEntry | undefined;
  /** The stored entry at the head's seq − 1 (undefined: none, no head, or the head is at seq 0). */
  entryBeforeHead: LogEntry | undefined;
  /**
   * True when an entry is stored at the seq after the head; with no head, when the session has any entry at all
   * (the `ROLLBACK` rule, `cutBackProblems`: with the head, the watermark and entry 0 removed, seq 1… still tell).
   */
  entryBeyondHead: boolean;
  /** The session's watermark (undefined: none recorded); it only rises, so it may be read beside the rest. */
  watermark: number | undefined;
  /**
   * How the session-heads index of the same state disagrees with the head (`indexedHeadProblem`: `ROLLBACK`, a whole
   * index committing another head or none; `TREE_DAMAGED` / `RECORD_CORRUPT`, a path that is not whole, or an index
   * the open could not read or build); undefined when it agrees or is not read. The embedded log holds each session's
   * head to it at its first read in a process (a head record set back with its tail and watermark, before the process
   * opened the store: `ROLLBACK`), and knows the heads it writes itself; PostgreSQL reads the session's path in the
   * window's statement, every time (other hosts write heads too: docs/ARCHITECTURE.md, "Session heads").
   * `appendProblem` (`TREE_DAMAGED`): the same damage as an append's index update over the path words its refusal (the
   * deepest stored node on the path that does not hash its children), for `sessionAppendRefusal` to refuse with.
   */
  index?:
    | { code: 'ROLLBACK' | 'TREE_DAMAGED' | 'RECORD_CORRUPT'; problem: string; appendProblem?: string | undefined }
    | undefined;
}

export interface AppendRequest {
  session: string;
  principal: string;
  /** At most MAX_SEQ (2^31 − 1, abstract-log.ts), else `INVALID_ARGUMENT`. */
  seq: number;
  /** Must equal the current head's id (null for seq 0), else `CHAIN_CONFLICT`. */
  prev: Digest | null;
  id: Digest;
  /**
   * The DSSE envelope, stored exactly as given: a non-empty string without NUL or a lone surrogate (no backend
   * could return those as given), else `INVALID_ARGUMENT`.
   */
  envelope: string;
  /**
   * A blob small enough to live in the log (the summary the entry names), committed in the same atomic,
   * durable write as the entry: both or neither. A blob already stored under this digest is kept as it is. A digest
   * that is not a blake3 digest is `INVALID_ID`, bytes that are not a Uint8Array `INVALID_ARGUMENT`, refused before
   * the append is queued (nothing written, no other append affected).
   */
  blob?: InlineBlob | undefined;
  /**
   * The key that signed the entry and the entry's `createdAt` (the ledger always passes them). The append
   * records the newest `createdAt` per key with the entry, and refuses one dated at or after the key's closed
   * window (`SigningKeyTable.close`) with `KEY_EXPIRED`.
   */
  signed?: { keyId: string; createdAt: string } | undefined;
}

/** What the log knows of one signing key, kept with the entries so that every process and restart sees it. */
export interface SigningKeyRecord {
  keyId: string;
  /** The newest `createdAt` of an entry appended under this key. */
  lastSignedAt?: string | undefined;
  /** Where a rotation or revocation ended the key's window: appends dated at or after it are refused. */
  closedAt?: string | undefined;
}

/**
 * Signing keys as the log has seen them. Rotation reads the newest `createdAt` a key signed and closes its
 * window in one step ordered with every append (LevelDB: after the appends queued in this, the only, process;
 * PostgreSQL: under the global counter row's lock that every append takes), so an append either committed
 * before the window end was chosen, and the end lies after it, or it is refused and re-signed with the new key.
 */
export interface SigningKeyTable {
  get(keyId: string): Promise<SigningKeyRecord | undefined>;
  /**
   * Closes `keyId`'s window at the instant `choose` returns (an ISO time with milliseconds), called with the
   * key's record once no append of it is in flight. Returns that instant.
   */
  close(keyId: string, choose: (record: SigningKeyRecord | undefined) => string): Promise<string>;
  /** The id of every key with a record, in id order (fsck reads each with `get`, so a corrupt one is one finding). */
  keyIds(): AsyncIterable<string>;
}

/** Bytes stored in the log itself under their BLAKE3 digest. The log does not hash them: readers re-hash. */
export interface InlineBlob {
  digest: Digest;
  bytes: Uint8Array;
}

/**
 * The blobs a log holds inline (written only by `append`). Reads return the stored bytes unverified: the
 * caller re-hashes them, as it does a file's. Every method refuses a digest that is not a blake3 digest with
 * `INVALID_ID`, and `delete` options that are not an object or a `storedBeforeMs` that is not a finite number with
 * `INVALID_ARGUMENT` (nothing removed), in front of every backend (abstract-log.ts).
 */
export interface InlineBlobTable {
  get(digest: Digest): Promise<Uint8Array | undefined>;
  /** Size and storage time (ms since epoch: the last append that wrote these bytes), or `undefined` when absent. */
  stat(digest: Digest): Promise<{ size: number; storedAtMs: number } | undefined>;
  list(): AsyncIterable<Digest>;
  /**
   * Removes an inline blob (garbage collection only). Absent blobs are not an error. With `storedBeforeMs`, only
   * while its storage time is still before that instant (an append of the same bytes refreshes it), as
   * `BlobStore.delete`: true when removed. An abort of `options.signal` ends it only before it removes anything
   * (`CANCELLED`: at the call, or while it waits for the appends in flight (LevelDB) or for an append's row lock
   * (PostgreSQL)); the judgement and its removal run whole.
   */
  delete(digest: Digest, options?: InlineDeleteOptions): Promise<boolean>;
  /**
   * The time by the clock the table records storage times with (ms since epoch), where that is not this process's
   * (PostgreSQL: the server's), as `BlobStore.clock`: gc measures the grace of an inline blob against it. Absent:
   * `Date.now()` (the embedded log dates its inline blobs by this host's clock).
   */
  clock?(): Promise<number>;
}

/** Options of `InlineBlobTable.delete`, as `BlobStore.delete`'s. */
export interface InlineDeleteOptions {
  storedBeforeMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

export interface AppendOptions {
  signal?: AbortSignal | undefined;
}

/**
 * A chain's head held for one append of its holder's (`ManifestLog.holdHead`): no other writer's append can move it
 * until the hold ends.
 */
export interface HeadHold {
  /** The head the held append extends. */
  readonly head: ChainHead;
  /**
   * Appends `request`, built on `head`, in the hold's transaction, which ends the hold: answers as `append` does
   * (`CHAIN_CONFLICT` only for a request that does not extend `head`), `CANCELLED` once the hold's signal aborted and
   * `STORAGE_FAILED` once the log was closed (nothing written: a close ends the holds still open). One append per hold,
   * to the held session: another is refused `INVALID_ARGUMENT`.
   */
  append(request: AppendRequest): Promise<LogEntry>;
  /** Ends the hold with nothing written (after `append`: waits for its answer). Never rejects. */
  release(): Promise<void>;
}

export type GrantState = 'granted' | 'revoked';

/**
 * One row of the grant table: `principal`'s access to `session`. `session: '*'` is principal-wide:
 * revoking it suspends the principal everywhere (own sessions included), granting it lifts that.
 */
export interface GrantRecord {
  principal: string;
  session: string;
  state: GrantState;
  /** ISO time of the last change (a date Date.parse reads, without NUL or a lone surrogate, else `INVALID_ARGUMENT`). */
  at: string;
  /**
   * Who made the change (free text, e.g. an operator id; at most 1,024 UTF-16 code units, MAX_GRANT_BY_UNITS, with no NUL
   * or lone surrogate, else `INVALID_ARGUMENT` and nothing written).
   */
  by?: string | undefined;
}

export interface GrantTable {
  /**
   * @throws ManifestError `RECORD_CORRUPT` for a stored grant that is not one (LevelDB: not JSON, a field of the wrong
   *   kind, another principal or session than its key; both backends: an `at` that is not a date), never served as
   *   a grant
   */
  get(principal: string, session: string): Promise<GrantRecord | undefined>;
  /**
   * The principal's grant for `session` and its grant everywhere (`'*'`), as two `get`s return them; optional, for a
   * backend that reads both at once (PostgreSQL: one statement). Authorization reads it where a table has it.
   * @throws ManifestError `RECORD_CORRUPT` as `get`
   */
  forSession?(
    principal: string,
    session: string,
  ): Promise<{ here?: GrantRecord | undefined; everywhere?: GrantRecord | undefined }>;
  /** Writes the record durably (sync). */
  put(record: GrantRecord): Promise<void>;
  /** @throws ManifestError `RECORD_CORRUPT` at the first stored grant that is not one, as `get` */
  list(filter?: { principal?: string; session?: string }): Promise<GrantRecord[]>;
}

export interface ManifestLog {
  /**
   * Grants. A revocation is ordered with appends: once `put` of a revoked record resolves, no append by that
   * principal (for that session, or anywhere for `'*'`) commits; such an append is refused with `REVOKED`.
   */
  readonly grants: GrantTable;
  readonly signingKeys: SigningKeyTable;
  /** Present when the log can store small blobs inline (`AppendRequest.blob`); both built-in logs can. */
  readonly inlineBlobs?: InlineBlobTable | undefined;
  head(session: string): Promise<ChainHead | undefined>;
  /**
   * The head the next append to `session` must extend, as the log itself will check it: the embedded log, its
   * store's only writer, answers from memory (the head its own last append wrote); a shared log reads it like
   * `head`. A writer builds the next manifest on it. Readers that verify what is stored (resume) use `head`.
   */
  appendHead?(session: string): Promise<ChainHead | undefined>;
  /** The entry at `seq` (undefined above MAX_SEQ, which no log holds). */
  entry(session: string, seq: number): Promise<LogEntry | undefined>;
  /**
   * The session's head, the entries at, before and beyond it, and its watermark, in one round of reads (LevelDB:
   * one snapshot; PostgreSQL: one query), so an append that commits meanwhile is either wholly seen or not at
   * all. The same records `head` and `entry` return, with the same errors.
   * @throws ManifestError `RECORD_CORRUPT` for a damaged record (LevelDB), `STORAGE_FAILED`, `INVALID_ID`
   */
  headWindow(session: string): Promise<HeadWindow>;
  /** One session's chain in seq order, from `fromSeq` (default 0). */
  chain(session: string, options?: { fromSeq?: number }): AsyncIterable<LogEntry>;
  /** Every entry in global log order, after `afterPosition` (default: from the start). */
  entries(options?: { afterPosition?: number }): AsyncIterable<LogEntry>;
  /** Every chain head. */
  heads(): AsyncIterable<ChainHead>;
  /**
   * Appends atomically and durably: the entry, the new head, the global position, the session's
   * watermark (raised to the new seq) and the tree's new nodes commit together or not at all. When it
   * resolves, the entry is durable. An abort of `options.signal` before the append commits rejects it `CANCELLED`
   * with nothing written (PostgreSQL: until COMMIT is sent, the statement waiting for a lock cancelled; LevelDB: while
   * it waits in the queue); from then on the abort changes nothing.
   * An append to a chain that was cut back (its head below the session's watermark, or entries beyond its head) is
   * refused `ROLLBACK`: it would sign a second manifest for a seq that exists.
   * @throws ManifestError `ENVELOPE_INVALID` (no base64 payload: judged first, whatever the chain holds), `CHAIN_CONFLICT`
   *   (head moved), `ROLLBACK` (chain cut back), `KEY_EXPIRED` (dated at or after its key's closed window), `REVOKED` (the
   *   principal is revoked), `STORAGE_FAILED`,
   *   `CANCELLED`; `INVALID_ID`, `INVALID_ARGUMENT` for a malformed request or options (a field that throws as it is read)
   */
  append(request: AppendRequest, options?: AppendOptions): Promise<LogEntry>;
  /**
   * The refusal every append meets now, whatever it holds, as `append` throws it: a tree or index record found damaged
   * when the log was opened (`TREE_DAMAGED`: the store opens for fsck, appends would build on that tree). Undefined
   * while appends may go on. A caller that checks before it appends (`Ledger.checkPublish`) asks it. Absent: none.
   */
  appendRefusal?(): ManifestError | undefined;
  /**
   * Holds `session`'s head for one append of the caller's: a shared log, where a writer can lose the race for a head to
   * another process (`CHAIN_CONFLICT`) again and again while that one keeps appending, lets the loser build its next
   * manifest on a held head, which cannot move under it. Other writers' appends to the session wait for the hold (up to
   * their lock wait), so a holder holds it only while it signs. Undefined when there is nothing to hold (a chain with
   * no head yet) or the log holds as many heads as it can now (it needs a connection besides each hold's): the caller
   * appends as usual. The holder must end every hold (`append` or `release`). Absent: the log has one writer (the
   * embedded log: the ledger's own lock orders its appends).
   * @throws ManifestError as `append` before its transaction (`appendRefusal()`, `CANCELLED`, `INVALID_ID`,
   *   `INVALID_ARGUMENT`), `LOCKED` (the head's lock wait timed out), `STORAGE_FAILED`
   */
  holdHead?(session: string, options?: AppendOptions): Promise<HeadHold | undefined>;
  /**
   * The refusal an append to `session` meets now whatever it holds, as `append` throws it: `appendRefusal()`, or
   * `ROLLBACK` for a chain cut back (its head below the session's watermark, or entries beyond its head, or a head the
   * session-heads index does not commit), judged by the append's own rule on the facts the append reads, or the
   * session's path in the session-heads index not whole (`TREE_DAMAGED`: a node on it or beside it does not hash to the
   * stored root; `RECORD_CORRUPT`: a node that cannot be read), which the append's index update refuses, with its code
   * and message. Undefined while an append to the session may go on (it may still lose a race, be revoked, …). A caller
   * that checks before it appends (`Ledger.checkPublish`) asks it. Absent: none known before the append.
   * @throws ManifestError `INVALID_ID`, `RECORD_CORRUPT` (a damaged head or watermark record), `STORAGE_FAILED`
   */
  sessionAppendRefusal?(session: string): Promise<ManifestError | undefined>;
  /**
   * The RFC 6962 tree over every entry in global order (leaf i = the signed payload bytes of position i),
   * as committed: it grows in the append's own batch or transaction. With it, from the same committed state,
   * the root of the session-heads index (each session's head, updated in the same batch or transaction).
   */
  treeHead(): Promise<LogTreeHead>;
  /**
   * True when no other process writes the store while this log is open (the embedded store holds its lock);
   * a shared log (PostgreSQL) is not exclusive. The checkpoint pin then keeps its file open between pins.
   */
  readonly exclusive?: boolean | undefined;
  /**
   * True only when this log object grew its current tree itself, by its own appends as the store's only writer,
   * from the tree `(size, root)` it reported earlier from the same memory: the current tree then extends that one,
   * and a checkpoint guard needs no consistency proof read back from storage. False (or absent) means "prove it".
   */
  grewFrom?(size: number, root: Uint8Array): boolean;
  /**
   * The largest tree this log object's own appends committed (`head`, a state of the log as it was committed, which
   * other writers of a shared log may have grown since), and `grewFrom(size, root)`: true only when that tree was
   * grown from the tree `(size, root)` by this object's own transactions, one after another, each of which read the
   * nodes of the tree it grew from under the log's lock (PostgreSQL: the counter row's). That read is what a
   * consistency proof read back from storage would be: a checkpoint guard pins `head` after its own append without
   * reading the tree again (`CheckpointGuard.sync`'s `afterOwnAppend`). Absent or undefined: none known ("read it").
   */
  ownGrowth?(): { head: LogTreeHead; grewFrom(size: number, root: Uint8Array): boolean } | undefined;
  /**
   * Registers the one listener told the tree each append batch will commit, as soon as that batch is on its way to
   * storage and before it is durable (the embedded store): a checkpoint guard signs it meanwhile, so the pin after
   * the commit does not wait for a signature. The tree is not committed when the listener hears of it (the batch
   * may still fail): nothing may pin, return or publish it before `treeHead` reports it. Absent: nothing is told.
   * Returns the listener's removal (a later registration replaces it; removing a replaced listener does nothing).
   */
  onCommitting?(listener: (head: LogTreeHead) => void): () => void;
  /**
   * Stored nodes of the session-heads index (undefined where a subtree is empty), as committed now: a caller
   * that needs them at a checkpoint checks the proof against the checkpoint's root. Absent: no index.
   * @throws ManifestError `RECORD_CORRUPT` for a damaged node record, `INVALID_ARGUMENT` (a path that names no node: a
   *   depth outside 0…256, a prefix that is not 32 bytes in a Uint8Array or has a bit set past the depth, a list that is
   *   not an array), `STORAGE_FAILED`
   */
  sessionHeadNodes?(paths: NodePath[]): Promise<Array<HeadsNode | undefined>>;
  /** How many nodes the session-heads index stores (fsck holds it to the index of the heads: none on no path). */
  sessionHeadNodeCount?(): Promise<number>;
  /**
   * Stored hashes of perfect subtrees (manifests/tlog/tree.ts).
   * @throws ManifestError `TREE_DAMAGED` (a node not stored), `INVALID_ARGUMENT` (an id that names no node: a level
   *   outside 0…63, an index that is not a safe non-negative integer, a list that is not an array)
   */
  treeNodes(ids: NodeId[]): Promise<Uint8Array[]>;
  /**
   * The entry at a global position, or `undefined`.
   * @throws ManifestError `INVALID_ARGUMENT` for a position that is not a safe non-negative integer
   */
  entryAt(position: number): Promise<LogEntry | undefined>;
  /**
   * The global position of a manifest id, or `undefined`. An id appended more than once (the ledger never does: every
   * manifest names its session and seq; a caller of the log can) is found on PostgreSQL at its lowest position, the
   * first; on the embedded log at the first of the batch that first appended it, and at its latest position once a later
   * batch appends it again (it writes the id's record without reading it: a read per append made LevelDB compact about
   * twice as often, ~70–100 µs of CPU a publish). fsck reports every position of such an id that no record names.
   * @throws ManifestError `INVALID_ID` for an id that is not a blake3 digest
   */
  positionOf(id: Digest): Promise<number | undefined>;
  /**
   * Every record `positionOf` answers from, in id order, read in one pass (fsck holds them to the entries: each must
   * name the position of the manifest with its id). LevelDB: the `i!<id>` records; PostgreSQL: each id of `entries`
   * with its lowest position (what `positionOf` answers). A record that cannot be parsed is listed with its
   * `RECORD_CORRUPT` error, naming it, and the listing goes on. Absent: the log keeps no such records apart.
   */
  idPositions?(): AsyncIterable<IdPositionRecord>;
  /**
   * The log's origin (its unique name in checkpoints): the stored one, or `proposed`, stored durably by
   * the first caller, so that every host sharing a store signs under one name. Without `proposed`, only reads:
   * the stored one, or `undefined`. A `proposed` that is not a valid origin (manifests/format/checkpoint.ts,
   * `isValidOrigin`) is `INVALID_ARGUMENT`, nothing stored, whether or not an origin is stored. A valid one the CLI
   * would print escaped (`isNewOrigin`: a bidi or format character, a backslash…) is `INVALID_ARGUMENT` when none is
   * stored; a stored one is answered as ever (a log named before that rule keeps its name).
   */
  origin(): Promise<string | undefined>;
  origin(proposed: string): Promise<string>;
  /** Highest seq a reader of this log has verified for `session` (rollback protection). */
  getWatermark(session: string): Promise<number | undefined>;
  /**
   * Raises the watermark; a seq above MAX_SEQ is `INVALID_ARGUMENT`. A mark above the session's head says the chain
   * was cut back: every later append to the session is refused `ROLLBACK` (as resume refuses its head), and no call
   * lowers it. The ledger raises it only to a head it verified.
   */
  setWatermark(session: string, seq: number): Promise<void>;
  /**
   * The recovery check a ledger runs at open: every head names a stored entry with its id, no entry lies
   * beyond a head, and no head is below its session's watermark (head-rules.ts). Empty when all hold. `signal` ends
   * the walk once it aborts (`CANCELLED`), looked at as each session (PostgreSQL: each page of sessions) is checked: a
   * ledger's open over many chains stops promptly. A backend of the caller's may ignore it.
   */
  checkHeads(options?: { signal?: AbortSignal | undefined }): Promise<HeadProblem[]>;
  /**
   * Runs `fn` with a read-only view of this log at one moment: every read of the view (heads, entries, the tree,
   * the session-heads index, inline blobs, key records) sees the log as it was when the view began, whatever
   * commits meanwhile, so a reader that walks the log in several passes (fsck) sees one state. The view refuses
   * writes; it is valid until `fn` settles and must not be closed. Absent: reads are not isolated from appends.
   * `signal` ends the snapshot once it aborts (`CANCELLED`): PostgreSQL's connection for it, one still being made
   * included, or the read of the view it is running (a wait for a lock too); LevelDB's is looked at before the
   * snapshot is taken. A backend of the caller's may ignore it.
   */
  readSnapshot?<T>(fn: (view: ManifestLog) => Promise<T>, options?: { signal?: AbortSignal | undefined }): Promise<T>;
  close(): Promise<void>;
}
