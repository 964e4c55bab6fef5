/**
 * A witness whose requests get no answer (a closed port, a server that accepts and never answers, one that answers no
 * HTTP) is said down once for a checkpoint size: the publish's background round, `checkpoint()` after it and every
 * retry of that size hear the same failure, and a long-running host whose witness is down wrote a line a minute, for as
 * long as the outage lasted. A new checkpoint (a publish) says it again, so a long outage stays visible at the rate of
 * publishes; a failure of another kind is said; the kind counts, not the error's words (an address, an errno, the
 * cause fetch keeps); a witness said down that cosigns again is said to answer again; and the close still names the
 * witness it leaves without a cosignature.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  checkCosignatures,
  cosignCheckpoint,
  encodeCosignerKey,
  parseCosignerKey,
} from '../../manifests/crypto/cosignature.js';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { parseAddCheckpoint } from '../../manifests/witness/add-checkpoint.js';
import type { SignedCheckpoint } from '../../src/ledger/checkpoints.js';
import { openLedger } from '../../src/ledger/open.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { sampleSummary } from '../support/tmp.js';
import { HandLog, listenLocal, noteSigner, stopServer } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-unanswered-notices-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());
const witness = noteSigner('witness.example/unanswered', new Uint8Array(32).fill(61));
const wvkey = encodeCosignerKey(witness.name, witness.publicKey);
const scope = { principal: 'alice', session: 's1', run: 'r1' };
let dirs = 0;

/** A port nothing listens on: one taken and let go. */
async function closedPort(): Promise<string> {
  const gone = createTcpServer();
  return new Promise<string>((resolve) =>
    gone.listen(0, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
      gone.close(() => resolve(url));
    }),
  );
}

/** How many requests the ledger made to `url` (fetch is watched, not replaced). */
function countRequests(): (url: string) => number {
  const spy = vi.spyOn(globalThis, 'fetch');
  return (url) => spy.mock.calls.filter(([u]) => String(u).startsWith(`${url}/`)).length;
}

describe('a ledger whose witness is down', () => {
  for (const [name, timeoutMs, down, said] of [
    [
      'a closed port',
      5000,
      async () => ({ url: await closedPort(), close: async () => {} }),
      (url: string) => new RegExp(`^witness ${url} is unreachable: fetch failed: connect ECONNREFUSED`),
    ],
    [
      'a server that accepts and never answers',
      300,
      async () => {
        const server = createServer(() => {});
        return { url: await listenLocal(server), close: () => stopServer(server) };
      },
      (url: string) => new RegExp(`^witness ${url} sent no complete answer within 300 ms$`),
    ],
  ] as const)
    it(`says it once per checkpoint size, not at each round or retry: ${name}`, async () => {
      const asked = countRequests();
      const w = await down();
      const notices: string[] = [];
      const ledger = await openLedger({
        root: join(base, `store-${dirs++}`),
        host: 'host-u',
        origin: `example.com/unanswered-${dirs}`,
        // Retries from 20 ms: many rounds of one checkpoint within the test.
        witnesses: { witnesses: [`${w.url}#${wvkey}`], timeoutMs, retryMs: 20 },
        onNotice: (m) => notices.push(m),
      });
      const about = () => notices.filter((m) => m.startsWith(`witness ${w.url} `));
      try {
        await ledger.publish(scope, sampleSummary(1));
        expect(checkCosignatures((await ledger.checkpoint()).note, [parseCosignerKey(wvkey)]).valid).toHaveLength(0);
        // The publish's round, checkpoint()'s and the retries: asked again and again.
        await expect.poll(() => asked(w.url), { timeout: 30_000 }).toBeGreaterThanOrEqual(5);
        expect(about()).toEqual([expect.stringMatching(said(w.url))]);

        // A new checkpoint: said again, once, however many retries follow.
        await ledger.publish(scope, sampleSummary(2));
        const before = asked(w.url);
        await ledger.checkpoint();
        await expect.poll(() => asked(w.url), { timeout: 30_000 }).toBeGreaterThanOrEqual(before + 4);
        expect(about()).toEqual([expect.stringMatching(said(w.url)), expect.stringMatching(said(w.url))]);
      } finally {
        await ledger.close();
        await w.close();
      }
      // The close still names the witness it leaves without a cosignature of the newest checkpoint.
      expect(notices.filter((m) => m.startsWith('witnesses: closing'))).toEqual([
        expect.stringContaining(`checkpoint of size 2 not cosigned by ${w.url}`),
      ]);
    }, 90_000);
});

