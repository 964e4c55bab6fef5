/**
 * The filesystem blob store (docs/DESIGN.md, "Blob store"). Layout:
 *   <root>/blobs-v1/blake3/<aa>/<bb>/<64hex>   immutable blobs, named by digest only
 *   <root>/tmp/                                staging files (`*.tmp`), cleared on open (only old ones: `keepStagingMs`)
 *   <root>/quarantine/                         corrupt blobs moved aside, never deleted
 *   <root>/gc-aside/                           a blob gc is judging (./gc-aside.ts), restored at open
 * Only hex digests ever become path components.
 */
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { digestHex, hashBackendProblem, isDigest, type Digest, type HashBackend } from '../hash/digest.js';
import {
  refuseOutsideOpen,
  OPENING,
  isErrnoError,
  isUint8Array,
  OPERATION_CANCELLED,
  quoted,
  readOptionFields,
  shownValue,
  StoreError,
  storageFailure,
  throwIfAborted,
  type NamesEveryField,
} from '../errors.js';
import { errnoMessage } from './errno-text.js';
import { nodeFsOps, type FsOps } from './ops.js';
import { deleteIfOld, restoreAside } from './gc-aside.js';
import { settledOrAborted } from '../abort.js';
import {
  AbstractBlobStore,
  type BlobInfo,
  type BlobStat,
  type DeleteOptions,
  type ReadLimits,
  type WriteLimits,
} from '../blob-store.js';
import { ensurePrivateDir, isPathName, privateDirIfPresent } from './safe-dir.js';
import { FLUSH_BEHIND, readStream, readWhole, slices, writeBuffer, writeStream } from './blob-io.js';
import { threadHasher } from '../hash/hash-thread.node.js';

const HEX64 = /^[0-9a-f]{64}$/;
const WRITE_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW;
// O_NONBLOCK: opening a FIFO planted at a blob path must not hang the reader.
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface FsBlobStoreOptions {
  /** BLAKE3 backend used to hash while writing and re-hash while reading. */
  hash: HashBackend;
  /** Upper bound for any single blob, in bytes (default 1 GiB). */
  maxBlobBytes?: number | undefined;
  /** Filesystem operations; tests inject faults here. */
  fs?: FsOps | undefined;
  /**
   * Hash streamed puts on a worker thread, so a large put's hashing overlaps its encoding and copying
   * (default: when `hash` is the native backend, whose code the thread runs).
   */
  hashThread?: boolean | undefined;
  /**
   * Staging files in `<root>/tmp/` changed less than this many ms ago are kept by `open` and `recover` (default 0:
   * every one goes, for a store whose root one process writes). Processes that share one root's blob files (ledgers
   * given a log of their own that is not exclusive, and no blobs; stores opened through this entry point by several
   * processes) give a bound past any write's pause: a write in flight keeps its staging file's time fresh, and one
   * removed under it fails at its link.
   */
  keepStagingMs?: number | undefined;
  /**
   * `open` recovers nothing (an open to diagnose, fsck, writes nothing to the store it diagnoses): the staging files
   * of interrupted writes and the blobs an interrupted gc held in `gc-aside/` stay where they are, listed in the
   * report's `leftInPlace` (reads find a blob held aside all the same); and the store's directories missing
   * (`blobs-v1/`, `tmp/`, `quarantine/`, `gc-aside/`) are not made: a write makes those it writes through. Default false.
   */
  leaveLeftovers?: boolean | undefined;
  /**
   * Ends `open`'s recovery once it aborts (`CANCELLED`), looked at before each staging file in `tmp/` is judged or
   * removed and before each blob an interrupted gc held in `gc-aside/` is judged or put back (those removed or put
   * back stay so, each put back whole; the next open does the rest), and with `leaveLeftovers` before each of them is
   * judged and listed: an open over many leftovers stops promptly. Not kept by the store (`openLedger` passes its own
   * signal).
   */
  signal?: AbortSignal | undefined;
}

/** Every field of FsBlobStoreOptions: `FsBlobStore.open` reads these once and refuses any other name. */
const FS_BLOB_STORE_FIELDS = [
  'hash',
  'maxBlobBytes',
  'fs',
  'hashThread',
  'keepStagingMs',
  'leaveLeftovers',
  'signal',
] as const satisfies ReadonlyArray<keyof FsBlobStoreOptions>;
const everyFsBlobStoreField: NamesEveryField<FsBlobStoreOptions, typeof FS_BLOB_STORE_FIELDS> = true;
void everyFsBlobStoreField;

