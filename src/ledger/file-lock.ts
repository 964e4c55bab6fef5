/**
 * One holder at a time, across the processes sharing a store root (PostgreSQL backend: several processes of a host
 * share the root's key file, trust file and pinned checkpoint), and one witness per state directory (held for the
 * witness's lifetime: `takeFileLock`). Used for trust.json (a rotation re-reads the keys,
 * closes the old window in the log and writes trust.json under it, so two rotations at once end one after the other
 * instead of the last write dropping the other's new key) and for a shared pin file (two pins at once would write
 * the same slot, and the smaller tree could end up pinned over the larger).
 *
 * The lock is `<path>.lock`, holding its owner: pid, host name, boot id, pid namespace and start time (Linux), and
 * a random nonce. It is written whole under a temporary name and linked into place (a link fails where a lock stands), so no
 * process ever sees an empty or half-written lock. Its holder touches it every `staleMs / 3` while it holds it.
 *
 * Stale rule. A lock of this machine (same host, boot and pid namespace) is judged by its holder: broken once the
 * pid no longer runs, is a zombie, or now names another process (its start time differs), never for its age while the holder runs
 * (where the start time cannot be read, as on systems without /proc, the age rule below applies as well). A lock of
 * another machine sharing the filesystem, or one that names no owner, is broken once it was not touched for
 * `staleMs`. Breakers take turns under `<path>.lock.break` (made and judged the same way; one of another machine
 * after 10 s untouched) and remove the lock only if it is still the very one they judged (same inode, contents and
 * times): a lock taken, or touched, meanwhile is never removed. What remains: a holder on another machine whose
 * process stops for longer than `staleMs`, or a wall clock stepped forward by more than `staleMs`, can be taken over
 * while it still runs.
 */
import { randomBytes } from 'node:crypto';
import { constants, futimesSync, readFileSync, readlinkSync } from 'node:fs';
import { lstat, open, readdir, unlink, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { createFileWhole } from '../../store/fs/atomic-file.js';
import { isProcessAlive } from '../../store/fs/process.js';
import { quoted, shownValue, StoreError } from '../../store/errors.js';
import { fileFailure } from '../../store/fs/errno-text.js';
import { LedgerError, throwIfCancelled } from '../errors.js';
import { MAX_TIMER_MS, onAbort } from '../../store/abort.js';

export interface FileLockOptions {
  /** How long to wait for another holder (default 30 s): then `LOCKED`. */
  waitMs?: number;
  /**
   * A lock of another machine (or naming no owner) not touched for this long is taken over (default 120 s); a lock
   * of this machine only once its process is gone. Its holder touches it every third of this while it runs.
   */
  staleMs?: number;
  /**
   * Ends the wait for another holder once it aborts: LedgerError `CANCELLED`, with no lock taken (an open's signal,
   * `openLedger({ signal })`). Not looked at once the lock is taken.
   */
  signal?: AbortSignal | undefined;
}

interface LockOwner {
  pid: number;
  host: string;
  nonce: string;
  /** Linux: the kernel's boot id, the pid namespace and the process's start time; absent in earlier versions. */
  boot?: string;
  pidns?: string;
  start?: string;
}

/** A lock as found: its text ('' when it is not a regular file or cannot be read), identity and times. */
interface SeenLock {
  text: string;
  ino: number;
  dev: number;
  mtimeMs: number;
  ctimeMs: number;
}

const readOr = (f: () => string): string => {
  try {
    return f().trim();
  } catch {
    return '';
  }
};

/** Where a pid means this machine's process: the boot and pid namespace of this process (empty where unknown). */
const machine = {
  boot: readOr(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')),
  pidns: readOr(() => readlinkSync('/proc/self/ns/pid')),
};

/**
 * A process as /proc/<pid>/stat tells it: its state (field 3; `Z` a zombie, `X` dead) and start time (field 22, clock
 * ticks after boot), or undefined where it cannot be read.
 */
function processInfo(pid: number): { state: string; start: string } | undefined {
  const stat = readOr(() => readFileSync(`/proc/${pid}/stat`, 'utf8'));
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const [state, start] = [fields[0], fields[19]];
  return state && start && /^[0-9]+$/.test(start) ? { state, start } : undefined;
}

/** A turn (`<lock>.break`) of another machine untouched this long is left over from a breaker that died. */
const BREAK_STALE_MS = 10_000;
/** The longest lock file read: an owner is ~250 bytes. */
const MAX_LOCK_BYTES = 4096;

function parseOwner(text: string): LockOwner | undefined {
  // A witness state directory's lock of an earlier version: its pid alone, on this host.
  if (/^[1-9][0-9]{0,9}\n?$/.test(text)) return { pid: Number(text.trim()), host: hostname(), nonce: '' };
  try {
    const v = JSON.parse(text) as Partial<LockOwner>;
    if (Number.isSafeInteger(v.pid) && typeof v.host === 'string' && typeof v.nonce === 'string') return v as LockOwner;
  } catch {
    // Damaged, or not a lock of this library: judged by its age alone.
  }
  return undefined;
}

/** Whether `owner`'s pid names a process of this machine and pid namespace (so `isProcessAlive` can judge it). */
function sameMachine(owner: LockOwner, me: LockOwner): boolean {
  if (owner.host !== me.host) return false;
  // A lock of an earlier version names no boot or namespace: judged by host and pid, as that version did.
  if (owner.boot === undefined && owner.pidns === undefined) return true;
  return owner.boot === me.boot && owner.pidns === me.pidns;
}

/**
 * Whether a lock (or a breaker's turn) found as `seen` may be broken: its holder is gone from this machine, or it is
 * not known to run here and was not touched for `staleMs`.
 */
function isStale(seen: SeenLock, me: LockOwner, staleMs: number): boolean {
  const owner = parseOwner(seen.text);
  const old = Date.now() - seen.mtimeMs > staleMs;
  if (owner === undefined || !sameMachine(owner, me)) return old;
  if (!isProcessAlive(owner.pid)) return true;
  // The pid runs: the same process, unless it started at another time (the pid was reused) or has exited and waits
  // to be reaped (a zombie: its pid answers signals, but it holds nothing).
  const now = owner.start === undefined ? undefined : processInfo(owner.pid);
  if (now !== undefined) return now.start !== owner.start || now.state === 'Z' || now.state === 'X';
  return old; // cannot tell which process the pid names: its age decides, as for another machine
}

/** Resolves after `ms`, or as soon as `signal` aborts (the caller then finds it aborted). */
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const unsubscribe = signal ? onAbort(signal, () => done()) : () => {};
    const timer = setTimeout(() => done(), ms);
    function done() {
      clearTimeout(timer);
      unsubscribe();
      resolve();
    }
  });
