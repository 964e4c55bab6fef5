/**
 * The embedded manifest log on LevelDB (`level`). One process owns a store (LevelDB's lock); a second
 * opener gets `LOCKED`. Keys encode ids unambiguously: ids never contain `!`, which sorts below every id
 * character, so `e!<session>!` prefixes cannot overlap.
 *
 *   e!<session>!<seq:12 hex>   entry (JSON)          h!<session>        head (JSON)
 *   p!<position:16 hex>        key of the entry      g!<principal>!<session>  grant (JSON)
 *   w!<session>                highest verified seq (rollback watermark)
 *   b!<64 hex>                 inline blob bytes     t!<64 hex>         its size and storage time (JSON)
 *   k!<keyId>                  newest createdAt the key signed, and its closed window end (JSON)
 *   n!…, i!…, m!origin         the Merkle tree over the global order (./tree.ts)
 *   x!…, m!session-heads       the session-heads index (./session-heads.ts)
 *
 * Group commit: appends that arrive while a batch is being made durable wait and share the next one,
 * so concurrent publishes on different chains pay one fsync between them.
 */
import { mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Level } from 'level';
import { onAbort, settledOrAborted } from '../../../store/abort.js';
import {
  refuseOutsideOpen,
  OPENING,
  OPERATION_CANCELLED,
  quoted,
  readOptionFields,
  refuseNonSignal,
  shownValue,
  throwIfAborted,
  type NamesEveryField,
} from '../../../store/errors.js';
import { isPathName } from '../../../store/fs/safe-dir.js';
import type { Digest } from '../../../store/hash/digest.js';
import { ManifestError, rollbackRefused } from '../../errors.js';
import { isPastable } from '../../encoding/printable.js';
import {
  parseEntryRecord,
  parseHeadRecord,
  parsePositionKey,
  parsePositionRecord,
  parseCountRecord,
  parseIdPositionRecord,
  parseWatermarkRecord,
} from './records.js';
import { AbstractManifestLog, CheckedInlineBlobTable, readSnapshotSignal } from '../abstract-log.js';
import { cutBackProblems, indexFacts, type CutBackFacts } from '../../chain/head-rules.js';
import {
  inlineBlobOps,
  LevelGrantTable,
  LevelInlineBlobs,
  LevelSigningKeys,
  type AppendQueue,
  type BatchOp,
  readRange,
  readRecord,
  storageFailed,
  writeSyncedBatch,
} from './tables.js';
import type {
  AppendRequest,
  ChainHead,
  HeadWindow,
  IdPositionRecord,
  InlineBlobTable,
  LogEntry,
  LogTreeHead,
  ManifestLog,
} from '../log.js';
import { leafOfEnvelope } from '../../tlog/leaf.js';
import { equalBytes } from '../../tlog/merkle.js';
import { rootOf, treeHeadAt, type NodeId, type TreeHead, type TreeNode } from '../../tlog/tree.js';
import {
  indexedHeadProblem,
  type HeadsNode,
  type IndexedHeadProblem,
  type NodePath,
} from '../../tlog/session-heads.js';
import {
  HEADS_BUILT_KEY,
  headsNodeKey,
  HeadsNodeCache,
  headsPuts,
  type HeadsPuts,
  readHeadsNodes,
  readHeadsRoot,
  rebuildSessionHeads,
} from './session-heads.js';
import { parseHeadsNodeRecord } from './records.js';
import { backfillTree, idKey, loadFrontier, nodeKey, ORIGIN_KEY, readNodes, readTreeSize, treePuts } from './tree.js';

export type { BatchOp } from './tables.js';

export interface LevelManifestLogOptions {
  /**
   * Writes one atomic batch durably. The default is `writeSyncedBatch` (one LevelDB batch, `sync: true`); the
   * fault-injection tests wrap it to make the commit fail.
   */
  writeBatch?: ((db: Level<string, string>, ops: BatchOp[]) => Promise<void>) | undefined;
  /**
   * Ends the open: once it aborts, `LevelManifestLog.open` rejects `CANCELLED` (the signal's reason as the cause) with
   * the database closed again and its lock released, so a later open works. LevelDB's own open (taking its lock,
   * replaying its write-ahead log) is one native call that cannot be interrupted: the signal is looked at before it
   * and right after it, and a database it opened is closed again. Within the steps that go over many items, those of
   * a store written by an older version, it is looked at before each item: the session-heads index built from every
   * head (written whole or not marked built: the next open builds it again) and the tree's backfill (batches of up
   * to 1,000 leaves, each written whole with its size: the next open goes on from there). The log keeps none.
   * `openLedger` passes its own `signal` (its `levelLog` takes `writeBatch` only). Not an AbortSignal:
   * `INVALID_ARGUMENT`.
   */
  signal?: AbortSignal | undefined;
}

/** Every field of LevelManifestLogOptions: `LevelManifestLog.open` refuses any other. */
export const LEVEL_LOG_FIELDS = ['writeBatch', 'signal'] as const satisfies ReadonlyArray<
  keyof LevelManifestLogOptions
>;
const everyLevelLogField: NamesEveryField<LevelManifestLogOptions, typeof LEVEL_LOG_FIELDS> = true;
void everyLevelLogField;

const seqKey = (seq: number) => seq.toString(16).padStart(12, '0');
const posKey = (pos: number) => `p!${pos.toString(16).padStart(16, '0')}`;
const entryKey = (session: string, seq: number) => `e!${session}!${seqKey(seq)}`;

interface Pending {
  request: AppendRequest;
  leaf: Uint8Array;
  owner: string;
  resolve: (entry: LogEntry) => void;
  reject: (err: unknown) => void;
}

/**
 * The stores this process has open, by device and inode of their directory. LevelDB's own lock cannot be trusted
 * within one process: a second open there is refused, but the refusal closes a descriptor of the LOCK file, which
 * drops the process's POSIX lock on it (any other process could then open the store beside this one); and a second
 * spelling of the same directory (a symlinked parent) is not refused at all. A second open in this process is refused
 * here, before LevelDB is asked.
 */
const openInProcess = new Map<string, LevelManifestLog | undefined>();

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Sessions whose head this process has held to the session-heads index, remembered (`indexedHeads`). */
const INDEXED_HEADS_KEPT = 1 << 16;

