/**
 * The ledger keeps the size each witness last cosigned (`checkpoints/<hash>.witnesses.json`, beside the cosigned
 * note): after a restart its first submission already carries the consistency proof from that size, so a
 * witness never has to answer 409 to tell it, and a witness that was down across the restart is caught up from
 * it. The same background submission runs on both backends (embedded and PostgreSQL), with a real witness process.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
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
    const open = () => openLedger({ ...options, witnesses: { witnesses: [w.url], timeoutMs: 1500, retryMs: 200 } });
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
    const open = () => openLedger({ ...options, witnesses: { witnesses: [w.url], timeoutMs: 1500, retryMs: 200 } });
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
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ version: 1, sizes: { [w.url]: 2 } });
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
      stores.map((o) => openLedger({ ...o, witnesses: { witnesses: [w.url], timeoutMs: 1500, retryMs: 60_000 } })),
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
});
