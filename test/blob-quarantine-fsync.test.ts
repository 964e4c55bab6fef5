/**
 * A put that finds a damaged copy at a blob's path moves it into quarantine/ (never deleted) and fsyncs that directory.
 * When that fsync fails, the put fails (STORAGE_FAILED) and quarantine/ stays listed as a directory whose new entry is
 * not yet durable, as a shard directory's does: the next put fsyncs it again before it reports a blob stored. A retry
 * that links the blob at the path the damaged copy left would otherwise make the rename's removal durable (the shard's
 * fsync) and not its arrival in quarantine/, and a crash could take the damaged copy with it.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex } from '../store/hash/digest.js';
import { tempDir } from './support/tmp.js';

describe('a failed fsync of quarantine/', () => {
  it('fails the put with a coded error, and the next put fsyncs quarantine/ again before it reports a blob stored', async () => {
    const root = tempDir();
    const quarantine = join(root, 'quarantine');
    let failures = 0;
    /** What quarantine/ held at each fsync of it that succeeded. */
    const synced: string[][] = [];
    const fs: FsOps = {
      ...nodeFsOps,
      async fsyncDir(dir) {
        if (dir === quarantine && failures > 0) {
          failures--;
          throw Object.assign(new Error(`EIO: i/o error, fsync '${dir}'`), { code: 'EIO', syscall: 'fsync' });
        }
        await nodeFsOps.fsyncDir(dir);
        if (dir === quarantine) synced.push(readdirSync(dir));
      },
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    try {
      const bytes = new TextEncoder().encode('a summary whose stored copy a bit flip damaged');
      const { digest } = await store.put(bytes);
      const hex = digestHex(digest);
      const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const damaged = readFileSync(file);
      damaged[0]! ^= 0x01;
      writeFileSync(file, damaged);
      failures = 1;
      await expect(store.put(bytes)).rejects.toMatchObject({
        name: 'StoreError',
        code: 'STORAGE_FAILED',
        cause: { code: 'EIO' },
      });
      const [moved] = readdirSync(quarantine);
      expect(moved).toMatch(new RegExp(`^${hex}\\.`));
      expect(synced).toEqual([]);
      // The retry links the blob at the free path; quarantine/ is made durable with the damaged copy in it first.
      await store.put(bytes);
      expect(synced).toEqual([[moved]]);
      expect(new Uint8Array(await store.get(digest))).toEqual(bytes);
      expect(readFileSync(join(quarantine, moved!))).toEqual(damaged);
    } finally {
      await store.close();
    }
  });
});
