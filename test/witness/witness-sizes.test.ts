/**
 * The ledger keeps the size each witness last cosigned (`checkpoints/<hash>.witnesses.json`, beside the cosigned
 * note): after a restart its first submission already carries the consistency proof from that size, so a
 * witness never has to answer 409 to tell it, and a witness that was down across the restart is caught up from
 * it. The same background submission runs on both backends (embedded and PostgreSQL), with a real witness process.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkCosignatures, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { openLedger } from '../../src/ledger/open.js';
import type { OpenLedgerOptions } from '../../src/ledger/options.js';
import { sampleSummary } from '../support/tmp.js';
import { describePostgres } from '../support/postgres.js';
import { startWitness, stopWitness, witnessed, type WitnessProcess } from './support.js';

const bases: string[] = [];
afterAll(() => bases.forEach((b) => rmSync(b, { recursive: true, force: true })));

const scope = { principal: 'alice', session: 's1', run: 'r1' };
const conflicts = (text: string) => text.split('\n').filter((l) => l.startsWith('witness: 409')).length;

async function sizeAt(w: WitnessProcess, origin: string): Promise<number> {
  const note = await witnessed(w.url, origin);
  return note === undefined ? 0 : parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)).size;
}

/**
 * The request deadline of the ledgers that submit to the witness process: long enough for a witness on a loaded machine
 * to answer. At 1.5 s a slow answer left the checkpoint uncosigned (checkpoint() waits for the round) and a request
 * that timed out after the witness had stored it was sent again from the older size, and answered 409.
 */
const DEADLINE_MS = 30_000;

/**
 * Polls `check` every 100 ms until it holds; fails after 45 s, naming what it waited for and what `context` says (the
 * ledger's notices): two waits of a test fit its 120 s, so a slow one is named rather than met by the test's timeout.
 */