describe('the witness pool, a witness down then back', () => {
  const log = new HandLog('example.com/unanswered-pool', 62);
  const leaves = HandLog.leaves('u', 6);
  const checkpointOf = async (n: number): Promise<SignedCheckpoint> => {
    const note = await log.note(leaves.slice(0, n));
    return { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
  };

  it('says a failure again only when it is new: another kind, another size, or after the witness cosigned; and says it answers again', async () => {
    // A witness that does as it is told: never answer, close the connection, redirect, refuse, or cosign.
    let mode: 'silent' | 'cut' | 'redirect' | 'refuse' | 'cosign' = 'silent';
    let asked = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        asked++;
        if (mode === 'silent') return;
        if (mode === 'cut') return void req.socket.destroy();
        if (mode === 'redirect') {
          res.writeHead(301, { location: 'https://witness.example/add-checkpoint' });
          return void res.end();
        }
        if (mode === 'refuse') {
          res.writeHead(422, { 'content-type': 'text/plain' });
          return void res.end('the consistency proof fails\n');
        }
        void (async () => {
          const { note } = parseAddCheckpoint(Buffer.concat(chunks).toString('utf8'));
          const body = await cosignCheckpoint(note.slice(0, note.indexOf('\n\n') + 1), witness, 1);
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end(body);
        })();
      });
    });
    const url = await listenLocal(server);
    const notices: string[] = [];
    const pool = await WitnessPool.open({
      options: { witnesses: [`${url}#${wvkey}`], timeoutMs: 300, retryMs: 60_000 },
      checkpointStem: join(base, 'stem'),
      proof: async (oldSize, size) => log.proof(oldSize, leaves.slice(0, size)),
      notice: (m) => notices.push(m),
      checkpointKeys: () => [parseVerifierKey(log.vkey)],
    });
    const silent = `witness ${url} sent no complete answer within 300 ms`;
    const unusable = expect.stringMatching(new RegExp(`^witness ${url} gave no usable answer: `));
    const refused = (size: number) =>
      `witness ${url} refused the checkpoint of size ${size}: 422 the consistency proof fails`;
    try {
      const four = await checkpointOf(4);
      // Three rounds of one checkpoint (a publish's, checkpoint()'s, a retry's): asked each time, said once.
      for (let i = 0; i < 3; i++) await pool.cosign(four);
      expect(asked).toBe(3);
      expect(notices).toEqual([silent]);

      // Another kind of failure is said; its words vary (the connection closed, a redirect), its kind does not: once.
      for (const m of ['cut', 'redirect', 'cut'] as const) {
        mode = m;
        await pool.cosign(four);
      }
      expect(asked).toBe(6);
      expect(notices).toEqual([silent, unusable]);
      // The first of them is said (the connection closed), not the redirect after it.
      expect(notices[1]).toContain('other side closed');
      // Back to the first kind: said again (the last line said of the witness is what it does now).
      mode = 'silent';
      await pool.cosign(four);
      expect(notices).toEqual([silent, unusable, silent]);
      notices.length = 0;

      // A new checkpoint: said again, once.
      const five = await checkpointOf(5);
      await pool.cosign(five);
      await pool.cosign(five);
      expect(notices).toEqual([silent]);

      // It answers again and cosigns: said, in one line.
      mode = 'cosign';
      expect(checkCosignatures((await pool.cosign(five)).note, [parseCosignerKey(wvkey)]).valid).toHaveLength(1);
      expect(notices).toEqual([silent, `witness ${url} answers again: it cosigned the checkpoint of size 5`]);
      notices.length = 0;

      // Down again: said again, though it was said of this kind before. A refusal in between is said (the witness
      // answered), and the failure after it too; a cosignature after a refusal says no "answers again".
      const six = await checkpointOf(6);
      mode = 'silent';
      await pool.cosign(six);
      mode = 'refuse';
      await pool.cosign(six);
      await pool.cosign(six);
      mode = 'silent';
      await pool.cosign(six);
      expect(notices).toEqual([silent, refused(6), silent]);
      mode = 'refuse';
      await pool.cosign(six);
      mode = 'cosign';
      await pool.cosign(six);
      expect(notices).toEqual([silent, refused(6), silent, refused(6)]);
    } finally {
      await pool.close();
      await stopServer(server);
    }
  }, 60_000);
});
