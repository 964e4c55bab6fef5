/**
 * A witness that holds a larger tree than the checkpoint the pool submits: the pool reads the log's current tree (the
 * ledger's `checkLog`, given with `follow`). A log that has grown that far (another process of a shared log got the
 * witness there) is submitted at once and cosigned, with no notice; a log truly smaller is said to be, naming its size.
 * (The two-process case on PostgreSQL: test/witness/witness-sizes.test.ts.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkCosignatures, encodeCosignerKey, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import type { SignedCheckpoint } from '../../src/ledger/checkpoints.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { addCheckpoint, HandLog, noteSigner } from './support.js';
import { LedgerError } from '../../src/errors.js';

const base = mkdtempSync(join(tmpdir(), 'hl-witness-ahead-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const log = new HandLog('example.com/witness-ahead', 31);
const leaves = HandLog.leaves('a', 8);
const witness = noteSigner('witness.example/ahead', new Uint8Array(32).fill(32));
const wkey = parseCosignerKey(encodeCosignerKey(witness.name, witness.publicKey));
let dirs = 0;

async function checkpointOf(n: number): Promise<SignedCheckpoint> {
  const note = await log.note(leaves.slice(0, n));
  return { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
}

/**
 * A witness holding the tree of 6 leaves, and a pool whose log's current tree is that of `current` leaves (or cannot be
 * read: the error).
 */
async function scene(current: number | Error, shared = false) {
  const state = await WitnessState.open(join(base, `state-${dirs++}`));
  const server: Server = createWitnessServer({
    signer: witness,
    logs: new Map([[log.origin, [parseVerifierKey(log.vkey)]]]),
    state,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  expect((await addCheckpoint(url, await log.request(0, leaves.slice(0, 6)))).status).toBe(200);
  const notices: string[] = [];
  const pool = await WitnessPool.open({
    options: { witnesses: [url], timeoutMs: 2000, retryMs: 60_000 },
    checkpointStem: join(base, `stem-${dirs++}`),
    proof: async (oldSize, size) => log.proof(oldSize, leaves.slice(0, size)),
    notice: (m) => notices.push(m),
    checkpointKeys: () => [parseVerifierKey(log.vkey)],
    shared,
  });
  let asked = 0;
  pool.follow(async () => {
    asked++;
    if (current instanceof Error) throw current;
    return checkpointOf(current);
  });
  return {
    pool,
    notices,
    url,
    asked: () => asked,
    async close() {
      await pool.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await state.close();
    },
  };
}

describe('a witness ahead of the checkpoint submitted', () => {
  it("gets the log's current tree when the log has grown that far: cosigned, no notice", async () => {
    const s = await scene(6);
    try {
      // The 4-leaf checkpoint is behind the witness (6): the round goes on with the log's current tree.
      await s.pool.cosign(await checkpointOf(4));
      const cp = await s.pool.cosign(await checkpointOf(6));
      expect(checkCosignatures(cp.note, [wkey]).valid).toHaveLength(1);
      expect(s.asked()).toBe(1);
      expect(s.notices).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("is said to hold a larger tree only when the log truly is smaller, naming the log's current size", async () => {
    const s = await scene(5);
    try {
      const cp = await s.pool.cosign(await checkpointOf(4));
      expect(checkCosignatures(cp.note, [wkey]).valid).toHaveLength(0);
      expect(s.notices.filter((n) => n.includes('holds a tree of 6 entries, larger than this log'))).toEqual([
        expect.stringContaining("larger than this log's 5"),
      ]);
    } finally {
      await s.close();
    }
  });

  it("says nothing of the log's size when its current tree cannot be read, only why", async () => {
    const s = await scene(new Error('the pin cannot be read'));
    try {
      const cp = await s.pool.cosign(await checkpointOf(4));
      expect(checkCosignatures(cp.note, [wkey]).valid).toHaveLength(0);
      expect(s.notices).toEqual(["witnesses: cannot read the log's current tree: the pin cannot be read"]);
    } finally {
      await s.close();
    }
  });

  it("says that the log's current tree cannot be read once for a checkpoint size and kind of failure, not each round", async () => {
    const failure = new Error('the pin cannot be read: read 1');
    const s = await scene(failure);
    const unread = (words: string) => `witnesses: cannot read the log's current tree: ${words}`;
    try {
      // Three rounds of one checkpoint (a publish's, checkpoint()'s, a retry's) need the tree; its error's words vary.
      for (let i = 1; i <= 3; i++) {
        failure.message = `the pin cannot be read: read ${i}`;
        await s.pool.cosign(await checkpointOf(4));
      }
      expect(s.asked()).toBe(3);
      expect(s.notices).toEqual([unread('the pin cannot be read: read 1')]);
      // A new checkpoint: said again, once.
      for (const i of [4, 5]) {
        failure.message = `the pin cannot be read: read ${i}`;
        await s.pool.cosign(await checkpointOf(5));
      }
      expect(s.notices).toEqual([unread('the pin cannot be read: read 1'), unread('the pin cannot be read: read 4')]);
      // Another kind of failure (its code) of the same checkpoint: said.
      Object.assign(failure, { code: 'FORK', message: 'the log does not extend the pinned checkpoint' });
      await s.pool.cosign(await checkpointOf(5));
      await s.pool.cosign(await checkpointOf(5));
      expect(s.notices).toEqual([
        unread('the pin cannot be read: read 1'),
        unread('the pin cannot be read: read 4'),
        unread('the log does not extend the pinned checkpoint'),
      ]);
    } finally {
      await s.close();
    }
  });

  describe('the closing notice says what the next submission does with it', () => {
    const then =
      "the next publish, checkpoint or export with these witnesses submits the log's newest tree to each, from the size it holds";
    const larger =
      "a witness that holds a larger tree than the log's cosigns none of it until the log extends that tree, which a log restored from a backup older than that tree never does (README, Witnesses after a restore)";
    const closing = (notices: string[]) => notices.filter((n) => n.startsWith('witnesses: closing'));

    it("the log's tree read smaller than the witness's (a restore): it cosigns nothing the log does not extend its tree with", async () => {
      const s = await scene(5, true);
      await s.pool.cosign(await checkpointOf(4));
      await s.close();
      expect(closing(s.notices)).toEqual([
        // The log's newer tree (5) became the checkpoint submitted.
        `witnesses: closing with the checkpoint of size 5 not cosigned by ${s.url} (it holds a tree of 6 entries, larger than this log's 5); ${then}; ${larger}`,
      ]);
    });

    it('a log no other process appends to, its tree unread as the ledger closes: larger than the log, as its checkpoint is the log', async () => {
      const s = await scene(new LedgerError('CLOSED', 'the ledger is closed'));
      await s.pool.cosign(await checkpointOf(4));
      await s.close();
      expect(closing(s.notices)).toEqual([
        `witnesses: closing with the checkpoint of size 4 not cosigned by ${s.url} (it holds a tree of 6 entries, larger than this log's 4); ${then}; ${larger}`,
      ]);
    });

    it("a shared log's tree unread as the ledger closes: either outcome, each said", async () => {
      const s = await scene(new LedgerError('CLOSED', 'the ledger is closed'), true);
      await s.pool.cosign(await checkpointOf(4));
      await s.close();
      expect(closing(s.notices)).toEqual([
        `witnesses: closing with the checkpoint of size 4 not cosigned by ${s.url} (it holds size 6, larger than this checkpoint; the log's current size was not read before the close); ${then}; one that holds more than this checkpoint cosigns the log's tree if another process of this shared log has published that far, and none of it if the log is smaller (restored from a backup older than that tree)`,
      ]);
    });
  });
});