export class LevelManifestLog extends AbstractManifestLog implements AppendQueue {
  /** This log's entry in `openInProcess`, removed when it closes. */
  private inProcessId: string | undefined;
  readonly inlineBlobs: InlineBlobTable;
  // This process owns the database, so caches of what it wrote are exact.
  private readonly watermarkCache = new Map<string, number>();
  private readonly headCache = new Map<string, ChainHead | null>();
  /** Sessions found cut back when their head was loaded (entries beyond it): appends refuse them (`ROLLBACK`). */
  private readonly cutBack = new Set<string>();
  /**
   * Sessions whose head the session-heads index did not commit when it was loaded, with its judgement (HeadWindow.index):
   * `ROLLBACK`, which appends refuse before they are queued; a path not whole (`TREE_DAMAGED`, `RECORD_CORRUPT`), which
   * their index update meets. Kept for the session: only this log writes the store while it is open, and no append
   * over a path not whole commits.
   */
  private readonly unindexed = new Map<string, NonNullable<HeadWindow['index']>>();
  /**
   * Each session's head (its id, null for none) as last held to the session-heads index in this process, or as this log
   * wrote it with the index (`_headWindow`): while the store is open only this log writes it, so a head read again as
   * it was held needs no second walk. Bounded: the oldest entry goes (its next read walks the index again).
   */
  private readonly indexedHeads = new Map<string, string | null>();
  private readonly queue: Pending[] = [];
  /** The batch being built or written (taken off the queue, its outcome not yet known): empty when none is. */
  private inBatch: Pending[] = [];
  private readonly pendingSessions = new Set<string>();
  private flushing = false;
  /** How many appends the last batch taken held (`flush`). */
  private lastBatchSize = 0;
  private nextPosition = 0;
  private frontier: TreeNode[] = [];
  /**
   * The newest trees this object folded from its own in-memory frontier (which changes only by its own appends
   * after open), newest last: the current tree extends each of them (`grewFrom`), and the last one, while the
   * size is unchanged, is the current tree's root (`rfc6962Head`). A few suffice: a guard asks about the tree it
   * pinned a moment ago.
   */
  private readonly ownTrees: TreeHead[] = [];
  /** Told the tree of each batch on its way to storage (ManifestLog.onCommitting). */
  private committing: ((head: LogTreeHead) => void) | undefined;
  /** The session-heads index's nodes as committed (this log is the store's only writer): an append's walk reads them. */
  private readonly headsNodes: HeadsNodeCache;
  /** The store's lock: no other process writes it while this log is open. */
  readonly exclusive = true;
  private treeSize = 0;
  /**
   * Set at open when the tree's size record (`n!size`) cannot be read (no count, or missing while leaves are stored):
   * the tree's size, and so its head, is unknown.
   * `treeHead` throws it (a tree whose root cannot be folded, as a damaged node on its right edge), rather than answer
   * the empty tree, which a pinned checkpoint would take for a rollback.
   */
  private treeSizeDamage: ManifestError | undefined;
  /** The session-heads index root as committed (moves with treeSize); undefined while the index is unreadable. */
  private headsRoot: Uint8Array | undefined;
  /** Why the open could not read the index's root or build the index (`RECORD_CORRUPT`): no head can be held to it. */
  private headsDamage: string | undefined;

  private readonly keys: LevelSigningKeys;
  private readonly grantTable: LevelGrantTable;
  private idleWaiters: Array<() => void> = [];
  private paused: Promise<void> | undefined;
  /** A batch is being built or written (from taking it off the queue until its outcome is known). */
  private writing = false;
  private writeWaiters: Array<() => void> = [];
  /** A read view's snapshot (`readSnapshot`): `_headWindow` reads from it instead of taking one of its own. */
  private pinned: LevelSnapshot | undefined;

  private constructor(
    token: typeof OPENING,
    private readonly db: Level<string, string>,
    private readonly writeBatch: (db: Level<string, string>, ops: BatchOp[]) => Promise<void>,
  ) {
    refuseOutsideOpen(token, ManifestError, 'LevelManifestLog', 'LevelManifestLog.open(path, options)');
    const keys = new LevelSigningKeys(db);
    const grants = new LevelGrantTable(db);
    super(grants, keys);
    this.keys = keys;
    this.grantTable = grants;
    keys.attach(this);
    grants.attach(this);
    this.inlineBlobs = new CheckedInlineBlobTable(
      new LevelInlineBlobs(db, (fn, signal) => this.withAppendsHeld(fn, signal)),
    );
    this.headsNodes = new HeadsNodeCache(db);
  }

