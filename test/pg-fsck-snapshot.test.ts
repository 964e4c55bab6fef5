/**
 * fsck on a live shared PostgreSQL store reads one moment of the log: its passes run in one REPEATABLE READ READ ONLY
 * transaction on a connection of its own (PgDatabase.readSnapshot), so appends another host commits between them are
 * not taken for damage (test/support/fsck-live.ts, shared with the embedded store). fsck's signal (and a filtered
 * export's) reaches that snapshot: an abort while its connection is still being made, or while one of its reads waits
 * for a lock another connection holds, ends the operation CANCELLED at the abort, not when the connection or the lock
 * would have let it go.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pgLib from 'pg';
import { expect, it } from 'vitest';
import { ManifestError } from '../manifests/errors.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { exportBundle } from '../src/ops/export.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { liveFsckCases, publishTwoSessions } from './support/fsck-live.js';
import { activityCount, describePostgres, settledCount, sqlOn } from './support/postgres.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from './support/settled.js';

let schemas = 0;
const nextSchema = () => `fs${process.pid}_${schemas++}`;

describePostgres('fsck on a live PostgreSQL store', (pg) => {
  async function openStore(maxConnections?: number, lockTimeoutMs?: number) {
    const root = mkdtempSync(join(tmpdir(), 'hl-pg-fsck-'));
    const postgres = { connectionString: pg.connectionString, schema: nextSchema(), maxConnections, lockTimeoutMs };
    const ledger = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    return {
      ledger,
      schema: postgres.schema,
      cleanup: async () => {
        await ledger.close();
        await rm(root, { recursive: true, force: true });
      },
    };
  }

  liveFsckCases(() => openStore());

  it('holds its moment on a connection of its own: a pool of one connection still serves its blob reads', async () => {
    const { ledger, cleanup } = await openStore(1);
    try {
      await publishTwoSessions(ledger);
      expect(await fsck(ledger)).toMatchObject({ ok: true, chains: 2, manifests: 4, findings: [] });
      // And ends it: no transaction is left open once fsck returned.
      expect(await activityCount(pg, "state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()")()).toBe(0);
    } finally {
      await cleanup();
    }
  });

  it('reports damage found in its moment as before (a head moved back below its entries: ROLLBACK)', async () => {
    const { ledger, schema, cleanup } = await openStore();
    try {
      await publishTwoSessions(ledger);
      const [first] = await ledger.history({ principal: 'alice', session: 's2' });
      await sqlOn(pg.connectionString, `UPDATE "${schema}".heads SET seq = 0, id = $1 WHERE session = 's2'`, [
        first!.id,
      ]);
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings.map((f) => f.code)).toContain('ROLLBACK');
    } finally {
      await cleanup();
    }
  });

  it('reports a snapshot that cannot begin as STORAGE_FAILED, naming the cause', async () => {
    const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema: nextSchema() });
    try {
      // The server refuses the snapshot's own connection (a database that does not exist): nothing was read.
      const { options } = (log as unknown as { db: { pool: { options: { connectionString: string } } } }).db.pool;
      options.connectionString = pg.cluster.connectionString('no_such_database');
      let read = false;
      const err = await log
        .readSnapshot(async () => {
          read = true;
        })
        .catch((e: unknown) => e);
      expect(read).toBe(false);
      expect(err).toBeInstanceOf(ManifestError);
      expect(err).toMatchObject({ code: 'STORAGE_FAILED' });
      expect((err as Error).message).toMatch(/read snapshot.*no_such_database/);
    } finally {
      await log.close();
    }
  });

  /** The pool options the log's own connections (its snapshot's too) are made with. */
  const poolOptionsOf = (log: unknown) => {
    expect(log).toBeInstanceOf(PgManifestLog);
    return (log as { db: { pool: { options: { connectionString: string } } } }).db.pool.options;
  };

  it("ends at fsck's abort while its snapshot's own connection is still being made (a server that accepts and never answers): CANCELLED, that connection closed at the abort", async () => {
    const { ledger, cleanup } = await openStore();
    const options = poolOptionsOf(ledger.log);
    const real = options.connectionString;
    // The snapshot's connection (the first fsck makes) goes to a server that accepts and never answers.
    const sockets: Socket[] = [];
    let accepted!: (one: { closed: Promise<void> }) => void;
    const first = new Promise<{ closed: Promise<void> }>((resolve) => (accepted = resolve));
    const server = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      accepted({ closed: new Promise<void>((resolve) => socket.once('close', () => resolve())) });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // Its connect timeout (the project's 10 s, which no option sets) lifted to ten minutes: only the abort can end the
    // connection in time. The values found are returned: a pg that renamed the field fails the test.
    const found: number[] = [];
    const proto = pgLib.Client.prototype as unknown as { connect: (...args: unknown[]) => unknown };
    const connect = proto.connect;
    proto.connect = function (this: { _connectionTimeoutMillis?: number }, ...args: unknown[]) {
      found.push(this._connectionTimeoutMillis ?? Number.NaN);
      this._connectionTimeoutMillis = 600_000;
      return connect.apply(this, args);
    };
    try {
      options.connectionString = `postgresql://nobody@127.0.0.1:${(server.address() as AddressInfo).port}/db`;
      const abort = new AbortController();
      const reason = new Error('the caller gave up');
      const checking = fsck(ledger, { signal: abort.signal });
      const one = await first;
      abort.abort(reason);
      expect(await settledWithin(checking, ENDS_AT_SIGNAL_MS), 'fsck did not end at its abort').toBe('settled');
      const err = await checking.catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      expect(await settledWithin(one.closed, ENDS_AT_SIGNAL_MS), 'the connection was left open').toBe('settled');
      expect(found).toEqual([10_000]);
    } finally {
      proto.connect = connect;
      options.connectionString = real;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await cleanup();
    }
  });

  /**
   * Runs `operation` with a signal while another connection holds `table` (a migration, an operator), which its
   * snapshot's first read (fsck's of the origin, export's of the tree head) waits for with no bound (lockTimeoutMs 0:
   * the server's, none), aborts once that read waits on the server, and checks that the operation ends CANCELLED at
   * the abort (a read not cancelled waits for as long as the lock is held) with its read no longer waiting.
   */
  async function abortedWhileSnapshotReadWaits(
    table: string,
    operation: (ledger: Ledger, signal: AbortSignal) => Promise<unknown>,
    after: (ledger: Ledger) => Promise<void>,
  ) {
    const { ledger, schema, cleanup } = await openStore(undefined, 0);
    const waitingForLocks = activityCount(pg, "datname = current_database() AND wait_event_type = 'Lock'");
    try {
      await publishTwoSessions(ledger);
      const holder = new pgLib.Client({ connectionString: pg.connectionString });
      holder.on('error', () => {});
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`LOCK TABLE "${schema}".${table} IN ACCESS EXCLUSIVE MODE`);
        const abort = new AbortController();
        const reason = new Error('the caller gave up');
        const running = operation(ledger, abort.signal);
        let ended = false;
        void running.catch(() => {}).finally(() => (ended = true));
        while (!ended && (await waitingForLocks()) === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        abort.abort(reason);
        expect(await settledWithin(running, ENDS_AT_SIGNAL_MS), 'it did not end at its abort').toBe('settled');
        const err = await running.catch((e: unknown) => e);
        expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
        expect((err as Error).cause).toBe(reason);
        // Its read no longer waits on the server, the lock still held.
        expect(await settledCount(waitingForLocks, 0)).toBe(0);
      } finally {
        await holder.query('COMMIT').catch(() => {});
        await holder.end();
      }
      await after(ledger);
    } finally {
      await cleanup();
    }
  }

  it("ends at fsck's abort while a read of its snapshot waits for a lock another connection holds (no lock bound): CANCELLED, the read cancelled on the server; fsck then finds the store clean", async () => {
    await abortedWhileSnapshotReadWaits(
      'log_meta',
      (ledger, signal) => fsck(ledger, { signal }),
      async (ledger) =>
        void expect(await fsck(ledger)).toMatchObject({ ok: true, chains: 2, manifests: 4, findings: [] }),
    );
  });

  it("ends at a filtered export's abort while a read of its snapshot waits for a lock another connection holds: CANCELLED, no bundle; a later export writes it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hl-pg-export-'));
    try {
      await abortedWhileSnapshotReadWaits(
        'log_counter',
        (ledger, signal) => exportBundle(ledger, { out: join(dir, 'cancelled'), session: 's1', signal }),
        async (ledger) => {
          expect(existsSync(join(dir, 'cancelled'))).toBe(false);
          expect(await exportBundle(ledger, { out: join(dir, 'bundle'), session: 's1' })).toMatchObject({});
          expect(existsSync(join(dir, 'bundle'))).toBe(true);
        },
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a read inside the snapshot after its signal aborted is refused CANCELLED (not a storage failure), and the snapshot ends CANCELLED', async () => {
    const { ledger, cleanup } = await openStore();
    try {
      await publishTwoSessions(ledger);
      const log = ledger.log as PgManifestLog;
      const abort = new AbortController();
      const reason = new Error('the operator gave up');
      let inside: unknown;
      const outcome = await log
        .readSnapshot(
          async (view) => {
            await view.treeHead();
            abort.abort(reason);
            inside = await view.treeHead().catch((e: unknown) => e);
            throw inside;
          },
          { signal: abort.signal },
        )
        .catch((e: unknown) => e);
      expect(inside).toMatchObject({ code: 'CANCELLED' });
      expect((inside as Error).cause).toBe(reason);
      expect(outcome).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
      expect((outcome as Error).cause).toBe(reason);
      // Its own connection is closed: nothing of it is left on the server.
      expect(
        await settledCount(activityCount(pg, "state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"), 0),
      ).toBe(0);
    } finally {
      await cleanup();
    }
  });
});
