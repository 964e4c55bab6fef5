/**
 * What the ledger makes of a witness's answers when the witness is hostile or broken: a fake witness on 127.0.0.1
 * passes each submission on to an honest witness and answers with that answer mutated (seeded: bytes flipped, lines
 * cut, doubled, reordered, control characters put in, another key's or log's cosignature in its place), with other
 * status codes (409 with garbage, 3xx, 1xx-less odd codes, 5xx), with a huge body, a body that never ends, a body
 * that drips in, a compressed bomb, or bytes that are no HTTP at all. The contract, for each answer:
 *
 *   - the checkpoint is unharmed: cosign() resolves (never rejects) within its documented bound, the note still opens
 *     under the log's keys, every line of a pinned witness in it verifies, and a second, honest witness's
 *     cosignature is always there;
 *   - a bad witness is left out with a notice, every notice one terminal-safe line (the answer's words are data);
 *   - a body is read up to a limit (64 KiB), not whole: a witness that sends without end stops being read;
 *   - a notice of a request that failed names its cause, not fetch's "fetch failed" alone, and says what happened:
 *     "unreachable" only of a witness no connection reached.
 *
 * And once through a ledger: publish never waits for such witnesses, checkpoint() and close() keep their bounds.
 *
 * No outcome here depends on how fast anything answers (the suite runs on two loaded cores): a wait that must end is
 * given ENDS_AT_SIGNAL_MS against an alternative that does not end (a witness that never answers, or a deadline of
 * HOLD_MS), and "ended before the deadline" is told by what was said, not by a clock.
 *
 * The seed is fixed (SEED); a failure names the case.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { checkCosignatures, encodeCosignerKey, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { openNote, parseVerifierKey } from '../../manifests/crypto/note.js';
import { isTerminalSafe } from '../../manifests/encoding/printable.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { openLedger } from '../../src/ledger/open.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import type { SignedCheckpoint } from '../../src/ledger/checkpoints.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from '../support/settled.js';
import { HandLog, noteSigner } from './support.js';

const SEED = 0x3a11;
/** The witnesses' deadline where a test waits for it to pass (a witness that never answers, or drips). */
const TIMEOUT_MS = 3000;
/**
 * The deadline where what is checked must end on its own, well before any deadline (a publish, a body cut at 64 KiB, an
 * answer read): far beyond ENDS_AT_SIGNAL_MS, so that a wait that did reach the deadline is told apart by its outcome.
 */
const HOLD_MS = 10 * 60_000;

const base = mkdtempSync(join(tmpdir(), 'hl-hostile-answers-'));
const log = new HandLog('example.com/hostile-answers', 11);
const otherLog = new HandLog('example.com/another-log', 12);
const leaves = HandLog.leaves('a', 5);
const W1 = 'witness.example/bad';
const W2 = 'witness.example/good';
const w1 = noteSigner(W1, new Uint8Array(32).fill(21));
const w2 = noteSigner(W2, new Uint8Array(32).fill(22));
const w1Key = encodeCosignerKey(W1, w1.publicKey);
const w2Key = encodeCosignerKey(W2, w2.publicKey);
const logKeys = [parseVerifierKey(log.vkey)];
let n = 0;
const servers: Array<Server | ReturnType<typeof createTcpServer>> = [];
const states: WitnessState[] = [];

async function listen<S extends Server | ReturnType<typeof createTcpServer>>(server: S): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An honest witness in this process, following both logs. */
async function honest(signer = w1): Promise<string> {
  const state = await WitnessState.open(join(base, `state-${n++}`));
  states.push(state);
  const logs = new Map([
    [log.origin, [parseVerifierKey(log.vkey)]],
    [otherLog.origin, [parseVerifierKey(otherLog.vkey)]],
  ]);
  return listen(createWitnessServer({ signer, logs, state }));
}

/** A seeded generator (mulberry32). */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE_CHARS = [
  '\u001b[2J',
  '\u001b]0;owned\u0007',
  '\u202e',
  '\u0000',
  '\r',
  '\u0085',
  '\u2028',
  '\ufeff',
  '\\',
];

