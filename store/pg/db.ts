/**
 * The PostgreSQL plumbing shared by the Postgres blob store and the Postgres manifest log: one pool,
 * transactions that never leak a broken connection back into it, and versioned migrations run under
 * an advisory lock. Layer-neutral: it throws driver errors as they are and each layer maps them to its
 * own error class; a schema this code does not know is refused with the class the layer gives `migrate`.
 */
import { createHash, randomUUID } from 'node:crypto';
import pg from 'pg';
import { onAbort } from '../abort.js';
import { isHandoffLedgerError, shownValue, throwIfAborted, type ErrorClass, type NamesEveryField } from '../errors.js';

/** Default `lockTimeoutMs`: how long a statement waits for a lock another connection holds. */
export const DEFAULT_LOCK_TIMEOUT_MS = 30_000;
/** Default `idleInTransactionTimeoutMs`: how long the server lets a transaction sit idle before ending it. */
export const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;
/**
 * `BEGIN` for a transaction that waits for its locks without `lock_timeout`: the migrations and backfills at open,
 * which wait for another opener's (a large store's backfill can take minutes), not for a stalled writer.
 */
export const UNBOUNDED_LOCK_WAIT = 'BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = 0';
/**
 * `BEGIN` at the isolation level every read-then-write of the store is written for, whatever the database's or the
 * role's `default_transaction_isolation` says: READ COMMITTED, where a row lock waited for gives the row's newest
 * version and a later statement sees what committed meanwhile. Under REPEATABLE READ or SERIALIZABLE, the loser of a
 * race for a session's head or the counter row failed with a serialization error instead of retrying.
 */
export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';
/**
 * Sent in every transaction's BEGIN round trip: a COMMIT is acknowledged only once it is durable, whatever the
 * database's, role's or server's `synchronous_commit` says. Under `off` the server answers COMMIT before its WAL is
 * flushed: a crash then loses a publish already acknowledged and pinned, and the store refuses to open (the log is
 * behind its pinned checkpoint: ROLLBACK). Raised to `on` for the transaction only, and only from `off`: `local`
 * flushes locally, and `remote_write` / `remote_apply` (synchronous standbys) are left as the operator chose them.
 */
export const DURABLE_COMMIT =
  "SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') = 'off'";

/** How long a new connection may take to be established (a server that does not answer). */
const CONNECT_TIMEOUT_MS = 10_000;
/** The pauses between the cancels of an aborted transaction's statement (`transaction`): 25 ms, doubling, at most 1 s. */
const CANCEL_RETRY_FIRST_MS = 25;
const CANCEL_RETRY_MAX_MS = 1_000;
/**
 * How long an operation waits for a free pooled connection. Longer than a lock wait (`lockTimeoutMs`), which holds
 * a connection meanwhile: operations queued behind appends waiting on a lock get those appends' answer first.
 */
export const POOL_WAIT_MS = 60_000;
const POOL_WAIT_TIMEOUT = 'timeout exceeded when trying to connect';

/**
 * The pool's clients: a connection attempt is bounded by CONNECT_TIMEOUT_MS while the pool's
 * `connectionTimeoutMillis` (which pg-pool also applies to waiting for a free connection) is POOL_WAIT_MS.
 */
class BoundedConnectClient extends pg.Client {
  constructor(config: pg.ClientConfig) {
    super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }
}

/** The pool's settings (PgConnectOptions without the pool itself). */
export interface PgPoolOptions {
  connectionString: string;
  maxConnections?: number;
  lockTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
}

/**
 * Builds a connection pool: the one place a pool is made, for one store or for a blob store and a
 * manifest log sharing it (openPostgresBackends). Every connection bounds its lock waits (`lock_timeout`) and
 * the time a transaction may sit idle (`idle_in_transaction_session_timeout`), so a writer that stalls inside
 * an append (a paused process, a lost host) cannot hold the global counter's lock, and every append, forever;
 * TCP keepalive finds a dead server on an idle connection.
 */
export function createPgPool(options: PgPoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    connectionTimeoutMillis: POOL_WAIT_MS,
    Client: BoundedConnectClient as unknown as new () => pg.ClientBase,
    // 0 is not sent: the server's own setting applies.
    lock_timeout: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // An idle connection dropped by the server (restart, failover) is removed by the pool; without a
  // listener the 'error' event would crash the process. The next operation reconnects.
  pool.on('error', () => {});
  return pool;
}

/**
 * An application's own `pg` pool: a `new pg.Pool(…)` of the application's `pg` 8.x, typed by its own `@types/pg`, so
 * it need not be the very `pg` this package installs. The type names what every 8.x declares; at open the pool must
 * also carry pg-pool's `options` and `Client` (connections of their own for fsck's snapshot and for cancelling a
 * statement are made with them): anything else is refused `INVALID_ARGUMENT`, never connected elsewhere.
 */
