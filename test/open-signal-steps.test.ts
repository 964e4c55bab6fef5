/**
 * `openLedger({ signal })` inside the open's steps that go over many items: the head check over every chain, the
 * root's staging leftovers (trust.json's, key files', the pin's), the blob store's (`tmp/`) and the blobs a stopped gc
 * held aside (`gc-aside/`), and, in a store an older version wrote, the embedded log's building of its session-heads
 * index and its tree's backfill; and right after LevelDB's own open, which cannot be interrupted. An abort mid-step
 * ends the open `CANCELLED` before the step has gone over them all (counted through a hook on the work itself, not
 * timed), with the store free again; the next open goes over every one (those removed stay removed, the rest go
 * then). A diagnosing open (fsck's) ends its listing of the blobs held aside at the abort too, and fsck's own head
 * check ends at its signal the same way.
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Level } from 'level';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { HEADS_BUILT_KEY } from '../manifests/log/level/session-heads.js';
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

/**
 * Spies on the method `name` of `proto` and aborts `abort` with `reason` at the ABORT_AT-th of what it counts: the
 * method's calls (`each: 'call'`), or the items it yields (`'item'`, an async generator's). `count()` says how many so
 * far, `reset()` starts again from 0, `restore()` puts the method back.
 */
function abortingAt(proto: object, name: string, each: 'call' | 'item', abort: AbortController, reason: Error) {
  const target = proto as Record<string, (...args: unknown[]) => unknown>;
  const original = target[name]!;
  let count = 0;
  const tick = () => {
    if (++count === ABORT_AT) abort.abort(reason);
  };
  const spy = vi.spyOn(target, name).mockImplementation(
    each === 'call'
      ? function (this: unknown, ...args: unknown[]) {
          tick();
          return original.apply(this, args);
        }
      : async function* (this: unknown, ...args: unknown[]) {
          for await (const item of original.apply(this, args) as AsyncIterable<unknown>) {
            tick();
            yield item;
          }
        },
  );
  return { count: () => count, reset: () => void (count = 0), restore: () => spy.mockRestore() };
}