/** What `FsBlobStore.open` and `recover` cleared: the staging files of interrupted writes. */
export interface FsRecoveryReport {
  stagingRemoved: number;
  /**
   * With `leaveLeftovers`: the paths `recover` would have dealt with, left as they are (staging files it would
   * remove; blobs in `gc-aside/` it would link back at their paths: not one a gc of this process is judging there).
   */
  leftInPlace?: { staging: string[]; aside: string[] } | undefined;
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function storageFailed(step: string, err: unknown): Error {
  if (!isErrnoError(err)) return storageFailure(StoreError, `blob store: ${step}`, err);
  // By its code and its path quoted (errnoMessage): the errno's own message embeds the path raw.
  return new StoreError('STORAGE_FAILED', `blob store: ${step} failed: ${errnoMessage(err)}`, { cause: err });
}

export class FsBlobStore extends AbstractBlobStore {
  readonly root: string;
  private readonly blobsV1Dir: string;
  private readonly blobDir: string;
  private readonly tmpDir: string;
  private readonly quarantineDir: string;
  private readonly asideDir: string;
  private readonly hash: HashBackend;
  private readonly fs: FsOps;
  private readonly hashThread: boolean;
  private readonly keepStagingMs: number;
  /**
   * Directories holding an entry not yet known durable (their fsync failed), each with the version of
   * its listing: a retry may find the entry already there (EEXIST), so the next put fsyncs them.
   */
  private readonly unsyncedDirs = new Map<string, number>();
  /**
   * The store's directories an open to diagnose (`leaveLeftovers`) found missing and did not make, parents first:
   * a diagnosis changes nothing. A write makes those it writes through (`makeUnmade`); reads find nothing in them.
   */
  private readonly unmade = new Set<string>();
  private listingVersion = 0;
  /**
   * First-level shard directories this process has made durable, with every entry in them. One that was already
   * there, or a second-level one in it, may have been made by a process that crashed before the fsync of its parent:
   * the first put of this process under a first-level shard fsyncs it and its parent (at most 512 fsyncs in a
   * process's life, where one per second-level shard would be up to 65,536).
   */
  private readonly durableShards = new Set<string>();
  /**
   * Second-level shard directories this process made whose flush into their parent is under way: a put that finds one
   * there waits for that flush before it links its blob in it (else it could report a blob stored in a directory a
   * crash takes back, or one whose flush then fails).
   */
  private readonly flushingMade = new Map<string, Promise<void>>();
  /** The root directory opened (device and inode): every write and read refuses another one at its path. */
  private rootId: { dev: number; ino: number } | undefined;

  private constructor(token: typeof OPENING, root: string, options: FsBlobStoreOptions) {
    refuseOutsideOpen(token, StoreError, 'FsBlobStore', 'FsBlobStore.open(root, options)');
    super(options);
    this.root = root;
    this.blobsV1Dir = join(root, 'blobs-v1');
    this.blobDir = join(this.blobsV1Dir, 'blake3');
    this.tmpDir = join(root, 'tmp');
    this.quarantineDir = join(root, 'quarantine');
    this.asideDir = join(root, 'gc-aside');
    this.hash = options.hash;
    this.fs = options.fs ?? nodeFsOps;
    this.hashThread = options.hashThread ?? options.hash.name === 'native';
    const keep = options.keepStagingMs ?? 0;
    if (typeof keep !== 'number' || !Number.isFinite(keep) || keep < 0)
      throw new StoreError('INVALID_ARGUMENT', `keepStagingMs must be a non-negative number, got ${shownValue(keep)}`);
    this.keepStagingMs = keep;
  }

  /**
   * Opens (creating if needed) a store under `root` and clears its staging area.
   * @throws StoreError `UNSAFE_ROOT` if the root is a symlink, not a directory, or writable by group/others;
   *   `INVALID_ARGUMENT` for a `root` that is not a non-empty path (or holds a NUL), or an option of a name it does not
   *   know (or one that throws as it is read), before anything is made.
   */
  static async open(
    root: string,
    given: FsBlobStoreOptions,
  ): Promise<{ store: FsBlobStore; recovery: FsRecoveryReport }> {
    // An empty root names the working directory (its directories were made there before the open failed), one that is
    // no string failed as Node's uncoded TypeError, one with a NUL names no file: refused as openLedger refuses them.
    if (!isPathName(root))
      throw new StoreError(
        'INVALID_ARGUMENT',
        `FsBlobStore.open: root must be a non-empty path without NUL characters, not ${shownValue(root, 80)}`,
      );
    // Each field read once (a misspelt `leaveLeftovers` would clear what a diagnosis must leave): INVALID_ARGUMENT.
    const options = readOptionFields(
      given,
      FS_BLOB_STORE_FIELDS,
      'FsBlobStore.open options',
      StoreError,
    ) as FsBlobStoreOptions;
    // A hash that is none failed the constructor with a TypeError, or (a name without create) the first put.
    const hashProblem = hashBackendProblem(options.hash);
    if (hashProblem) throw new StoreError('INVALID_ARGUMENT', `FsBlobStore.open: ${hashProblem}`);
    const store = new FsBlobStore(OPENING, root, options);
    const { dev, ino } = await ensurePrivateDir(root, 'UNSAFE_ROOT');
    store.rootId = { dev, ino };
    for (const dir of [store.blobsV1Dir, store.blobDir, store.tmpDir, store.quarantineDir, store.asideDir]) {
      // An open to diagnose judges those there as any open does, and makes none: an empty one missing is no damage.
      if (options.leaveLeftovers !== true) await ensurePrivateDir(dir, 'UNSAFE_PATH');
      else if ((await privateDirIfPresent(dir, 'UNSAFE_PATH')) === undefined) store.unmade.add(dir);
    }
    // The store's own directories durable in their parents before any blob is named under them (a new store's
    // first publish fsyncs only the shard directories it makes). Nothing dirty: each is a quick no-op.
    for (const dir of [root, store.blobsV1Dir])
      if (!store.unmade.has(dir)) await store.fs.fsyncDir(dir).catch(wrap('fsync directory'));
    const recovery =
      options.leaveLeftovers === true ? await store.leftovers(options.signal) : await store.recover(options.signal);
    return { store, recovery };
  }