export interface PgPoolLike {
  connect(): Promise<unknown>;
  query(text: string, values?: unknown[]): Promise<unknown>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface PgConnectOptions {
  /** `postgresql://user@host:port/db` (a Unix socket: `postgresql://user@/db?host=/run/postgresql`). */
  connectionString?: string | undefined;
  /** An existing `pg.Pool` to use instead; it is not ended by `close()`. */
  pool?: PgPoolLike | undefined;
  /** PostgreSQL schema holding every table (default `handoff_ledger`), so no user table is ever touched. */
  schema?: string | undefined;
  /** Connections in a pool made from `connectionString` (default 10; uploads hold at most 2 fewer, at least 1). */
  maxConnections?: number | undefined;
  /**
   * Longest wait for a lock another connection holds, in ms (default 30 000; 0: the server's setting), for a pool
   * made from `connectionString`: past it the operation fails (`LOCKED` in the log) and nothing is written.
   */
  lockTimeoutMs?: number | undefined;
  /**
   * Longest a transaction may sit idle before the server ends it and releases its locks, in ms (default 60 000;
   * 0: the server's setting), for a pool made from `connectionString`. Blob uploads and reads are exempt (a slow
   * source or a loaded reader holds no lock that others wait on).
   */
  idleInTransactionTimeoutMs?: number | undefined;
  /**
   * Send the store's statements as named prepared statements, each parsed and planned once per connection (default
   * true): about 40% less server CPU a publish. `false` for a pooler between this process and the server that does not
   * keep a connection's prepared statements (PgBouncer in transaction mode before 1.21), or an application pool whose
   * connections are reset with `DISCARD ALL` / `DEALLOCATE ALL`: each statement is then sent as text.
   */
  preparedStatements?: boolean | undefined;
}

/** Every field of PgConnectOptions: the stores' openers read these (and their own) and refuse any other name. */
export const PG_CONNECT_FIELDS = [
  'connectionString',
  'pool',
  'schema',
  'maxConnections',
  'lockTimeoutMs',
  'idleInTransactionTimeoutMs',
  'preparedStatements',
] as const satisfies ReadonlyArray<keyof PgConnectOptions>;
const everyPgConnectField: NamesEveryField<PgConnectOptions, typeof PG_CONNECT_FIELDS> = true;
void everyPgConnectField;

/** One versioned, forward-only schema step. `sql` uses `{schema}` where the quoted schema name goes. */
export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

/** A component of the schema as its opener migrates it: its steps, and its layer's class for a refusal. */
export interface PgMigratedComponent {
  component: string;
  migrations: readonly PgMigration[];
  Unsupported: ErrorClass<'FORMAT_UNSUPPORTED'>;
}

/**
 * Judges the versions the schema records for a component (`applied`: version to name) against the steps this code
 * knows. Not a failure a retry mends: only another version of handoff-ledger opens such a schema (FORMAT_UNSUPPORTED,
 * as an embedded root whose format marker names a newer layout or another format).
 * A row no release of handoff-ledger writes is refused the same way, as a known version under another name is: a
 * version of 0 or below (versions start at 1; the table holds one only if another program or a hand edit wrote it) is
 * named for what it is, an unknown version, not a newer one; upgrading would not open it either.
 * A step not recorded whose tables the schema holds already (`present`: the relations it holds of those the steps make)
 * is refused the same way: its migrations table lost rows (deleted, or the table dropped and made again empty), or
 * another program made a table of that name there. Running the step again would fail on the table it finds
 * (`relation "blobs" already exists`, STORAGE_FAILED), inviting a retry that meets it again.
 * @throws `Unsupported` `FORMAT_UNSUPPORTED` for a version it does not know (a newer library migrated the schema; or,
 *   0 or below, one no release writes), a known version under another name (the stored name quoted escaped), or a step
 *   not recorded whose tables are there already
 */
function judgeApplied(
  { component, migrations, Unsupported }: PgMigratedComponent,
  schema: string,
  applied: ReadonlyMap<number, string>,
  present: ReadonlySet<string>,
): void {
  const known = new Map(migrations.map((m) => [m.version, m.name]));
  const latest = Math.max(0, ...known.keys());
  for (const [version, name] of [...applied].sort(([a], [b]) => a - b)) {
    if (!known.has(version) && version < 1)
      throw new Unsupported(
        'FORMAT_UNSUPPORTED',
        `${component} schema in ${schema} records unknown version ${version}, which no release of handoff-ledger writes (its versions start at v1; this library knows up to v${latest}): another program, or a hand edit, wrote the schema's migrations table; nothing was migrated or changed. Give the schema of a handoff-ledger store, or restore its handoff_ledger_migrations table from a backup`,
      );
    if (!known.has(version))
      throw new Unsupported(
        'FORMAT_UNSUPPORTED',
        `${component} schema v${version} in ${schema} is newer than this library, which knows up to v${latest}: a newer handoff-ledger migrated this database; nothing was migrated or changed. Upgrade handoff-ledger to open it`,
      );
    if (known.get(version) !== name)
      throw new Unsupported(
        'FORMAT_UNSUPPORTED',
        `${component} schema v${version} in ${schema} is ${shownValue(name, 80)}, expected "${known.get(version)}": another program, or a build of handoff-ledger this release does not know, migrated this schema; nothing was migrated or changed. Give the schema of a handoff-ledger store, or open it with the handoff-ledger that made it`,
      );
  }
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (applied.has(m.version)) continue;
    const there = tablesMadeBy(m).filter((t) => present.has(t));
    if (there.length === 0) continue;
    const recorded = [...applied.keys()].sort((a, b) => a - b);
    throw new Unsupported(
      'FORMAT_UNSUPPORTED',
      `${component} schema in ${schema} already holds ${there.join(', ')}, which its step v${m.version} ("${m.name}") makes, but its handoff_ledger_migrations table records ${recorded.length ? `v${recorded.join(', v')} of ${component} and not v${m.version}` : `no version of ${component}`}: the table's rows were deleted or the table dropped, or another program made ${there.length > 1 ? 'tables of those names' : 'a table of that name'} in this schema; nothing was migrated or changed. Restore the schema's handoff_ledger_migrations table from a backup, or give handoff-ledger a schema of its own`,
    );
  }
}

/**
 * The tables a step makes (`CREATE TABLE {schema}.name`), read from its SQL so that the two never disagree: a schema
 * that holds one of them though it records no such step is one whose migrations table lost its rows (`judgeApplied`),
 * where running the step again would fail on the table it finds, a driver error a retry would meet again.
 */
function tablesMadeBy(m: PgMigration): string[] {
  return [...m.sql.matchAll(/\bCREATE TABLE (?:IF NOT EXISTS )?\{schema\}\.([a-z_][a-z0-9_]*)/g)].map((x) => x[1]!);
}

