/**
 * A throw-away PostgreSQL cluster for tests: `initdb` into a temporary directory, listen only on a
 * private Unix socket (no port to collide with), stop and remove it afterwards. Without the binaries the
 * tests are skipped with a plain notice; under CI=true their absence is a failure, so CI always runs them.
 */
import { spawnSync } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { ENDS_AT_SIGNAL_MS } from './settled.js';
import pgLib from 'pg';
import { afterAll, beforeAll, describe, it, vi } from 'vitest';
import { findPostgresBin, PgCluster } from '../../benchmarks/lib/pg-cluster.js';

// The cluster core lives with the benchmark (the build compiles benchmarks/, not test/); these names are the tests' API.
export { findPostgresBin };
export { PgCluster as TestCluster };
type TestCluster = PgCluster;

function isCi(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false';
}

/** Filled in by `beforeAll` of `describePostgres`; read it inside tests and hooks only. */
export interface PostgresHandle {
  cluster: TestCluster;
  /** A database created for this describe block (one per test file by convention). */
  connectionString: string;
}

/**
 * Runs a client tool of the cluster's installation (pg_dump, psql, pg_restore) on a database of the test's cluster, as
 * `user` (default the superuser) on `database` (default the handle's); returns its exit status, stdout and stderr.
 */
