/**
 * The session-heads index against records damaged under the store (LevelDB `x!` records written by hand): fsck
 * reports each; a split never folds a record it finds beside its new nodes into a signed root (it removes it); and
 * interior records along a whole key are a coded finding, not a crash; a node rewritten without its ancestors (a
 * session's leaf set back to an older head, its tail cut) is never folded into a signed root: the next append over it
 * is refused TREE_DAMAGED, on both backends.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { describe, expect, it } from 'vitest';
import { fsck } from '../../src/ops/maintenance.js';
import { LevelManifestLog } from '../../manifests/log/level/log.js';
import { headsNodeKey, headsNodeValue } from '../../manifests/log/level/session-heads.js';
import { headValue, prefixOf, sessionHeadsRoot, sessionKey } from '../../manifests/tlog/session-heads.js';
import { openLedger } from '../../src/ledger/open.js';
import { describePostgres, sqlOn } from '../support/postgres.js';
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
      const report = await verifyBundle(await openBundleDir(out), {
        trust: ledger.trustStore(),
        scope: { session: A },
      });
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

/** Two session ids whose keys part at the first bit: each a leaf right below the root. */
const splitPair = () => [idWith((b) => b >> 3 === 0), idWith((b) => b >> 3 === 1)] as const;

describe('a session-heads node rewritten without its ancestors', () => {
  it('embedded: a leaf set back to an older head offline (its tail cut, the root record left) is refused at the next append over it, nothing signed', async () => {
    const [S, T] = splitPair();
    const root = tempDir();
    let ledger = await open(root);
    const published = await publishMany(ledger, S, 3);
    await publishMany(ledger, T, 1);
    const before = await ledger.checkpoint();
    const location = ((ledger.log as LevelManifestLog).raw as unknown as { location: string }).location;
    await ledger.close();
    // Offline: S's tail (seq 1, 2) removed, S's leaf (depth 1) and head record set back to seq 0; the root left alone.
    const log = await LevelManifestLog.open(location);
    const db = log.raw;
    const pad = (n: number) => n.toString(16).padStart(12, '0');
    const head = JSON.parse((await db.get(`h!${S}`))!);
    await db.put(
      headsNodeKey({ depth: 1, prefix: prefixOf(sessionKey(S), 1) }),
      headsNodeValue({ leaf: true, key: sessionKey(S), value: headValue({ seq: 0, id: published[0]!.id }) }),
    );
    for (const seq of [1, 2]) await db.del(`e!${S}!${pad(seq)}`);
    for (const position of [1, 2]) await db.del(`p!${position.toString(16).padStart(16, '0')}`);
    await db.put(`h!${S}`, JSON.stringify({ ...head, seq: 0, id: published[0]!.id }));
    await db.put(`w!${S}`, '0');
    await log.close();
    ledger = await open(root);
    try {
      // T's path passes the root, whose stored hash no longer hashes its children: refused (before: appended, and
      // the checkpoint signed a root that proves S's chain ends at seq 0).
      await expect(ledger.publish(scope(T), sampleSummary('t-after'))).rejects.toMatchObject({
        code: 'TREE_DAMAGED',
        message: expect.stringContaining('does not hash its children'),
      });
      expect((await ledger.checkpoint()).checkpoint.size).toBe(before.checkpoint.size);
    } finally {
      await ledger.close();
    }
  }, 60_000);
});

describe('a session-heads root record damaged, then forged, at one tree', () => {
  it('keeps the pinned checkpoint with its line while the root cannot be read, so a forged root at that size is a FORK', async () => {
    const ROOT = { depth: 0, prefix: new Uint8Array(32) };
    const root = tempDir();
    let ledger = await open(root);
    const published = await publishMany(ledger, 's1', 3);
    const first = await ledger.checkpoint();
    const location = ((ledger.log as LevelManifestLog).raw as unknown as { location: string }).location;
    await ledger.close();
    const edit = async (value: string) => {
      const log = await LevelManifestLog.open(location);
      await log.raw.put(headsNodeKey(ROOT), value);
      await log.close();
    };
    // The root record unreadable: the checkpoint of this tree is the pinned one, its line kept (before: re-signed
    // and pinned without the line).
    await edit('i not-base64');
    ledger = await open(root);
    try {
      expect((await ledger.checkpoint()).note).toBe(first.note);
      // Signed by a key no longer the current one, it is not re-signed without its line either: a coded refusal.
      await ledger.rotateKey();
      await expect(ledger.checkpoint()).rejects.toMatchObject({
        code: 'TREE_DAMAGED',
        message: expect.stringContaining('the session-heads index cannot give its root'),
      });
    } finally {
      await ledger.close();
    }
    // The store still opens (the pinned note stands at open whoever signed it), and fsck reports the damage.
    ledger = await open(root);
    try {
      expect((await fsck(ledger)).findings.map((f) => f.code)).toContain('RECORD_CORRUPT');
    } finally {
      await ledger.close();
    }
    // A forged root at the same tree (s1's head set back to seq 0): compared with the pinned line, a FORK (before: a
    // second completeness claim for this tree was signed).
    await edit(
      headsNodeValue({ leaf: true, key: sessionKey('s1'), value: headValue({ seq: 0, id: published[0]!.id }) }),
    );
    await expect(open(root)).rejects.toMatchObject({ code: 'FORK' });
  }, 60_000);
});

describePostgres(
  'a session-heads node rewritten under a running PostgreSQL ledger',
  (pg) => {
    it('is refused at the next append over it (TREE_DAMAGED), by a process that has it cached or not; nothing signed', async () => {
      const [S, T] = splitPair();
      const root = tempDir();
      const schema = `heads_${process.pid}`;
      const postgres = { connectionString: pg.connectionString, schema };
      const a = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      let b: Awaited<ReturnType<typeof openLedger>> | undefined;
      try {
        const published = await publishMany(a, S, 3);
        await publishMany(a, T, 1);
        const before = await a.checkpoint();
        const q = (text: string, values?: unknown[]) => sqlOn(pg.connectionString, text, values);
        await q(`UPDATE "${schema}".session_heads SET hash = $1 WHERE depth = 1 AND prefix = $2`, [
          Buffer.from(headValue({ seq: 0, id: published[0]!.id })),
          Buffer.from(prefixOf(sessionKey(S), 1)),
        ]);
        await q(
          `WITH d AS (DELETE FROM "${schema}".entries WHERE session = $1 AND seq > 0) UPDATE "${schema}".heads SET seq = 0, id = $2 WHERE session = $1`,
          [S, published[0]!.id],
        );
        await q(`UPDATE "${schema}".watermarks SET seq = 0 WHERE session = $1`, [S]);
        b = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
        for (const ledger of [b, a])
          await expect(ledger.publish(scope(T), sampleSummary('t-after'))).rejects.toMatchObject({
            code: 'TREE_DAMAGED',
          });
        expect((await b.checkpoint()).checkpoint.size).toBe(before.checkpoint.size);
      } finally {
        await b?.close();
        await a.close();
      }
    }, 120_000);
  },
  'heads_damage',
);
