/**
 * A put of bytes already stored finds a file at the blob's path (EEXIST) and judges it: equal, its time refreshed;
 * damaged, moved into quarantine/ and the staged copy linked instead. A shard directory swapped for a symbolic link at
 * that moment (after the put checked it, before its link) makes the path lead out of the root: the put must refuse
 * (UNSAFE_PATH) rather than take the file there for a damaged copy, move it into quarantine/ and link the blob
 * out there in its place.
 */
import { describe, expect, it } from 'vitest';
import { readdir, readFile, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex } from '../store/hash/digest.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { tempDir } from './support/tmp.js';

describe('a put that finds a file at the path of bytes already stored', () => {
  it('refuses UNSAFE_PATH when a shard directory became a link out of the root, and moves or writes nothing there', async () => {
    const root = tempDir();
    const outside = tempDir();
    const bytes = new TextEncoder().encode('a blob put twice; its shard directory swapped in between');
    let swap: (() => Promise<void>) | undefined;
    const fs: FsOps = {
      ...nodeFsOps,
      link: async (from, to) => {
        const now = swap;
        swap = undefined;
        await now?.();
        return nodeFsOps.link(from, to);
      },
    };
    const hash = await loadHashBackend('auto');
    const { store } = await FsBlobStore.open(root, { hash, fs });
    try {
      const { digest } = await store.put(bytes);
      const hex = digestHex(digest);
      const dir2 = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4));
      // Out there, a file under the blob's name: not the blob's bytes.
      await writeFile(join(outside, hex), 'not ours');
      // Right before the second put links its staged copy: the shard directory moved away, a link out in its place.
      swap = async () => {
        await rename(dir2, join(root, 'moved-away'));
        await symlink(outside, dir2);
      };
      await expect(store.put(bytes)).rejects.toMatchObject({ name: 'StoreError', code: 'UNSAFE_PATH' });
      expect(swap).toBeUndefined(); // the swap came
      expect((await readdir(outside)).sort()).toEqual([hex]);
      expect(await readFile(join(outside, hex), 'utf8')).toBe('not ours');
      expect(await readdir(join(root, 'quarantine'))).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
