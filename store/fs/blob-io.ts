/**
 * The byte pipelines of the filesystem blob store: `put`'s writes (docs/DESIGN.md, "Blob store": write while
 * hashing, one pass over the bytes; writes and fsyncs run on the I/O threads while this thread hashes,
 * and the caller's `afterDigest` — making the shard directories durable — overlaps the final data
 * fsync), and the streamed, verified-at-the-end read behind `chunks`.
 */
import type { FileHandle } from 'node:fs/promises';
import { formatDigest, type Digest, type HashBackend, type Hasher } from '../hash/digest.js';
import { StoreError, storageFailure, throwIfAborted } from '../errors.js';
import type { FsOps } from './ops.js';
import { fixedBlocks } from '../blocks.js';
import { sharedBlock, type ThreadHasher } from '../hash/hash-thread.node.js';

// Hashing a large buffer yields to the event loop this often, so I/O completions are not held up.
const HASH_SLICE = 1024 * 1024;
/** A stream is copied into blocks of this size (its source may reuse a chunk once the next is pulled). */
const BLOCK = 1024 * 1024;
/** Blocks per stream: up to this many positioned writes are in flight while the next block fills. */
const BLOCKS = 8;
/** `readWhole` reads into its one buffer this much at a time. */
const READ_CHUNK = 4 * 1024 * 1024;
/**
 * Flush-behind: while a stream is written, an fsync is started whenever this many bytes were written
 * since the last one began, so the kernel writes back during the put instead of all at its end. Only
 * the final fsync, issued after the last write completed, makes the blob durable; an earlier one that
 * fails fails the put all the same.
 */
export const FLUSH_BEHIND = 8 * 1024 * 1024;

export interface WriteContext {
  fs: FsOps;
  hash: HashBackend;
  /** Runs once the digest is known, alongside the final data fsync (both must succeed). */
  afterDigest(digest: Digest): Promise<void>;
  /**
   * A stream's blocks are hashed on this hash state off the main thread (native BLAKE3; see
   * store/hash/hash-thread.node.ts) instead of by `hash` here; where it cannot be had, `hash` serves.
   */
  hashThread?: () => ThreadHasher;
}

export interface Written {
  digest: Digest;
  size: number;
}

/**
 * Blocks reused across puts, so a large put does not page-fault fresh memory for every block. Private sets beyond
 * KEEP_BLOCK_SETS are left to the garbage collector. Those a hash thread reads are in shared memory and never
 * dropped: the thread's own view of a block lives until the thread's heap is collected, which an idle thread
 * rarely does, so dropped shared sets piled up there (hundreds of MiB under many concurrent streamed puts). At
 * most SHARED_BLOCK_SETS are ever made (16 MiB); a stream that finds none free is hashed on this thread instead.
 */
const freeBlockSets = { private: [] as Buffer[][], shared: [] as Buffer[][] };
const KEEP_BLOCK_SETS = 2;
export const SHARED_BLOCK_SETS = 2;
let sharedSetsMade = 0;

function takeBlocks(): Buffer[] {
  return freeBlockSets.private.pop() ?? Array.from({ length: BLOCKS }, () => Buffer.allocUnsafe(BLOCK));
}

/** A set of shared blocks for the hash thread, or `undefined` when every one there may be is in use. */
function takeSharedBlocks(): Buffer[] | undefined {
  const free = freeBlockSets.shared.pop();
  if (free) return free;
  if (sharedSetsMade >= SHARED_BLOCK_SETS) return undefined;
  sharedSetsMade++;
  return Array.from({ length: BLOCKS }, () => sharedBlock(BLOCK));
}

function giveBlocks(blocks: Buffer[]): void {
  if (blocks[0]!.buffer instanceof SharedArrayBuffer) freeBlockSets.shared.push(blocks);
  else if (freeBlockSets.private.length < KEEP_BLOCK_SETS) freeBlockSets.private.push(blocks);
}

/**
 * The read at `size` that finds the end of the file (a blob that grew is not trusted), started beside the
 * read of the last bytes instead of after it: one round trip to the I/O threads less per read.
 */
function probeEnd(handle: FileHandle, size: number): Promise<{ bytesRead: number }> {
  const probe = handle.read(Buffer.alloc(1), 0, 1, size);
  probe.catch(() => {}); // awaited by verifyEnd, or by the caller's cleanup before the file is closed
  return probe;
}

