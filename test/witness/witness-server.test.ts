/**
 * Two real `witness serve` processes on 127.0.0.1: split views cannot gather a quorum, state survives
 * kill -9, and hostile requests get the tlog-witness protocol's answers and change nothing.
 */
import { connect } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCosignatures, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { FindingSink } from '../../manifests/audit/findings.js';
import { verifyWitnesses } from '../../manifests/audit/verify-witnesses.js';
import { formatAddCheckpoint } from '../../manifests/witness/add-checkpoint.js';
import {
  addCheckpoint,
  HandLog,
  noteSigner,
  startWitness,
  stopWitness,
  witnessed,
  type WitnessProcess,
} from './support.js';
import { readVector } from '../support/vectors.js';
import { ENDS_AT_SIGNAL_MS } from '../support/settled.js';

const base = mkdtempSync(join(tmpdir(), 'hl-witness-'));
const log = new HandLog('example.com/split-log', 7);
const other = new HandLog('example.com/other-log', 8);
const extended = new HandLog('example.com/extended-log', 9);
/** Go's checksum database: a real checkpoint whose origin has spaces and whose key is named otherwise. */
const sumdb = readVector<{ vkey: string; note: string; origin: string; size: number }>('note/sumdb-checkpoint.json');
const logs = [
  { origin: log.origin, keys: [log.vkey] },
  { origin: other.origin, keys: [other.vkey] },
  { origin: extended.origin, keys: [extended.vkey] },
  { origin: sumdb.origin, keys: [sumdb.vkey] },
];
let w1: WitnessProcess;
let w2: WitnessProcess;