  /**
   * Makes those of `dirs` (parents first) an open to diagnose left unmade, before a write through them: a ledger
   * opened to diagnose still publishes.
   */
  private async makeUnmade(dirs: string[]): Promise<void> {
    for (const dir of dirs) {
      if (!this.unmade.has(dir)) continue;
      await ensurePrivateDir(dir, 'UNSAFE_PATH');
      this.unmade.delete(dir);
    }
  }

  /** The names in one of the store's directories; none in one an open to diagnose found missing. */
  private async namesIn(dir: string): Promise<string[]> {
    return this.unmade.has(dir) ? [] : this.fs.readdir(dir);
  }

  /** What `recover` would deal with, found and left in place (`leaveLeftovers`). */
  private async leftovers(signal?: AbortSignal): Promise<FsRecoveryReport> {
    let left: FsRecoveryReport;
    try {
      const before = Date.now() - this.keepStagingMs;
      const staging: string[] = [];
      for (const name of (await this.namesIn(this.tmpDir)).sort()) {
        if (!name.endsWith('.tmp')) continue; // as `recover`: only staging names are leftovers of ours
        if (this.stagingInFlight(name)) continue; // as `recover`: a put of this process is writing it
        if (signal?.aborted) break; // CANCELLED below, not a storage failure
        const path = join(this.tmpDir, name);
        const st = await this.fs.lstat(path).catch((err: unknown) => {
          if (errno(err) === 'ENOENT') return undefined;
          throw err;
        });
        // As `recover`: a directory is none of ours; with `keepStagingMs`, a young file may be a write in flight.
        if (st === undefined || st.isDirectory() || (this.keepStagingMs > 0 && st.mtimeMs >= before)) continue;
        staging.push(path);
      }
      const aside: string[] = [];
      for (const name of (await this.namesIn(this.asideDir)).sort()) {
        if (!HEX64.test(name)) continue;
        // A gc of this process (through any of its stores on this root) judging the blob now holds it there: no
        // leftover of an interrupted gc (`recover` waits for its turn and finds it removed or linked back).
        if (judging.has(queueKey(this.rootId, name))) continue;
        if (signal?.aborted) break; // CANCELLED below, not a storage failure
        const path = join(this.asideDir, name);
        if (this.keepStagingMs > 0) {
          // As `restoreAside` judges it: one moved aside since is another process's gc judging it now.
          const st = await this.fs.lstat(path).catch((err: unknown) => {
            if (errno(err) === 'ENOENT') return undefined;
            throw err;
          });
          if (st === undefined || st.ctimeMs >= before) continue;
        }
        aside.push(path);
      }
      left = { stagingRemoved: 0, leftInPlace: { staging, aside } };
    } catch (err) {
      throw storageFailed('list leftovers', err);
    }
    throwIfAborted(signal);
    return left;
  }

