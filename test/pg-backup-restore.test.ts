/**
 * README, "Operating it", Backups, as an operator follows it on PostgreSQL: `pg_dump --schema handoff_ledger` holds the
 * log but not the host's pin (`checkpoints/` in its root). The dump restored under a pin written after it is refused
 * `ROLLBACK`; with the root's `checkpoints/` copied before the dump and put back with it, or with the pin moved aside,
 * the restored store opens, resumes what it holds, publishes and passes fsck.
 */
import { cpSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { describePostgres, pgClientToolOut, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

describePostgres('a PostgreSQL store restored from pg_dump (README, Backups)', (pg) => {
  const tool = (name: string, args: string[]) => pgClientToolOut(pg, name, args);

  it('opens once the pin from before the dump is put back, or moved aside; refuses ROLLBACK under a newer pin', async () => {
    const root = tempDir();
    const open = () => openLedger({ root, host: 'h1', postgres: { connectionString: pg.connectionString } });
    const scope = { principal: 'alice', session: 's1', run: 'r' };
    let ledger = await open();
    await ledger.publish(scope, sampleSummary(1));
    await ledger.publish(scope, sampleSummary(2));
    await ledger.publish({ ...scope, session: 's2' }, sampleSummary(3));
    await ledger.close();
    // The backup: the root's checkpoints/ first, then the dump.
    const savedPins = join(tempDir(), 'checkpoints');
    cpSync(join(root, 'checkpoints'), savedPins, { recursive: true });
    const dump = join(tempDir(), 'dump.sql');
    writeFileSync(dump, tool('pg_dump', ['--schema', 'handoff_ledger']));
    // Published after the backup.
    ledger = await open();
    await ledger.publish(scope, sampleSummary(4));
    await ledger.publish(scope, sampleSummary(5));
    await ledger.close();
    const restoreDump = async () => {
      await sqlOn(pg.connectionString, 'DROP SCHEMA handoff_ledger CASCADE');
      tool('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-f', dump]);
    };

    await restoreDump();
    // The refusal every command of the host meets says what the README's Backups says to do, naming the pin.
    const [pinned] = readdirSync(join(root, 'checkpoints')).filter((name) => name.endsWith('.pin'));
    await expect(open()).rejects.toMatchObject({
      code: 'ROLLBACK',
      message: expect.stringContaining(
        `the tree has 3 entries, 5 were pinned (${JSON.stringify(join(root, 'checkpoints', pinned!))}): entries the log ` +
          "held are gone. A store restored from a backup: put back this root's checkpoints/ from the same backup, or, " +
          'without a copy, move the pin aside (README "Backups"); otherwise keep the pin as evidence and run fsck',
      ) as unknown,
    });
    // The pins from the backup put back: the store resumes what it holds, publishes on, and fsck finds nothing.
    rmSync(join(root, 'checkpoints'), { recursive: true });
    cpSync(savedPins, join(root, 'checkpoints'), { recursive: true });
    ledger = await open();
    expect((await ledger.resume(scope))?.seq).toBe(1);
    expect((await ledger.publish(scope, sampleSummary('after'))).seq).toBe(2);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();

    // Without a copy of the pins: restored again (the pin is at 4 now), the pin moved aside.
    await restoreDump();
    await expect(open()).rejects.toMatchObject({ code: 'ROLLBACK' });
    const [pin] = readdirSync(join(root, 'checkpoints')).filter((name) => name.endsWith('.pin'));
    renameSync(join(root, 'checkpoints', pin!), join(tempDir(), pin!));
    ledger = await open();
    expect((await ledger.resume(scope))?.seq).toBe(1);
    expect((await ledger.publish(scope, sampleSummary('after'))).seq).toBe(2);
    expect((await fsck(ledger)).ok).toBe(true);
    expect((await ledger.checkpoint()).checkpoint.size).toBe(4);
    await ledger.close();
  });
});