beforeAll(async () => {
  [w1, w2] = await Promise.all([
    // A minute for a request: a witness held up by a loaded machine (its state's fsync, say) while it answers is not cut
    // at a deadline it would have missed; the deadline's own tests use a witness of 1.5 s (below).
    startWitness(join(base, 'w1'), 'witness.example/w1', logs, [
      '--max-body-bytes',
      '4096',
      '--request-timeout-ms',
      '60000',
    ]),
    startWitness(join(base, 'w2'), 'witness.example/w2', logs),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([w1, w2].filter(Boolean).map((w) => stopWitness(w)));
  rmSync(base, { recursive: true, force: true });
});

/** The note with the cosignature lines appended (what the ledger stores). */
const cosigned = async (leaves: Uint8Array[], lines: string[]) => (await log.note(leaves)) + lines.join('');

function quorum(note: string, k: number) {
  const sink = new FindingSink(100);
  const summary = verifyWitnesses(note, { keys: [w1, w2].map((w) => parseCosignerKey(w.vkey)), quorum: k }, sink);
  return { summary, codes: sink.findings.map((f) => f.code) };
}

describe('witness serve', () => {
  it('witnesses any C2SP log: a checkpoint of sum.golang.org (origin "go.sum database tree") is cosigned', async () => {
    const r = await addCheckpoint(w1.url, formatAddCheckpoint({ oldSize: 0, proof: [], note: sumdb.note }));
    expect(r.status, r.text).toBe(200);
    const note = sumdb.note + r.text;
    expect(checkCosignatures(note, [parseCosignerKey(w1.vkey)]).valid).toHaveLength(1);
    expect(await witnessed(w1.url, sumdb.origin)).toBe(note);
    // From then on it holds that size: a first checkpoint again is a 409 naming it.
    const again = await addCheckpoint(w1.url, formatAddCheckpoint({ oldSize: 0, proof: [], note: sumdb.note }));
    expect(again).toMatchObject({ status: 409, text: `${sumdb.size}\n` });
  });

  it('cosigns the tree it holds again with other extension lines (tlog-witness: every check passes), never another root', async () => {
    const c = HandLog.leaves('c', 4);
    const heads = (x: string) => [`handoff-ledger/session-heads ${x}`];
    const first = await addCheckpoint(w2.url, await extended.request(0, c, heads('A')));
    expect(first.status, first.text).toBe(200);
    const again = await addCheckpoint(w2.url, await extended.request(4, c, heads('B')));
    expect(again.status, again.text).toBe(200);
    // The cosignature covers the whole body, extension line included; monitors see the newest checkpoint.
    const noteB = (await extended.note(c, [extended.signer], heads('B'))) + again.text;
    const w2Key = [parseCosignerKey(w2.vkey)];
    expect(checkCosignatures(noteB, w2Key).valid).toHaveLength(1);
    const noteA = (await extended.note(c, [extended.signer], heads('A'))) + again.text;
    expect(checkCosignatures(noteA, w2Key).valid).toHaveLength(0);
    expect(await witnessed(w2.url, extended.origin)).toBe(noteB);
    // Another root at that size: 409 naming the size, whatever the extension lines.
    const forked = await addCheckpoint(w2.url, await extended.request(4, HandLog.leaves('d', 4), heads('A')));
    expect(forked).toMatchObject({ status: 409, type: 'text/x.tlog.size', text: '4\n' });
    expect(await witnessed(w2.url, extended.origin)).toBe(noteB);
  });

  it('prints its cosignature/v1 verifier key, and cosigns a first checkpoint from size 0', async () => {
    expect(parseCosignerKey(w1.vkey).name).toBe('witness.example/w1');
    const a = HandLog.leaves('a', 3);
    const r = await addCheckpoint(w1.url, await log.request(0, a));
    expect(r.status, r.text).toBe(200);
    expect(r.text).toMatch(/^\u2014 witness\.example\/w1 [A-Za-z0-9+/=]+\n$/);
    expect(quorum(await cosigned(a, [r.text]), 1).codes).toEqual([]);
    // Monitors see the cosigned checkpoint.
    expect(await witnessed(w1.url, log.origin)).toBe(await cosigned(a, [r.text]));
  });

  it('says how many logs it follows as it listens, "1 log" and "4 logs"', async () => {
    expect(w2.listening).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+ \(4 logs\); Ctrl-C stops it$/);
    const one = await startWitness(join(base, 'one-log'), 'witness.example/one', [logs[0]!]);
    try {
      expect(one.listening).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+ \(1 log\); Ctrl-C stops it$/);
    } finally {
      await stopWitness(one);
    }
  });

  it('keeps a log that shows two trees to two witnesses from gathering a quorum of 2 for either', async () => {
    const a = HandLog.leaves('a', 3);
    const b = HandLog.leaves('b', 3);
    // w1 already holds tree A (previous test); w2 is shown tree B.
    const toW2 = await addCheckpoint(w2.url, await log.request(0, b));
    expect(toW2.status, toW2.text).toBe(200);
    // A to w2: at the size w2 holds, another root (409 with its size, as the spec says for equal sizes).
    expect((await addCheckpoint(w2.url, await log.request(0, a))).status).toBe(409);
    expect(await addCheckpoint(w2.url, await log.request(3, a))).toMatchObject({ status: 409, text: '3\n' });
    // B to w1, likewise; and an extension of B cannot be proved consistent with A.
    expect((await addCheckpoint(w1.url, await log.request(3, b))).status).toBe(409);
    const bLonger = [...b, ...HandLog.leaves('b-more', 2)];
    expect((await addCheckpoint(w1.url, await log.request(3, bLonger))).status).toBe(422);
    // So each tree carries one cosignature at most: a quorum of 2 fails for both.
    const aLine = await witnessed(w1.url, log.origin);
    const bLine = await witnessed(w2.url, log.origin);
    const aNote = await cosigned(a, [
      aLine!
        .split('\n\n')[1]!
        .split('\n')
        .filter((l) => l.includes('w1'))
        .join('\n') + '\n',
    ]);
    const bNote = await cosigned(b, [
      bLine!
        .split('\n\n')[1]!
        .split('\n')
        .filter((l) => l.includes('w2'))
        .join('\n') + '\n',
    ]);
    expect(quorum(aNote, 2).codes).toEqual(['WITNESS_QUORUM_MISSING']);
    expect(quorum(bNote, 2).codes).toEqual(['WITNESS_QUORUM_MISSING']);
    // Pasting w2's cosignature of B onto A does not count either: it does not verify over A.
    expect(
      quorum(
        aNote +
          bNote
            .split('\n\n')[1]!
            .split('\n')
            .filter((l) => l.includes('w2'))
            .join('\n') +
          '\n',
        2,
      ).codes,
    ).toEqual(['WITNESS_COSIGNATURE_INVALID', 'WITNESS_QUORUM_MISSING']);
  });

  it('cosigns an honest extension on both witnesses for a log that shows one tree: a quorum of 2', async () => {
    const c = HandLog.leaves('c', 4);
    const lines: string[] = [];
    for (const w of [w1, w2]) {
      const r = await addCheckpoint(w.url, await other.request(0, c));
      expect(r.status, r.text).toBe(200);
      lines.push(r.text);
    }
    const c2 = [...c, ...HandLog.leaves('c-more', 5)];
    for (const w of [w1, w2]) {
      const r = await addCheckpoint(w.url, await other.request(4, c2));
      expect(r.status, r.text).toBe(200);
      lines.push(r.text);
    }
    const note = (await other.note(c2)) + lines.slice(2).join('');
    const sink = new FindingSink(10);
    const s = verifyWitnesses(note, { keys: [w1, w2].map((w) => parseCosignerKey(w.vkey)), quorum: 2 }, sink);
    expect(sink.findings).toEqual([]);
    expect(s.signedBy.map((x) => x.witness.split('+')[0])).toEqual(['witness.example/w1', 'witness.example/w2']);
  });
});

