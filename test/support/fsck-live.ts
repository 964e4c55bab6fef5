/**
 * fsck beside live appends, for every backend: its passes (heads and chains, then the global order, then the tree,
 * then the session-heads index) read one moment of the log (`ManifestLog.readSnapshot`), so appends that commit
 * between them are not taken for a rollback, a tree of another size or a stale session-heads index.
 */
import { expect, it, vi } from 'vitest';
import type { Ledger } from '../../src/ledger/ledger.js';
import { fsck } from '../../src/ops/maintenance.js';
import { digestOf } from '../../store/hash/digest.js';
import type { BlobStore } from '../../store/blob-store.js';

const summary = (n: number) => ({ task: `task ${n}`, state: 'state', nextSteps: ['next'] });

/** Two sessions of two compactions each (4 manifests). */
export async function publishTwoSessions(ledger: Ledger): Promise<void> {
  let n = 0;
  for (const session of ['s1', 's2'])
    for (let i = 0; i < 2; i++) await ledger.publish({ principal: 'alice', session, run: 'r' }, summary(n++));
}

export function liveFsckCases(open: () => Promise<{ ledger: Ledger; cleanup: () => Promise<void> }>): void {
  it('sees none of the appends that commit while it walks: no false ROLLBACK, TREE_SIZE or SESSION_HEADS_ROOT', async () => {
    const { ledger, cleanup } = await open();
    try {
      await publishTwoSessions(ledger);
      // The first blob fsck reads (inside its walk of the chains, after the heads were read) waits for a new
      // session's first compaction and another compaction of s1 to commit.
      // fsck reads a tiered store's inline copy itself (`getWithoutFallback`: no fallback to a file copy), others by get.
      const blobs = ledger.blobs as unknown as Record<'get' | 'getWithoutFallback', BlobStore['get']>;
      const name = typeof blobs.getWithoutFallback === 'function' ? 'getWithoutFallback' : 'get';
      const get = blobs[name].bind(blobs);
      let appended = false;
      const spy = vi.spyOn(blobs, name).mockImplementation(async (...args) => {
        if (!appended) {
          appended = true;
          await ledger.publish({ principal: 'alice', session: 's3', run: 'r' }, summary(10));
          await ledger.publish({ principal: 'alice', session: 's1', run: 'r' }, summary(11));
        }
        return get(...args);
      });
      const report = await fsck(ledger);
      spy.mockRestore();
      expect(appended).toBe(true);
      expect(report.findings).toEqual([]);
      expect(report).toMatchObject({ ok: true, chains: 2, manifests: 4 });
      // The next fsck reads the moment after them, and finds it whole too.
      expect(await fsck(ledger)).toMatchObject({ ok: true, chains: 3, manifests: 6, findings: [] });
    } finally {
      await cleanup();
    }
  });

  it('takes a signal: one aborted before the call is CANCELLED (the reason its cause) with `fn` never run, one that is no AbortSignal INVALID_ARGUMENT; one that does not abort changes nothing', async () => {
    const { ledger, cleanup } = await open();
    try {
      await publishTwoSessions(ledger);
      const { log } = ledger;
      const reason = new Error('the caller gave up');
      let ran = false;
      const run = async () => void (ran = true);
      const err = await log.readSnapshot!(run, { signal: AbortSignal.abort(reason) }).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      for (const options of [{ signal: 'soon' }, { signa: undefined }, 7])
        await expect(log.readSnapshot!(run, options as never)).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'INVALID_ARGUMENT',
        });
      expect(ran).toBe(false);
      const size = await log.readSnapshot!(async (view) => (await view.treeHead()).size, {
        signal: new AbortController().signal,
      });
      expect(size).toBe(4);
    } finally {
      await cleanup();
    }
  });

  it('gives a view that reads one moment and refuses writes', async () => {
    const { ledger, cleanup } = await open();
    try {
      await publishTwoSessions(ledger);
      const { log } = ledger;
      expect(log.readSnapshot).toBeTypeOf('function');
      const seen = await log.readSnapshot!(async (view) => {
        const before = await view.treeHead();
        await ledger.publish({ principal: 'alice', session: 's3', run: 'r' }, summary(20));
        const heads: string[] = [];
        for await (const h of view.heads()) heads.push(h.session);
        const entries: number[] = [];
        for await (const e of view.entries()) entries.push(e.position);
        const after = await view.treeHead();
        const window = await view.headWindow('s3');
        const id = digestOf(new TextEncoder().encode('x'));
        const append = view.append({
          session: 's9',
          principal: 'p',
          seq: 0,
          prev: null,
          id,
          envelope: '{"payload":"eA=="}',
        });
        await expect(append).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
        await expect(view.setWatermark('s1', 7)).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
        return { before, after, heads, entries, window };
      });
      expect(seen.heads).toEqual(['s1', 's2']);
      expect(seen.entries).toEqual([0, 1, 2, 3]);
      expect(seen.before.size).toBe(4);
      expect(seen.after).toEqual(seen.before);
      expect(seen.window.head).toBeUndefined();
      // The log itself moved on, and the view's refused writes left nothing.
      expect((await log.treeHead()).size).toBe(5);
      expect(await log.head('s9')).toBeUndefined();
      expect(await log.getWatermark('s1')).toBe(1);
      expect(await fsck(ledger)).toMatchObject({ ok: true, chains: 3, manifests: 5, findings: [] });
    } finally {
      await cleanup();
    }
  });
}
