/**
 * A checkpoint submitted while the pool's rounds are ending is never dropped: it is either taken by the rounds under
 * way or starts rounds of its own. (The pool cleared its "rounds under way" mark a few microtasks after the rounds had
 * found nothing newer to submit; a submit in between only marked "again" for rounds that had already ended, and that
 * checkpoint went to no witness until the next submit.)
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { tempDir } from '../support/tmp.js';
import { HandLog } from './support.js';

const MAX = 2 ** 31 - 1;
const log = new HandLog('example.com/submit-race', 4);

async function checkpointOf(size: number) {
  const note = await log.note(HandLog.leaves('t', size));
  return { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
}

/** `p`, then `n` more microtask turns (plain reactions: one turn each). */
function turnsAfter(p: Promise<unknown>, n: number): Promise<unknown> {
  let chained = p;
  for (let i = 0; i < n; i++) chained = chained.then(() => undefined);
  return chained;
}

describe('a checkpoint submitted as the rounds end', () => {
  it('is sent, whichever microtask of the ending it lands in', async () => {
    // A witness that answers every submission 500 (a failed round: the pool schedules no retry within this test).
    const sizes: number[] = [];
    const server: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const size = /^[^\n]*\n(\d+)\n/m.exec(body.slice(body.indexOf('\n\n') + 2));
        sizes.push(size ? Number(size[1]) : -1);
        res.statusCode = 500;
        res.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const [first, second] = [await checkpointOf(2), await checkpointOf(3)];
    try {
      for (let turn = 0; turn <= 8; turn++) {
        sizes.length = 0;
        const pool = await WitnessPool.open({
          options: { witnesses: [url], timeoutMs: 30_000, retryMs: MAX, closeWaitMs: 0 },
          checkpointStem: join(tempDir(), 'stem'),
          proof: async () => [],
          notice: () => {},
          checkpointKeys: () => [parseVerifierKey(log.vkey)],
        });
        try {
          // The round of `first` ends with the sizes' save: `second` is submitted `turn` microtasks after it settles,
          // which sweeps the steps of the rounds' ending (the loop's test, the rounds' settling, what follows).
          const internals = pool as unknown as { saveSizes(): Promise<void> };
          const save = internals.saveSizes.bind(pool);
          let armed = true;
          internals.saveSizes = () => {
            const saved = save();
            if (armed) {
              armed = false;
              void turnsAfter(saved, turn).then(() => pool.submit(second));
            }
            return saved;
          };
          pool.submit(first);
          const until = Date.now() + 10_000;
          while (!sizes.includes(3) && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
          expect(sizes, `submitted ${turn} microtasks after the round's last save`).toContain(3);
        } finally {
          await pool.close();
        }
      }
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
