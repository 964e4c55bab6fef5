/**
 * The limit: what the hardware allows for the same bytes, with nothing of the ledger in the way.
 * A durable write is the same sequence the blob store needs (staging file, write, fsync, rename,
 * directory fsync); reads go through the page cache, as a resume right after a publish does.
 */
import { isAscii } from 'node:buffer';
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { nodeFsOps } from '../../store/fs/ops.js';
import type { HashBackend } from '../../store/hash/digest.js';
import { asciiText, textBufferSize } from '../../src/summary/decoder.js';

const CHUNK = 4 * 1024 * 1024;

/** Staging file, `write` into it, fsync, close, rename, directory fsync. */
async function durably(dir: string, name: string, write: (handle: fsp.FileHandle) => Promise<void>): Promise<void> {
  const staging = join(dir, `${name}.tmp`);
  const handle = await fsp.open(staging, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
  try {
    await write(handle);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fsp.rename(staging, join(dir, name));
  const d = await fsp.open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

/** Staging file, one write, fsync, close, rename, directory fsync. */
export async function rawDurableWrite(dir: string, name: string, bytes: Uint8Array): Promise<void> {
  await durably(dir, name, (handle) => nodeFsOps.write(handle, bytes));
}

/** What publish's streamed write does (store/fs/blob-io.ts): blocks of 1 MiB, up to 8 writes in flight, an fsync every 8 MiB. */
const FB_BLOCK = 1024 * 1024;
const FB_BLOCKS = 8;
const FB_EVERY = 8 * 1024 * 1024;
/** The reused blocks, made and touched once (memory not touched before costs a page fault per 4 KiB). */
let fbBlocks: Buffer[] | undefined;

/**
 * `rawDurableWrite` as publish writes a large blob: the bytes copied into eight reused 1 MiB blocks, each written
 * at its offset with up to eight writes in flight, and an fsync started (not awaited) whenever 8 MiB were written
 * since the last one began, so the kernel writes back during the write instead of all at its end; then the final
 * fsync, rename, directory fsync. On this project's machines both halves pay: flush-behind ran up to 3× the plain
 * write, and writing through reused blocks up to 3× writing the same flush-behind pattern straight from the one
 * large buffer (benchmarks/README.md), so the limit of a large publish is the faster of this and the plain write.
 * Not for concurrent calls (one set of blocks).
 */
export async function rawDurableWriteFlushBehind(dir: string, name: string, bytes: Uint8Array): Promise<void> {
  const blocks = (fbBlocks ??= Array.from({ length: FB_BLOCKS }, () => Buffer.alloc(FB_BLOCK, 1)));
  await durably(dir, name, async (handle) => {
    const writes: Array<Promise<void> | undefined> = new Array(FB_BLOCKS);
    const flushes: Array<Promise<void>> = [];
    let flushing = false;
    let unflushed = 0;
    let failure: unknown;
    const ended = (p: Promise<unknown>) =>
      p.then(
        () => {},
        (err: unknown) => void (failure ??= err),
      );
    for (let k = 0, off = 0; off < bytes.length && failure === undefined; k++, off += FB_BLOCK) {
      const slot = k % FB_BLOCKS;
      await writes[slot]; // the block about to be refilled is written out first
      const end = Math.min(off + FB_BLOCK, bytes.length);
      const block = blocks[slot]!;
      block.set(bytes.subarray(off, end));
      writes[slot] = ended(nodeFsOps.write(handle, block.subarray(0, end - off), off));
      unflushed += end - off;
      if (unflushed >= FB_EVERY && !flushing) {
        unflushed = 0;
        flushing = true;
        flushes.push(ended(handle.sync()).then(() => void (flushing = false)));
      }
    }
    // Nothing may still write once the file is closed.
    await Promise.all([...writes, ...flushes]);
    if (failure !== undefined) throw failure;
  });
}

/** Reads a whole file of known size into one buffer. */
export async function rawRead(path: string, size: number): Promise<Uint8Array> {
  const handle = await fsp.open(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(size);
    let off = 0;
    while (off < size) {
      const { bytesRead } = await handle.read(buf, off, size - off, off);
      if (bytesRead === 0) break;
      off += bytesRead;
    }
    return buf;
  } finally {
    await handle.close();
  }
}

/** The read buffer `rawReadHashText` keeps between calls (as resume keeps its read blocks and decode arena), up to this size. */
const KEEP_TEXT_BUFFER = 4 * 1024 * 1024 + 1024 * 1024;
let textBuffer: Buffer | undefined;

/**
 * `rawReadHash`, then the bytes as one JS string: the least a resume that hands back the summary's text
 * must do (a floor under resume, not a target of it). The text is made the fastest way resume's decoder
 * makes its strings: ASCII by `asciiText` (Latin-1, a slice of an external string where that avoids a V8
 * large object), anything else as UTF-8; the bytes are read into a buffer kept from the last call, as
 * resume reads into blocks and an arena it keeps (memory not touched before costs a page fault per 4 KiB).
 * Not for concurrent calls.
 */
export async function rawReadHashText(
  path: string,
  size: number,
  backend: HashBackend,
): Promise<{ digest: Uint8Array; text: string }> {
  const want = textBufferSize(size);
  const buf = textBuffer && textBuffer.length >= want ? textBuffer : Buffer.allocUnsafe(want);
  if (want <= KEEP_TEXT_BUFFER) textBuffer = buf;
  const digest = await rawReadHash(path, size, backend, buf);
  const bytes = buf.subarray(0, size);
  return { digest, text: isAscii(bytes) ? asciiText(buf, 0, size) : bytes.toString('utf8') };
}

/** Reads a whole file while hashing it: the read of the next chunk is in flight while this one is hashed. */
export async function rawReadHash(
  path: string,
  size: number,
  backend: HashBackend,
  into?: Buffer,
): Promise<Uint8Array> {
  const handle = await fsp.open(path, 'r');
  try {
    const buf = into ?? Buffer.allocUnsafe(size);
    const hasher = await backend.create();
    let off = 0;
    let pending = size > 0 ? handle.read(buf, 0, Math.min(CHUNK, size), 0) : undefined;
    while (pending) {
      const { bytesRead } = await pending;
      if (bytesRead === 0) break;
      const start = off;
      off += bytesRead;
      pending = off < size ? handle.read(buf, off, Math.min(CHUNK, size - off), off) : undefined;
      hasher.update(buf.subarray(start, off));
    }
    return hasher.digest();
  } finally {
    await handle.close();
  }
}
