/**
 * The consistency proof a witness needs is made by the log, before the request: its failure (a damaged tree, a
 * database that does not answer) is the log's, and is said so, never as the witness's; and the time it takes is not
 * taken from the witness's deadline, which is the witness's own to answer in.
 */
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkCosignatures, encodeCosignerKey, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import type { SignedCheckpoint } from '../../src/ledger/checkpoints.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from '../support/settled.js';
import { tempDir } from '../support/tmp.js';
import { addCheckpoint, HandLog, noteSigner } from './support.js';

const log = new HandLog('example.com/proof-failure', 41);
const leaves = HandLog.leaves('p', 8);
const witness = noteSigner('witness.example/proof', new Uint8Array(32).fill(42));
const wkey = parseCosignerKey(encodeCosignerKey(witness.name, witness.publicKey));

async function checkpointOf(n: number): Promise<SignedCheckpoint> {
  const note = await log.note(leaves.slice(0, n));
  return { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
}

/** A witness holding the tree of 2 leaves, and a pool that learns it from a 409 and then needs a proof from 2. */
async function scene(
  proof: (oldSize: number, size: number, signal: AbortSignal) => Promise<Uint8Array[]>,
  timeoutMs: number,
  closeWaitMs?: number,
) {
  const dir = tempDir();
  const state = await WitnessState.open(join(dir, 'state'));
  const server = createWitnessServer({
    signer: witness,
    logs: new Map([[log.origin, [parseVerifierKey(log.vkey)]]]),
    state,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  expect((await addCheckpoint(url, await log.request(0, leaves.slice(0, 2)))).status).toBe(200);
  const notices: string[] = [];
  const pool = await WitnessPool.open({
    options: { witnesses: [url], timeoutMs, retryMs: 60_000, ...(closeWaitMs !== undefined && { closeWaitMs }) },
    checkpointStem: join(dir, 'stem'),
    proof,
    notice: (m) => notices.push(m),
    checkpointKeys: () => [parseVerifierKey(log.vkey)],
  });
  return {
    url,
    pool,
    notices,
    async close() {
      await pool.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await server.settled();
      await state.close();
    },
  };
}

describe('the consistency proof for a witness', () => {
  it("that the log cannot make is said to be the log's failure, not the witness's", async () => {
    const damaged = Object.assign(new Error('the tree is damaged at node 3'), { code: 'TREE_DAMAGED' });
    const s = await scene(async () => {
      throw damaged;
    }, 5000);
    try {
      const cp = await s.pool.cosign(await checkpointOf(5));
      expect(checkCosignatures(cp.note, [wkey]).valid).toHaveLength(0);
      expect(s.notices).toHaveLength(1);
      // Not "witness URL gave no usable answer: …": the witness answered (its 409), and was never asked again.
      expect(s.notices[0]).not.toMatch(/no usable answer|unreachable|no complete answer/);
      expect(s.notices[0]).toContain('cannot make the consistency proof from size 2 to 5');
      expect(s.notices[0]).toContain(s.url);
      expect(s.notices[0]).toContain('the tree is damaged at node 3');
      // Said once for the checkpoint, however many rounds meet it.
      await s.pool.cosign(await checkpointOf(5));
      expect(s.notices).toHaveLength(1);
    } finally {
      await s.close();
    }
  });

  it('that takes longer than the request deadline leaves the witness its whole deadline: cosigned, no notice', async () => {
    // The proof outlasts the deadline (a large tree, a slow database); the witness answers at once.
    const timeoutMs = 1000;
    const s = await scene(async (oldSize, size) => {
      await new Promise((r) => setTimeout(r, timeoutMs * 1.5));
      return log.proof(oldSize, leaves.slice(0, size));
    }, timeoutMs);
    try {
      const cp = await s.pool.cosign(await checkpointOf(5));
      expect(s.notices).toEqual([]);
      expect(checkCosignatures(cp.note, [wkey]).valid).toHaveLength(1);
    } finally {
      await s.close();
    }
  });

  it('still being made when the pool closes is not waited for: the close cuts it as it cuts a request', async () => {
    // A proof that never ends on its own (a database that stopped answering): close() must not wait for it.
    let called!: () => void;
    const asked = new Promise<void>((r) => (called = r));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let given: AbortSignal | undefined;
    const s = await scene(
      async (oldSize, size, signal) => {
        given = signal;
        called();
        await held;
        return log.proof(oldSize, leaves.slice(0, size));
      },
      60_000,
      0,
    );
    try {
      s.pool.submit(await checkpointOf(5));
      await asked;
      expect(await settledWithin(s.pool.close(), ENDS_AT_SIGNAL_MS)).toBe('settled');
      // The proof was told of the close, and the witness is said to be left uncosigned, not waited for; no failure
      // of the log or of the witness is said.
      expect(given?.aborted).toBe(true);
      expect(s.notices).toHaveLength(1);
      expect(s.notices[0]).toContain('closing with the checkpoint of size 5 not cosigned');
      expect(s.notices[0]).toContain(`${s.url} (not waited for; it holds size 2)`);
    } finally {
      release();
      await s.close();
    }
  });
});
