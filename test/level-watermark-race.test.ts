/**
 * The embedded log's watermark raise (a resume's `setWatermark`) is ordered with the append batches: one that read
 * the watermark before a batch of its session committed must not store its lower mark after it (the head would
 * then be above the stored watermark, and a rollback to the lower seq would pass the check after a restart), and a
 * read of the mark that was in flight meanwhile must not put the lower one back in memory.
 */
import { expect, it } from 'vitest';
import { Level } from 'level';
import { join } from 'node:path';
import { openLedger } from '../src/ledger/open.js';
import { writeSyncedBatch } from '../manifests/log/level/tables.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { chainLink } from './support/chain-link.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

it('a watermark raised while an append of the session is being written never ends below the new head', async () => {
  const root = tempDir();
  let ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
  for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
  await ledger.close();
  // A store whose watermark record is missing (one written before watermarks were): the raise reads it from disk.
  const db = new Level<string, string>(join(root, 'manifests-v1'));
  await db.open();
  await db.del('w!s');
  await db.close();
  let race: (() => Promise<unknown>) | undefined;
  let raced: Promise<unknown> | undefined;
  ledger = await openLedger({
    root,
    host: 'h',
    onNotice: () => {},
    levelLog: {
      writeBatch: async (d, ops) => {
        const r = race;
        race = undefined;
        if (r) raced = r(); // a resume of seq 2 records it while the append of seq 3 is being synced
        await writeSyncedBatch(d, ops);
      },
    },
  });
  try {
    race = () => ledger.log.setWatermark('s', 2);
    const receipt = await ledger.publish(scope, sampleSummary('next'));
    await raced;
    expect(receipt.seq).toBe(3);
    expect(await (ledger.log as LevelManifestLog).raw.get('w!s')).toBe('3');
    expect(await ledger.log.getWatermark('s')).toBe(3);
  } finally {
    await ledger.close();
  }
  // After a restart too: the stored mark is the head's.
  ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
  try {
    expect(await ledger.log.getWatermark('s')).toBe(3);
    expect(ledger.recovery.headProblems).toEqual([]);
  } finally {
    await ledger.close();
  }
});

it("a resume's watermark raise is a synced write, as the append's batch that raises it is", async () => {
  // The watermark is the rollback defence of a session: a raise that a power loss could take back would let a
  // rolled-back head pass after the restart. LevelDB's put without `sync` survives a process crash only.
  const root = tempDir();
  const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
  try {
    await ledger.publish(scope, sampleSummary(0));
    const db = (ledger.log as LevelManifestLog).raw;
    const puts: Array<{ key: string; options: unknown }> = [];
    const put = db.put.bind(db);
    db.put = ((key: string, value: string, options?: unknown) => {
      puts.push({ key, options });
      return put(key, value, options as never);
    }) as typeof db.put;
    await ledger.log.setWatermark('s', 7);
    expect(puts).toEqual([{ key: 'w!s', options: { sync: true } }]);
    expect(await ledger.log.getWatermark('s')).toBe(7);
  } finally {
    await ledger.close();
  }
});

it('a watermark read that was in flight while the mark was raised does not put the lower mark back in memory', async () => {
  const dir = join(tempDir(), 'log');
  const link = (seq: number) => chainLink('s', seq);
  let log = await LevelManifestLog.open(dir);
  await log.append(link(0));
  await log.close();
  // Reopened: no mark in memory. The first read of it answers what it read (0) only once the gate opens.
  log = await LevelManifestLog.open(dir);
  try {
    const db = log.raw;
    const get = db.get.bind(db);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let held = false;
    db.get = (async (key: string, options?: unknown) => {
      const value = await get(key, options as never);
      if (key === 'w!s' && !held) {
        held = true;
        await gate;
      }
      return value;
    }) as typeof db.get;
    const stale = log.getWatermark('s');
    while (!held) await new Promise((r) => setImmediate(r));
    // Meanwhile the mark is raised above the head (ManifestLog.setWatermark: the chain was cut back).
    await log.setWatermark('s', 5);
    open();
    expect(await stale).toBe(5);
    // Before: the read put its 0 in memory over the 5, an append at seq 1 passed the cut-back rule, and its batch
    // stored the mark 1, below the 5 already stored.
    expect(await log.getWatermark('s')).toBe(5);
    await expect(log.append(link(1))).rejects.toMatchObject({ name: 'ManifestError', code: 'ROLLBACK' });
    expect(await get('w!s')).toBe('5');
    expect((await log.head('s'))?.seq).toBe(0);
  } finally {
    await log.close();
  }
});
