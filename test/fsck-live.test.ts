/**
 * fsck beside live appends on the embedded store: a library that publishes and checks its store in one process
 * (the store's lock keeps other processes out). The view is a LevelDB snapshot taken while no batch is written.
 */
import { describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Level } from 'level';
import { digestOf } from '../store/hash/digest.js';
import { LevelManifestLog, type BatchOp } from '../manifests/log/level/log.js';
import { writeSyncedBatch } from '../manifests/log/level/tables.js';
import type { AppendRequest } from '../manifests/log/log.js';
import { openLedger } from '../src/ledger/open.js';
import { liveFsckCases } from './support/fsck-live.js';
import { tempDir } from './support/tmp.js';

const link = (session: string, seq: number): AppendRequest => ({
  session,
  principal: 'alice',
  seq,
  prev: null,
  id: digestOf(new TextEncoder().encode(`${session}/${seq}`)),
  envelope: `{"payload":"${Buffer.from(`${session}/${seq}`).toString('base64')}"}`,
});

describe('fsck on a live embedded store', () => {
  const openStore = async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    return {
      ledger,
      cleanup: async () => {
        await ledger.close();
        await rm(root, { recursive: true, force: true });
      },
    };
  };

  liveFsckCases(openStore);

  it('takes its snapshot between two batches: the tree of the view is the tree of its entries', async () => {
    // A view asked for right after a batch reached LevelDB, before the log took in the batch's new tree: it waits
    // for the batch to finish, and sees the entries and the tree of the same moment.
    const opened: { log?: LevelManifestLog } = {};
    let asked: Promise<{ size: number; entries: number }> | undefined;
    const writeBatch = async (db: Level<string, string>, ops: BatchOp[]) => {
      await writeSyncedBatch(db, ops);
      asked ??= opened.log!.readSnapshot(async (view) => {
        let entries = 0;
        for await (const _ of view.entries()) entries++;
        return { size: (await view.treeHead()).size, entries };
      });
    };
    const root = tempDir();
    const log = (opened.log = await LevelManifestLog.open(join(root, 'log'), { writeBatch }));
    try {
      await log.append(link('s', 0));
      expect(await asked).toEqual({ size: 1, entries: 1 });
    } finally {
      await log.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});
