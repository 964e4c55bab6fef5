/**
 * A session's head set back (or its records removed) under the embedded store while no process had it open, with the
 * tail and the watermark that would tell, the session-heads index left as it was: the index, whose root the pinned
 * checkpoint signs, still commits the later head. Resume, history and publish hold each session's head to the index
 * at its first read in a process and refuse `ROLLBACK` (before: the older summary was resumed, and a publish appended
 * over the cut, re-signing an index that hid it). A head the index commits is walked once per process.
 */
import { describe, expect, it } from 'vitest';
import { AbstractManifestLog, type CutBackFacts } from '../../manifests/index.js';
import { headsNodeKey, headsNodeValue } from '../../manifests/log/level/session-heads.js';
import { headValue, prefixOf, sessionKey } from '../../manifests/tlog/session-heads.js';
import { fsck } from '../../src/ops/maintenance.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { editClosedLog, logLocation, open, publishMany, scope } from './ledger-support.js';

const hex12 = (n: number) => n.toString(16).padStart(12, '0');

/** Edits the closed store's records, reading them through `read` (`undefined`: removed). */
const edit = (
  location: string,
  change: (read: (key: string) => Promise<string>) => Promise<Record<string, string | undefined>>,
) => editClosedLog(location, (log) => change(async (key) => (await log.raw.get(key))!));

/** A store with s published three times and t once, closed; its root and s's receipts. */
async function store() {
  const root = tempDir();
  const ledger = await open(root);
  const published = await publishMany(ledger, 's', 3);
  await publishMany(ledger, 't', 1);
  const location = logLocation(ledger);
  await ledger.close();
  return { root, location, published };
}

describe('a head set back under the embedded store, the session-heads index left as it was', () => {
  it('is refused ROLLBACK by resume, history and publish (nothing appended); other sessions read on; fsck reports it', async () => {
    const { root, location, published } = await store();
    // s back to seq 0: its head record, watermark, and entries 1 and 2 with their positions (1 and 2).
    await edit(location, async (read) => {
      const head = JSON.parse(await read('h!s'));
      return {
        'h!s': JSON.stringify({ ...head, seq: 0, id: published[0]!.id }),
        'w!s': '0',
        [`e!s!${hex12(1)}`]: undefined,
        [`e!s!${hex12(2)}`]: undefined,
        [`p!${(1).toString(16).padStart(16, '0')}`]: undefined,
        [`p!${(2).toString(16).padStart(16, '0')}`]: undefined,
      };
    });
    const ledger = await open(root);
    try {
      for (const read of [() => ledger.resume(scope('s')), () => ledger.history(scope('s'))])
        await expect(read()).rejects.toMatchObject({
          code: 'ROLLBACK',
          message: expect.stringContaining("commits a head other than the head record's seq 0"),
        });
      const size = (await ledger.checkpoint()).checkpoint.size;
      await expect(ledger.publish(scope('s'), sampleSummary('over the cut'))).rejects.toMatchObject({
        code: 'ROLLBACK',
      });
      expect((await ledger.log.head('s'))?.seq).toBe(0);
      expect((await ledger.checkpoint()).checkpoint.size).toBe(size);
      expect((await ledger.resume(scope('t')))?.seq).toBe(0);
      expect((await fsck(ledger)).findings.map((f) => f.code)).toContain('SESSION_HEADS_ROOT');
    } finally {
      await ledger.close();
    }
  }, 60_000);

  it("is refused ROLLBACK when the session's records are all removed (before: no summary, and a new chain began)", async () => {
    const { root, location } = await store();
    await edit(location, async () => {
      const ops: Record<string, string | undefined> = { 'h!s': undefined, 'w!s': undefined };
      for (const seq of [0, 1, 2]) ops[`e!s!${hex12(seq)}`] = undefined;
      return ops;
    });
    const ledger = await open(root);
    try {
      for (const read of [() => ledger.resume(scope('s')), () => ledger.history(scope('s'))])
        await expect(read()).rejects.toMatchObject({
          code: 'ROLLBACK',
          message: expect.stringContaining('commits a head for the session, which has no head record'),
        });
      await expect(ledger.publish(scope('s'), sampleSummary('anew'))).rejects.toMatchObject({ code: 'ROLLBACK' });
      expect(await ledger.log.head('s')).toBeUndefined();
      // The facts a log that does not override them gives (AbstractManifestLog's, from the head window) say it too.
      const facts = await (
        AbstractManifestLog.prototype as unknown as { _cutBackFacts(s: string): Promise<CutBackFacts> }
      )._cutBackFacts.call(ledger.log, 's');
      expect(facts.indexProblem).toMatch(/commits a head for the session, which has no head record/);
    } finally {
      await ledger.close();
    }
  }, 60_000);

  it('is TREE_DAMAGED, not ROLLBACK, when the leaf was rewritten too (a path that no longer hashes to the root)', async () => {
    const { root, location, published } = await store();
    // The leaf set back with the head: the index itself is no longer whole (its root still commits seq 2).
    await edit(location, async (read) => {
      const head = JSON.parse(await read('h!s'));
      const ops: Record<string, string | undefined> = {
        'h!s': JSON.stringify({ ...head, seq: 0, id: published[0]!.id }),
      };
      const leaf = headsNodeValue({
        leaf: true,
        key: sessionKey('s'),
        value: headValue({ seq: 2, id: published[2]!.id }),
      });
      // The leaf's record, found by its value a few depths down.
      for (let depth = 0; depth <= 4; depth++) {
        const key = headsNodeKey({ depth, prefix: prefixOf(sessionKey('s'), depth) });
        const raw = await read(key).catch(() => undefined);
        if (raw === leaf)
          ops[key] = headsNodeValue({
            leaf: true,
            key: sessionKey('s'),
            value: headValue({ seq: 0, id: published[0]!.id }),
          });
      }
      expect(Object.keys(ops)).toHaveLength(2);
      for (const seq of [1, 2]) ops[`e!s!${hex12(seq)}`] = undefined;
      ops['w!s'] = '0';
      return ops;
    });
    const ledger = await open(root);
    try {
      await expect(ledger.resume(scope('s'))).rejects.toMatchObject({
        name: 'ManifestError',
        code: 'TREE_DAMAGED',
        message: expect.stringContaining('do not hash to its root'),
      });
      // checkPublish (compact's check before the model) refuses it as the append's index update does, not ROLLBACK.
      const checked = await ledger.checkPublish(scope('s')).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(checked).toMatchObject({ name: 'ManifestError', code: 'TREE_DAMAGED' });
      await expect(ledger.publish(scope('s'), sampleSummary('over the damage'))).rejects.toMatchObject({
        name: 'ManifestError',
        code: 'TREE_DAMAGED',
        message: checked!.message,
      });
    } finally {
      await ledger.close();
    }
  }, 60_000);
});