  /**
   * Removes every staging file left by an interrupted write (recovery on open); with `keepStagingMs`, only those
   * unchanged for that long (a younger one may be another process's write in flight). Never one a put of this process
   * is writing (through this store or another opened on the root). Then puts back the blobs a gc that stopped held
   * aside.
   * @throws StoreError `CANCELLED` once `signal` aborts, looked at before each staging file and before each blob held
   *   aside (those removed or put back stay so, each put back whole; the next recovery does the rest)
   */
  async recover(signal?: AbortSignal): Promise<FsRecoveryReport> {
    await this.makeUnmade([this.blobsV1Dir, this.blobDir, this.tmpDir, this.quarantineDir, this.asideDir]);
    let stagingRemoved = 0;
    try {
      const before = Date.now() - this.keepStagingMs;
      for (const name of await this.fs.readdir(this.tmpDir)) {
        // Only the names a blob write stages under (`<hex>.tmp`, older releases' `*.tmp` too): anything else an
        // operator put here (an export's bundle, a key file) is no leftover of ours, and is never deleted.
        if (!name.endsWith('.tmp')) continue;
        // A put of this process writing it now, through this store or another one opened on this root (a second open
        // of it): no leftover, and removed it would fail that put at its link.
        if (this.stagingInFlight(name)) continue;
        if (signal?.aborted) break; // CANCELLED below, not a storage failure
        const path = join(this.tmpDir, name);
        const st = await this.fs.lstat(path).catch((err: unknown) => {
          if (errno(err) === 'ENOENT') return undefined; // its write linked it and removed it meanwhile
          throw err;
        });
        // A write stages a file (a link planted under such a name goes too, itself, never what it names); a directory
        // is none of ours (an operator's `notes.tmp/`), and is never deleted, let alone with what it holds. With
        // `keepStagingMs`, a file changed since may be another process's write in flight.
        if (st === undefined || st.isDirectory() || (this.keepStagingMs > 0 && st.mtimeMs >= before)) continue;
        await this.fs.rm(path);
        stagingRemoved++;
      }
    } catch (err) {
      throw storageFailed('recover staging', err);
    }
    throwIfAborted(signal);
    // A gc interrupted while it held a blob aside: put it back; the next gc judges it again.
    await restoreAside(
      this.fs,
      this.asideDir,
      (name) => {
        if (!HEX64.test(name)) return undefined;
        const { dir2, file } = this.pathOf(name);
        return { dir: dir2, file };
      },
      this.keepStagingMs,
      signal,
      // With the root to this process: in the blob's turn among the gc judgements of the process (through any of its
      // stores on this root): one under way holds the blob aside and removes it or links it back itself. The wait ends
      // at the signal (CANCELLED). (In a shared root a name moved aside just now is left alone by its time anyway.)
      this.keepStagingMs > 0
        ? undefined
        : (name, judge) => oneAtATime(judging, queueKey(this.rootId, name), judge, signal),
    ).catch(wrap('recover gc-aside'));
    throwIfAborted(signal);
    return { stagingRemoved };
  }

  /** Whether `name` in `tmp/` is the staging file of a put of this process under way on this root (`stagedInFlight`). */
  private stagingInFlight(name: string): boolean {
    return stagedInFlight.has(queueKey(this.rootId, name));
  }

  private pathOf(hex: string): { dir1: string; dir2: string; file: string } {
    const dir1 = join(this.blobDir, hex.slice(0, 2));
    const dir2 = join(dir1, hex.slice(2, 4));
    return { dir1, dir2, file: join(dir2, hex) };
  }

  /**
   * docs/DESIGN.md, "Blob store": write while hashing, one pass over the bytes. The write and its fsync run on
   * the I/O threads while this thread hashes; once the digest is known the shard directories are made
   * durable, overlapping the data fsync. Only then is the name linked: data durable before its name.
   */
  protected async _put(source: Uint8Array | AsyncIterable<Uint8Array>, { signal }: WriteLimits): Promise<BlobInfo> {
    await this.makeUnmade([this.blobsV1Dir, this.blobDir, this.tmpDir]);
    // Staging and the blob tree were checked at open; a link swapped in since would send the write outside the root.
    await this.checkRealDirs([this.tmpDir, this.blobsV1Dir, this.blobDir]);
    const name = `${randomBytes(16).toString('hex')}.tmp`;
    const stagingPath = join(this.tmpDir, name);
    // Listed before the file is made and until it is gone: a recovery meanwhile (another store's open on this root in
    // this process, or `recover`) leaves it alone.
    const inFlight = queueKey(this.rootId, name);
    stagedInFlight.add(inFlight);
    let handle: FileHandle | undefined;
    let created = false;
    try {
      handle = await this.fs.open(stagingPath, WRITE_FLAGS, 0o600).catch(wrap('open staging file'));
      created = true;
      const ctx = {
        fs: this.fs,
        hash: this.hash,
        afterDigest: (digest: Digest) => this.ensureShardDirs(digest),
        ...(this.hashThread ? { hashThread: threadHasher } : {}),
      };
      // A buffer above one flush-behind step is written as the stream path writes (fsyncs behind the writes, hashed
      // on the hash thread): one write and one fsync of it ran at ~0.65× of that (benchmarks/large-steps.ts).
      const written =
        isUint8Array(source) && source.length <= FLUSH_BEHIND
          ? await writeBuffer(ctx, handle, source, signal)
          : await writeStream(ctx, handle, isUint8Array(source) ? slices(source) : source, signal);
      await this.fs.close(handle).catch(wrap('close'));
      handle = undefined;
      throwIfAborted(signal);
      await this.placeBlob(stagingPath, written.digest, written.size, signal);
      return written;
    } catch (err) {
      throw storageFailed('put', err);
    } finally {
      if (handle) await handle.close().catch(() => {});
      if (created) await this.fs.unlink(stagingPath).catch(() => {});
      stagedInFlight.delete(inFlight);
    }
  }

