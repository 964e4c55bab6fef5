/**
 * The PostgreSQL backend as one pair: a blob store and a manifest log over one connection pool, for
 * `openLedger({ postgres: { connectionString } })` and for hosts that inject backends themselves.
 * Each host still signs with its own key; the database only stores what they sign.
 */
import type { HashBackend } from '../../store/hash/digest.js';
import type { BlobStore } from '../../store/blob-store.js';
import { loadHashBackend, type HashBackendName } from '../../store/hash/backends.node.js';
import { PgBlobStore } from '../../store/pg/blob-store.js';
import { createPgPool } from '../../store/pg/db.js';
import { PgManifestLog } from '../../manifests/log/pg/log.js';
import type { ManifestLog } from '../../manifests/log/log.js';

export interface PostgresBackendOptions {
  /** `postgresql://user:password@host:5432/db` (a Unix socket: `postgresql://user@/db?host=/run/postgresql`). */
  connectionString: string;
  /** BLAKE3 backend, or its name (default `auto`). */
  hash?: HashBackend | HashBackendName;
  /** Upper bound for any single blob, in bytes (default 1 GiB). */
  maxBlobBytes?: number;
  /** PostgreSQL schema for every table (default `handoff_ledger`); one schema is one store. */
  schema?: string;
  /** Connections in the shared pool (default 10). */
  maxConnections?: number;
}

/**
 * Connects, migrates the schema (idempotent, safe under concurrent openers) and returns both backends.
 * Closing both ends the shared pool.
 * @throws StoreError / ManifestError `STORAGE_FAILED` when the database cannot be reached or migrated.
 */
export async function openPostgresBackends(
  options: PostgresBackendOptions,
): Promise<{ blobs: BlobStore; log: ManifestLog }> {
  const hash = typeof options.hash === 'object' ? options.hash : await loadHashBackend(options.hash ?? 'auto');
  const pool = createPgPool(options);
  let open = 2;
  const release = async () => {
    if (--open === 0) await pool.end();
  };
  try {
    const conn = { pool, schema: options.schema };
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
