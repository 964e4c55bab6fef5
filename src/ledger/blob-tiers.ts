/**
 * The ledger's view of its blobs: small summaries live inline in the manifest log (written by the append
 * that names them), larger ones in the blob store. Reads, listing, gc and export go through this one
 * `BlobStore`, so an inline blob is re-hashed, exported, verified, collected and checked like a file.
 */
import {
  checkDeleteOptions,
  checkReadOptions,
  type BlobInfo,
  type BlobSource,
  type BlobStat,
  type BlobStore,
  type DeleteOptions,
  type GetOptions,
  type PutOptions,
} from '../../store/blob-store.js';
import { settledOrAborted } from '../../store/abort.js';
import { OPERATION_CANCELLED, StoreError, throwIfAborted } from '../../store/errors.js';
import { digestHex, hashBytes, type Digest, type HashBackend } from '../../store/hash/digest.js';
import type { InlineBlobTable } from '../../manifests/log/log.js';

export class TieredBlobStore implements BlobStore {
  /**
   * The earlier of the two tiers' clocks (BlobStore.clock, InlineBlobTable.clock; `Date.now()` for a tier without one).
   * The tiers may date blobs by different clocks (an embedded log beside a PostgreSQL blob store, a PostgreSQL log beside
   * the root's files): gc's one cutoff, taken from the earlier, is never past the grace by either tier's clock, so a
   * blob younger than the grace by the clock it was dated with is never taken (an inline blob of a publish that
   * committed while gc walked the manifests, dated by a clock behind the other tier's).
   */
  readonly clock: () => Promise<number>;

  constructor(
    /** Where `put` writes and where blobs too large to be inline live. */
    readonly files: BlobStore,
    readonly inline: InlineBlobTable,
    private readonly hash: HashBackend,
  ) {
    this.clock = async () => {
      const [file, inlined] = await Promise.all([
        files.clock ? files.clock() : Date.now(),
        inline.clock ? inline.clock() : Date.now(),
      ]);
      return Math.min(file, inlined);
    };
  }

  /** Plain `put` always goes to the blob store: only an append may write an inline blob (atomically with its entry). */
  put(source: BlobSource, options?: PutOptions): Promise<BlobInfo> {
    return this.files.put(source, options);
  }

  /** The verified bytes of an inline blob, or `undefined` when the log holds none under this digest. */
  private async inlineBytes(digest: string, options: GetOptions = {}): Promise<Uint8Array | undefined> {
    const { signal } = options;
    throwIfAborted(signal);
    // The table's read takes no signal (PostgreSQL's waits for a free pooled connection, up to the pool's wait): its
    // caller's wait ends at the abort, CANCELLED as the file tier's, and the read left behind is only a read.
    const reading = this.inline.get(digest as Digest);
    await settledOrAborted(
      reading,
      signal,
      () => new StoreError('CANCELLED', OPERATION_CANCELLED, { cause: signal?.reason as unknown }),
    );
    const bytes = await reading;
    if (bytes === undefined) return undefined;
    if (options.maxBytes !== undefined && bytes.length > options.maxBytes) {
      throw new StoreError('BLOB_TOO_LARGE', `blob ${digest} is ${bytes.length} bytes, more than ${options.maxBytes}`);
    }
    // Never bytes that do not match their address, whichever tier held them.
    if ((await hashBytes(bytes, this.hash)) !== digest) {
      throw new StoreError('BLOB_INTEGRITY', `inline blob ${digest} does not match its digest`);
    }
    return bytes;
  }

  async get(digest: string, given?: GetOptions): Promise<Uint8Array> {
    // Checked as the file tier checks them (the digest first: INVALID_DIGEST whatever the options), before an inline
    // blob is looked for: the inline tier would refuse a bad digest as the log does (ManifestError INVALID_ID).
    digestHex(digest);
    const options = checkReadOptions(given);
    return (await this.inlineOrFileCopy(digest, options)) ?? this.files.get(digest, options);
  }

