/**
 * fsck applies the rules resume and the auditor apply (one chain checker, one set of head rules): a store
 * that resume refuses is never "clean", and a problem the auditor would find has the auditor's code.
 */
import { describe, expect, it } from 'vitest';
import { cpSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Level } from 'level';
import { type Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck, gc } from '../src/ops/maintenance.js';
import { exportBundle } from '../src/ops/export.js';
import { fsckBlobTimes } from '../src/ops/fsck-inline.js';
import { StoreError } from '../store/errors.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import type { BlobStore } from '../store/blob-store.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import type { LogEntry } from '../manifests/log/log.js';
import { verifyChain } from '../manifests/audit/verify-chain.js';
import { signEnvelope, serializeEnvelope } from '../manifests/crypto/envelope.js';
import {
  encodeManifest,
  manifestId,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Manifest,
} from '../manifests/format/manifest.js';
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { decodeBase64, encodeBase64 } from '../manifests/encoding/base64.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
const entryKey = (session: string, seq: number) => `e!${session}!${seq.toString(16).padStart(12, '0')}`;
const posKey = (pos: number) => `p!${pos.toString(16).padStart(16, '0')}`;

async function rejection(p: Promise<unknown>): Promise<{ name?: string; code?: string }> {
  return p.then(
    () => expect.unreachable('expected a refusal'),
    (err: unknown) => err as { name?: string; code?: string },
  );
}

/** A store with three compactions in session `s`, resumed once (watermark 2), then closed. */
async function storeWithChain(): Promise<{ root: string; entries: LogEntry[] }> {
  const root = tempDir();
  const ledger = await openLedger({ root, host: 'host-a' });
  // The other session first: removing the newest positions (those of `s`) leaves no gap in the global order.
  await ledger.publish({ ...scope, session: 'other' }, sampleSummary('other'));
  for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
  await ledger.resume(scope);
  const entries: LogEntry[] = [];
  for await (const e of ledger.log.chain('s')) entries.push(e);
  for await (const e of ledger.log.chain('other')) entries.push(e);
  await ledger.close();
  return { root, entries };
}

/** Changes the stored LevelDB records of a closed store behind the ledger's back. */
async function tamper(root: string, change: (db: Level<string, string>) => Promise<void>): Promise<void> {
  const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
  try {
    await change(log.raw);
  } finally {
    await log.close();
  }
}

/** The entry's envelope with its payload's `run` changed, the signature kept (the edit a signature refuses). */
function editedManifest(e: LogEntry): string {
  const env = JSON.parse(e.envelope);
  const manifest = JSON.parse(new TextDecoder().decode(decodeBase64(env.payload)!));
  env.payload = encodeBase64(encodeManifest({ ...manifest, run: 'run-forged' }));
  return JSON.stringify(env);
}

/** The entry's envelope with another payload type, payload and signature kept. */
function withPayloadType(e: LogEntry, payloadType: string): string {
  return JSON.stringify({ ...JSON.parse(e.envelope), payloadType });
}

const headOf = (e: LogEntry) => JSON.stringify({ session: e.session, seq: e.seq, id: e.id, owner: 'alice' });

