/**
 * fsck on a live shared PostgreSQL store reads one moment of the log: its passes run in one REPEATABLE READ READ ONLY
 * transaction on a connection of its own (PgDatabase.readSnapshot), so appends another host commits between them are
 * not taken for damage (test/support/fsck-live.ts, shared with the embedded store).
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ManifestError } from '../manifests/errors.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { liveFsckCases, publishTwoSessions } from './support/fsck-live.js';
import { describePostgres, sqlOn } from './support/postgres.js';

let schemas = 0;
const nextSchema = () => `fs${process.pid}_${schemas++}`;

describePostgres('fsck on a live PostgreSQL store', (pg) => {
  async function openStore(maxConnections?: number) {
    const root = mkdtempSync(join(tmpdir(), 'hl-pg-fsck-'));
    const postgres = { connectionString: pg.connectionString, schema: nextSchema(), maxConnections };
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
      const open = await sqlOn<{ n: string }>(
        pg.connectionString,
        "SELECT count(*)::text AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
      );
      expect(open[0]!.n).toBe('0');
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
});
