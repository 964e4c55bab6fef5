/**
 * The PostgreSQL blob store (docs/DESIGN.md, "Scale-out"): blobs as rows, so every host sharing the database
 * sees the same content-addressed store. Layout, in the backend's schema:
 *   blobs(id, digest UNIQUE, size, chunk_count, stored_at)
 *   blob_chunks(blob_id, idx, data)   4 MiB pieces, so a large summary streams in and out
 * A blob row commits together with all of its chunks in one transaction: when `put` resolves the blob
 * is durable, and no reader ever sees a blob without its bytes.
 */
import type pg from 'pg';
import {
  formatDigest,
  hashBackendProblem,
  isDigest,
  type Digest,
  type HashBackend,
  type Hasher,
} from '../hash/digest.js';
import {
  refuseOutsideOpen,
  OPENING,
  readOptionFields,
  refuseNonSignal,
  StoreError,
  storageFailure,
  throwIfAborted,
  type NamesEveryField,
} from '../errors.js';
import {
  AbstractBlobStore,
  byteLimitProblem,
  type BlobInfo,
  type BlobStat,
  type DeleteOptions,
  type ReadLimits,
  type WriteLimits,
} from '../blob-store.js';
import { fixedBlocks } from '../blocks.js';
import {
  BEGIN,
  isPgWaitTimeout,
  PG_CONNECT_FIELDS,
  PgDatabase,
  pgOptionsProblem,
  pgTimeoutProblem,
  type PgConnectOptions,
  type PgMigration,
} from './db.js';

const CHUNK = 4 * 1024 * 1024;
const LIST_PAGE = 1000;

export const BLOB_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: 'blobs and chunks',
    sql: `
      CREATE TABLE {schema}.blobs (
        id bigserial PRIMARY KEY,
        digest text COLLATE "C" NOT NULL UNIQUE CHECK (digest ~ '^blake3:[0-9a-f]{64}$'),
        size bigint NOT NULL CHECK (size >= 0),
        chunk_count integer NOT NULL CHECK (chunk_count >= 0),
        stored_at timestamptz NOT NULL DEFAULT clock_timestamp());
      -- Deferred: chunks are written while the bytes stream in, before the digest (the blob row) is known.
      CREATE TABLE {schema}.blob_chunks (
        blob_id bigint NOT NULL REFERENCES {schema}.blobs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
        idx integer NOT NULL CHECK (idx >= 0),
        data bytea NOT NULL,
        PRIMARY KEY (blob_id, idx));
      -- Stored uncompressed: pglz would cost more CPU per byte than the hash, and summaries are small.
      ALTER TABLE {schema}.blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;`,
  },
];

export interface PgBlobStoreOptions extends PgConnectOptions {
  /** BLAKE3 backend used to hash while writing and re-hash while reading. */
  hash: HashBackend;
  /** Upper bound for any single blob, in bytes (default 1 GiB). */
  maxBlobBytes?: number | undefined;
  /**
   * Ends the open: once it aborts, `PgBlobStore.open` rejects `CANCELLED` (the signal's reason as the cause) with the
   * pool it made ended. It ends the wait for a free connection and the migrations (the wait for the migration lock
   * another opener holds too), rolled back whole. The store keeps none. `openLedger` passes its own `signal`. Not an
   * AbortSignal: `INVALID_ARGUMENT`.
   */
  signal?: AbortSignal | undefined;
}

/** Every field of PgBlobStoreOptions: `PgBlobStore.open` reads these once and refuses any other name. */
const PG_BLOB_STORE_FIELDS = [...PG_CONNECT_FIELDS, 'hash', 'maxBlobBytes', 'signal'] as const satisfies ReadonlyArray<
  keyof PgBlobStoreOptions
>;
const everyPgBlobStoreField: NamesEveryField<PgBlobStoreOptions, typeof PG_BLOB_STORE_FIELDS> = true;
void everyPgBlobStoreField;

/** The store's error for a failed step; a timeout of the pool's settings (pgTimeoutProblem) says which one. */
function storageFailed(step: string, err: unknown): Error {
  const timeout = pgTimeoutProblem(err);
  // A lock wait past lock_timeout, or a statement past statement_timeout, is LOCKED, as the log's (retryable: nothing
  // was written); an idle transaction ended by the server, STORAGE_FAILED.
  if (timeout)
    return new StoreError(
      isPgWaitTimeout(err) ? 'LOCKED' : 'STORAGE_FAILED',
      `postgres blob store: ${step}: ${timeout}`,
      {
        cause: err,
      },
    );
  return storageFailure(StoreError, `postgres blob store: ${step}`, err);
}