export function pgClientTool(
  pg: PostgresHandle,
  name: string,
  args: string[],
  { user = 'postgres', database }: { user?: string; database?: string } = {},
): { status: number | null; stdout: string; stderr: string } {
  const found = findPostgresBin();
  if (!('bin' in found)) throw new Error(found.reason);
  const db = database ?? decodeURIComponent(/@\/([^?]+)/.exec(pg.connectionString)![1]!);
  const r = spawnSync(
    join(found.bin, name),
    ['-h', pg.cluster.socketDir, '-U', user, ...args, ...(name === 'pg_restore' ? ['-d', db] : [db])],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `pgClientTool` as the superuser on the handle's database, which must succeed; returns its stdout. */
export function pgClientToolOut(pg: PostgresHandle, name: string, args: string[]): string {
  const r = pgClientTool(pg, name, args);
  if (r.status !== 0) throw new Error(`${name} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** Runs SQL on a connection of its own, outside the stores under test, and returns the rows. */
export async function sqlOn<R extends pgLib.QueryResultRow>(
  connectionString: string,
  text: string,
  values?: unknown[],
): Promise<R[]> {
  const client = new pgLib.Client({ connectionString });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Calls `onSend` with each statement any pg client sends from now on (its text, and its name when it goes as a named
 * prepared statement) until `stop()`: what the stores send, whichever pool or connection they use.
 */
export function watchStatements(onSend: (sent: { text?: string; name?: string }) => void): { stop(): void } {
  const query = pgLib.Client.prototype.query;
  const spy = vi.spyOn(pgLib.Client.prototype, 'query').mockImplementation(function (
    this: pgLib.Client,
    ...args: unknown[]
  ) {
    const name = typeof args[0] === 'object' ? (args[0] as { name?: unknown } | null)?.name : undefined;
    onSend({ text: statementText(args[0]), ...(typeof name === 'string' ? { name } : {}) });
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as never);
  return { stop: () => spy.mockRestore() };
}

/**
 * The SQL text of a `query` call's first argument: the text itself, or a query config's `text` (the stores send their
 * statements as named prepared statements: `{ name, text, values }`). Undefined for anything else.
 */
export function statementText(arg: unknown): string | undefined {
  if (typeof arg === 'string') return arg;
  const text = typeof arg === 'object' && arg !== null ? (arg as { text?: unknown }).text : undefined;
  return typeof text === 'string' ? text : undefined;
}

/**
 * A count of the server's processes (pg_stat_activity) matching `where`, made afresh at each call: what tests poll.
 * `pg.connectionString` is read at each call (a describePostgres handle is filled in before the tests run).
 */
export function activityCount(pg: { connectionString: string }, where: string): () => Promise<number> {
  return async () =>
    Number(
      (
        await sqlOn<{ n: string }>(
          pg.connectionString,
          `SELECT count(*)::text AS n FROM pg_stat_activity WHERE ${where}`,
        )
      )[0]!.n,
    );
}

/**
 * Resolves once a server process of the test's database waits for a lock with a statement matching `pattern` (SQL
 * `LIKE`); with `count`, once that many do. Fails once `settles` ended without that (the operation meant to wait did
 * not: a regression, said at once rather than left to the test's timeout), or after `withinMs`.
 */
export async function waitingForLock(
  pg: { connectionString: string },
  pattern: string,
  { settles, withinMs = 20_000, count = 1 }: { settles?: Promise<unknown>; withinMs?: number; count?: number } = {},
): Promise<void> {
  let ended: string | undefined;
  settles?.then(
    () => (ended = 'it succeeded'),
    (err: unknown) => (ended = `it failed: ${String(err)}`),
  );
  for (const end = Date.now() + withinMs; Date.now() < end;) {
    if (ended !== undefined) throw new Error(`the operation ended before it waited on ${pattern} (${ended})`);
    const [row] = await sqlOn<{ n: string }>(
      pg.connectionString,
      `SELECT count(*)::text AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
         AND query LIKE $1`,
      [pattern],
    );
    if (Number(row!.n) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`fewer than ${count} statements waited on ${pattern} within ${withinMs} ms`);
}

/**
 * A TCP proxy on 127.0.0.1 to the cluster's socket that passes everything through until `cuts(sent, connection)` says
 * a client's data is the statement to cut at (`connection` is that client connection's own record, for a proxy that
 * marks connections by what they sent before): the data is passed on, and the connection is cut as the server's reply
 * comes back. At COMMIT the server has committed; the client cannot know. Cut there, not some time after the data
 * was passed on, which a loaded server could take to get to it. `connectionString(pg)` reaches the database through it.
 */
export async function replyCuttingProxy(
  pg: PostgresHandle,
  cuts: (sent: Buffer, connection: Record<string, unknown>) => boolean,
): Promise<{ connectionString: string; close(): void }> {
  const proxy = createServer((down) => {
    const up = connect(join(pg.cluster.socketDir, '.s.PGSQL.5432'));
    const connection: Record<string, unknown> = {};
    let dropReplies = false;
    down.on('data', (d: Buffer) => {
      if (!dropReplies && cuts(d, connection)) dropReplies = true;
      up.write(d);
    });
    up.on('data', (d: Buffer) => {
      if (!dropReplies) down.write(d);
      else {
        up.destroy();
        down.destroy();
      }
    });
    for (const [a, b] of [
      [up, down],
      [down, up],
    ] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;
  const database = /@\/([^?]+)/.exec(pg.connectionString)![1]!;
  return { connectionString: `postgresql://postgres@127.0.0.1:${port}/${database}`, close: () => proxy.close() };
}

/**
 * Polls `count` (of server processes, in pg_stat_activity) until it is at most `atMost`, for up to `withinMs`, and
 * returns the last count. A client's `end()` resolves once its socket is closed, and the server process serving it
 * leaves pg_stat_activity a moment later: a count taken at once can still list it (sqlOn's own connection of the
 * count before, say). A connection still open stays listed, so a leak still shows, as a count above `atMost`.
 */
export async function settledCount(
  count: () => Promise<number>,
  atMost: number,
  withinMs = ENDS_AT_SIGNAL_MS,
): Promise<number> {
  const until = Date.now() + withinMs;
  for (;;) {
    const n = await count();
    if (n <= atMost || Date.now() >= until) return n;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * `describe` that starts a throw-away cluster and one database before its tests and removes both after.
 * Without PostgreSQL binaries: skipped with a notice saying why, or one failing test under CI=true.
 */
export function describePostgres(
  name: string,
  body: (pg: PostgresHandle) => void,
  database = 'handoff_ledger_test',
): void {
  const found = findPostgresBin();
  if ('reason' in found) {
    if (isCi()) {
      describe(name, () => {
        it('runs against a real PostgreSQL server (required when CI=true)', () => {
          throw new Error(`PostgreSQL tests cannot run: ${found.reason}. .ci/run installs postgresql with apt-get.`);
        });
      });
      return;
    }
    console.warn(
      `handoff-ledger: skipped "${name}": ${found.reason}. Install PostgreSQL (e.g. apt-get install postgresql) to run these tests.`,
    );
    describe.skip(name, () => body({} as PostgresHandle));
    return;
  }
  describe(name, () => {
    const handle = {} as PostgresHandle;
    beforeAll(async () => {
      handle.cluster = await PgCluster.start(found.bin);
      handle.connectionString = await handle.cluster.createDatabase(database);
    });
    afterAll(async () => {
      await handle.cluster?.stop();
    });
    body(handle);
  });
}
