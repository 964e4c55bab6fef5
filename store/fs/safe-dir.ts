import { lstat, mkdir } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { quoted, StoreError, type StoreErrorCode } from '../errors.js';
import { errnoText } from './errno-text.js';
import { nodeFsOps } from './ops.js';
import { ownerProblem } from './owner.js';

/**
 * A path a caller may give to name a file or directory: a non-empty string (an empty one names the working
 * directory) without NUL (which names no file: Node's fs refuses it with a plain TypeError).
 */
export const isPathName = (value: unknown): value is string =>
  typeof value === 'string' && value !== '' && !value.includes('\0');

/**
 * Creates `dir` with mode 0700 if missing, then refuses it unless it is a real directory (not a
 * symlink), owned by this user or root, that group and others cannot write: a store others can write to
 * cannot keep its promises. Every directory it creates is made durable in its parent (the parent is fsynced),
 * so a crash cannot take back a directory that files of the store were then written into; the parent of the
 * first one made is not the store's and may not be readable, so its flush is best effort. Returns the directory's
 * lstat (its device and inode name the directory opened).
 */
export async function ensurePrivateDir(dir: string, code: StoreErrorCode): Promise<Stats> {
  // What is there already is judged before anything is made: a dangling symlink would otherwise fail mkdir (ENOENT)
  // as a storage failure, not as the link it is.
  let st = await refuseNonDirectory(dir, code);
  if (st === undefined) {
    let first: string | undefined;
    try {
      first = await makeDirs(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new StoreError('STORAGE_FAILED', `cannot create ${quoted(dir)}: ${errnoText(err)}`, { cause: err });
      }
    }
    if (first !== undefined) await flushMade(resolve(first), resolve(dir));
    // Judged again: something else may have been put there between the look and the mkdir.
    st = await refuseNonDirectory(dir, code);
    if (st === undefined)
      throw new StoreError('STORAGE_FAILED', `cannot create ${quoted(dir)}: it is gone after mkdir`);
  }
  return refuseShared(dir, st, code);
}

/**
 * `ensurePrivateDir` for a look that makes nothing (an open to diagnose): the directory judged as that judges it when
 * it is there, `undefined` when nothing is at its path.
 * @throws StoreError `code` (a link, a file, another owner, writable by group or others); `STORAGE_FAILED`
 */
export async function privateDirIfPresent(dir: string, code: StoreErrorCode): Promise<Stats | undefined> {
  const st = await refuseNonDirectory(dir, code);
  return st && refuseShared(dir, st, code);
}

function refuseShared(dir: string, st: Stats, code: StoreErrorCode): Stats {
  const foreign = ownerProblem(quoted(dir), st.uid);
  if (foreign) throw new StoreError(code, `${foreign}; refusing to use it`);
  if ((st.mode & 0o022) !== 0) {
    throw new StoreError(
      code,
      `${quoted(dir)} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}); run chmod 700 on it`,
    );
  }
  return st;
}

/**
 * Refuses `dir` with `code` when something other than a real directory is at its path: a symbolic link (dangling
 * too), a file, or a path through a file. Nothing there is no refusal (the caller may create it): undefined.
 * @returns the directory's lstat, or undefined when nothing is at the path
 * @throws StoreError `code`; `STORAGE_FAILED` when the path cannot be looked at
 */
export async function refuseNonDirectory(dir: string, code: StoreErrorCode): Promise<Stats | undefined> {
  let st;
  try {
    // The path's last component itself: written with a trailing slash or `/.`, lstat would follow a symbolic link
    // there and answer for the directory it points to.
    st = await lstat(dir.replace(/(?:\/\.?)+$/, '') || (dir.startsWith('/') ? '/' : '.'));
  } catch (err) {
    const errno = (err as NodeJS.ErrnoException).code;
    if (errno === 'ENOENT') return;
    if (errno === 'ENOTDIR')
      throw new StoreError(code, `${quoted(dir)} is not a directory (a part of its path is a file)`);
    throw new StoreError('STORAGE_FAILED', `cannot look at ${quoted(dir)}: ${errnoText(err)}`, { cause: err });
  }
  if (st.isSymbolicLink()) throw new StoreError(code, `${quoted(dir)} is a symbolic link; refusing to use it`);
  if (!st.isDirectory()) throw new StoreError(code, `${quoted(dir)} is not a directory`);
  return st;
}

/**
 * `mkdir -p` with mode 0700; returns the topmost directory it made (undefined: none). Not Node's `recursive` mkdir:
 * where a parent exists but a child cannot be made in it with ENOENT (a path under /proc), that one makes the parent
 * (EEXIST) and tries the child again, forever, at full CPU. Here each missing level is made once, in order.
 */
async function makeDirs(dir: string): Promise<string | undefined> {
  const missing: string[] = [];
  for (let d = resolve(dir); ; d = dirname(d)) {
    try {
      await lstat(d);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    missing.push(d);
    if (dirname(d) === d) break;
  }
  let first: string | undefined;
  for (const d of missing.reverse()) {
    try {
      await mkdir(d, { mode: 0o700 });
      first ??= d;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return first;
}

/** fsyncs the parent of each directory from `first` (the topmost one made) down to `dir`. */
async function flushMade(first: string, dir: string): Promise<void> {
  const made: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    made.push(d);
    if (d === first || dirname(d) === d) break;
  }
  for (const d of made.reverse()) {
    const parent = dirname(d);
    try {
      await nodeFsOps.fsyncDir(parent);
    } catch (err) {
      if (d === first) continue;
      throw new StoreError('STORAGE_FAILED', `cannot flush the directory ${quoted(parent)}: ${errnoText(err)}`, {
        cause: err,
      });
    }
  }
}