  /** Makes both shard directories of `digest` exist durably (each new one fsynced into its parent). */
  private async ensureShardDirs(digest: Digest): Promise<void> {
    const { dir1, dir2 } = this.pathOf(digestHex(digest));
    // Again right before the shard directories are made and the name linked: the swap may have come mid-write.
    await this.checkRealDirs([this.blobsV1Dir, this.blobDir]);
    const made1 = await this.ensureShardDir(dir1);
    if (made1 || !this.durableShards.has(dir1)) {
      await this.syncDir(this.blobDir);
      // Found there: the second-level directories in it are made durable in it at once.
      if (!made1) await this.syncDir(dir1);
      this.durableShards.add(dir1);
    }
    if (await this.ensureShardDir(dir2)) {
      const flushing = this.syncDir(dir1);
      this.flushingMade.set(dir2, flushing);
      try {
        await flushing;
      } finally {
        if (this.flushingMade.get(dir2) === flushing) this.flushingMade.delete(dir2);
      }
    } else {
      // Made a moment ago by another put of this process, whose flush of it into its parent may still be under way:
      // this blob is not stored before that flush is done. Its failure lists the parent, flushed again below.
      await this.flushingMade.get(dir2)?.catch(() => {});
    }
    // Leftovers of an earlier failed fsync (perhaps of the very directories just found to exist).
    for (const dir of [...this.unsyncedDirs.keys()]) await this.syncDir(dir);
  }

  /** fsyncs a directory; on failure it stays listed, so that the next put fsyncs it again. */
  private async syncDir(dir: string): Promise<void> {
    const listed = this.unsyncedDirs.get(dir);
    try {
      await this.fs.fsyncDir(dir);
    } catch (err) {
      this.unsyncedDirs.set(dir, ++this.listingVersion);
      throw storageFailed('fsync directory', err);
    }
    // Settles only a listing made before this fsync began; one made meanwhile may not be covered by it.
    if (listed !== undefined && this.unsyncedDirs.get(dir) === listed) this.unsyncedDirs.delete(dir);
  }

  /**
   * Places one blob at a time per digest in this process (the store's only writer), whichever of its stores on this
   * root puts it (`placing`): two puts of the same bytes that both find a damaged copy at the path would otherwise each
   * quarantine and link — the second rename finding nothing, a link finding the other's fresh copy, or one moving the
   * other's acknowledged copy aside.
   */
  private async placeBlob(staging: string, digest: Digest, size: number, signal?: AbortSignal): Promise<void> {
    return oneAtATime(
      placing,
      queueKey(this.rootId, digestHex(digest)),
      () => this.placeBlobAlone(staging, digest, size),
      signal,
    );
  }

  /** Links the fsynced staging file to its final name, never overwriting, then makes the name durable. */
  private async placeBlobAlone(staging: string, digest: Digest, size: number): Promise<void> {
    const hex = digestHex(digest);
    const { dir2, file } = this.pathOf(hex);
    try {
      await this.fs.link(staging, file);
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw storageFailed('link', err);
      const matches = await this.existingMatches(digest, size).catch((e: unknown) => {
        // gc took the old file aside between the link and this read: link the staged copy in its place.
        if (e instanceof StoreError && e.code === 'BLOB_NOT_FOUND') return undefined;
        throw e;
      });
      if (matches === undefined) {
        await this.fs.link(staging, file).catch((e: unknown) => {
          if (errno(e) !== 'EEXIST') throw storageFailed('link', e);
        });
      } else if (!matches) {
        await this.quarantine(hex, file);
        await this.fs.link(staging, file).catch(wrap('link'));
      } else {
        await this.refresh(file, staging);
      }
    }
    // Also on the "already there" path: the put that linked it may have failed at exactly this fsync.
    await this.syncDir(dir2);
  }

  /**
   * A put of bytes already stored makes them young again: gc judges by this time, and the manifest about
   * to name the blob is not appended yet. When gc removed the old file meanwhile, the staged copy takes its place.
   */
  private async refresh(file: string, staging: string): Promise<void> {
    const now = new Date();
    try {
      await this.fs.utimes(file, now, now);
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw storageFailed('refresh storage time', err);
      await this.fs.link(staging, file).catch((e: unknown) => {
        if (errno(e) !== 'EEXIST') throw storageFailed('link', e);
      });
    }
  }

  /**
   * Refuses a root that is no longer the directory opened (moved away, a link or another directory put at its path:
   * every path below it would lead elsewhere), and any of `dirs` that is no longer a real directory (a symlink swapped
   * in after open). One round of lstat calls, judged as a walk down from the root.
   */
  private async checkRealDirs(dirs: string[]): Promise<void> {
    const stats = await Promise.allSettled([this.root, ...dirs].map((dir) => this.fs.lstat(dir)));
    for (const [i, st] of stats.entries()) {
      if (st.status === 'rejected') throw storageFailed('lstat', st.reason);
      if (i === 0) this.checkRoot(st.value);
      else if (!st.value.isDirectory())
        throw new StoreError(
          'UNSAFE_PATH',
          `blob store: ${quoted(dirs[i - 1]!)} is not a directory (symlink planted?)`,
        );
    }
  }

