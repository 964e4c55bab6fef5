/**
 * The hash thread (store/hash/hash-thread.node.ts) and the streamed put that uses it: the same digests
 * and the same stored bytes as hashing on the main thread, and no blob when it fails.
 */
import { describe, expect, it, vi } from 'vitest';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex, formatDigest, nobleBlake3 } from '../store/hash/digest.js';
import { loadNativeBlake3 } from '../store/hash/native.node.js';
import { sharedBlock, threadHasher, type ThreadHasher } from '../store/hash/hash-thread.node.js';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { SHARED_BLOCK_SETS, writeStream } from '../store/fs/blob-io.js';
import { nodeFsOps } from '../store/fs/ops.js';
import { open } from 'node:fs/promises';
import { tempDir } from './support/tmp.js';

const ref = (bytes: Uint8Array) => `blake3:${bytesToHex(blake3(bytes))}`;
const bytesOf = (len: number, seed: number) =>
  Uint8Array.from({ length: len }, (_, i) => (Math.imul(i + seed, 2654435761) >>> 24) & 0xff);

async function* piecesOf(bytes: Uint8Array, steps: number[]) {
  for (let off = 0, k = 0; off < bytes.length; k++) {
    const n = steps[k % steps.length]!;
    yield bytes.slice(off, off + n);
    off += n;
  }
}

describe('threadHasher', () => {
  it('gives the reference digest for random bytes fed in random shared blocks', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: 1, max: 1 << 30 }),
        fc.oneof(fc.integer({ min: 512, max: 70_000 }), fc.constantFrom(1023, 1024, 1025, 65_536)),
        async (len, seed, step) => {
          const bytes = bytesOf(len, seed);
          const block = sharedBlock(step);
          const h = threadHasher();
          for (let off = 0; off < len; off += step) {
            const n = Math.min(step, len - off);
            block.set(bytes.subarray(off, off + n));
            await h.update(block.subarray(0, n));
          }
          expect(formatDigest(await h.digest())).toBe(ref(bytes));
        },
      ),
      { numRuns: 25 },
    );
  });

  it('keeps interleaved states apart', async () => {
    const inputs = [bytesOf(5000, 1), bytesOf(1, 2), bytesOf(90_000, 3)];
    const hashers = inputs.map(() => threadHasher());
    const blocks = inputs.map(() => sharedBlock(999));
    for (let off = 0; off < 90_000; off += 999)
      await Promise.all(
        inputs.map((x, i) => {
          const piece = x.subarray(off, off + 999);
          if (piece.length === 0) return undefined;
          blocks[i]!.set(piece);
          return hashers[i]!.update(blocks[i]!.subarray(0, piece.length));
        }),
      );
    for (const i of [2, 0, 1]) expect(formatDigest(await hashers[i]!.digest())).toBe(ref(inputs[i]!));
  });

  it('refuses a block outside shared memory (TypeError)', async () => {
    await expect(threadHasher().update(new Uint8Array(4))).rejects.toThrow(TypeError);
  });
});

