/**
 * One witness URL, two keys: C2SP tlog-witness lets a witness answer "one or more signature lines", cosignatures
 * from its key(s), so a log operator pins each key as an entry of its own (`URL#VKEY_A`, `URL#VKEY_B`). Each entry's
 * valid cosignature is kept: the pool once kept its lines per URL, so the second entry's answer replaced the first's
 * and the checkpoint carried one cosignature where two were given (and the first key was counted as cosigned).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkCosignatures,
  cosignCheckpoint,
  encodeCosignerKey,
  parseCosignerKey,
} from '../../manifests/crypto/cosignature.js';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { answeringWitness, HandLog, noteSigner } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-one-url-two-keys-'));
const log = new HandLog('example.com/one-url-two-keys', 41);
const leaves = HandLog.leaves('k', 3);
const a = noteSigner('witness.example/a', new Uint8Array(32).fill(42));
const b = noteSigner('witness.example/b', new Uint8Array(32).fill(43));
const vkeyA = encodeCosignerKey(a.name, a.publicKey);
const vkeyB = encodeCosignerKey(b.name, b.publicKey);

let witness: Awaited<ReturnType<typeof answeringWitness>>;
let url: string;

beforeAll(async () => {
  // A witness of two keys: every add-checkpoint is answered with a cosignature by each.
  witness = await answeringWitness(
    async (text) => (await cosignCheckpoint(text, a, 1_700_000_000)) + (await cosignCheckpoint(text, b, 1_700_000_000)),
  );
  url = witness.url;
});
afterAll(async () => {
  await witness.close();
  rmSync(base, { recursive: true, force: true });
});

describe('one witness URL pinned under two keys', () => {
  it("keeps each key's cosignature", async () => {
    const notices: string[] = [];
    const pool = await WitnessPool.open({
      options: { witnesses: [`${url}#${vkeyA}`, `${url}#${vkeyB}`], timeoutMs: 5000, retryMs: 60_000 },
      checkpointStem: join(base, 'stem'),
      proof: async (oldSize, size) => log.proof(oldSize, leaves.slice(0, size)),
      notice: (m) => notices.push(m),
      checkpointKeys: () => [parseVerifierKey(log.vkey)],
    });
    try {
      const note = await log.note(leaves);
      const cp = await pool.cosign({ note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) });
      const valid = checkCosignatures(cp.note, [parseCosignerKey(vkeyA), parseCosignerKey(vkeyB)]).valid;
      expect(valid.map((c) => c.name).sort()).toEqual([a.name, b.name]);
      expect(notices).toEqual([]);
    } finally {
      await pool.close();
    }
  });
});