export class PgBlobStore extends AbstractBlobStore {
  private readonly db: PgDatabase;
  private readonly hash: HashBackend;

  private constructor(token: typeof OPENING, db: PgDatabase, options: PgBlobStoreOptions) {
    refuseOutsideOpen(token, StoreError, 'PgBlobStore', 'PgBlobStore.open(options)');
    super(options);
    this.db = db;
    this.hash = options.hash;
  }

  /**
   * Connects and brings the schema up to date (idempotent; safe when many processes open at once).
   * @throws StoreError `INVALID_ARGUMENT` for unusable connection options (`pgOptionsProblem`) or an option of a name
   *   it does not know (or one that throws as it is read), or a `signal` that is no AbortSignal, before anything
   *   connects; `CANCELLED` once `signal` aborts (the pool it made ended); `FORMAT_UNSUPPORTED` when the schema's
   *   blob tables were migrated by a newer handoff-ledger (a version this one does not know) or hold a known version
   *   under another name (`PgDatabase.migrate`: nothing migrated, the pool it made ended); `STORAGE_FAILED` when the
   *   database cannot be reached or migrated.
   */
  static async open(given: PgBlobStoreOptions): Promise<PgBlobStore> {
    // Each field read once; a misspelt one (`maxblobBytes`: the default bound) is refused before anything connects.
    const { signal, ...options } = readOptionFields(
      given,
      PG_BLOB_STORE_FIELDS,
      'PgBlobStore.open options',
      StoreError,
    ) as PgBlobStoreOptions;
    // Every option is checked before anything connects: a bad one leaves no pool open and no schema made.
    const problem =
      pgOptionsProblem(options) ??
      byteLimitProblem(options.maxBlobBytes, 'maxBlobBytes') ??
      hashBackendProblem(options.hash);
    if (problem) throw new StoreError('INVALID_ARGUMENT', `postgres blob store: ${problem}`);
    refuseNonSignal(signal, StoreError, 'postgres blob store: ');
    throwIfAborted(signal);
    const db = new PgDatabase(options);
    try {
      await db.migrate('blobs', BLOB_MIGRATIONS, StoreError, signal);
      throwIfAborted(signal);
    } catch (err) {
      await db.close().catch(() => {});
      if (signal?.aborted) throwIfAborted(signal);
      throw storageFailed('open', err);
    }
    return new PgBlobStore(OPENING, db, options);
  }

  protected async _put(source: Uint8Array | AsyncIterable<Uint8Array>, { signal }: WriteLimits): Promise<BlobInfo> {
    // An upload holds its connection as long as its source takes: at most maxConnections − 2 of them at once.
    let release: () => void;
    try {
      release = await this.db.uploadSlot(signal);
    } catch (err) {
      throwIfAborted(signal);
      throw storageFailed('put', err);
    }
    try {
      // Exempt from the idle-in-transaction bound while the source is read: a slow source leaves the transaction
      // idle between chunks, and the upload holds no lock another writer waits on until its row is placed (`write`
      // bounds it again from there).
      return await this.db.transaction(
        (client) => this.write(client, source, signal),
        `${BEGIN}; SET LOCAL idle_in_transaction_session_timeout = 0`,
        signal, // its wait for a free connection too ends at the abort
      );
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throwIfAborted(signal);
      throw storageFailed('put', err);
    } finally {
      release();
    }
  }

  private async write(
    client: pg.PoolClient,
    source: Uint8Array | AsyncIterable<Uint8Array>,
    signal?: AbortSignal,
  ): Promise<BlobInfo> {
    const { rows } = await client.query<{ id: string }>(
      this.db.sql(`SELECT nextval(pg_get_serial_sequence('{schema}.blobs', 'id'))::text AS id`),
    );
    const blobId = rows[0]!.id;
    const hasher = await this.hash.create();
    const insertChunk = this.db.sql('INSERT INTO {schema}.blob_chunks (blob_id, idx, data) VALUES ($1, $2, $3)');
    let size = 0;
    let idx = 0;
    // Two row buffers: a row's insert has completed before the pull that refills its buffer.
    const rowBuffers = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
    for await (const row of fixedBlocks(source, rowBuffers)) {
      size += row.length;
      throwIfAborted(signal);
      // Hash while the row travels to the server: one pass over the bytes, hashing overlapped with I/O.
      const inserted = client.query(insertChunk, [blobId, idx++, row]);
      try {
        hasher.update(row);
      } finally {
        await inserted;
      }
    }
    const digest = formatDigest(hasher.digest());
    throwIfAborted(signal);
    // The source is consumed: from here on the transaction locks the blob's row (another host's put of the same
    // summary and gc's delete wait on it), so it is bounded again like every other (the pool's setting).
    await client.query('SET LOCAL idle_in_transaction_session_timeout TO DEFAULT');
    await this.placeBlob(client, blobId, digest, size, idx);
    // Last check before COMMIT: cancelled here means nothing was stored.
    throwIfAborted(signal);
    return { digest, size };
  }