describe('streamed put with the hash thread', async () => {
  const native = await loadNativeBlake3();

  it('stores the same bytes under the same digest as hashing on the main thread', async () => {
    const MiB = 1024 * 1024;
    const sizes = [0, 1, MiB - 1, MiB, 3.5 * MiB, 9 * MiB + 3]; // past a block, the block set and a flush-behind
    const threaded = (await FsBlobStore.open(tempDir(), { hash: native })).store;
    const plain = (await FsBlobStore.open(tempDir(), { hash: native, hashThread: false })).store;
    const reference = (await FsBlobStore.open(tempDir(), { hash: nobleBlake3 })).store;
    const buffers = (await FsBlobStore.open(tempDir(), { hash: native })).store;
    for (const size of sizes) {
      const bytes = bytesOf(size, size);
      const steps = [65_537, 1_000_003, 7];
      const a = await threaded.put(piecesOf(bytes, steps));
      const b = await plain.put(piecesOf(bytes, steps));
      expect(a, `${size}`).toEqual({ digest: ref(bytes), size });
      expect(b, `${size}`).toEqual(a);
      // One buffer: written whole up to a flush-behind step, above it as a stream of its own views.
      expect(await buffers.put(bytes), `${size} as a buffer`).toEqual(a);
      expect(Buffer.from(await buffers.get(a.digest)).equals(Buffer.from(bytes)), `${size} buffer read back`).toBe(
        true,
      );
      expect(Buffer.from(await threaded.get(a.digest)).equals(Buffer.from(bytes)), `${size} read back`).toBe(true);
      if (size <= MiB) expect(await reference.put(piecesOf(bytes, steps))).toEqual(a);
    }
    await Promise.all([threaded.close(), plain.close(), reference.close(), buffers.close()]);
  }, 120_000);

  it('is what a native store uses by default for streams', async () => {
    const { store } = await FsBlobStore.open(tempDir(), { hash: native });
    expect((store as unknown as { hashThread: boolean }).hashThread).toBe(true);
    const { store: other } = await FsBlobStore.open(tempDir(), { hash: nobleBlake3 });
    expect((other as unknown as { hashThread: boolean }).hashThread).toBe(false);
  });

  it('fails the write with STORAGE_FAILED, and drops the hash state, when the thread fails a block', async () => {
    const dir = tempDir();
    const handle = await open(join(dir, 'staging'), 'w');
    let dropped = false;
    const failing: ThreadHasher = {
      update: async () => {
        throw new Error('thread gone');
      },
      digest: async () => new Uint8Array(32),
      drop: async () => void (dropped = true),
    };
    const ctx = { fs: nodeFsOps, hash: native, afterDigest: async () => {}, hashThread: () => failing };
    await expect(writeStream(ctx, handle, piecesOf(bytesOf(3 * 1024 * 1024, 1), [500_000]))).rejects.toMatchObject({
      code: 'STORAGE_FAILED',
    });
    await handle.close();
    expect(dropped).toBe(true);
  });

  it('shares at most SHARED_BLOCK_SETS sets of blocks with the thread, however many streams run at once', async () => {
    // The thread's view of a shared block lives until its own heap is collected: sets made per put and dropped
    // piled up there. Many concurrent streams reuse the few shared sets; the others hash on this thread.
    const posted = vi.spyOn(Worker.prototype, 'postMessage');
    try {
      const { store } = await FsBlobStore.open(tempDir(), { hash: native });
      for (let round = 0; round < 4; round++) {
        const all = Array.from({ length: 6 }, (_, k) => bytesOf(2 * 1024 * 1024 + 3 * k, round * 10 + k));
        const puts = await Promise.all(all.map((bytes) => store.put(piecesOf(bytes, [999_983]))));
        puts.forEach((p, k) =>
          expect(p, `round ${round}, put ${k}`).toEqual({ digest: ref(all[k]!), size: all[k]!.length }),
        );
      }
      await store.close();
      const shares = posted.mock.calls.filter(([m]) => (m as { op?: string }).op === 'share').length;
      expect(shares).toBeGreaterThan(0); // the thread was used
      expect(shares).toBeLessThanOrEqual(SHARED_BLOCK_SETS * 8);
    } finally {
      posted.mockRestore();
    }
  });

  it('hashes on the main thread when no hash thread can be had', async () => {
    const dir = tempDir();
    const handle = await open(join(dir, 'staging'), 'w');
    const bytes = bytesOf(2 * 1024 * 1024 + 5, 9);
    const ctx = {
      fs: nodeFsOps,
      hash: native,
      afterDigest: async () => {},
      hashThread: (): ThreadHasher => {
        throw new Error('no threads here');
      },
    };
    const written = await writeStream(ctx, handle, piecesOf(bytes, [300_001]));
    await handle.close();
    expect(written).toEqual({ digest: ref(bytes), size: bytes.length });
    expect(readFileSync(join(dir, 'staging')).equals(Buffer.from(bytes))).toBe(true);
  });
});