describe('witness serve, hostile requests: the protocol status, and no change of state', () => {
  const a5 = [...HandLog.leaves('a', 3), ...HandLog.leaves('a-next', 2)];
  let before: string | undefined;
  beforeAll(async () => {
    const r = await addCheckpoint(w1.url, await log.request(3, a5));
    expect(r.status, r.text).toBe(200);
    before = await witnessed(w1.url, log.origin);
  });
  const unchanged = async () => expect(await witnessed(w1.url, log.origin)).toBe(before);

  it('answers 409 with its size (text/x.tlog.size) to a stale old size, and to a replay of an older checkpoint', async () => {
    const replay = await addCheckpoint(w1.url, await log.request(0, HandLog.leaves('a', 3)));
    expect(replay).toEqual({ status: 409, type: 'text/x.tlog.size', text: '5\n' });
    // Replayed with the size the witness holds: the old size is above the checkpoint's, a malformed request.
    expect(
      (
        await addCheckpoint(
          w1.url,
          await log.request(0, HandLog.leaves('a', 3)).then((b) => b.replace(/^old 0\n/, 'old 5\n')),
        )
      ).status,
    ).toBe(400);
    await unchanged();
  });

  it('answers 422 to a proof that does not verify', async () => {
    const a7 = [...a5, ...HandLog.leaves('x', 2)];
    const proof = log.proof(5, a7);
    proof[0] = new Uint8Array(32).fill(1);
    expect(
      (await addCheckpoint(w1.url, formatAddCheckpoint({ oldSize: 5, proof, note: await log.note(a7) }))).status,
    ).toBe(422);
    await unchanged();
  });

  it('answers 404 to an unknown origin', async () => {
    const stranger = new HandLog('example.com/not-followed', 9);
    expect((await addCheckpoint(w1.url, await stranger.request(0, HandLog.leaves('s', 2)))).status).toBe(404);
    // The request log shows such an origin's first 200 characters: it may be as long as a body (a line of 64 KiB
    // a request, written whole).
    const request = await stranger.request(0, HandLog.leaves('s', 2));
    const long = request.replace('example.com/not-followed\n', `example.com/${'o'.repeat(900)}\n`);
    expect((await addCheckpoint(w1.url, long)).status).toBe(404);
    const line = w1
      .stderr()
      .split('\n')
      .find((l) => l.startsWith('witness: 404 "example.com/ooo'));
    expect(line).toBe(`witness: 404 "example.com/${'o'.repeat(188)}"… unknown log origin`);
    // Quoted as a refusal quotes a value, once: a quote, a backslash and a bidi override in it were escaped twice
    // (`\\"`, `\\\\`: JSON quoting, then the printer's escaping of each backslash of it).
    const odd = request.replace('example.com/not-followed\n', 'example.com/q"b\\s\u202e\n');
    expect((await addCheckpoint(w1.url, odd)).status).toBe(404);
    expect(w1.stderr().split('\n')).toContain('witness: 404 "example.com/q\\"b\\\\s\\u202e" unknown log origin');
    await unchanged();
  });

  it('answers 405 with the Allow header RFC 9110 requires to a method a resource does not take', async () => {
    const wrong = await fetch(`${w1.url}/add-checkpoint`);
    expect([wrong.status, wrong.headers.get('allow')]).toEqual([405, 'POST']);
    await wrong.text();
    const monitor = await fetch(`${w1.url}/${'0'.repeat(64)}/checkpoint`, { method: 'POST', body: 'x' });
    expect([monitor.status, monitor.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
    await monitor.text();
    // Other answers carry none.
    const unknown = await fetch(`${w1.url}/${'0'.repeat(64)}/checkpoint`);
    expect([unknown.status, unknown.headers.get('allow')]).toEqual([404, null]);
    await unknown.text();
    await unchanged();
  });

  it('answers 403 to a checkpoint without a valid signature by the log, and to one with a bad signature by its key', async () => {
    const a7 = [...a5, ...HandLog.leaves('x', 2)];
    const forged = formatAddCheckpoint({
      oldSize: 5,
      proof: log.proof(5, a7),
      note: await log.note(a7, [noteSigner(log.origin, new Uint8Array(32).fill(99))]),
    });
    expect((await addCheckpoint(w1.url, forged)).status).toBe(403);
    const good = await log.request(5, a7);
    const tampered = good.replace(/(\u2014 \S+ )(.)/, (_, p: string, c: string) => p + (c === 'A' ? 'B' : 'A'));
    expect((await addCheckpoint(w1.url, tampered)).status).toBe(403);
    await unchanged();
  });

  it('answers 400 to a malformed body and 413 to one over the body limit (declared or streamed)', async () => {
    expect((await addCheckpoint(w1.url, 'old 01\n\n')).status).toBe(400);
    expect((await addCheckpoint(w1.url, 'hello')).status).toBe(400);
    // A byte order mark before a request that is good without it: the body is not the request the spec spells
    // (the old code's decoder dropped the mark and cosigned).
    const a7 = [...a5, ...HandLog.leaves('x', 2)];
    expect((await addCheckpoint(w1.url, `\uFEFF${await log.request(5, a7)}`)).status).toBe(400);
    expect((await addCheckpoint(w1.url, 'x'.repeat(5000))).status).toBe(413);
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < 10; i++) c.enqueue(new TextEncoder().encode('y'.repeat(1000)));
        c.close();
      },
    });
    const res = await fetch(`${w1.url}/add-checkpoint`, {
      method: 'POST',
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    await unchanged();
  });
});

