/**
 * One holder at a time, across the processes sharing a store root (PostgreSQL backend: several processes of a host
 * share the root's key file, trust file and pinned checkpoint). Used for trust.json (a rotation re-reads the keys,
 * closes the old window in the log and writes trust.json under it, so two rotations at once end one after the other
 * instead of the last write dropping the other's new key) and for a shared pin file (two pins at once would write
 * the same slot, and the smaller tree could end up pinned over the larger).
 *
 * The lock is `<path>.lock`, created with O_EXCL (`wx`) and holding its owner's pid, host name and a random nonce.
 * Stale rule: a lock whose process is gone (same host name, the pid no longer runs), or older than `staleMs` (a pid
 * reused after a reboot, another machine on a shared filesystem), is broken: renamed aside first, so that of two
 * processes breaking one stale lock only one succeeds and neither removes the lock the other took meanwhile.
 */
import { randomBytes } from 'node:crypto';
import { link, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { isProcessAlive } from '../../store/fs/process.js';
import { LedgerError } from '../errors.js';

export interface FileLockOptions {
  /** How long to wait for another holder (default 30 s): then `LOCKED`. */
  waitMs?: number;
  /** A lock this old is taken over whatever its pid (default 120 s; a rotation holds it well under a second). */
  staleMs?: number;
}

interface LockOwner {
  pid: number;
  host: string;
  nonce: string;
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const v = JSON.parse(text) as Partial<LockOwner>;
    if (Number.isSafeInteger(v.pid) && typeof v.host === 'string' && typeof v.nonce === 'string') return v as LockOwner;
  } catch {
    // A lock being written right now, or damaged: judged by its age alone.
  }
  return undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `fn` holding the lock of `path` (`what` names it in the error: "trust.json", "the pinned checkpoint").
 * @throws LedgerError `LOCKED` when another live process holds it for longer than `waitMs`
 */
export async function withFileLock<T>(
  path: string,
  what: string,
  fn: () => Promise<T>,
  options: FileLockOptions = {},
): Promise<T> {
  const lockPath = `${path}.lock`;
  const me: LockOwner = { pid: process.pid, host: hostname(), nonce: randomBytes(12).toString('hex') };
  await acquire(lockPath, what, me, options.waitMs ?? 30_000, options.staleMs ?? 120_000);
  try {
    return await fn();
  } finally {
    // Only our own lock: one taken over as stale meanwhile belongs to its new holder.
    const held = parseOwner(await readFile(lockPath, 'utf8').catch(() => ''));
    if (held?.nonce === me.nonce) await unlink(lockPath).catch(() => {});
  }
}

async function acquire(lockPath: string, what: string, me: LockOwner, waitMs: number, staleMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
    try {
      const h = await open(lockPath, 'wx', 0o600);
      try {
        await h.writeFile(JSON.stringify(me));
      } finally {
        await h.close();
      }
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // Released meanwhile: try again at once. Unreadable (not a file?): judged by its age alone, like a damaged one.
    const text = await readFile(lockPath, 'utf8').catch((err: NodeJS.ErrnoException) =>
      err.code === 'ENOENT' ? undefined : '',
    );
    if (text === undefined) continue;
    const owner = parseOwner(text);
    const age = Date.now() - ((await stat(lockPath).catch(() => undefined))?.mtimeMs ?? Date.now());
    const gone = owner !== undefined && owner.host === me.host && !isProcessAlive(owner.pid);
    if (gone || age > staleMs) {
      await breakStale(lockPath, text);
      continue;
    }
    if (Date.now() >= deadline)
      throw new LedgerError(
        'LOCKED',
        `${what} is being changed by another process (${owner ? `pid ${owner.pid} on ${JSON.stringify(owner.host)}` : 'unknown owner'}, lock ${lockPath}); ` +
          'try again, or remove that file if no such process runs',
      );
    await sleep(delay + Math.floor(Math.random() * delay));
  }
}

/** Moves a stale lock aside; puts it back if what was moved is not the lock judged stale (a new holder's). */
async function breakStale(lockPath: string, judged: string): Promise<void> {
  const aside = `${lockPath}.${randomBytes(6).toString('hex')}.stale`;
  try {
    await rename(lockPath, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const moved = await readFile(aside, 'utf8').catch(() => undefined);
  if (moved !== judged) await link(aside, lockPath).catch(() => {});
  await unlink(aside).catch(() => {});
}
