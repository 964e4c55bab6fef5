/**
 * `openLedger({ signal })` inside the open's steps that go over many items: the head check over every chain, the
 * root's staging leftovers (trust.json's, key files', the pin's) and the blob store's (`tmp/`). An abort mid-step ends
 * the open `CANCELLED` before the step has gone over them all (counted through a hook on the work itself, not timed),
 * with the store free again; the next open goes over every one (those removed stay removed, the rest go then).
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { sampleSummary, tempDir } from './support/tmp.js';

/** The root's staging files removed so far, and what to do at each (the open's abort, at the chosen count). */
const unlinks = vi.hoisted(() => ({ count: 0, at: undefined as undefined | (() => void) }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  // Counts the removals of `writeFileAtomic` / `createFileWhole` staging names (removeAtomicStagingLeftovers).
  const unlink = (async (path: string) => {
    await real.unlink(path);
    if (/\.[0-9a-f]{16}\.tmp$/.test(String(path))) {
      unlinks.count++;
      unlinks.at?.();
    }
  }) as typeof real.unlink;
  return { ...real, default: { ...real, unlink }, unlink };
});

const CHAINS = 120;
const LEFTOVERS = 400;
const ABORT_AT = 20;

/** A store of `CHAINS` chains (one manifest each), closed. */
async function storeOfManyChains(): Promise<string> {
  const root = tempDir();
  const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
  try {
    for (let n = 0; n < CHAINS; n++)
      await ledger.publish({ principal: 'alice', session: `s${n}`, run: 'r' }, sampleSummary(n));
  } finally {
    await ledger.close();
  }
  return root;
}

const cancelled = (reason: Error) => ({ name: 'LedgerError', code: 'CANCELLED', cause: reason });

describe("openLedger's signal within the steps over many items", () => {
  let root: string;
  // A fresh store each (tempDir's are removed after each test).
  beforeEach(async () => {
    root = await storeOfManyChains();
  }, 120_000);

  it('ends the head check over every chain at the abort: CANCELLED before the last chain; the next open checks them all', async () => {
    const proto = LevelManifestLog.prototype as unknown as { _headWindow: (session: string) => Promise<unknown> };
    const headWindow = proto._headWindow;
    let checked = 0;
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const spy = vi.spyOn(proto, '_headWindow').mockImplementation(function (this: unknown, session: string) {
      if (++checked === ABORT_AT) abort.abort(reason);
      return headWindow.call(this, session);
    });
    try {
      await expect(openLedger({ root, host: 'h1', signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
        cancelled(reason),
      );
      expect(checked).toBe(ABORT_AT);
      checked = 0;
      // The log's lock was released: the next open works, and checks every chain.
      const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
      try {
        expect(checked).toBe(CHAINS);
        expect(ledger.recovery.headProblems).toEqual([]);
        expect((await ledger.resume({ principal: 'alice', session: `s${CHAINS - 1}` }))?.seq).toBe(0);
      } finally {
        await ledger.close();
      }
    } finally {
      spy.mockRestore();
    }
  });

  it("ends the removal of the root's staging leftovers at the abort: CANCELLED with the rest in place; the next open removes them", async () => {
    for (let n = 0; n < LEFTOVERS; n++)
      writeFileSync(join(root, 'keys', `.${n.toString(16).padStart(16, '0')}.tmp`), 'left by a crash');
    const left = () => readdirSync(join(root, 'keys')).filter((name) => name.endsWith('.tmp')).length;
    expect(left()).toBe(LEFTOVERS);
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    unlinks.count = 0;
    unlinks.at = () => {
      if (unlinks.count === ABORT_AT) abort.abort(reason);
    };
    try {
      await expect(openLedger({ root, host: 'h1', signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
        cancelled(reason),
      );
      expect(unlinks.count).toBe(ABORT_AT);
      expect(left()).toBe(LEFTOVERS - ABORT_AT);
    } finally {
      unlinks.at = undefined;
    }
    const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
    try {
      expect(ledger.recovery.stagingRemoved).toBe(LEFTOVERS - ABORT_AT);
      expect(left()).toBe(0);
    } finally {
      await ledger.close();
    }
  });

  it("ends the blob store's recovery of its staging leftovers at the abort: CANCELLED with the rest in place; the next open removes them", async () => {
    for (let n = 0; n < LEFTOVERS; n++)
      writeFileSync(join(root, 'tmp', `${n.toString(16).padStart(64, '0')}.tmp`), 'a blob write a crash stopped');
    const left = () => readdirSync(join(root, 'tmp')).filter((name) => name.endsWith('.tmp')).length;
    expect(left()).toBe(LEFTOVERS);
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    let removed = 0;
    // The blob store's own seam for its filesystem calls (openLedger's `fs`).
    const fs: FsOps = {
      ...nodeFsOps,
      rm: async (path) => {
        await nodeFsOps.rm(path);
        if (++removed === ABORT_AT) abort.abort(reason);
      },
    };
    await expect(openLedger({ root, host: 'h1', fs, signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
      cancelled(reason),
    );
    expect(removed).toBe(ABORT_AT);
    expect(left()).toBe(LEFTOVERS - ABORT_AT);
    const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
    try {
      expect(ledger.recovery.stagingRemoved).toBe(LEFTOVERS - ABORT_AT);
      expect(left()).toBe(0);
    } finally {
      await ledger.close();
    }
  });
});