/** The steps of `components` the schema does not record (`applied`, per component), by the tables they make. */
function tablesOfUnrecordedSteps(
  components: readonly PgMigratedComponent[],
  applied: (component: string) => ReadonlyMap<number, string>,
): string[] {
  return components.flatMap(({ component, migrations }) =>
    migrations.filter((m) => !applied(component).has(m.version)).flatMap(tablesMadeBy),
  );
}

/** Of `names`, the relations `schema` (unquoted) holds: a table, or any relation whose name a CREATE TABLE would meet. */
async function presentRelations(client: pg.PoolClient, schema: string, names: readonly string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const { rows } = await client.query<{ relname: string }>(
    `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relname = ANY($2::text[])`,
    [schema, names],
  );
  return new Set(rows.map((r) => r.relname));
}

/** SQLSTATE 42P01 / 3F000: the table, or the schema named with it, is not there. */
const UNDEFINED_TABLE = new Set(['42P01', '3F000']);

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/** A counting semaphore, first come first served. */
class Slots {
  private readonly waiting: Array<() => void> = [];
  constructor(private free: number) {}

  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.free > 0) this.free--;
    else
      await new Promise<void>((resolve, reject) => {
        const grant = () => {
          unsubscribe?.();
          resolve();
        };
        this.waiting.push(grant);
        const unsubscribe =
          signal &&
          onAbort(signal, () => {
            const at = this.waiting.indexOf(grant);
            if (at < 0) return; // granted already: the slot is this caller's, released by its own path
            this.waiting.splice(at, 1);
            reject(signal.reason);
          });
      });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}

/** Per pool (a blob store and a log may share one; so may several stores). */
const uploadSlots = new WeakMap<pg.Pool, Slots>();

/** What the stores use of a pool, checked at run time: a wrapper with only the typed members would connect elsewhere. */
function isPgPool(pool: unknown): boolean {
  if (typeof pool !== 'object' || pool === null) return false;
  const p = pool as Record<string, unknown>;
  return (
    ['connect', 'query', 'on', 'Client'].every((m) => typeof p[m] === 'function') &&
    typeof p.options === 'object' &&
    p.options !== null
  );
}

/** What the driver (pg-connection-string) reads as meant: a URL of its schemes, or a socket directory `/dir [db]`. */
const CONNECTION_STRING_RE = /^(?:(?:postgres|postgresql|socket):|\/)/i;

/**
 * Whether the driver (pg-connection-string `parse`, which node-postgres runs as it connects) reads `text` without
 * throwing: a socket directory path, or what `new URL` takes once spaces and stray `%` are encoded as it encodes them,
 * with its retry for an empty host (`user@/db`). Any throw (a lone surrogate's URIError included) is no.
 */
