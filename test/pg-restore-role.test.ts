/**
 * README, "Operating it", Backups: a dump restored by a PostgreSQL role that is not the one owning the store in the
 * dump (no superuser; a staging database's own role). The dump names the owner (`ALTER … OWNER TO`), which such a role
 * may not set: the load stops there. `pg_restore --no-owner` (or `pg_dump --no-owner` for a plain dump) makes the
 * restoring role the owner, and the ledger runs as it. A role that may not create schemas in its database is given
 * the empty schema by the database's owner, and loads the dump without its CREATE SCHEMA (`pg_restore -L`).
 */
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { describePostgres, pgClientTool, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's1', run: 'r' };

describePostgres('a pg_dump restored by a role that does not own the store in the dump (README, Backups)', (pg) => {
  /** Runs a client tool of the cluster's installation as `user` on `database`; returns its exit status and output. */
  const tool = (name: string, user: string, database: string, args: string[]) =>
    pgClientTool(pg, name, args, { user, database });
  const as = (user: string, database: string) =>
    pg.connectionString.replace('postgres@', `${user}@`).replace(/@\/[^?]+\?/, `@/${database}?`);

  it('stops at the owner the dump names; loads with --no-owner and the ledger runs as the restoring role', async () => {
    const db = decodeURIComponent(/@\/([^?]+)/.exec(pg.connectionString)![1]!);
    // The store, made by the ledger running as its role (which may create schemas in its database).
    await sqlOn(pg.connectionString, 'CREATE ROLE ledger_app LOGIN');
    await sqlOn(pg.connectionString, `GRANT CREATE ON DATABASE "${db}" TO ledger_app`);
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', postgres: { connectionString: as('ledger_app', db) } });
    await ledger.publish(scope, sampleSummary(1));
    await ledger.publish(scope, sampleSummary(2));
    await ledger.close();
    // The backup: the pins, then the dumps (taken by the superuser, as a backup job would).
    const dir = tempDir();
    cpSync(join(root, 'checkpoints'), join(dir, 'checkpoints'), { recursive: true });
    const plain = join(dir, 'dump.sql');
    const custom = join(dir, 'dump.pgc');
    const noOwner = join(dir, 'dump-no-owner.sql');
    for (const args of [
      ['-f', plain],
      ['-Fc', '-f', custom],
      ['--no-owner', '-f', noOwner],
    ])
      expect(tool('pg_dump', 'postgres', db, ['--schema', 'handoff_ledger', ...args]).status).toBe(0);
    expect(readFileSync(plain, 'utf8')).toContain('ALTER SCHEMA handoff_ledger OWNER TO ledger_app;');

    // Another database (staging, a new server) whose role is not ledger_app and no superuser.
    await sqlOn(pg.connectionString, 'CREATE ROLE ledger_staging LOGIN');
    await sqlOn(pg.connectionString, 'CREATE DATABASE staging');
    await sqlOn(pg.connectionString, 'GRANT CREATE ON DATABASE staging TO ledger_staging');
    const psql = ['-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-f'];
    const refused = tool('psql', 'ledger_staging', 'staging', [...psql, plain]);
    expect(refused.status).toBe(3);
    expect(refused.stderr).toContain('ERROR:  must be member of role "ledger_app"');
    const restore = ['--no-owner', '--exit-on-error', '--single-transaction'];
    const owned = tool('pg_restore', 'ledger_staging', 'staging', ['--exit-on-error', '--single-transaction', custom]);
    expect(owned.status).toBe(1);
    expect(owned.stderr).toContain('ALTER SCHEMA handoff_ledger OWNER TO ledger_app');
    // Each refusal was one transaction: nothing of the dump is left.
    expect(
      tool('psql', 'ledger_staging', 'staging', [
        '-tAc',
        "SELECT count(*) FROM pg_namespace WHERE nspname = 'handoff_ledger'",
      ]).stdout,
    ).toBe('0\n');

    const runs = async (): Promise<void> => {
      rmSync(join(root, 'checkpoints'), { recursive: true });
      cpSync(join(dir, 'checkpoints'), join(root, 'checkpoints'), { recursive: true });
      ledger = await openLedger({ root, host: 'h1', postgres: { connectionString: as('ledger_staging', 'staging') } });
      expect((await ledger.resume(scope))?.seq).toBe(1);
      expect((await ledger.publish(scope, sampleSummary('after'))).seq).toBe(2);
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
      await ledger.close();
      const owner = tool('psql', 'ledger_staging', 'staging', [
        '-tAc',
        "SELECT nspowner::regrole FROM pg_namespace WHERE nspname = 'handoff_ledger'",
      ]);
      expect(owner.stdout).toBe('ledger_staging\n');
    };
    // pg_restore --no-owner of the custom-format dump.
    expect(tool('pg_restore', 'ledger_staging', 'staging', [...restore, custom])).toMatchObject({
      status: 0,
      stderr: '',
    });
    await runs();
    // psql of a plain dump taken with --no-owner, in place of the schema dropped first.
    expect(tool('psql', 'ledger_staging', 'staging', ['-q', '-c', 'DROP SCHEMA handoff_ledger CASCADE']).status).toBe(
      0,
    );
    expect(tool('psql', 'ledger_staging', 'staging', [...psql, noOwner])).toMatchObject({ status: 0, stderr: '' });
    await runs();

    // A role that may not create schemas: the database's owner makes the empty schema for it, and the role loads the
    // dump without its CREATE SCHEMA (refused: the role may not create schemas, whether or not the schema exists).
    await sqlOn(pg.connectionString, 'CREATE ROLE ledger_locked LOGIN');
    await sqlOn(pg.connectionString, 'CREATE DATABASE locked');
    await sqlOn(as('postgres', 'locked'), 'CREATE SCHEMA handoff_ledger AUTHORIZATION ledger_locked');
    const existing = tool('pg_restore', 'ledger_locked', 'locked', [...restore, custom]);
    expect(existing.status).toBe(1);
    expect(existing.stderr).toContain(
      'ERROR:  permission denied for database locked\nCommand was: CREATE SCHEMA handoff_ledger;',
    );
    const toc = join(dir, 'toc');
    const listed = tool('pg_restore', 'postgres', 'locked', ['-l', custom]).stdout;
    // `pg_restore -l` reads the archive alone (no database: the -d it is given here is not used).
    writeFileSync(
      toc,
      listed
        .split('\n')
        .filter((l) => !l.includes(' SCHEMA - handoff_ledger '))
        .join('\n'),
    );
    expect(tool('pg_restore', 'ledger_locked', 'locked', [...restore, '-L', toc, custom])).toMatchObject({
      status: 0,
      stderr: '',
    });
    rmSync(join(root, 'checkpoints'), { recursive: true });
    cpSync(join(dir, 'checkpoints'), join(root, 'checkpoints'), { recursive: true });
    ledger = await openLedger({ root, host: 'h1', postgres: { connectionString: as('ledger_locked', 'locked') } });
    expect((await ledger.resume(scope))?.seq).toBe(1);
    expect((await ledger.publish(scope, sampleSummary('after'))).seq).toBe(2);
    expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
    await ledger.close();
  });
});
