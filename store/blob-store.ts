/**
 * The content-addressed blob store contract, and the abstract base every backend (filesystem,
 * PostgreSQL) extends: it checks arguments once, then calls the backend's `_method`. Every backend runs
 * the same conformance suite (test/conformance/blob-store.ts).
 */
import { digestHex, type Digest } from './hash/digest.js';
import {
  isUint8Array,
  readOptionFields,
  refuseNonSignal,
  shownBytes,
  shownValue,
  StoreError,
  throwIfAborted,
} from './errors.js';

export interface BlobInfo {
  digest: Digest;
  size: number;
}

export interface BlobStat extends BlobInfo {
  /** When the blob was first stored (ms since epoch); used by garbage collection's grace period. */
  storedAtMs: number;
}

export interface PutOptions {
  signal?: AbortSignal | undefined;
  /** Refuse (`BLOB_TOO_LARGE`) as soon as more than this many bytes arrive. */
  maxBytes?: number | undefined;
}

export interface GetOptions {
  signal?: AbortSignal | undefined;
  /** Refuse (`BLOB_TOO_LARGE`) a stored blob larger than this, before reading it. */
  maxBytes?: number | undefined;
}

/**
 * Bytes to store: a buffer, or a stream of chunks whose total size is not known in advance. A store is
 * done with a chunk when it pulls the next one, so a source may reuse one buffer for all its chunks.
 */
export type BlobSource = Uint8Array | AsyncIterable<Uint8Array>;

export interface BlobStore {
  /**
   * Stores bytes durably under their BLAKE3 digest and returns it. When `put` resolves the blob
   * is durable (fsynced file and directory, or committed transaction). Idempotent. A `Uint8Array` given whole must not
   * change until `put` resolves: it is written and hashed as it is, not copied first (the ledger hands over a buffer of
   * its own), and bytes changed in between can be stored under a digest they do not have (a read then refuses them,
   * `BLOB_INTEGRITY`).
   * @throws StoreError `BLOB_TOO_LARGE`, `CANCELLED`, `STORAGE_FAILED`; `INVALID_ARGUMENT` (a source that is
   *   not bytes, a chunk that is not a Uint8Array, a `maxBytes` that is not a non-negative integer); `UNSAFE_ROOT` /
   *   `UNSAFE_PATH` (filesystem: the root, or a directory under it, is no longer the real directory opened: a link or
   *   another directory put at its path); `LOCKED` (PostgreSQL: a wait for the blob's lock, held by a put of the same
   *   bytes or a gc, past `lockTimeoutMs`; nothing was written)
   */
  put(source: BlobSource, options?: PutOptions): Promise<BlobInfo>;
  /**
   * Returns the bytes of a blob after re-hashing them; never returns bytes that do not match.
   * @throws StoreError `INVALID_DIGEST`, `BLOB_NOT_FOUND`, `BLOB_INTEGRITY`, `BLOB_TOO_LARGE`, `CANCELLED`,
   *   `STORAGE_FAILED`, `INVALID_ARGUMENT`; `UNSAFE_ROOT` / `UNSAFE_PATH` (filesystem: as `put`, or a symlink or
   *   other non-file at the blob's path)
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
  /**
   * True when a blob with this digest is stored (its content is not checked).
   * @throws StoreError `INVALID_DIGEST`, `STORAGE_FAILED`; `UNSAFE_ROOT` / `UNSAFE_PATH` (filesystem: as `put`)
   */
  has(digest: string): Promise<boolean>;
  /**
   * Size and storage time (the last `put` of these bytes), or `undefined` when absent.
   * @throws as `has`
   */
  stat(digest: string): Promise<BlobStat | undefined>;
  /** Every stored digest, in no particular order. */
  list(): AsyncIterable<Digest>;
  /**
   * Removes a blob (garbage collection only). Absent blobs are not an error. With `storedBeforeMs`, removes it
   * only when its storage time is still before that instant (a `put` of the same bytes refreshes the storage
   * time): resolves `true` when removed, `false` when kept or absent. An abort of `options.signal` ends the delete only
   * before it removes anything (`CANCELLED`: at the call, or while it waits its turn behind a call on the same blob, a
   * put's or another delete's, which may hang); once the removal began it completes.
   * @throws StoreError `INVALID_DIGEST`, `INVALID_ARGUMENT` (options that are not an object, a `storedBeforeMs` that is
   *   no finite number, a signal that is none), `CANCELLED`, `STORAGE_FAILED`; `UNSAFE_ROOT` / `UNSAFE_PATH`
   *   (filesystem: as `put`); `LOCKED` (PostgreSQL: as `put`)
   */
  delete(digest: string, options?: DeleteOptions): Promise<boolean>;
  /**
   * The time by the clock the store records storage times with (ms since epoch), where that is not this process's
   * (PostgreSQL: the server's): gc measures its grace period against it. Absent: `Date.now()`.
   */
  clock?(): Promise<number>;
  close(): Promise<void>;
}

