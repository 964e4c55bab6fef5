import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle, type ExportSource } from '../../src/ops/export.js';
import { sampleSummary, tempDir } from '../support/tmp.js';

/**
 * A source whose checkpoints carry no session-heads line (an `ExportSource` of its own, or a log whose index cannot
 * give its root): a filtered export has no heads to prove, but must still hold every chain of the principal that is
 * inside the tree it cuts at, one begun between the log's read snapshot and the checkpoint included.
 */
describe('a filtered export cut at a checkpoint without a session-heads line', () => {
  it('holds a session the principal began between the read snapshot and the checkpoint', async () => {
    const dir = tempDir();
    const ledger = await openLedger({ root: join(dir, 'store'), host: 'host-a', onNotice: () => {} });
    try {
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a0'));
      await ledger.publish({ principal: 'bob', session: 's2', run: 'r1' }, sampleSummary('b0'));
      let raced = false;
      const source: ExportSource = {
        host: ledger.host,
        log: ledger.log,
        blobs: ledger.blobs,
        checkpoint: async () => {
          // alice begins s9 after the export took its snapshot, before the checkpoint it cuts at.
          if (!raced) {
            raced = true;
            await ledger.publish({ principal: 'alice', session: 's9', run: 'r1' }, sampleSummary('a9'));
          }
          const c = await ledger.checkpoint();
          return { note: c.note, checkpoint: { ...c.checkpoint, extensions: [] } };
        },
      };
      expect(ledger.log.readSnapshot).toBeTypeOf('function'); // the snapshot path is the one under test
      const out = join(dir, 'bundle');
      const result = await exportBundle(source, { out, principal: 'alice' });
      const sessions = readFileSync(join(out, 'manifests.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map(
          (l) => (JSON.parse(Buffer.from(JSON.parse(l).payload, 'base64').toString()) as { session: string }).session,
        );
      expect(sessions).toEqual(['s1', 's9']);
      expect(result.header.counts).toEqual({ manifests: 2, chains: 2 });
    } finally {
      await ledger.close();
    }
  });
});