const errno = (err: unknown) => (err as NodeJS.ErrnoException)?.code;

/** A lock taken with `takeFileLock`, held until `release()`. */
export interface HeldFileLock {
  /** Stops touching the lock and removes it if it is still this holder's (idempotent; never throws). */
  release(): Promise<void>;
}

/**
 * Takes the lock of `path` (the file `<path>.lock`) and holds it until `release()`, touching it meanwhile; for a
 * process that holds it for its lifetime (a witness's state directory). `what` names it in the error.
 * @throws LedgerError `LOCKED` when another live process holds it for longer than `waitMs` (0: refuse at once),
 *   `CANCELLED` when `signal` aborts first,
 *   `INVALID_ARGUMENT` for a `staleMs` that is not positive; StoreError `STORAGE_FAILED` when the lock cannot be
 *   written or read
 */
export async function takeFileLock(path: string, what: string, options: FileLockOptions = {}): Promise<HeldFileLock> {
  const lockPath = `${path}.lock`;
  const me: LockOwner = {
    pid: process.pid,
    host: hostname(),
    nonce: randomBytes(12).toString('hex'),
    ...machine,
    start: processInfo(process.pid)?.start,
  };
  const staleMs = options.staleMs ?? 120_000;
  if (!(staleMs > 0))
    throw new LedgerError('INVALID_ARGUMENT', `${what}: the lock's stale age must be a positive number of ms`);
  let handle: FileHandle;
  try {
    handle = await acquire(lockPath, what, me, options.waitMs ?? 30_000, staleMs, options.signal);
  } catch (err) {
    throw fileFailure(StoreError, `${what}: taking its lock ${quoted(lockPath)}`, err);
  }
  // Touched while held, so that the age rule never takes it from a holder that runs: synchronously, a single syscall,
  // so that a thread pool busy with slow I/O cannot hold the touches back.
  const touch = setInterval(
    () => {
      try {
        const now = new Date();
        futimesSync(handle.fd, now, now);
      } catch {
        // closed meanwhile by release
      }
    },
    Math.max(1, Math.min(Math.floor(staleMs / 3), MAX_TIMER_MS)),
  );
  touch.unref();
  let released: Promise<void> | undefined;
  return {
    release() {
      clearInterval(touch);
      released ??= release(lockPath, handle).catch(() => {});
      return released;
    },
  };
}

/**
 * Runs `fn` holding the lock of `path` (`what` names it in the error: "trust.json", "the pinned checkpoint").
 * @throws LedgerError `LOCKED` when another live process holds it for longer than `waitMs`; StoreError
 *   `STORAGE_FAILED` when the lock cannot be written or read
 */
export async function withFileLock<T>(
  path: string,
  what: string,
  fn: () => Promise<T>,
  options: FileLockOptions = {},
): Promise<T> {
  const lock = await takeFileLock(path, what, options);
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}

/** Removes the lock if it is still this holder's (a lock taken over meanwhile belongs to its new holder). */
async function release(lockPath: string, handle: FileHandle): Promise<void> {
  try {
    const [mine, there] = await Promise.all([handle.stat(), lstat(lockPath).catch(() => undefined)]);
    if (there && there.ino === mine.ino && there.dev === mine.dev) await unlink(lockPath);
  } finally {
    await handle.close();
  }
}