describe('witness serve, its request deadline', () => {
  // Its own witness, of a 1.5 s deadline: the others answer within a minute, whatever the machine's load.
  let quick: WitnessProcess;
  beforeAll(async () => {
    quick = await startWitness(join(base, 'quick'), 'witness.example/quick', logs, ['--request-timeout-ms', '1500']);
  }, 60_000);
  afterAll(async () => {
    if (quick) await stopWitness(quick);
  });

  it('answers 408 and closes the connection of a body that trickles in (slowloris)', async () => {
    const { hostname: host, port } = new URL(quick.url);
    const started = Date.now();
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect(Number(port), host);
      let got = '';
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got));
      s.on('error', reject);
      s.write(`POST /add-checkpoint HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 1000\r\n\r\nold 5\n`);
      const drip = setInterval(() => s.write('A'), 200);
      s.on('close', () => clearInterval(drip));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 408 /);
    // The drip would take 200 s to complete the body: a wait that must end is given ENDS_AT_SIGNAL_MS (10 s could be
    // passed by a loaded machine).
    expect(Date.now() - started).toBeLessThan(ENDS_AT_SIGNAL_MS);
    expect(await witnessed(quick.url, log.origin)).toBeUndefined();
  });

  it('drops a connection that sends nothing, or trickles its headers, after its deadline (node alone took 30 s)', async () => {
    const { hostname: host, port } = new URL(quick.url);
    const closedAfter = (send: (s: ReturnType<typeof connect>) => void) =>
      new Promise<number>((resolve, reject) => {
        const started = Date.now();
        const s = connect(Number(port), host, () => send(s));
        s.on('data', () => {});
        s.on('close', () => resolve(Date.now() - started));
        s.on('error', reject);
      });
    const [silent, trickling] = await Promise.all([
      closedAfter(() => {}),
      closedAfter((s) => {
        s.write(`GET / HTTP/1.1\r\nHost: ${host}\r\n`);
        const drip = setInterval(() => s.write('X-Slow: 1\r\n'), 200);
        s.on('close', () => clearInterval(drip));
      }),
    ]);
    // The deadline is 1.5 s here (--request-timeout-ms 1500); the header check runs each second.
    expect(silent).toBeLessThan(6_000);
    expect(trickling).toBeLessThan(6_000);
  });
});

