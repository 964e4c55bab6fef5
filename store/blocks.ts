/**
 * The fixed-size block cutter both blob backends write through: the filesystem store's positioned
 * writes and the PostgreSQL store's chunk rows. Isomorphic.
 */
import type { BlobSource } from './blob-store.js';
import { isUint8Array } from './errors.js';

/**
 * Cuts a source into blocks of exactly `buffers[0].length` bytes (the last one shorter, none for an
 * empty source). A buffer source is yielded as views of itself, without a copy. A stream is copied into
 * `buffers` in rotation (block k into `buffers[k % buffers.length]`), so the consumer may keep using a
 * block until it pulls the one that will refill that buffer; a piece of the stream is copied whole
 * before the next piece is pulled (a source may reuse its buffer, BlobSource contract).
 */
export async function* fixedBlocks(source: BlobSource, buffers: readonly Uint8Array[]): AsyncIterable<Uint8Array> {
  const size = buffers[0]?.length ?? 0;
  if (size === 0 || buffers.some((b) => b.length !== size))
    throw new RangeError('fixedBlocks needs one or more buffers of one non-zero size');
  if (isUint8Array(source)) {
    for (let off = 0; off < source.length; off += size) yield source.subarray(off, off + size);
    return;
  }
  let slot = 0;
  let fill = 0;
  for await (const piece of source) {
    for (let off = 0; off < piece.length;) {
      const n = Math.min(size - fill, piece.length - off);
      buffers[slot]!.set(piece.subarray(off, off + n), fill);
      fill += n;
      off += n;
      if (fill === size) {
        yield buffers[slot]!;
        slot = (slot + 1) % buffers.length;
        fill = 0;
      }
    }
  }
  if (fill > 0) yield buffers[slot]!.subarray(0, fill);
}