/** One mutation of a text answer. */
function mutate(text: string, rand: () => number): string {
  const at = Math.floor(rand() * (text.length + 1));
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  switch (Math.floor(rand() * 10)) {
    case 0: // one character changed
      return (
        text.slice(0, at) +
        String.fromCharCode(text.charCodeAt(at) ^ (1 + Math.floor(rand() * 127))) +
        text.slice(at + 1)
      );
    case 1: // cut
      return text.slice(0, at);
    case 2: // doubled
      return text + text;
    case 3: // a hostile character put in
      return text.slice(0, at) + pick(HOSTILE_CHARS) + text.slice(at);
    case 4: // CRLF
      return text.replace(/\n/g, '\r\n');
    case 5: // junk lines before
      return `${pick(HOSTILE_CHARS)}junk\n\u2014 ${W1} AAAA\n${text}`;
    case 6: // another name on the same signature
      return text.replace(W1, pick([W2, log.origin, 'x', '', 'a b', `${W1}+1`]));
    case 7: // the signature's base64 re-padded or shortened
      return text.replace(/=*\n$/, pick(['\n', '==\n', '=\n', 'A\n', ' \n']));
    case 8: // many lines, each like a cosignature
      return Array.from({ length: 200 }, () => text).join('');
    default: // no final newline
      return text.replace(/\n$/, '');
  }
}