describe("openLedger's signal within the steps over many items", () => {
  let root: string;
  // A fresh store each (tempDir's are removed after each test).
  beforeEach(async () => {
    root = await storeOfManyChains();
  }, 120_000);

  it('ends the head check over every chain at the abort: CANCELLED before the last chain; the next open checks them all', async () => {
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const checked = abortingAt(LevelManifestLog.prototype, '_headWindow', 'call', abort, reason);
    try {
      await expect(openLedger({ root, host: 'h1', signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
        cancelled(reason),
      );
      expect(checked.count()).toBe(ABORT_AT);
      checked.reset();
      // The log's lock was released: the next open works, and checks every chain.
      const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
      try {
        expect(checked.count()).toBe(CHAINS);
        expect(ledger.recovery.headProblems).toEqual([]);
        expect((await ledger.resume({ principal: 'alice', session: `s${CHAINS - 1}` }))?.seq).toBe(0);
      } finally {
        await ledger.close();
      }
    } finally {
      checked.restore();
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

/** The embedded log's records under `root` whose keys `pick` picks, read (and removed, with `remove`) through LevelDB itself. */
async function records(root: string, pick: (key: string) => boolean, remove = false): Promise<string[]> {
  const db = new Level<string, string>(join(root, 'manifests-v1'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  try {
    const keys: string[] = [];
    for await (const key of db.keys()) if (pick(key)) keys.push(key);
    if (remove) await db.batch(keys.map((key) => ({ type: 'del' as const, key })));
    return keys;
  } finally {
    await db.close();
  }
}

/** The index's records and its marker: what a store from before the session-heads index lacks. */
const headsIndex = (key: string) => key.startsWith('x!') || key === HEADS_BUILT_KEY;
/** The tree's records (its nodes and size, the ids' leaf positions): what a store from before the tree lacks. */
const treeRecords = (key: string) => key.startsWith('n!') || key.startsWith('i!');

describe("openLedger's signal at the embedded log's own steps", () => {
  let root: string;
  beforeEach(async () => {
    root = await storeOfManyChains();
  }, 120_000);

  /** The next open, with no signal: it works, and finds every chain (and each chain's head). */
  async function opensWhole(): Promise<void> {
    const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
    try {
      expect(ledger.recovery.headProblems).toEqual([]);
      expect((await ledger.resume({ principal: 'alice', session: `s${CHAINS - 1}` }))?.seq).toBe(0);
      expect((await fsck(ledger)).findings).toEqual([]);
    } finally {
      await ledger.close();
    }
  }

  it("is answered right after LevelDB's own open, which it cannot interrupt: CANCELLED, the log closed before it read on (a store from before the index: not built); the next open builds it", async () => {
    const index = await records(root, headsIndex, true);
    expect(index).toContain(HEADS_BUILT_KEY);
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const proto = Level.prototype as unknown as { _open: (...args: unknown[]) => Promise<void> };
    const nativeOpen = proto._open;
    let opens = 0;
    // Aborted while LevelDB's native open is under way: it completes, and the log answers the signal after it.
    const spy = vi.spyOn(proto, '_open').mockImplementation(function (this: unknown, ...args: unknown[]) {
      opens++;
      const opening = nativeOpen.apply(this, args);
      abort.abort(reason);
      return opening;
    });
    try {
      await expect(openLedger({ root, host: 'h1', signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
        cancelled(reason),
      );
      expect(opens).toBe(1);
    } finally {
      spy.mockRestore();
    }
    // Closed again (its lock released: readable here) before the index was built.
    expect(await records(root, headsIndex)).toEqual([]);
    await opensWhole();
    expect((await records(root, headsIndex)).sort()).toEqual(index.sort());
  });

  it('ends the building of the session-heads index of a store from before it at the abort: CANCELLED, not marked built; the next open builds it whole', async () => {
    const index = await records(root, headsIndex, true);
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const read = abortingAt(LevelManifestLog.prototype, '_heads', 'item', abort, reason);
    try {
      await expect(openLedger({ root, host: 'h1', signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
        cancelled(reason),
      );
      expect(read.count()).toBe(ABORT_AT);
    } finally {
      read.restore();
    }
    expect(await records(root, (key) => key === HEADS_BUILT_KEY)).toEqual([]);
    await opensWhole();
    expect((await records(root, headsIndex)).sort()).toEqual(index.sort());
  });

  it("ends the tree's backfill of a store from before the tree at the abort: CANCELLED, no batch half written; the next open backfills it whole", async () => {
    const tree = await records(root, treeRecords, true);
    expect(tree).toContain('n!size');
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const taken = abortingAt(LevelManifestLog.prototype, 'entries', 'item', abort, reason);
    try {
      await expect(openLedger({ root, host: 'h1', signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
        cancelled(reason),
      );
      expect(taken.count()).toBe(ABORT_AT);
    } finally {
      taken.restore();
    }
    // Its one batch (of up to 1,000 leaves) was not written: no node, no size.
    expect(await records(root, treeRecords)).toEqual([]);
    await opensWhole();
    expect((await records(root, treeRecords)).sort()).toEqual(tree.sort());
  });

  it('ends the putting back of the blobs a stopped gc held aside at the abort: CANCELLED, each put back whole or left aside; the next open puts back the rest', async () => {
    const blobs = join(root, 'blobs-v1', 'blake3');
    const aside = join(root, 'gc-aside');
    mkdirSync(join(blobs, '00', '00'), { recursive: true, mode: 0o700 });
    const names = Array.from({ length: LEFTOVERS }, (_, n) => n.toString(16).padStart(64, '0'));
    for (const name of names) writeFileSync(join(aside, name), `a blob a gc held aside: ${name}`);
    const back = () => readdirSync(join(blobs, '00', '00')).length;
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    let linked = 0;
    const fs: FsOps = {
      ...nodeFsOps,
      link: async (from, to) => {
        await nodeFsOps.link(from, to);
        if (++linked === ABORT_AT) abort.abort(reason);
      },
    };
    await expect(openLedger({ root, host: 'h1', fs, signal: abort.signal, onNotice: () => {} })).rejects.toMatchObject(
      cancelled(reason),
    );
    expect(linked).toBe(ABORT_AT);
    // The one linked as the signal came was put back whole (its name aside removed), as those before it.
    expect(back()).toBe(ABORT_AT);
    expect(readdirSync(aside)).toHaveLength(LEFTOVERS - ABORT_AT);
    const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
    await ledger.close();
    expect(back()).toBe(LEFTOVERS);
    expect(readdirSync(aside)).toEqual([]);
  });
});

describe("a diagnosing open's signal within its listing of the blob store's leftovers", () => {
  it('ends the listing of the blobs a stopped gc held aside, in a root other processes share, at the abort: CANCELLED before the last is looked at, each left in place', async () => {
    const root = tempDir();
    await (await openLedger({ root, host: 'h1', onNotice: () => {} })).close();
    const aside = join(root, 'gc-aside');
    const names = Array.from({ length: LEFTOVERS }, (_, n) => n.toString(16).padStart(64, '0'));
    for (const name of names) writeFileSync(join(aside, name), `a blob a gc held aside: ${name}`);
    // A log that says it is not exclusive (processes sharing the root, as PostgreSQL's do): the blob store then keeps
    // what another process's gc moved aside just now, and looks at each blob held aside (its ctime) as it lists it.
    const level = await LevelManifestLog.open(join(root, 'manifests-v1'));
    const shared = Object.create(level, { exclusive: { value: false }, close: { value: async () => {} } });
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    let looked = 0;
    const fs: FsOps = {
      ...nodeFsOps,
      lstat: (async (path: string) => {
        const st = await nodeFsOps.lstat(path);
        if (dirname(path) === aside && ++looked === ABORT_AT) abort.abort(reason);
        return st;
      }) as FsOps['lstat'],
    };
    try {
      // fsck's open: it writes nothing, and lists the leftovers it leaves in place.
      await expect(
        openLedger({ root, host: 'h1', log: shared, fs, diagnose: true, signal: abort.signal, onNotice: () => {} }),
      ).rejects.toMatchObject(cancelled(reason));
      expect(looked).toBe(ABORT_AT);
      expect(readdirSync(aside).sort()).toEqual(names);
    } finally {
      await level.close();
    }
  });
});

describe("fsck's signal within its head check", () => {
  it('ends the head check over every chain at the abort: CANCELLED (a LedgerError, the reason its cause) before the last chain', async () => {
    const root = await storeOfManyChains();
    const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const checked = abortingAt(LevelManifestLog.prototype, '_headWindow', 'call', abort, reason);
    try {
      await expect(fsck(ledger, { signal: abort.signal })).rejects.toMatchObject(cancelled(reason));
      expect(checked.count()).toBe(ABORT_AT);
    } finally {
      checked.restore();
      await ledger.close();
    }
  }, 120_000);
});

describe("LevelManifestLog.open's signal", () => {
  it('an aborted one: CANCELLED before anything is made; one that is no AbortSignal: INVALID_ARGUMENT; openLedger passes its own (levelLog takes none)', async () => {
    const path = join(tempDir(), 'log');
    const reason = new Error('the caller gave up');
    await expect(LevelManifestLog.open(path, { signal: AbortSignal.abort(reason) })).rejects.toMatchObject({
      name: 'ManifestError',
      code: 'CANCELLED',
      cause: reason,
    });
    expect(existsSync(path)).toBe(false);
    const notASignal = { aborted: false } as unknown as AbortSignal;
    await expect(LevelManifestLog.open(path, { signal: notASignal })).rejects.toMatchObject({
      name: 'ManifestError',
      code: 'INVALID_ARGUMENT',
    });
    expect(existsSync(path)).toBe(false);
    const levelLog = { signal: new AbortController().signal } as unknown as { writeBatch?: never };
    await expect(openLedger({ root: tempDir(), host: 'h1', levelLog })).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('unknown option "signal"'),
    });
    // With a signal that never aborts, it opens as without one.
    const log = await LevelManifestLog.open(path, { signal: new AbortController().signal });
    await log.close();
  });
});