  /**
   * Runs `fn` while no append batch is being written, and holds the next ones back until it is done: gc judges an
   * inline blob's storage time and deletes it with no append rewriting the blob in between. An abort of `signal` while
   * it waits (for another holder, or a batch being written, which may hang) ends it `CANCELLED` without running `fn`;
   * once `fn` runs, the signal changes nothing.
   */
  async withAppendsHeld<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const cancelled = () => new ManifestError('CANCELLED', OPERATION_CANCELLED, { cause: signal?.reason });
    while (this.paused) await settledOrAborted(this.paused, signal, cancelled);
    throwIfAborted(signal, ManifestError);
    let release!: () => void;
    this.paused = new Promise<void>((r) => (release = r));
    try {
      while (this.writing)
        await settledOrAborted(new Promise<void>((r) => this.writeWaiters.push(r)), signal, cancelled);
      return await fn();
    } finally {
      this.paused = undefined;
      release();
    }
  }

  /** Resolves once no append is queued or being written (the signing-key table closes windows after it). */
  idle(): Promise<void> {
    if (!this.flushing && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * The newest createdAt of `keyId` among the appends queued or in the batch being written, not yet committed. The
   * batch counts too: an append queued just as `idle()` resolved can be taken into a batch (the queue emptied) before
   * the waiter runs, and a window end chosen without it would lie before an entry that then commits.
   */
  queuedSignedAt(keyId: string): string | undefined {
    let newest: string | undefined;
    for (const queued of [this.inBatch, this.queue])
      for (const p of queued)
        if (p.request.signed?.keyId === keyId && (newest === undefined || p.request.signed.createdAt > newest))
          newest = p.request.signed.createdAt;
    return newest;
  }

  /**
   * Opens (creating if needed) the log at `path`.
   * @throws ManifestError `LOCKED` when another process, or another log of this process, has the store open;
   *   `INVALID_ARGUMENT` for an option of a name it does not know (or one that throws as it is read), or a `signal`
   *   that is no AbortSignal, or a `path` that is no non-empty path (no string, `''`, a NUL), before anything is made;
   *   `CANCELLED` once `signal` aborts (the database closed again); `STORAGE_FAILED` otherwise.
   */
  static async open(path: string, given: LevelManifestLogOptions = {}): Promise<LevelManifestLog> {
    // One that is no string failed STORAGE_FAILED around Node's TypeError, a caller's mistake taken for the disk's;
    // refused as FsBlobStore.open refuses its root.
    if (!isPathName(path))
      throw new ManifestError(
        'INVALID_ARGUMENT',
        `LevelManifestLog.open: path must be a non-empty path without NUL characters, not ${shownValue(path, 80)}`,
      );
    const options = readOptionFields(
      given,
      LEVEL_LOG_FIELDS,
      'LevelManifestLog.open options',
      ManifestError,
    ) as LevelManifestLogOptions;
    refuseNonSignal(options.signal, ManifestError);
    throwIfAborted(options.signal, ManifestError);
    let id: string;
    try {
      await mkdir(path, { recursive: true, mode: 0o700 });
      const st = await stat(path, { bigint: true });
      id = `${st.dev}:${st.ino}`;
    } catch (err) {
      throw storageFailed('open', err);
    }
    if (openInProcess.has(id))
      throw new ManifestError(
        'LOCKED',
        `the store at ${quoted(path)} is already open in this process (another ledger or log holds it); close that one first`,
      );
    openInProcess.set(id, undefined);
    try {
      const log = await LevelManifestLog.openLocked(path, options);
      log.inProcessId = id;
      openInProcess.set(id, log);
      return log;
    } catch (err) {
      openInProcess.delete(id);
      throw err;
    }
  }

  private static async openLocked(path: string, options: LevelManifestLogOptions): Promise<LevelManifestLog> {
    const { signal } = options;
    await refuseLostCurrent(path);
    throwIfAborted(signal, ManifestError);
    const db = new Level<string, string>(path, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    try {
      await db.open();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      if (cause?.code === 'LEVEL_LOCKED') {
        throw new ManifestError(
          'LOCKED',
          `the store at ${quoted(path)} is open in another process; close that process first, run the maintenance in it ` +
            "(the library's fsck, gc and exportBundle on the ledger it has open), or use the PostgreSQL backend " +
            '(openLedger({ postgres }) / --postgres URL) to share one store between processes',
          { cause: err },
        );
      }
      throw storageFailed('open', err);
    }
    const log = new LevelManifestLog(OPENING, db, options.writeBatch ?? writeSyncedBatch);
    try {
      // LevelDB's open above could not be interrupted: an abort that came during it is answered here, the database
      // closed again (below) before anything else is read or written.
      throwIfAborted(signal, ManifestError);
      let positionDamaged = false;
      // The greatest valid position key gives the next position; a damaged key above it (a hand edit, a bad
      // restore) opens the store for reads and fsck, which names it, and refuses appends (one would otherwise be
      // written at position NaN, an entry no read could parse).
      for await (const key of db.keys({ gte: 'p!', lt: 'p!\xff', reverse: true })) {
        try {
          log.nextPosition = parsePositionKey(key) + 1;
          break;
        } catch (err) {
          if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
          log.treeDamage ??= err.message;
          positionDamaged = true;
        }
      }
      try {
        // A store from before the index: build it once from the heads (docs/ARCHITECTURE.md, "Session heads").
        log.headsRoot =
          (await db.get(HEADS_BUILT_KEY)) === undefined
            ? await rebuildSessionHeads(db, log._heads(), signal)
            : await readHeadsRoot(db);
      } catch (err) {
        // As for the tree below: a damaged record opens the store for fsck; only appends are refused. The tree is
        // still loaded: checkpoints go on (without the line) and resume still checks them.
        if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
        log.treeDamage = err.message;
        log.headsDamage = err.message;
      }
      try {
        log.treeSize = await readTreeSize(db);
      } catch (err) {
        // As below, and the tree's head is unknown too (treeHead refuses with this record, not the empty tree): a
        // record that is no count, or none while leaves are stored (readTreeSize).
        if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
        log.treeDamage = err.message;
        log.treeSizeDamage = err;
        return log;
      }
      try {
        log.frontier = await loadFrontier(db, log.treeSize);
      } catch (err) {
        // A damaged tree record must not lock the store: it opens (reads, resume, fsck, which names the record),
        // and only appends, which would build on that tree, are refused.
        if (!(err instanceof ManifestError && (err.code === 'RECORD_CORRUPT' || err.code === 'TREE_DAMAGED')))
          throw err;
        log.treeDamage = err.message;
        return log;
      }
      // More leaves than positions: entries were removed under the tree (the tree is not derived from them).
      // The store still opens, so that fsck can report it and resume can refuse with the checkpoint's
      // ROLLBACK; only appending, which would build on a tree that is not the entries', is refused.
      if (log.treeSize > log.nextPosition)
        log.treeDamage = `the tree has ${log.treeSize} leaves, the log ${log.nextPosition} entries`;
      else if (
        log.treeSize < log.nextPosition &&
        (await db.get(nodeKey({ level: 0, index: log.treeSize }))) !== undefined
      )
        // Fewer leaves than positions, yet the next leaf is stored: every batch writes its nodes with the size, so
        // the tree was larger and its size record was lowered (a hand edit, a bad restore). Growing it again would
        // hide that; as above, the store opens for fsck (TREE_SIZE) and the pin's ROLLBACK, and appends are refused.
        log.treeDamage = `the tree has ${log.treeSize} leaves, the log ${log.nextPosition} entries, and leaf ${log.treeSize} is stored`;
      else if (log.treeSize < log.nextPosition && !positionDamaged) {
        // A store from before the tree existed, or whose backfill was interrupted (no leaf beyond the size): add
        // its entries now (resumable, see backfillTree).
        const after = log.treeSize === 0 ? undefined : log.treeSize - 1;
        throwIfAborted(signal, ManifestError);
        const state = await backfillTree(
          db,
          log.entries({ afterPosition: after }),
          { frontier: log.frontier, size: log.treeSize },
          signal,
        );
        log.treeSize = state.size;
        log.frontier = state.frontier;
        // An entry lost from a store of before the tree: it opens with the tree of the entries before it, for reads
        // and fsck (which names the gap, as in a store that had its tree: POSITION_GAP), and appends are refused.
        if (state.gap !== undefined) log.treeDamage = state.gap;
        // The same where the lost entries are the last ones and their position records are kept (the listing passes
        // over a position whose entry is not stored): the tree ends before the positions do, and an append, at the
        // next position, would be a leaf short of it (and the next open would add it again as the leaf it skipped).
        else if (log.treeSize < log.nextPosition)
          log.treeDamage = `global position ${log.treeSize} holds no entry (position records go to ${log.nextPosition - 1}): the tree was built from the entries before it only`;
      }
    } catch (err) {
      await db.close().catch(() => {});
      throw err;
    }
    return log;
  }

  protected async _head(session: string): Promise<ChainHead | undefined> {
    const raw = await readRecord(this.db, `h!${session}`, 'head read');
    return raw === undefined ? undefined : parseHeadRecord(`h!${session}`, raw);
  }

  protected async _entry(session: string, seq: number): Promise<LogEntry | undefined> {
    const key = entryKey(session, seq);
    const raw = await readRecord(this.db, key, 'entry read');
    return raw === undefined ? undefined : parseEntryRecord(key, raw);
  }

  /**
   * Five small reads from one snapshot (the head and the watermark, then the entries before, at and beyond the
   * head), made synchronously: records this small come from LevelDB's caches in microseconds, where each
   * asynchronous read would cost a thread-pool round trip (benchmarks/README.md, "Resume's fixed cost"). An
   * append that commits meanwhile is wholly invisible to the snapshot. It first yields one turn of the event
   * loop, as an asynchronous read would: a caller resuming in a loop still lets I/O and timers run in between.
   * A session with no head has nothing at or before it, and any entry of it is one beyond it (the `ROLLBACK` rule,
   * `cutBackProblems`, as PostgreSQL's `headless` judges it): not only seq 0, which may be gone with the head and
   * the watermark while seq 1… remain. That is one range read of the session's entry keys (limit 1) from the same
   * snapshot, the only asynchronous read, paid by a headless session alone.
   */
  protected async _headWindow(session: string, options: { index?: boolean } = {}): Promise<HeadWindow> {
    await new Promise((resolve) => setImmediate(resolve));
    // Taken with the snapshot: the cache moves only after a commit, so it is never ahead of the snapshot.
    const cached = this.watermarkCache.get(session);
    let snapshot = this.pinned;
    try {
      snapshot ??= this.db.snapshot();
    } catch (err) {
      throw storageFailed('snapshot', err);
    }
    try {
      const read = (key: string) => {
        try {
          return this.db.getSync(key, { snapshot });
        } catch (err) {
          throw storageFailed('head window read', err);
        }
      };
      const rawHead = read(`h!${session}`);
      const head = rawHead === undefined ? undefined : parseHeadRecord(`h!${session}`, rawHead);
      // As `getWatermark`: the one this process holds (exact: it owns the database), else the stored one.
      let watermark = cached;
      if (watermark === undefined) {
        const rawMark = read(`w!${session}`);
        watermark = rawMark === undefined ? undefined : parseWatermarkRecord(`w!${session}`, rawMark);
      }
      const index = options.index === false ? undefined : this.indexedHead(session, head, read);
      if (!head)
        return {
          session,
          head,
          entryAtHead: undefined,
          entryBeforeHead: undefined,
          entryBeyondHead: await this.anyEntry(session, snapshot),
          watermark,
          index,
        };
      const seq = head.seq;
      const entry = (at: number) => {
        const key = entryKey(session, at);
        const raw = read(key);
        return raw === undefined ? undefined : parseEntryRecord(key, raw);
      };
      return {
        session,
        head,
        entryAtHead: entry(seq),
        entryBeforeHead: seq > 0 ? entry(seq - 1) : undefined,
        entryBeyondHead: read(entryKey(session, seq + 1)) !== undefined,
        watermark,
        index,
      };
    } finally {
      if (snapshot !== this.pinned) await snapshot.close().catch(() => {});
    }
  }

  /**
   * The head held to the session-heads index of the same snapshot (`indexedHeadProblem`), once per session and head in
   * this process: a head record set back offline with its tail and watermark (the index, whose root the pinned
   * checkpoint signs, left as it was) is a `ROLLBACK` at its first read, not a stale summary handed out. The index's
   * root is the one the open judged against the pin (the same tree: the same root, else `FORK`), or one this log
   * wrote since. Synchronous reads from the snapshot, as the window's; a node on the path that cannot be parsed is
   * `RECORD_CORRUPT` for this session (fsck names the record), and so is every head where the open could not read the
   * index's root or build the index (a rebuild clears it first: an empty index would agree with a removed session).
   */
  private indexedHead(
    session: string,
    head: ChainHead | undefined,
    read: (key: string) => string | undefined,
  ): HeadWindow['index'] {
    const id = head?.id ?? null;
    if (this.indexedHeads.get(session) === id) return undefined;
    if (this.headsDamage !== undefined)
      return {
        code: 'RECORD_CORRUPT',
        problem: `the session-heads index could not be built or read at open: ${this.headsDamage}`,
      };
    const fromSnapshot = (path: NodePath) => {
      const key = headsNodeKey(path);
      const raw = read(key);
      return raw === undefined ? undefined : parseHeadsNodeRecord(key, raw);
    };
    const judge = (node: (path: NodePath) => HeadsNode | undefined) => {
      try {
        // The reader answers at once: so does the judgement.
        return indexedHeadProblem((paths) => paths.map(node), session, head && { seq: head.seq, id: head.id }) as
          IndexedHeadProblem | undefined;
      } catch (err) {
        if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
        return { code: 'RECORD_CORRUPT' as const, problem: err.message };
      }
    };
    // First the nodes the index's cache holds (the paths appends of this process read and wrote: never filled from a
    // read's snapshot, which may be ahead of the committed state appends build on), the rest from the snapshot. The
    // cache may hold a state just before or after the snapshot's (a batch this log is committing): nodes of two states
    // mixed cannot hash to a stored root unless they are that root's own (the hashes bind every node below), so an
    // agreement stands; a disagreement is judged again from the snapshot alone.
    const cached = (path: NodePath) => {
      const hit = this.headsNodes.peek(path);
      return hit === undefined ? fromSnapshot(path) : (hit ?? undefined);
    };
    const problem = judge(cached) && judge(fromSnapshot);
    if (problem !== undefined) return problem;
    this.rememberIndexed(session, id);
    return undefined;
  }

  private rememberIndexed(session: string, id: string | null): void {
    this.indexedHeads.delete(session);
    this.indexedHeads.set(session, id);
    if (this.indexedHeads.size > INDEXED_HEADS_KEPT) this.indexedHeads.delete(this.indexedHeads.keys().next().value!);
  }

  /** True when `snapshot` holds any entry of `session`: its first entry key, if any (keys only, limit 1). */
  private async anyEntry(session: string, snapshot: LevelSnapshot): Promise<boolean> {
    try {
      const keys = await this.db.keys({ gte: `e!${session}!`, lt: `e!${session}!\xff`, limit: 1, snapshot }).all();
      return keys.length > 0;
    } catch (err) {
      throw storageFailed('head window read', err);
    }
  }

  protected async *_chain(session: string, fromSeq: number): AsyncIterable<LogEntry> {
    const range = () => this.db.iterator({ gte: entryKey(session, fromSeq), lt: `e!${session}!\xff` });
    for await (const [key, raw] of readRange('chain read', range)) yield parseEntryRecord(key, raw);
  }

  protected async *_entries(afterPosition: number | undefined): AsyncIterable<LogEntry> {
    const gt = afterPosition === undefined ? 'p!' : posKey(afterPosition);
    let keys: string[] = [];
    const flush = async function* (db: Level<string, string>, ks: string[]) {
      const raws = await db.getMany(ks);
      for (let i = 0; i < ks.length; i++) if (raws[i] !== undefined) yield parseEntryRecord(ks[i]!, raws[i]!);
    };
    try {
      for await (const [key, entryRef] of this.db.iterator({ gt, lt: 'p!\xff' })) {
        keys.push(parsePositionRecord(key, entryRef));
        if (keys.length === 256) {
          yield* flush(this.db, keys);
          keys = [];
        }
      }
      yield* flush(this.db, keys);
    } catch (err) {
      throw storageFailed('entries read', err);
    }
  }

  protected async *_heads(): AsyncIterable<ChainHead> {
    const range = () => this.db.iterator({ gte: 'h!', lt: 'h!\xff' });
    for await (const [key, raw] of readRange('heads read', range)) yield parseHeadRecord(key, raw);
  }

  /** The sessions with a head, from the `h!` keys alone (no record parsed): the head check goes on past a damaged one. */
  protected override async *_headSessions(): AsyncIterable<string> {
    for await (const key of readRange('heads read', () => this.db.keys({ gte: 'h!', lt: 'h!\xff' })))
      yield key.slice(2);
  }

  protected override async _appendHead(session: string): Promise<ChainHead | undefined> {
    return (await this.cachedHead(session)) ?? undefined;
  }

  private async cachedHead(session: string): Promise<ChainHead | null> {
    const cached = this.headCache.get(session);
    if (cached !== undefined) return cached;
    // With the entry beyond it, from one snapshot: a chain cut back before this process opened the store (entries
    // beyond its head, no head naming them) is known from its first read; after that, only this log writes it.
    const window = await this._headWindow(session);
    const read = window.head ?? null;
    // An append of this session that committed while the head was read set the newer head: it stands.
    const now = this.headCache.get(session);
    if (now !== undefined) return now;
    this.headCache.set(session, read);
    if (window.entryBeyondHead) this.cutBack.add(session);
    if (window.index) this.unindexed.set(session, window.index);
    return read;
  }

  /**
   * What an append to `session` judges a cut-back chain by (ManifestLog.append: `ROLLBACK`, the rule
   * `cutBackProblems`), and the session's path in the index as its head's load judged it (`indexDamage`, which the
   * append's index update meets): the caches, once the head and watermark are loaded.
   */
  private cutBackFacts(session: string, head: ChainHead | null): CutBackFacts {
    const index = this.unindexed.get(session);
    return {
      head: head ?? undefined,
      entryBeyondHead: this.cutBack.has(session),
      watermark: this.watermarkCache.get(session),
      ...(index && indexFacts(index)),
    };
  }

  /** The append's facts, loaded as it loads them (ManifestLog.sessionAppendRefusal). */
  protected override async _cutBackFacts(session: string): Promise<CutBackFacts> {
    await this.cachedHead(session);
    await this._getWatermark(session);
    return this.cutBackFacts(session, this.headCache.get(session) ?? null);
  }

  protected async _append(request: AppendRequest, signal: AbortSignal | undefined): Promise<LogEntry> {
    const refused = this.appendRefusal();
    if (refused) throw refused;
    // The request's own envelope first, as PostgreSQL's append judges it: a malformed one is ENVELOPE_INVALID whatever
    // the chain holds, never a CHAIN_CONFLICT or ROLLBACK that a caller might retry or report as the chain's fault.
    const leaf = leafOfEnvelope(request.envelope);
    // Ordered with revocations and rotations: a revoked principal's append, or one dated after its key's window,
    // does not enter the queue (both tables are cached: this process owns the database).
    await this.grants.get(request.principal, '*');
    await this.grants.get(request.principal, request.session);
    if (request.signed) await this.keys.get(request.signed.keyId);
    await this.cachedHead(request.session); // loads the head into the cache, which every commit keeps current
    await this._getWatermark(request.session); // loads it, so the batch can keep the higher of the two
    // Taken with no await before the check and the queue: an append of this session that committed during the reads
    // above has moved it (checked against the head read before, both could take one seq).
    const head = this.headCache.get(request.session) ?? null;
    const [cut] = cutBackProblems(this.cutBackFacts(request.session, head));
    if (cut !== undefined) throw rollbackRefused(request.session, cut);
    const expectedSeq = head ? head.seq + 1 : 0;
    const expectedPrev: Digest | null = head ? head.id : null;
    if (this.pendingSessions.has(request.session) || request.seq !== expectedSeq || request.prev !== expectedPrev) {
      throw new ManifestError(
        'CHAIN_CONFLICT',
        `session ${request.session}: append at seq ${request.seq} does not extend the head (seq ${head?.seq ?? 'none'})`,
      );
    }
    // Checked again with no await before the queue: a revocation or rotation that completed meanwhile holds.
    this.grantTable.refuseRevoked(request.principal, request.session);
    if (request.signed) this.keys.refuseClosed(request.signed);
    throwIfAborted(signal, ManifestError);
    this.pendingSessions.add(request.session);
    return new Promise<LogEntry>((resolve, reject) => {
      const pending: Pending = { request, leaf, owner: head?.owner ?? request.principal, resolve, reject };
      if (signal) {
        // An abort while the append waits in the queue takes it out; once in a batch being written, it completes.
        const settled = onAbort(signal, () => {
          const at = this.queue.indexOf(pending);
          if (at < 0) return;
          this.queue.splice(at, 1);
          this.pendingSessions.delete(request.session);
          reject(new ManifestError('CANCELLED', OPERATION_CANCELLED, { cause: signal.reason }));
        });
        pending.resolve = (entry) => {
          settled();
          resolve(entry);
        };
        pending.reject = (err) => {
          settled();
          reject(err);
        };
      }
      this.queue.push(pending);
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      // Where the last batch held more than one append (appends arrive together), the first batch after the log was
      // idle is built one turn of the event loop later: the appends of that group share it, rather than the first
      // being written alone while the others queue behind it. A lone caller's append is not held that turn.
      if (this.lastBatchSize > 1) await nextTurn();
      while (this.queue.length > 0) {
        // gc's conditional delete of an inline blob holds appends back while it judges and deletes.
        while (this.paused) await this.paused;
        if (this.queue.length === 0) break; // its appends were cancelled meanwhile
        this.writing = true;
        const batch = this.queue.splice(0);
        this.inBatch = batch;
        this.lastBatchSize = batch.length;
        try {
          const ops: BatchOp[] = [];
          const results: Array<{ entry: LogEntry; head: ChainHead }> = [];
          const marks: number[] = [];
          let position = this.nextPosition;
          for (const { request, owner } of batch) {
            const entry: LogEntry = {
              position: position++,
              session: request.session,
              seq: request.seq,
              id: request.id,
              principal: request.principal,
              envelope: request.envelope,
            };
            const head: ChainHead = { session: request.session, seq: request.seq, id: request.id, owner };
            const key = entryKey(request.session, request.seq);
            // Append step: entry + head + global position in one atomic, synced batch.
            ops.push({ type: 'put', key, value: JSON.stringify(entry) });
            ops.push({ type: 'put', key: `h!${request.session}`, value: JSON.stringify(head) });
            ops.push({ type: 'put', key: posKey(entry.position), value: key });
            // Inline blob: in the same batch as the entry that names it, so both or neither are durable.
            if (request.blob) ops.push(...inlineBlobOps(request.blob.digest, request.blob.bytes));
            // The rollback watermark rises with the head, in the same batch (ManifestLog.append contract).
            const mark = Math.max(this.watermarkCache.get(request.session) ?? -1, request.seq);
            ops.push({ type: 'put', key: `w!${request.session}`, value: String(mark) });
            marks.push(mark);
            results.push({ entry, head });
          }
          // The tree grows in the same batch: it always covers exactly the committed entries.
          const tree = treePuts(
            this.frontier,
            this.treeSize,
            batch.map((p, i) => ({ id: p.request.id, position: results[i]!.entry.position, leaf: p.leaf })),
            // No read of the stored i! records (an id appended again in a later batch takes its latest position:
            // ManifestLog.positionOf): a LevelDB get of a key that is not there probes every table that could hold it,
            // and each such probe is charged to the table as a seek, so a get per append had LevelDB compact about
            // twice as often (43 against 20 compactions over 20,000 publishes of 4 KiB), ~70–100 µs of CPU a publish.
          );
          ops.push(...tree.puts);
          // The session-heads index too: its root and the tree's size move together. Built at once from the node
          // cache where it holds the paths (no turn of the event loop between two batches), else after reading them.
          let heads: HeadsPuts;
          try {
            // Each held to the head its append extends: the index must commit it (it does, as this log wrote both).
            const built = headsPuts(
              this.headsNodes.read,
              results.map((r, i) => ({ ...r.head, prev: batch[i]!.request.prev })),
            );
            heads = built instanceof Promise ? await built : built;
          } catch (err) {
            const failed = err instanceof ManifestError ? err : storageFailed('session-heads index read', err);
            // One append's path may be what failed (a damaged node on it: TREE_DAMAGED): it is refused, not the
            // appends that happened to share its batch.
            if (batch.length > 1 && (await this.refuseAlone(batch))) continue;
            this.failBatch(batch, failed);
            continue;
          }
          ops.push(...heads.puts);
          // The newest createdAt per signing key, with the entries it dates (rotation reads it after a restart).
          const signed = this.keys.signedPuts(batch.map((p) => p.request.signed));
          ops.push(...signed.puts);
          // Started now (the call runs at once); a hook that throws instead of rejecting fails this batch the same way.
          const written = (async () => this.writeBatch(this.db, ops))();
          // While the batch is being synced: the tree it commits, for the checkpoint guard to sign meanwhile.
          const root = rootOf(tree.frontier);
          this.tellCommitting({ size: tree.size, root: root.slice(), sessionHeads: heads.root.slice() });
          try {
            await written;
          } catch (err) {
            this.failBatch(batch, storageFailed('durable batch write', err));
            continue;
          }
          this.nextPosition = position;
          signed.commit();
          this.frontier = tree.frontier;
          this.treeSize = tree.size;
          this.rememberOwnTree(tree.size, root);
          this.headsRoot = heads.root;
          this.headsNodes.commit(heads.changes, heads.removed);
          batch.forEach((p, i) => {
            this.headCache.set(p.request.session, results[i]!.head);
            this.rememberIndexed(p.request.session, p.request.id); // written with its index, in the same batch
            this.watermarkCache.set(p.request.session, marks[i]!);
            this.pendingSessions.delete(p.request.session);
            p.resolve(results[i]!.entry);
          });
          this.doneWriting();
          // The publishes just committed go on to their pins before the next batch is built (one turn: their
          // continuations run first), so each pin overlaps the next batch's sync rather than waiting for its building.
          if (this.queue.length > 0) await nextTurn();
        } catch (err) {
          // A step not expected to fail did (building the batch's records, say): the batch fails as a whole, and its
          // sessions are free again, rather than waiting forever on promises nobody settles.
          this.failBatch(batch, err instanceof ManifestError ? err : storageFailed('append batch', err));
        }
      }
    } finally {
      this.doneWriting();
      this.flushing = false;
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /**
   * After the session-heads update of a batch of several appends failed: each append's update judged alone. Those
   * refused alone fail with their own error; the others go back to the front of the queue, in their order, for the
   * next batch (nothing of this one was written: positions, tree and index are as they were). False, with nothing
   * changed, when every append's update holds alone (the failure is the batch's: it fails as a whole).
   */
  private async refuseAlone(batch: Pending[]): Promise<boolean> {
    const refusals = new Map<Pending, ManifestError | Error>();
    for (const p of batch) {
      const { session, seq, id, prev } = p.request;
      try {
        const built = headsPuts(this.headsNodes.read, [{ session, seq, id, owner: p.owner, prev }]);
        if (built instanceof Promise) await built;
      } catch (err) {
        refusals.set(p, err instanceof ManifestError ? err : storageFailed('session-heads index read', err));
      }
    }
    if (refusals.size === 0) return false;
    for (const [p, err] of refusals) {
      this.pendingSessions.delete(p.request.session);
      p.reject(err);
    }
    this.queue.unshift(...batch.filter((p) => !refusals.has(p)));
    this.doneWriting();
    return true;
  }

  /** Fails every append of a batch with `err` (nothing of it committed) and frees their sessions. */
  private failBatch(batch: Pending[], err: Error): void {
    for (const p of batch) {
      this.pendingSessions.delete(p.request.session);
      p.reject(err);
    }
    this.doneWriting();
  }

  private doneWriting(): void {
    this.writing = false;
    this.inBatch = [];
    for (const wake of this.writeWaiters.splice(0)) wake();
  }

  async treeHead(): Promise<LogTreeHead> {
    // Taken with the size, before any await: the index root committed in the same batch as that size.
    const sessionHeads = this.headsRoot?.slice();
    const head: LogTreeHead = await this.rfc6962Head();
    if (sessionHeads) head.sessionHeads = sessionHeads;
    return head;
  }

  protected async _sessionHeadNodes(paths: NodePath[]): Promise<Array<HeadsNode | undefined>> {
    try {
      return await readHeadsNodes(this.db, paths);
    } catch (err) {
      throw storageFailed('session-heads read', err);
    }
  }

  async sessionHeadNodeCount(): Promise<number> {
    let n = 0;
    try {
      for await (const _ of this.db.keys({ gte: 'x!', lt: 'x"' })) n++;
    } catch (err) {
      throw storageFailed('session-heads count', err);
    }
    return n;
  }

  private async rfc6962Head(): Promise<TreeHead> {
    if (this.treeSizeDamage) throw this.treeSizeDamage;
    // The frontier changes only with the tree's size (an append): every call in between (each resume and
    // publish checks the pinned checkpoint) gets the root folded from it once. A root that needed stored
    // nodes is not kept: those are read (and may have been changed) each time.
    const size = this.treeSize;
    const last = this.ownTrees.at(-1);
    if (last?.size === size) return { size, root: last.root.slice() };
    let fromFrontier = true;
    const head = await treeHeadAt(size, async (ids) => {
      const byKey = new Map(this.frontier.map((n) => [`${n.level}/${n.index}`, n.hash]));
      const cached = ids.map((id) => byKey.get(`${id.level}/${id.index}`));
      if (cached.every((h) => h !== undefined)) return cached as Uint8Array[];
      fromFrontier = false;
      return readNodes(this.db, ids);
    });
    if (fromFrontier && this.treeSize === size) this.rememberOwnTree(size, head.root);
    return head;
  }

  private rememberOwnTree(size: number, root: Uint8Array): void {
    if (this.ownTrees.at(-1)?.size === size) return;
    this.ownTrees.push({ size, root: root.slice() });
    if (this.ownTrees.length > 8) this.ownTrees.shift();
  }

  onCommitting(listener: (head: LogTreeHead) => void): () => void {
    this.committing = listener;
    return () => {
      if (this.committing === listener) this.committing = undefined;
    };
  }

  /** A listener's failure is its own: the batch goes on either way. */
  private tellCommitting(head: LogTreeHead): void {
    try {
      this.committing?.(head);
    } catch {
      // nothing was promised on this tree
    }
  }

  grewFrom(size: number, root: Uint8Array): boolean {
    return this.ownTrees.some((t) => t.size === size && t.size <= this.treeSize && equalBytes(t.root, root));
  }

  protected _treeNodes(ids: NodeId[]): Promise<Uint8Array[]> {
    return readNodes(this.db, ids);
  }

  protected async _entryAt(position: number): Promise<LogEntry | undefined> {
    const ref = await readRecord(this.db, posKey(position), 'position read');
    const key = ref === undefined ? undefined : parsePositionRecord(posKey(position), ref);
    const raw = key === undefined ? undefined : await readRecord(this.db, key, 'entry read');
    return raw === undefined ? undefined : parseEntryRecord(key!, raw);
  }

  protected async _positionOf(id: Digest): Promise<number | undefined> {
    const raw = await readRecord(this.db, idKey(id), 'position read');
    return raw === undefined ? undefined : parseCountRecord(idKey(id), raw);
  }

  /** The `i!<id>` records in key (id) order; one that cannot be parsed is listed with its error (ManifestLog.idPositions). */
  async *idPositions(): AsyncIterable<IdPositionRecord> {
    const range = () => this.db.iterator({ gte: 'i!', lt: 'i"' });
    for await (const [key, raw] of readRange('id position read', range)) {
      let record: IdPositionRecord;
      try {
        record = parseIdPositionRecord(key, raw);
      } catch (err) {
        if (!(err instanceof ManifestError)) throw err;
        record = { id: key.slice(2), corrupt: err };
      }
      yield record;
    }
  }

  protected async _origin(proposed: string | undefined): Promise<string | undefined> {
    // A storage error is STORAGE_FAILED naming the read or write, as every other record's (and PostgreSQL's).
    const stored = await readRecord(this.db, ORIGIN_KEY, 'origin read');
    if (stored !== undefined || proposed === undefined) return stored;
    // One proposal at a time, each reading again under it: of two at once, the later one is answered the name the first
    // stored (as PostgreSQL's insert if absent), not told its own while the other's stands.
    const run = this.originWrites.then(async () => {
      const now = await readRecord(this.db, ORIGIN_KEY, 'origin read');
      if (now !== undefined) return now;
      await this.db.put(ORIGIN_KEY, proposed, { sync: true }).catch((err: unknown) => {
        throw storageFailed('origin write', err);
      });
      return proposed;
    });
    this.originWrites = run.catch(() => {});
    return run;
  }

  /** The origin proposals (`_origin`) one after another. */
  private originWrites: Promise<unknown> = Promise.resolve();

  protected async _getWatermark(session: string): Promise<number | undefined> {
    let mark = this.watermarkCache.get(session);
    if (mark === undefined) {
      const raw = await readRecord(this.db, `w!${session}`, 'watermark read');
      // A mark raised while this read was in flight (an append's batch, setWatermark) is newer than what it read, and
      // marks only rise: the higher stands (the stale one cached let an append pass a mark set above its head, and its
      // batch write the lower mark back).
      const now = this.watermarkCache.get(session);
      if (raw === undefined) return now;
      mark = Math.max(parseWatermarkRecord(`w!${session}`, raw), now ?? -1);
      this.watermarkCache.set(session, mark);
    }
    return mark;
  }

  protected async _setWatermark(session: string, seq: number): Promise<void> {
    const current = await this._getWatermark(session);
    if (current !== undefined && seq <= current) return;
    // Judged and written with no append batch in flight: a batch of this session commits its own mark (its new seq),
    // and a put of a lower one read before that batch landed would store a watermark below the head.
    await this.withAppendsHeld(async () => {
      const now = this.watermarkCache.get(session);
      if (now !== undefined && seq <= now) return;
      // Synced, as the append's batch that raises it: the rollback defence must survive a power loss, not only a
      // crash of the process. Rare (an append keeps the mark at its head): a resume raises it only where it is behind.
      await this.db.put(`w!${session}`, String(seq), { sync: true }).catch((err: unknown) => {
        throw storageFailed('watermark write', err);
      });
      this.watermarkCache.set(session, Math.max(seq, this.watermarkCache.get(session) ?? -1));
    });
  }

  protected async *_headlessSessions(): AsyncIterable<string> {
    for await (const key of readRange('watermark list', () => this.db.keys({ gte: 'w!', lt: 'w!\xff' }))) {
      const session = key.slice(2);
      if ((await readRecord(this.db, `h!${session}`, 'head read')) === undefined) yield session;
    }
  }

  /**
   * The log at one moment: a LevelDB snapshot, taken while no append batch is being written, with the tree and
   * session-heads root that batch left in memory (the view's `treeHead`). Appends wait only while it is taken. The
   * view reads through the snapshot with caches of its own; its writes fail (`STORAGE_FAILED`). `signal` is looked at
   * before the snapshot is taken (`CANCELLED`); the view's reads are the caller's to stop.
   */
  async readSnapshot<T>(
    fn: (view: ManifestLog) => Promise<T>,
    options?: { signal?: AbortSignal | undefined },
  ): Promise<T> {
    readSnapshotSignal(options); // looked at before the snapshot is taken; the view's reads are the caller's to stop
    let view!: LevelManifestLog;
    let snapshot!: LevelSnapshot;
    await this.withAppendsHeld(async () => {
      try {
        snapshot = this.db.snapshot();
      } catch (err) {
        throw storageFailed('snapshot', err);
      }
      view = new LevelManifestLog(OPENING, readOnlyAt(this.db, snapshot), refuseBatch);
      view.pinned = snapshot;
      view.nextPosition = this.nextPosition;
      view.frontier = [...this.frontier];
      view.treeSize = this.treeSize;
      view.headsRoot = this.headsRoot?.slice();
      view.headsDamage = this.headsDamage;
      view.treeDamage = this.treeDamage;
      view.treeSizeDamage = this.treeSizeDamage;
    });
    try {
      return await fn(view);
    } finally {
      await snapshot.close().catch(() => {});
    }
  }

  /** Raw access for tests that tamper with stored records and for fsck. */
  get raw(): Level<string, string> {
    return this.db;
  }

  protected async _close(): Promise<void> {
    try {
      await this.db.close();
    } finally {
      // Only this log's own entry: a second close of a log whose store another log opened since must not free it.
      const id = this.inProcessId;
      this.inProcessId = undefined;
      if (id !== undefined && openInProcess.get(id) === this) openInProcess.delete(id);
    }
  }
}

type LevelSnapshot = ReturnType<Level<string, string>['snapshot']>;

/** A read view's batch write: the view reads one moment and writes nothing. */
const refuseBatch = (): Promise<void> => Promise.reject(new Error('a read snapshot of the log cannot write'));

/**
 * `db` as a read view's database: every read (get, getMany, getSync, iterator, keys, values) from `snapshot`; writes
 * (put, del, batch, clear) rejected; close does nothing (the database stays its log's). Methods are bound to `db`,
 * whose private state a proxy as `this` could not reach.
 */
function readOnlyAt(db: Level<string, string>, snapshot: LevelSnapshot): Level<string, string> {
  const reads = new Set(['get', 'getMany', 'getSync', 'iterator', 'keys', 'values']);
  const writes = new Set(['put', 'del', 'batch', 'clear']);
  return new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (typeof prop === 'string' && writes.has(prop))
        return () => Promise.reject(new Error('a read snapshot of the log cannot write'));
      if (prop === 'close') return () => Promise.resolve();
      if (typeof prop === 'string' && reads.has(prop)) {
        // get(key, options), getMany(keys, options), getSync(key, options); iterator/keys/values(options)
        const at = prop === 'iterator' || prop === 'keys' || prop === 'values' ? 0 : 1;
        return (...args: unknown[]) => {
          const options = { ...(args[at] as object | undefined), snapshot };
          const call = [...args];
          call[at] = options;
          return method.apply(target, call);
        };
      }
      return method.bind(target);
    },
  });
}

/**
 * The file `file` as one shell word for a command a message gives to be pasted, or undefined when none can be shown
 * clearly. Single-quoted, a `'` in it closed, double-quoted and reopened (no backslash anywhere: a printer that escapes
 * backslashes leaves it as it is); `./` before a relative path that begins with `-`, so that no command reads it as an
 * option. None for a path `isPastable` refuses (a line break, a tab, a backslash or anything else a terminal acts
 * on: printed, such a character is escaped, `\x0a`, and the escape pasted names another path); the message names the
 * file quoted instead.
 */
function pastablePath(file: string): string | undefined {
  if (!isPastable(file)) return undefined;
  const word = file.startsWith('-') ? `./${file}` : file;
  return `'${word.replaceAll("'", `'"'"'`)}'`;
}

/** The names in the directory `path`, and those of them that hold LevelDB data (table files, a write-ahead log not empty). */
async function levelFiles(path: string): Promise<{ names: string[]; data: string[] }> {
  const names = await readdir(path);
  const data: string[] = [];
  if (names.includes('CURRENT')) return { names, data };
  for (const name of names) {
    if (/^[0-9]+\.(ldb|sst)$/.test(name)) data.push(name);
    else if (/^[0-9]+\.log$/.test(name) && (await stat(join(path, name))).size > 0) data.push(name);
  }
  return { names, data };
}

/**
 * Whether the directory `path` holds no embedded log yet: no CURRENT file and no LevelDB data, which `open` would take
 * for a new database (one whose creation stopped before it held anything: an empty directory, say). An open that is to
 * write nothing unless it goes on (a refused name, a pin this empty log would not extend) judges such a directory as a
 * missing one, before `open` makes the log in it. A directory of data without CURRENT is a log (`open` refuses it).
 * The caller has checked that `path` is a directory.
 * @throws ManifestError `STORAGE_FAILED` when the directory cannot be read
 */
export async function holdsNoLog(path: string): Promise<boolean> {
  try {
    const { names, data } = await levelFiles(path);
    return !names.includes('CURRENT') && data.length === 0;
  } catch (err) {
    throw storageFailed('open', err);
  }
}

/**
 * LevelDB finds its database through the file CURRENT (the name of the MANIFEST that lists its files). Opened
 * without one, it starts an empty database in the directory and deletes the data files it finds there as obsolete:
 * every manifest of the store, gone for good, by whatever command opened it (fsck included). A directory that holds
 * LevelDB data (table files, or a write-ahead log that is not empty) and no CURRENT is refused before LevelDB sees it.
 * @throws ManifestError `RECORD_CORRUPT` naming how to restore CURRENT; `STORAGE_FAILED` when the directory cannot be read
 */
async function refuseLostCurrent(path: string): Promise<void> {
  const listed = (files: string[]) =>
    files.length <= 4 ? files.join(', ') : `${files.slice(0, 3).join(', ')} and ${files.length - 3} more`;
  try {
    const { names, data } = await levelFiles(path);
    if (names.includes('CURRENT')) return;
    if (data.length === 0) return; // a new database, or one whose creation stopped before it held anything
    const newest = names
      .filter((n) => /^MANIFEST-[0-9]+$/.test(n))
      .sort((a, b) => Number(a.slice(9)) - Number(b.slice(9)))
      .at(-1);
    // A command to paste when the file's path can be one shell word shown as it is, else the directory quoted.
    const current = pastablePath(join(path, 'CURRENT'));
    const restore =
      newest === undefined
        ? 'no MANIFEST file is left either: restore the directory from a backup'
        : current !== undefined
          ? `restore it from a backup, or write the name of the newest MANIFEST file into it (echo ${newest} > ${current}), then run fsck`
          : `restore it from a backup, or write the name of the newest MANIFEST file (${newest}, and a line break) into a file CURRENT in the directory ${quoted(path)}, then run fsck`;
    throw new ManifestError(
      'RECORD_CORRUPT',
      `the manifest log ${quoted(path)} holds LevelDB data (${listed(data.sort())}) but no CURRENT file: opened as it is, ` +
        `LevelDB would start an empty log and delete that data, so nothing was opened or changed; ${restore}`,
    );
  } catch (err) {
    if (err instanceof ManifestError) throw err;
    throw storageFailed('open', err);
  }
}