/** Options of `BlobStore.delete`. */
export interface DeleteOptions {
  /** Remove the blob only if its storage time (ms since epoch) is still before this instant. */
  storedBeforeMs?: number | undefined;
  /**
   * Ends the delete (`CANCELLED`, nothing removed) when it aborts before the removal begins: at the call, or while the
   * delete waits behind another call on the same blob (the filesystem store's per-blob queue, a PostgreSQL row lock).
   */
  signal?: AbortSignal | undefined;
}

/** What a backend's `_put` is given: the effective size limit and the caller's signal, both already checked. */
export interface WriteLimits {
  /** The smaller of the caller's `maxBytes` and the store's `maxBlobBytes`. */
  limit: number;
  signal?: AbortSignal | undefined;
}

/** What a backend's `_get` and `_chunks` are given: the caller's `maxBytes`, else the store's `maxBlobBytes`. */
export interface ReadLimits {
  limit: number;
  signal?: AbortSignal | undefined;
}

const DEFAULT_MAX_BLOB_BYTES = 1024 ** 3;

function invalid(message: string): StoreError {
  return new StoreError('INVALID_ARGUMENT', message);
}

/** What is wrong with a byte limit (`undefined`: nothing; absent is allowed), for stores that check it up front. */
export function byteLimitProblem(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    return `${name} must be a non-negative integer, got ${shownValue(value)}`;
  return undefined;
}

function checkByteLimit(value: unknown, name: string): number | undefined {
  const problem = byteLimitProblem(value, name);
  if (problem) throw invalid(problem);
  return value as number | undefined;
}

/**
 * A read's options (`get`, `chunks`) as every store checks them, each field read once: not an object (`null`
 * included), a field it does not know (a misspelt maxBytes: no bound), a signal that is none, a bound that is no byte
 * count: `INVALID_ARGUMENT`.
 */
export function checkReadOptions(options: unknown): {
  maxBytes?: number | undefined;
  signal?: AbortSignal | undefined;
} {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  // Each field read once; a getter that throws, or a name it does not know (a misspelt maxBytes: no bound), refused.
  const { maxBytes, signal } = readOptionFields(options, ['maxBytes', 'signal'], 'blob options', StoreError);
  refuseNonSignal(signal);
  return { maxBytes: checkByteLimit(maxBytes, 'maxBytes'), signal };
}

/**
 * A delete's options as every store checks them, each field read once: not an object, a field it does not know, a
 * signal that is none, a `storedBeforeMs` that is no finite number: `INVALID_ARGUMENT`.
 */
export function checkDeleteOptions(options: unknown): DeleteOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const { storedBeforeMs, signal } = readOptionFields(
    options,
    ['storedBeforeMs', 'signal'],
    'blob delete options',
    StoreError,
  );
  refuseNonSignal(signal);
  const checked: DeleteOptions = signal === undefined ? {} : { signal };
  if (storedBeforeMs === undefined) return checked;
  if (typeof storedBeforeMs !== 'number' || !Number.isFinite(storedBeforeMs))
    throw invalid(`storedBeforeMs must be a finite number, got ${shownValue(storedBeforeMs)}`);
  return { ...checked, storedBeforeMs };
}

/** An async iterable, or a sync one (`for await` reads both; callers in plain JavaScript pass arrays). */
function isIterable(value: unknown): value is AsyncIterable<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as { [Symbol.asyncIterator]?: unknown; [Symbol.iterator]?: unknown };
  return typeof v[Symbol.asyncIterator] === 'function' || typeof v[Symbol.iterator] === 'function';
}

/**
 * A stream source as the backends see it: every chunk a Uint8Array, the running size within the limit
 * (refused as soon as it passes, not a block later), cancellation checked as each chunk arrives.
 */
async function* metered(source: AsyncIterable<unknown>, limits: WriteLimits): AsyncIterable<Uint8Array> {
  let size = 0;
  for await (const chunk of source) {
    if (!isUint8Array(chunk)) throw invalid(`a blob source must yield Uint8Array chunks, not ${shownBytes(chunk)}`);
    size += chunk.length;
    if (size > limits.limit) throw new StoreError('BLOB_TOO_LARGE', `blob exceeds the limit of ${limits.limit} bytes`);
    throwIfAborted(limits.signal);
    yield chunk;
  }
}

