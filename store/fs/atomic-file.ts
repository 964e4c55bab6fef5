import { link, lstat, open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { nodeFsOps } from './ops.js';
import { isErrnoError, throwIfAborted } from '../errors.js';
import { errnoMessage } from './errno-text.js';

/**
 * The staging names `writeFileAtomic` (`.<16 hex>.tmp` beside the target) and `createFileWhole` (`<name>.<16 hex>.tmp`,
 * a lock file's or a key's) pick, and only those.
 */
const ATOMIC_STAGING_NAME = /^[^/]*\.[0-9a-f]{16}\.tmp$/;

/**
 * An `errno` error of a write of `path` made through a staging file, told as the write of `path` (same `code` and
 * `errno`, `syscall` `write`; the original as `cause`): the staging name is the writer's own, removed once the write
 * failed, and means nothing to whoever named `path` (`keys export --out FILE`, a key file). Its message names `path`
 * quoted (`EISDIR (illegal operation on a directory), write "/a\u001b"`: `errnoMessage`), never raw. Any other error
 * is returned as it is.
 */
function failedWriteOf(path: string, err: unknown): unknown {
  if (!isErrnoError(err)) return err;
  const fields = { code: err.code, errno: err.errno, syscall: 'write', path };
  return Object.assign(new Error(errnoMessage(Object.assign(new Error(), fields)), { cause: err }), fields);
}

/**
 * Replaces `path` with `data` atomically and durably: staging file (O_EXCL, given mode), write, fsync,
 * rename over the target, fsync the directory. Readers see the old or the new file, never a mix. A failure leaves no
 * staging file, and its error names `path` (failedWriteOf), not the staging file.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${randomBytes(8).toString('hex')}.tmp`);
  const h = await open(
    tmp,
    constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW,
    mode,
  ).catch((err: unknown) => {
    throw failedWriteOf(path, err);
  });
  try {
    await h.writeFile(data);
    await h.sync();
    await h.close();
  } catch (err) {
    await h.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw failedWriteOf(path, err);
  }
  try {
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw failedWriteOf(path, err);
  }
  await nodeFsOps.fsyncDir(dir);
}

/** What link(2) answers on a filesystem without hard links. */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Creates `path` holding `data`, never replacing a file that stands there and never seen partly written: the data
 * goes to a staging file beside it (`<path>.<random>.tmp`, O_EXCL, `mode`; fsynced when `sync`), which is hard-linked
 * to `path` (the link fails where a file stands) and then removed. Where the filesystem has no hard links, `path`
 * itself is created with O_EXCL and written (seen empty for that moment), and removed again if the write fails. A link
 * answered EEXIST that was made all the same (NFS, a request sent again) is known by the staging file's link count.
 * The directory is not fsynced here. A failure leaves no staging file, and its error names `path`, not the staging file.
 * @returns the new file, open (the caller closes it), or undefined when a file already stands at `path`
 */
export async function createFileWhole(
  path: string,
  data: string | Uint8Array,
  options: { mode?: number; sync?: boolean } = {},
): Promise<FileHandle | undefined> {
  const mode = options.mode ?? 0o600;
  const write = async (h: FileHandle) => {
    await h.writeFile(data);
    if (options.sync) await h.sync();
  };
  const staging = `${path}.${randomBytes(8).toString('hex')}.tmp`;
  const handle = await open(staging, 'wx', mode).catch((err: unknown) => {
    throw failedWriteOf(path, err);
  });
  let linked = false;
  try {
    await write(handle).catch((err: unknown) => {
      throw failedWriteOf(path, err);
    });
    try {
      await link(staging, path);
      linked = true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (code === 'EEXIST') {
        // NFS answers a LINK sent again after a lost reply EEXIST although the first one made it (open(2), O_EXCL):
        // the staging file's link count says whether the file at `path` is this one.
        if ((await handle.stat().catch(() => undefined))?.nlink !== 2) return undefined;
        linked = true;
      } else if (!NO_HARD_LINKS.has(code)) throw failedWriteOf(path, err);
    }
  } finally {
    await unlink(staging).catch(() => {});
    if (!linked) await handle.close();
  }
  if (linked) return handle;
  let inPlace: FileHandle;
  try {
    inPlace = await open(path, 'wx', mode);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
    throw err;
  }
  try {
    await write(inPlace);
    return inPlace;
  } catch (err) {
    await inPlace.close().catch(() => {});
    await unlink(path).catch(() => {});
    throw failedWriteOf(path, err);
  }
}

/**
 * Removes `writeFileAtomic` and `createFileWhole` staging files in `dirs` last changed before `before` (ms): what a
 * crash left beside its target, which no later write would remove (each picks a new name). Returns how many went.
 * @throws StoreError `CANCELLED` once `signal` aborts, looked at before each file is looked at or removed (those
 *   removed stay removed; the next call removes the rest)
 */
export async function removeAtomicStagingLeftovers(
  dirs: string[],
  before: number,
  signal?: AbortSignal,
): Promise<number> {
  let removed = 0;
  for (const path of await findAtomicStagingLeftovers(dirs, before, signal)) {
    throwIfAborted(signal);
    if (
      await unlink(path).then(
        () => true,
        () => false,
      )
    )
      removed++;
  }
  return removed;
}

/**
 * The staging files `removeAtomicStagingLeftovers` would remove, found and left as they are (a diagnosing open, which
 * writes nothing to the root it diagnoses, reports them): their paths, in `dirs` order.
 * @throws StoreError `CANCELLED` once `signal` aborts, looked at before each staging file is looked at
 */
export async function findAtomicStagingLeftovers(
  dirs: string[],
  before: number,
  signal?: AbortSignal,
): Promise<string[]> {
  const found: string[] = [];
  for (const dir of dirs) {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      continue; // not created yet
    }
    for (const name of names.sort()) {
      if (!ATOMIC_STAGING_NAME.test(name)) continue;
      throwIfAborted(signal);
      const path = join(dir, name);
      const st = await lstat(path).catch(() => undefined);
      if (!st?.isFile() || st.mtimeMs >= before) continue;
      found.push(path);
    }
  }
  return found;
}
