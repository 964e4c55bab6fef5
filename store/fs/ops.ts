/**
 * The filesystem operations the blob store performs, as one injectable object. This is the seam the
 * fault-injection tests use to make each step fail in turn (EIO, ENOSPC, EACCES, EROFS).
 */
import * as fsp from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';

export interface FsOps {
  open(path: string, flags: number, mode?: number): Promise<FileHandle>;
  /**
   * Writes all of `data` at `position` (at the current offset when undefined). Streamed puts issue several
   * positioned writes at once, so a replacement must honour `position`: writes finish in any order.
   */
  write(handle: FileHandle, data: Uint8Array, position?: number): Promise<void>;
  fsync(handle: FileHandle): Promise<void>;
  close(handle: FileHandle): Promise<void>;
  link(existing: string, target: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  mkdir(path: string, mode: number): Promise<void>;
  /** Opens a directory and fsyncs it, making entries created in it durable. */
  fsyncDir(path: string): Promise<void>;
  lstat: typeof fsp.lstat;
  stat: typeof fsp.stat;
  readdir(path: string): Promise<string[]>;
  rm(path: string): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
  /** Sets a file's access and modification times (a re-put refreshes the time gc judges by). */
  utimes(path: string, atime: Date, mtime: Date): Promise<void>;
}

export const nodeFsOps: FsOps = {
  open: (path, flags, mode) => fsp.open(path, flags, mode),
  async write(handle, data, position) {
    let off = 0;
    while (off < data.length) {
      const { bytesWritten } = await handle.write(
        data,
        off,
        data.length - off,
        position === undefined ? null : position + off,
      );
      off += bytesWritten;
    }
  },
  fsync: (handle) => handle.sync(),
  close: (handle) => handle.close(),
  link: (a, b) => fsp.link(a, b),
  rename: (a, b) => fsp.rename(a, b),
  unlink: (p) => fsp.unlink(p),
  mkdir: async (p, mode) => {
    await fsp.mkdir(p, { mode });
  },
  async fsyncDir(path) {
    const h = await fsp.open(path, 'r');
    try {
      await h.sync();
    } finally {
      await h.close();
    }
  },
  lstat: fsp.lstat,
  stat: fsp.stat,
  readdir: (p) => fsp.readdir(p),
  rm: (p) => fsp.rm(p, { recursive: true, force: true }),
  chmod: (p, m) => fsp.chmod(p, m),
  utimes: (p, a, m) => fsp.utimes(p, a, m),
};
