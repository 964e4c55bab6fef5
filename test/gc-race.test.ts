/**
 * gc against a publish that re-puts the bytes of an old orphan, interleaved deterministically through hooks:
 * the re-put lands between gc's judgement of the blob's time and its removal. The acknowledged publish must
 * keep its blob, on the filesystem (a blob file) and in LevelDB (an inline blob).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { mkdir, readdir, readFile, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { join } from 'node:path';
import { digestHex } from '../store/hash/digest.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { gc } from '../src/ops/maintenance.js';

const HOUR = 3_600_000;
const first = { principal: 'alice', session: 'first', run: 'r' };
const second = { principal: 'alice', session: 'second', run: 'r' };

describe('reads while gc holds a blob aside', () => {
  it('resume, stat and has find a blob in gc-aside/ while gc judges it (a publish just refreshed it)', async () => {
    const root = tempDir();
    let judging: (() => Promise<void>) | undefined;
    const fs: FsOps = {
      ...nodeFsOps,
      // gc's judgement of the file it holds aside: the reads run at that very moment.
      lstat: (async (p: string, o?: unknown) => {
        if (p.includes('/gc-aside/') && judging) {
          const run = judging;
          judging = undefined;
          await run();
        }
        return nodeFsOps.lstat(p, o as never);
      }) as FsOps['lstat'],
    };
    const ledger: Ledger = await openLedger({ root, host: 'host-a', fs, inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const summary = sampleSummary('held aside');
      const { digest } = await ledger.publish(first, summary);
      const hex = digestHex(digest);
      const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(file, old, old);
      const seen: unknown[] = [];
      judging = async () => {
        // A publish of the same bytes refreshed the file before gc moved it aside; what it acknowledged must read.
        seen.push((await ledger.resume(first))?.manifest.summary.digest);
        seen.push((await ledger.blobs.stat(digest))?.size);
        seen.push(await ledger.blobs.has(digest));
        seen.push(await readdir(join(root, 'gc-aside')));
        // The refresh of that publish's put, which gc sees now on the file it holds: judged young, linked back.
        const now = new Date();
        await utimes(join(root, 'gc-aside', hex), now, now);
      };
      const removed = await ledger.blobs.delete(digest, { storedBeforeMs: Date.now() - HOUR });
      expect(removed).toBe(false);
      expect(seen).toEqual([digest, expect.any(Number), true, [hex]]);
      expect((await ledger.resume(first))?.manifest.summary.digest).toBe(digest);
    } finally {
      await ledger.close();
    }
  });
});

describe('a put while gc holds a damaged copy aside', () => {
  it('links its staged copy at the path (the copy aside is not the file it would quarantine)', async () => {
    const root = tempDir();
    let hook: ((to: string) => Promise<void>) | undefined;
    const fs: FsOps = {
      ...nodeFsOps,
      link: async (from, to) => {
        try {
          return await nodeFsOps.link(from, to);
        } catch (err) {
          const run = hook;
          hook = undefined;
          if (run) await run(to); // gc moves the old file aside right after the EEXIST
          throw err;
        }
      },
    };
    const ledger = await openLedger({ root, host: 'h', fs, inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const summary = sampleSummary('damaged, then held aside');
      const { digest } = await ledger.publish(first, summary);
      const hex = digestHex(digest);
      const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const bytes = await readFile(file);
      bytes[0]! ^= 1; // bit rot, same size
      await writeFile(file, bytes);
      hook = async (to) => {
        if (to === file) await rename(file, join(root, 'gc-aside', hex));
      };
      expect((await ledger.publish(second, summary)).digest).toBe(digest);
      expect((await ledger.resume({ principal: 'alice', session: 'second' }))?.manifest.summary.digest).toBe(digest);
    } finally {
      await ledger.close();
    }
  });
});

describe('a put that finds a damaged copy gc takes away before the put quarantines it', () => {
  it('links its staged copy at the path: the put succeeds and the bytes read back', async () => {
    const root = tempDir();
    let hook: (() => Promise<void>) | undefined;
    const fs: FsOps = {
      ...nodeFsOps,
      rename: async (from, to) => {
        const run = hook;
        hook = undefined;
        // gc's conditional delete of the old orphan runs between the put's look at it and its quarantine.
        if (run && to.startsWith(join(root, 'quarantine'))) await run();
        return nodeFsOps.rename(from, to);
      },
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('noble'), fs });
    try {
      const bytes = new TextEncoder().encode('an old orphan, damaged on disk, then put again');
      const { digest } = await store.put(bytes);
      const hex = digestHex(digest);
      const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const damaged = await readFile(file);
      damaged[0]! ^= 1; // bit rot, same size
      await writeFile(file, damaged);
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(file, old, old);
      let removed: boolean | undefined;
      hook = async () => {
        removed = await store.delete(digest, { storedBeforeMs: Date.now() - HOUR });
      };
      expect((await store.put(bytes)).digest).toBe(digest);
      expect(removed, 'gc took the damaged copy meanwhile').toBe(true);
      expect(new Uint8Array(await store.get(digest))).toEqual(bytes);
      expect(await readdir(join(root, 'tmp'))).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('gc of a blob file', () => {
  it('keeps the blob of a publish whose re-put lands between its time check and its removal', async () => {
    const root = tempDir();
    let hookFile: string | undefined;
    let interleave: (() => Promise<void>) | undefined;
    // The step that removes the file from its name (unlink, or a rename aside) first lets the publish run.
    const beforeRemoval = async (path: string) => {
      if (path !== hookFile || !interleave) return;
      const run = interleave;
      interleave = undefined;
      await run();
    };
    const fs: FsOps = {
      ...nodeFsOps,
      unlink: async (p) => {
        await beforeRemoval(p);
        return nodeFsOps.unlink(p);
      },
      rename: async (a, b) => {
        await beforeRemoval(a);
        return nodeFsOps.rename(a, b);
      },
    };
    const ledger: Ledger = await openLedger({ root, host: 'host-a', fs, inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const summary = sampleSummary('old orphan');
      const { digest } = await ledger.publish(first, summary);
      const hex = digestHex(digest);
      hookFile = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(hookFile, old, old);
      let published: unknown;
      interleave = async () => {
        published = await ledger.publish(second, summary);
      };
      // gc's conditional delete of the blob as if no manifest named it (the first one "expired").
      await ledger.blobs.delete(digest, { storedBeforeMs: Date.now() - HOUR });
      expect(published, 'the publish ran inside the delete').toBeDefined();
      expect((await ledger.resume({ principal: 'alice', session: 'second' }))?.manifest.summary.digest).toBe(digest);
    } finally {
      await ledger.close();
    }
  });

  it('moves a blob it holds aside back by rename when linking it back fails: the put that refreshed it stays readable', async () => {
    const root = tempDir();
    const bytes = new TextEncoder().encode('summary bytes '.repeat(100));
    const opened: { store?: FsBlobStore } = {};
    let armed = false;
    const fs: FsOps = {
      ...nodeFsOps,
      rename: async (a, b) => {
        // A publish re-puts the bytes just before gc moves the file aside: it finds the file and refreshes it.
        if (armed && b.includes('/gc-aside/')) await opened.store!.put(bytes);
        return nodeFsOps.rename(a, b);
      },
      link: async (a, b) => {
        if (armed && a.includes('/gc-aside/')) throw Object.assign(new Error('injected EIO'), { code: 'EIO' });
        return nodeFsOps.link(a, b);
      },
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    opened.store = store;
    const { digest } = await store.put(bytes);
    const hex = digestHex(digest);
    const old = new Date(Date.now() - 2 * HOUR);
    await utimes(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), old, old);
    armed = true;
    expect(await store.delete(digest, { storedBeforeMs: Date.now() - HOUR })).toBe(false);
    armed = false;
    expect(await readdir(join(root, 'gc-aside'))).toEqual([]);
    expect(new Uint8Array(await store.get(digest))).toEqual(bytes);
    await store.close();
  });
});

describe('a corrupt blob found by a put', () => {
  it('is not moved out of the root through a symlink planted at quarantine/ after open', async () => {
    const base = tempDir();
    const root = join(base, 'root');
    await mkdir(join(base, 'outside'));
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto') });
    const bytes = new TextEncoder().encode('a summary');
    const { digest } = await store.put(bytes);
    const hex = digestHex(digest);
    const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    await rm(file);
    await writeFile(file, 'damaged!!', { mode: 0o600 });
    await rm(join(root, 'quarantine'), { recursive: true });
    await symlink(join(base, 'outside'), join(root, 'quarantine'));
    await expect(store.put(bytes)).rejects.toMatchObject({ code: 'UNSAFE_PATH' });
    expect(await readdir(join(base, 'outside'))).toEqual([]);
    await store.close();
  });
});

describe('gc of an inline blob (LevelDB)', () => {
  it('keeps the blob of a publish whose append comes between its time check and its delete batch', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', onNotice: () => {} });
    try {
      const summary = sampleSummary('old inline orphan');
      const { digest, size } = await ledger.publish(first, summary);
      const db = (ledger.log as LevelManifestLog).raw;
      const hex = digestHex(digest);
      await db.put(`t!${hex}`, JSON.stringify({ size, storedAtMs: 1 }));
      let publishDone!: () => void;
      const publishing = new Promise<void>((r) => (publishDone = r));
      // The delete batch waits for the publish to commit (or, where appends are held back meanwhile, 1 s).
      // (Publishes write chained batches: `batch()` with no arguments passes through as it is.)
      const batch = db.batch.bind(db) as (...a: unknown[]) => unknown;
      (db as unknown as { batch: (...a: unknown[]) => unknown }).batch = (...args: unknown[]) => {
        const ops = args[0] as Array<{ type: string; key: string }>;
        if (Array.isArray(ops) && ops.some((o) => o.type === 'del' && o.key === `b!${hex}`))
          return Promise.race([publishing, new Promise((r) => setTimeout(r, 1000))]).then(() => batch(...args));
        return batch(...args);
      };
      const deleting = ledger.log.inlineBlobs!.delete(digest, { storedBeforeMs: Date.now() });
      await ledger.publish(second, summary).then(publishDone);
      await deleting;
      expect((await ledger.resume({ principal: 'alice', session: 'second' }))?.manifest.summary.digest).toBe(digest);
    } finally {
      await ledger.close();
    }
  });
});

describe('gc whose walk of the manifests outlasts the grace', () => {
  it('keeps the blob of a publish that began and committed after gc began (the grace counts from its start)', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', onNotice: () => {} });
    try {
      await ledger.publish(first, sampleSummary('before gc'));
      const log = ledger.log;
      const heads = log.heads.bind(log);
      let published: { digest: string } | undefined;
      // A publish lands while gc walks the chains (after the walk's heads listing began), and the walk of a large
      // store then takes longer than the grace.
      (log as { heads: typeof log.heads }).heads = async function* () {
        for await (const head of heads()) {
          yield head;
          if (!published) {
            published = await ledger.publish(second, sampleSummary('during gc'));
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      };
      const report = await gc(ledger, { graceMs: 50 });
      (log as { heads: typeof log.heads }).heads = heads;
      expect(published, 'the publish ran during the walk').toBeDefined();
      expect(report.removed).not.toContain(published!.digest);
      expect((await ledger.resume({ principal: 'alice', session: 'second' }))?.manifest.summary.digest).toBe(
        published!.digest,
      );
    } finally {
      await ledger.close();
    }
  });
});

describe('two gc runs at once', () => {
  it('neither removes the copy a publish linked while the other held the old one aside (both with an hour of grace)', async () => {
    // The bytes of a summary's blob, as a publish stores them.
    const summary = sampleSummary('an old orphan, published again');
    const scratch = await openLedger({ root: tempDir(), host: 'h', inlineSummaryBytes: 0, onNotice: () => {} });
    const { digest } = await scratch.publish(first, summary);
    const bytes = new Uint8Array(await scratch.blobs.get(digest));
    await scratch.close();

    const root = tempDir();
    const hex = digestHex(digest);
    const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    const aside = join(root, 'gc-aside', hex);
    const who = new AsyncLocalStorage<'A' | 'B'>();
    const gate = () => {
      let open!: () => void;
      const opened = new Promise<void>((r) => (open = r));
      // A gate a serialized gc never opens is passed after a while: the runs then go one after the other.
      return { open, passed: () => Promise.race([opened, new Promise((r) => setTimeout(r, 1500))]) };
    };
    const aAtRename = gate();
    const aMayRename = gate();
    const aRenamed = gate();
    const bUnlinked = gate();
    let armed = false;
    let published: { digest: string } | undefined;
    const opened: { ledger?: Ledger } = {};
    const fs: FsOps = {
      ...nodeFsOps,
      rename: async (from, to) => {
        if (!armed || from !== file || to !== aside) return nodeFsOps.rename(from, to);
        if (who.getStore() === 'A') {
          // A has judged the old copy by its first look; it moves whatever is at the path aside once B let it.
          aAtRename.open();
          await aMayRename.passed();
          await nodeFsOps.rename(from, to);
          aRenamed.open();
          await bUnlinked.passed();
          return;
        }
        await aAtRename.passed(); // B moves the old copy aside after A's first look
        return nodeFsOps.rename(from, to);
      },
      unlink: async (path) => {
        if (!armed || path !== aside || who.getStore() !== 'B') return nodeFsOps.unlink(path);
        // B judged the copy it moved aside old. Before it unlinks: a publish of the same bytes finds no file at the
        // path and links its own copy there, acknowledged; then A moves that copy aside, under the same name.
        published = await opened.ledger!.publish(second, summary);
        aMayRename.open();
        await aRenamed.passed();
        await nodeFsOps.unlink(path);
        bUnlinked.open();
      },
    };
    const ledger = await openLedger({ root, host: 'h', fs, inlineSummaryBytes: 0, onNotice: () => {} });
    opened.ledger = ledger;
    try {
      expect((await ledger.blobs.put(bytes)).digest).toBe(digest);
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(file, old, old);
      armed = true;
      const runs = await Promise.allSettled([
        who.run('A', () => gc(ledger, { graceMs: HOUR })),
        who.run('B', () => gc(ledger, { graceMs: HOUR })),
      ]);
      armed = false;
      // Serialized, the runs never meet at the blob: the publish comes after them.
      published ??= await ledger.publish(second, summary);
      expect(published.digest).toBe(digest);
      expect(runs.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
      expect(await readdir(join(root, 'gc-aside'))).toEqual([]);
      expect((await ledger.resume(second))?.summary).toEqual(summary);
    } finally {
      await ledger.close();
    }
  });
});

describe('two blob stores opened on one root in one process', () => {
  it('two gc runs, one through each store, neither removes the copy a publish linked while the other held the old one aside', async () => {
    const root = tempDir();
    const bytes = new TextEncoder().encode('an old orphan, put again '.repeat(40));
    const who = new AsyncLocalStorage<'A' | 'B'>();
    const gate = () => {
      let open!: () => void;
      const opened = new Promise<void>((r) => (open = r));
      // A gate a serialized gc never opens is passed after a while: the runs then go one after the other.
      return { open, passed: () => Promise.race([opened, new Promise((r) => setTimeout(r, 1500))]) };
    };
    const aAtRename = gate();
    const aMayRename = gate();
    const aRenamed = gate();
    const bUnlinked = gate();
    let armed = false;
    let file = '';
    let aside = '';
    let published: { digest: string } | undefined;
    const stores: { a?: FsBlobStore; b?: FsBlobStore } = {};
    // The interleaving of the test 'two gc runs at once' above, each run on a store of its own.
    const fs: FsOps = {
      ...nodeFsOps,
      rename: async (from, to) => {
        if (!armed || from !== file || to !== aside) return nodeFsOps.rename(from, to);
        if (who.getStore() === 'A') {
          aAtRename.open();
          await aMayRename.passed();
          await nodeFsOps.rename(from, to);
          aRenamed.open();
          await bUnlinked.passed();
          return;
        }
        await aAtRename.passed();
        return nodeFsOps.rename(from, to);
      },
      unlink: async (path) => {
        if (!armed || path !== aside || who.getStore() !== 'B') return nodeFsOps.unlink(path);
        // B judged the copy it moved aside old. Before it unlinks: a put of the same bytes (B's store) finds no file
        // at the path and links its own copy there, acknowledged; then A moves that copy aside, under the same name.
        published = await stores.b!.put(bytes);
        aMayRename.open();
        await aRenamed.passed();
        await nodeFsOps.unlink(path);
        bUnlinked.open();
      },
    };
    const hash = await loadHashBackend('auto');
    stores.a = (await FsBlobStore.open(root, { hash, fs })).store;
    stores.b = (await FsBlobStore.open(root, { hash, fs })).store;
    try {
      const { digest } = await stores.a.put(bytes);
      const hex = digestHex(digest);
      file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      aside = join(root, 'gc-aside', hex);
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(file, old, old);
      armed = true;
      const storedBeforeMs = Date.now() - HOUR;
      const runs = await Promise.allSettled([
        who.run('A', () => stores.a!.delete(digest, { storedBeforeMs })),
        who.run('B', () => stores.b!.delete(digest, { storedBeforeMs })),
      ]);
      armed = false;
      // Serialized, the runs never meet at the blob: the put comes after them.
      published ??= await stores.b.put(bytes);
      expect(published.digest).toBe(digest);
      expect(runs.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
      expect(await readdir(join(root, 'gc-aside'))).toEqual([]);
      for (const store of [stores.a, stores.b]) expect(new Uint8Array(await store.get(digest))).toEqual(bytes);
    } finally {
      await stores.a.close();
      await stores.b.close();
    }
  });

  it('two puts of the same bytes over a damaged copy, one through each store, both succeed and quarantine it once', async () => {
    const root = tempDir();
    const bytes = new TextEncoder().encode('damaged, then put again through two stores '.repeat(40));
    let armed = false;
    let arrived = 0;
    let bothThere!: () => void;
    const both = new Promise<void>((r) => (bothThere = r));
    const fs: FsOps = {
      ...nodeFsOps,
      rename: async (from, to) => {
        // Each put that judged the copy at the path damaged waits here for the other (a serialized second put never
        // comes: the gate is passed after a while), then moves whatever is at the path into quarantine/.
        if (armed && to.startsWith(join(root, 'quarantine') + '/')) {
          if (++arrived === 2) bothThere();
          await Promise.race([both, new Promise((r) => setTimeout(r, 1500))]);
        }
        return nodeFsOps.rename(from, to);
      },
    };
    const hash = await loadHashBackend('auto');
    const { store: a } = await FsBlobStore.open(root, { hash, fs });
    const { store: b } = await FsBlobStore.open(root, { hash, fs });
    try {
      const { digest } = await a.put(bytes);
      const hex = digestHex(digest);
      const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const damaged = await readFile(file);
      damaged[0]! ^= 1; // bit rot, same size
      await rm(file);
      await writeFile(file, damaged, { mode: 0o600 });
      armed = true;
      const puts = await Promise.allSettled([a.put(bytes), b.put(bytes)]);
      armed = false;
      expect(puts.map((r) => (r.status === 'fulfilled' ? r.value.digest : String(r.reason)))).toEqual([digest, digest]);
      expect(await readdir(join(root, 'quarantine'))).toHaveLength(1);
      for (const store of [a, b]) expect(new Uint8Array(await store.get(digest))).toEqual(bytes);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('a store opened on a root other processes share while gc of one of them holds a blob aside', () => {
  /** Two stores of one root as two processes sharing it open them (keepStagingMs), one with its fs calls held. */
  async function sharedStores(hold: (path: string) => Promise<void>) {
    const root = tempDir();
    const hash = await loadHashBackend('auto');
    const fs: FsOps = {
      ...nodeFsOps,
      lstat: (async (p: string, o?: unknown) => {
        await hold(p);
        return nodeFsOps.lstat(p, o as never);
      }) as FsOps['lstat'],
      unlink: async (p) => {
        await hold(p);
        return nodeFsOps.unlink(p);
      },
    };
    const gcs = (await FsBlobStore.open(root, { hash, fs, keepStagingMs: 10 * 60_000 })).store;
    const bytes = new TextEncoder().encode('an orphan two hours old');
    const { digest } = await gcs.put(bytes);
    const hex = digestHex(digest);
    const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    const old = new Date(Date.now() - 2 * HOUR);
    await utimes(file, old, old);
    const opener = () => FsBlobStore.open(root, { hash, keepStagingMs: 10 * 60_000 });
    return { root, gcs, digest, aside: join(root, 'gc-aside', hex), file, opener };
  }

  it('the open leaves the blob aside to that gc, which removes it as judged', async () => {
    let atAside: (() => void) | undefined;
    let go!: () => void;
    const released = new Promise<void>((resolve) => (go = resolve));
    let asidePath = '';
    const s = await sharedStores(async (path) => {
      if (path === asidePath && atAside) {
        atAside();
        atAside = undefined;
        await released;
      }
    });
    asidePath = s.aside;
    const reached = new Promise<void>((resolve) => (atAside = resolve));
    // gc judges the blob it holds aside (its lstat there) and waits: the other process opens meanwhile.
    const deleting = s.gcs.delete(s.digest, { storedBeforeMs: Date.now() - HOUR });
    await reached;
    const other = await s.opener();
    go();
    try {
      expect(await deleting).toBe(true);
      expect(await other.store.has(s.digest)).toBe(false);
      expect(await readdir(join(s.root, 'gc-aside'))).toEqual([]);
    } finally {
      await other.store.close();
      await s.gcs.close();
    }
  });

  it('an open whose look at gc-aside/ the gc outran (it removed the blob) still opens', async () => {
    // The opener reads gc-aside/ while the blob is there; gc then removes it before the opener acts on it.
    let atUnlink: (() => void) | undefined;
    let go!: () => void;
    const released = new Promise<void>((resolve) => (go = resolve));
    let asidePath = '';
    const s = await sharedStores(async (path) => {
      if (path === asidePath && atUnlink) {
        atUnlink();
        atUnlink = undefined;
        await released;
      }
    });
    asidePath = s.aside;
    const reached = new Promise<void>((resolve) => (atUnlink = resolve));
    const deleting = s.gcs.delete(s.digest, { storedBeforeMs: Date.now() - HOUR });
    await reached; // gc holds the blob aside and is at its first call on it there
    const hash = await loadHashBackend('auto');
    const fs: FsOps = {
      ...nodeFsOps,
      readdir: async (p: string) => {
        const names = await nodeFsOps.readdir(p);
        if (p === join(s.root, 'gc-aside')) {
          go();
          expect(await deleting).toBe(true); // the gc went on and removed it
        }
        return names;
      },
    };
    const other = await FsBlobStore.open(s.root, { hash, fs, keepStagingMs: 10 * 60_000 });
    try {
      expect(await other.store.has(s.digest)).toBe(false);
    } finally {
      await other.store.close();
      await s.gcs.close();
    }
  });
});

