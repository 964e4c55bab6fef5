/**
 * The content-addressed blob store contract. Every backend (filesystem, PostgreSQL) implements it
 * and runs the same conformance suite (test/conformance/blob-store.ts).
 */
import type { Digest } from './hash/digest.js';

export interface BlobInfo {
  digest: Digest;
  size: number;
}

export interface BlobStat extends BlobInfo {
  /** When the blob was first stored (ms since epoch); used by garbage collection's grace period. */
  storedAtMs: number;
}

export interface PutOptions {
  signal?: AbortSignal;
  /** Refuse (`BLOB_TOO_LARGE`) as soon as more than this many bytes arrive. */
  maxBytes?: number;
}

export interface GetOptions {
  signal?: AbortSignal;
  /** Refuse (`BLOB_TOO_LARGE`) a stored blob larger than this, before reading it. */
  maxBytes?: number;
}

/**
 * Bytes to store: a buffer, or a stream of chunks whose total size is not known in advance. A store is
 * done with a chunk when it pulls the next one, so a source may reuse one buffer for all its chunks.
 */
export type BlobSource = Uint8Array | AsyncIterable<Uint8Array>;

export interface BlobStore {
  /**
   * Stores bytes durably under their BLAKE3 digest and returns it. When `put` resolves the blob
   * is durable (fsynced file and directory, or committed transaction). Idempotent.
   * @throws StoreError `BLOB_TOO_LARGE`, `CANCELLED`, `STORAGE_FAILED`
   */
  put(source: BlobSource, options?: PutOptions): Promise<BlobInfo>;
  /**
   * Returns the bytes of a blob after re-hashing them; never returns bytes that do not match.
   * @throws StoreError `INVALID_DIGEST`, `BLOB_NOT_FOUND`, `BLOB_INTEGRITY`, `BLOB_TOO_LARGE`, `STORAGE_FAILED`
   */
  get(digest: string, options?: GetOptions): Promise<Uint8Array>;
  /**
   * The bytes of a blob as a stream of chunks, in order, while they are re-hashed: for consumers that
   * work as bytes arrive (each chunk is valid until the next is pulled). The digest and size are checked
   * after the last chunk; on a mismatch the iteration throws `BLOB_INTEGRITY` instead of finishing, so
   * a consumer must not act on what it read until the iteration has completed.
   * @throws StoreError as `get`
   */
  chunks(digest: string, options?: GetOptions): AsyncIterable<Uint8Array>;
  /** True when a blob with this digest is stored (its content is not checked). */
  has(digest: string): Promise<boolean>;
  /** Size and storage time (the last `put` of these bytes), or `undefined` when absent. */
  stat(digest: string): Promise<BlobStat | undefined>;
  /** Every stored digest, in no particular order. */
  list(): AsyncIterable<Digest>;
  /**
   * Removes a blob (garbage collection only). Absent blobs are not an error. With `storedBeforeMs`, removes it
   * only when its storage time is still before that instant (a `put` of the same bytes refreshes the storage
   * time): resolves `true` when removed, `false` when kept or absent.
   */
  delete(digest: string, options?: { storedBeforeMs?: number }): Promise<boolean>;
  close(): Promise<void>;
}
