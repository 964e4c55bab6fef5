/**
 * The BlobStore contract as one reusable suite (in the manner of abstract-level's compliance tests):
 * every backend runs it unchanged through a factory, so the backends cannot drift apart.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BlobStore } from '../../store/blob-store.js';
import { hashBytes, nobleBlake3, type Digest, type HashBackend } from '../../store/hash/digest.js';
import { StoreError, type StoreErrorCode } from '../../store/errors.js';

export interface BlobStoreFixture {
  store: BlobStore;
  /** Closes the store and opens a new one on the same storage; `store` is replaced. */
  reopen(): Promise<BlobStore>;
  /** Changes one stored byte of a non-empty blob behind the store's back (its size stays). */
  corrupt(digest: Digest): Promise<void>;
  /** Moves a stored blob's storage time `ms` into the past, behind the store's back (what gc judges by). */
  backdate(digest: Digest, ms: number): Promise<void>;
  /** Closes the store and removes its storage. */
  dispose(): Promise<void>;
}

export type BlobStoreFactory = (options: { hash: HashBackend; maxBlobBytes?: number }) => Promise<BlobStoreFixture>;

const MiB = 1024 * 1024;

function bytes(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

async function* pieces(data: Uint8Array, size: number, onPull?: (i: number) => void): AsyncIterable<Uint8Array> {
  for (let off = 0, i = 0; off < data.length; off += size, i++) {
    onPull?.(i);
    yield data.subarray(off, off + size);
  }
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

async function expectStoreError(p: Promise<unknown>, code: StoreErrorCode): Promise<StoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected StoreError ${code}`).toBeInstanceOf(StoreError);
  expect((err as StoreError).code).toBe(code);
  return err as StoreError;
}

/** Registers the BlobStore conformance tests for one backend. */
export function blobStoreSuite(name: string, factory: BlobStoreFactory): void {
  describe(`BlobStore conformance: ${name}`, () => {
    let fx: BlobStoreFixture;
    beforeEach(async () => {
      fx = await factory({ hash: nobleBlake3 });
    });
    afterEach(async () => {
      await fx?.dispose();
    });

    describe('put and get', () => {
      it('returns the BLAKE3 digest and size, and get returns the same bytes', async () => {
        const data = bytes(1000);
        const info = await fx.store.put(data);
        expect(info).toEqual({ digest: await hashBytes(data, nobleBlake3), size: 1000 });
        expect(Buffer.from(await fx.store.get(info.digest)).equals(Buffer.from(data))).toBe(true);
      });

      it('stores the empty blob', async () => {
        const info = await fx.store.put(new Uint8Array(0));
        expect(info.size).toBe(0);
        expect((await fx.store.get(info.digest)).length).toBe(0);
        expect(await fx.store.stat(info.digest)).toMatchObject({ digest: info.digest, size: 0 });
      });

      it('gives a streamed source in uneven pieces the same digest as the whole buffer, across chunk boundaries', async () => {
        const data = bytes(9 * MiB + 12345, 7);
        const streamed = await fx.store.put(pieces(data, MiB + 7));
        expect(streamed).toEqual({ digest: await hashBytes(data, nobleBlake3), size: data.length });
        expect(Buffer.from(await fx.store.get(streamed.digest)).equals(Buffer.from(data))).toBe(true);
      });

      it('is done with a chunk when it pulls the next: a source may reuse one buffer for all its chunks', async () => {
        // Over 8 MiB, so the filesystem store's flush-behind fsync runs while blocks are still being written.
        const data = bytes(12 * MiB + 333, 19);
        async function* reusing(size: number): AsyncIterable<Uint8Array> {
          const buf = new Uint8Array(size);
          for (let off = 0; off < data.length; off += size) {
            const n = Math.min(size, data.length - off);
            buf.set(data.subarray(off, off + n));
            yield buf.subarray(0, n);
            buf.fill(0xee); // scribbled over as soon as the store asks for more
          }
        }
        const info = await fx.store.put(reusing(3 * MiB + 5));
        expect(info).toEqual({ digest: await hashBytes(data, nobleBlake3), size: data.length });
        expect(Buffer.from(await fx.store.get(info.digest)).equals(Buffer.from(data))).toBe(true);
      });

      it('is idempotent: a second put of the same bytes succeeds and stores one blob', async () => {
        const data = bytes(5000, 3);
        const a = await fx.store.put(data);
        const b = await fx.store.put(pieces(data, 999));
        expect(b).toEqual(a);
        expect(await collect(fx.store.list())).toEqual([a.digest]);
      });

      it('lets concurrent puts of the same bytes all succeed with one stored blob', async () => {
        const data = bytes(200_000, 11);
        const infos = await Promise.all(Array.from({ length: 6 }, () => fx.store.put(data)));
        expect(new Set(infos.map((i) => i.digest)).size).toBe(1);
        expect(await collect(fx.store.list())).toEqual([infos[0]!.digest]);
        expect(Buffer.from(await fx.store.get(infos[0]!.digest)).equals(Buffer.from(data))).toBe(true);
      });

      it('keeps blobs across close and reopen', async () => {
        const info = await fx.store.put(bytes(3 * MiB, 5));
        const store = await fx.reopen();
        expect(Buffer.from(await store.get(info.digest)).equals(Buffer.from(bytes(3 * MiB, 5)))).toBe(true);
      });
    });

    describe('chunks', () => {
      const concat = async (digest: string, options?: Parameters<BlobStore['chunks']>[1]) => {
        const parts: Buffer[] = [];
        for await (const c of fx.store.chunks(digest, options)) parts.push(Buffer.from(c)); // a copy: a chunk lives until the next is pulled
        return Buffer.concat(parts);
      };

      it('streams the same bytes as get, in order, for empty, small and multi-chunk blobs', async () => {
        for (const data of [new Uint8Array(0), bytes(1000, 23), bytes(5 * MiB + 77, 29)]) {
          const info = await fx.store.put(data);
          expect((await concat(info.digest)).equals(Buffer.from(data))).toBe(true);
        }
      });

      it('throws BLOB_INTEGRITY at the end of the iteration when the bytes do not match the digest', async () => {
        const info = await fx.store.put(bytes(3 * MiB, 31));
        await fx.corrupt(info.digest);
        await expectStoreError(concat(info.digest), 'BLOB_INTEGRITY');
      });

      it('throws BLOB_NOT_FOUND, BLOB_TOO_LARGE, INVALID_DIGEST and CANCELLED like get', async () => {
        const info = await fx.store.put(bytes(5000, 37));
        await expectStoreError(concat(await hashBytes(bytes(10), nobleBlake3)), 'BLOB_NOT_FOUND');
        await expectStoreError(concat(info.digest, { maxBytes: 4999 }), 'BLOB_TOO_LARGE');
        await expectStoreError(concat('blake3:XYZ'), 'INVALID_DIGEST');
        await expectStoreError(concat(info.digest, { signal: AbortSignal.abort() }), 'CANCELLED');
      });

      it('can be left early without harm: the store stays usable', async () => {
        const info = await fx.store.put(bytes(6 * MiB, 41));
        for await (const c of fx.store.chunks(info.digest)) {
          expect(c.length).toBeGreaterThan(0);
          break;
        }
        expect((await concat(info.digest)).equals(Buffer.from(bytes(6 * MiB, 41)))).toBe(true);
      });
    });

    describe('has, stat, list and delete', () => {
      it('reports presence, size and a storage time', async () => {
        const before = Date.now();
        const info = await fx.store.put(bytes(4321));
        const after = Date.now();
        expect(await fx.store.has(info.digest)).toBe(true);
        const st = await fx.store.stat(info.digest);
        expect(st).toMatchObject({ digest: info.digest, size: 4321 });
        // Clocks: filesystem mtime or database server time, both on this machine; allow coarse granularity.
        expect(st!.storedAtMs).toBeGreaterThanOrEqual(before - 2000);
        expect(st!.storedAtMs).toBeLessThanOrEqual(after + 2000);
      });

      it('refreshes the storage time when the same bytes are put again, so gc cannot take an old orphan just reused', async () => {
        const data = bytes(3000, 21);
        const { digest } = await fx.store.put(data);
        await fx.backdate(digest, 7 * 86_400_000);
        expect((await fx.store.stat(digest))!.storedAtMs).toBeLessThan(Date.now() - 6 * 86_400_000);
        const before = Date.now();
        await fx.store.put(data);
        expect((await fx.store.stat(digest))!.storedAtMs).toBeGreaterThanOrEqual(before - 2000);
        expect(Buffer.from(await fx.store.get(digest)).equals(Buffer.from(data))).toBe(true);
      });

      it('deletes only a blob stored before storedBeforeMs when asked to: a re-put since then keeps it', async () => {
        const data = bytes(100, 22);
        const { digest } = await fx.store.put(data);
        await fx.backdate(digest, 60_000);
        const cutoff = Date.now() - 30_000;
        await fx.store.put(data);
        expect(await fx.store.delete(digest, { storedBeforeMs: cutoff })).toBe(false);
        expect(await fx.store.has(digest)).toBe(true);
        await fx.backdate(digest, 60_000);
        expect(await fx.store.delete(digest, { storedBeforeMs: cutoff })).toBe(true);
        expect(await fx.store.has(digest)).toBe(false);
      });

      it('refuses with INVALID_ARGUMENT a storedBeforeMs that is not a finite number, removing nothing', async () => {
        const { digest } = await fx.store.put(bytes(100, 23));
        for (const bad of [Number.NaN, Infinity, '0', null])
          await expectStoreError(fx.store.delete(digest, { storedBeforeMs: bad as never }), 'INVALID_ARGUMENT');
        expect(await fx.store.has(digest)).toBe(true);
      });

      it('answers false and undefined for an absent blob', async () => {
        const absent = await hashBytes(bytes(10), nobleBlake3);
        expect(await fx.store.has(absent)).toBe(false);
        expect(await fx.store.stat(absent)).toBeUndefined();
      });

      it('lists every stored digest once', async () => {
        const digests = await Promise.all(
          [1, 2, 3, 4].map(async (i) => (await fx.store.put(bytes(100 * i, i))).digest),
        );
        expect((await collect(fx.store.list())).sort()).toEqual([...digests].sort());
      });

      it('deletes a blob, and deleting an absent blob is not an error', async () => {
        const info = await fx.store.put(bytes(100));
        await fx.store.delete(info.digest);
        await fx.store.delete(info.digest);
        expect(await fx.store.has(info.digest)).toBe(false);
        await expectStoreError(fx.store.get(info.digest), 'BLOB_NOT_FOUND');
        expect(await collect(fx.store.list())).toEqual([]);
      });

      it('throws BLOB_NOT_FOUND from get when the blob is absent', async () => {
        await expectStoreError(fx.store.get(await hashBytes(bytes(1), nobleBlake3)), 'BLOB_NOT_FOUND');
      });

      it('throws INVALID_DIGEST for anything but blake3:<64 lowercase hex>', async () => {
        for (const bad of [
          '',
          'blake3:',
          `blake3:${'A'.repeat(64)}`,
          `sha256:${'a'.repeat(64)}`,
          `blake3:${'a'.repeat(63)}/`,
        ]) {
          await expectStoreError(fx.store.get(bad), 'INVALID_DIGEST');
          await expectStoreError(fx.store.stat(bad), 'INVALID_DIGEST');
          await expectStoreError(fx.store.has(bad), 'INVALID_DIGEST');
          await expectStoreError(fx.store.delete(bad), 'INVALID_DIGEST');
        }
      });
    });

    describe('limits', () => {
      it('refuses a buffer over maxBytes with BLOB_TOO_LARGE and stores nothing', async () => {
        await expectStoreError(fx.store.put(bytes(1001), { maxBytes: 1000 }), 'BLOB_TOO_LARGE');
        expect(await collect(fx.store.list())).toEqual([]);
      });

      it('accepts exactly maxBytes', async () => {
        expect((await fx.store.put(bytes(1000), { maxBytes: 1000 })).size).toBe(1000);
      });

      it('stops reading a stream as soon as it passes maxBytes', async () => {
        let pulled = 0;
        const source = pieces(bytes(64 * 1024), 1024, (i) => (pulled = i + 1));
        await expectStoreError(fx.store.put(source, { maxBytes: 10 * 1024 }), 'BLOB_TOO_LARGE');
        expect(pulled).toBe(11);
        expect(await collect(fx.store.list())).toEqual([]);
      });

      it('enforces the store-wide maxBlobBytes', async () => {
        const small = await factory({ hash: nobleBlake3, maxBlobBytes: 2048 });
        try {
          await expectStoreError(small.store.put(bytes(2049)), 'BLOB_TOO_LARGE');
          await expectStoreError(small.store.put(pieces(bytes(4096), 512)), 'BLOB_TOO_LARGE');
        } finally {
          await small.dispose();
        }
      });

      it('refuses with BLOB_TOO_LARGE, before reading, a stored blob over the get limit', async () => {
        const info = await fx.store.put(bytes(5000));
        await expectStoreError(fx.store.get(info.digest, { maxBytes: 4999 }), 'BLOB_TOO_LARGE');
        expect((await fx.store.get(info.digest, { maxBytes: 5000 })).length).toBe(5000);
      });
    });

    describe('invalid arguments (checked once, in front of every backend)', () => {
      it('refuses with INVALID_ARGUMENT a source that is neither bytes nor a stream of them, storing nothing', async () => {
        for (const bad of [undefined, null, 42, 'text', { length: 3 }]) {
          await expectStoreError(fx.store.put(bad as never), 'INVALID_ARGUMENT');
        }
        expect(await collect(fx.store.list())).toEqual([]);
      });

      it('refuses with INVALID_ARGUMENT a stream that yields something other than a Uint8Array, storing nothing', async () => {
        async function* mixed(): AsyncIterable<unknown> {
          yield bytes(2 * MiB, 43);
          yield 'not bytes';
        }
        await expectStoreError(fx.store.put(mixed() as AsyncIterable<Uint8Array>), 'INVALID_ARGUMENT');
        await expectStoreError(fx.store.put(['a', 'b'] as never), 'INVALID_ARGUMENT');
        expect(await collect(fx.store.list())).toEqual([]);
        expect((await fx.store.put(bytes(10))).size).toBe(10);
      });

      it('refuses with INVALID_ARGUMENT a maxBytes that is not a non-negative integer, and a signal that is not an AbortSignal', async () => {
        const info = await fx.store.put(bytes(100));
        const concat = async (o: unknown) => {
          for await (const _ of fx.store.chunks(info.digest, o as never));
        };
        for (const options of [
          { maxBytes: -1 },
          { maxBytes: 1.5 },
          { maxBytes: NaN },
          { maxBytes: '100' },
          { signal: {} },
          7,
        ]) {
          await expectStoreError(fx.store.put(bytes(10, 2), options as never), 'INVALID_ARGUMENT');
          await expectStoreError(fx.store.get(info.digest, options as never), 'INVALID_ARGUMENT');
          await expectStoreError(concat(options), 'INVALID_ARGUMENT');
        }
        expect(await collect(fx.store.list())).toEqual([info.digest]);
      });

      it('names a refused maxBytes as every refusal names a value (shownValue): a string quoted, an object by its type', async () => {
        // byteLimitProblem spelt it String(value): '100' read as the number 100, and an object whose toString throws
        // threw that error in place of the coded refusal.
        const info = await fx.store.put(bytes(100));
        const hostile = {
          toString() {
            throw new Error('toString called');
          },
        };
        for (const [maxBytes, shown] of [
          ['100', '"100"'],
          [hostile, 'an object'],
          [-1, '-1'],
        ] as const) {
          const err = await expectStoreError(fx.store.get(info.digest, { maxBytes } as never), 'INVALID_ARGUMENT');
          expect(err.message).toBe(`maxBytes must be a non-negative integer, got ${shown}`);
          const put = await expectStoreError(fx.store.put(bytes(10, 3), { maxBytes } as never), 'INVALID_ARGUMENT');
          expect(put.message).toBe(err.message);
        }
      });

      it('checks the digest before anything else: INVALID_DIGEST even with invalid options', async () => {
        await expectStoreError(fx.store.get('blake3:zz', { maxBytes: -1 }), 'INVALID_DIGEST');
      });
    });

    describe('integrity', () => {
      it('throws BLOB_INTEGRITY instead of returning bytes that do not match the digest', async () => {
        const info = await fx.store.put(bytes(6 * MiB, 9));
        await fx.corrupt(info.digest);
        await expectStoreError(fx.store.get(info.digest), 'BLOB_INTEGRITY');
      });

      it('repairs a corrupt stored blob when the same bytes are put again', async () => {
        const data = bytes(3000, 13);
        const info = await fx.store.put(data);
        await fx.corrupt(info.digest);
        expect(await fx.store.put(data)).toEqual(info);
        expect(Buffer.from(await fx.store.get(info.digest)).equals(Buffer.from(data))).toBe(true);
      });
    });

    describe('cancellation', () => {
      it('throws CANCELLED for an already aborted signal and stores nothing', async () => {
        await expectStoreError(fx.store.put(bytes(100), { signal: AbortSignal.abort() }), 'CANCELLED');
        expect(await collect(fx.store.list())).toEqual([]);
      });

      it('throws CANCELLED when aborted mid-stream and leaves nothing behind', async () => {
        const ac = new AbortController();
        const data = bytes(10 * MiB, 17);
        const source = pieces(data, MiB, (i) => {
          if (i === 6) ac.abort(new Error('user pressed stop'));
        });
        await expectStoreError(fx.store.put(source, { signal: ac.signal }), 'CANCELLED');
        expect(await fx.store.has(await hashBytes(data, nobleBlake3))).toBe(false);
        expect(await collect(fx.store.list())).toEqual([]);
        // The store is still usable afterwards.
        expect((await fx.store.put(bytes(10))).size).toBe(10);
      });

      it('throws CANCELLED from get for an aborted signal', async () => {
        const info = await fx.store.put(bytes(100));
        await expectStoreError(fx.store.get(info.digest, { signal: AbortSignal.abort() }), 'CANCELLED');
      });
    });
  });
}
