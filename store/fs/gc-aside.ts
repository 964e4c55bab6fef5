/**
 * gc's conditional delete of a blob file, without the check-then-unlink window. A put of bytes already stored
 * refreshes the file's time (utimes) instead of writing it again; had gc judged the time and then unlinked,
 * a refresh between the two would be lost with the file, and the manifest about to name it would point at
 * nothing. So gc first renames the file into `<root>/gc-aside/` (atomic): from then on a refreshing put finds
 * no file and links its staged copy anew. gc then judges the time of the file it holds aside, which a refresh
 * made before the rename shows; a young one is linked back (EEXIST: a put already put a fresh copy there), an
 * old one is unlinked. Files left aside by a crash are linked back at open, to be judged again by the next gc.
 * One blob is judged by one call at a time in a process (FsBlobStore queues them per root and digest, across its
 * stores on one root): the name aside is the digest, so a second call would move the path's copy over the first one's
 * and each would judge, keep or unlink the other's.
 */
import { join } from 'node:path';
import type { FsOps } from './ops.js';

const errno = (err: unknown) => (err as NodeJS.ErrnoException)?.code;

/** Links `aside` back to `file` unless a fresh copy is already there, then removes the aside name. */
async function restore(fs: FsOps, aside: string, file: string, dir: string): Promise<void> {
  try {
    await fs.link(aside, file);
  } catch (err) {
    if (errno(err) !== 'EEXIST') {
      // The blob must not stay out of reach, for a put may just have reported it stored: moved back instead (a
      // copy a put linked there meanwhile holds the same bytes, so replacing it loses nothing).
      await fs.rename(aside, file).catch(() => Promise.reject(err));
      await fs.fsyncDir(dir);
      return;
    }
  }
  await fs.fsyncDir(dir);
  await fs.unlink(aside);
}

/**
 * Removes `file` (in directory `dir`) only while its time is still before `storedBeforeMs`; true when removed.
 * @throws the filesystem's error (the caller wraps it)
 */
export async function deleteIfOld(
  fs: FsOps,
  paths: { file: string; dir: string; asideDir: string; name: string },
  storedBeforeMs: number,
): Promise<boolean> {
  const { file, dir, asideDir, name } = paths;
  // A cheap first look: a young file is left alone without touching it.
  if ((await fs.lstat(file)).mtimeMs >= storedBeforeMs) return false;
  const aside = join(asideDir, name);
  await fs.rename(file, aside);
  // Judged as late as possible, on the file we now hold: a refresh that came before the rename shows here.
  if ((await fs.lstat(aside)).mtimeMs >= storedBeforeMs) {
    await restore(fs, aside, file, dir);
    return false;
  }
  // Durable before it is reported removed: the unlink in gc-aside/ (a name a crash left there is linked back at its
  // path by the next open, `restoreAside`), then the rename out of the blob's directory.
  await fs.unlink(aside);
  await fs.fsyncDir(asideDir);
  await fs.fsyncDir(dir);
  return true;
}

/**
 * Open-time recovery: every file a crash left aside goes back to its name (or is dropped if one is there). In a root
 * other processes share (`keepMs` > 0, as for their staging files), a file moved aside less than `keepMs` ago is
 * another process's gc judging it now (the rename into gc-aside/ set its ctime): left to that gc, which would
 * otherwise find it gone and keep an old blob, or remove it before this open acts on it and fail the open. One that
 * is gone by the time this open acts on it was judged meanwhile.
 * @param signal looked at before each file: once it aborts, the walk stops there (each file is put back whole or left
 *   aside, for the next open) and returns the count so far; the caller answers the abort (`CANCELLED`)
 * @param turn runs the judgement of one name when no gc of this process judges that blob (FsBlobStore's per-blob
 *   queue, shared by its stores on one root): a file a judgement of this process holds aside is left to it, and one
 *   that judgement removed is gone when this walk's turn comes, which passes over it
 */
export async function restoreAside(
  fs: FsOps,
  asideDir: string,
  fileOf: (name: string) => { file: string; dir: string } | undefined,
  keepMs = 0,
  signal?: AbortSignal,
  turn?: (name: string, judge: () => Promise<boolean>) => Promise<boolean>,
): Promise<number> {
  let restored = 0;
  const before = Date.now() - keepMs;
  const gone = (err: unknown) => {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  };
  for (const name of await fs.readdir(asideDir)) {
    const target = fileOf(name);
    if (!target) continue;
    if (signal?.aborted) break;
    const aside = join(asideDir, name);
    const judge = async (): Promise<boolean> => {
      if (keepMs > 0 || turn) {
        // In its turn, a name gone was judged by a gc of this process since the listing.
        const st = await fs.lstat(aside).catch(gone);
        if (st === undefined || (keepMs > 0 && st.ctimeMs >= before)) return false;
      }
      try {
        await restore(fs, aside, target.file, target.dir);
      } catch (err) {
        // Only where other processes' gc runs may have judged it meanwhile; with the root to itself, a failure.
        if (keepMs > 0 && errno(err) === 'ENOENT' && (await fs.lstat(aside).catch(gone)) === undefined) return false;
        throw err;
      }
      return true;
    };
    if (await (turn ? turn(name, judge) : judge())) restored++;
  }
  return restored;
}
