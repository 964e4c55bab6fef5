/**
 * A put that finds its second-level shard directory already there, made a moment before by another put of this
 * process whose flush of it into its parent is still under way (or fails), must not report its blob stored before
 * that directory is durable: a crash would take the directory back, and the blob in it with it.
 */
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex, digestOf } from '../store/hash/digest.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { tempDir } from './support/tmp.js';

/** Two contents whose digests share their first four hex digits: one second-level shard directory. */
function twoInOneShard(): [Uint8Array, Uint8Array, string] {
  const seen = new Map<string, Uint8Array>();
  for (;;) {
    const bytes = randomBytes(32);
    const prefix = digestHex(digestOf(bytes)).slice(0, 4);
    const other = seen.get(prefix);
    if (other) return [other, bytes, prefix];
    seen.set(prefix, bytes);
  }
}

describe('a put into a shard directory another put just made', () => {
  it('is not stored before the directory is durable in its parent (the maker flush held, then failed)', async () => {
    const root = tempDir();
    const [a, b, prefix] = twoInOneShard();
    const dir1 = join(root, 'blobs-v1', 'blake3', prefix.slice(0, 2));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    let dir1Flushes = 0;
    let dir1Durable = false;
    const fs: FsOps = {
      ...nodeFsOps,
      fsyncDir: async (dir) => {
        if (dir === dir1 && dir1Flushes++ === 0) {
          // The first put's flush of the second-level directory it made: held, then failed.
          held();
          await gate;
          throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
        }
        await nodeFsOps.fsyncDir(dir);
        if (dir === dir1) dir1Durable = true;
      },
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    const first = store.put(a);
    first.catch(() => {});
    await holding;
    let durableWhenStored: boolean | undefined;
    const second = store.put(b).then((info) => {
      durableWhenStored = dir1Durable;
      return info;
    });
    second.catch(() => {});
    // The second put runs on while the first one's flush is held (it may wait for it).
    await new Promise((r) => setTimeout(r, 100));
    release();
    await expect(first).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
    // Stored only once its directory is durable in the parent (by a flush of its own), or failed as the first.
    const outcome = await second.then(
      () => 'stored',
      (err: { code?: string }) => err.code,
    );
    if (outcome === 'stored') expect(durableWhenStored).toBe(true);
    else expect(outcome).toBe('STORAGE_FAILED');
    expect(dir1Flushes).toBeGreaterThanOrEqual(2);
    await store.close();
  });
});