describe('a store opened to leave its leftovers (a diagnosing open) on a root other processes share', () => {
  it('does not name as left by an interrupted gc a blob moved aside just now (another process judging it)', async () => {
    const root = tempDir();
    const hash = await loadHashBackend('auto');
    const store = (await FsBlobStore.open(root, { hash })).store;
    const { digest } = await store.put(new TextEncoder().encode('held aside just now'));
    await store.close();
    const hex = digestHex(digest);
    await rename(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), join(root, 'gc-aside', hex));
    const shared = await FsBlobStore.open(root, { hash, keepStagingMs: 10 * 60_000, leaveLeftovers: true });
    const own = await FsBlobStore.open(root, { hash, leaveLeftovers: true });
    try {
      expect(shared.recovery.leftInPlace?.aside).toEqual([]);
      // With the root to itself, whatever is aside is a crash's.
      expect(own.recovery.leftInPlace?.aside).toEqual([join(root, 'gc-aside', hex)]);
    } finally {
      await shared.store.close();
      await own.store.close();
    }
  });
});

describe("gc's grace where the two tiers date blobs by different clocks", () => {
  it('keeps the inline blob of a publish that committed during the walk when the file tier dates by a clock ahead of the log (a PostgreSQL blob store beside an embedded log)', async () => {
    const root = tempDir();
    const hash = await loadHashBackend('noble');
    // The file tier's clock (BlobStore.clock: a PostgreSQL server's) runs two hours ahead of this host's, by which the
    // embedded log dates its inline blobs.
    const { store: files } = await FsBlobStore.open(join(root, 'files'), { hash });
    const ahead = Object.assign(files, { clock: async () => Date.now() + 2 * HOUR });
    const ledger = await openLedger({ root, host: 'host-a', blobs: ahead, onNotice: () => {} });
    try {
      await ledger.publish(first, sampleSummary('before gc'));
      const log = ledger.log;
      const heads = log.heads.bind(log);
      let published: { digest: string } | undefined;
      // A publish (an inline summary) commits while gc walks the chains: the walk does not see its manifest.
      (log as { heads: typeof log.heads }).heads = async function* () {
        for await (const head of heads()) {
          yield head;
          published ??= await ledger.publish(second, sampleSummary('during gc'));
        }
      };
      const report = await gc(ledger, { graceMs: HOUR });
      (log as { heads: typeof log.heads }).heads = heads;
      expect(published, 'the publish ran during the walk').toBeDefined();
      expect(report.removed).not.toContain(published!.digest);
      expect((await ledger.resume({ principal: 'alice', session: 'second' }))?.manifest.summary.digest).toBe(
        published!.digest,
      );
    } finally {
      await ledger.close();
    }
  });
});