/**
 * The shared front of every backend (in the manner of abstract-level): the public methods check their
 * arguments, the signal and the size limits once, here, then call the backend's `_put`, `_get`, … with
 * values already known good. So both backends refuse the same bad input with the same code.
 */
export abstract class AbstractBlobStore implements BlobStore {
  /** Upper bound for any single blob, in bytes. */
  readonly maxBlobBytes: number;

  protected constructor(options: { maxBlobBytes?: number | undefined }) {
    const max = checkByteLimit(options.maxBlobBytes, 'maxBlobBytes') ?? DEFAULT_MAX_BLOB_BYTES;
    this.maxBlobBytes = max;
  }

  async put(source: BlobSource, options?: PutOptions): Promise<BlobInfo> {
    const { maxBytes, signal } = checkReadOptions(options);
    const limits: WriteLimits = { limit: Math.min(maxBytes ?? Infinity, this.maxBlobBytes), signal };
    throwIfAborted(signal);
    // By its brand: a Uint8Array of another realm (a vm context's, a test sandbox's Buffer) is bytes, stored as one;
    // `instanceof` sent it on as an iterable of numbers, refused as chunks that are no Uint8Array.
    if (isUint8Array(source)) {
      if (source.length > limits.limit)
        throw new StoreError('BLOB_TOO_LARGE', `blob of ${source.length} bytes exceeds the limit of ${limits.limit}`);
      return this._put(source, limits);
    }
    // Another view (a Uint16Array is iterable: of numbers) or a bare buffer is named as what it is, not as its first number.
    if (!isIterable(source) || ArrayBuffer.isView(source))
      throw invalid(`a blob source must be a Uint8Array or an AsyncIterable of them, not ${shownBytes(source)}`);
    return this._put(metered(source, limits), limits);
  }

  async get(digest: string, options?: GetOptions): Promise<Uint8Array> {
    const d = checkDigest(digest);
    const limits = this.readLimits(options);
    return this._get(d, limits);
  }

  async *chunks(digest: string, options?: GetOptions): AsyncIterable<Uint8Array> {
    const d = checkDigest(digest);
    const limits = this.readLimits(options);
    yield* this._chunks(d, limits);
  }

  async has(digest: string): Promise<boolean> {
    return (await this._stat(checkDigest(digest))) !== undefined;
  }

  async stat(digest: string): Promise<BlobStat | undefined> {
    return this._stat(checkDigest(digest));
  }

  list(): AsyncIterable<Digest> {
    return this._list();
  }

  async delete(digest: string, options?: DeleteOptions): Promise<boolean> {
    const d = checkDigest(digest);
    const checked = checkDeleteOptions(options);
    throwIfAborted(checked.signal);
    return this._delete(d, checked);
  }

  close(): Promise<void> {
    return this._close();
  }

  private readLimits(options: GetOptions | undefined): ReadLimits {
    const { maxBytes, signal } = checkReadOptions(options);
    throwIfAborted(signal);
    return { limit: maxBytes ?? this.maxBlobBytes, signal };
  }

  /** Stores `source` (a buffer within the limit, or a metered stream) durably; see `BlobStore.put`. */
  protected abstract _put(source: Uint8Array | AsyncIterable<Uint8Array>, limits: WriteLimits): Promise<BlobInfo>;
  /** The verified bytes of a blob; a stored blob over `limits.limit` is `BLOB_TOO_LARGE` before it is read. */
  protected abstract _get(digest: Digest, limits: ReadLimits): Promise<Uint8Array>;
  protected abstract _chunks(digest: Digest, limits: ReadLimits): AsyncIterable<Uint8Array>;
  protected abstract _stat(digest: Digest): Promise<BlobStat | undefined>;
  protected abstract _list(): AsyncIterable<Digest>;
  /**
   * Removes the blob; with `storedBeforeMs`, only while its storage time is still before it (judged as late as
   * the backend can, so a `put` that refreshed the time keeps the blob). True when a blob was removed. `signal` (not
   * aborted at the call) ends only a wait before the removal: `CANCELLED`, nothing removed.
   */
  protected abstract _delete(digest: Digest, options: DeleteOptions): Promise<boolean>;
  protected abstract _close(): Promise<void>;
}

function checkDigest(digest: unknown): Digest {
  digestHex(digest as string);
  return digest as Digest;
}
