/**
 * The PostgreSQL backend as one pair: a blob store and a manifest log over one connection pool, for
 * `openLedger({ postgres: { connectionString } })` and for hosts that inject backends themselves.
 * Each host still signs with its own key; the database only stores what they sign.
 */
import { byteLimitProblem, type BlobStore } from '../../store/blob-store.js';
import { hashBackendNameProblem, loadHashBackend } from '../../store/hash/backends.node.js';
import { hashBackendProblem } from '../../store/hash/digest.js';
import { BLOB_MIGRATIONS, PgBlobStore } from '../../store/pg/blob-store.js';
import { createPgPool, PgDatabase, pgOptionsProblem } from '../../store/pg/db.js';
import { storageFailure, StoreError, throwIfAborted } from '../../store/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import { MANIFEST_MIGRATIONS } from '../../manifests/log/pg/schema.js';
import { PgManifestLog } from '../../manifests/log/pg/log.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import type { PostgresBackendOptions } from './postgres.js';
import { readPostgresOptions } from './postgres-options.js';
import { LedgerError, throwIfCancelled } from '../errors.js';

/**
 * Connects, migrates the schema (idempotent, safe under concurrent openers) and returns both backends.
 * Closing both ends the shared pool. Reached through postgres.ts, which loads this module (and the client) lazily.
 * @throws LedgerError `INVALID_ARGUMENT` for unusable options (an empty connection string, a schema that is not a
 *   lowercase identifier, a pool size or timeout out of range, a hash that is neither a backend nor its name), before
 *   anything connects; StoreError / ManifestError `FORMAT_UNSUPPORTED` when the schema was migrated by a newer
 *   handoff-ledger or holds a known version under another name (nothing migrated, the pool ended), `STORAGE_FAILED`
 *   when the database cannot be reached or migrated; `CANCELLED` (StoreError / ManifestError) once `signal` aborts, the
 *   pool ended.
 */
export async function openPostgresBackends(
  given: PostgresBackendOptions,
  signal?: AbortSignal,
): Promise<{ blobs: BlobStore; log: ManifestLog }> {
  const options = readPostgresOptions(given);
  refuseUnusableOptions(options);
  // Options it cannot use are that, aborted or not (as openLedger answers); an open aborted already connects nothing.
  throwIfCancelled(signal);
  const hash = typeof options.hash === 'object' ? options.hash : await loadHashBackend(options.hash ?? 'auto');
  const pool = createPgPool(options);
  let open = 2;
  const release = async () => {
    if (--open === 0) await pool.end();
  };
  try {
    // `signal` (openLedger's) ends each store's migrations and the log's backfills: rolled back, the pool ended below.
    const conn = { pool, schema: options.schema, preparedStatements: options.preparedStatements, signal };
    await judgeSchemaVersions(pool, options.schema, signal);
    const blobs = await PgBlobStore.open({ ...conn, hash, maxBlobBytes: options.maxBlobBytes });
    const log = await PgManifestLog.open(conn).catch(async (err: unknown) => {
      await blobs.close();
      throw err;
    });
    return { blobs: closingPool(blobs, release), log: closingPool(log, release) };
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}

/**
 * Both components' recorded versions judged before either store migrates its own (each in a transaction of its own,
 * the blob store's first): a schema the log refuses (a newer handoff-ledger's, or a known version under another name)
 * leaves the blob store's tables unmade too, where the blob store's migration had committed before the log's refusal.
 * @throws StoreError / ManifestError `FORMAT_UNSUPPORTED` (the component's layer, as its open would throw it);
 *   StoreError `CANCELLED` once `signal` aborts, `STORAGE_FAILED` when the versions cannot be read (as the blob store's
 *   open would fail, first to connect)
 */
async function judgeSchemaVersions(
  pool: ReturnType<typeof createPgPool>,
  schema: string | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const db = new PgDatabase({ pool, schema });
  try {
    await db.judgeVersions(
      [
        { component: 'blobs', migrations: BLOB_MIGRATIONS, Unsupported: StoreError },
        { component: 'manifests', migrations: MANIFEST_MIGRATIONS, Unsupported: ManifestError },
      ],
      signal,
    );
  } catch (err) {
    if (signal?.aborted) throwIfAborted(signal);
    throw storageFailure(StoreError, 'postgres store: reading its schema versions', err);
  } finally {
    await db.close();
  }
}

/** @throws LedgerError `INVALID_ARGUMENT` for options `openPostgresBackends` cannot use, before anything connects */
export function refuseUnusableOptions(options: PostgresBackendOptions): void {
  if (typeof options !== 'object' || options === null)
    throw new LedgerError('INVALID_ARGUMENT', 'postgres options must be an object with a connectionString');
  const problem =
    pgOptionsProblem({ ...options, pool: undefined }) ??
    byteLimitProblem(options.maxBlobBytes, 'maxBlobBytes') ??
    hashProblem(options.hash);
  if (problem) throw new LedgerError('INVALID_ARGUMENT', problem);
}

/**
 * The origin the log of the store `options` open records, read on a connection of its own without making the schema
 * (PgManifestLog.storedOrigin): none for a schema not made yet or a log not named yet. The schema's versions are
 * judged first, as `openPostgresBackends` judges them: a schema a newer handoff-ledger migrated (whose log table may
 * be laid out otherwise) is refused FORMAT_UNSUPPORTED before anything else is read from it, not judged by the origin
 * it seems to hold. `signal` (openLedger's) ends the look: its statement cancelled (a wait for a lock included), its
 * connection ended.
 * @throws as `openPostgresBackends` (unusable options, a database that cannot be reached, `FORMAT_UNSUPPORTED` of the
 *   component's layer; `CANCELLED` once `signal` aborts, nothing left connected)
 */
export async function storedPostgresOrigin(
  options: PostgresBackendOptions,
  signal?: AbortSignal,
): Promise<string | undefined> {
  refuseUnusableOptions(options);
  throwIfCancelled(signal);
  const pool = createPgPool({ ...options, maxConnections: 1 });
  try {
    await judgeSchemaVersions(pool, options.schema, signal);
    return await PgManifestLog.storedOrigin({
      pool,
      schema: options.schema,
      preparedStatements: options.preparedStatements,
      signal,
    });
  } finally {
    await pool.end().catch(() => {});
  }
}

/**
 * What is wrong with `hash`: none given or a backend's name (`hashBackendNameProblem`), else a backend as the blob store
 * takes one (`hashBackendProblem`, which PgBlobStore.open asks too, but only once this pool is made). Anything else
 * (`null`, `{}`) was taken as a backend and failed the first put or read (STORAGE_FAILED, a TypeError its cause); an
 * unknown name was the hash loader's StoreError.
 */
function hashProblem(hash: unknown): string | undefined {
  return hash === undefined || typeof hash === 'string' ? hashBackendNameProblem(hash) : hashBackendProblem(hash);
}

/** Makes `close()` also release the shared pool, once. */
function closingPool<T extends { close(): Promise<void> }>(backend: T, release: () => Promise<void>): T {
  let closed = false;
  const close = backend.close.bind(backend);
  backend.close = async () => {
    if (closed) return;
    closed = true;
    await close();
    await release();
  };
  return backend;
}
