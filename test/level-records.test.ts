/**
 * Every record of the embedded log is parsed by shape: a damaged Merkle tree record (`n!`, `n!size`), id index
 * (`i!`) or position record (`p!`) is `RECORD_CORRUPT` naming the record, never a `SyntaxError` or a `NaN`; the
 * store still opens, and fsck reports them along with damaged inline blob metadata (`t!`).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { digestHex } from '../store/hash/digest.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { fsck } from '../src/ops/maintenance.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
const corruptNaming = (key: string) =>
  expect.objectContaining({ name: 'ManifestError', code: 'RECORD_CORRUPT', message: expect.stringContaining(key) });

async function storeWithThree(): Promise<{ root: string; ledger: Ledger; ids: string[] }> {
  const root = tempDir();
  const ledger = await openLedger({ root, host: 'host-a' });
  const ids: string[] = [];
  for (const i of [1, 2, 3]) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
  return { root, ledger, ids };
}

describe('LevelDB tree and index records', () => {
  it('an i! record that is not a decimal position is RECORD_CORRUPT naming it, for positionOf and proofs', async () => {
    const { ledger, ids } = await storeWithThree();
    try {
      await (ledger.log as LevelManifestLog).raw.put(`i!${ids[1]}`, 'one');
      await expect(ledger.log.positionOf(ids[1] as never)).rejects.toEqual(corruptNaming(`i!${ids[1]}`));
      await expect(ledger.inclusionProof(ids[1] as never)).rejects.toEqual(corruptNaming(`i!${ids[1]}`));
    } finally {
      await ledger.close();
    }
  });

  it('a p! record or the entry it names, when damaged, is RECORD_CORRUPT naming it for entryAt', async () => {
    const { ledger } = await storeWithThree();
    try {
      const raw = (ledger.log as LevelManifestLog).raw;
      await raw.put('p!0000000000000001', '{not a key');
      await expect(ledger.log.entryAt(1)).rejects.toEqual(corruptNaming('p!0000000000000001'));
      await raw.put('e!s!000000000002', '{"position":2,');
      await expect(ledger.log.entryAt(2)).rejects.toEqual(corruptNaming('e!s!000000000002'));
    } finally {
      await ledger.close();
    }
  });

  it('a tree node that is not 32 bytes of base64 is RECORD_CORRUPT naming it, and fsck reports it', async () => {
    const { root, ledger } = await storeWithThree();
    // Leaf 0's node is not on the frontier of a 3-leaf tree: the store opens, fsck's rebuild reads it.
    await (ledger.log as LevelManifestLog).raw.put('n!00!0000000000000000', 'AAAA');
    await ledger.close();
    const reopened = await openLedger({ root, host: 'host-a' });
    try {
      await expect(reopened.log.treeNodes([{ level: 0, index: 0 }])).rejects.toEqual(
        corruptNaming('n!00!0000000000000000'),
      );
      const report = await fsck(reopened);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(
        expect.objectContaining({ code: 'RECORD_CORRUPT', message: expect.stringContaining('n!00!0000000000000000') }),
      );
    } finally {
      await reopened.close();
    }
  });

  it('an m!origin record that is no valid origin is RECORD_CORRUPT at open, trust.json left as it was', async () => {
    const { root, ledger } = await storeWithThree();
    await ledger.close();
    const trust = readFileSync(join(root, 'trust.json'));
    for (const origin of ['', 'has space', 'x+y']) {
      const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
      await log.raw.put('m!origin', origin);
      await log.close();
      await expect(openLedger({ root, host: 'host-a' }), JSON.stringify(origin)).rejects.toMatchObject({
        name: 'ManifestError',
        code: 'RECORD_CORRUPT',
        message: /checkpoint origin record/,
      });
      expect(readFileSync(join(root, 'trust.json'))).toEqual(trust);
    }
  });

  it('a damaged n!size still opens the log; appends are refused naming the record', async () => {
    const dir = tempDir();
    let log = await LevelManifestLog.open(join(dir, 'log'));
    await log.raw.put('n!size', '12abc');
    await log.close();
    log = await LevelManifestLog.open(join(dir, 'log'));
    try {
      await expect(
        log.append({
          session: 's',
          principal: 'alice',
          seq: 0,
          prev: null,
          id: `blake3:${'a'.repeat(64)}`,
          envelope: '{}',
        }),
      ).rejects.toMatchObject({ code: 'TREE_DAMAGED', message: expect.stringContaining('n!size') });
    } finally {
      await log.close();
    }
  });

  it('a p! key that is no position opens for reads and fsck; appends are refused, none is written at NaN', async () => {
    // The greatest key gave the next position: `p!zz` made it NaN, and the next publish wrote an entry no read parses.
    for (const value of ['x', 'e!s!000000000001']) {
      const { root, ledger } = await storeWithThree();
      await (ledger.log as LevelManifestLog).raw.put('p!zz', value);
      await ledger.close();
      const reopened = await openLedger({ root, host: 'host-a' });
      try {
        expect((await reopened.resume(scope))?.manifest.seq).toBe(2);
        await expect(reopened.publish(scope, sampleSummary(4))).rejects.toMatchObject({
          code: 'TREE_DAMAGED',
          message: expect.stringContaining('"p!zz"'),
        });
        expect((await reopened.resume(scope))?.manifest.seq).toBe(2);
        const report = await fsck(reopened);
        // Named once, though both the entries' walk and the tree's stop at it.
        expect(report.findings).toEqual([
          { code: 'RECORD_CORRUPT', message: 'manifest log record "p!zz" is corrupt: not the key of a log position' },
        ]);
      } finally {
        await reopened.close();
      }
    }
  });

  it('a p! key of 17 digits below the greatest is RECORD_CORRUPT naming it, not a position gap', async () => {
    const { root, ledger } = await storeWithThree();
    await (ledger.log as LevelManifestLog).raw.put('p!00000000000000010', 'e!s!000000000001');
    await ledger.close();
    const reopened = await openLedger({ root, host: 'host-a' });
    try {
      expect((await fsck(reopened)).findings).toEqual([
        {
          code: 'RECORD_CORRUPT',
          message: 'manifest log record "p!00000000000000010" is corrupt: not the key of a log position',
        },
      ]);
    } finally {
      await reopened.close();
    }
  });
});

describe('fsck of inline blob metadata', () => {
  it('reports a t! record that cannot be parsed, of a referenced blob and of an orphan, and checks the rest', async () => {
    const { ledger } = await storeWithThree();
    try {
      const raw = (ledger.log as LevelManifestLog).raw;
      const referenced = (await ledger.resume(scope))!.manifest.summary.digest;
      await raw.put(`t!${digestHex(referenced)}`, '{"size":"many"}');
      const orphan = 'b'.repeat(64);
      await raw.put(`t!${orphan}`, 'null');
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      const corrupt = report.findings.filter((f) => f.code === 'RECORD_CORRUPT').map((f) => f.message);
      expect(corrupt.some((m) => m.includes(`t!${digestHex(referenced)}`))).toBe(true);
      expect(corrupt.some((m) => m.includes(`t!${orphan}`))).toBe(true);
      expect(report.manifests).toBe(3);
    } finally {
      await ledger.close();
    }
  });
});