  /**
   * Inserts the blob row; a concurrent or earlier writer of the same digest waits on the unique index.
   * An existing row is kept when its bytes verify (the chunks just written are dropped again)
   * and replaced when they do not, so a put repairs a corrupt blob the way the filesystem store does.
   */
  private async placeBlob(
    client: pg.PoolClient,
    blobId: string,
    digest: Digest,
    size: number,
    chunks: number,
  ): Promise<void> {
    // Inserts our row, or locks and refreshes the existing one in the same statement: a gc delete that comes
    // later waits for this transaction and then sees the new stored_at; one that came first made room for ours.
    const upsert = this.db.sql(`INSERT INTO {schema}.blobs (id, digest, size, chunk_count) VALUES ($1, $2, $3, $4)
      ON CONFLICT (digest) DO UPDATE SET stored_at = clock_timestamp() RETURNING id::text AS id`);
    const placed = await client.query<{ id: string }>(upsert, [blobId, digest, size, chunks]);
    if (placed.rows[0]!.id === blobId) return;
    try {
      // Held to this put's own size, as the filesystem store holds an existing file: a row whose size was changed
      // (to 8 GiB, say) is a damaged copy to replace, not a buffer to allocate.
      await this.readVerified(client, digest, size);
      await client.query(this.db.sql('DELETE FROM {schema}.blob_chunks WHERE blob_id = $1'), [blobId]);
      return;
    } catch (err) {
      if (!(err instanceof StoreError && (err.code === 'BLOB_INTEGRITY' || err.code === 'BLOB_TOO_LARGE'))) throw err;
    }
    // The row is ours (locked above): replace it and its chunks with what this put wrote.
    await client.query(this.db.sql('DELETE FROM {schema}.blobs WHERE digest = $1'), [digest]);
    await client.query(
      this.db.sql('INSERT INTO {schema}.blobs (id, digest, size, chunk_count) VALUES ($1, $2, $3, $4)'),
      [blobId, digest, size, chunks],
    );
  }

  protected async _get(digest: Digest, { limit, signal }: ReadLimits): Promise<Uint8Array> {
    try {
      // One snapshot for the row and all its chunks: a concurrent delete cannot tear a read. Exempt from the idle
      // bound like an upload: it sits idle while it hashes a chunk (longer on a loaded machine), and a read-only
      // snapshot holds no lock a writer waits on. The signal ends its wait for a free connection (every one busy: up to
      // the pool's wait) and the statement it runs, as an upload's.
      return await this.db.transaction(
        (client) => this.readVerified(client, digest, limit, signal),
        'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL idle_in_transaction_session_timeout = 0',
        signal,
      );
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throwIfAborted(signal);
      throw storageFailed('get', err);
    }
  }

  /** One chunk, the whole blob, once `get` has verified it (rows are fetched and hashed the same way). */
  protected async *_chunks(digest: Digest, limits: ReadLimits): AsyncIterable<Uint8Array> {
    yield await this._get(digest, limits);
  }