  /** Refuses a root that is not the directory `open` found at its path. */
  private checkRoot(st: { dev: number; ino: number; isDirectory(): boolean }): void {
    const id = this.rootId;
    if (id && st.isDirectory() && st.dev === id.dev && st.ino === id.ino) return;
    throw new StoreError(
      'UNSAFE_ROOT',
      `blob store: ${quoted(this.root)} is no longer the directory the store opened (moved, or a link or another directory put in its place); nothing was read or written through it, reopen the store`,
    );
  }

  /** Creates a shard directory if missing; returns true when it was created. Refuses a planted symlink. */
  private async ensureShardDir(dir: string): Promise<boolean> {
    try {
      await this.fs.mkdir(dir, 0o700);
      return true;
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw storageFailed('mkdir', err);
    }
    const st = await this.fs.lstat(dir).catch(wrap('lstat'));
    if (!st.isDirectory()) {
      throw new StoreError('UNSAFE_PATH', `blob store: ${quoted(dir)} is not a directory (symlink or file planted?)`);
    }
    return false;
  }

  /**
   * Whether the file already at a blob's path holds exactly the `size` bytes of `digest`. One of another size is not
   * read past `size` (a file grown past every limit is as damaged as a flipped bit, and is quarantined the same way).
   */
  private async existingMatches(digest: Digest, size: number): Promise<boolean> {
    const hex = digestHex(digest);
    const { dir1, dir2, file } = this.pathOf(hex);
    // The directories on the way first, outside the judgement of the file: one that is no longer the real directory (a
    // link swapped in since the put checked it) is the put's refusal (UNSAFE_PATH), never a damaged copy at the path,
    // which would be moved into quarantine/ and the blob linked in its place, both through that link.
    await this.checkShardDirs(dir1, dir2);
    try {
      // At its path only: a copy gc holds aside is not the file this put would quarantine or refresh.
      const { handle, size: stored } = await this.openBlobFile(digest, hex, file, size, false);
      try {
        return (await readWhole(handle, stored, digest, this.hash)).length === size;
      } catch (err) {
        throw storageFailed('read blob', err);
      } finally {
        await handle.close().catch(() => {});
      }
    } catch (err) {
      if (err instanceof StoreError && ['BLOB_INTEGRITY', 'BLOB_TOO_LARGE', 'UNSAFE_PATH'].includes(err.code))
        return false;
      throw err;
    }
  }

  private async quarantine(hex: string, file: string): Promise<void> {
    const target = join(this.quarantineDir, `${hex}.${Date.now()}.${randomBytes(4).toString('hex')}`);
    await this.makeUnmade([this.quarantineDir]);
    // As for every other write: a link swapped in for quarantine/ would move the blob out of the root, one for a
    // directory on the way to the blob a file from outside it into quarantine/.
    const { dir1, dir2 } = this.pathOf(hex);
    await this.checkRealDirs([this.blobsV1Dir, this.blobDir, dir1, dir2, this.quarantineDir]);
    try {
      await this.fs.rename(file, target);
    } catch (err) {
      // Gone since the put found it damaged: gc took it (moved aside, then unlinked as old). Nothing is left to move;
      // the staged copy is linked in its place, as when gc takes a copy before the put reads it.
      if (errno(err) === 'ENOENT') return;
      throw storageFailed('quarantine', err);
    }
    // Listed until an fsync of it succeeds (`syncDir`), as a shard directory is: a retry links the blob at the path the
    // damaged copy left and fsyncs the shard, which makes the copy's removal from it durable; without quarantine/'s
    // fsync, its arrival there might not be, and a crash would lose the copy quarantine/ keeps.
    await this.syncDir(this.quarantineDir);
  }

  protected async _get(digest: Digest, limits: ReadLimits): Promise<Uint8Array> {
    const { handle, size } = await this.openBlob(digest, limits.limit);
    try {
      return await readWhole(handle, size, digest, this.hash, limits.signal);
    } catch (err) {
      throw storageFailed('read blob', err);
    } finally {
      await handle.close().catch(() => {});
    }
  }

  protected async *_chunks(digest: Digest, limits: ReadLimits): AsyncIterable<Uint8Array> {
    const { handle, size } = await this.openBlob(digest, limits.limit);
    try {
      yield* readStream(handle, size, digest, this.hash, limits.signal);
    } catch (err) {
      throw storageFailed('read blob', err);
    } finally {
      await handle.close().catch(() => {});
    }
  }