/** Makes `lockPath` hold `owner`, written whole before it appears; undefined when a lock stands there. */
function create(lockPath: string, owner: LockOwner): Promise<FileHandle | undefined> {
  return createFileWhole(lockPath, JSON.stringify(owner));
}

/** The lock at `lockPath` as it is now (read without following a symlink), or undefined when there is none. */
async function look(lockPath: string): Promise<SeenLock | undefined> {
  let st;
  try {
    st = await lstat(lockPath);
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
  const seen: SeenLock = { text: '', ino: st.ino, dev: st.dev, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
  if (!st.isFile()) return seen; // a directory, a symlink, a FIFO: judged by its age alone, never opened
  let handle: FileHandle;
  try {
    handle = await open(lockPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    return seen; // replaced by something else meanwhile, or unreadable: its age decides
  }
  try {
    const now = await handle.stat();
    if (!now.isFile() || now.ino !== st.ino) return seen;
    const buf = Buffer.alloc(MAX_LOCK_BYTES);
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    seen.text = buf.toString('utf8', 0, bytesRead);
    return seen;
  } finally {
    await handle.close();
  }
}

async function acquire(
  lockPath: string,
  what: string,
  me: LockOwner,
  waitMs: number,
  staleMs: number,
  signal: AbortSignal | undefined,
): Promise<FileHandle> {
  const deadline = Date.now() + waitMs;
  for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
    // Before each try: an aborted wait takes no lock (LedgerError CANCELLED).
    throwIfCancelled(signal);
    const handle = await create(lockPath, me);
    if (handle) return handle;
    const seen = await look(lockPath);
    if (seen === undefined) continue; // released meanwhile: try again at once
    // A stale lock is broken, or another breaker is at it: try again unless its turn has stood past the wait.
    const stale = isStale(seen, me, staleMs);
    if (stale && (await breakStale(lockPath, seen, me, staleMs))) continue;
    if (Date.now() >= deadline) {
      const owner = parseOwner(seen.text);
      const turn = stale ? `; its breakers' turn ${quoted(`${lockPath}.break`)} is taken` : '';
      throw new LedgerError(
        'LOCKED',
        `${what} is being changed by another process (${owner ? `pid ${owner.pid} on ${shownValue(owner.host, 255)}` : 'unknown owner'}, lock ${quoted(lockPath)}${turn}); ` +
          'try again, or remove that file if no such process runs',
      );
    }
    await sleep(delay + Math.floor(Math.random() * delay), signal);
  }
}

/**
 * Removes the lock judged stale (`judged`), if it is still that lock (same inode, contents and times: not replaced,
 * not touched since), holding the breakers' turn (`<lock>.break`): of several processes that judged it at once, one
 * removes it and the others find it gone or replaced. A turn whose breaker died is cleared as a lock is (its pid gone
 * from this machine; another machine's after BREAK_STALE_MS untouched).
 * @returns false when another breaker holds the turn (or a dead breaker's turn cannot be removed)
 */
async function breakStale(lockPath: string, judged: SeenLock, me: LockOwner, staleMs: number): Promise<boolean> {
  const turnPath = `${lockPath}.break`;
  const turn = await create(turnPath, { ...me, nonce: randomBytes(12).toString('hex') });
  if (!turn) {
    const other = await look(turnPath);
    if (other === undefined) return true; // released meanwhile
    if (!isStale(other, me, BREAK_STALE_MS)) return false;
    return unlinkIfSame(turnPath, other);
  }
  try {
    const now = await look(lockPath);
    if (
      now &&
      now.ino === judged.ino &&
      now.dev === judged.dev &&
      now.mtimeMs === judged.mtimeMs &&
      now.ctimeMs === judged.ctimeMs &&
      now.text === judged.text
    )
      await unlink(lockPath).catch((err) => {
        if (errno(err) !== 'ENOENT') throw err;
      });
    await removeLeftovers(lockPath, Math.max(staleMs, BREAK_STALE_MS));
  } finally {
    await release(turnPath, turn).catch(() => {});
  }
  return true;
}

/** Unlinks `path` if it is still the file `seen`; false when that failed (a directory, say). */
async function unlinkIfSame(path: string, seen: SeenLock): Promise<boolean> {
  const now = await lstat(path).catch(() => undefined);
  if (!now) return true;
  if (now.ino !== seen.ino || now.dev !== seen.dev) return true; // replaced: another breaker's turn now
  return unlink(path).then(
    () => true,
    (err) => errno(err) === 'ENOENT',
  );
}

/**
 * Temporary lock files of processes that died between writing one and linking it (and locks an earlier version's
 * breaker moved aside, `.stale`), older than `staleMs`.
 */
async function removeLeftovers(lockPath: string, staleMs: number): Promise<void> {
  const dir = dirname(lockPath);
  const prefix = `${basename(lockPath)}.`;
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.startsWith(prefix) || !(name.endsWith('.tmp') || name.endsWith('.stale'))) continue;
    const st = await lstat(join(dir, name)).catch(() => undefined);
    if (st?.isFile() && Date.now() - st.mtimeMs > staleMs) await unlink(join(dir, name)).catch(() => {});
  }
}