function parsesAsDriverUrl(text: string): boolean {
  if (text.startsWith('/')) return true;
  try {
    const encoded = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(text) ? encodeURI(text).replace(/%25(\d\d)/g, '%$1') : text;
    try {
      new URL(encoded, 'postgres://base');
    } catch {
      new URL(encoded.replace('@/', '@___DUMMY___/'), 'postgres://base');
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * What is wrong with connection options, before anything connects: a schema name that is not a plain lowercase
 * identifier, no pool and no non-empty connection string (an empty one would make the driver fall back to
 * PG* environment variables and localhost), a connection string that is no postgresql:// URL, a pool that is not a pg.Pool, a bad limit. Each layer reports it with
 * its own `INVALID_ARGUMENT`.
 * @returns the problem, or undefined when the options are usable
 */
export function pgOptionsProblem(options: PgConnectOptions): string | undefined {
  if (options.schema !== undefined && (typeof options.schema !== 'string' || !SCHEMA_RE.test(options.schema)))
    return `schema must be a lowercase identifier matching ${SCHEMA_RE}, got ${shownValue(options.schema)}`;
  if (options.pool === undefined && (typeof options.connectionString !== 'string' || options.connectionString === ''))
    return 'PostgreSQL backend needs a connectionString (a non-empty postgresql:// URL) or a pool';
  // The driver reads anything else as a URL relative to postgres://base: `localhost/db` or a libpq `host=… dbname=…`
  // string would connect to a host named "base" (ENOTFOUND base), `user:pw@host/db` to none. Not echoed: it may hold a
  // password.
  if (options.pool === undefined && !CONNECTION_STRING_RE.test(options.connectionString!))
    return 'the PostgreSQL connection string is not a postgresql:// (or postgres://, socket:) URL nor a socket directory path (/dir db); give e.g. postgresql://user@host:5432/db';
  // One of those schemes the driver's URL parser refuses (`postgresql://[::1/db`, a port over 65535) failed as it
  // connected, STORAGE_FAILED "Invalid URL": a failure a caller retries, after the root was made.
  if (options.pool === undefined && !parsesAsDriverUrl(options.connectionString!))
    return 'the PostgreSQL connection string does not parse as a URL (a bracket, port or character out of place; percent-encode reserved characters of the password); give e.g. postgresql://user@host:5432/db';
  if (options.pool !== undefined && !isPgPool(options.pool))
    return 'pool must be a pg.Pool of node-postgres 8 (its connect, query, on, options and Client are used)';
  const { maxConnections, lockTimeoutMs, idleInTransactionTimeoutMs } = options;
  if (maxConnections !== undefined && !(Number.isSafeInteger(maxConnections) && maxConnections >= 1))
    return `maxConnections must be a positive integer, got ${shownValue(maxConnections)}`;
  for (const [name, ms] of [
    ['lockTimeoutMs', lockTimeoutMs],
    ['idleInTransactionTimeoutMs', idleInTransactionTimeoutMs],
  ] as const)
    if (ms !== undefined && !(Number.isSafeInteger(ms) && ms >= 0 && ms <= 2 ** 31 - 1))
      return `${name} must be an integer number of milliseconds from 0 to 2147483647, got ${shownValue(ms)}`;
  if (options.preparedStatements !== undefined && typeof options.preparedStatements !== 'boolean')
    return `preparedStatements must be true or false, got ${shownValue(options.preparedStatements)}`;
  return undefined;
}

export class PgDatabase {
  readonly pool: pg.Pool;
  /** The schema name, already quoted for SQL text. */
  readonly schema: string;
  private readonly ownsPool: boolean;
  private closed = false;
  /** The single statements `sql` filled in, each with its prepared statement's name; none with `preparedStatements: false`. */
  private readonly statementNames: Map<string, string> | undefined;

  /**
   * @throws RangeError when `pgOptionsProblem` finds one (the stores check first and throw their own
   *   `INVALID_ARGUMENT`).
   */
  constructor(options: PgConnectOptions) {
    const problem = pgOptionsProblem(options);
    if (problem) throw new RangeError(problem);
    this.schema = `"${options.schema ?? 'handoff_ledger'}"`;
    this.statementNames = options.preparedStatements === false ? undefined : new Map();
    if (options.pool) {
      // A pg.Pool of the application's pg 8.x: the same pool at runtime, typed by its own @types/pg (PgPoolLike).
      this.pool = options.pool as pg.Pool;
      this.ownsPool = false;
      // A borrowed pool may lack the listener createPgPool adds; a dropped idle connection must not crash us. Taken
      // off again at close: an application opening and closing stores on one pool would gather them.
      this.pool.on('error', this.ignoreIdleError);
    } else {
      this.pool = createPgPool({ ...options, connectionString: options.connectionString! });
      this.ownsPool = true;
    }
  }

  /**
   * Fills `{schema}` in SQL text. A single statement (no `;`: a migration's script is several) is sent as a named
   * prepared statement from then on, by `query` and on a transaction's client (`preparedStatements`): its name is
   * its text's hash, so the same text has the same name on every connection, and another text (another schema's)
   * another name.
   */
  sql(text: string): string {
    const filled = text.replaceAll('{schema}', this.schema);
    if (this.statementNames && !filled.includes(';') && !this.statementNames.has(filled))
      this.statementNames.set(
        filled,
        `handoff_ledger_${createHash('sha256').update(filled).digest('hex').slice(0, 32)}`,
      );
    return filled;
  }

  /** `text` and `values` as sent: under its prepared statement's name when `sql` made it one. */
  private statement(text: string, values: unknown[] | undefined): pg.QueryConfig {
    const name = this.statementNames?.get(text);
    return { text, ...(values ? { values } : {}), ...(name === undefined ? {} : { name }) };
  }

  /**
   * `client` as a transaction's `fn` gets it: sending the statements `sql` made as named prepared statements
   * (`statement`), and, with a `signal`, sending none once it aborted (the abort's reason is thrown), so an abort that
   * found the server between two statements (a cancel then ends nothing) stops the next one.
   */
  private transactionClient(client: pg.PoolClient, signal: AbortSignal | undefined): pg.PoolClient {
    if (!this.statementNames && !signal) return client;
    return new Proxy(client, {
      get: (target, prop) => {
        if (prop !== 'query') return Reflect.get(target, prop, target) as unknown;
        return (...args: unknown[]) => {
          signal?.throwIfAborted();
          const [text, values] = args;
          const query = target.query as (...a: unknown[]) => unknown;
          if (
            !this.statementNames ||
            typeof text !== 'string' ||
            args.length > 2 ||
            !(values === undefined || Array.isArray(values))
          )
            return query.apply(target, args);
          return query.call(target, this.statement(text, values));
        };
      },
    });
  }

  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(this.statement(text, values));
    } catch (err) {
      throw this.poolBusy(err) ?? err;
    }
  }

  /**
   * One write statement in a READ COMMITTED transaction of its own. A statement sent alone runs at the database's or
   * role's default level, and the store's single-statement writes (gc's conditional deletes, a watermark, the origin)
   * count on READ COMMITTED's re-check of a row another transaction held: under REPEATABLE READ or SERIALIZABLE they
   * failed with a serialization error instead. With a `signal`, as `transaction`: an abort before COMMIT cancels the
   * statement (a lock wait too) and throws the signal's reason, nothing written.
   */
  async write<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
    signal?: AbortSignal,
  ): Promise<pg.QueryResult<R>> {
    return this.transaction((client) => client.query<R>(text, values), BEGIN, signal);
  }

  /** pg-pool's "timeout exceeded when trying to connect" from waiting for a free connection, told plainly. */
  private poolBusy(err: unknown): Error | undefined {
    if (!(err instanceof Error) || err.message !== POOL_WAIT_TIMEOUT) return undefined;
    const max = (this.pool as { options?: { max?: number } }).options?.max;
    const wait = (this.pool as { options?: { connectionTimeoutMillis?: number } }).options?.connectionTimeoutMillis;
    return new Error(
      `the connection pool is busy: none of its ${max ?? ''} connections became free within ${wait ?? '?'} ms ` +
        '(raise maxConnections, or run fewer operations at once)',
      { cause: err },
    );
  }

  /**
   * Waits for one of the connections uploads may hold (maxConnections − 2, at least one, per pool), so that
   * long uploads always leave connections for reads and appends. Returns its release (call it once).
   * @throws the signal's reason when it aborts while waiting
   */
  async uploadSlot(signal?: AbortSignal): Promise<() => void> {
    let slots = uploadSlots.get(this.pool);
    if (!slots) {
      const max = (this.pool as { options?: { max?: number } }).options?.max ?? 10;
      slots = new Slots(Math.max(1, max - 2));
      uploadSlots.set(this.pool, slots);
    }
    return slots.acquire(signal);
  }

  /**
   * A connection of the pool. The wait for one (all busy: up to the pool's connection timeout) ends at the signal's
   * abort with its reason, and so does what the pool does for this call: a connection it is still making for it (a
   * server that accepts and never answers, say) is ended at once rather than at its connect timeout, and a place in
   * the pool's queue is given up, so no connection is made for it later. One that comes after the abort anyway (the
   * pool handed it over meanwhile, or a pool whose workings `abandonable` does not know) goes back to the pool unused.
   */
  private connect(signal?: AbortSignal): Promise<pg.PoolClient> {
    const busy = (err: unknown): never => {
      throw this.poolBusy(err) ?? err;
    };
    // Without a signal nothing is abandoned: the pool's own call, with no look at its workings.
    if (!signal) return this.pool.connect().catch(busy);
    const { connecting: started, abandon } = abandonable(this.pool);
    const connecting = started.catch(busy);
    return new Promise<pg.PoolClient>((resolve, reject) => {
      let settled = false;
      const unsubscribe = onAbort(signal, () => {
        if (settled) return;
        settled = true;
        reject(signal.reason);
        abandon();
        connecting.then(
          (client) => client.release(),
          () => {},
        );
      });
      connecting.then(
        (client) => {
          if (settled) return;
          settled = true;
          unsubscribe();
          resolve(client);
        },
        (err: unknown) => {
          if (settled) return;
          settled = true;
          unsubscribe();
          reject(err);
        },
      );
    });
  }

  /**
   * Runs `fn` inside one transaction on one connection: COMMIT when it resolves, ROLLBACK when it throws.
   * A connection that failed (server restart, network) is destroyed rather than returned to the pool.
   * When COMMIT itself fails the outcome is unknown to the client; callers that can tell (an append looks its
   * entry up) check, the others report it as a failure. Only such a failure can hide a commit (`failedAfterCommitSent`):
   * one before COMMIT was sent (the wait for a pooled connection, a statement, a connection lost meanwhile) committed
   * nothing.
   * With a `signal`, an abort before COMMIT is sent cancels the statement the connection is running (a lock wait
   * too; again until it ends, for one still on its way to the server when a cancel lands runs on), sends no further
   * statement of `fn`, rolls back and throws the signal's reason: COMMIT is never sent after an
   * abort. Once COMMIT was sent, the abort changes nothing. The transaction names itself with a random
   * `application_name` (`SET LOCAL`, in the BEGIN's round trip) and the cancel is sent to the server process showing
   * that name, from a connection of its own: never to another process, a pooler's connection ids notwithstanding,
   * and never after this transaction ended.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>, begin = BEGIN, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    const client = await this.connect(signal);
    let broken: Error | undefined;
    // A checked-out client has no pool listener: a connection lost between queries would otherwise
    // surface as an unhandled 'error' event. The failure reaches us through the next query instead.
    // The first error is the reason (a server's FATAL message); the connection's end is reported after it.
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    let committing = false;
    let ending = false;
    let cancelling: Promise<void> | undefined;
    const tag = signal ? `handoff-ledger/${randomUUID()}` : undefined;
    // A cancel ends only a statement the server has started: one still on its way when the cancel lands runs on (a
    // lock wait to lockTimeoutMs). So the cancel is sent again, after a growing pause, until the transaction ends — the
    // statement failed, or `fn` stopped at the next one, which is refused after the abort.
    const canceller = tag
      ? new RepeatedCancel(
          () => this.cancelTagged(tag),
          () => committing || ending,
        )
      : undefined;
    const unsubscribe =
      signal &&
      onAbort(signal, () => {
        if (!committing && !ending && canceller) cancelling = canceller.run();
      });
    try {
      signal?.throwIfAborted();
      await client.query(`${begin};\n${DURABLE_COMMIT}${tag ? `;\nSET LOCAL application_name = '${tag}'` : ''}`);
      const result = await fn(this.transactionClient(client, signal));
      // Checked with no await before COMMIT: an abort from here on no longer cancels anything.
      signal?.throwIfAborted();
      committing = true;
      await client.query('COMMIT');
      return result;
    } catch (err) {
      // No cancel starts from here on; one already sent has reached the server before the ROLLBACK goes out.
      ending = true;
      canceller?.stopWaiting();
      const aborted = signal?.aborted === true; // an abort after this error did not cause it
      await cancelling;
      if (!broken) {
        await client.query('ROLLBACK').catch((rollbackErr: Error) => {
          broken = rollbackErr;
        });
      }
      // Aborted before COMMIT: nothing committed, whatever the statement said (a cancelled lock wait, say).
      if (aborted && !committing) throw signal!.reason;
      // A session the server ended (idle in transaction too long, terminated) says why on the connection; the
      // query after it only says the connection is gone. The reason is the one callers can act on.
      const thrown: unknown =
        pgCode(broken) !== undefined && pgCode(err) === undefined && !isHandoffLedgerError(err) ? broken : err;
      if (committing && typeof thrown === 'object' && thrown !== null) thrownAfterCommitSent.add(thrown);
      throw thrown;
    } finally {
      unsubscribe?.();
      client.off('error', onError);
      client.release(broken);
    }
  }

  /**
   * Runs `fn` with a read-only view of the database at one moment: every query of the view runs in one
   * `REPEATABLE READ READ ONLY` transaction, so a reader that needs several statements (fsck: heads, then entries,
   * then the tree, then the session-heads index) sees no commit that lands between them. The transaction has a
   * connection of its own, outside the pool, so `fn` may use the pool meanwhile (blob reads), a pool of one
   * connection included; it holds no lock a writer waits for, so the server's idle-in-transaction bound is lifted
   * for it (`fn` may spend minutes between two reads re-hashing blobs). It ends, rolled back, when `fn` settles;
   * the view refuses writes (`write`, `transaction`) and its `close` leaves the pool alone.
   * With a `signal`: one aborted already connects nothing; an abort before the transaction has begun ends its
   * connection at once (one still being made — a server that accepts and never answers — included, not at its connect
   * timeout) and throws the signal's reason, `fn` never run; once begun, the view sends no further statement (the
   * signal's reason is thrown) and the statement it is running is cancelled (a wait for a lock too, which under
   * `lockTimeoutMs: 0` would last as long as the lock is held), again until it ends, as `transaction`'s is: the
   * transaction names itself with a random `application_name` for it.
   */
  async readSnapshot<T>(fn: (view: PgDatabase) => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    const client = this.ownConnection();
    let broken: Error | undefined;
    client.on('error', (err: Error) => {
      broken ??= err;
    });
    const tag = signal ? `handoff-ledger/${randomUUID()}` : undefined;
    let begun = false;
    let ended = false;
    let running = 0;
    let cancelling: Promise<void> | undefined;
    // A cancel ends only a statement the server has started: sent again, after a growing pause, until the view's
    // statements sent before the abort have ended (none is sent after it).
    const canceller = tag
      ? new RepeatedCancel(
          () => this.cancelTagged(tag),
          () => ended || running === 0,
        )
      : undefined;
    const unsubscribe =
      signal &&
      onAbort(signal, () => {
        if (!begun) endAtOnce(client);
        else if (!ended && running > 0 && !cancelling) cancelling = canceller!.run();
      });
    try {
      await client.connect();
      await client.query(
        'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL idle_in_transaction_session_timeout = 0' +
          (tag ? `; SET LOCAL application_name = '${tag}'` : ''),
      );
      // An abort that ended the connection as the BEGIN was answered: nothing is read.
      signal?.throwIfAborted();
      begun = true;
    } catch (err) {
      unsubscribe?.();
      void client.end().catch(() => {});
      if (signal?.aborted) throw signal.reason;
      throw err;
    }
    const refused = () =>
      Promise.reject(new Error('a read snapshot of the database cannot write (this is a bug in handoff-ledger)'));
    const view = Object.create(this) as PgDatabase;
    Object.defineProperties(view, {
      query: {
        value: async (text: string, values?: unknown[]) => {
          // Aborted: CANCELLED (the signal's reason its cause), which the log's read wrappers pass as it is, so a
          // reader inside `fn` is told the read was cancelled, not that storage failed.
          throwIfAborted(signal);
          running++;
          try {
            return await client.query(this.statement(text, values));
          } catch (err) {
            // Aborted: what the statement says (cancelled) is the abort's doing.
            throwIfAborted(signal);
            // A connection the server ended (restart, terminate) says why on its 'error' event first.
            throw pgCode(broken) !== undefined && pgCode(err) === undefined ? broken : err;
          } finally {
            running--;
            if (running === 0) canceller?.stopWaiting();
          }
        },
      },
      write: { value: refused },
      transaction: { value: refused },
      readSnapshot: { value: refused },
      close: { value: async () => {} },
    });
    try {
      return await fn(view);
    } finally {
      ended = true;
      canceller?.stopWaiting();
      unsubscribe?.();
      // A cancel under way reaches the server before the connection ends. Nothing was written: ending the connection
      // ends the transaction.
      await cancelling;
      await client.end().catch(() => {});
    }
  }

  /** A connection outside the pool, with the pool's settings (the pool's own may all be busy). */
  private ownConnection(): pg.Client {
    const pool = this.pool as unknown as { Client?: typeof pg.Client; options?: pg.ClientConfig };
    return new (pool.Client ?? pg.Client)({ ...pool.options, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }

  /**
   * Cancels the statement of the server process whose `application_name` is `tag` (`pg_cancel_backend`, which has
   * signalled it when it answers), from a connection of its own: the pool's may all be busy, waiting on the same locks.
   * Never rejects; when the cancel cannot be sent the statement runs to its own end (a lock wait to `lockTimeoutMs`).
   */
  private async cancelTagged(tag: string): Promise<void> {
    const client = this.ownConnection();
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query(
        'SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
        [tag],
      );
    } catch {
      // the statement then ends by itself
    } finally {
      void client.end().catch(() => {});
    }
  }

  /**
   * Applies the missing migrations of `component` in one transaction under an advisory lock, so two
   * processes opening the same database at once neither race nor apply a step twice.
   * With a `signal`, as `transaction`: an abort ends the wait for the lock (another opener migrating) or a step,
   * rolls back and throws the signal's reason, nothing applied.
   * @throws `Unsupported` (the calling layer's class) `FORMAT_UNSUPPORTED` when the database holds a version of
   *   `component` this code does not know (a newer library migrated it) or a known version under another name (another
   *   program, or a build this release does not know, made it), or does not record a step whose tables it holds (its
   *   migrations table lost rows): judged before any step is applied, the transaction rolled back, so nothing is
   *   migrated or written. What the database says (a migration's name) is quoted escaped.
   */
  async migrate(
    component: string,
    migrations: readonly PgMigration[],
    Unsupported: ErrorClass<'FORMAT_UNSUPPORTED'>,
    signal?: AbortSignal,
  ): Promise<void> {
    // Without the lock wait's bound: another opener migrating (a large store's backfill included) is waited for.
    await this.transaction(
      async (client) => {
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`handoff_ledger.migrate:${this.schema}`]);
        // CREATE SCHEMA IF NOT EXISTS needs the database's CREATE privilege even when the schema is there: a role
        // given a schema made for it (least privilege) could not open the store. Created only when missing.
        const { rowCount } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
          this.schema.slice(1, -1),
        ]);
        if (!rowCount)
          await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.schema}`).catch((err: unknown) => {
            // A role without the database's CREATE privilege: said with what to do (the driver says only
            // `permission denied for database …`).
            if (pgCode(err) !== INSUFFICIENT_PRIVILEGE) throw err;
            throw new Error(
              `cannot create schema ${this.schema}: make it beforehand for this role (CREATE SCHEMA ${this.schema} AUTHORIZATION <role>), or grant the role CREATE on the database`,
              { cause: err },
            );
          });
        await client.query(
          this.sql(`CREATE TABLE IF NOT EXISTS {schema}.handoff_ledger_migrations (
          component text NOT NULL, version integer NOT NULL, name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (component, version))`),
        );
        const { rows } = await client.query<{ version: number; name: string }>(
          this.sql('SELECT version, name FROM {schema}.handoff_ledger_migrations WHERE component = $1'),
          [component],
        );
        const applied = new Map(rows.map((r) => [r.version, r.name]));
        // Judged before any step, in the transaction: a refusal rolls it back, nothing migrated. Under the lock, the
        // tables the steps not recorded make are there only if the migrations table lost their rows (or another
        // program made them): every migration records its steps in the transaction that makes their tables.
        const judged = { component, migrations, Unsupported };
        const present = await presentRelations(
          client,
          this.schema.slice(1, -1),
          tablesOfUnrecordedSteps([judged], () => applied),
        );
        judgeApplied(judged, this.schema, applied, present);
        for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
          if (applied.has(m.version)) continue;
          await client.query(this.sql(m.sql));
          await client.query(
            this.sql('INSERT INTO {schema}.handoff_ledger_migrations (component, version, name) VALUES ($1, $2, $3)'),
            [component, m.version, m.name],
          );
        }
      },
      UNBOUNDED_LOCK_WAIT,
      signal,
    );
  }

  /**
   * Judges, as `migrate` does and writing nothing, the versions the schema records for each of `components` (read in
   * one statement, after the tables their steps make), and the tables of steps it does not record: for an opener of several (openPostgresBackends: the blob store, then the log, each migrating in a
   * transaction of its own), so that a schema one of them refuses leaves the others unmigrated too. A schema or a
   * migrations table not made yet records none. A migration committed after this look is judged by `migrate` still.
   * @throws as `migrate` (`FORMAT_UNSUPPORTED` of the component's class); the signal's reason once it aborts (the wait
   *   for a connection, one still being made included, and the read, a wait for a lock on the migrations table
   *   included: cancelled, as `transaction`'s statements are); a driver error as it is
   */
  async judgeVersions(components: readonly PgMigratedComponent[], signal?: AbortSignal): Promise<void> {
    let rows: Array<{ component: string; version: number; name: string }> = [];
    // The relations the schema holds of those every step makes, and the migrations table: read first, as no migration
    // lock is held here. A migration records its steps in the transaction that makes their tables, so the rows read
    // after a table was seen include its step's (a concurrent first open is not judged against tables without rows).
    let present = new Set<string>();
    const migrationsTable = 'handoff_ledger_migrations';
    try {
      // In a transaction of its own, for its signal: an abort cancels the read, a wait for a lock another connection
      // holds on the migrations table included (an operator's LOCK TABLE, a restore in one transaction), and ends it.
      await this.transaction(
        async (client) => {
          present = await presentRelations(client, this.schema.slice(1, -1), [
            migrationsTable,
            ...components.flatMap((c) => c.migrations.flatMap(tablesMadeBy)),
          ]);
          if (!present.has(migrationsTable)) return;
          rows = (
            await client.query<{ component: string; version: number; name: string }>(
              `SELECT component, version, name FROM ${this.schema}.${migrationsTable}`,
            )
          ).rows;
        },
        BEGIN,
        signal,
      );
    } catch (err) {
      signal?.throwIfAborted();
      if (!UNDEFINED_TABLE.has(pgCode(err) ?? '')) throw err;
      // Dropped between the two reads: what was there is judged against no rows, as `migrate` would judge it.
      rows = [];
    }
    for (const judged of components) {
      const applied = new Map(rows.filter((r) => r.component === judged.component).map((r) => [r.version, r.name]));
      judgeApplied(judged, this.schema, applied, present);
    }
  }

  /** Ends the pool when this object created it; a borrowed pool stays open for its owner. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
    else this.pool.off('error', this.ignoreIdleError);
  }

  private readonly ignoreIdleError = (): void => {};
}

/** What `PgDatabase.transaction` threw once its COMMIT was sent (`failedAfterCommitSent`). */
const thrownAfterCommitSent = new WeakSet<object>();

/**
 * Whether `err` is what `PgDatabase.transaction` threw after it sent COMMIT: the one failure of a transaction that
 * may hide a commit (the reply lost with the connection). Every other failure of a transaction came before COMMIT
 * was sent — the wait for a pooled connection (the pool busy), a statement's error, a connection lost meanwhile — and
 * committed nothing.
 */
export function failedAfterCommitSent(err: unknown): boolean {
  return typeof err === 'object' && err !== null && thrownAfterCommitSent.has(err);
}

/** The SQLSTATE of a PostgreSQL error, if `err` is one. */
export function pgCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** SQLSTATE 23505: a unique or primary key constraint refused a row. */
export const UNIQUE_VIOLATION = '23505';
/** SQLSTATE 42501: the role lacks a privilege the statement needs. */
export const INSUFFICIENT_PRIVILEGE = '42501';
/** SQLSTATE 55P03: a lock was not granted within `lock_timeout`. */
export const LOCK_NOT_AVAILABLE = '55P03';
/** SQLSTATE 40P01: the server ended a transaction to break a cycle of lock waits. */
export const DEADLOCK_DETECTED = '40P01';
/** SQLSTATE 25P03: the server ended a session idle in a transaction past `idle_in_transaction_session_timeout`. */
export const IDLE_IN_TRANSACTION_TIMEOUT = '25P03';
/**
 * SQLSTATE 57014: the server cancelled a statement, past `statement_timeout` or at another session's
 * `pg_cancel_backend`. (A store's own cancel, at its operation's abort, is answered as the abort before this is seen.)
 */
export const QUERY_CANCELED = '57014';

/**
 * A plain account of a timeout the pool's or the server's settings caused, for the layer's error message, or
 * undefined. Nothing was committed in any case: the statement or the whole transaction was rolled back.
 */
export function pgTimeoutProblem(err: unknown): string | undefined {
  switch (pgCode(err)) {
    case LOCK_NOT_AVAILABLE:
      return 'another connection held a lock this needs for longer than lock_timeout (a writer stalled mid-transaction?); nothing was written, retry';
    case QUERY_CANCELED:
      return "the server cancelled the statement: it ran longer than statement_timeout (the role's, database's or server's; below lockTimeoutMs it ends a wait for a lock another connection holds first), or another session cancelled it; nothing was written, retry, or raise statement_timeout for this role above lockTimeoutMs";
    case IDLE_IN_TRANSACTION_TIMEOUT:
      return 'the server ended the transaction after it sat idle longer than idle_in_transaction_session_timeout (this process stalled); nothing was committed, retry';
    default:
      return undefined;
  }
}

/**
 * Whether `err` is a statement the server ended for a wait (`pgTimeoutProblem`): a lock not granted within
 * `lock_timeout`, or a statement cancelled past `statement_timeout` (typically waiting for such a lock, when it is the
 * shorter). The layers answer it `LOCKED`, a retryable failure that wrote nothing.
 */
export function isPgWaitTimeout(err: unknown): boolean {
  const code = pgCode(err);
  return code === LOCK_NOT_AVAILABLE || code === QUERY_CANCELED;
}

/**
 * What pg-pool (3.x, pg 8's) keeps of the calls to its `connect()`: the clients it has (`_clients`, connecting ones
 * included) and the calls queued for a connection (`_pendingQueue`). Read only to end, at an abort, what one call
 * started; a pool without them (another make) is left to itself.
 */
interface PgPoolInternals {
  _clients?: unknown;
  _pendingQueue?: unknown;
}

/**
 * `pool.connect()`, with `abandon()` ending what the pool does for this call, for the call's abort. Within the call
 * pg-pool either starts a connection of its own for it (a client added to `_clients`) or queues it (an item added to
 * `_pendingQueue`, none free and no room, or an idle one to hand over). `abandon` destroys that client's socket while
 * it is still connecting — as pg-pool's own connect timeout and pg's do: `client.end()` would not end a connection
 * that has not started up, nor ever settle its connect — so the pool forgets it and answers its caller with the
 * error; and it takes the queued item out, as the pool's wait timeout does, so no connection is made for it once one
 * is freed or removed. A client already connected, or handed over, is left alone.
 */
function abandonable(pool: pg.Pool): { connecting: Promise<pg.PoolClient>; abandon: () => void } {
  const internals = pool as unknown as PgPoolInternals;
  const count = (list: unknown) => (Array.isArray(list) ? list.length : undefined);
  const clientsBefore = count(internals._clients);
  const queuedBefore = count(internals._pendingQueue);
  const connecting = pool.connect();
  const clients = internals._clients;
  const queue = internals._pendingQueue;
  const made =
    clientsBefore !== undefined && Array.isArray(clients) && clients.length === clientsBefore + 1
      ? (clients.at(-1) as pg.Client)
      : undefined;
  const queued =
    queuedBefore !== undefined && Array.isArray(queue) && queue.length === queuedBefore + 1
      ? (queue.at(-1) as { timedOut?: boolean })
      : undefined;
  let connected = false;
  // Emitted right after the pool is told (in the same turn): from then on the client is the pool's to hand over.
  made?.once('connect', () => (connected = true));
  const abandon = () => {
    try {
      if (made && !connected) {
        const stream = (made as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
        if (stream) stream.destroy();
        else void made.end().catch(() => {}); // pg-native's client: the pool's own connect timeout ends it so too
      }
      if (queued && Array.isArray(queue)) {
        const at = queue.indexOf(queued);
        if (at >= 0) {
          queue.splice(at, 1);
          queued.timedOut = true;
        }
      }
    } catch {
      // the connection then ends at its own connect timeout, and goes back to the pool unused
    }
  };
  return { connecting, abandon };
}

/**
 * Ends a client's connection at once, one still being made included: its socket destroyed, as pg-pool's and pg's own
 * connect timeouts do (`end()` would not end a connection that has not started up, nor ever settle its connect).
 */
/**
 * The cancel of a transaction's or a read snapshot's statements (`send`), sent again after a growing pause (25 ms,
 * doubling, at most 1 s) until `done()`: a cancel ends only a statement the server has started, so one still on its
 * way when a cancel lands is ended by a later one. `stopWaiting` cuts the pause short (the statement ended).
 */
class RepeatedCancel {
  private wake: (() => void) | undefined;

  constructor(
    private readonly send: () => Promise<void>,
    private readonly done: () => boolean,
  ) {}

  async run(): Promise<void> {
    for (let pause = CANCEL_RETRY_FIRST_MS; !this.done(); pause = Math.min(pause * 2, CANCEL_RETRY_MAX_MS)) {
      await this.send();
      if (this.done()) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, pause).unref();
      });
    }
  }

  stopWaiting(): void {
    this.wake?.();
  }
}

function endAtOnce(client: pg.Client): void {
  try {
    const stream = (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
    if (stream) stream.destroy();
    else void client.end().catch(() => {}); // pg-native's client
  } catch {
    // the connection then ends at its own connect timeout
  }
}
