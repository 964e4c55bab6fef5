/**
 * The last step of `export`: making the staged bundle appear at the target without ever replacing anything.
 *
 * rename(2) of a directory replaces an empty directory at the target, and Node has no renameat2
 * (RENAME_NOREPLACE) nor directory handles (openat), so a rename checked just before can still replace an empty
 * directory that someone put at the target in between. The bundle is instead published into the target claimed at
 * the start (an empty 0700 directory made by mkdir, which is atomic and never replaces), by operations that each
 * fail with EEXIST rather than replace: mkdir for every directory, link(2) for every file, `bundle.json` last (a
 * directory without it is not a bundle: the verifier says `BUNDLE_INVALID`). If the claim was swapped for another
 * directory at any moment, nothing in that directory is replaced or removed; the swap is reported as
 * `BUNDLE_EXISTS`. The claim is checked before every entry; a swap between a check and the next mkdir or link
 * still puts that one entry (a directory, or a link to one of the bundle's files) into the directory that replaced
 * the claim: a window of one system call, which only directory handles (openat) or renameat2 would close.
 */
import { join } from 'node:path';
import type { FsOps } from '../../store/fs/ops.js';
import { BUNDLE_HEADER_FILE } from '../../manifests/audit/bundle.js';
import { AuditError } from '../../manifests/audit/errors.js';
import { quoted } from '../../store/errors.js';

/** Every entry under `dir`, parents before children, relative to `dir`. */
async function walk(fs: FsOps, dir: string, rel = ''): Promise<Array<{ rel: string; isDir: boolean }>> {
  const out: Array<{ rel: string; isDir: boolean }> = [];
  for (const name of (await fs.readdir(join(dir, rel))).sort()) {
    const path = rel === '' ? name : join(rel, name);
    const isDir = (await fs.lstat(join(dir, path))).isDirectory();
    out.push({ rel: path, isDir });
    if (isDir) out.push(...(await walk(fs, dir, path)));
  }
  return out;
}

/**
 * Links the staged bundle into the claimed target, header last, and makes every new entry durable, the target's own
 * entry in `parent` included. A failure at any step, the last flushes too, takes out of the claim (while it is still
 * ours) what went into it: an export that reports failure leaves no bundle behind, and the same export can run again.
 * @throws AuditError `BUNDLE_EXISTS` when an entry already exists at the target or the claim is no longer ours.
 */
export async function publishBundle(
  fs: FsOps,
  staging: string,
  out: string,
  parent: string,
  stillOurClaim: () => Promise<boolean>,
): Promise<void> {
  const exists = (cause?: unknown) =>
    new AuditError('BUNDLE_EXISTS', `${quoted(out)} was replaced during the export; export never overwrites`, {
      cause,
    });
  if (!(await stillOurClaim())) throw exists();
  const entries = await walk(fs, staging);
  const ordered = [
    ...entries.filter((e) => e.rel !== BUNDLE_HEADER_FILE),
    ...entries.filter((e) => e.rel === BUNDLE_HEADER_FILE),
  ];
  const dirs = [''];
  const made: Array<{ rel: string; isDir: boolean }> = [];
  try {
    await linkAll();
    await fs.fsyncDir(out);
    await fs.fsyncDir(parent);
    if (!(await stillOurClaim())) throw exists();
  } catch (err) {
    // Undo what went into our own claim (a failed disk, a name taken), the header first; a swapped-in directory is
    // left as it is. A claim that cannot be looked at is not judged ours.
    if (await stillOurClaim().catch(() => false))
      for (const e of made.reverse())
        await (e.isDir ? fs.rm(join(out, e.rel)) : fs.unlink(join(out, e.rel))).catch(() => {});
    throw err;
  }

  async function linkAll(): Promise<void> {
    for (const e of ordered) {
      if (e.rel === BUNDLE_HEADER_FILE) {
        // The header makes the directory a bundle: only once everything it describes is durable.
        for (const d of [...dirs].reverse()) await fs.fsyncDir(join(out, d));
      }
      // Checked before every entry, so a swap puts at most one entry into the directory that replaced the claim.
      if (!(await stillOurClaim())) throw exists();
      try {
        if (e.isDir) await fs.mkdir(join(out, e.rel), 0o700);
        else await fs.link(join(staging, e.rel), join(out, e.rel));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw exists(err);
        throw err;
      }
      made.push(e);
      if (e.isDir) dirs.push(e.rel);
    }
  }
}
