/**
 * The session-heads index against records damaged under the store (LevelDB `x!` records written by hand): fsck
 * reports each; a split never folds a record it finds beside its new nodes into a signed root (it removes it); and
 * interior records along a whole key are a coded finding, not a crash. (A record beside an existing path is folded
 * in by the next append there; fsck reports it before.)
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { describe, expect, it } from 'vitest';
import { fsck } from '../../src/ops/maintenance.js';
import { LevelManifestLog } from '../../manifests/log/level/log.js';
import { headsNodeKey } from '../../manifests/log/level/session-heads.js';
import { prefixOf, sessionHeadsRoot, sessionKey } from '../../manifests/tlog/session-heads.js';
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { open, publishMany, scope } from './ledger-support.js';

const interior = (fill: number) => `i ${encodeBase64(new Uint8Array(32).fill(fill))}`;
const firstBits = (s: string) => createHash('sha256').update(s).digest()[0]! >> 4;
/** A session id whose key's first four bits pass `ok`. */
const idWith = (ok: (bits: number) => boolean) => {
  for (let i = 0; ; i++) if (ok(firstBits(`x${i}`))) return `x${i}`;
};

describe('fsck of a damaged session-heads index', () => {
  it('reports a root record that cannot be read (the store then refuses appends TREE_DAMAGED)', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    const location = ((ledger.log as LevelManifestLog).raw as unknown as { location: string }).location;
    await ledger.close();
    const log = await LevelManifestLog.open(location);
    await log.raw.put('x!000!', 'i not-base64');
    await log.close();
    ledger = await open(root);
    try {
      await expect(ledger.publish(scope('s1'), sampleSummary('x'))).rejects.toMatchObject({ code: 'TREE_DAMAGED' });
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings.map((f) => f.code)).toContain('RECORD_CORRUPT');
    } finally {
      await ledger.close();
    }
  });

  it('reports a record on no session path; a split beside it leaves it out of the signed root and removes it', async () => {
    const A = idWith((b) => b >> 3 === 0);
    const B = idWith((b) => b >> 3 === 1);
    const C = idWith((b) => b >> 1 === firstBits(A) >> 1 && b !== firstBits(A)); // parts from A at bit 3
    const ledger = await open(tempDir());
    try {
      await publishMany(ledger, A, 1);
      await publishMany(ledger, B, 1);
      const db = (ledger.log as LevelManifestLog).raw;
      // Depth 2 under A's leaf (depth 1): on no path, in no proof.
      await db.put(headsNodeKey({ depth: 2, prefix: prefixOf(prefixOf(sessionKey(A), 2, true), 2) }), interior(7));
      const before = await fsck(ledger);
      expect(before.findings).toEqual([
        expect.objectContaining({ code: 'SESSION_HEADS_ROOT', message: expect.stringContaining('no session') }),
      ]);
      // C splits A's leaf: the new interior nodes' other children are empty, whatever is stored there.
      await publishMany(ledger, C, 1);
      const heads = [];
      for await (const h of ledger.log.heads()) heads.push({ session: h.session, head: { seq: h.seq, id: h.id } });
      const signed = (await ledger.checkpoint()).checkpoint.extensions.find((l) => l.includes('session-heads'));
      expect(signed).toBe(`handoff-ledger/session-heads ${encodeBase64(sessionHeadsRoot(heads))}`);
      // ...and the stray record is removed in the same batch: every proof leads to that root, fsck is clean.
      expect((await fsck(ledger)).findings).toEqual([]);
      const out = join(tempDir(), 'bundle');
      await exportBundle(ledger, { out, session: A });
      const report = await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore() });
      expect(report.findings).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it('reports interior records along a whole key as damage (RECORD_CORRUPT), not an uncoded crash', async () => {
    const ledger = await open(tempDir());
    try {
      await publishMany(ledger, 's1', 1);
      await publishMany(ledger, 's2', 1);
      const k = sessionKey('s1');
      await (ledger.log as LevelManifestLog).raw.batch(
        Array.from({ length: 257 }, (_, d) => ({
          type: 'put' as const,
          key: headsNodeKey({ depth: d, prefix: prefixOf(k, d) }),
          value: interior(1),
        })),
      );
      const report = await fsck(ledger);
      expect(report.findings).toContainEqual(
        expect.objectContaining({ code: 'RECORD_CORRUPT', message: expect.stringContaining('depth 256') }),
      );
    } finally {
      await ledger.close();
    }
  });
});
