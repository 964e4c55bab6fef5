import { describe, expect, it } from 'vitest';
import { Level } from 'level';
import { chmodSync, readdirSync, renameSync, truncateSync, utimesSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck, gc, parseDuration } from '../src/ops/maintenance.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { digestHex, digestOf } from '../store/hash/digest.js';
import { validateSummary } from '../src/summary/summary.js';
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { LevelManifestLog, type BatchOp } from '../manifests/log/level/log.js';
import type { AppendOptions, HeadHold, LogEntry } from '../manifests/log/log.js';
import { ManifestError } from '../manifests/errors.js';
import { writeSyncedBatch } from '../manifests/log/level/tables.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

async function open(root = tempDir(), extra: Partial<Parameters<typeof openLedger>[0]> = {}): Promise<Ledger> {
  return openLedger({ root, host: 'host-a', ...extra });
}

describe('concurrency inside one process', () => {
  it('serializes 64 concurrent publishes into one session as seq 0..63, one linear chain', async () => {
    const ledger = await open();
    const receipts = await Promise.all(Array.from({ length: 64 }, (_, i) => ledger.publish(scope, sampleSummary(i))));
    expect(receipts.map((r) => r.seq).sort((a, b) => a - b)).toEqual([...Array(64).keys()]);
    const history = await ledger.history(scope);
    expect(history.length).toBe(64);
    expect(new Set(history.map((h) => h.id)).size).toBe(64);
    const report = await fsck(ledger);
    expect(report).toMatchObject({ ok: true, manifests: 64 });
    await ledger.close();
  });

  it('gives CHAIN_CONFLICT to every loser of an expectedPrev race, and nothing partial', async () => {
    const ledger = await open();
    const base = await ledger.publish(scope, sampleSummary('base'));
    const results = await Promise.allSettled(
      Array.from({ length: 64 }, (_, i) => ledger.publish(scope, sampleSummary(i), { expectedPrev: base.id })),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won.length).toBe(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'CHAIN_CONFLICT' });
    expect((await ledger.history(scope)).length).toBe(2);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('lets publishes on different chains share one durable batch (group commit)', async () => {
    const { LevelManifestLog } = await import('../manifests/log/level/log.js');
    // The first batch is held until the other 31 appends are queued behind it (not merely called: an
    // append reads its head before it queues).
    let batches = 0;
    let appends = 0;
    const queued = () => (inner as unknown as { queue: unknown[] }).queue.length;
    const allQueued = async () => {
      while (queued() < 31) await new Promise((r) => setTimeout(r, 1));
    };
    const writeBatch = async (db: any, ops: BatchOp[]) => {
      if (++batches === 1) await allQueued();
      await writeSyncedBatch(db, ops);
    };
    const inner = await LevelManifestLog.open(join(tempDir(), 'log'), { writeBatch });
    const log = Object.assign(Object.create(inner), {
      append: (...args: Parameters<typeof inner.append>) => {
        appends++;
        return inner.append(...args);
      },
    });
    const ledger = await open(tempDir(), { log });
    await Promise.all(
      Array.from({ length: 32 }, (_, i) => ledger.publish({ ...scope, session: `s${i}` }, sampleSummary(i))),
    );
    expect(appends).toBe(32);
    expect(batches).toBe(2);
    for (let i = 0; i < 32; i++) expect((await ledger.resume({ principal: 'alice', session: `s${i}` }))?.seq).toBe(0);
    await ledger.close();
    await inner.close();
  });
});

describe('cancellation', () => {
  const steps: Array<keyof FsOps> = ['open', 'write', 'fsync', 'close', 'mkdir', 'link', 'fsyncDir'];
  it.each(steps)('an abort during the blob %s step leaves no manifest and no staging file', async (step) => {
    const root = tempDir();
    let ac: AbortController | undefined = undefined;
    const fs: FsOps = { ...nodeFsOps };
    (fs as any)[step] = async (...args: unknown[]) => {
      ac?.abort(new Error(`stop at ${step}`));
      return (nodeFsOps as any)[step](...args);
    };
    const ledger = await open(root, { fs, inlineSummaryBytes: 0 }); // the blob file path, whatever the size
    const first = await ledger.publish({ ...scope, session: 'other' }, sampleSummary('x')); // shard dirs exist for some digests
    ac = new AbortController();
    const outcome = await ledger.publish(scope, sampleSummary(`abort-${step}`), { signal: ac.signal }).catch((e) => e);
    if (step === 'mkdir' && !ac.signal.aborted) {
      expect(outcome.seq).toBe(0); // no new shard directory was needed: nothing to abort at
    } else {
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect(await ledger.resume({ principal: 'alice', session: 's' })).toBeUndefined();
    }
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    expect(first.seq).toBe(0);
    await ledger.close();
  });

  it('an abort during the durable batch write (after the point of no return) still publishes', async () => {
    let ac: AbortController | undefined = undefined;
    const writeBatch = async (db: any, ops: BatchOp[]) => {
      ac?.abort(new Error('too late'));
      await writeSyncedBatch(db, ops);
    };
    const ledger = await open(tempDir(), { levelLog: { writeBatch } });
    ac = new AbortController();
    const receipt = await ledger.publish(scope, sampleSummary('committed'), { signal: ac.signal });
    expect(ac.signal.aborted).toBe(true);
    expect((await ledger.resume(scope))?.id).toBe(receipt.id);
    await ledger.close();
  });

  it('an abort while waiting for the chain lock (blob already stored) leaves no manifest', async () => {
    // The first publish holds the chain lock inside its durable batch until the test lets it go.
    let entered!: () => void;
    const inBatch = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const writeBatch = async (db: any, ops: BatchOp[]) => {
      entered();
      await gate;
      await writeSyncedBatch(db, ops);
    };
    // Summaries as files: the waiting publish's blob is stored before it waits for the lock.
    const ledger = await open(tempDir(), { levelLog: { writeBatch }, inlineSummaryBytes: 0 });
    const holder = ledger.publish(scope, sampleSummary('holder'));
    await inBatch;
    const ac = new AbortController();
    const waiting = sampleSummary('cancelled');
    const cancelled = ledger.publish(scope, waiting, { signal: ac.signal });
    const digest = digestOf(validateSummary(waiting).bytes);
    while (!(await ledger.blobs.has(digest))) await new Promise((r) => setTimeout(r, 5));
    ac.abort(); // its blob is stored; it can only be waiting for the lock
    release();
    await expect(cancelled).rejects.toMatchObject({ code: 'CANCELLED' });
    await holder;
    const history = await ledger.history(scope);
    expect(history.map((h) => h.manifest.seq)).toEqual([0]);
    await ledger.close();
  });
});

describe('restart, recovery, fsck and gc', () => {
  it('clears leftover staging files, fsck is clean, and gc removes only the old orphan', async () => {
    const root = tempDir();
    let ledger = await open(root);
    const kept = await ledger.publish(scope, sampleSummary('kept'));
    const oldOrphan = await ledger.blobs.put(new TextEncoder().encode('orphan from a crashed publish'));
    const youngOrphan = await ledger.blobs.put(new TextEncoder().encode('orphan of a publish in flight'));
    await ledger.close();
    const hex = digestHex(oldOrphan.digest);
    const past = new Date(Date.now() - 3 * 86_400_000);
    utimesSync(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), past, past);
    writeFileSync(join(root, 'tmp', 'deadbeef.tmp'), 'half a blob');
    writeFileSync(join(root, 'tmp', 'cafe.tmp'), '');

    ledger = await open(root);
    expect(ledger.recovery).toEqual({ stagingRemoved: 2, headProblems: [] });
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    expect(await fsck(ledger)).toMatchObject({ ok: true, chains: 1, manifests: 1, blobsChecked: 1, findings: [] });
    const report = await gc(ledger, { graceMs: parseDuration('1d') });
    expect(report.removed).toEqual([oldOrphan.digest]);
    expect(report.keptYoung).toBe(1);
    expect(await ledger.blobs.has(youngOrphan.digest)).toBe(true);
    expect(await ledger.blobs.has(kept.digest)).toBe(true);
    const everything = await gc(ledger, { graceMs: 0, now: Date.now() + 1000 });
    expect(everything.removed).toEqual([youngOrphan.digest]);
    expect((await ledger.resume(scope))?.id).toBe(kept.id);
    await ledger.close();
  });

  it('gc keeps the blob of an entry the position index lost, and removes nothing while a manifest cannot be read', async () => {
    const root = tempDir();
    let ledger = await open(root, { inlineSummaryBytes: 0 });
    const first = await ledger.publish(scope, sampleSummary('first'));
    const second = await ledger.publish({ ...scope, session: 's2' }, sampleSummary('second'));
    await ledger.close();
    const db = new Level<string, string>(join(root, 'manifests-v1'));
    await db.open();
    await db.del(`p!${(0).toString(16).padStart(16, '0')}`); // the global order no longer reaches seq 0 of s
    await db.close();
    ledger = await open(root, { inlineSummaryBytes: 0 });
    expect((await fsck(ledger)).findings).toContainEqual({
      code: 'POSITION_GAP',
      message: 'global position 0 holds no entry (the next entry is at 1)',
    });
    const later = { graceMs: 0, now: Date.now() + 1000 };
    expect((await gc(ledger, later)).removed).toEqual([]);
    expect((await ledger.resume(scope))?.id).toBe(first.id);
    await ledger.close();

    // A manifest whose envelope no longer parses: which blob it names is unknown, so gc stops before removing any.
    const orphan = await (async () => {
      const l = await open(root, { inlineSummaryBytes: 0 });
      const o = await l.blobs.put(new TextEncoder().encode('an orphan gc would otherwise remove'));
      await l.close();
      return o;
    })();
    await db.open();
    const key = `e!s2!${(0).toString(16).padStart(12, '0')}`;
    const record = JSON.parse((await db.get(key))!) as { envelope: string };
    await db.put(key, JSON.stringify({ ...record, envelope: record.envelope.slice(0, -9) }));
    await db.close();
    ledger = await open(root, { inlineSummaryBytes: 0 });
    await expect(gc(ledger, later)).rejects.toMatchObject({ code: 'RECORD_CORRUPT', message: /"s2" seq 0/ });
    expect(await ledger.blobs.has(second.digest)).toBe(true);
    expect(await ledger.blobs.has(orphan.digest)).toBe(true);
    await ledger.close();
  });

  it('flushes the store root and blobs-v1 at open, so the directories blobs are named under are durable in them', async () => {
    const root = tempDir();
    const flushed: string[] = [];
    const fs: FsOps = { ...nodeFsOps, fsyncDir: async (dir) => (flushed.push(dir), nodeFsOps.fsyncDir(dir)) };
    await (await open(root, { fs })).close();
    expect(flushed).toEqual(expect.arrayContaining([root, join(root, 'blobs-v1')]));
  });

  it("on a root processes of a shared log (not exclusive) write, an open removes only old blob staging files: another's put in flight completes", async () => {
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    const shared = Object.create(level, {
      exclusive: { value: false },
      close: { value: async () => {} },
    }) as LevelManifestLog;
    const root = join(base, 'root');
    const a = await open(root, { log: shared });
    try {
      // A's put is under way: its staging file in tmp/ holds the first chunk, the rest not yet given.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const bytes = new TextEncoder().encode('a blob written by another process of this root, in two chunks');
      async function* source() {
        yield bytes.subarray(0, 10);
        await gate;
        yield bytes.subarray(10);
      }
      const put = a.blobs.put(source());
      while (readdirSync(join(root, 'tmp')).length === 0) await new Promise((r) => setTimeout(r, 1));
      const [inFlight] = readdirSync(join(root, 'tmp'));
      // And what a crash left 11 minutes ago.
      const old = join(root, 'tmp', `${'0'.repeat(32)}.tmp`);
      writeFileSync(old, 'half a blob');
      const past = new Date(Date.now() - 11 * 60_000);
      utimesSync(old, past, past);
      const b = await open(root, { log: shared });
      try {
        expect(b.recovery.stagingRemoved).toBe(1);
        expect(readdirSync(join(root, 'tmp'))).toEqual([inFlight]);
        release();
        const stored = await put;
        expect(stored.digest).toBe(digestOf(bytes));
        expect(new Uint8Array(await b.blobs.get(stored.digest))).toEqual(bytes);
      } finally {
        release();
        await b.close();
      }
    } finally {
      await a.close();
      await level.close();
    }
  });

  it('removes staging files a crash left beside trust.json, the key files and the pin, and nothing else there', async () => {
    const root = tempDir();
    await (await open(root)).close();
    const leftovers = ['', 'keys', 'checkpoints'].map((dir) => join(root, dir, '.0123456789abcdef.tmp'));
    // And createFileWhole's, beside a lock file: trust.json's, the pin's.
    leftovers.push(join(root, 'trust.json.lock.0123456789abcdef.tmp'));
    leftovers.push(join(root, 'checkpoints', 'pin.lock.fedcba9876543210.tmp'));
    for (const path of leftovers) writeFileSync(path, 'a half-written private key, say', { mode: 0o600 });
    writeFileSync(join(root, 'keys', 'notes.tmp'), 'not a staging name'); // kept: not a name writeFileAtomic picks
    writeFileSync(join(root, 'keys', 'notes.0123456789abcde.tmp'), 'nor this (15 hex digits)');
    const before = readdirSync(join(root, 'keys')).length;
    const ledger = await open(root);
    expect(ledger.recovery.stagingRemoved).toBe(5);
    for (const path of leftovers) expect(() => readFileSync(path)).toThrow(/ENOENT/);
    expect(readdirSync(join(root, 'keys')).length).toBe(before - 1);
    await ledger.close();
  });

  it('a blob file grown past every limit: resume says BLOB_INTEGRITY, and a publish of the same bytes replaces it', async () => {
    const root = tempDir();
    const ledger = await open(root, { inlineSummaryBytes: 0, maxSummaryBytes: 256 * 1024 });
    const summary = sampleSummary('grown');
    const first = await ledger.publish(scope, summary);
    const hex = digestHex(first.digest);
    const path = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    truncateSync(path, 1024 * 1024); // zeros appended: over maxSummaryBytes
    await expect(ledger.resume(scope)).rejects.toMatchObject({ code: 'BLOB_INTEGRITY' });
    const again = await ledger.publish({ ...scope, session: 's2' }, summary);
    expect(again.digest).toEqual(first.digest);
    expect((await ledger.resume(scope))?.summary).toEqual((await ledger.resume({ ...scope, session: 's2' }))?.summary);
    expect(readdirSync(join(root, 'quarantine'))).toHaveLength(1);
    await ledger.close();
  });

  it('links a blob a crashed gc left in gc-aside/ back at open: resume reads it from its path again', async () => {
    const root = tempDir();
    let ledger = await open(root, { inlineSummaryBytes: 0 });
    const r = await ledger.publish(scope, sampleSummary('held aside when gc crashed'));
    await ledger.close();
    const hex = digestHex(r.digest);
    const path = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    renameSync(path, join(root, 'gc-aside', hex)); // where gc holds a blob while it judges it
    ledger = await open(root, { inlineSummaryBytes: 0 });
    try {
      expect(readdirSync(join(root, 'gc-aside'))).toEqual([]);
      expect(readFileSync(path).length).toBe(r.size);
      expect((await ledger.resume(scope))?.id).toBe(r.id);
    } finally {
      await ledger.close();
    }
  });

  it('concurrent publishes of the same bytes over a damaged blob file all succeed, and one copy is quarantined', async () => {
    const root = tempDir();
    const ledger = await open(root, { inlineSummaryBytes: 0 });
    const summary = sampleSummary('damaged, then published again by three sessions at once');
    const first = await ledger.publish(scope, summary);
    const hex = digestHex(first.digest);
    writeFileSync(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), 'bit rot');
    const sessions = ['c1', 'c2', 'c3'];
    const receipts = await Promise.allSettled(
      sessions.map((session) => ledger.publish({ ...scope, session }, summary)),
    );
    expect(receipts.map((r) => (r.status === 'fulfilled' ? r.value.digest : String(r.reason)))).toEqual(
      sessions.map(() => first.digest),
    );
    for (const session of ['s', ...sessions])
      expect((await ledger.resume({ ...scope, session }))?.summary).toEqual(validateSummary(summary).summary);
    expect(readdirSync(join(root, 'quarantine'))).toHaveLength(1);
    await ledger.close();
  });

  it('fsck reports a corrupt blob file and a missing blob', async () => {
    const root = tempDir();
    const ledger = await open(root, { inlineSummaryBytes: 0 });
    const a = await ledger.publish(scope, sampleSummary('a'));
    await ledger.publish({ ...scope, session: 's2' }, sampleSummary('b')).then((r) => ledger.blobs.delete(r.digest));
    const hex = digestHex(a.digest);
    const path = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    const bytes = readFileSync(path);
    bytes[0]! ^= 1;
    writeFileSync(path, bytes);
    const report = await fsck(ledger);
    expect(report.ok).toBe(false);
    expect(report.findings.map((f) => f.code).sort()).toEqual(['BLOB_DIGEST', 'BLOB_MISSING']);
    await ledger.close();
  });

  it('refuses a gc without a non-negative graceMs, and openLedger without options, with INVALID_ARGUMENT', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'h1' });
    for (const options of [{ graceMs: -1 }, { graceMs: '1h' }, { graceMs: Number.NaN }, undefined])
      await expect(gc(ledger, options as never), JSON.stringify(options)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    await ledger.close();
    await expect(openLedger(undefined as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('parses durations and refuses nonsense', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('7d')).toBe(7 * 86_400_000);
    expect(() => parseDuration('soon')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('keys', () => {
  it('generates a 0600 key on first open and refuses a key file readable by others', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const keyId = ledger.keyId;
    await ledger.close();
    const [file] = readdirSync(join(root, 'keys'));
    expect(file).toMatch(/^[0-9a-f]{64}\.jwk$/);
    const path = join(root, 'keys', file!);
    chmodSync(path, 0o644);
    await expect(open(root)).rejects.toMatchObject({ name: 'LedgerError', code: 'KEY_FILE_UNSAFE' });
    chmodSync(path, 0o600);
    const again = await open(root);
    expect(again.keyId).toBe(keyId);
    await again.close();
  });

  it('rotates: old manifests keep verifying across a restart, new ones use the new key', async () => {
    const root = tempDir();
    let ledger = await open(root);
    const before = await ledger.publish(scope, sampleSummary('old key'));
    const oldKey = ledger.keyId;
    const newKey = await ledger.rotateKey();
    expect(newKey).not.toBe(oldKey);
    const after = await ledger.publish(scope, sampleSummary('new key'));
    await ledger.close();
    ledger = await open(root);
    expect(ledger.keyId).toBe(newKey);
    const history = await ledger.history(scope);
    expect(history.map((h) => h.manifest.keyId)).toEqual([oldKey, newKey]);
    expect(history.map((h) => h.id)).toEqual([before.id, after.id]);
    const old = ledger.trustStore().keys.find((k) => k.keyId === oldKey)!;
    expect(old.notAfter).toBeDefined();
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('revocation: manifests signed at or after revokedAt stop verifying, earlier ones still do, across a restart', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    let ledger = await open(root, { clock });
    await ledger.publish(scope, sampleSummary(1));
    now += 60_000;
    await ledger.publish(scope, sampleSummary(2));
    const keyId = ledger.keyId;
    await ledger.revokeKey(keyId, '2026-11-30T10:00:30.000Z');
    await ledger.close();
    ledger = await open(root, { clock });
    // The revoked key cannot sign any more; the store still opens for reading.
    await expect(ledger.publish(scope, sampleSummary(3))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await ledger.close();
    // An auditor-style open with another key trusts the same file.
    const reader = await open(root, { clock, signer: new LocalSigner(generateJwk()) });
    await expect(reader.resume(scope)).rejects.toMatchObject({ name: 'ManifestError', code: 'KEY_REVOKED' });
    const report = await fsck(reader);
    expect(report.findings).toEqual([expect.objectContaining({ code: 'KEY_REVOKED', seq: 1 })]);
    await reader.close();
  });

  it('signs with an injected Signer (KMS/HSM) and trusts it', async () => {
    const inner = new LocalSigner(generateJwk());
    let calls = 0;
    const signer = {
      keyId: 'kms:projects/p/keys/host-a/1',
      publicKey: inner.publicKey,
      sign: async (m: Uint8Array) => {
        calls++;
        return inner.sign(m);
      },
    };
    const ledger = await open(tempDir(), { signer });
    expect(calls).toBe(1); // the keyring's test signature: it verifies under the signer's publicKey
    await ledger.publish(scope, sampleSummary());
    expect(calls).toBe(2);
    expect((await ledger.resume(scope))?.manifest.keyId).toBe(signer.keyId);
    expect(ledger.trustStore().keys.map((k) => k.keyId)).toContain(signer.keyId);
    await expect(ledger.rotateKey()).rejects.toMatchObject({ code: 'KEY_INVALID' });
    await ledger.close();
  });
});

describe('writers that share one log (other processes or hosts)', () => {
  /**
   * Two hosts on one log; host B publishes right after host A's commit step reads the head it builds on. With `holds`,
   * A's log holds heads (ManifestLog.holdHead, as PostgreSQL's does) the way `holds` says: a held head (the log's
   * head, appended to through the log), or none to hold; `holdAppend` replaces the held append.
   */
  async function racingHosts({
    holds,
    holdAppend,
  }: { holds?: 'head' | 'none'; holdAppend?: () => Promise<LogEntry> } = {}) {
    const { LevelManifestLog } = await import('../manifests/log/level/log.js');
    const shared = await LevelManifestLog.open(join(tempDir(), 'log'));
    const a = await open(tempDir(), { host: 'host-a', log: shared });
    const b = await open(tempDir(), { host: 'host-b', log: shared, trust: a.trustStore() });
    const realHead = shared.appendHead.bind(shared);
    const realAppend = shared.append.bind(shared);
    const stats = {
      headReads: 0,
      conflicts: 0,
      race: true,
      appends: 0,
      holds: [] as unknown[][],
      heldAppends: 0,
      released: 0,
    };
    const holdHead = async (session: string, options?: AppendOptions): Promise<HeadHold | undefined> => {
      stats.holds.push([session, options]);
      const head = await shared.head(session);
      if (holds === 'none' || !head) return undefined;
      return {
        head,
        append: (request) => {
          stats.heldAppends++;
          return holdAppend ? holdAppend() : realAppend(request);
        },
        release: async () => {
          stats.released++;
        },
      };
    };
    const viaA = {
      // The head a publish builds on (ManifestLog.appendHead).
      appendHead: async (session: string) => {
        const head = await realHead(session);
        // The second head read of a publish is its commit's (the first is the early authorization): host B wins
        // the append between that read and A's append.
        if (stats.race && ++stats.headReads === 2) {
          stats.race = false;
          await b.publish({ principal: 'alice', session: 's', run: 'on-b' }, sampleSummary('b'));
        }
        return head;
      },
      append: async (...args: Parameters<typeof shared.append>) => {
        stats.appends++;
        return realAppend(...args).catch((e) => {
          if (e.code === 'CHAIN_CONFLICT') stats.conflicts++;
          throw e;
        });
      },
      ...(holds ? { holdHead } : {}),
    };
    const aLog = Object.assign(Object.create(shared), viaA);
    const racingA = await open(tempDir(), {
      host: 'host-a',
      log: aLog,
      signer: undefined,
      keyFile: undefined,
      root: a.root,
      trust: b.trustStore(), // it links to B's head: resume there, and so publish, verify it
    });
    return {
      shared,
      a: racingA,
      b,
      stats,
      close: async () => {
        await b.blobs.close();
        await racingA.blobs.close();
        await a.blobs.close();
        await shared.close();
      },
    };
  }

  it('re-reads the head and re-signs when another host wins the append race', async () => {
    const { a, b, stats, close } = await racingHosts();
    const receipt = await a.publish({ principal: 'alice', session: 's', run: 'on-a' }, sampleSummary('a'));
    expect(stats.conflicts).toBe(1);
    expect(receipt.seq).toBe(1);
    const history = await b.history({ principal: 'alice', session: 's' });
    expect(history.map((h) => [h.manifest.host, h.manifest.seq])).toEqual([
      ['host-b', 0],
      ['host-a', 1],
    ]);
    await close();
  });

  it('retries a lost race on a head the log holds for it (ManifestLog.holdHead), and ends the hold', async () => {
    const { a, b, stats, close } = await racingHosts({ holds: 'head' });
    const ac = new AbortController();
    const receipt = await a.publish({ principal: 'alice', session: 's', run: 'on-a' }, sampleSummary('a'), {
      signal: ac.signal,
    });
    expect(receipt.seq).toBe(1);
    // The first attempt held nothing and lost; the retry held the head (under the publish's signal) and appended there.
    expect(stats).toMatchObject({ conflicts: 1, appends: 1, heldAppends: 1, released: 1 });
    expect(stats.holds).toEqual([['s', { signal: ac.signal }]]);
    const history = await b.history({ principal: 'alice', session: 's' });
    expect(history.map((h) => [h.manifest.host, h.manifest.seq])).toEqual([
      ['host-b', 0],
      ['host-a', 1],
    ]);
    // An uncontended publish holds nothing.
    await a.publish({ principal: 'alice', session: 's', run: 'on-a' }, sampleSummary('a2'));
    expect(stats.holds).toHaveLength(1);
    await close();
  });

  it('retries as before when the log has no head to hold for it', async () => {
    const { a, stats, close } = await racingHosts({ holds: 'none' });
    const receipt = await a.publish({ principal: 'alice', session: 's', run: 'on-a' }, sampleSummary('a'));
    expect(receipt.seq).toBe(1);
    expect(stats).toMatchObject({ conflicts: 1, appends: 2, heldAppends: 0, released: 0 });
    expect(stats.holds).toHaveLength(1);
    await close();
  });

  it("ends the hold when the held append fails, and the publish fails with the append's error", async () => {
    const { a, b, stats, close } = await racingHosts({
      holds: 'head',
      holdAppend: () => Promise.reject(new ManifestError('STORAGE_FAILED', 'the disk went away')),
    });
    await expect(
      a.publish({ principal: 'alice', session: 's', run: 'on-a' }, sampleSummary('a')),
    ).rejects.toMatchObject({ code: 'STORAGE_FAILED', message: expect.stringContaining('the disk went away') });
    expect(stats).toMatchObject({ conflicts: 1, heldAppends: 1, released: 1 });
    expect((await b.history({ principal: 'alice', session: 's' })).length).toBe(1);
    await close();
  });

  it('does not retry when the caller passed expectedPrev: the race is CHAIN_CONFLICT', async () => {
    const { a, b, stats, close } = await racingHosts();
    await expect(
      a.publish({ principal: 'alice', session: 's', run: 'on-a' }, sampleSummary('a'), { expectedPrev: null }),
    ).rejects.toMatchObject({ code: 'CHAIN_CONFLICT' });
    expect(stats.conflicts).toBe(1);
    expect((await b.history({ principal: 'alice', session: 's' })).length).toBe(1);
    await close();
  });
});