/** After the last read: the file must end where its size said (a blob that grew or shrank under us is not trusted) and match its digest. */
async function verifyEnd(
  handle: FileHandle,
  off: number,
  size: number,
  hasher: Hasher,
  digest: string,
  probe?: Promise<{ bytesRead: number }>,
): Promise<void> {
  const changed = () => new StoreError('BLOB_INTEGRITY', `blob ${digest}: size changed while reading`);
  if (off !== size) throw changed(); // it ended early: it shrank
  if ((await (probe ?? probeEnd(handle, size))).bytesRead !== 0) throw changed(); // there is more: it grew
  if (formatDigest(hasher.digest()) !== digest)
    throw new StoreError('BLOB_INTEGRITY', `blob ${digest}: stored bytes do not match their digest`);
}

/** Reads an open blob of exactly `size` bytes into one buffer, hashing each chunk while the next is read; refuses on any mismatch. */
export async function readWhole(
  handle: FileHandle,
  size: number,
  digest: string,
  hash: HashBackend,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const buf = Buffer.allocUnsafe(size);
  const hasher = await hash.create();
  let off = 0;
  let probe: Promise<{ bytesRead: number }> | undefined;
  let pending: Promise<{ bytesRead: number }> | undefined;
  const readAt = (at: number) => {
    const n = Math.min(READ_CHUNK, size - at);
    if (at + n === size) probe ??= probeEnd(handle, size);
    pending = handle.read(buf, at, n, at);
    pending.catch(() => {}); // awaited below, or settled before the file is closed
  };
  try {
    if (size > 0) readAt(0);
    else probe = probeEnd(handle, 0);
    while (pending) {
      const { bytesRead } = await pending;
      pending = undefined;
      if (bytesRead === 0) break;
      const start = off;
      off += bytesRead;
      throwIfAborted(signal);
      if (off < size) readAt(off);
      hasher.update(buf.subarray(start, off));
    }
    await verifyEnd(handle, off, size, hasher, digest, probe);
  } finally {
    await Promise.allSettled([pending, probe]); // no read may still run once the caller closes the file
  }
  return buf;
}

/**
 * Reads an open blob of `size` bytes as chunks (views into reused blocks, each valid until the next is
 * pulled), the next read in flight while the consumer works; hashes each; after the last, checks that
 * the file ended there and that the digest matches, else throws BLOB_INTEGRITY.
 */
export async function* readStream(
  handle: FileHandle,
  size: number,
  digest: string,
  hash: HashBackend,
  signal?: AbortSignal,
): AsyncIterable<Uint8Array> {
  const hasher = await hash.create();
  const blocks = takeBlocks();
  let pending: Promise<{ bytesRead: number }> | undefined;
  let probe: Promise<{ bytesRead: number }> | undefined;
  const readAt = (at: number, slot: number) => {
    const n = Math.min(BLOCK, size - at);
    if (at + n === size) probe ??= probeEnd(handle, size);
    pending = handle.read(blocks[slot]!, 0, n, at);
    pending.catch(() => {}); // awaited at the next pull; this keeps a consumer that walks away from an unhandled rejection
  };
  try {
    let off = 0;
    let slot = 0;
    if (size > 0) readAt(0, 0);
    else probe = probeEnd(handle, 0);
    while (pending) {
      const { bytesRead } = await pending;
      pending = undefined;
      if (bytesRead === 0) break;
      const chunk = blocks[slot]!.subarray(0, bytesRead);
      off += bytesRead;
      throwIfAborted(signal);
      slot = (slot + 1) % BLOCKS;
      if (off < size) readAt(off, slot);
      hasher.update(chunk);
      yield chunk;
    }
    await verifyEnd(handle, off, size, hasher, digest, probe);
  } finally {
    // No read may still fill a block once it is given back, nor run once the caller closes the file.
    await Promise.allSettled([pending, probe]);
    giveBlocks(blocks);
  }
}

function storageFailed(step: string) {
  return (err: unknown): never => {
    throw storageFailure(StoreError, `blob store: ${step}`, err);
  };
}

