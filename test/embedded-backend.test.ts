/**
 * The embedded backend (filesystem blobs, LevelDB manifest log) against the shared conformance suites,
 * the same suites the PostgreSQL backend runs (test/pg-backend.test.ts).
 */
import { mkdir, open, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { ENDS_AT_SIGNAL_MS } from './support/settled.js';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex, digestOf, type Digest } from '../store/hash/digest.js';
import { chainLink } from './support/chain-link.js';
import { Level } from 'level';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import type { LogEntry, LogTreeHead } from '../manifests/log/log.js';
import { HeadsNodeCache, headsNodeKey, headsNodeValue } from '../manifests/log/level/session-heads.js';
import { SYNC_READ_MAX_BYTES, writeSyncedBatch } from '../manifests/log/level/tables.js';
import { bitAt, sessionHeadsRoot, sessionKey } from '../manifests/tlog/session-heads.js';
import { blobStoreSuite } from './conformance/blob-store.js';
import { signingKeySuite } from './conformance/manifest-log-keys.js';
import { manifestLogSuite, type ManifestLogFactory } from './conformance/manifest-log.js';
import { ledgerSuite } from './conformance/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { gc } from '../src/ops/maintenance.js';
import { TieredBlobStore } from '../src/ledger/blob-tiers.js';

// Not tempDir(): a fixture may outlive one test's afterEach (it is disposed by the suite itself).
const freshDir = () => mkdtempSync(join(tmpdir(), 'hl-embedded-'));

blobStoreSuite('FsBlobStore', async ({ hash, maxBlobBytes }) => {
  const root = join(freshDir(), 'store');
  const openStore = async () => (await FsBlobStore.open(root, { hash, maxBlobBytes })).store;
  const fx = {
    store: await openStore(),
    async reopen() {
      await fx.store.close();
      fx.store = await openStore();
      return fx.store;
    },
    async corrupt(digest: string) {
      const hex = digestHex(digest);
      const handle = await open(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), 'r+');
      try {
        const one = Buffer.alloc(1);
        await handle.read(one, 0, 1, 0);
        one[0] = (one[0]! + 1) % 256;
        await handle.write(one, 0, 1, 0);
      } finally {
        await handle.close();
      }
    },
    async backdate(digest: string, ms: number) {
      const hex = digestHex(digest);
      const then = new Date(Date.now() - ms);
      await utimes(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), then, then);
    },
    async dispose() {
      await fx.store.close();
      await rm(join(root, '..'), { recursive: true, force: true });
    },
  };
  return fx;
});

/** Changes one stored byte of a blob file under `root` (its size stays). */
async function corruptBlobFile(root: string, digest: string): Promise<void> {
  const hex = digestHex(digest);
  const handle = await open(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), 'r+');
  try {
    const one = Buffer.alloc(1);
    await handle.read(one, 0, 1, 0);
    one[0] = (one[0]! + 1) % 256;
    await handle.write(one, 0, 1, 0);
  } finally {
    await handle.close();
  }
}