describe('fsck', () => {
  const refused: Array<{
    what: string;
    change: (db: Level<string, string>, entries: LogEntry[]) => Promise<void>;
    resume: string;
    fsck: string;
  }> = [
    {
      what: 'an entry whose stored principal was changed',
      change: (db, [, , e2]) => db.put(entryKey('s', 2), JSON.stringify({ ...e2!, principal: 'mallory' })),
      resume: 'CHAIN_BROKEN',
      fsck: 'PRINCIPAL_MISMATCH',
    },
    {
      what: 'a head rolled back below its watermark, the newer entry removed',
      change: async (db, [, e1, e2]) => {
        await db.batch([
          { type: 'del', key: entryKey('s', 2) },
          { type: 'del', key: posKey(e2!.position) },
          { type: 'put', key: 'h!s', value: headOf(e1!) },
        ]);
      },
      resume: 'ROLLBACK',
      fsck: 'ROLLBACK',
    },
    {
      what: 'a head rolled back, the newer entry left in place',
      change: (db, [, e1]) => db.put('h!s', headOf(e1!)),
      resume: 'ROLLBACK',
      fsck: 'ROLLBACK',
    },
    {
      what: 'a whole chain removed, its watermark left',
      change: async (db, entries) => {
        const mine = entries.filter((e) => e.session === 's');
        await db.batch([
          { type: 'del', key: 'h!s' },
          ...mine.map((e) => ({ type: 'del' as const, key: entryKey('s', e.seq) })),
          ...mine.map((e) => ({ type: 'del' as const, key: posKey(e.position) })),
        ]);
      },
      resume: 'ROLLBACK',
      fsck: 'ROLLBACK',
    },
    {
      what: 'a head that names an id no entry has',
      change: (db, [, , e2]) => db.put('h!s', headOf({ ...e2!, id: entriesId('x') })),
      resume: 'CHAIN_BROKEN',
      fsck: 'HEAD_MISMATCH',
    },
    {
      what: 'an entry stored under another id than its payload hash (its head moved along)',
      change: async (db, [, , e2]) => {
        const moved = { ...e2!, id: entriesId('y') };
        await db.batch([
          { type: 'put', key: entryKey('s', 2), value: JSON.stringify(moved) },
          { type: 'put', key: 'h!s', value: headOf(moved) },
        ]);
      },
      resume: 'CHAIN_BROKEN',
      fsck: 'ID_MISMATCH',
    },
    {
      what: "an entry holding another session's manifest",
      change: (db, entries) => {
        const foreign = entries.find((e) => e.session === 'other')!;
        return db.put(entryKey('s', 2), JSON.stringify({ ...entries[2]!, envelope: foreign.envelope }));
      },
      resume: 'SCOPE_MISMATCH',
      fsck: 'SCOPE_MISMATCH',
    },
    {
      what: 'an entry whose signed manifest was edited (its run), the signature left',
      change: (db, [, e1]) => db.put(entryKey('s', 1), JSON.stringify({ ...e1!, envelope: editedManifest(e1!) })),
      resume: 'SIGNATURE_INVALID',
      fsck: 'SIGNATURE_INVALID',
    },
    {
      what: "an entry whose envelope's payload type was changed",
      change: (db, [, e1]) =>
        db.put(entryKey('s', 1), JSON.stringify({ ...e1!, envelope: withPayloadType(e1!, 'application/json') })),
      resume: 'PAYLOAD_TYPE',
      fsck: 'PAYLOAD_TYPE',
    },
    {
      what: 'a middle entry removed (with its position)',
      change: (db, [, e1]) =>
        db.batch([
          { type: 'del', key: entryKey('s', 1) },
          { type: 'del', key: posKey(e1!.position) },
        ]),
      resume: 'CHAIN_BROKEN',
      fsck: 'SEQ_GAP',
    },
  ];

  for (const t of refused) {
    it(`is not clean for a store that resume refuses: ${t.what}`, async () => {
      const { root, entries } = await storeWithChain();
      await tamper(root, (db) => t.change(db, entries));
      const ledger = await openLedger({ root, host: 'host-a' });
      try {
        expect(await rejection(ledger.resume(scope))).toMatchObject({ code: t.resume });
        const report = await fsck(ledger);
        expect(report.ok).toBe(false);
        expect(report.findings).toContainEqual(expect.objectContaining({ code: t.fsck, session: 's' }));
        // The other session is untouched and still clean.
        expect(report.findings.filter((f) => f.session !== undefined && f.session !== 's')).toEqual([]);
      } finally {
        await ledger.close();
      }
    });
  }

  it('reports a chain whose first entry was removed as SEQ_NOT_ZERO, as history refuses it (resume reads past its watermark only)', async () => {
    const { root, entries } = await storeWithChain();
    await tamper(root, (db) =>
      db.batch([
        { type: 'del', key: entryKey('s', 0) },
        { type: 'del', key: posKey(entries[0]!.position) },
      ]),
    );
    const ledger = await openLedger({ root, host: 'host-a' });
    try {
      expect(await rejection(ledger.history(scope))).toMatchObject({ code: 'CHAIN_BROKEN' });
      // Resume verified seq 0..2 before (watermark 2) and reads what lies beyond it: the head, unchanged.
      expect((await ledger.resume(scope))?.seq).toBe(2);
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'SEQ_NOT_ZERO', session: 's' }));
      expect(report.findings.filter((f) => f.session === 'other')).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it("reports an entry replaced by a copy's manifest of the same seq (a backup's fork) as PREV_MISMATCH of the next", async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a' });
    await ledger.publish({ ...scope, session: 'other' }, sampleSummary('other'));
    await ledger.publish(scope, sampleSummary(0));
    await ledger.close();
    // A copy of the root (same keys) that went on on its own: its seq 1 is signed, linked to the shared seq 0.
    const copy = tempDir();
    cpSync(root, copy, { recursive: true });
    ledger = await openLedger({ root: copy, host: 'host-a' });
    await ledger.publish({ ...scope, run: 'elsewhere' }, sampleSummary(1));
    const forked = (await ledger.log.entry('s', 1))!;
    await ledger.close();
    ledger = await openLedger({ root, host: 'host-a' });
    for (let i = 1; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
    const mine = (await ledger.log.entry('s', 1))!;
    await ledger.close();
    await tamper(root, (db) => db.put(entryKey('s', 1), JSON.stringify({ ...forked, position: mine.position })));
    ledger = await openLedger({ root, host: 'host-a' });
    try {
      expect(await rejection(ledger.history(scope))).toMatchObject({ code: 'CHAIN_BROKEN' });
      expect(await rejection(ledger.resume(scope))).toMatchObject({ code: 'CHAIN_BROKEN' });
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'PREV_MISMATCH', session: 's', seq: 2 }));
      expect(report.findings.filter((f) => f.session === 'other')).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it("checks the chains after a head record that cannot be parsed, and names no rollback where a session's head stands", async () => {
    // `a` sorts before `b`: the walk of the heads stops at h!a. Session b's owner record names another principal (who
    // could then read it): fsck named b "entries exist, but no head names them" instead, and never walked its chain.
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a' });
    await ledger.publish({ ...scope, session: 'a' }, sampleSummary(1));
    await ledger.publish({ ...scope, session: 'b' }, sampleSummary(2));
    await ledger.publish({ ...scope, session: 'c' }, sampleSummary(3));
    await ledger.close();
    await tamper(root, async (db) => {
      await db.put('h!a', '{"session');
      for (const session of ['b', 'c']) {
        const head = JSON.parse((await db.get(`h!${session}`))!);
        await db.put(`h!${session}`, JSON.stringify({ ...head, owner: 'mallory' }));
      }
      // c's watermark above its head: the head check names c (ROLLBACK), and its chain is still walked.
      await db.put('w!c', '5');
    });
    const diagnosing = await openLedger({ root, host: 'host-a', diagnose: true });
    try {
      const report = await fsck(diagnosing);
      expect(report.findings.filter((f) => f.session === 'b')).toEqual([
        {
          code: 'OWNER_MISMATCH',
          session: 'b',
          seq: 0,
          message: 'the chain head names owner mallory; seq 0 was signed for alice',
        },
      ]);
      expect(report.findings.filter((f) => f.session === 'c').map((f) => f.code)).toEqual([
        'ROLLBACK',
        'OWNER_MISMATCH',
      ]);
      expect(report.findings.filter((f) => f.code === 'ROLLBACK').map((f) => f.session)).toEqual(['c']);
      // The damaged head record is one finding, with its session: the head check, the heads' walk, the lookup of the
      // sessions after it and the session-heads check each stop at it (it was named three times).
      expect(report.findings.filter((f) => f.code === 'RECORD_CORRUPT')).toEqual([
        { code: 'RECORD_CORRUPT', session: 'a', message: 'manifest log record h!a is corrupt: not JSON' },
      ]);
      expect(report.chains).toBe(2);
      expect(report.manifests).toBe(2);
    } finally {
      await diagnosing.close();
    }
  });

  it('reports a rolled-back head at open too, with the same code (the log head check)', async () => {
    const { root, entries } = await storeWithChain();
    await tamper(root, (db) => db.put('h!s', headOf(entries[1]!)));
    const ledger = await openLedger({ root, host: 'host-a' });
    expect(ledger.recovery.headProblems).toEqual([
      { session: 's', code: 'ROLLBACK', problem: 'head is at seq 1, but seq 2 was already verified' },
      { session: 's', code: 'ROLLBACK', problem: 'entries exist beyond head seq 1' },
    ]);
    await ledger.close();
  });

  it("reports time running backwards with the auditor's code, while history still returns the chain", async () => {
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const root = tempDir();
    const first = await openLedger({ root, host: 'host-a', clock: () => new Date(now) });
    now += 1_800_000;
    await first.publish(scope, sampleSummary(1));
    await first.close();
    // A key never signs a createdAt before the last one it signed (the log keeps it, across restarts); a second
    // key of the host (an injected signer, listed from its first use) on a clock set back does.
    now -= 1_200_000;
    const ledger = await openLedger({
      root,
      host: 'host-a',
      clock: () => new Date(now),
      signer: new LocalSigner(generateJwk()),
    });
    await ledger.publish(scope, sampleSummary(2));
    expect((await ledger.history(scope)).map((h) => h.manifest.seq)).toEqual([0, 1]);
    const report = await fsck(ledger);
    expect(report.findings).toEqual([expect.objectContaining({ code: 'TIME_REVERSED', session: 's', seq: 1 })]);
    const lines: string[] = [];
    for await (const e of ledger.log.entries()) lines.push(e.envelope);
    const audit = await verifyChain(lines, { trust: ledger.trustStore() });
    expect(audit.findings.map((f) => [f.code, f.seq])).toEqual([['TIME_REVERSED', 1]]);
    await ledger.close();
  });

  it('reports a signed manifest whose blob is not a summary as SUMMARY_INVALID, as resume refuses it', async () => {
    const signer = new LocalSigner(generateJwk());
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', signer });
    const first = await ledger.publish(scope, sampleSummary());
    const blob = await ledger.blobs.put(new TextEncoder().encode('{"not":"a summary"}'));
    const manifest: Manifest = {
      v: 1,
      kind: 'compaction',
      host: 'host-a',
      principal: 'alice',
      session: 's',
      run: 'r',
      seq: 1,
      prev: first.id,
      summary: { digest: blob.digest, size: blob.size, mediaType: SUMMARY_MEDIA_TYPE },
      createdAt: new Date().toISOString(),
      keyId: signer.keyId,
    };
    const payload = encodeManifest(manifest);
    const envelope = serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, signer));
    await ledger.log.append({
      session: 's',
      principal: 'alice',
      seq: 1,
      prev: first.id,
      id: manifestId(payload),
      envelope,
      // As the ledger appends: the key's record follows its newest manifest (fsck checks that too).
      signed: { keyId: signer.keyId, createdAt: manifest.createdAt },
    });
    expect(await rejection(ledger.resume(scope))).toMatchObject({ code: 'SUMMARY_INVALID' });
    const report = await fsck(ledger);
    expect(report.findings).toEqual([expect.objectContaining({ code: 'SUMMARY_INVALID', session: 's', seq: 1 })]);
    await ledger.close();
  });

  it('is clean for a store that resume and the auditor accept', async () => {
    const { root } = await storeWithChain();
    const ledger: Ledger = await openLedger({ root, host: 'host-a' });
    expect(await fsck(ledger)).toMatchObject({ ok: true, chains: 2, manifests: 4, blobsChecked: 4, findings: [] });
    expect((await ledger.resume(scope))?.seq).toBe(2);
    await ledger.close();
  });
});

