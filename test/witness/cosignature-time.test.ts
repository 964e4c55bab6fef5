/**
 * A witness's cosignature times never go back for a log: each is signed at the later of the clock and the last time it
 * signed for that log, which its state keeps. A clock stepped back (NTP, a VM restored) must not date a cosignature of a
 * later tree before one of an earlier tree, across a restart too, and a record of an earlier version (no time of its
 * own) is read for the time on the witness's line in its note.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkCosignatures, encodeCosignerKey, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { tempDir } from '../support/tmp.js';
import { addCheckpoint, HandLog, noteSigner } from './support.js';

const log = new HandLog('example.com/cosignature-time', 11);
const leaves = HandLog.leaves('t', 8);
const witness = noteSigner('witness.example/time', new Uint8Array(32).fill(12));
const wkey = parseCosignerKey(encodeCosignerKey(witness.name, witness.publicKey));

async function started(dir: string, clock: { now: number }) {
  const state = await WitnessState.open(dir);
  const server = createWitnessServer({
    signer: witness,
    logs: new Map([[log.origin, [parseVerifierKey(log.vkey)]]]),
    state,
    now: () => clock.now,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    /** The time of the cosignature the witness answers for the tree of the first `n` leaves, from `old`. */
    async cosign(old: number, n: number): Promise<number> {
      const r = await addCheckpoint(url, await log.request(old, leaves.slice(0, n)));
      expect(r.status, r.text).toBe(200);
      const note = await log.note(leaves.slice(0, n));
      return checkCosignatures(`${note}${r.text}`, [wkey]).valid[0]!.timestamp;
    },
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await server.settled();
      await state.close();
    },
  };
}

describe('cosignature times', () => {
  it('never go back for a later tree: not when the clock steps back, not across a restart, not from an older record', async () => {
    const dir = join(tempDir(), 'state');
    const clock = { now: 2_000_000 };
    let w = await started(dir, clock);
    expect(await w.cosign(0, 2)).toBe(2_000_000);
    clock.now = 1_000_000; // the clock steps back
    expect(await w.cosign(2, 3)).toBe(2_000_000);
    expect(await w.cosign(3, 3)).toBe(2_000_000); // a replay of the tree it holds too
    clock.now = 2_000_010;
    expect(await w.cosign(3, 4)).toBe(2_000_010);
    await w.stop();

    // Restarted with the clock further back: the time kept in the state holds.
    clock.now = 1_500_000;
    w = await started(dir, clock);
    expect(await w.cosign(4, 5)).toBe(2_000_010);
    await w.stop();

    // A record of an earlier version carries no time of its own: the time on the witness's line in its note is read.
    const file = join(dir, 'logs', readdirSync(join(dir, 'logs'))[0]!);
    const record = JSON.parse(readFileSync(file, 'utf8')) as { timestamp?: number };
    expect(record.timestamp).toBe(2_000_010);
    delete record.timestamp;
    writeFileSync(file, `${JSON.stringify(record)}\n`);
    w = await started(dir, clock);
    try {
      expect(await w.cosign(5, 6)).toBe(2_000_010);
    } finally {
      await w.stop();
    }
  });
});
