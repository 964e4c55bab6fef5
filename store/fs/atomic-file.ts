import { open, rename, unlink } from 'node:fs/promises';
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { nodeFsOps } from './ops.js';

/**
 * Replaces `path` with `data` atomically and durably: staging file (O_EXCL, given mode), write, fsync,
 * rename over the target, fsync the directory. Readers see the old or the new file, never a mix.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${randomBytes(8).toString('hex')}.tmp`);
  const h = await open(tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW, mode);
  try {
    await h.writeFile(data);
    await h.sync();
  } catch (err) {
    await h.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await h.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await nodeFsOps.fsyncDir(dir);
}