describe('fsck and gc as operations of the ledger', () => {
  it('fsck answers an abort with CANCELLED (before and during its walk), a non-signal with INVALID_ARGUMENT', async () => {
    const { root } = await storeWithChain();
    const ledger = await openLedger({ root, host: 'host-a' });
    expect(await rejection(fsck(ledger, { signal: AbortSignal.abort() }))).toMatchObject({
      name: 'LedgerError',
      code: 'CANCELLED',
    });
    // Aborted at the first signature the walk checks.
    const during = new AbortController();
    const verifier = ledger.verifier as { verify: typeof ledger.verifier.verify };
    const verify = verifier.verify;
    verifier.verify = (...args) => {
      during.abort();
      return verify.apply(ledger.verifier, args);
    };
    try {
      expect(await rejection(fsck(ledger, { signal: during.signal }))).toMatchObject({
        name: 'LedgerError',
        code: 'CANCELLED',
      });
    } finally {
      verifier.verify = verify;
    }
    const notASignal = { aborted: false } as unknown as AbortSignal;
    expect(await rejection(fsck(ledger, { signal: notASignal }))).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((await fsck(ledger, null as unknown as undefined)).ok).toBe(true);
    await ledger.close();
  });

  it('fsck and gc of a closed ledger are CLOSED; close() waits for an fsck, gc or export admitted before it, which completes', async () => {
    const { root } = await storeWithChain();
    let ledger = await openLedger({ root, host: 'host-a' });
    await ledger.close();
    expect(await rejection(fsck(ledger))).toMatchObject({ name: 'LedgerError', code: 'CLOSED' });
    expect(await rejection(gc(ledger, { graceMs: 0 }))).toMatchObject({ name: 'LedgerError', code: 'CLOSED' });
    ledger = await openLedger({ root, host: 'host-a' });
    const checking = fsck(ledger).then(
      (report) => report.ok,
      (err: { code?: string }) => err.code,
    );
    const collecting = gc(ledger, { graceMs: 0 }).then(
      (report) => report.removed.length,
      (err: { code?: string }) => err.code,
    );
    const exporting = exportBundle(ledger, { out: join(tempDir(), 'bundle') }).then(
      (r) => r.header.counts.manifests,
      (err: { code?: string }) => err.code,
    );
    await ledger.close();
    // Admitted before the close began (each was called first): each completes, close() waiting for it, though each
    // asks the ledger for more on its way (the trust file, a checkpoint) after the close began.
    expect(await checking).toBe(true);
    expect(await collecting).toBe(0);
    expect(await exporting).toBe(4);
  });
});