/** The checkpoint of `leaves` of `l`, signed by its log. */
async function checkpointOf(l: HandLog, ls: Uint8Array[]): Promise<SignedCheckpoint> {
  const note = await l.note(ls);
  return { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
}

type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void | Promise<void>;

/**
 * A fake witness whose answer is `behave`'s (given the submission's body); `counted` sums the bytes it managed to
 * write, `closed` settles when a connection of it closed.
 */
async function fake(behave: Behaviour) {
  const stats = { written: 0, closed: 0, requests: 0 };
  const server = createServer((req, res) => {
    stats.requests++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void Promise.resolve(behave(req, res, Buffer.concat(chunks))).catch(() => res.destroy()));
    res.on('close', () => stats.closed++);
    const write = res.write.bind(res);
    res.write = ((chunk: string | Buffer, ...rest: unknown[]) => {
      stats.written += Buffer.byteLength(chunk);
      return (write as (c: unknown, ...r: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof res.write;
  });
  return { url: await listen(server), stats };
}

/** The honest witness's answer to a submission, as status, content type and text. */
async function forward(url: string, body: Buffer) {
  const r = await fetch(`${url}/add-checkpoint`, { method: 'POST', body, signal: AbortSignal.timeout(10_000) });
  return { status: r.status, type: r.headers.get('content-type') ?? 'text/plain', text: await r.text() };
}

/**
 * `cp` submitted to the bad witness (pinned by its key, or not) and to an honest second witness, each request given
 * `timeoutMs`: the contract above checked, and the note and notices returned. cosign() must end within
 * ENDS_AT_SIGNAL_MS: at the bad witness's answer (HOLD_MS, far longer, is what it would wait otherwise), or at the
 * deadline of a witness that never answers (TIMEOUT_MS).
 */
async function submit(
  bad: string,
  pinned: boolean,
  cp: SignedCheckpoint,
  good: string,
  label: string,
  timeoutMs = HOLD_MS,
) {
  // Under the short deadline, the honest witness has it too: whether it answers in time is the machine's speed, so
  // its cosignature is asked for under HOLD_MS only.
  const honestAsked = timeoutMs === HOLD_MS;
  const notices: string[] = [];
  const pool = await WitnessPool.open({
    options: {
      witnesses: [pinned ? `${bad}#${w1Key}` : bad, `${good}#${w2Key}`],
      timeoutMs,
      retryMs: 60_000,
      closeWaitMs: 0,
    },
    checkpointStem: join(base, `stem-${n++}`),
    proof: async (oldSize) => log.proof(oldSize, leaves),
    notice: (m) => notices.push(m),
    checkpointKeys: () => logKeys,
  });
  const started = performance.now();
  let out: SignedCheckpoint | undefined;
  let ended: 'settled' | 'pending';
  try {
    ended = await settledWithin(
      pool.cosign(cp).then((o) => void (out = o)),
      ENDS_AT_SIGNAL_MS,
    );
  } finally {
    await pool.close();
  }
  const took = performance.now() - started;
  expect(ended, `${label}: cosign() ended`).toBe('settled');
  if (!out) throw new Error(`${label}: cosign() rejected`);
  // The note opens as an auditor opens it, and the log's signature is the first.
  expect(openNote(out.note, logKeys).sigs[0]?.name, label).toBe(log.origin);
  const checked = checkCosignatures(out.note, [parseCosignerKey(w1Key), parseCosignerKey(w2Key)]);
  // The honest witness's cosignature is always there; a pinned witness's line is there only when it verifies.
  if (honestAsked)
    expect(
      checked.valid.map((c) => c.name),
      label,
    ).toContain(W2);
  if (pinned) expect(checked.invalid, label).toEqual([]);
  for (const notice of notices) {
    expect(isTerminalSafe(notice), `${label}: ${JSON.stringify(notice)}`).toBe(true);
    expect(notice, label).not.toContain('\n');
  }
  return { note: out.note, notices, took, valid: checked.valid.map((c) => c.name) };
}

let cp: SignedCheckpoint;
let goodUrl: string;
beforeAll(async () => {
  cp = await checkpointOf(log, leaves);
  goodUrl = await honest(w2);
});
afterEach(async () => {
  for (const s of servers.splice(1)) {
    if ('closeAllConnections' in s) s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});
afterAll(async () => {
  for (const s of servers.splice(0)) {
    if ('closeAllConnections' in s) s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  await Promise.all(states.splice(0).map((s) => s.close()));
  rmSync(base, { recursive: true, force: true });
});

describe('a witness answering the honest answer mutated (seeded)', () => {
  it('keeps a pinned witness’s line only when it verifies, an unpinned one’s only when the note still opens', async () => {
    const upstream = await honest();
    const rand = random(SEED);
    let kept = 0;
    let cases = 0;
    for (let i = 0; i < 60; i++) {
      const pinned = i % 2 === 0;
      const { url } = await fake(async (_req, res, body) => {
        const a = await forward(upstream, body);
        res.writeHead(a.status, { 'content-type': a.type });
        res.end(a.status === 200 || rand() < 0.5 ? mutate(a.text, rand) : a.text);
      });
      const r = await submit(url, pinned, cp, goodUrl, `case ${i} (seed ${SEED}, ${pinned ? 'pinned' : 'unpinned'})`);
      if (r.valid.includes(W1)) kept++;
      cases++;
    }
    // Some mutations leave the line whole (a junk line before it, doubled): both sides were tried.
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(cases);
  });

  it('drops a cosignature of another log or another tree from a pinned witness, and says it gave none', async () => {
    const upstream = await honest();
    // The witness's real cosignatures, of other checkpoints: another log's, and a smaller tree of this one.
    const another = await forward(upstream, Buffer.from(await otherLog.request(0, HandLog.leaves('o', 2))));
    const smaller = await forward(upstream, Buffer.from(await log.request(0, leaves.slice(0, 3))));
    for (const [name, line] of [
      ['another log', another.text],
      ['a smaller tree', smaller.text],
    ] as const) {
      expect(line).toMatch(new RegExp(`^\u2014 ${W1} `));
      const { url } = await fake((_req, res) => void res.end(line));
      const r = await submit(url, true, cp, goodUrl, name);
      expect(r.valid, name).toEqual([W2]);
      expect(r.note, name).not.toContain(line.trim());
      expect(r.notices, name).toContain(`witness ${url} answered without a cosignature we can use`);
    }
  });
});

describe('a witness answering other status codes and bodies', () => {
  it('409 with garbage, odd codes, redirects, server errors: left out with one escaped notice each', async () => {
    const rand = random(SEED + 1);
    const garbage = () =>
      Array.from({ length: Math.floor(rand() * 300) }, () =>
        rand() < 0.2 ? HOSTILE_CHARS[Math.floor(rand() * HOSTILE_CHARS.length)] : String.fromCharCode(rand() * 0x3000),
      ).join('');
    const answers: Array<[string, number, Record<string, string>, () => string]> = [
      ['409 garbage', 409, { 'content-type': 'text/x.tlog.size' }, garbage],
      ['409 negative', 409, {}, () => '-1\n'],
      ['409 hex', 409, {}, () => '0x10\n'],
      ['409 two sizes', 409, {}, () => '3\n4\n'],
      ['409 with escapes', 409, {}, () => `3\u001b[2J\n`],
      ['409 empty', 409, {}, () => ''],
      ['409 huge size', 409, {}, () => `${'9'.repeat(400)}\n`],
      ['400 garbage', 400, {}, garbage],
      ['403 escapes', 403, {}, () => `\u001b]8;;http://evil\u0007click\u001b]8;;\u0007 ${garbage()}`],
      ['404', 404, {}, garbage],
      ['418', 418, {}, garbage],
      ['422', 422, {}, garbage],
      ['500', 500, {}, garbage],
      ['503', 503, { 'retry-after': '99999999' }, garbage],
      ['599', 599, {}, garbage],
      ['204', 204, {}, () => ''],
      ['200 empty', 200, {}, () => ''],
      ['200 garbage', 200, {}, garbage],
      ['301', 301, { location: 'http://127.0.0.1:1/add-checkpoint' }, () => ''],
      ['307 to itself', 307, { location: '/add-checkpoint' }, () => ''],
    ];
    for (const [name, status, headers, body] of answers)
      for (const pinned of [true, false]) {
        const text = body();
        const { url } = await fake((_req, res) => {
          res.writeHead(status, headers);
          res.end(text);
        });
        const r = await submit(url, pinned, cp, goodUrl, name);
        expect(r.valid, name).toEqual([W2]);
        const about = r.notices.filter((m) => m.includes(url));
        expect(about.length, `${name}: ${JSON.stringify(r.notices)}`).toBeGreaterThanOrEqual(1);
      }
  });

  it('a 409 naming a size past 2^53 is not read as another number', async () => {
    // 9007199254740993 is 2^53 + 1: Number() reads it as 2^53, a size the witness never named.
    const { url } = await fake((_req, res) => {
      res.writeHead(409, { 'content-type': 'text/x.tlog.size' });
      res.end('9007199254740993\n');
    });
    const r = await submit(url, true, cp, goodUrl, '409 past 2^53');
    // The old code said the witness held a tree of 9007199254740992 entries: a refusal, in the witness's words.
    expect(r.notices.join('\n')).not.toContain('9007199254740992');
    expect(r.notices).toContain(`witness ${url} refused the checkpoint of size 5: 409 9007199254740993`);
  });

  it('a refusal without a body ends at its status, with no space after it', async () => {
    for (const [status, body] of [
      [204, ''],
      [500, ''],
      [503, ' \n\t\n'],
    ] as const) {
      const { url } = await fake((_req, res) => {
        res.writeHead(status);
        res.end(body);
      });
      const r = await submit(url, true, cp, goodUrl, `${status} without words`);
      // The old notice ended "…: 204 ", a space after the status.
      expect(r.notices, String(status)).toContain(`witness ${url} refused the checkpoint of size 5: ${status}`);
    }
  });
});

describe('a witness whose body is huge, endless, slow or no HTTP at all', () => {
  it('a huge or endless body is read to 64 KiB, not whole: the witness stops being read long before its deadline', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    for (const [name, status] of [
      ['200', 200],
      ['409', 409],
      ['500', 500],
    ] as const) {
      const { url, stats } = await fake((_req, res) => {
        res.writeHead(status, { 'content-type': 'text/plain' });
        // Without end, as fast as the socket takes it (a 1 GiB body at most, should the reader never stop).
        let sent = 0;
        const pump = () => {
          while (sent < 16_384 && !res.destroyed && res.write(chunk)) sent++;
          if (!res.destroyed && sent < 16_384) res.once('drain', pump);
        };
        pump();
      });
      // The body never ends (the fake stops writing, never closes): cosign() ends within ENDS_AT_SIGNAL_MS, the
      // deadline being HOLD_MS, only because the reader stopped at 64 KiB.
      const r = await submit(url, true, cp, goodUrl, `endless ${name}`);
      // Cut by the reader: the socket's buffers hold a few MiB at most, the body was 1 GiB.
      await expect.poll(() => stats.closed, { timeout: ENDS_AT_SIGNAL_MS }).toBeGreaterThan(0);
      expect(stats.written, name).toBeLessThan(64 * 1024 * 1024);
      const notice = r.notices.find((m) => m.includes(url))!;
      expect(notice, name).toBeDefined();
      // Judged on what it read, not cut by the deadline.
      expect(notice, name).not.toContain('sent no complete answer');
      // A refusal's words are shortened in its notice.
      expect(notice.length, name).toBeLessThan(1000);
    }
  });

  it('a compressed bomb (gzip, 1 GiB of zeros) is read to 64 KiB of what it inflates to', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const { url } = await fake((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' });
      // Sixteen times over: 1 GiB inflated.
      for (let i = 0; i < 16; i++) res.write(bomb);
      res.end();
    });
    const heap = process.memoryUsage().rss;
    const r = await submit(url, true, cp, goodUrl, 'gzip bomb');
    expect(r.valid).toEqual([W2]);
    expect(process.memoryUsage().rss - heap).toBeLessThan(256 * 1024 * 1024);
  });

  it('a body that drips in, or headers and then silence: cut at the deadline, said so', async () => {
    for (const name of ['drip', 'silence']) {
      const { url } = await fake((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        if (name === 'silence') return void res.flushHeaders();
        const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write('\u2014')), 50);
        res.on('close', () => clearInterval(timer));
      });
      // The witness never ends its answer: cosign() ends (within ENDS_AT_SIGNAL_MS) at the deadline alone.
      const r = await submit(url, true, cp, goodUrl, name, TIMEOUT_MS);
      expect(r.took, name).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      // It was reached (its headers came, or a drip of its body): not "unreachable", as the notice said before.
      expect(r.notices, name).toContain(`witness ${url} sent no complete answer within ${TIMEOUT_MS} ms`);
    }
  });

  it('bytes that are no HTTP answer (seeded), or a connection closed at once: left out, one escaped notice', async () => {
    const rand = random(SEED + 2);
    const answers = [
      '',
      'garbage\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nshort',
      'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'HTTP/1.1 999 \u001b[2J\r\n\r\n',
      `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(70_000)}\r\n\r\n`,
      'HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n3\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n\u001b]0;\u0007',
    ];
    for (let i = 0; i < 12; i++) {
      const base = answers[i % answers.length]!;
      const text = i < answers.length ? base : mutate(base, rand);
      const server = createTcpServer((socket: Socket) => {
        socket.on('error', () => {});
        socket.once('data', () => socket.end(Buffer.from(text, 'latin1')));
      });
      const url = await listen(server);
      const r = await submit(url, i % 2 === 0, cp, goodUrl, `raw ${i} ${JSON.stringify(text.slice(0, 60))}`);
      expect(r.valid).toEqual([W2]);
      expect(r.notices.filter((m) => m.includes(url)).length, JSON.stringify(text.slice(0, 60))).toBeGreaterThanOrEqual(
        1,
      );
    }
  });
});

describe('the notice of a request that failed', () => {
  it('names the cause fetch keeps behind "fetch failed": a redirect, bytes that are no HTTP, a body cut short, a refused connection', async () => {
    const redirect = await fake((_req, res) => {
      res.writeHead(301, { location: 'https://witness.example/add-checkpoint' });
      res.end();
    });
    const raw = (text: string) =>
      listen(
        createTcpServer((socket: Socket) => {
          socket.on('error', () => {});
          socket.once('data', () => socket.end(text));
        }),
      );
    const notHttp = await raw('garbage\r\n\r\n');
    const short = await raw('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nshort');
    // A port nothing listens on: one taken and let go.
    const gone = createTcpServer();
    const closedUrl = await new Promise<string>((resolve) =>
      gone.listen(0, '127.0.0.1', () => {
        const url = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
        gone.close(() => resolve(url));
      }),
    );
    // What happened: a witness no connection reached is unreachable; one that answered a redirect, bytes that are no
    // HTTP or a body cut short was reached, and gave no usable answer (each was "unreachable" before).
    for (const [url, said] of [
      [redirect.url, `witness ${redirect.url} gave no usable answer: fetch failed: unexpected redirect`],
      [
        notHttp,
        `witness ${notHttp} gave no usable answer: fetch failed: Response does not match the HTTP/1.1 protocol`,
      ],
      [short, `witness ${short} gave no usable answer: terminated: other side closed`],
      [closedUrl, `witness ${closedUrl} is unreachable: fetch failed: connect ECONNREFUSED`],
    ] as const) {
      const r = await submit(url, true, cp, goodUrl, said);
      // The old notice said "fetch failed" (or "terminated") alone for each, and then "unreachable" of each.
      expect(
        r.notices.find((m) => m.startsWith(`witness ${url}`)),
        said,
      ).toMatch(new RegExp(`^${said.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
    }
  });
});

describe('a ledger with hostile witnesses beside an honest one', () => {
  it('publishes, checkpoints and closes within its bounds, the honest cosignature kept, every notice escaped', async () => {
    const root = join(base, `ledger-${n++}`);
    const origin = 'example.com/hostile-answers-ledger';
    const first = await openLedger({ root, host: 'host-h', origin });
    const vkey = first.checkpointVerifierKey;
    await first.close();
    const state = await WitnessState.open(join(base, `state-${n++}`));
    states.push(state);
    const good = await listen(
      createWitnessServer({ signer: w2, logs: new Map([[origin, [parseVerifierKey(vkey)]]]), state }),
    );
    const chunk = Buffer.alloc(64 * 1024, '\u001b');
    const endless = await fake((_req, res) => {
      res.writeHead(200);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const garbage = await fake((_req, res) => {
      res.writeHead(409, { 'content-type': 'text/x.tlog.size' });
      res.end(`\u001b[2J\u001b[31mverdict: OK\u001b[0m\u202e\n${'9'.repeat(20)}\n`);
    });
    // Holds each request (its headers sent, no body) until released, then cuts what it holds and all it gets after.
    const held: ServerResponse[] = [];
    let released = false;
    const silent = await fake((_req, res) => {
      res.flushHeaders();
      if (released) res.destroy();
      else held.push(res);
    });
    const release = () => {
      released = true;
      for (const res of held.splice(0)) res.destroy();
    };
    const redirect = await fake((_req, res) => {
      res.writeHead(307, { location: good });
      res.end();
    });
    const notices: string[] = [];
    const witnesses = [`${endless.url}#${w1Key}`, garbage.url, silent.url, redirect.url, `${good}#${w2Key}`];
    const who = { principal: 'alice', session: 's1', run: 'r1' };
    // Publishing, the requests given HOLD_MS: a publish that waited for the witnesses (the silent one never answers)
    // would not end before it.
    const ledger = await openLedger({
      root,
      host: 'host-h',
      origin,
      witnesses: { witnesses, timeoutMs: HOLD_MS, retryMs: 60_000, closeWaitMs: TIMEOUT_MS },
      onNotice: (m) => notices.push(m),
    });
    let closed = false;
    try {
      for (let i = 0; i < 2; i++) {
        const publish = ledger.publish(who, { task: `t${i}`, state: 's', nextSteps: [], files: [] });
        // A publish never waits for a witness.
        expect(await settledWithin(publish, ENDS_AT_SIGNAL_MS), `publish ${i}`).toBe('settled');
        await publish;
      }
      // The round the publishes started reaches the silent witness, which holds it: still held when they are done.
      await expect.poll(() => silent.stats.requests, { timeout: ENDS_AT_SIGNAL_MS }).toBeGreaterThan(0);
      expect(silent.stats.closed).toBe(0);
      // close() waits closeWaitMs at most for that round, then cuts it (it would wait HOLD_MS otherwise).
      expect(await settledWithin(ledger.close(), ENDS_AT_SIGNAL_MS), 'close with a round held').toBe('settled');
      closed = true;
    } finally {
      if (!closed) await ledger.close();
    }
    // Checkpointing, the requests still given HOLD_MS: checkpoint() waits for the silent witness, which holds its
    // request until released. (That a witness that never answers is cut at the deadline is the pool's, checked above
    // with 'drip' and 'silence': the honest witness here answers under no deadline that the machine's speed decides.)
    const asked = silent.stats.requests;
    const again = await openLedger({
      root,
      host: 'host-h',
      origin,
      witnesses: { witnesses, timeoutMs: HOLD_MS, retryMs: 60_000 },
      onNotice: (m) => notices.push(m),
    });
    closed = false;
    try {
      let cp: SignedCheckpoint | undefined;
      const checkpoint = again.checkpoint().then((c) => void (cp = c));
      await expect.poll(() => silent.stats.requests, { timeout: ENDS_AT_SIGNAL_MS }).toBeGreaterThan(asked);
      expect(held.length, 'the silent witness holds the checkpoint’s request').toBeGreaterThan(0);
      release();
      expect(await settledWithin(checkpoint, ENDS_AT_SIGNAL_MS), 'checkpoint').toBe('settled');
      await checkpoint;
      expect(openNote(cp!.note, [parseVerifierKey(vkey)]).sigs[0]?.name).toBe(origin);
      expect(checkCosignatures(cp!.note, [parseCosignerKey(w2Key)]).valid.map((c) => c.name)).toEqual([W2]);
      expect(cp!.checkpoint.size).toBe(2);
      expect(await settledWithin(again.close(), ENDS_AT_SIGNAL_MS), 'close').toBe('settled');
      closed = true;
    } finally {
      if (!closed) await again.close();
    }
    for (const url of [endless.url, garbage.url, silent.url, redirect.url])
      expect(
        notices.some((m) => m.startsWith(`witness ${url} `)),
        `${url}: ${JSON.stringify(notices)}`,
      ).toBe(true);
    for (const notice of notices) {
      expect(isTerminalSafe(notice), JSON.stringify(notice)).toBe(true);
      expect(notice).not.toContain('\n');
    }
  });
});

describe('the notice of a connection refused on every address of a name', () => {
  it('names the code of the AggregateError that fetch gives as the cause (its message is empty)', async () => {
    // What Node's fetch rejects with when `localhost` is ::1 and 127.0.0.1 and both refuse: an AggregateError whose
    // message is empty and whose code says it. This machine may resolve localhost to one address only: made here.
    const refused = Object.assign(new AggregateError([new Error('connect ECONNREFUSED ::1:9')], ''), {
      code: 'ECONNREFUSED',
    });
    const real = globalThis.fetch;
    globalThis.fetch = () => Promise.reject(new TypeError('fetch failed', { cause: refused }));
    try {
      const url = 'http://localhost:9';
      const notices: string[] = [];
      const pool = await WitnessPool.open({
        options: { witnesses: [url], timeoutMs: TIMEOUT_MS, retryMs: 60_000, closeWaitMs: 0 },
        checkpointStem: join(base, `stem-${n++}`),
        proof: async (oldSize) => log.proof(oldSize, leaves),
        notice: (m) => notices.push(m),
        checkpointKeys: () => logKeys,
      });
      await pool.cosign(cp);
      await pool.close();
      // The old notice said "fetch failed" alone.
      expect(notices).toContain(`witness ${url} is unreachable: fetch failed: ECONNREFUSED`);
    } finally {
      globalThis.fetch = real;
    }
  });
});