  /**
   * Opens a stored blob for reading: a regular file within the size limit, reached through no symlink; also where gc
   * holds it while it judges it (`atPathOrAside`).
   */
  private async openBlob(digest: Digest, limit: number): Promise<{ handle: FileHandle; size: number }> {
    const hex = digestHex(digest);
    const { dir1, dir2, file } = this.pathOf(hex);
    await this.checkShardDirs(dir1, dir2);
    return this.openBlobFile(digest, hex, file, limit, true);
  }

  /**
   * `openBlob` once the directories on the way to `file` were checked (`checkShardDirs`); with `aside`, also where gc
   * holds it while it judges it.
   */
  private async openBlobFile(
    digest: Digest,
    hex: string,
    file: string,
    limit: number,
    aside: boolean,
  ): Promise<{ handle: FileHandle; size: number }> {
    let handle: FileHandle;
    try {
      const openAt = (path: string) => this.fs.open(path, READ_FLAGS);
      handle = aside ? await this.atPathOrAside(file, hex, openAt) : await openAt(file);
    } catch (err) {
      if (errno(err) === 'ENOENT') throw new StoreError('BLOB_NOT_FOUND', `blob ${digest} is not stored`);
      if (errno(err) === 'ELOOP')
        throw new StoreError('UNSAFE_PATH', `blob ${digest}: a symlink stands at its path`, { cause: err });
      throw storageFailed('open blob', err);
    }
    try {
      const st = await handle.stat();
      if (!st.isFile()) throw new StoreError('UNSAFE_PATH', `blob ${digest}: not a regular file at its path`);
      if (st.size > limit)
        throw new StoreError('BLOB_TOO_LARGE', `blob ${digest} is ${st.size} bytes, over the limit of ${limit}`);
      return { handle, size: st.size };
    } catch (err) {
      await handle.close().catch(() => {});
      throw storageFailed('read blob', err);
    }
  }

  /**
   * `op` on a blob's file. While gc judges a blob it holds the file in gc-aside/ under the same name (renamed there,
   * then linked back if the blob turns out young, as when a put of the same bytes just refreshed it): a read in that
   * window finds the file there, else at its path again (gc may have linked it back meanwhile). The bytes are
   * verified against the digest as from any path. @throws the filesystem's error of the last try (ENOENT: none)
   */
  private async atPathOrAside<T>(file: string, hex: string, op: (path: string) => Promise<T>): Promise<T> {
    try {
      return await op(file);
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw err;
    }
    // No gc-aside/ (an open to diagnose found none): nothing is held aside.
    if (this.unmade.has(this.asideDir)) return op(file);
    await this.checkRealDirs([this.asideDir]);
    try {
      return await op(join(this.asideDir, hex));
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw err;
    }
    return op(file);
  }

  private async checkShardDirs(dir1: string, dir2: string): Promise<void> {
    const dirs = [this.root, this.blobsV1Dir, this.blobDir, dir1, dir2];
    // All at once, one round of calls instead of five on every read, judged in order as a walk down the path.
    const stats = await Promise.allSettled(dirs.map((dir) => this.fs.lstat(dir)));
    for (const [i, st] of stats.entries()) {
      if (st.status === 'rejected') {
        if (errno(st.reason) === 'ENOENT' && i > 0) return;
        throw storageFailed('lstat', st.reason);
      }
      if (i === 0) this.checkRoot(st.value);
      else if (!st.value.isDirectory())
        throw new StoreError('UNSAFE_PATH', `blob store: ${quoted(dirs[i]!)} is not a directory (symlink planted?)`);
    }
  }

  protected async _stat(digest: Digest): Promise<BlobStat | undefined> {
    const hex = digestHex(digest);
    const { dir1, dir2, file } = this.pathOf(hex);
    await this.checkShardDirs(dir1, dir2);
    try {
      const st = await this.atPathOrAside(file, hex, (path) => this.fs.lstat(path));
      if (!st.isFile()) return undefined;
      return { digest, size: st.size, storedAtMs: st.mtimeMs };
    } catch (err) {
      if (errno(err) === 'ENOENT') return undefined;
      throw storageFailed('stat', err);
    }
  }

  protected async *_list(): AsyncIterable<Digest> {
    const shards = await this.namesIn(this.blobDir).catch(wrap('list'));
    // A shard directory removed meanwhile, or a file where one would be, holds no blob; one that cannot be read is
    // the listing's failure (fsck reports it, gc stops), never a silent gap.
    const entries = (path: string) =>
      this.fs.readdir(path).catch((err: unknown) => {
        if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return [] as string[];
        throw storageFailed('list', err);
      });
    for (const a of shards) {
      if (!/^[0-9a-f]{2}$/.test(a)) continue;
      for (const b of await entries(join(this.blobDir, a))) {
        if (!/^[0-9a-f]{2}$/.test(b)) continue;
        for (const name of await entries(join(this.blobDir, a, b))) {
          const d = `blake3:${name}`;
          if (HEX64.test(name) && name.startsWith(a + b) && isDigest(d)) yield d;
        }
      }
    }
  }

