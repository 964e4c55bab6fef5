/**
 * Reading a small file a caller names (a key file, a configuration file) with its checks and its read on one
 * descriptor: nothing swapped in at the name between the check and the read is read.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, stat, type FileHandle } from 'node:fs/promises';
import { isErrnoError } from '../errors.js';

export interface BoundedReadOptions {
  /** Refuses a symlink at the last component of the path (O_NOFOLLOW) as `notAFile`; default: follows it. */
  noFollow?: boolean;
  /** The error for a name that is not a regular file (a FIFO, device, directory, socket; with `noFollow`, a symlink). */
  notAFile: () => Error;
  /** Judges the opened file's stat once it is known to be a regular file, before its size; throws to refuse. */
  check?: (st: Stats) => void;
  /** The error for a file over the bound: `size` its stat's, or undefined when it grew past the bound while read. */
  tooLarge: (size: number | undefined) => Error;
}

/** Opens that fail because of what stands at the name, not the reading: a socket (ENXIO), a device with no driver. */
const NOT_OPENABLE = new Set(['ENXIO', 'ENODEV']);

/**
 * Reads the regular file at `path`, of at most `maxBytes`. Opened once, without blocking (a FIFO is refused, not
 * waited on for a writer); the descriptor's stat is judged (a regular file, then `check`, then the size) and at most
 * `maxBytes` + 1 bytes are read from that same descriptor, so a file that grows while read is refused too.
 * @throws `notAFile()`, `check`'s error, `tooLarge(size)`; the `errno` error of the open or read otherwise (`ENOENT`
 *   when there is no such file)
 */
export async function readBoundedFile(path: string, maxBytes: number, o: BoundedReadOptions): Promise<Buffer> {
  const flags = constants.O_RDONLY | constants.O_NONBLOCK | (o.noFollow ? constants.O_NOFOLLOW : 0);
  const handle = await open(path, flags).catch(async (err: unknown) => {
    if (!isErrnoError(err)) throw err;
    if (NOT_OPENABLE.has(err.code)) throw o.notAFile();
    // ELOOP under O_NOFOLLOW: a symlink at the name, or too many of them on the way to it (then the error stands).
    if (err.code === 'ELOOP' && o.noFollow && (await lstat(path).catch(() => undefined))?.isSymbolicLink())
      throw o.notAFile();
    // Not ours to open: what the name holds says more when it would be refused anyway (another user's file, one open
    // to others). Judged on a stat of the name, for the message only: nothing is read.
    if (err.code === 'EACCES' || err.code === 'EPERM') {
      const st = await (o.noFollow ? lstat(path) : stat(path)).catch(() => undefined);
      if (st && !st.isFile()) throw o.notAFile();
      if (st) o.check?.(st);
    }
    throw err;
  });
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw o.notAFile();
    o.check?.(st);
    if (st.size > maxBytes) throw o.tooLarge(st.size);
    const bytes = await readUpTo(handle, maxBytes, st.size);
    if (bytes.length > maxBytes) throw o.tooLarge(undefined);
    return bytes;
  } finally {
    await handle.close();
  }
}

/**
 * At most `maxBytes` + 1 bytes of an open file, from its start, whatever its stat said (a file system may report 0 for
 * a file with content, as procfs and some FUSE ones do, and a file may grow between the stat and the read): more than
 * `maxBytes` returned means the file is over its bound. Read into one buffer of the stated size and one byte more (a
 * small file: one read, and the next sees its end), grown only where the file holds more.
 */
export async function readUpTo(handle: FileHandle, maxBytes: number, statSize: number): Promise<Buffer> {
  let buf = Buffer.allocUnsafe(Math.min(maxBytes, statSize) + 1);
  let total = 0;
  for (;;) {
    if (total === buf.length) {
      if (total > maxBytes) break;
      const grown = Buffer.allocUnsafe(Math.min(maxBytes + 1, total + Math.max(total, 64 * 1024)));
      buf.copy(grown, 0, 0, total);
      buf = grown;
    }
    const { bytesRead } = await handle.read(buf, total, buf.length - total, total);
    if (bytesRead === 0) break;
    total += bytesRead;
  }
  return buf.subarray(0, total);
}