  /**
   * As `get`, but a damaged inline copy is its `BLOB_INTEGRITY`, never replaced by a file copy: fsck judges the copy the
   * log holds (a read falls back to an intact file copy, and the damage must still be named).
   */
  async getWithoutFallback(digest: string, given?: GetOptions): Promise<Uint8Array> {
    digestHex(digest);
    const options = checkReadOptions(given);
    return (await this.inlineBytes(digest, options)) ?? this.files.get(digest, options);
  }

  /**
   * The inline copy's verified bytes (`undefined`: the log holds none), or, where it is damaged (`BLOB_INTEGRITY`), an
   * intact file copy of the same bytes (a blob in both tiers: published inline and also `put` as a file), re-hashed by
   * the file tier; fsck still names the damaged inline copy. Without a file copy, or for any other failure, the inline
   * copy's error stands.
   */
  private async inlineOrFileCopy(digest: string, options: GetOptions): Promise<Uint8Array | undefined> {
    try {
      return await this.inlineBytes(digest, options);
    } catch (err) {
      if (!(err instanceof StoreError && err.code === 'BLOB_INTEGRITY')) throw err;
      try {
        return await this.files.get(digest, options);
      } catch (fileErr) {
        if (fileErr instanceof StoreError && fileErr.code === 'BLOB_NOT_FOUND') throw err;
        throw fileErr;
      }
    }
  }

  async *chunks(digest: string, given?: GetOptions): AsyncIterable<Uint8Array> {
    // Checked as the file tier checks them (as `get`), before an inline blob is looked for.
    digestHex(digest);
    const options = checkReadOptions(given);
    // A damaged inline copy's file copy is read whole, as `get` reads it (nothing is yielded before): it is small.
    const bytes = await this.inlineOrFileCopy(digest, options);
    if (bytes === undefined) yield* this.files.chunks(digest, options);
    else yield bytes;
  }

  async has(digest: string): Promise<boolean> {
    digestHex(digest); // StoreError INVALID_DIGEST, as the file tier: not the log's refusal of a bad digest
    return (await this.inline.stat(digest as Digest)) !== undefined || this.files.has(digest);
  }

  async stat(digest: string): Promise<BlobStat | undefined> {
    digestHex(digest);
    const st = await this.inline.stat(digest as Digest);
    return st ? { digest: digest as Digest, ...st } : this.files.stat(digest);
  }

  /** Every digest of either tier, once (a blob may be in both: published inline and also `put` as a file). */
  async *list(): AsyncIterable<Digest> {
    const seen = new Set<Digest>();
    for await (const d of this.inline.list()) {
      seen.add(d);
      yield d;
    }
    for await (const d of this.files.list()) if (!seen.has(d)) yield d;
  }

  /**
   * Removes the blob from both tiers, each judged by its own storage time under `storedBeforeMs` (an append that
   * wrote the bytes inline, or a put of them as a file, makes that copy young). True only when a copy was removed
   * and none was kept: a blob still readable from one tier was not collected. `options.signal` ends the delete only
   * before it removed anything (`CANCELLED`, both copies kept): once the inline copy went, the file's delete runs
   * without it, so an abort never leaves a blob removed from one tier by this call and not judged in the other.
   */
  async delete(digest: string, given?: DeleteOptions): Promise<boolean> {
    digestHex(digest);
    // Checked as the file tier checks them, before either tier is asked: a bad option is the store's INVALID_ARGUMENT
    // (not the log's), an aborted signal its CANCELLED, nothing removed.
    const options = checkDeleteOptions(given);
    throwIfAborted(options.signal);
    const inlineRemoved = await this.inline.delete(digest as Digest, options);
    const fileRemoved = await this.files.delete(
      digest,
      inlineRemoved && options.signal !== undefined ? { storedBeforeMs: options.storedBeforeMs } : options,
    );
    return (inlineRemoved || fileRemoved) && !(await this.has(digest));
  }

  close(): Promise<void> {
    return this.files.close();
  }
}