describe('fsck, the store-only codes', () => {
  it('reports an entry stored under another seq than its manifest names as SEQ_MISMATCH (its head: HEAD_MISMATCH)', async () => {
    const { root, entries } = await storeWithChain();
    // Seq 1's entry (its envelope and id) at the key of seq 2, which the head still names with seq 2's id.
    await tamper(root, (db) =>
      db.put(entryKey('s', 2), JSON.stringify({ ...entries[2]!, envelope: entries[1]!.envelope, id: entries[1]!.id })),
    );
    const ledger = await openLedger({ root, host: 'host-a' });
    try {
      expect(await rejection(ledger.resume(scope))).toMatchObject({ code: 'CHAIN_BROKEN' });
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'SEQ_MISMATCH', session: 's' }));
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'HEAD_MISMATCH', session: 's' }));
      expect(report.findings.filter((f) => f.session === 'other')).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it('reports a summary blob that cannot be read (a directory at its path) as BLOB_UNREADABLE, unless blobs are skipped', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0 });
    const receipts = [];
    for (let i = 0; i < 3; i++) receipts.push(await ledger.publish(scope, sampleSummary(i)));
    await ledger.close();
    const hex = receipts[1]!.digest.slice('blake3:'.length);
    const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    rmSync(file);
    mkdirSync(file);
    ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0 });
    try {
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual([expect.objectContaining({ code: 'BLOB_UNREADABLE', session: 's', seq: 1 })]);
      expect(report.findings[0]!.message).toContain(receipts[1]!.digest);
      expect(await fsck(ledger, { checkBlobs: false })).toMatchObject({ ok: true, blobsChecked: 0, findings: [] });
    } finally {
      await ledger.close();
    }
  });

  it('reports blobs behind a symlinked shard directory once each (BLOB_UNREADABLE) and goes on: referenced and orphan', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0 });
    const named = await ledger.publish(scope, sampleSummary('named'));
    const orphan = await ledger.blobs.put(new TextEncoder().encode('an orphan blob'));
    await ledger.close();
    // Each blob's second-level shard directory replaced by a link to a copy of it (a planted symlink).
    for (const digest of [named.digest, orphan.digest]) {
      const hex = digest.slice('blake3:'.length);
      const shard = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4));
      const copy = join(tempDir(), 'copy');
      cpSync(shard, copy, { recursive: true });
      rmSync(shard, { recursive: true });
      symlinkSync(copy, shard);
    }
    ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0 });
    try {
      const report = await fsck(ledger);
      expect(report.findings).toEqual([
        expect.objectContaining({ code: 'BLOB_UNREADABLE', session: 's', seq: 0 }),
        expect.objectContaining({ code: 'BLOB_UNREADABLE', message: expect.stringContaining(orphan.digest) }),
      ]);
      expect(report.findings[1]).not.toHaveProperty('session');
    } finally {
      await ledger.close();
    }
  });

  it('reports a shard directory of the blob store it cannot read (BLOB_UNREADABLE), and gc refuses rather than skip it', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0 });
    const orphan = await ledger.blobs.put(new TextEncoder().encode('an orphan blob'));
    await ledger.close();
    const hex = orphan.digest.slice('blake3:'.length);
    const unreadable = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4));
    const fs: FsOps = {
      ...nodeFsOps,
      readdir: (path) =>
        path === unreadable
          ? Promise.reject(Object.assign(new Error(`EIO: i/o error, scandir '${path}'`), { code: 'EIO' }))
          : nodeFsOps.readdir(path),
    };
    ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0, fs });
    try {
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual([
        expect.objectContaining({ code: 'BLOB_UNREADABLE', message: expect.stringContaining('EIO') }),
      ]);
      await expect(gc(ledger, { graceMs: 0 })).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
    } finally {
      await ledger.close();
    }
  });

  it('reports a listing of the blob store that fails part way (BLOB_UNREADABLE) and keeps what it found before', async () => {
    const listed = ['blake3:' + 'a'.repeat(64), 'blake3:' + 'b'.repeat(64)];
    const store = {
      async *list() {
        yield listed[0]!;
        throw new StoreError('STORAGE_FAILED', 'blob store: list failed: EIO');
      },
      async stat(digest: string) {
        return { digest, size: 1, storedAtMs: digest === listed[0] ? Infinity : 0 };
      },
    } as unknown as BlobStore;
    expect(await fsckBlobTimes(store, new Set())).toEqual([
      expect.objectContaining({ code: 'RECORD_CORRUPT', message: expect.stringContaining(listed[0]!) }),
      { code: 'BLOB_UNREADABLE', message: "the blob store's listing stopped: blob store: list failed: EIO" },
    ]);
  });

  it('reports a grant record that cannot be parsed as RECORD_CORRUPT (the principal it names is refused by it)', async () => {
    const { root } = await storeWithChain();
    const ledger = await openLedger({ root, host: 'host-a' });
    await ledger.grant('bob', 's');
    await ledger.close();
    await tamper(root, (db) => db.put('g!bob!s', '{'));
    const reopened = await openLedger({ root, host: 'host-a' });
    try {
      // What the damage does: bob's resume is refused by the record fsck must name.
      await expect(reopened.resume({ principal: 'bob', session: 's' })).rejects.toMatchObject({
        code: 'RECORD_CORRUPT',
      });
      const report = await fsck(reopened);
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual([
        expect.objectContaining({ code: 'RECORD_CORRUPT', message: expect.stringContaining('g!bob!s') }),
      ]);
    } finally {
      await reopened.close();
    }
  });

  it('reports a missing Merkle tree node as a TREE_DAMAGED finding (not only on append and open)', async () => {
    const { root } = await storeWithChain();
    // Leaf 0's node: four leaves, so the tree's right edge (what open reads) does not need it.
    await tamper(root, (db) => db.del('n!00!0000000000000000'));
    const ledger = await openLedger({ root, host: 'host-a' });
    try {
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual([expect.objectContaining({ code: 'TREE_DAMAGED' })]);
      expect(report.findings[0]!.message).toMatch(/0\/0/);
    } finally {
      await ledger.close();
    }
  });

  for (const [damage, change, named] of [
    ['missing', (db: Level<string, string>) => db.del('n!02!0000000000000000'), 'tree node 2/0'],
    [
      'malformed',
      (db: Level<string, string>) => db.put('n!02!0000000000000000', 'not a node'),
      'n!02!0000000000000000',
    ],
  ] as const)
    it(`opens a store whose node on the tree's right edge (what a checkpoint is folded from) is ${damage} for fsck (diagnose), which names it; appends and checks stay refused`, async () => {
      const { root } = await storeWithChain();
      // Four leaves: the tree's right edge is the one node at level 2.
      await tamper(root, change);
      const plain = await rejection(openLedger({ root, host: 'host-a' }));
      expect(['TREE_DAMAGED', 'RECORD_CORRUPT']).toContain(plain.code);
      const ledger = await openLedger({ root, host: 'host-a', diagnose: true });
      try {
        const report = await fsck(ledger);
        expect(report.ok).toBe(false);
        // Named once, though the tree's check and the session-heads index's both meet it.
        expect(report.findings).toEqual([
          expect.objectContaining({ code: plain.code, message: expect.stringContaining(named) }),
        ]);
        expect(await rejection(ledger.publish(scope, sampleSummary('next')))).toMatchObject({ code: plain.code });
        expect(await rejection(ledger.resume(scope))).toMatchObject({ code: plain.code });
        // Nothing else writes past it either: grants, revocations, keys (the open without diagnose refused them all).
        expect(await rejection(ledger.grant('bob', 's'))).toMatchObject({ code: plain.code });
        expect(await rejection(ledger.revoke('alice', 's'))).toMatchObject({ code: plain.code });
        expect(await rejection(ledger.rotateKey())).toMatchObject({ code: plain.code });
        expect(await rejection(ledger.checkPublish(scope))).toMatchObject({ code: plain.code });
      } finally {
        await ledger.close();
      }
    });

  it('reports a tree with fewer leaves than the log has entries as TREE_SIZE', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    try {
      for (let i = 0; i < 2; i++) await ledger.publish(scope, sampleSummary(i));
      // Behind the ledger's back, in this process (a closed store: the test below): the tree has one leaf.
      await (ledger.log as LevelManifestLog).raw.put('n!size', '1');
      (ledger.log as unknown as { treeSize: number }).treeSize = 1;
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'TREE_SIZE' }));
    } finally {
      await ledger.close();
    }
  });

  it('reports a tree whose size record was lowered in a closed store as TREE_SIZE: open does not grow it back', async () => {
    const { root } = await storeWithChain();
    await tamper(root, (db) => db.put('n!size', '2'));
    // The pinned checkpoint has 4 leaves: the open refuses, and fsck's diagnosing open names the damage.
    expect(await rejection(openLedger({ root, host: 'host-a' }))).toMatchObject({ code: 'ROLLBACK' });
    const ledger = await openLedger({ root, host: 'host-a', diagnose: true });
    try {
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(
        expect.objectContaining({ code: 'TREE_SIZE', message: 'the tree has 2 leaves, the log 4 entries' }),
      );
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'PIN_MISMATCH' }));
    } finally {
      await ledger.close();
    }
    await tamper(root, async (db) => expect(await db.get('n!size')).toBe('2'));
  });

  it('reports a tree with more leaves than the log has entries as TREE_SIZE, and appends are refused (TREE_DAMAGED)', async () => {
    const { root, entries } = await storeWithChain();
    // The newest entry removed under the tree (its head moved back along): the tree still has its leaf.
    await tamper(root, (db) =>
      db.batch([
        { type: 'del', key: entryKey('s', 2) },
        { type: 'del', key: posKey(entries[2]!.position) },
        { type: 'put', key: 'h!s', value: headOf(entries[1]!) },
      ]),
    );
    const ledger = await openLedger({ root, host: 'host-a' });
    try {
      const report = await fsck(ledger);
      expect(report.findings).toContainEqual(
        expect.objectContaining({ code: 'TREE_SIZE', message: 'the tree has 4 leaves, the log 3 entries' }),
      );
      expect(await rejection(ledger.publish({ ...scope, session: 'other' }, sampleSummary('next')))).toMatchObject({
        code: 'TREE_DAMAGED',
      });
    } finally {
      await ledger.close();
    }
  });
});

/** A well-formed id no stored entry has. */
function entriesId(salt: string) {
  return `blake3:${Buffer.from(salt.padEnd(32, salt)).toString('hex').slice(0, 64)}` as const;
}
