/**
 * A ledger with two real witnesses: each new checkpoint is cosigned in the background, a witness that is
 * down neither blocks nor fails a publish, and it is caught up from the size it last cosigned once it is
 * back. The export carries the cosigned checkpoint and `verify --witness-keys --quorum` counts it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCosignatures, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { openLedger } from '../../src/ledger/open.js';
import { retryCeiling, retryDelay } from '../../src/ledger/witnessing.js';
import { gc } from '../../src/ops/maintenance.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { main } from '../../src/cli/main.js';
import { captureIo } from '../support/capture-io.js';
import { sampleSummary } from '../support/tmp.js';
import { startWitness, stopWitness, witnessed, type WitnessProcess } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-witnessing-'));
const root = join(base, 'store');
const origin = 'example.com/witnessed-ledger';
const scope = { principal: 'alice', session: 's1', run: 'r1' };
let w1: WitnessProcess;
let w2: WitnessProcess;
let ledger: Ledger;
const notices: string[] = [];
/**
 * The request deadline of the ledgers here that ask the witness processes for a cosignature: long enough for a witness
 * on a loaded machine to answer (checkpoint() waits for the round), where 1.5 s left a slow answer out of the note.
 */
const DEADLINE_MS = 30_000;

const open = (witnesses: string[]) =>
  openLedger({
    root,
    host: 'host-w',
    origin,
    witnesses: { witnesses, timeoutMs: DEADLINE_MS, retryMs: 200 },
    onNotice: (m) => notices.push(m),
  });
const cosigners = (note: string) =>
  checkCosignatures(
    note,
    [w1, w2].map((w) => parseCosignerKey(w.vkey)),
  ).valid.map((c) => c.name);
const sizeAt = async (w: WitnessProcess) => {
  const note = await witnessed(w.url, origin);
  return note === undefined ? 0 : parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)).size;
};

beforeAll(async () => {
  // The witnesses follow this ledger's checkpoint key: learn it first.
  const first = await openLedger({ root, host: 'host-w', origin });
  const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
  await first.close();
  [w1, w2] = await Promise.all([
    startWitness(join(base, 'w1'), 'witness.example/w1', logs),
    startWitness(join(base, 'w2'), 'witness.example/w2', logs),
  ]);
  ledger = await open([w1.url, w2.url]);
}, 60_000);
afterAll(async () => {
  await ledger?.close();
  await Promise.all([w1, w2].filter(Boolean).map((w) => stopWitness(w)));
  rmSync(base, { recursive: true, force: true });
});