async function until(what: string, check: () => Promise<boolean>, context?: () => string): Promise<void> {
  const deadline = Date.now() + 45_000;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting until ${what}${context ? `; so far: ${context()}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The scenario, on the store `store` names (embedded root, or a PostgreSQL schema with its own root). */
function witnessSizeScenario(name: string, store: () => Omit<OpenLedgerOptions, 'host'>): void {
  it(`${name}: publishes while the witness is down, restarts, and catches the witness up from its kept size without a 409`, async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-witness-sizes-'));
    bases.push(base);
    const origin = `example.com/witness-sizes-${bases.length}`;
    const options = { ...store(), host: 'host-w', origin, onNotice: () => {} };
    const first = await openLedger(options);
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    let w = await startWitness(join(base, 'w'), 'witness.example/sizes', logs);
    const port = new URL(w.url).port;
    const open = () =>
      openLedger({ ...options, witnesses: { witnesses: [w.url], timeoutMs: DEADLINE_MS, retryMs: 200 } });
    const cosigned = (note: string) => checkCosignatures(note, [parseCosignerKey(w.vkey)]).valid.length;

    let ledger = await open();
    try {
      await ledger.publish(scope, sampleSummary('one'));
      await ledger.publish(scope, sampleSummary('two'));
      expect(cosigned((await ledger.checkpoint()).note)).toBe(1);
      expect(await sizeAt(w, origin)).toBe(2);

      // Down: publishing goes on (each publish returns; its submission fails in the background).
      await stopWitness(w, 'SIGKILL');
      for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(`while down ${i}`));
      await ledger.close();
      const kept = readdirSync(join(options.root!, 'checkpoints')).filter((f) => f.endsWith('.witnesses.json'));
      expect(kept).toHaveLength(1);
      expect(JSON.parse(readFileSync(join(options.root!, 'checkpoints', kept[0]!), 'utf8'))).toEqual({
        version: 1,
        sizes: { [w.url]: 2 },
        cosigned: { [w.url]: 2 },
      });

      // The ledger restarts while the witness is still down, publishes, then the witness comes back.
      ledger = await open();
      await ledger.publish(scope, sampleSummary('after restart'));
      w = await startWitness(join(base, 'w'), 'witness.example/sizes', logs, ['--listen', `127.0.0.1:${port}`]);
      await until('the witness holds size 6', async () => (await sizeAt(w, origin)) === 6);
      expect(cosigned((await ledger.checkpoint()).note)).toBe(1);
      await ledger.close();

      // A restart with the witness up: the first submission starts at size 6.
      ledger = await open();
      await ledger.publish(scope, sampleSummary('seven'));
      const cp = await ledger.checkpoint();
      expect(cp.checkpoint.size).toBe(7);
      expect(cosigned(cp.note)).toBe(1);
      expect(await sizeAt(w, origin)).toBe(7);
      // The restarted witness never had to name its size: every submission started where it stood.
      expect(conflicts(w.stderr()), w.stderr()).toBe(0);
    } finally {
      await ledger.close();
      await stopWitness(w);
    }
  }, 120_000);

  it(`${name}: a damaged size file is ignored with a notice, and the witness names its size (409) as on a first run`, async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-witness-sizes-'));
    bases.push(base);
    const origin = `example.com/witness-sizes-${bases.length}`;
    const notices: string[] = [];
    const options = { ...store(), host: 'host-w', origin, onNotice: (m: string) => notices.push(m) };
    const first = await openLedger(options);
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    const w = await startWitness(join(base, 'w'), 'witness.example/sizes', logs);
    const open = () =>
      openLedger({ ...options, witnesses: { witnesses: [w.url], timeoutMs: DEADLINE_MS, retryMs: 200 } });
    let ledger = await open();
    try {
      await ledger.publish(scope, sampleSummary('one'));
      expect((await ledger.checkpoint()).checkpoint.size).toBe(1);
      await ledger.close();
      const dir = join(options.root!, 'checkpoints');
      const file = join(
        dir,
        readdirSync(dir).find((f) => f.endsWith('.witnesses.json'))!,
      );
      const { writeFileSync } = await import('node:fs');
      writeFileSync(file, '{"version": 1, "sizes": ');
      ledger = await open();
      expect(notices.some((n) => n.includes('ignoring') && n.includes('.witnesses.json'))).toBe(true);
      await ledger.publish(scope, sampleSummary('two'));
      expect(checkCosignatures((await ledger.checkpoint()).note, [parseCosignerKey(w.vkey)]).valid).toHaveLength(1);
      expect(conflicts(w.stderr())).toBe(1);
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
        version: 1,
        sizes: { [w.url]: 2 },
        cosigned: { [w.url]: 2 },
      });
    } finally {
      await ledger.close();
      await stopWitness(w);
    }
  }, 120_000);

  it(`${name}: a witness that comes back holding less than it cosigned (its state lost) is named in a notice, left out of that round, then caught up`, async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-witness-sizes-'));
    bases.push(base);
    const origin = `example.com/witness-sizes-${bases.length}`;
    const notices: string[] = [];
    const options = { ...store(), host: 'host-w', origin, onNotice: (m: string) => notices.push(m) };
    const first = await openLedger(options);
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    let w = await startWitness(join(base, 'w'), 'witness.example/sizes', logs);
    const port = new URL(w.url).port;
    const ledger = await openLedger({
      ...options,
      witnesses: { witnesses: [w.url], timeoutMs: DEADLINE_MS, retryMs: 200 },
    });
    try {
      await ledger.publish(scope, sampleSummary('one'));
      await ledger.publish(scope, sampleSummary('two'));
      expect(checkCosignatures((await ledger.checkpoint()).note, [parseCosignerKey(w.vkey)]).valid).toHaveLength(1);
      // The witness loses its state: the same key and URL, a fresh --state that holds nothing of this log.
      await stopWitness(w);
      rmSync(join(base, 'w', 'state'), { recursive: true, force: true });
      w = await startWitness(join(base, 'w'), 'witness.example/sizes', logs, ['--listen', `127.0.0.1:${port}`]);
      await ledger.publish(scope, sampleSummary('three'));
      const sofar = () => JSON.stringify({ notices, witness: w.stderr() });
      await until('the notice', async () => notices.some((n) => n.includes('went backwards')), sofar);
      const said = notices.filter((n) => n.includes('went backwards'));
      expect(said[0]).toContain(w.url);
      expect(said[0]).toContain('it cosigned a tree of 2 entries of this log and now holds 0');
      // The next round catches it up from the size it named.
      await until('the witness holds size 3', async () => (await sizeAt(w, origin)) === 3, sofar);
      expect(checkCosignatures((await ledger.checkpoint()).note, [parseCosignerKey(w.vkey)]).valid).toHaveLength(1);
    } finally {
      await ledger.close();
      await stopWitness(w);
    }
  }, 120_000);
}

describe('a witness holding another tree at the size submitted', () => {
  it('is left out with a notice naming it (its 409 names the very size sent), and keeps its tree', async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-witness-sizes-'));
    bases.push(base);
    const origin = 'example.com/witness-sizes-forked';
    const notices: string[] = [];
    // Two stores under one origin, both of whose checkpoint keys the witness follows: two trees of size 2.
    const stores = ['a', 'b'].map((n) => ({
      root: join(base, n),
      host: 'host-w',
      origin,
      onNotice: (m: string) => notices.push(m),
    }));
    const keys: string[] = [];
    for (const o of stores) {
      const { mkdirSync } = await import('node:fs');
      mkdirSync(o.root, { mode: 0o700 });
      const l = await openLedger(o);
      keys.push(l.checkpointVerifierKey);
      await l.close();
    }
    const w = await startWitness(join(base, 'w'), 'witness.example/sizes', [{ origin, keys }]);
    const ledgers = await Promise.all(
      stores.map((o) =>
        openLedger({ ...o, witnesses: { witnesses: [w.url], timeoutMs: DEADLINE_MS, retryMs: 60_000 } }),
      ),
    );
    try {
      for (const [i, l] of ledgers.entries()) {
        await l.publish(scope, sampleSummary(`tree ${i} one`));
        await l.publish(scope, sampleSummary(`tree ${i} two`));
      }
      const [a, b] = [await ledgers[0]!.checkpoint(), await ledgers[1]!.checkpoint()];
      expect(checkCosignatures(a.note, [parseCosignerKey(w.vkey)]).valid).toHaveLength(1);
      expect(checkCosignatures(b.note, [parseCosignerKey(w.vkey)]).valid).toHaveLength(0);
      expect(notices.some((n) => n.includes(w.url) && n.includes('holds another tree of 2 entries'))).toBe(true);
      expect(await witnessed(w.url, origin)).toBe(a.note);
    } finally {
      await Promise.all(ledgers.map((l) => l.close()));
      await stopWitness(w);
    }
  }, 120_000);
});

describe('witness sizes kept across restarts (embedded)', () => {
  witnessSizeScenario('embedded', () => {
    const root = mkdtempSync(join(tmpdir(), 'hl-witness-store-'));
    bases.push(root);
    return { root };
  });
});

let schemas = 0;
describePostgres('witness sizes kept across restarts (PostgreSQL)', (pg) => {
  witnessSizeScenario('PostgreSQL', () => {
    const root = mkdtempSync(join(tmpdir(), 'hl-witness-store-'));
    bases.push(root);
    return { root, postgres: { connectionString: pg.connectionString, schema: `witness_sizes_${++schemas}` } };
  });

  it('two ledgers of one log: the one whose submission is behind the witness submits the log\'s current tree, once, with no "larger than this log" notice', async () => {
    const root = mkdtempSync(join(tmpdir(), 'hl-witness-store-'));
    bases.push(root);
    const origin = 'example.com/witness-sizes-shared';
    const postgres = { connectionString: pg.connectionString, schema: `witness_sizes_${++schemas}` };
    const notices = { a: [] as string[], b: [] as string[] };
    const options = (n: 'a' | 'b') => ({
      root,
      postgres,
      host: 'host-w',
      origin,
      onNotice: (m: string) => notices[n].push(m),
    });
    const first = await openLedger(options('a'));
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    const wdir = mkdtempSync(join(tmpdir(), 'hl-witness-sizes-'));
    bases.push(wdir);
    const w = await startWitness(join(wdir, 'w'), 'witness.example/shared', logs);
    // B reaches the witness through a gate that holds its requests until released and records each answer's status.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const statuses: number[] = [];
    const gate = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          await released;
          const r = await fetch(`${w.url}${req.url}`, { method: req.method, body: Buffer.concat(chunks) });
          const text = await r.text();
          statuses.push(r.status);
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'text/plain' });
          res.end(text);
        })();
      });
    });
    await new Promise<void>((r) => gate.listen(0, '127.0.0.1', r));
    const gateUrl = `http://127.0.0.1:${(gate.address() as AddressInfo).port}`;
    const a = await openLedger({
      ...options('a'),
      witnesses: { witnesses: [w.url], timeoutMs: DEADLINE_MS, retryMs: 200 },
    });
    const b = await openLedger({
      ...options('b'),
      witnesses: { witnesses: [gateUrl], timeoutMs: 20_000, retryMs: 200 },
    });
    try {
      // B's checkpoint of size 1 is on its way to the witness (held at the gate) while A takes the log, and the witness,
      // to size 4.
      await b.publish(scope, sampleSummary('b one'));
      for (let i = 0; i < 3; i++) await a.publish(scope, sampleSummary(`a ${i}`));
      await until('the witness holds size 4', async () => (await sizeAt(w, origin)) === 4);
      release();
      await until('B has had two answers', async () => statuses.length >= 2);
      // Time for the retries the stale target used to make (200 ms doubling): none come.
      await new Promise((r) => setTimeout(r, 1500));
      // A 409 naming 4, then the log's current tree of 4, cosigned.
      expect(statuses).toEqual([409, 200]);
      expect(notices.b.filter((n) => n.includes('larger than this log'))).toEqual([]);
      const cp = await b.checkpoint();
      expect(cp.checkpoint.size).toBe(4);
      expect(checkCosignatures(cp.note, [parseCosignerKey(w.vkey)]).valid).toHaveLength(1);
      expect(statuses).toEqual([409, 200]); // the checkpoint of the tree it already has cosigned asks for nothing
    } finally {
      await Promise.all([a.close(), b.close()]);
      gate.closeAllConnections();
      await new Promise((r) => gate.close(r));
      await stopWitness(w);
    }
  }, 120_000);
});
