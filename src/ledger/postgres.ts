/**
 * The public entry to the PostgreSQL backend. The PostgreSQL client is loaded on the first call, so importing
 * handoff-ledger (an embedded store) never loads it; pg-backend.ts does the work.
 */
import type { BlobStore } from '../../store/blob-store.js';
import type { HashBackend } from '../../store/hash/digest.js';
import type { HashBackendName } from '../../store/hash/backends.node.js';
import type { ManifestLog } from '../../manifests/log/log.js';

export interface PostgresBackendOptions {
  /** `postgresql://user:password@host:5432/db` (a Unix socket: `postgresql://user@/db?host=/run/postgresql`). */
  connectionString: string;
  /** BLAKE3 backend, or its name (default `auto`). */
  hash?: HashBackend | HashBackendName | undefined;
  /** Upper bound for any single blob, in bytes (default 1 GiB). */
  maxBlobBytes?: number | undefined;
  /** PostgreSQL schema for every table (default `handoff_ledger`); one schema is one store. */
  schema?: string | undefined;
  /**
   * Connections in the shared pool (default 10). Blob uploads hold at most `maxConnections − 2` of them at once (at
   * least one), so reads and appends always find one; an operation waits up to 60 s for a free one.
   */
  maxConnections?: number | undefined;
  /**
   * Longest wait for a lock another connection holds, in ms (default 30 000; 0: the server's setting). An append
   * waits for the previous one to commit: past this bound (its writer stalled) it fails `LOCKED`, writing nothing.
   */
  lockTimeoutMs?: number | undefined;
  /**
   * Longest a transaction may sit idle before the server ends it and releases its locks, in ms (default 60 000;
   * 0: the server's setting): a process paused inside an append holds up the others this long at most. Blob
   * uploads and reads are exempt.
   */
  idleInTransactionTimeoutMs?: number | undefined;
}

/**
 * Connects, migrates the schema (idempotent, safe under concurrent openers) and returns both backends.
 * Closing both ends the shared pool.
 * @throws LedgerError `INVALID_ARGUMENT` for unusable options (an empty connection string, a schema that is not a
 *   lowercase identifier); StoreError / ManifestError `STORAGE_FAILED` when the database cannot be reached or migrated.
 */
export async function openPostgresBackends(
  options: PostgresBackendOptions,
): Promise<{ blobs: BlobStore; log: ManifestLog }> {
  return (await import('./pg-backend.js')).openPostgresBackends(options);
}
