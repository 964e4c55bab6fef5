/**
 * gc's conditional delete of a blob file waits for its turn behind a call on the same blob under way (FsBlobStore's
 * per-blob queue). A shard directory swapped for a symbolic link while it waited makes the blob's path lead out of the
 * root: the delete must refuse (UNSAFE_PATH) when its turn comes, not judge and unlink the file the link leads to.
 */
import { describe, expect, it } from 'vitest';
import { readdir, rename, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex } from '../store/hash/digest.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { tempDir } from './support/tmp.js';

const HOUR = 3_600_000;

describe("gc's delete of a blob waiting for its turn", () => {
  it('refuses UNSAFE_PATH when a shard directory became a link out of the root meanwhile, and removes nothing there', async () => {
    const root = tempDir();
    const outside = tempDir();
    let dir2 = '';
    let held: (() => void) | undefined;
    let go!: () => void;
    const released = new Promise<void>((r) => (go = r));
    // The first delete, done with the blob (unlinked aside), holds its turn at its flush of the blob's directory.
    const fs: FsOps = {
      ...nodeFsOps,
      fsyncDir: async (p) => {
        if (p === dir2 && held) {
          held();
          held = undefined;
          await released;
        }
        return nodeFsOps.fsyncDir(p);
      },
    };
    const hash = await loadHashBackend('auto');
    const { store } = await FsBlobStore.open(root, { hash, fs });
    try {
      const { digest } = await store.put(new TextEncoder().encode('an orphan two hours old'));
      const hex = digestHex(digest);
      dir2 = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4));
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(join(dir2, hex), old, old);
      const storedBeforeMs = Date.now() - HOUR;
      const holding = new Promise<void>((r) => (held = r));
      const first = store.delete(digest, { storedBeforeMs });
      await holding;
      // Checked at its call, then queued behind the first.
      const second = store.delete(digest, { storedBeforeMs });
      second.catch(() => {});
      // Out there, an old file under the blob's name; the shard directory moved away, a link out in its place.
      await writeFile(join(outside, hex), 'not ours');
      await utimes(join(outside, hex), old, old);
      await rename(dir2, join(root, 'moved-away'));
      await symlink(outside, dir2);
      go();
      expect(await first).toBe(true);
      await expect(second).rejects.toMatchObject({ name: 'StoreError', code: 'UNSAFE_PATH' });
      expect(await readdir(outside)).toEqual([hex]);
      expect(await readdir(join(root, 'gc-aside'))).toEqual([]);
    } finally {
      go();
      await store.close();
    }
  });
});
