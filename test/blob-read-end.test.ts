/**
 * The filesystem blob store trusts a blob only when the file ends exactly where its size said once it has
 * been read (store/fs/blob-io.ts): a file that grows or shrinks after reading began is BLOB_INTEGRITY, for
 * `get` and `chunks`, whether the read of its end runs beside the last read of bytes or after it.
 */
import { describe, expect, it } from 'vitest';
import { appendFileSync, truncateSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { nodeFsOps } from '../store/fs/ops.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { tempDir } from './support/tmp.js';

const MiB = 1024 * 1024;

/** A store whose blob files run `change(path)` once, synchronously, when the first read of an opened blob is issued. */
async function storeChanging(change: (path: string) => void) {
  let armed = false;
  const { store } = await FsBlobStore.open(tempDir(), {
    hash: await loadHashBackend('native').catch(() => loadHashBackend('wasm')),
    fs: {
      ...nodeFsOps,
      async open(path, flags, mode) {
        const handle = await nodeFsOps.open(path, flags, mode);
        if (!armed || !path.includes('blobs-v1')) return handle;
        const read = handle.read.bind(handle) as (...args: unknown[]) => ReturnType<FileHandle['read']>;
        let first = true;
        (handle as { read: unknown }).read = (...args: unknown[]) => {
          if (first) {
            first = false;
            change(path);
          }
          return read(...args);
        };
        return handle;
      },
    },
  });
  return { store, arm: () => (armed = true) };
}

async function drain(chunks: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of chunks) n += c.length;
  return n;
}

describe('the filesystem blob store refuses a blob whose file changes size while it is read', () => {
  const sizes = [100 * 1024, 3 * MiB + 5, 5 * MiB]; // one read; several blocks of `chunks`; several reads of `get`
  const changes: Array<[string, (path: string) => void]> = [
    ['grows', (path) => appendFileSync(path, 'x')],
    ['shrinks', (path) => truncateSync(path, 10)],
  ];

  it.each(changes)('a file that %s: BLOB_INTEGRITY from get and from chunks, at every size', async (_, change) => {
    for (const size of sizes) {
      for (const via of ['get', 'chunks'] as const) {
        const { store, arm } = await storeChanging(change);
        const bytes = new Uint8Array(size).map((_, i) => (i * 7) & 0xff);
        const { digest } = await store.put(bytes);
        arm();
        const read = via === 'get' ? store.get(digest) : drain(store.chunks(digest));
        await expect(read, `${via} of ${size} bytes`).rejects.toMatchObject({
          name: 'StoreError',
          code: 'BLOB_INTEGRITY',
        });
        await store.close();
      }
    }
  });

  it('reads the same blobs unchanged to the end (the test store itself changes nothing unless armed)', async () => {
    for (const size of [0, ...sizes]) {
      const { store } = await storeChanging(() => {
        throw new Error('not armed');
      });
      const bytes = new Uint8Array(size).map((_, i) => (i * 7) & 0xff);
      const { digest } = await store.put(bytes);
      expect(Buffer.from(await store.get(digest)).equals(Buffer.from(bytes))).toBe(true);
      expect(await drain(store.chunks(digest))).toBe(size);
      await store.close();
    }
  });
});
