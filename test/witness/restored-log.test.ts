/**
 * README, "Operating it", Backups: a store restored from a backup is a fork of what its witnesses cosigned after the
 * backup, and each witness (`witness serve`) refuses it, whatever the restored log grows to: a smaller log is said to
 * be smaller, another tree at the size the witness holds is said to be another, and a larger one cannot be proved
 * consistent with it (422). The witness keeps what it cosigned and serves it; exports of the restored log carry no
 * cosignature of it, and an auditor holding the witnesses to a quorum finds it missing.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCosignatures, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { auditBundle } from '../../src/ops/audit.js';
import { sampleSummary } from '../support/tmp.js';
import { startWitness, stopWitness, witnessed, type WitnessProcess } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-witness-restored-'));
const root = join(base, 'store');
const origin = 'example.com/restored-log';
const scope = { principal: 'alice', session: 's1', run: 'r1' };
let w: WitnessProcess;

const notices: string[] = [];
const open = () =>
  openLedger({
    root,
    host: 'host-w',
    origin,
    witnesses: { witnesses: [`${w.url}#${w.vkey}`], timeoutMs: 30_000, retryMs: 60_000 },
    onNotice: (m) => notices.push(m),
  });
const sizeOf = (note: string) => parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)).size;
const cosigned = (note: string) => checkCosignatures(note, [parseCosignerKey(w.vkey)]).valid.length;

beforeAll(async () => {
  const first = await openLedger({ root, host: 'host-w', origin });
  const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
  await first.close();
  w = await startWitness(join(base, 'w1'), 'witness.example/w1', logs);
}, 60_000);
afterAll(async () => {
  if (w) await stopWitness(w);
  rmSync(base, { recursive: true, force: true });
});

describe('a store restored from a backup, submitted to the witness that cosigned it after the backup', () => {
  it('is refused by the witness at every size; the witness keeps serving the tree it cosigned', async () => {
    let ledger = await open();
    for (const n of [1, 2, 3]) await ledger.publish(scope, sampleSummary(n));
    expect(cosigned((await ledger.checkpoint()).note)).toBe(1);
    await ledger.close();
    const backup = join(base, 'backup');
    cpSync(root, backup, { recursive: true });
    ledger = await open();
    for (const n of [4, 5]) await ledger.publish(scope, sampleSummary(n));
    expect(cosigned((await ledger.checkpoint()).note)).toBe(1);
    await ledger.close();
    const held = await witnessed(w.url, origin);
    expect(sizeOf(held!)).toBe(5);

    rmSync(root, { recursive: true });
    cpSync(backup, root, { recursive: true });
    ledger = await open();
    const refusals: string[] = [];
    for (const n of [6, 7, 8]) {
      notices.length = 0;
      await ledger.publish(scope, sampleSummary(n));
      const cp = await ledger.checkpoint();
      expect(cosigned(cp.note)).toBe(0);
      refusals.push(...notices.filter((m) => m.includes(w.url)));
    }
    // Each said once, though the publish's submission and checkpoint()'s round both hear it.
    expect(refusals).toEqual([
      `witness ${w.url} holds a tree of 5 entries, larger than this log's 4`,
      `witness ${w.url} holds another tree of 5 entries than this log's`,
      `witness ${w.url} refused the checkpoint of size 6: 422 the consistency proof fails: the proof does not lead to the old root`,
    ]);
    // The witness still holds, and serves, the checkpoint it cosigned before the restore: the evidence of the fork.
    expect(await witnessed(w.url, origin)).toBe(held);

    // An export of the restored log carries no cosignature; held to the witness, the auditor finds the quorum missing.
    const bundle = join(base, 'bundle');
    await exportBundle(ledger, { out: bundle });
    const trust = ledger.trustStore();
    await ledger.close();
    const report = await auditBundle(await openBundleDir(bundle), {
      trust,
      witnesses: { keys: [parseCosignerKey(w.vkey)], quorum: 1 },
    });
    expect(report.findings.map((f) => f.code)).toEqual(['WITNESS_QUORUM_MISSING']);
  }, 120_000);

  it('closes saying the size the witness holds, larger than the log, and that it cosigns nothing the restored log does not extend its tree with', async () => {
    rmSync(root, { recursive: true });
    cpSync(join(base, 'backup'), root, { recursive: true });
    const ledger = await open();
    notices.length = 0;
    await ledger.publish(scope, sampleSummary(9));
    expect(cosigned((await ledger.checkpoint()).note)).toBe(0);
    await ledger.close();
    const said = notices.filter((m) => m.includes(w.url));
    expect(said[0]).toBe(`witness ${w.url} holds a tree of 5 entries, larger than this log's 4`);
    expect(said.slice(1)).toEqual([
      `witnesses: closing with the checkpoint of size 4 not cosigned by ${w.url} (it holds a tree of 5 entries, larger than this log's 4); the next publish, checkpoint or export with these witnesses submits the log's newest tree to each, from the size it holds; a witness that holds a larger tree than the log's cosigns none of it until the log extends that tree, which a log restored from a backup older than that tree never does (README, Witnesses after a restore)`,
    ]);
  }, 60_000);
});