describe('witness serve, stopping', () => {
  const HOLD = fileURLToPath(new URL('../support/hold-server-close.mjs', import.meta.url));

  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
    ['SIGINT', 'SIGINT'],
  ] as const)(
    'a second signal ends a witness whose stopping hangs at once: %s then %s (a SIGTERM after SIGINT waited for it)',
    async (first, second) => {
      // The preload holds the server's close for 20 s after the first signal, as a request in flight would.
      const w = await startWitness(
        join(base, `stop-${first}-${second}`),
        'witness.example/stop',
        logs,
        [],
        ['--import', HOLD],
      );
      const exited = new Promise<NodeJS.Signals | null>((r) => w.proc.on('exit', (_code, signal) => r(signal)));
      w.proc.kill(first);
      while (!w.stderr().includes('holding server close') && w.proc.exitCode === null)
        await new Promise((r) => setTimeout(r, 5));
      // Ended by the second signal itself (no exit code): a stopping that waited out the held close (20 s) would exit
      // with one, so no bound on the clock is needed (10 s was one a loaded machine could pass).
      w.proc.kill(second);
      expect(await exited, w.stderr()).toBe(second);
    },
    60_000,
  );
});

describe('witness serve, signalled at once', () => {
  const STALL = fileURLToPath(new URL('../support/stall-after-listening.mjs', import.meta.url));
  it('stops cleanly (exit 0) on a signal sent as soon as it printed its address, however late it runs on', async () => {
    // The preload stalls the child right after it printed the address: the signal lands before the code after the
    // write runs, and found no listener (death by SIGINT) while the listener was added after the address was printed.
    const w = await startWitness(join(base, 'stop-at-once'), 'witness.example/at-once', logs, [], ['--import', STALL]);
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      w.proc.on('exit', (code, signal) => r([code, signal])),
    );
    w.proc.kill('SIGINT');
    expect(await exited, w.stderr()).toEqual([0, null]);
  }, 60_000);
});

describe('witness serve, durability', () => {
  it('keeps its state across kill -9: the restarted witness still refuses an inconsistent tree', async () => {
    const held = await witnessed(w1.url, log.origin);
    expect(await stopWitness(w1, 'SIGKILL')).toBe(null);
    w1 = await startWitness(join(base, 'w1'), 'witness.example/w1', logs, ['--max-body-bytes', '4096']);
    expect(await witnessed(w1.url, log.origin)).toBe(held);
    expect(await addCheckpoint(w1.url, await log.request(0, HandLog.leaves('b', 3)))).toMatchObject({
      status: 409,
      text: '5\n',
    });
    expect(
      (await addCheckpoint(w1.url, await log.request(5, [...HandLog.leaves('b', 3), ...HandLog.leaves('b-more', 3)])))
        .status,
    ).toBe(422);
  });

  it('refuses a second witness on the same state directory (LOCKED, exit 2)', async () => {
    await expect(startWitness(join(base, 'w1'), 'witness.example/w1', logs)).rejects.toThrow(/exited 2[\s\S]*LOCKED/);
  });

  it('refuses to answer for a log whose state file is damaged (RECORD_CORRUPT) rather than forget it', async () => {
    await stopWitness(w2);
    const logsDir = join(base, 'w2', 'state', 'logs');
    for (const f of readdirSync(logsDir)) writeFileSync(join(logsDir, f), '{"origin": "damaged"');
    w2 = await startWitness(join(base, 'w2'), 'witness.example/w2', logs);
    expect((await addCheckpoint(w2.url, await other.request(0, HandLog.leaves('c', 4)))).status).toBe(500);
    expect(w2.stderr()).toMatch(/RECORD_CORRUPT/);
  });
});