  /** Reads every chunk while hashing the previous one; refuses on any mismatch of size, order or digest. */
  private async readVerified(
    client: pg.PoolClient,
    digest: string,
    limit: number,
    signal?: AbortSignal,
  ): Promise<Buffer> {
    const { rows } = await client.query<{ id: string; size: string; chunk_count: number }>(
      this.db.sql('SELECT id::text, size::text, chunk_count FROM {schema}.blobs WHERE digest = $1'),
      [digest],
    );
    const row = rows[0];
    if (!row) throw new StoreError('BLOB_NOT_FOUND', `blob ${digest} is not stored`);
    const size = Number(row.size);
    // A size column set to what no blob can be (negative, past 2^53) is damage, not an allocation to attempt.
    if (!Number.isSafeInteger(size) || size < 0 || !Number.isSafeInteger(row.chunk_count) || row.chunk_count < 0)
      throw new StoreError('BLOB_INTEGRITY', `blob ${digest}: its stored size or chunk count is not a count`);
    if (size > limit)
      throw new StoreError('BLOB_TOO_LARGE', `blob ${digest} is ${size} bytes, over the limit of ${limit}`);
    const out = Buffer.allocUnsafe(size);
    const hasher: Hasher = await this.hash.create();
    const text = this.db.sql('SELECT data FROM {schema}.blob_chunks WHERE blob_id = $1 AND idx = $2');
    const fetchChunk = (idx: number) => client.query<{ data: Buffer }>(text, [row.id, idx]);
    let off = 0;
    let pending = row.chunk_count > 0 ? fetchChunk(0) : undefined;
    for (let idx = 0; pending; idx++) {
      const data = (await pending).rows[0]?.data;
      throwIfAborted(signal);
      pending = idx + 1 < row.chunk_count ? fetchChunk(idx + 1) : undefined;
      if (!data || off + data.length > size) {
        await pending?.catch(() => {});
        throw new StoreError('BLOB_INTEGRITY', `blob ${digest}: chunk ${idx} is missing or overruns the stored size`);
      }
      data.copy(out, off);
      off += data.length;
      hasher.update(data);
    }
    if (off !== size)
      throw new StoreError('BLOB_INTEGRITY', `blob ${digest}: chunks hold ${off} bytes, the row says ${size}`);
    if (formatDigest(hasher.digest()) !== digest) {
      throw new StoreError('BLOB_INTEGRITY', `blob ${digest}: stored bytes do not match their digest`);
    }
    return out;
  }

  protected async _stat(digest: Digest): Promise<BlobStat | undefined> {
    try {
      const { rows } = await this.db.query<{ size: string; ms: number }>(
        this.db.sql(
          'SELECT size::text, (extract(epoch FROM stored_at) * 1000)::float8 AS ms FROM {schema}.blobs WHERE digest = $1',
        ),
        [digest],
      );
      const row = rows[0];
      return row ? { digest, size: Number(row.size), storedAtMs: row.ms } : undefined;
    } catch (err) {
      throw storageFailed('stat', err);
    }
  }

  protected async *_list(): AsyncIterable<Digest> {
    // Keyset pages: memory stays bounded however many blobs there are.
    let after = '';
    for (;;) {
      let rows: Array<{ digest: string }>;
      try {
        ({ rows } = await this.db.query<{ digest: string }>(
          this.db.sql('SELECT digest FROM {schema}.blobs WHERE digest > $1 ORDER BY digest LIMIT $2'),
          [after, LIST_PAGE],
        ));
      } catch (err) {
        throw storageFailed('list', err);
      }
      for (const { digest } of rows) if (isDigest(digest)) yield digest;
      if (rows.length < LIST_PAGE) return;
      after = rows[rows.length - 1]!.digest;
    }
  }

  /** The server's clock, which `stored_at` is recorded by (BlobStore.clock): gc's grace is measured on it. */
  async clock(): Promise<number> {
    try {
      const { rows } = await this.db.query<{ ms: number }>(
        'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
      );
      return rows[0]!.ms;
    } catch (err) {
      throw storageFailed('clock', err);
    }
  }

  protected async _delete(digest: Digest, { storedBeforeMs, signal }: DeleteOptions): Promise<boolean> {
    try {
      // One statement: a put that refreshed stored_at first (its row lock orders the two) keeps the blob. An abort
      // while it waits for that lock (a put's transaction that hangs) cancels it and rolls back: nothing removed.
      const { rowCount } =
        storedBeforeMs === undefined
          ? await this.db.write(this.db.sql('DELETE FROM {schema}.blobs WHERE digest = $1'), [digest], signal)
          : await this.db.write(
              this.db.sql(
                'DELETE FROM {schema}.blobs WHERE digest = $1 AND stored_at < to_timestamp($2::float8 / 1000)',
              ),
              [digest, storedBeforeMs],
              signal,
            );
      return (rowCount ?? 0) > 0;
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throwIfAborted(signal);
      throw storageFailed('delete', err);
    }
  }

  protected async _close(): Promise<void> {
    await this.db.close();
  }
}