function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Waits for every operation (none is left running behind a failure), then throws the first failure. */
export async function settleAll(...ops: Array<Promise<unknown>>): Promise<void> {
  const results = await Promise.allSettled(ops);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** A whole buffer: one write and its fsync in flight while the bytes are hashed here. */
export async function writeBuffer(
  ctx: WriteContext,
  handle: FileHandle,
  bytes: Uint8Array,
  signal?: AbortSignal,
): Promise<Written> {
  const hasher = await ctx.hash.create();
  let ioFailed = false;
  const io = (async () => {
    await ctx.fs.write(handle, bytes).catch(storageFailed('write'));
    throwIfAborted(signal);
    await ctx.fs.fsync(handle).catch(storageFailed('fsync'));
  })();
  io.catch(() => (ioFailed = true)); // awaited below; this also keeps an early failure from being "unhandled"
  let digest: Digest;
  try {
    for (let off = 0; off < bytes.length && !ioFailed; off += HASH_SLICE) {
      hasher.update(bytes.subarray(off, off + HASH_SLICE));
      throwIfAborted(signal);
      // Let the I/O thread's completion through (write done → fsync issued) while hashing goes on.
      if (off + HASH_SLICE < bytes.length) await yieldToIo();
    }
    if (ioFailed) await io; // throws the write's own error; the partial digest is never used
    digest = formatDigest(hasher.digest());
  } catch (err) {
    await io.catch(() => {});
    throw err;
  }
  await settleAll(io, ctx.afterDigest(digest));
  return { digest, size: bytes.length };
}

/** A buffer as a stream of BLOCK-sized views (no copy here; `writeStream` copies each into its blocks). */
export async function* slices(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  for (let off = 0; off < bytes.length; off += BLOCK) yield bytes.subarray(off, off + BLOCK);
}

/**
 * The hash state of a stream and its blocks: on the hash thread, in shared blocks, when the context offers a thread
 * that starts and a shared set is free; else here, in private blocks.
 */
async function streamHasher(ctx: WriteContext): Promise<{ thread?: ThreadHasher; here?: Hasher; blocks: Buffer[] }> {
  if (ctx.hashThread) {
    const blocks = takeSharedBlocks();
    if (blocks) {
      try {
        const thread = ctx.hashThread();
        return { thread, blocks };
      } catch {
        // No thread to be had (no worker_threads, a resource limit): this thread hashes, as without one.
        giveBlocks(blocks);
      }
    }
  }
  return { here: await ctx.hash.create(), blocks: takeBlocks() };
}

/**
 * A stream of chunks, of any sizes (already metered by the store's front: type, size limit,
 * cancellation): cut into BLOCKS reusable blocks; each full block is written at its offset (several
 * writes in flight) and hashed, on the hash thread when there is one, while the source produces the next
 * bytes; flush-behind fsyncs start every FLUSH_BEHIND bytes. A block is refilled only once both its
 * write and its hashing are done.
 */
export async function writeStream(
  ctx: WriteContext,
  handle: FileHandle,
  source: AsyncIterable<Uint8Array>,
  signal?: AbortSignal,
): Promise<Written> {
  const { thread, here, blocks } = await streamHasher(ctx);
  const writes: Array<Promise<void> | undefined> = new Array(BLOCKS);
  const hashing: Array<Promise<void> | undefined> = new Array(BLOCKS);
  const flushes: Array<Promise<void>> = [];
  let flushing = false;
  let unflushed = 0;
  let slot = 0; // fixedBlocks fills blocks in the same rotation
  let offset = 0; // file offset of the next block
  let failure: unknown;
  const ended = (p: Promise<void>) => p.catch((err) => void (failure ??= err));

  let digest: Digest;
  try {
    try {
      for await (const block of fixedBlocks(source, blocks)) {
        writes[slot] = ended(ctx.fs.write(handle, block, offset).catch(storageFailed('write')));
        offset += block.length;
        if (thread) hashing[slot] = ended(thread.update(block).catch(storageFailed('hash thread')));
        else here!.update(block);
        unflushed += block.length;
        if (unflushed >= FLUSH_BEHIND && !flushing) {
          unflushed = 0;
          flushing = true;
          flushes.push(ended(ctx.fs.fsync(handle).catch(storageFailed('fsync'))).then(() => void (flushing = false)));
        }
        slot = (slot + 1) % BLOCKS;
        // The block about to be refilled must be written out and hashed first.
        await writes[slot];
        await hashing[slot];
        if (failure !== undefined) throw failure;
        throwIfAborted(signal);
      }
    } finally {
      // No write may still run once the caller closes the file, nor a block be reused while written or hashed.
      await Promise.all([...writes, ...hashing, ...flushes]);
    }
    if (failure !== undefined) throw failure;
    digest = formatDigest(thread ? await thread.digest().catch(storageFailed('hash thread')) : here!.digest());
  } catch (err) {
    await thread?.drop().catch(() => {});
    throw err;
  } finally {
    giveBlocks(blocks);
  }
  await settleAll(ctx.fs.fsync(handle).catch(storageFailed('fsync')), ctx.afterDigest(digest));
  return { digest, size: offset };
}