// The ledger's own `blobs` (a Ledger's public BlobStore): the inline tier of the LevelDB log in front of the files.
// It answers as every BlobStore does: a bad digest INVALID_DIGEST before its options are looked at (not the log's
// ManifestError INVALID_ID), a delete's bad option the store's INVALID_ARGUMENT.
blobStoreSuite('TieredBlobStore (LevelDB inline tier over FsBlobStore)', async ({ hash, maxBlobBytes }) => {
  const dir = freshDir();
  const root = join(dir, 'store');
  let log: LevelManifestLog | undefined;
  const openStore = async () => {
    const files = (await FsBlobStore.open(root, { hash, maxBlobBytes })).store;
    log = await LevelManifestLog.open(join(dir, 'log'));
    return new TieredBlobStore(files, log.inlineBlobs, hash);
  };
  const fx = {
    store: await openStore(),
    async reopen() {
      await fx.store.close();
      await log?.close();
      fx.store = await openStore();
      return fx.store;
    },
    corrupt: (digest: string) => corruptBlobFile(root, digest),
    async backdate(digest: string, ms: number) {
      const hex = digestHex(digest);
      const then = new Date(Date.now() - ms);
      await utimes(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), then, then);
    },
    async dispose() {
      await fx.store.close();
      await log?.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return fx;
});

describe('FsBlobStore keepStagingMs (a root other processes write too)', () => {
  it('keeps staging files younger than the bound at open and recover, removes older ones; a bad bound is INVALID_ARGUMENT', async () => {
    const root = join(freshDir(), 'store');
    const hash = await loadHashBackend('noble');
    const { store } = await FsBlobStore.open(root, { hash });
    await store.close();
    const young = join(root, 'tmp', 'young.tmp');
    const old = join(root, 'tmp', 'old.tmp');
    await writeFile(young, 'another process writing');
    await writeFile(old, 'a crash left this');
    const then = new Date(Date.now() - 120_000);
    await utimes(old, then, then);
    const opened = await FsBlobStore.open(root, { hash, keepStagingMs: 60_000 });
    try {
      expect(opened.recovery.stagingRemoved).toBe(1);
      expect(await readdir(join(root, 'tmp'))).toEqual(['young.tmp']);
      await utimes(young, then, then);
      expect(await opened.store.recover()).toEqual({ stagingRemoved: 1 });
      expect(await readdir(join(root, 'tmp'))).toEqual([]);
    } finally {
      await opened.store.close();
    }
    for (const keepStagingMs of [-1, Number.NaN, '60000' as unknown as number])
      await expect(FsBlobStore.open(root, { hash, keepStagingMs })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await rm(join(root, '..'), { recursive: true, force: true });
  });
});

describe('FsBlobStore recovery of tmp/', () => {
  it('removes only staging names (*.tmp): a bundle directory or a key file an operator put in tmp/ was deleted whole', async () => {
    const root = join(freshDir(), 'store');
    const hash = await loadHashBackend('noble');
    await (await FsBlobStore.open(root, { hash })).store.close();
    const tmp = join(root, 'tmp');
    await mkdir(join(tmp, 'audit-2026-12', 'blobs'), { recursive: true });
    await writeFile(join(tmp, 'audit-2026-12', 'bundle.json'), '{}');
    await writeFile(join(tmp, 'w1.key'), 'a witness key');
    await writeFile(join(tmp, `${'a'.repeat(32)}.tmp`), 'half a blob');
    // A diagnosing open (fsck) names the staging file alone as a leftover, not what an operator put there.
    const diagnosing = await FsBlobStore.open(root, { hash, leaveLeftovers: true });
    await diagnosing.store.close();
    expect(diagnosing.recovery.leftInPlace?.staging).toEqual([join(tmp, `${'a'.repeat(32)}.tmp`)]);
    const opened = await FsBlobStore.open(root, { hash });
    try {
      expect(opened.recovery.stagingRemoved).toBe(1);
      expect((await readdir(tmp)).sort()).toEqual(['audit-2026-12', 'w1.key']);
      expect(await readdir(join(tmp, 'audit-2026-12'))).toEqual(expect.arrayContaining(['bundle.json', 'blobs']));
      expect(await opened.store.recover()).toEqual({ stagingRemoved: 0 });
    } finally {
      await opened.store.close();
    }
    await rm(join(root, '..'), { recursive: true, force: true });
  });
});

const levelLogFactory: ManifestLogFactory = async () => {
  const dir = freshDir();
  const path = join(dir, 'log');
  const fx = {
    log: await LevelManifestLog.open(path),
    idAppendedAgain: 'latest' as const,
    windowReadsIndex: true,
    async appendTogether(start: Array<() => Promise<LogEntry>>) {
      // Held back until every append has queued, then written as one batch.
      const log = fx.log;
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      const held = log.withAppendsHeld(() => gate);
      const started = Promise.all(start.map((a) => a()));
      try {
        const failed = started.then(() => undefined);
        for (let waited = 0; log['queue'].length < start.length; waited++) {
          if (waited > 10_000) throw new Error(`${log['queue'].length} of ${start.length} appends queued`);
          await Promise.race([failed, new Promise((r) => setTimeout(r, 1))]);
        }
      } finally {
        open();
      }
      await held;
      return started;
    },
    async reopen() {
      await fx.log.close();
      fx.log = await LevelManifestLog.open(path);
      return fx.log;
    },
    async reopenWithoutSessionHeads() {
      // What a store of the previous version holds: no x! records, no m!session-heads marker.
      const db = fx.log.raw;
      const keys: string[] = [];
      for await (const key of db.keys()) if (key.startsWith('x!') || key === 'm!session-heads') keys.push(key);
      expect(keys.length).toBeGreaterThan(0);
      await db.batch(keys.map((key) => ({ type: 'del' as const, key })));
      await fx.log.close();
      fx.log = await LevelManifestLog.open(path);
      return fx.log;
    },
    async cutBack(
      session: string,
      to: { seq: number; id: string; owner: string } | undefined,
      options: { dropWatermark?: boolean } = {},
    ) {
      const db = fx.log.raw;
      if (to) await db.put(`h!${session}`, JSON.stringify({ session, ...to }));
      else await db.del(`h!${session}`);
      if (options.dropWatermark) await db.del(`w!${session}`);
      return fx.reopen();
    },
    async removeEntry(session: string, seq: number) {
      await fx.log.raw.del(`e!${session}!${seq.toString(16).padStart(12, '0')}`);
    },
    async damage(record: { kind: 'entry'; session: string; seq: number } | { kind: 'head'; session: string }) {
      const key =
        record.kind === 'head'
          ? `h!${record.session}`
          : `e!${record.session}!${record.seq.toString(16).padStart(12, '0')}`;
      await fx.log.raw.put(key, '{"damaged');
      return 'RECORD_CORRUPT' as const;
    },
    async dispose() {
      await fx.log.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return fx;
};
manifestLogSuite('LevelManifestLog', levelLogFactory);
signingKeySuite('LevelManifestLog', levelLogFactory);

ledgerSuite('embedded (filesystem + LevelDB)', async () => {
  const root = join(freshDir(), 'store');
  return {
    open: (extra) => openLedger({ root, host: 'conformance-host', ...extra }),
    async corruptInlineBlob(ledger, digest) {
      const db = (ledger.log as LevelManifestLog).raw;
      const key = `b!${digestHex(digest)}`;
      const bytes = Uint8Array.from((await db.get<string, Uint8Array>(key, { valueEncoding: 'view' }))!);
      bytes[0]! ^= 1;
      await db.put<string, Uint8Array>(key, bytes, { valueEncoding: 'view' });
    },
    dispose: () => rm(join(root, '..'), { recursive: true, force: true }),
  };
});

describe('LevelManifestLog tree', () => {
  it('opens a store whose session-heads root record is damaged, keeps its tree, and refuses appends', async () => {
    const dir = freshDir();
    const path = join(dir, 'log');
    let log = await LevelManifestLog.open(path);
    const append = (l: LevelManifestLog, session: string) =>
      l.append({
        session,
        principal: 'p',
        seq: 0,
        prev: null,
        id: digestOf(new TextEncoder().encode(session)),
        envelope: JSON.stringify({ payload: Buffer.from(session).toString('base64') }),
      });
    await append(log, 'a');
    await append(log, 'b');
    const before = await log.treeHead();
    await log.raw.put('x!000!', 'i not-base64');
    await log.close();
    log = await LevelManifestLog.open(path);
    try {
      const after = await log.treeHead();
      expect(after.size).toBe(2);
      expect(Buffer.from(after.root).equals(Buffer.from(before.root))).toBe(true);
      expect(after.sessionHeads).toBeUndefined();
      await expect(append(log, 'c')).rejects.toMatchObject({ code: 'TREE_DAMAGED' });
    } finally {
      await log.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  /** Appends seq 0–4 of session `s`, each id the digest of `s<seq>`. */
  async function appendFive(log: LevelManifestLog): Promise<void> {
    for (let seq = 0; seq < 5; seq++) {
      await log.append({
        session: 's',
        principal: 'p',
        seq,
        prev: seq === 0 ? null : digestOf(new TextEncoder().encode(`s${seq - 1}`)),
        id: digestOf(new TextEncoder().encode(`s${seq}`)),
        envelope: JSON.stringify({ payload: Buffer.from(`payload ${seq}`).toString('base64') }),
      });
    }
  }

  it('builds the tree on open for a store written before the tree existed', async () => {
    const dir = freshDir();
    const path = join(dir, 'log');
    let log = await LevelManifestLog.open(path);
    await appendFive(log);
    const before = await log.treeHead();
    // What a store of the previous version holds: entries, heads and positions, no n!/i! records.
    const stale: string[] = [];
    for await (const key of log.raw.keys()) if (key.startsWith('n!') || key.startsWith('i!')) stale.push(key);
    await log.raw.batch(stale.map((key) => ({ type: 'del' as const, key })));
    await log.close();
    log = await LevelManifestLog.open(path);
    try {
      const after = await log.treeHead();
      expect(after.size).toBe(5);
      expect(Buffer.from(after.root).toString('hex')).toBe(Buffer.from(before.root).toString('hex'));
      expect(await log.positionOf(digestOf(new TextEncoder().encode('s3')))).toBe(3);
    } finally {
      await log.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  /** A log of 5 entries, closed, with its tree records cut back to a tree of 2 leaves (`keepLeaf2`: but leaf 2 kept). */
  async function cutTree(keepLeaf2: boolean): Promise<{ path: string; before: LogTreeHead }> {
    const path = join(freshDir(), 'log');
    const log = await LevelManifestLog.open(path);
    await appendFive(log);
    const before = await log.treeHead();
    // What a backfill interrupted after its batch of 2 leaves holds: the nodes within the first 2 leaves, their i!
    // records, n!size 2.
    const beyond: string[] = [];
    for await (const key of log.raw.keys({ gte: 'n!', lt: 'n!\xff' })) {
      const m = /^n!([0-9a-f]{2})!([0-9a-f]{16})$/.exec(key);
      if (
        m &&
        (parseInt(m[2]!, 16) + 1) * 2 ** parseInt(m[1]!, 16) > 2 &&
        !(keepLeaf2 && key === `n!00!${'2'.padStart(16, '0')}`)
      )
        beyond.push(key);
    }
    for (const seq of [2, 3, 4]) beyond.push(`i!${digestOf(new TextEncoder().encode(`s${seq}`))}`);
    await log.raw.batch([
      ...beyond.map((key) => ({ type: 'del' as const, key })),
      { type: 'put', key: 'n!size', value: '2' },
    ]);
    await log.close();
    return { path, before };
  }

  it('finishes an interrupted backfill on open: a tree with no leaf beyond its size grows to the log', async () => {
    const { path, before } = await cutTree(false);
    const log = await LevelManifestLog.open(path);
    try {
      const after = await log.treeHead();
      expect(after.size).toBe(5);
      expect(Buffer.from(after.root).toString('hex')).toBe(Buffer.from(before.root).toString('hex'));
    } finally {
      await log.close();
    }
  });

  it('does not grow a tree whose size record was lowered (its next leaf is stored): appends are refused', async () => {
    const { path } = await cutTree(true);
    const log = await LevelManifestLog.open(path);
    try {
      expect((await log.treeHead()).size).toBe(2);
      expect(await log.raw.get('n!size')).toBe('2');
      await expect(
        log.append({
          session: 's',
          principal: 'p',
          seq: 5,
          prev: digestOf(new TextEncoder().encode('s4')),
          id: digestOf(new TextEncoder().encode('s5')),
          envelope: JSON.stringify({ payload: Buffer.from('payload 5').toString('base64') }),
        }),
      ).rejects.toMatchObject({ code: 'TREE_DAMAGED', message: expect.stringMatching(/leaf 2 is stored/) });
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog.checkHeads beside appends', () => {
  it('reads each session from one committed state: appends landing meanwhile are no problem', async () => {
    const log = await LevelManifestLog.open(join(freshDir(), 'log'));
    const sessions = ['a', 'b', 'c', 'd'];
    const heads = new Map<string, Digest | null>(sessions.map((s) => [s, null]));
    let seq = 0;
    let appending = true;
    const append = async (session: string, at: number) => {
      const id = digestOf(new TextEncoder().encode(`${session}/${at}`));
      const envelope = JSON.stringify({ payload: Buffer.from(`${session}/${at}`).toString('base64') });
      await log.append({ session, principal: 'p', seq: at, prev: heads.get(session)!, id, envelope });
      heads.set(session, id);
    };
    const appends = (async () => {
      while (appending) {
        await Promise.all(sessions.map((s) => append(s, seq)));
        seq++;
      }
    })();
    const problems: unknown[] = [];
    try {
      // Until the chains have grown by 20 (however slow the disk), or a problem shows.
      while (seq < 20 && problems.length === 0) problems.push(...(await log.checkHeads()));
    } finally {
      appending = false;
      await appends;
    }
    expect(problems).toEqual([]);
    expect(seq).toBeGreaterThanOrEqual(20);
    expect(await log.checkHeads()).toEqual([]);
    await log.close();
  });
});

/** The first append of session `s`, told apart by `tag`. */
const request = (tag: string) => ({
  session: 's',
  principal: 'p',
  seq: 0,
  prev: null,
  id: digestOf(new TextEncoder().encode(tag)),
  envelope: JSON.stringify({ payload: Buffer.from(tag).toString('base64') }),
});

describe('LevelManifestLog appends of one session at once', () => {
  it("take one seq once: an append whose reads span another append's commit is checked against the new head", async () => {
    // A's batch is durable but not yet acknowledged; B starts, and its watermark read waits until A has committed.
    let durable!: () => void;
    const wrote = new Promise<void>((resolve) => (durable = resolve));
    let go!: () => void;
    const gate = new Promise<void>((resolve) => (go = resolve));
    let batches = 0;
    const log = await LevelManifestLog.open(join(freshDir(), 'log'), {
      writeBatch: async (db, ops) => {
        await writeSyncedBatch(db, ops);
        if (batches++ === 0) {
          durable();
          await gate;
        }
      },
    });
    try {
      const a = log.append(request('A'));
      await wrote;
      const db = log.raw as unknown as { get: (key: string, ...rest: unknown[]) => Promise<unknown> };
      const get = db.get.bind(db);
      db.get = async (key, ...rest) => {
        if (key === 'w!s') {
          db.get = get;
          go();
          await a;
        }
        return get(key, ...rest);
      };
      const b = log.append(request('B'));
      const first = await a;
      await expect(b).rejects.toMatchObject({ code: 'CHAIN_CONFLICT' });
      expect((await log.head('s'))?.id).toBe(first.id);
      expect((await log.entry('s', 0))?.id).toBe(first.id);
      expect((await log.treeHead()).size).toBe(1);
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog group commit after the log was idle', () => {
  /** A log that records the sessions of each batch it writes (sorted). */
  async function recordingLog() {
    const batches: string[][] = [];
    const log = await LevelManifestLog.open(join(freshDir(), 'log'), {
      writeBatch: async (db, ops) => {
        batches.push(
          ops
            .filter((op) => op.key.startsWith('h!'))
            .map((op) => op.key.slice(2))
            .sort(),
        );
        await writeSyncedBatch(db, ops);
      },
    });
    return { log, batches };
  }
  const first = (session: string) => ({ ...request(session), session });
  const second = (session: string) => ({ ...request(`${session}+1`), session, seq: 1, prev: first(session).id });

  it('builds its first batch a turn later when the last batch held more than one append: a group that queues in the same turn shares it', async () => {
    const { log, batches } = await recordingLog();
    try {
      const sessions = ['s0', 's1', 's2', 's3', 's4'];
      // The first appends of five sessions, held until all have queued: one batch of five.
      let together!: Promise<LogEntry[]>;
      await log.withAppendsHeld(async () => {
        together = Promise.all(sessions.map((s) => log.append(first(s))));
        while ((log as unknown as { queue: unknown[] }).queue.length < sessions.length)
          await new Promise((r) => setImmediate(r));
      });
      await together;
      await log.idle();
      expect(batches).toEqual([sessions]);
      // Their next appends, started at once (heads cached: each queues without a turn of the event loop): before, the
      // first to queue was written alone and the other four waited for it ([s0], [s1…s4]).
      await Promise.all(sessions.map((s) => log.append(second(s))));
      expect(batches).toEqual([sessions, sessions]);
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog appends whose signal aborts', () => {
  it('leave the queue (CANCELLED, nothing written) while a batch is written; one in that batch completes', async () => {
    // The first batch stays being written until `go`: appends arriving meanwhile wait in the queue for the next one.
    let writing!: () => void;
    const started = new Promise<void>((resolve) => (writing = resolve));
    let go!: () => void;
    const gate = new Promise<void>((resolve) => (go = resolve));
    let opened = false;
    let batches = 0;
    const log = await LevelManifestLog.open(join(freshDir(), 'log'), {
      writeBatch: async (db, ops) => {
        if (batches++ === 0) {
          writing();
          await gate;
        }
        await writeSyncedBatch(db, ops);
      },
    });
    const inSession = (session: string, tag: string) => ({ ...request(tag), session });
    // Opened after ENDS_AT_SIGNAL_MS at the latest (not 2 s, which slow reads of the queued append on a loaded machine
    // outlasted): an append that ignores its signal is then written with the next batch.
    const open = setTimeout(() => {
      opened = true;
      go();
    }, ENDS_AT_SIGNAL_MS);
    try {
      const inBatch = new AbortController();
      const a = log.append(inSession('a', 'A'), { signal: inBatch.signal });
      await started;
      const queued = new AbortController();
      const b = log.append(inSession('b', 'B'), { signal: queued.signal });
      inBatch.abort(new Error('too late: being written'));
      queued.abort(new Error('user pressed stop'));
      const err = await b.then(
        () => expect.unreachable('the queued append was written'),
        (e: unknown) => e,
      );
      expect(opened, 'the queued append answered while the batch was still being written').toBe(false);
      expect(err).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
      go();
      expect(await a).toMatchObject({ session: 'a', seq: 0, position: 0 });
      expect(await log.head('b')).toBeUndefined();
      expect((await log.treeHead()).size).toBe(1);
      // Its session is free again: the same append, not cancelled, commits.
      expect(await log.append(inSession('b', 'B'))).toMatchObject({ session: 'b', seq: 0, position: 1 });
      expect(batches).toBe(2);
    } finally {
      clearTimeout(open);
      go();
      await log.close();
    }
  });
  it('leave the queue while appends are held back (gc), and no empty batch is written after', async () => {
    let batches = 0;
    const log = await LevelManifestLog.open(join(freshDir(), 'log'), {
      writeBatch: async (db, ops) => {
        batches++;
        await writeSyncedBatch(db, ops);
      },
    });
    try {
      const ac = new AbortController();
      let append!: Promise<unknown>;
      await log.withAppendsHeld(async () => {
        append = log.append(request('A'), { signal: ac.signal }).catch((e: unknown) => e);
        const queue = (log as unknown as { queue: unknown[] }).queue;
        while (queue.length === 0) await new Promise((r) => setImmediate(r)); // its reads done, it waits in the queue
        ac.abort();
        expect(await append).toMatchObject({ code: 'CANCELLED' });
      });
      await log.idle();
      expect(batches).toBe(0);
      expect(await log.head('s')).toBeUndefined();
      expect(await log.append(request('A'))).toMatchObject({ seq: 0, position: 0 });
      expect(batches).toBe(1);
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog key window closed as an append is queued', () => {
  it('chooses the end after an append taken into a batch before the close looked, and keeps that end in memory', async () => {
    const signed = (seq: number, createdAt: string) => ({
      ...chainLink('s', seq),
      signed: { keyId: 'ed25519:k1', createdAt },
    });
    const late = '2026-11-30T10:00:05.000Z';
    const broken: string[] = [];
    // The close starts some microtasks after the append: at one of those starts (a few turns in), the append was
    // queued and taken into a batch just as the close's wait for an idle log resolved, before the close looked at the
    // queue. Before, that batch was seen by neither the queue nor the key's record: the end was chosen before the
    // append's createdAt and the append committed after it; the batch's commit then dropped the end from memory, so
    // later appends dated after it were taken too (the stored record had it: only a reopen refused them).
    for (let delay = 0; delay < 40; delay++) {
      const dir = join(freshDir(), 'log');
      const log = await LevelManifestLog.open(dir);
      try {
        await log.append(signed(0, '2026-11-30T09:00:00.000Z'));
        const appended = log.append(signed(1, late)).then(
          () => 'committed',
          (e: unknown) => (e as { code?: string }).code,
        );
        for (let i = 0; i < delay; i++) await Promise.resolve();
        const end = await log.signingKeys.close('ed25519:k1', (record) =>
          new Date(Date.parse(record!.lastSignedAt!) + 1).toISOString(),
        );
        const outcome = await appended;
        if (outcome === 'committed' && !(late < end)) broken.push(`${delay}: committed at ${late}, window end ${end}`);
        if (outcome !== 'committed' && outcome !== 'KEY_EXPIRED') broken.push(`${delay}: ${outcome}`);
        const kept = await log.signingKeys.get('ed25519:k1');
        if (kept?.closedAt !== end) broken.push(`${delay}: the key's record in memory ${JSON.stringify(kept)}`);
      } finally {
        await log.close();
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('LevelManifestLog when building a batch fails', () => {
  it('fails that batch as a whole and frees its sessions: the next append of the session commits', async () => {
    const log = await LevelManifestLog.open(join(freshDir(), 'log'));
    try {
      const keys = (log as unknown as { keys: { signedPuts: (...a: unknown[]) => unknown } }).keys;
      const signedPuts = keys.signedPuts.bind(keys);
      keys.signedPuts = () => {
        throw new Error('a record that cannot be built');
      };
      await expect(log.append(request('A'))).rejects.toMatchObject({
        code: 'STORAGE_FAILED',
        message: expect.stringContaining('a record that cannot be built'),
      });
      expect(await log.head('s')).toBeUndefined();
      keys.signedPuts = signedPuts;
      expect((await log.append(request('B'))).seq).toBe(0);
      expect((await log.treeHead()).size).toBe(1);
    } finally {
      await log.close();
    }
  });
});

describe("LevelManifestLog group commit where one append's session-heads path is damaged", () => {
  /** The first (seq 0) or next append of `session`, its id and payload naming it. */
  const link = (session: string, seq: number) => {
    const idAt = (n: number) => digestOf(new TextEncoder().encode(`${session}/${n}`));
    return {
      session,
      principal: 'p',
      seq,
      prev: seq === 0 ? null : idAt(seq - 1),
      id: idAt(seq),
      envelope: JSON.stringify({ payload: Buffer.from(`${session}/${seq}`).toString('base64') }),
    };
  };

  it('refuses that append alone (TREE_DAMAGED): the other appends of its batch commit', async () => {
    // x's leaf lies below a node that y's path does not pass (another session shares x's first bit, y's differs), so
    // y's append alone walks no damaged node; x's is refused wherever it is appended.
    const names = Array.from({ length: 16 }, (_, i) => `s${i}`);
    const bit0 = (s: string) => bitAt(sessionKey(s), 0);
    const x = names.find((s) => names.some((z) => z !== s && bit0(z) === bit0(s)))!;
    const y = names.find((s) => bit0(s) !== bit0(x))!;
    const dir = join(freshDir(), 'log');
    const first = await LevelManifestLog.open(dir);
    for (const s of names) await first.append(link(s, 0));
    await first.close();
    // Reopened (no node cached), x's leaf record rewritten without its parents: the index's damage under the log.
    const log = await LevelManifestLog.open(dir);
    try {
      let tampered = 0;
      for await (const [key, value] of log.raw.iterator({ gte: 'x!', lt: 'x"' })) {
        const [kind, leafKey] = value.split(' ');
        if (kind !== 'l' || Buffer.from(leafKey!, 'base64').compare(Buffer.from(sessionKey(x))) !== 0) continue;
        await log.raw.put(key, `l ${leafKey} ${Buffer.alloc(32, 7).toString('base64')}`);
        tampered++;
      }
      expect(tampered).toBe(1);
      // Both appends queued before the batch is built: one batch of two (appends held until both have queued).
      let x1!: Promise<LogEntry>;
      let y1!: Promise<LogEntry>;
      await log.withAppendsHeld(async () => {
        x1 = log.append(link(x, 1));
        y1 = log.append(link(y, 1));
        x1.catch(() => {});
        y1.catch(() => {});
        while ((log as unknown as { queue: unknown[] }).queue.length < 2) await new Promise((r) => setImmediate(r));
      });
      await expect(x1).rejects.toMatchObject({ name: 'ManifestError', code: 'TREE_DAMAGED' });
      // Before: y's append failed with x's TREE_DAMAGED, for sharing a batch with it.
      expect((await y1).seq).toBe(1);
      expect((await log.head(y))?.seq).toBe(1);
      expect((await log.head(x))?.seq).toBe(0);
      expect((await log.treeHead()).size).toBe(names.length + 1);
      // x stays refused, alone as in a batch.
      await expect(log.append(link(x, 1))).rejects.toMatchObject({ code: 'TREE_DAMAGED' });
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog reads when storage fails', () => {
  it('reject with STORAGE_FAILED naming the read (as every PostgreSQL read does), not a raw LevelDB error', async () => {
    const log = await LevelManifestLog.open(join(freshDir(), 'log'));
    const id = digestOf(new TextEncoder().encode('s/0'));
    const envelope = JSON.stringify({ payload: Buffer.from('s/0').toString('base64') });
    await log.append({ session: 's', principal: 'p', seq: 0, prev: null, id, envelope });
    await log.raw.close(); // the storage goes away underneath the log
    const drain = async (it: AsyncIterable<unknown>) => {
      for await (const _ of it) void _;
    };
    const reads: Array<[string, () => Promise<unknown>]> = [
      ['head read', () => log.head('s')],
      ['entry read', () => log.entry('s', 0)],
      ['snapshot', () => log.headWindow('s')],
      ['chain read', () => drain(log.chain('s'))],
      ['entries read', () => drain(log.entries())],
      ['heads read', () => drain(log.heads())],
      ['watermark read', () => log.getWatermark('t')],
      ['position read', () => log.entryAt(0)],
      ['position read', () => log.positionOf(id)],
      ['inline blob stat', () => log.inlineBlobs.stat(id)],
      ['inline blob list', () => drain(log.inlineBlobs.list())],
      ['grant read', () => log.grants.get('q', 's')],
      ['grant list', () => log.grants.list()],
      ['signing key read', () => log.signingKeys.get('ed25519:none')],
      ['signing key list', () => drain(log.signingKeys.keyIds())],
      // A raw LevelDB error before (LEVEL_DATABASE_NOT_OPEN, no code of the library's): the checkpoint origin and the
      // tree's nodes (what a proof, a checkpoint of a tree not folded from memory and the witnesses read).
      ['origin read', () => log.origin()],
      ['origin read', () => log.origin('example.com/log')],
      ['tree node read', () => log.treeNodes([{ level: 0, index: 0 }])],
      ['inline blob read', () => log.inlineBlobs.get(id)],
      ['id position read', () => drain(log.idPositions())],
      ['session-heads count', () => log.sessionHeadNodeCount()],
    ];
    for (const [what, read] of reads) {
      await expect(read(), what).rejects.toMatchObject({
        name: 'ManifestError',
        code: 'STORAGE_FAILED',
        message: expect.stringContaining(what),
      });
    }
    await log.close().catch(() => {});
  });
});

describe('LevelManifestLog origin write when storage fails', () => {
  it('rejects with STORAGE_FAILED naming the write, not a raw error (a read view, which writes nothing)', async () => {
    const log = await LevelManifestLog.open(join(freshDir(), 'log'));
    try {
      await log.readSnapshot(async (view) => {
        await expect(view.origin('example.com/log')).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'STORAGE_FAILED',
          message: expect.stringContaining('origin write'),
        });
      });
      expect(await log.origin()).toBeUndefined();
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog append request changed by its caller after the call', () => {
  it('appends what was checked: the request is read once, when append is called', async () => {
    const log = await LevelManifestLog.open(join(freshDir(), 'log'));
    try {
      const blob = { digest: digestOf(new TextEncoder().encode('A')), bytes: new Uint8Array(1) };
      const req = { ...request('A'), blob };
      let appended!: Promise<LogEntry>;
      // Changed once the append was checked and queued, before its batch is built: before, the entry was written at
      // seq 7 under the other session's key, its head at seq 7 with no entry before it, the blob under another digest.
      await log.withAppendsHeld(async () => {
        appended = log.append(req);
        while ((log as unknown as { queue: unknown[] }).queue.length < 1) await new Promise((r) => setImmediate(r));
        Object.assign(req, { session: 'other', seq: 7, id: request('Z').id });
        blob.digest = request('Z').id;
      });
      const entry = await appended;
      expect(entry).toMatchObject({ session: 's', seq: 0, id: request('A').id });
      expect(await log.head('other')).toBeUndefined();
      expect((await log.head('s'))?.seq).toBe(0);
      expect(await log.inlineBlobs.stat(request('Z').id)).toBeUndefined();
      // A field that throws as it is read is the request's refusal, not an uncoded error.
      const throwing = {
        ...request('B'),
        get envelope(): string {
          throw new Error('getter');
        },
      };
      await expect(log.append(throwing)).rejects.toMatchObject({ name: 'ManifestError', code: 'INVALID_ARGUMENT' });
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog.checkHeads past a damaged head record', () => {
  it('reports that session RECORD_CORRUPT and goes on checking the heads after it', async () => {
    const link = (session: string, seq: number) => chainLink(session, seq);
    const dir = join(freshDir(), 'log');
    const first = await LevelManifestLog.open(dir);
    for (const [session, n] of [
      ['a', 1],
      ['b', 2],
      ['c', 1],
    ] as const)
      for (let seq = 0; seq < n; seq++) await first.append(link(session, seq));
    // a's head record damaged; b's head moved back behind the log's back (seq 1 stays beyond it, above its mark).
    await first.raw.put('h!a', 'not a head');
    await first.raw.put('h!b', JSON.stringify({ session: 'b', seq: 0, id: link('b', 0).id, owner: 'p' }));
    await first.close();
    const log = await LevelManifestLog.open(dir);
    try {
      const problems = await log.checkHeads();
      // Before: one RECORD_CORRUPT of session '(unknown)', and b's cut-back chain never looked at (the walk of the
      // heads ended at the record it could not parse).
      expect(problems.map((p) => [p.session, p.code])).toEqual([
        ['a', 'RECORD_CORRUPT'],
        ['b', 'ROLLBACK'],
        ['b', 'ROLLBACK'],
      ]);
    } finally {
      await log.close();
    }
  });
});

describe('LevelManifestLog origin proposed twice at once', () => {
  it('stores one and answers it to both, as PostgreSQL stores the first and answers it (insert if absent)', async () => {
    const dir = join(freshDir(), 'log');
    const log = await LevelManifestLog.open(dir);
    try {
      // Before: each call read no origin, wrote its own and answered it: 'a' was told its name while 'b' was stored.
      const answers = await Promise.all([log.origin('a.example/log'), log.origin('b.example/log')]);
      const stored = await log.origin();
      expect(answers).toEqual([stored, stored]);
      expect(await log.origin('c.example/log')).toBe(stored);
    } finally {
      await log.close();
    }
  });
});

describe("writeSyncedBatch (the log's durable batch)", () => {
  it('writes string puts, byte puts and deletes as one batch, and a batch with a bad operation writes nothing', async () => {
    const db = new Level<string, string>(join(freshDir(), 'db'), { valueEncoding: 'utf8' });
    await db.open();
    try {
      await db.put('gone', 'x');
      const bytes = Uint8Array.of(0, 1, 2, 255);
      await writeSyncedBatch(db, [
        { type: 'put', key: 'a', value: 'text' },
        { type: 'put', key: 'b', value: bytes, valueEncoding: 'view' },
        { type: 'del', key: 'gone' },
      ]);
      expect(await db.get('a')).toBe('text');
      expect(new Uint8Array((await db.get<string, Uint8Array>('b', { valueEncoding: 'view' }))!)).toEqual(bytes);
      expect(await db.get('gone')).toBeUndefined();
      const bad = [
        { type: 'put', key: 'c', value: 'never' },
        { type: 'put', key: null as unknown as string, value: 'bad key' },
      ] as const;
      await expect(writeSyncedBatch(db, bad)).rejects.toThrow();
      expect(await db.get('c')).toBeUndefined();
      // The failed batch was closed, not left open: the store still takes writes.
      await writeSyncedBatch(db, [{ type: 'put', key: 'd', value: 'after' }]);
      expect(await db.get('d')).toBe('after');
    } finally {
      await db.close();
    }
  });
});

describe('the embedded log writes every batch synced', () => {
  // A kill keeps what LevelDB wrote without sync (the OS has it), so no crash test can see `sync: true` go missing:
  // the option itself is checked, on every chained batch the process writes.
  it('writeSyncedBatch, and a publish through the default log (entry, head, inline blob, tree, heads), pass sync: true', async () => {
    const db = new Level<string, string>(join(freshDir(), 'db'), { valueEncoding: 'utf8' });
    await db.open();
    const probe = db.batch();
    const proto = Object.getPrototypeOf(probe) as { write: (options?: unknown) => Promise<void> };
    await probe.close();
    const write = vi.spyOn(proto, 'write');
    try {
      await writeSyncedBatch(db, [{ type: 'put', key: 'a', value: 'text' }]);
      expect(write.mock.calls).toEqual([[{ sync: true }]]);
      write.mockClear();
      const ledger = await openLedger({ root: freshDir(), host: 'h', onNotice: () => {} });
      try {
        await ledger.publish({ principal: 'p', session: 's', run: 'r' }, { task: 't', state: 's', nextSteps: ['n'] });
      } finally {
        await ledger.close();
      }
      expect(write.mock.calls.length).toBeGreaterThan(0);
      for (const call of write.mock.calls) expect(call).toEqual([expect.objectContaining({ sync: true })]);
    } finally {
      write.mockRestore();
      await db.close();
    }
  });
});

describe('LevelDB inline blob records', () => {
  const manifestError = (code: string, key: string) =>
    expect.objectContaining({ name: 'ManifestError', code, message: expect.stringContaining(key) });

  it('serve the stored bytes whether read synchronously (small) or off the event loop (large, or size record damaged)', async () => {
    const dir = freshDir();
    const log = await LevelManifestLog.open(join(dir, 'log'));
    try {
      const small = new Uint8Array(4096).fill(7);
      const large = new Uint8Array(SYNC_READ_MAX_BYTES + 1).fill(9);
      const blobs = [small, large].map((bytes) => ({ digest: digestOf(bytes), bytes }));
      for (const [seq, blob] of blobs.entries()) {
        const id = digestOf(new TextEncoder().encode(`entry ${seq}`));
        const envelope = JSON.stringify({ payloadType: 't', payload: Buffer.from(`p${seq}`).toString('base64') });
        const prev = seq === 0 ? null : (await log.head('s'))!.id;
        await log.append({ session: 's', principal: 'alice', seq, prev, id, envelope, blob });
      }
      const read = async (digest: Digest) => new Uint8Array((await log.inlineBlobs.get(digest)) ?? []);
      for (const { digest, bytes } of blobs) expect(await read(digest)).toEqual(bytes);
      expect(await log.inlineBlobs.get(digestOf(new Uint8Array(3)))).toBeUndefined();
      // A damaged size record: the bytes are still served (the reader re-hashes them; fsck names the record).
      await log.raw.put(`t!${digestHex(blobs[0]!.digest)}`, 'damaged');
      expect(await read(blobs[0]!.digest)).toEqual(small);
    } finally {
      await log.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fail as RECORD_CORRUPT naming the record when a t! record or key is damaged; gc listing stops with that code, a plain delete still removes it', async () => {
    const root = join(freshDir(), 'store');
    const ledger = await openLedger({ root, host: 'conformance-host' });
    try {
      const { digest } = await ledger.publish(
        { principal: 'alice', session: 's', run: 'r' },
        {
          task: 'a task',
          state: 'a state',
          nextSteps: ['a step'],
        },
      );
      const db = (ledger.log as LevelManifestLog).raw;
      const key = `t!${digestHex(digest)}`;
      await db.put(key, '{"size":"many"}');
      await expect(ledger.blobs.stat(digest)).rejects.toEqual(manifestError('RECORD_CORRUPT', key));
      await expect(ledger.blobs.delete(digest, { storedBeforeMs: Date.now() })).rejects.toEqual(
        manifestError('RECORD_CORRUPT', key),
      );
      expect(await ledger.log.inlineBlobs!.delete(digest)).toBe(true);
      expect(await db.get(key)).toBeUndefined();

      await db.put('t!not-hex', '{"size":1,"storedAtMs":1}');
      await expect(gc(ledger, { graceMs: 0 })).rejects.toEqual(manifestError('RECORD_CORRUPT', 't!not-hex'));
    } finally {
      await ledger.close();
      await rm(join(root, '..'), { recursive: true, force: true });
    }
  });
});

describe('LevelManifestLog session-heads node cache', () => {
  it('reads each node from storage once, stays bounded, and forgets nothing it has not seen committed', async () => {
    const dir = freshDir();
    const db = new Level<string, string>(join(dir, 'db'));
    try {
      const paths = [0, 1, 2, 3].map((depth) => ({ depth, prefix: new Uint8Array(32) }));
      const leaf = (n: number) => ({
        leaf: true as const,
        key: new Uint8Array(32).fill(n),
        value: new Uint8Array(32).fill(n + 1),
      });
      await db.put(headsNodeKey(paths[0]!), headsNodeValue(leaf(1)));
      const getMany = db.getMany.bind(db);
      const asked: string[][] = [];
      (db as unknown as { getMany: (k: string[]) => Promise<unknown> }).getMany = (keys: string[]) => {
        asked.push(keys);
        return getMany(keys);
      };
      const cache = new HeadsNodeCache(db, 3);
      // Stored and absent nodes are both remembered after one read.
      expect(await cache.read(paths.slice(0, 2))).toEqual([leaf(1), undefined]);
      expect(await cache.read(paths.slice(0, 2))).toEqual([leaf(1), undefined]);
      expect(asked).toHaveLength(1);
      // A committed batch's nodes are served from memory; what storage holds now is not re-read.
      cache.commit([{ path: paths[1]!, node: leaf(7) }]);
      await db.put(headsNodeKey(paths[1]!), 'not what was committed through the log');
      expect(await cache.read([paths[1]!])).toEqual([leaf(7)]);
      expect(asked).toHaveLength(1);
      // Past its limit the node used longest ago is dropped and read again when asked for.
      await cache.read([paths[2]!, paths[3]!]);
      expect(asked).toHaveLength(2);
      expect(await cache.read([paths[0]!])).toEqual([leaf(1)]);
      expect(asked.at(-1)).toEqual([headsNodeKey(paths[0]!)]);
    } finally {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  /** An append request for `session` at `seq` whose id and payload name them. */
  const link = (session: string, seq: number, prev: Digest | null) => ({
    session,
    principal: 'p',
    seq,
    prev,
    id: digestOf(new TextEncoder().encode(`${session}/${seq}`)),
    envelope: JSON.stringify({ payload: Buffer.from(`${session}/${seq}`).toString('base64') }),
  });

  it('tells onCommitting the tree of each batch while the batch is being written, committed or not', async () => {
    const dir = freshDir();
    let fail = false;
    let writing = false;
    const log = await LevelManifestLog.open(join(dir, 'log'), {
      writeBatch: async (d, ops) => {
        writing = true;
        try {
          await new Promise((r) => setTimeout(r, 5));
          if (fail) throw new Error('disk full');
          await writeSyncedBatch(d, ops);
        } finally {
          writing = false;
        }
      },
    });
    const told: Array<{ head: LogTreeHead; writing: boolean }> = [];
    log.onCommitting((head) => told.push({ head, writing }));
    const hex = (b: Uint8Array | undefined) => Buffer.from(b!).toString('hex');
    try {
      await log.append(link('a', 0, null));
      await log.append(link('b', 0, null));
      const committed = await log.treeHead();
      expect(told).toHaveLength(2);
      // Told while its batch was on its way, before the append resolved: exactly the tree the batch committed.
      expect(told.every((t) => t.writing)).toBe(true);
      expect(told[1]!.head.size).toBe(2);
      expect(hex(told[1]!.head.root)).toBe(hex(committed.root));
      expect(hex(told[1]!.head.sessionHeads)).toBe(hex(committed.sessionHeads));
      // A batch that fails was told too, and its tree is never the log's.
      fail = true;
      await expect(log.append(link('c', 0, null))).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
      expect(told).toHaveLength(3);
      expect(told[2]!.head.size).toBe(3);
      const after = await log.treeHead();
      expect(after.size).toBe(2);
      expect(hex(after.root)).toBe(hex(committed.root));
      // A batch hook that throws instead of rejecting fails its batch the same way, and the session goes on.
      fail = false;
      const hooked = log as unknown as { writeBatch: (d: unknown, ops: unknown[]) => Promise<void> };
      const original = hooked.writeBatch;
      hooked.writeBatch = () => {
        throw new Error('hook failed');
      };
      await expect(log.append(link('c', 0, null))).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
      hooked.writeBatch = original;
      // A listener that throws does not fail the append.
      log.onCommitting(() => {
        throw new Error('listener failed');
      });
      await log.append(link('d', 0, null));
      expect((await log.treeHead()).size).toBe(3);
    } finally {
      await log.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps the index right after a batch that failed to write (its nodes were never committed)', async () => {
    const dir = freshDir();
    let fail = false;
    const log = await LevelManifestLog.open(join(dir, 'log'), {
      writeBatch: (d, ops) => (fail ? Promise.reject(new Error('disk full')) : writeSyncedBatch(d, ops)),
    });
    try {
      for (let i = 0; i < 20; i++) await log.append(link(`s${i}`, 0, null));
      fail = true;
      await expect(log.append(link('new', 0, null))).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
      await expect(log.append(link('s3', 1, link('s3', 0, null).id))).rejects.toMatchObject({
        code: 'STORAGE_FAILED',
      });
      fail = false;
      await log.append(link('other', 0, null));
      await log.append(link('s4', 1, link('s4', 0, null).id));
      const heads: Array<{ session: string; head: { seq: number; id: string } }> = [];
      for await (const h of log.heads()) heads.push({ session: h.session, head: h });
      expect(Buffer.from((await log.treeHead()).sessionHeads!).toString('hex')).toBe(
        Buffer.from(sessionHeadsRoot(heads)).toString('hex'),
      );
    } finally {
      await log.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