describe('holding heads to the session-heads index', () => {
  it('walks a head once per process: not again for the same head, nor for a head this process published', async () => {
    const { root } = await store();
    const ledger = await open(root);
    try {
      // Every node a walk reads is looked up in the index's node cache first.
      const cache = (ledger.log as unknown as { headsNodes: { peek: (path: unknown) => unknown } }).headsNodes;
      const peek = cache.peek.bind(cache);
      let nodeReads = 0;
      cache.peek = (path) => {
        nodeReads++;
        return peek(path);
      };
      expect((await ledger.resume(scope('s')))?.seq).toBe(2);
      expect(nodeReads).toBeGreaterThan(0);
      nodeReads = 0;
      expect((await ledger.resume(scope('s')))?.seq).toBe(2);
      await ledger.publish(scope('s'), sampleSummary('next'));
      expect((await ledger.resume(scope('s')))?.seq).toBe(3);
      expect(await ledger.resume(scope('none-yet'))).toBeUndefined();
      const afterNew = nodeReads;
      expect(afterNew).toBeGreaterThan(0); // a session without a head: its absence walked once
      expect(await ledger.resume(scope('none-yet'))).toBeUndefined();
      expect(nodeReads).toBe(afterNew);
      nodeReads = 0;
      expect((await ledger.resume(scope('s')))?.seq).toBe(3);
      expect(nodeReads).toBe(0);
    } finally {
      await ledger.close();
    }
  }, 60_000);

  it("judges a disagreement of the node cache again from the read's snapshot (the cache may hold another state)", async () => {
    const { root } = await store();
    const ledger = await open(root);
    try {
      // The cache's root made to disagree with the stored index, as a state a batch is committing would.
      const cache = (ledger.log as unknown as { headsNodes: { commit: (changes: unknown[]) => void } }).headsNodes;
      cache.commit([
        { path: { depth: 0, prefix: new Uint8Array(32) }, node: { leaf: false, hash: new Uint8Array(32) } },
      ]);
      expect((await ledger.resume(scope('s')))?.seq).toBe(2);
    } finally {
      await ledger.close();
    }
  }, 60_000);
});
