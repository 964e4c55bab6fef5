/**
 * A witness's refusal is said once per ledger for a checkpoint size: the publish's background submission and the
 * `checkpoint()` (so `export`) after it hear the same refusal of the same checkpoint, and an operator reading both lines
 * on stderr would count two witnesses, or two checkpoints, refused. What is new is said: a refusal of another size,
 * another answer of the witness, the same refusal again after the witness cosigned meanwhile; and the close still names
 * the witness it leaves without a cosignature.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkCosignatures,
  cosignCheckpoint,
  encodeCosignerKey,
  parseCosignerKey,
} from '../../manifests/crypto/cosignature.js';
import { parseVerifierKey, type NoteVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { parseAddCheckpoint } from '../../manifests/witness/add-checkpoint.js';
import type { SignedCheckpoint } from '../../src/ledger/checkpoints.js';
import { openLedger } from '../../src/ledger/open.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { exportBundle } from '../../src/ops/export.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { sampleSummary } from '../support/tmp.js';
import { HandLog, listenLocal, noteSigner, stopServer } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-refusal-notices-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const witness = noteSigner('witness.example/refusals', new Uint8Array(32).fill(51));
const wvkey = encodeCosignerKey(witness.name, witness.publicKey);
const scope = { principal: 'alice', session: 's1', run: 'r1' };

describe('a ledger whose witness refuses its checkpoints (a witness of this process, `witness serve`)', () => {
  it('says each refusal once, though the publish and then checkpoint() and export each submit it', async () => {
    const root = join(base, 'store');
    const origin = 'example.com/refusal-notices';
    const first = await openLedger({ root, host: 'host-w', origin });
    const key = parseVerifierKey(first.checkpointVerifierKey);
    await first.close();
    // The witness follows the log under another key than its checkpoint key: 403, as after a `keys rotate` it was not
    // told of. The map is read at each request: setting the log's key makes it cosign.
    const otherKey = parseVerifierKey(new HandLog(origin, 52).vkey);
    const logs = new Map<string, NoteVerifierKey[]>([[origin, [otherKey]]]);
    const state = await WitnessState.open(join(base, 'state'));
    const server = createWitnessServer({ signer: witness, logs, state });
    let asked = 0;
    server.on('request', () => asked++);
    const url = await listenLocal(server);
    const notices: string[] = [];
    const ledger = await openLedger({
      root,
      host: 'host-w',
      origin,
      witnesses: { witnesses: [`${url}#${wvkey}`], timeoutMs: 5000, retryMs: 60_000 },
      onNotice: (m) => notices.push(m),
    });
    const about = () => notices.filter((m) => m.startsWith(`witness ${url} `));
    const refusal = (size: number) =>
      `witness ${url} refused the checkpoint of size ${size}: 403 the note carries no signature by a known key (the witness lists no key of this log that signed it: add this host's \`keys vkey\` to its logs.json and restart it; after \`keys rotate\`, the new one; each host of a shared store signs with its own)`;
    const cosigned = (note: string) => checkCosignatures(note, [parseCosignerKey(wvkey)]).valid.length;
    try {
      await ledger.publish(scope, sampleSummary(1));
      expect(cosigned((await ledger.checkpoint()).note)).toBe(0);
      await exportBundle(ledger, { out: join(base, 'bundle-1') });
      // The publish's round, checkpoint()'s and the export's each asked the witness.
      expect(asked).toBeGreaterThanOrEqual(3);
      expect(about()).toEqual([refusal(1)]);

      // A new checkpoint's refusal is new: said, once.
      await ledger.publish(scope, sampleSummary(2));
      expect(cosigned((await ledger.checkpoint()).note)).toBe(0);
      expect(about()).toEqual([refusal(1), refusal(2)]);

      // The witness is told of the key: it cosigns, and nothing is said of it.
      logs.set(origin, [key]);
      await ledger.publish(scope, sampleSummary(3));
      expect(cosigned((await ledger.checkpoint()).note)).toBe(1);
      expect(about()).toEqual([refusal(1), refusal(2)]);

      // It refuses again: said again.
      logs.set(origin, [otherKey]);
      await ledger.publish(scope, sampleSummary(4));
      expect(cosigned((await ledger.checkpoint()).note)).toBe(0);
      expect(about()).toEqual([refusal(1), refusal(2), refusal(4)]);
    } finally {
      await ledger.close();
      await stopServer(server);
      await state.close();
    }
    // The close still names the witness it leaves without a cosignature of the newest checkpoint.
    expect(notices.filter((m) => m.startsWith('witnesses: closing'))).toEqual([
      expect.stringContaining(`checkpoint of size 4 not cosigned by ${url} (it holds size 3)`),
    ]);
  }, 60_000);
});

describe('the witness pool, one refusal heard by several rounds', () => {
  const log = new HandLog('example.com/refusal-notices-pool', 53);
  const leaves = HandLog.leaves('r', 6);
  const fork = HandLog.leaves('f', 6);
  const checkpointOf = async (l: Uint8Array[]): Promise<SignedCheckpoint> => {
    const note = await log.note(l);
    return { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
  };

  it('says it again only when it is new: another size, another answer, or after the witness cosigned', async () => {
    // A witness that answers as it is told: a refusal (status and body), or a cosignature of what it is given.
    let answer: { status: number; body: string } | 'cosign' = { status: 422, body: 'the consistency proof fails\n' };
    let asked = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          asked++;
          const { note } = parseAddCheckpoint(Buffer.concat(chunks).toString('utf8'));
          const reply =
            answer === 'cosign'
              ? { status: 200, body: await cosignCheckpoint(note.slice(0, note.indexOf('\n\n') + 1), witness, 1) }
              : answer;
          res.writeHead(reply.status, { 'content-type': 'text/plain' });
          res.end(reply.body);
        })();
      });
    });
    const url = await listenLocal(server);
    const notices: string[] = [];
    const pool = await WitnessPool.open({
      options: { witnesses: [`${url}#${wvkey}`], timeoutMs: 5000, retryMs: 60_000 },
      checkpointStem: join(base, 'stem'),
      proof: async (oldSize, size) => log.proof(oldSize, leaves.slice(0, size)),
      notice: (m) => notices.push(m),
      checkpointKeys: () => [parseVerifierKey(log.vkey)],
    });
    const refused = (size: number, words: string) => `witness ${url} refused the checkpoint of size ${size}: ${words}`;
    try {
      const four = await checkpointOf(leaves.slice(0, 4));
      // Three rounds for one checkpoint (a publish's, checkpoint()'s, a retry's): the witness asked each time, the
      // refusal said once.
      for (let i = 0; i < 3; i++) await pool.cosign(four);
      expect(asked).toBe(3);
      expect(notices).toEqual([refused(4, '422 the consistency proof fails')]);

      // Another answer to the same checkpoint is said, and so is the first one once it comes back.
      answer = { status: 503, body: 'overloaded\n' };
      await pool.cosign(four);
      answer = { status: 422, body: 'the consistency proof fails\n' };
      await pool.cosign(four);
      await pool.cosign(four);
      expect(notices).toEqual([
        refused(4, '422 the consistency proof fails'),
        refused(4, '503 overloaded'),
        refused(4, '422 the consistency proof fails'),
      ]);
      notices.length = 0;

      // The same refusal of another size is said.
      const five = await checkpointOf(leaves.slice(0, 5));
      await pool.cosign(five);
      await pool.cosign(five);
      expect(notices).toEqual([refused(5, '422 the consistency proof fails')]);
      notices.length = 0;

      // The witness cosigns a checkpoint of size 6, then refuses another of that size (a fork) with the words it
      // said before: said again, the witness having cosigned meanwhile.
      const six = await checkpointOf(leaves);
      answer = { status: 422, body: 'the consistency proof fails\n' };
      await pool.cosign(six);
      answer = 'cosign';
      expect(checkCosignatures((await pool.cosign(six)).note, [parseCosignerKey(wvkey)]).valid).toHaveLength(1);
      answer = { status: 422, body: 'the consistency proof fails\n' };
      await pool.cosign(await checkpointOf(fork));
      expect(notices).toEqual([
        refused(6, '422 the consistency proof fails'),
        refused(6, '422 the consistency proof fails'),
      ]);
    } finally {
      await pool.close();
      await stopServer(server);
    }
  });
});
