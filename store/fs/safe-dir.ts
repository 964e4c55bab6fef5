import { lstat, mkdir } from 'node:fs/promises';
import { StoreError, type StoreErrorCode } from '../errors.js';
import { ownerProblem } from './owner.js';

/**
 * Creates `dir` with mode 0700 if missing, then refuses it unless it is a real directory (not a
 * symlink), owned by this user or root, that group and others cannot write: a store others can write to
 * cannot keep its promises.
 */
export async function ensurePrivateDir(dir: string, code: StoreErrorCode): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new StoreError('STORAGE_FAILED', `cannot create ${dir}: ${(err as Error).message}`, { cause: err });
    }
  }
  const st = await lstat(dir);
  if (st.isSymbolicLink()) throw new StoreError(code, `${dir} is a symbolic link; refusing to use it`);
  if (!st.isDirectory()) throw new StoreError(code, `${dir} is not a directory`);
  const foreign = ownerProblem(dir, st.uid);
  if (foreign) throw new StoreError(code, `${foreign}; refusing to use it`);
  if ((st.mode & 0o022) !== 0) {
    throw new StoreError(
      code,
      `${dir} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}); run chmod 700 on it`,
    );
  }
}
