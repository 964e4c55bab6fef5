/**
 * The public entry to the PostgreSQL backend. The PostgreSQL client is loaded on the first call, so importing
 * handoff-ledger (an embedded store) never loads it; pg-backend.ts does the work.
 */
import type { BlobStore } from '../../store/blob-store.js';
import type { HashBackend } from '../../store/hash/digest.js';
import type { HashBackendName } from '../../store/hash/backends.node.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { readOptionFields } from '../../store/errors.js';
import { checkSignal, isHandoffLedgerError, LedgerError } from '../errors.js';

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
  /**
   * Send the store's statements as named prepared statements, parsed and planned once per connection (default true:
   * about 40% less server CPU a publish). `false` behind a pooler that does not keep a connection's prepared
   * statements (PgBouncer in transaction mode before 1.21): each statement is then sent as text.
   */
  preparedStatements?: boolean | undefined;
}

/** What `openPostgresBackends` takes besides the connection options. */
export interface OpenPostgresBackendsOptions {
  /**
   * Ends the open once it aborts: `CANCELLED` (LedgerError, the signal's reason as its cause), answered once the pool
   * the open made is ended — its migrations and the log's backfills rolled back (a wait for another opener's migration
   * lock, or for a lock a stalled writer holds, included), a connection it is still making (a server that accepts and
   * never answers) closed at the abort, not at its 10 s connect timeout. An aborted signal connects nothing (options
   * it cannot use are `INVALID_ARGUMENT` all the same). Only the open's: the backends do not keep it (their operations
   * take signals of their own). Not an AbortSignal: `INVALID_ARGUMENT`.
   */
  signal?: AbortSignal | undefined;
}

/**
 * Connects, migrates the schema (idempotent, safe under concurrent openers) and returns both backends.
 * Closing both ends the shared pool.
 * @throws LedgerError `INVALID_ARGUMENT` for unusable options (an empty connection string, a schema that is not a
 *   lowercase identifier, a hash that is neither a backend nor its name; `open` that is not an object, a field of it of another name, a `signal` that is no
 *   AbortSignal), before anything connects; `CANCELLED` once `open.signal` aborts, the pool ended; StoreError /
 *   ManifestError `FORMAT_UNSUPPORTED` when the schema was migrated by a newer handoff-ledger (upgrade it) or holds a
 *   known version under another name, nothing migrated and the pool ended; StoreError / ManifestError
 *   `STORAGE_FAILED` when the database cannot be reached or migrated.
 */
export async function openPostgresBackends(
  options: PostgresBackendOptions,
  open?: OpenPostgresBackendsOptions,
): Promise<{ blobs: BlobStore; log: ManifestLog }> {
  // Read once (a getter that throws: INVALID_ARGUMENT), `null` as none.
  const { signal } = readOptionFields(open, ['signal'], 'openPostgresBackends options', LedgerError) as {
    signal?: AbortSignal;
  };
  // An AbortSignal, as the stores it opens take (checkSignal): anything else is this call's INVALID_ARGUMENT. Aborted
  // already: CANCELLED once the options are found usable (openLedger's order), nothing connected.
  checkSignal(signal);
  try {
    return await (await import('./pg-backend.js')).openPostgresBackends(options, signal);
  } catch (err) {
    // The step the abort ended says CANCELLED as its layer's error (StoreError, ManifestError): the open's is a
    // LedgerError, the signal's reason its cause, as openLedger's. The pool was ended before it answered.
    if (signal?.aborted && isHandoffLedgerError(err) && err.code === 'CANCELLED')
      throw new LedgerError('CANCELLED', 'openPostgresBackends cancelled', { cause: signal.reason });
    throw err;
  }
}