  protected async _delete(digest: Digest, options: DeleteOptions): Promise<boolean> {
    const { dir1, dir2, file } = this.pathOf(digestHex(digest));
    await this.checkShardDirs(dir1, dir2);
    try {
      if (options.storedBeforeMs !== undefined) {
        const storedBeforeMs = options.storedBeforeMs;
        // The signal ends only the wait for the blob's turn (a put or delete of it that hangs): once the judgement
        // runs, it moves the file aside and unlinks it or links it back, whole, whatever the signal does.
        return await oneAtATime(
          judging,
          queueKey(this.rootId, digestHex(digest)),
          async () => {
            await this.makeUnmade([this.asideDir]);
            // Again in its turn: a wait behind a call that hangs is time enough for a link swapped in on the way.
            await this.checkShardDirs(dir1, dir2);
            await this.checkRealDirs([this.asideDir]);
            return deleteIfOld(
              this.fs,
              { file, dir: dir2, asideDir: this.asideDir, name: digestHex(digest) },
              storedBeforeMs,
            );
          },
          options.signal,
        );
      }
      await this.fs.unlink(file);
      await this.fs.fsyncDir(dir2);
      return true;
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw storageFailed('delete', err);
      return false;
    }
  }

  protected async _close(): Promise<void> {}
}

/**
 * Per root directory and digest, the placing of a blob under way in this process, settled: the next one waits for it.
 * Shared by every FsBlobStore of the process (module-level), keyed by the root's device and inode (`queueKey`): two
 * stores opened on one root (two opens of the /store entry point, two ledgers given one root) write one tree of blobs,
 * and a queue of each store's own would let their puts of the same bytes meet as two puts of one store would.
 */
const placing = new Map<string, Promise<void>>();
/**
 * Per root directory, the staging files (`tmp/<name>`, keyed as `queueKey` keys a digest) of the puts under way in this
 * process, whichever of its stores on that root writes them: an open of a second store on the root (and `recover`)
 * removes staging files as leftovers of interrupted writes, and must pass over these.
 */
const stagedInFlight = new Set<string>();
/**
 * Per root directory and digest, gc's conditional delete under way in this process, settled: the next one waits for
 * it; shared like `placing`. Two at once would share the blob's name in gc-aside/: one moving a copy there (a
 * publish's, linked at the path while the other held the old copy aside) replaces the other's, which then unlinks it as
 * the old copy it judged. Across processes nothing is queued: an embedded ledger's root has one writing process (the
 * LevelDB lock, taken before its blob store is opened: docs/DESIGN.md), and a ledger on PostgreSQL keeps its blobs
 * there. Processes that share one root's blob files some other way (each opening it through the /store entry point,
 * or ledgers given a log of their own and no blobs) are not covered: two gc runs of theirs at once on one blob can
 * still meet in gc-aside/ as described, and two puts of the same bytes over a damaged copy as `placing` says.
 */
const judging = new Map<string, Promise<void>>();

/**
 * The key of one blob of one root directory in `placing` and `judging` (of one staging name in `stagedInFlight`): the
 * root by device and inode, so that every path to it (relative, through a symlink, a bind mount) is one root. An entry
 * goes once its call has settled and no other waits (`oneAtATime`): the maps hold the calls under way only, whatever
 * the number of roots and stores.
 */
function queueKey(root: { dev: number; ino: number } | undefined, hex: string): string {
  // Set by `open` before any put or delete can run: a store is only ever made there.
  if (!root) throw new Error('blob store: used before open');
  return `${root.dev}:${root.ino}:${hex}`;
}

/**
 * Runs `call` once the call under way for `key` in `queue` has settled (either way); the next one waits for it. An
 * abort of `signal` while waiting ends the wait (CANCELLED: `call` never runs), so a call that hangs (a stalled disk)
 * holds no cancellable caller behind it; the next one still waits for the call under way.
 */
async function oneAtATime<T>(
  queue: Map<string, Promise<void>>,
  key: string,
  call: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const before = queue.get(key);
  const run = before
    ? settledOrAborted(
        before,
        signal,
        () => new StoreError('CANCELLED', OPERATION_CANCELLED, { cause: signal?.reason }),
      ).then(call)
    : call();
  // Settled once both this call and the one before it have: a wait ended by the signal hands no turn on early.
  const settled = Promise.all([before, run]).then(
    () => {},
    () => before,
  );
  queue.set(key, settled);
  // The entry goes once the turn it stands for is over and no later call waits on it (the maps hold calls under way).
  void settled.then(() => {
    if (queue.get(key) === settled) queue.delete(key);
  });
  return run;
}

function wrap(step: string) {
  return (err: unknown): never => {
    throw storageFailed(step, err);
  };
}