describe('a ledger with witnesses', () => {
  it('gets each new checkpoint cosigned by both witnesses and returns it from checkpoint()', async () => {
    await ledger.publish(scope, sampleSummary('one'));
    await ledger.publish(scope, sampleSummary('two'));
    const cp = await ledger.checkpoint();
    expect(cp.checkpoint.size).toBe(2);
    expect(cosigners(cp.note).sort()).toEqual(['witness.example/w1', 'witness.example/w2']);
    expect(await sizeAt(w1)).toBe(2);
  });

  it('publishes without waiting while a witness is down, and catches it up from its last size once it is back', async () => {
    const port = new URL(w2.url).port;
    await stopWitness(w2, 'SIGKILL');
    const started = performance.now();
    for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(`while down ${i}`));
    // Three publishes, none waiting for the dead witness's request deadline.
    expect(performance.now() - started).toBeLessThan(DEADLINE_MS);
    const partial = await ledger.checkpoint();
    expect(partial.checkpoint.size).toBe(5);
    expect(cosigners(partial.note)).toEqual(['witness.example/w1']);
    expect(notices.some((n) => n.includes(w2.url) && /unreachable/.test(n))).toBe(true);

    w2 = await startWitness(
      join(base, 'w2'),
      'witness.example/w2',
      [{ origin, keys: [ledger.checkpointVerifierKey] }],
      ['--listen', `127.0.0.1:${port}`],
    );
    // It kept size 2 across the kill; the ledger's retry brings it to 5 with a proof from 2, no publish needed.
    const deadline = Date.now() + 20_000;
    while ((await sizeAt(w2)) !== 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await sizeAt(w2)).toBe(5);
    const full = await ledger.checkpoint();
    expect(cosigners(full.note).sort()).toEqual(['witness.example/w1', 'witness.example/w2']);
  }, 60_000);

  it('leaves out a witness that refuses the log (404) with a notice, and refuses a URL that is not http(s)', async () => {
    const strict = await openLedger({
      root: join(base, 'other-store'),
      host: 'host-o',
      origin: 'example.com/not-followed',
      witnesses: { witnesses: [{ url: w1.url, vkey: w2.vkey }], timeoutMs: DEADLINE_MS },
      onNotice: (m) => notices.push(m),
    });
    try {
      await strict.publish(scope, sampleSummary('unfollowed'));
      // w1 does not follow this origin (404): no cosignature, a notice, and the publish and checkpoint still work.
      const cp = await strict.checkpoint();
      expect(cp.note.split('\n\n')[1]!.split('\n').filter(Boolean)).toHaveLength(1);
      expect(notices.some((n) => n.includes('refused the checkpoint') && n.includes('404'))).toBe(true);
    } finally {
      await strict.close();
    }
    await expect(
      openLedger({ root: join(base, 'bad-url'), host: 'h', witnesses: { witnesses: ['file:///etc/passwd'] } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('checkpoint --witness URL prints the note with the cosignatures gathered (those kept for this tree too)', async () => {
    await ledger.close();
    const c = captureIo({ env: {} });
    const code = await main(['checkpoint', '--root', root, '--host', 'host-w', '--witness', w1.url], c.io);
    expect(code, c.stderr()).toBe(0);
    expect(cosigners(c.stdout()).sort()).toEqual(['witness.example/w1', 'witness.example/w2']);
  });

  it('keeps only cosignatures that verify under the witness key it was given', async () => {
    const pinned = await openLedger({
      root,
      host: 'host-w',
      witnesses: { witnesses: [{ url: w1.url, vkey: w2.vkey }], timeoutMs: DEADLINE_MS },
      onNotice: (m) => notices.push(m),
    });
    try {
      await pinned.publish(scope, sampleSummary('pinned key'));
      const cp = await pinned.checkpoint();
      expect(cosigners(cp.note)).toEqual([]);
      expect(notices.some((n) => n.includes(w1.url) && n.includes('without a cosignature we can use'))).toBe(true);
    } finally {
      await pinned.close();
    }
    ledger = await open([w1.url, w2.url]);
  });

  it('HANDOFF_LEDGER_WITNESSES takes URL#VKEY: a line that does not verify under the key given is not kept', async () => {
    await ledger.close();
    // A new tree, so that no cosignature kept for the last one is printed.
    const plain = await openLedger({ root, host: 'host-w', origin });
    try {
      await plain.publish(scope, sampleSummary('pinned in env'));
    } finally {
      await plain.close();
    }
    const run = async (witnesses: string) => {
      const c = captureIo({ env: { HANDOFF_LEDGER_WITNESSES: witnesses } });
      const code = await main(['checkpoint', '--root', root, '--host', 'host-w'], c.io);
      expect(code, c.stderr()).toBe(0);
      return cosigners(c.stdout());
    };
    expect(await run(`${w1.url}#${w2.vkey} ${w2.url}#${w2.vkey}`)).toEqual(['witness.example/w2']);
    expect((await run(`${w1.url}#${w1.vkey} ${w2.url}#${w2.vkey}`)).sort()).toEqual([
      'witness.example/w1',
      'witness.example/w2',
    ]);
    ledger = await open([w1.url, w2.url]);
  });

  it('restores the saved cosignatures after a restart without the log signature a second time', async () => {
    await ledger.publish(scope, sampleSummary('cosigned, then restarted'));
    await expect.poll(async () => cosigners((await ledger.checkpoint()).note).length, { timeout: 15_000 }).toBe(2);
    await ledger.close();
    const down = await openLedger({
      root,
      host: 'host-w',
      witnesses: { witnesses: ['http://127.0.0.1:1'], timeoutMs: 500, retryMs: 60_000 },
      onNotice: () => {},
    });
    try {
      const block = (await down.checkpoint()).note.split('\n\n')[1]!.split('\n').filter(Boolean);
      expect(block.length).toBe(3); // the log's signature and the two cosignatures kept on disk
      expect(new Set(block).size).toBe(block.length);
    } finally {
      await down.close();
    }
    ledger = await open([w1.url, w2.url]);
  });

  it('exports the cosigned checkpoint; verify counts a quorum of 2 and names the witnesses and times', async () => {
    await ledger.close();
    const out = join(base, 'bundle');
    const trust = join(base, 'trust.json');
    const witnessKeys = join(base, 'witnesses.txt');
    writeFileSync(witnessKeys, `# the auditor's pinned witnesses\n${w1.vkey}\n${w2.vkey}\n`);
    const env = { HANDOFF_LEDGER_WITNESSES: `${w1.url} ${w2.url}` };
    const cli = async (argv: string[]) => {
      const c = captureIo({ env });
      const code = await main(argv, c.io);
      return { code, stdout: c.stdout(), stderr: c.stderr() };
    };
    const store = ['--root', root, '--host', 'host-w'];
    expect((await cli(['export', ...store, '--out', out])).code).toBe(0);
    expect((await cli(['keys', 'export', ...store, '--out', trust])).code).toBe(0);
    const ok = await cli(['verify', out, '--trust', trust, '--witness-keys', witnessKeys, '--quorum', '2', '--json']);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    const report = JSON.parse(ok.stdout) as {
      checkpoint: { witnesses: { signedBy: Array<{ witness: string; time: string }> } };
    };
    expect(report.checkpoint.witnesses.signedBy.map((s) => s.witness.split('+')[0]).sort()).toEqual([
      'witness.example/w1',
      'witness.example/w2',
    ]);
    expect(report.checkpoint.witnesses.signedBy[0]!.time).toMatch(/^\d{4}-\d\d-\d\dT/);
    const text = await cli(['verify', out, '--trust', trust, '--witness-keys', witnessKeys, '--quorum', '2']);
    // Listed in the order of the note's lines, which follows the witnesses' answers.
    expect(text.stdout).toMatch(
      /witnesses: 2 of 2 pinned cosigned \(quorum 2\): "witness\.example\/w[12]\+[0-9a-f]{8}" at /,
    );
    expect(text.stdout).toMatch(/"witness\.example\/w1\+[0-9a-f]{8}" at \d{4}-/);
    expect(text.stdout).toMatch(/"witness\.example\/w2\+[0-9a-f]{8}" at \d{4}-/);
    // A quorum the bundle cannot meet: one pinned witness only, quorum 1, but an unknown extra key is ignored.
    writeFileSync(witnessKeys, `${w1.vkey}\n`);
    expect((await cli(['verify', out, '--trust', trust, '--witness-keys', witnessKeys, '--quorum', '1'])).code).toBe(0);
    expect((await cli(['verify', out, '--trust', trust, '--witness-keys', witnessKeys, '--quorum', '2'])).code).toBe(2);

    // The bundle's checkpoint with one cosignature removed, then with one altered: findings, exit 1.
    writeFileSync(witnessKeys, `${w1.vkey}\n${w2.vkey}\n`);
    const file = join(out, 'checkpoint.note');
    const note = readFileSync(file, 'utf8');
    // The export reopened the ledger, which asked the witnesses again: still one line per witness.
    expect(note.split('\n').filter((l) => l.startsWith('\u2014 witness.example/')).length).toBe(2);
    const w2Line = note.split('\n').find((l) => l.startsWith('\u2014 witness.example/w2 '))!;
    writeFileSync(file, note.replace(`${w2Line}\n`, ''));
    const missing = await cli(['verify', out, '--trust', trust, '--witness-keys', witnessKeys, '--quorum', '2']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(
      /WITNESS_QUORUM_MISSING: the checkpoint has 1 valid cosignature by pinned witnesses; the quorum is 2/,
    );
    const sig = w2Line.slice(w2Line.lastIndexOf(' ') + 1);
    const flipped = `${sig.slice(0, 20)}${sig[20] === 'A' ? 'B' : 'A'}${sig.slice(21)}`;
    writeFileSync(file, note.replace(sig, flipped));
    const invalid = await cli([
      'verify',
      out,
      '--trust',
      trust,
      '--witness-keys',
      witnessKeys,
      '--quorum',
      '2',
      '--json',
    ]);
    expect(invalid.code).toBe(1);
    const codes = (JSON.parse(invalid.stdout) as { findings: Array<{ code: string }> }).findings.map((f) => f.code);
    expect(codes).toEqual(['WITNESS_COSIGNATURE_INVALID', 'WITNESS_QUORUM_MISSING']);
    ledger = await open([]);
  }, 60_000);
});

describe('a witness that answers without end', () => {
  it('costs the ledger a bounded read: the answer is cut at 64 KiB and the rest never read', async () => {
    let sent = 0;
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const pump = () => {
        while (sent < 256 * 1024 * 1024 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const heard: string[] = [];
    const hostile = await openLedger({
      root: join(base, 'hostile'),
      host: 'host-h',
      witnesses: { witnesses: [url], timeoutMs: 20_000, retryMs: 60_000 },
      onNotice: (m) => heard.push(m),
    });
    try {
      await hostile.publish(scope, sampleSummary('to a hostile witness'));
      await expect
        .poll(() => heard.some((n) => n.includes('without a cosignature we can use')), { timeout: 15_000 })
        .toBe(true);
      // Socket buffers hold a few MiB at most; the old read took all 256 MiB before it looked at the answer.
      expect(sent).toBeLessThan(32 * 1024 * 1024);
    } finally {
      await hostile.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }, 60_000);
});

describe('gc and witnesses', () => {
  it('checks the log against the pin before it collects without asking any witness', async () => {
    let requests = 0;
    const server = createServer((req) => {
      requests++;
      req.resume(); // and never answer
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const ledger = await openLedger({
      root: join(base, 'gc-silent'),
      host: 'host-g',
      // closeWaitMs 0: the close does not wait for the silent witness (its default wait would be 5 s).
      witnesses: { witnesses: [url], timeoutMs: 120_000, retryMs: 600_000, closeWaitMs: 0 },
      onNotice: () => {},
    });
    try {
      await ledger.publish(scope, sampleSummary('witnessed later'));
      await expect.poll(() => requests, { timeout: 15_000 }).toBe(1);
      // A witness round would wait the request's deadline (two minutes) and ask again: gc does neither.
      expect((await gc(ledger, { graceMs: 0, dryRun: true })).removed).toEqual([]);
      expect(requests).toBe(1);
    } finally {
      await ledger.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }, 60_000);
});

describe('retry backoff', () => {
  it('doubles retryMs up to 60 s, or up to retryMs itself when that is longer', () => {
    expect([0, 1, 5, 6, 7, 40].map((n) => retryCeiling(1000, n))).toEqual([1000, 2000, 32_000, 60_000, 60_000, 60_000]);
    // A retry asked for every 5 minutes was made every minute (the 60 s cap came first).
    expect([0, 1, 9].map((n) => retryCeiling(300_000, n))).toEqual([300_000, 300_000, 300_000]);
    expect(retryCeiling(2 ** 31 - 1, 16)).toBe(2 ** 31 - 1);
  });

  it('waits a random time from half the schedule to all of it (equal jitter), so ledgers do not retry in lockstep', () => {
    // The random source's ends: half the schedule (rounded up), and all of it.
    const low = () => 0;
    const high = () => 1 - Number.EPSILON;
    expect([0, 1, 5, 6, 40].map((n) => retryDelay(1000, n, low))).toEqual([500, 1000, 16_000, 30_000, 30_000]);
    expect([0, 1, 5, 6, 40].map((n) => retryDelay(1000, n, high))).toEqual([1000, 2000, 32_000, 60_000, 60_000]);
    expect(retryDelay(1000, 0, () => 0.5)).toBe(750);
    expect(retryDelay(1, 0, low)).toBe(1); // never 0: a retry at once would be no backoff
    expect(retryDelay(300_000, 3, low)).toBe(150_000);
    expect(retryDelay(2 ** 31 - 1, 16, high)).toBe(2 ** 31 - 1); // within the longest timer Node keeps
    // Every draw of a seeded sweep stays within the bounds, and the draws spread over the span.
    let seed = 1;
    const lcg = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (const [retryMs, failures] of [
      [1000, 0],
      [1000, 3],
      [1000, 30],
      [7, 2],
      [300_000, 1],
    ] as const) {
      const ceiling = retryCeiling(retryMs, failures);
      const waits = Array.from({ length: 200 }, () => retryDelay(retryMs, failures, lcg));
      for (const w of waits) {
        expect(Number.isInteger(w)).toBe(true);
        expect(w).toBeGreaterThanOrEqual(Math.ceil(ceiling / 2));
        expect(w).toBeLessThanOrEqual(ceiling);
      }
      expect(new Set(waits).size).toBeGreaterThan(1);
    }
    // A random source that answers outside [0, 1) is held to it.
    expect([-1, 1, 2, Number.NaN].map((r) => retryDelay(1000, 0, () => r))).toEqual([500, 1000, 1000, 500]);
    // The default is Math.random: within the bounds too.
    for (let i = 0; i < 100; i++) expect(retryDelay(1000, 6)).toBeGreaterThanOrEqual(30_000);
  });
});
