import { describe, expect, it, vi } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { digestHex, hashBytes, nobleBlake3, type Digest } from '../store/hash/digest.js';
import { decodeSummary, STREAM_DECODE_FROM, STREAM_SUMMARY_FROM, validateSummary } from '../src/summary/summary.js';
import { storedSummaryProblem } from '../manifests/format/summary.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { encodeManifest } from '../manifests/format/manifest.js';
import { decodeBase64, encodeBase64 } from '../manifests/encoding/base64.js';
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { KeyedMutex } from '../src/ledger/locks.js';
import { nobleVerifier } from '../manifests/crypto/ed25519.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { ENDS_AT_SIGNAL_MS, firstCall, settledWithin } from './support/settled.js';
import { entryKey, plantHead, SUMMARY_MEDIA_TYPE } from './support/plant.js';

const alice = { principal: 'alice', session: 'sess-1', run: 'run-1' };

async function open(root: string, extra: Partial<Parameters<typeof openLedger>[0]> = {}): Promise<Ledger> {
  return openLedger({ root, host: 'host-a', ...extra });
}

function blobPath(root: string, digest: string): string {
  const hex = digestHex(digest);
  return join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
}

function raw(ledger: Ledger) {
  return (ledger.log as LevelManifestLog).raw;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/**
 * Behind the ledger's back, makes a manifest signed by `signer` the head of alice's sess-1 at seq 1, after
 * the publish `r`: its summary size may be misstated, its payload bytes rewritten after encoding.
 */
function plantSeq1(
  ledger: Ledger,
  r: { id: Digest; digest: Digest; size: number },
  signer: LocalSigner,
  o: { size?: number; rewrite?: (payload: Uint8Array) => Uint8Array } = {},
): Promise<void> {
  const summary = { digest: r.digest, size: o.size ?? r.size, mediaType: SUMMARY_MEDIA_TYPE };
  return plantHead(ledger, signer, { seq: 1, prev: r.id, summary, rewrite: o.rewrite });
}

describe('publish and resume', () => {
  it('round-trips a summary and returns a receipt that names the manifest, seq and blob', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const receipt = await ledger.publish(alice, sampleSummary());
    expect(receipt.seq).toBe(0);
    expect(receipt.id).toMatch(/^blake3:[0-9a-f]{64}$/);
    const resumed = await ledger.resume(alice);
    expect(resumed?.summary).toEqual(sampleSummary());
    expect(resumed?.id).toBe(receipt.id);
    expect(resumed?.manifest).toMatchObject({
      host: 'host-a',
      principal: 'alice',
      session: 'sess-1',
      run: 'run-1',
      seq: 0,
      prev: null,
    });
    await ledger.close();
  });

  it('returns undefined for a session with no compaction', async () => {
    const ledger = await open(tempDir());
    expect(await ledger.resume({ principal: 'alice', session: 'nothing-yet' })).toBeUndefined();
    await ledger.close();
  });

  it('survives close and reopen', async () => {
    const root = tempDir();
    let ledger = await open(root);
    const receipt = await ledger.publish(alice, sampleSummary('before restart'));
    await ledger.close();
    ledger = await open(root);
    const resumed = await ledger.resume(alice);
    expect(resumed?.summary.task).toContain('before restart');
    expect(resumed?.id).toBe(receipt.id);
    const next = await ledger.publish(alice, sampleSummary('after restart'));
    expect(next.seq).toBe(1);
    expect((await ledger.history(alice))[1]?.manifest.prev).toBe(receipt.id);
    await ledger.close();
  });

  it('links 100 sequential publishes as seq 0..99 by prev', async () => {
    const ledger = await open(tempDir());
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await ledger.publish(alice, sampleSummary(i))).id);
    const history = await ledger.history(alice);
    expect(history.map((h) => h.manifest.seq)).toEqual([...Array(100).keys()]);
    history.forEach((h, i) => {
      expect(h.id).toBe(ids[i]);
      expect(h.manifest.prev).toBe(i === 0 ? null : ids[i - 1]);
    });
    expect((await ledger.resume(alice))?.summary.task).toContain('(99)');
    await ledger.close();
  });

  it('stores the canonical summary bytes under their digest, blob files 0600', async () => {
    const root = tempDir();
    const ledger = await open(root, { inlineSummaryBytes: 0 }); // a file, whatever the size
    const r = await ledger.publish(alice, { nextSteps: ['b'], state: 's', task: 't' });
    const path = blobPath(root, r.digest);
    expect(readFileSync(path, 'utf8')).toBe('{"nextSteps":["b"],"state":"s","task":"t"}');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(root).mode & 0o777).toBe(0o700);
    await ledger.close();
  });

  it('refuses a stale expectedPrev with CHAIN_CONFLICT and appends nothing', async () => {
    const ledger = await open(tempDir());
    const first = await ledger.publish(alice, sampleSummary(1), { expectedPrev: null });
    await ledger.publish(alice, sampleSummary(2), { expectedPrev: first.id });
    await expect(ledger.publish(alice, sampleSummary(3), { expectedPrev: first.id })).rejects.toMatchObject({
      code: 'CHAIN_CONFLICT',
    });
    await expect(ledger.publish(alice, sampleSummary(3), { expectedPrev: null })).rejects.toMatchObject({
      code: 'CHAIN_CONFLICT',
    });
    expect((await ledger.history(alice)).length).toBe(2);
    await ledger.close();
  });

  it('refuses a stale expectedPrev before it stores the summary: no blob is left for gc to collect', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const first = await ledger.publish(alice, sampleSummary(1), { expectedPrev: null });
      const blobs = async () => {
        const out: string[] = [];
        for await (const digest of ledger.blobs.list()) out.push(digest);
        return out;
      };
      const before = await blobs();
      for (const expectedPrev of [null, `blake3:${'0'.repeat(64)}` as const])
        await expect(ledger.publish(alice, sampleSummary(2), { expectedPrev })).rejects.toMatchObject({
          code: 'CHAIN_CONFLICT',
        });
      expect(await blobs()).toEqual(before);
      expect((await ledger.resume(alice))?.id).toBe(first.id);
    } finally {
      await ledger.close();
    }
  });

  // It said only "the head moved (expected X)": neither the head found nor what a Harness does about it.
  it('says in its CHAIN_CONFLICT which head it found and what to do (publish, checkPublish and compact alike)', async () => {
    const { compact } = await import('../src/compaction/compact.js');
    const ledger = await open(tempDir());
    try {
      const stale = async (expectedPrev: Digest | null, head: string) => {
        const message =
          `session sess-1: the head moved (expected ${expectedPrev ?? 'an empty chain'}, found ${head}): another run ` +
          'published in it since; resume the session and go on from its head (the next expectedPrev is the id resume ' +
          'returns)';
        await expect(ledger.publish(alice, sampleSummary(9), { expectedPrev })).rejects.toMatchObject({
          code: 'CHAIN_CONFLICT',
          message,
        });
        await expect(ledger.checkPublish(alice, { expectedPrev })).rejects.toMatchObject({
          code: 'CHAIN_CONFLICT',
          message,
        });
        const model = vi.fn();
        await expect(
          compact({ ledger, scope: alice, model, transcript: [{ role: 'user', content: 'hi' }], expectedPrev }),
        ).rejects.toMatchObject({
          code: 'CHAIN_CONFLICT',
          message,
        });
        expect(model).not.toHaveBeenCalled();
      };
      await stale(`blake3:${'0'.repeat(64)}`, 'an empty chain');
      const first = await ledger.publish(alice, sampleSummary(1));
      await stale(null, `${first.id} at seq 0`);
      const second = await ledger.publish(alice, sampleSummary(2));
      await stale(first.id, `${second.id} at seq 1`);
      // What the message says to do works: resume, and build on the id it returns.
      const resumed = await ledger.resume(alice);
      await expect(ledger.publish(alice, sampleSummary(3), { expectedPrev: resumed!.id })).resolves.toMatchObject({
        seq: 2,
      });
    } finally {
      await ledger.close();
    }
  });

  it('refuses an expectedPrev that is neither null nor a manifest id with INVALID_ARGUMENT, not "the head moved"', async () => {
    const ledger = await open(tempDir());
    const first = await ledger.publish(alice, sampleSummary(1));
    for (const prev of ['nul', 42, {}, first.id.toUpperCase(), first.id.slice(7), ''])
      await expect(
        ledger.publish(alice, sampleSummary(2), { expectedPrev: prev as never }),
        JSON.stringify(prev),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^expectedPrev: /) });
    expect((await ledger.history(alice)).length).toBe(1);
    await ledger.close();
  });

  it('refuses an unknown signature verifier at open, and verifies with each named one', async () => {
    for (const verifier of ['nobel', 'NODE', 1])
      await expect(open(tempDir(), { verifier: verifier as never }), String(verifier)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^verifier: auto, node or noble/),
      });
    for (const verifier of ['auto', 'node', 'noble'] as const) {
      const root = tempDir();
      let ledger = await open(root, { verifier });
      await ledger.publish(alice, sampleSummary(1));
      await ledger.close();
      // A fresh ledger has verified nothing yet: resume checks the stored manifest with the verifier named.
      ledger = await open(root, { verifier });
      expect((await ledger.resume(alice))?.seq, verifier).toBe(0);
      await ledger.close();
    }
  });
});

describe('openLedger options and trust', () => {
  it("verifier: 'noble' publishes and resumes, and its answer is the one that counts", async () => {
    const root = tempDir();
    let ledger = await open(root, { verifier: 'noble' });
    expect(ledger.verifier).toBe(nobleVerifier);
    const first = await ledger.publish(alice, sampleSummary(1));
    await ledger.publish(alice, sampleSummary(2), { expectedPrev: first.id });
    await ledger.close();
    ledger = await open(root, { verifier: 'noble' });
    const verify = vi.spyOn(nobleVerifier, 'verify');
    try {
      // A fresh ledger verifies what it reads: with noble saying no, the chain is refused.
      verify.mockReturnValue(false);
      await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
      verify.mockRestore();
      const spy = vi.spyOn(nobleVerifier, 'verify');
      const resumed = await ledger.resume(alice);
      expect(resumed?.summary).toEqual(sampleSummary(2));
      expect((await ledger.history(alice)).map((h) => h.manifest.seq)).toEqual([0, 1]);
      expect(spy).toHaveBeenCalled();
      expect((await ledger.publish(alice, sampleSummary(3))).seq).toBe(2);
    } finally {
      vi.restoreAllMocks();
      await ledger.close();
    }
  });

  it("storeTrust() is this root's trust.json alone, re-read; trustStore() adds the trust option", async () => {
    const otherLedger = await open(tempDir(), { host: 'host-b' });
    const other = otherLedger.trustStore();
    await otherLedger.close();
    const root = tempDir();
    const ledger = await open(root, { trust: other });
    try {
      const onDisk = () => JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as { keys: unknown[] };
      expect(await ledger.storeTrust()).toEqual(onDisk());
      expect((await ledger.storeTrust()).keys.map((k) => k.host)).toEqual(['host-a']);
      expect(
        ledger
          .trustStore()
          .keys.map((k) => k.host)
          .sort(),
      ).toEqual(['host-a', 'host-b']);
      // A change to trust.json behind this ledger (another process sharing the root) is seen at the next call.
      const file = join(root, 'trust.json');
      const changed = { ...onDisk(), keys: [...onDisk().keys, ...other.keys] };
      writeFileSync(file, `${JSON.stringify(changed, null, 2)}\n`);
      expect(await ledger.storeTrust()).toEqual(changed);
      expect((await ledger.storeTrust()).keys.map((k) => k.host)).toEqual(['host-a', 'host-b']);
      // A copy: changing what it returns changes nothing the ledger holds.
      const copy = await ledger.storeTrust();
      copy.keys.length = 0;
      expect((await ledger.storeTrust()).keys).toHaveLength(2);
    } finally {
      await ledger.close();
    }
  });
});

describe('summary validation', () => {
  it.each([
    ['SUMMARY_EMPTY', undefined],
    ['SUMMARY_EMPTY', ''],
    ['SUMMARY_EMPTY', { task: '  ', state: '\n', nextSteps: [] }],
    ['SUMMARY_INVALID', { task: 't', state: 's' }],
    ['SUMMARY_INVALID', { task: 't', state: 's', nextSteps: [], extra: 'x' }],
    ['SUMMARY_INVALID', { task: 't\ud800', state: 's', nextSteps: [] }],
    ['SUMMARY_INVALID', { task: 't', state: 's', nextSteps: [], files: [{ path: '../etc/passwd' }] }],
    ['SUMMARY_INVALID', { task: 't', state: 's', nextSteps: [], files: [{ path: '/abs' }] }],
    ['SUMMARY_INVALID', 'Error: model overloaded'],
    ['SUMMARY_INCOMPLETE', { task: 't', state: 's', nextSteps: [], incomplete: true }],
    ['SUMMARY_TOO_LARGE', { task: 'x'.repeat(2 * 1024 * 1024), state: 's', nextSteps: [] }],
  ])('refuses with %s and publishes nothing (%#)', async (code, summary) => {
    const ledger = await open(tempDir());
    await ledger.publish(alice, sampleSummary('kept'));
    await expect(ledger.publish(alice, summary)).rejects.toMatchObject({ name: 'LedgerError', code });
    expect((await ledger.resume(alice))?.summary.task).toContain('kept');
    expect((await ledger.history(alice)).length).toBe(1);
    await ledger.close();
  });

  it('says SUMMARY_TOO_LARGE only of size: too many items or a line, path or label over its bound is SUMMARY_INVALID', () => {
    const code = (v: unknown) => {
      try {
        validateSummary(v);
      } catch (err) {
        return (err as { code?: string }).code;
      }
      return 'accepted';
    };
    const base = { task: 't', state: 's', nextSteps: ['a'] };
    expect(code({ ...base, nextSteps: Array<string>(1001).fill('a') })).toBe('SUMMARY_INVALID');
    expect(code({ ...base, nextSteps: ['a'.repeat(64 * 1024 + 1)] })).toBe('SUMMARY_INVALID');
    expect(code({ ...base, files: [{ path: 'p'.repeat(4097) }] })).toBe('SUMMARY_INVALID');
    // The first issue is a type error: the code says what the message says.
    expect(code({ ...base, task: 5, nextSteps: Array<string>(1001).fill('a') })).toBe('SUMMARY_INVALID');
    // A text over the whole-text bound is a size, whatever maxSummaryBytes allows.
    expect(() => validateSummary({ ...base, state: 's'.repeat(64 * 1024 * 1024 + 1) }, 2 ** 40)).toThrow(
      expect.objectContaining({ code: 'SUMMARY_TOO_LARGE' }),
    );
  });

  it('refuses stored bytes that start with a byte order mark, as the streamed decoder and the auditor do', () => {
    const bytes = validateSummary(sampleSummary()).bytes;
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...bytes]);
    expect(decodeSummary(bytes)).toEqual(sampleSummary());
    expect(() => decodeSummary(withBom)).toThrow(expect.objectContaining({ code: 'SUMMARY_INVALID' }));
    expect(storedSummaryProblem(withBom)).toMatch(/^SUMMARY_INVALID/);
    expect(storedSummaryProblem(bytes)).toBeUndefined();
  });

  it('takes null options as none (JavaScript callers)', async () => {
    const ledger = await open(tempDir());
    const { id } = await ledger.publish(alice, sampleSummary(), null as never);
    expect((await ledger.resume(alice, null as never))?.id).toBe(id);
    expect(await ledger.history(alice, null as never)).toHaveLength(1);
    expect((await ledger.grant('bob', alice.session, null as never)).state).toBe('granted');
    expect((await ledger.revoke('bob', alice.session, null as never)).state).toBe('revoked');
    expect(await ledger.grants(null as never)).toHaveLength(1);
    expect((await ledger.inclusionProof(id, null as never)).leafIndex).toBe(0);
    expect((await ledger.consistencyProof(1, null as never)).oldSize).toBe(1);
    await ledger.close();
  });

  it('refuses a maxBytes bound that is not a non-negative integer in validateSummary too', () => {
    for (const bound of [Number.NaN, Number.POSITIVE_INFINITY, -1, 1.5])
      expect(() => validateSummary(sampleSummary(), bound), String(bound)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
  });

  it('honours a configured maxSummaryBytes', async () => {
    const ledger = await open(tempDir(), { maxSummaryBytes: 200 });
    await expect(ledger.publish(alice, { ...sampleSummary(), notes: 'n'.repeat(300) })).rejects.toMatchObject({
      code: 'SUMMARY_TOO_LARGE',
    });
    await ledger.close();
  });
});

describe('ids', () => {
  it.each([
    '../x',
    'a/b',
    '',
    'x'.repeat(129),
    'a\0b',
    'аlice' /* Cyrillic а */,
    '-lead',
    'a b',
    '.',
    '..',
    'a\\b',
    'ａ',
  ])('refuses %j with INVALID_ID and creates no file outside the root', async (bad) => {
    const parent = tempDir();
    const root = join(parent, 'store');
    const ledger = await open(root);
    const before = readdirSync(parent);
    for (const scope of [
      { ...alice, principal: bad },
      { ...alice, session: bad },
      { ...alice, run: bad },
    ]) {
      await expect(ledger.publish(scope, sampleSummary())).rejects.toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ID',
      });
    }
    await expect(ledger.resume({ principal: 'alice', session: bad })).rejects.toMatchObject({ code: 'INVALID_ID' });
    expect(readdirSync(parent)).toEqual(before);
    await ledger.close();
  });

  it('refuses an invalid host id at open', async () => {
    await expect(openLedger({ root: tempDir(), host: '../evil' })).rejects.toMatchObject({ code: 'INVALID_ID' });
  });
});

describe('tampering is refused and returns no summary bytes', () => {
  it('a flipped byte in a stored blob file → BLOB_INTEGRITY', async () => {
    const root = tempDir();
    const ledger = await open(root, { inlineSummaryBytes: 0 }); // a file, whatever the size
    const r = await ledger.publish(alice, sampleSummary());
    const path = blobPath(root, r.digest);
    const bytes = readFileSync(path);
    bytes[10]! ^= 0x01;
    writeFileSync(path, bytes);
    await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'StoreError', code: 'BLOB_INTEGRITY' });
    await ledger.close();
  });

  it('a deleted blob → BLOB_NOT_FOUND', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const r = await ledger.publish(alice, sampleSummary());
    await ledger.blobs.delete(r.digest);
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'BLOB_NOT_FOUND' });
    await ledger.close();
  });

  it('an edited manifest entry in the database → SIGNATURE_INVALID', async () => {
    const ledger = await open(tempDir());
    await ledger.publish(alice, sampleSummary());
    const db = raw(ledger);
    const entry = JSON.parse((await db.get(entryKey('sess-1', 0)))!);
    const env = JSON.parse(entry.envelope);
    const manifest = JSON.parse(new TextDecoder().decode(decodeBase64(env.payload)!));
    manifest.run = 'run-forged';
    env.payload = encodeBase64(encodeManifest(manifest));
    entry.envelope = JSON.stringify(env);
    await db.put(entryKey('sess-1', 0), JSON.stringify(entry));
    await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'ManifestError', code: 'SIGNATURE_INVALID' });
    await expect(ledger.history(alice)).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
    await ledger.close();
  });

  it('a manifest entry whose payload type was changed in the database → PAYLOAD_TYPE', async () => {
    const ledger = await open(tempDir());
    await ledger.publish(alice, sampleSummary());
    const db = raw(ledger);
    const entry = JSON.parse((await db.get(entryKey('sess-1', 0)))!);
    const env = JSON.parse(entry.envelope);
    env.payloadType = 'application/vnd.in-toto+json';
    entry.envelope = JSON.stringify(env);
    await db.put(entryKey('sess-1', 0), JSON.stringify(entry));
    await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'ManifestError', code: 'PAYLOAD_TYPE' });
    await expect(ledger.history(alice)).rejects.toMatchObject({ name: 'ManifestError', code: 'PAYLOAD_TYPE' });
    await ledger.close();
  });

  it("a manifest of session A placed at session B's head → SCOPE_MISMATCH", async () => {
    const ledger = await open(tempDir());
    await ledger.publish({ ...alice, session: 'sess-a' }, sampleSummary('A'));
    await ledger.publish({ ...alice, session: 'sess-b' }, sampleSummary('B'));
    const db = raw(ledger);
    // Stored as sess-b's entry (its key and its session field; only the signed payload names sess-a): a record naming
    // another session than its key is RECORD_CORRUPT before the manifest is read.
    const entryA = JSON.parse((await db.get(entryKey('sess-a', 0)))!);
    await db.put(entryKey('sess-b', 0), JSON.stringify({ ...entryA, session: 'sess-b' }));
    const headA = JSON.parse((await db.get('h!sess-a'))!);
    await db.put('h!sess-b', JSON.stringify({ ...headA, session: 'sess-b' }));
    await expect(ledger.resume({ principal: 'alice', session: 'sess-b' })).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'SCOPE_MISMATCH',
    });
    await ledger.close();
  });

  it('a manifest signed by an unknown key → KEY_UNTRUSTED', async () => {
    const ledger = await open(tempDir());
    const r = await ledger.publish(alice, sampleSummary());
    await plantSeq1(ledger, r, new LocalSigner(generateJwk()));
    await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'ManifestError', code: 'KEY_UNTRUSTED' });
    await ledger.close();
  });

  it('a manifest signed by the host key whose payload is not canonical (a duplicate key) → MANIFEST_INVALID', async () => {
    const signer = new LocalSigner(generateJwk());
    const ledger = await open(tempDir(), { signer });
    const r = await ledger.publish(alice, sampleSummary());
    // A reader that keeps the first of two keys sees session "sess-2"; JSON.parse keeps the last.
    await plantSeq1(ledger, r, signer, {
      rewrite: (p) => new TextEncoder().encode(new TextDecoder().decode(p).replace('{', '{"session":"sess-2",')),
    });
    await expect(ledger.resume(alice)).rejects.toMatchObject({
      name: 'ManifestError',
      code: 'MANIFEST_INVALID',
      message: expect.stringMatching(/canonical/),
    });
    await ledger.close();
  });

  it('a head moved back → ROLLBACK, also after a restart', async () => {
    const root = tempDir();
    let ledger = await open(root);
    for (let i = 0; i < 3; i++) await ledger.publish(alice, sampleSummary(i));
    expect((await ledger.resume(alice))?.seq).toBe(2);
    const db = raw(ledger);
    const entry1 = JSON.parse((await db.get(entryKey('sess-1', 1)))!);
    await db.put('h!sess-1', JSON.stringify({ session: 'sess-1', seq: 1, id: entry1.id, owner: 'alice' }));
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'ROLLBACK' });
    await db.del(entryKey('sess-1', 2)); // hide the evidence too
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'ROLLBACK' });
    await ledger.close();
    ledger = await open(root);
    await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'LedgerError', code: 'ROLLBACK' });
    await ledger.close();
  });

  it('publish to a chain cut back → ROLLBACK, and the signed manifests stay (head moved back, or removed)', async () => {
    const root = tempDir();
    let ledger = await open(root);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await ledger.publish(alice, sampleSummary(i))).id);
    await ledger.close();
    for (const cut of ['moved back', 'removed'] as const) {
      const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
      if (cut === 'moved back')
        await log.raw.put('h!sess-1', JSON.stringify({ session: 'sess-1', seq: 0, id: ids[0], owner: 'alice' }));
      else await log.raw.del('h!sess-1');
      await log.close();
      ledger = await open(root);
      await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'LedgerError', code: 'ROLLBACK' });
      // The owner's next compaction is refused, and with no head naming an owner so is anyone else's.
      for (const principal of cut === 'removed' ? ['alice', 'mallory'] : ['alice'])
        await expect(ledger.publish({ ...alice, principal }, sampleSummary('again'))).rejects.toMatchObject({
          name: 'LedgerError',
          code: 'ROLLBACK',
        });
      const stored: string[] = [];
      for (let seq = 0; seq < 3; seq++) stored.push((await ledger.log.entry('sess-1', seq))!.id);
      expect(stored).toEqual(ids);
      expect((await ledger.log.treeHead()).size).toBe(3);
      await ledger.close();
    }
  });

  it('a head whose id does not match its entry → CHAIN_BROKEN', async () => {
    const ledger = await open(tempDir());
    await ledger.publish(alice, sampleSummary(0));
    await ledger.publish(alice, sampleSummary(1));
    const db = raw(ledger);
    const head = JSON.parse((await db.get('h!sess-1'))!);
    await db.put('h!sess-1', JSON.stringify({ ...head, id: 'blake3:' + '0'.repeat(64) }));
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'CHAIN_BROKEN' });
    await ledger.close();
  });
});

describe('failures leave no manifest', () => {
  it('a failed blob write (injected EIO at fsync) leaves the previous head intact', async () => {
    const root = tempDir();
    let fail = false;
    const fs: FsOps = {
      ...nodeFsOps,
      fsync: async (h) => {
        if (fail) throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
        return nodeFsOps.fsync(h);
      },
    };
    const ledger = await open(root, { fs, inlineSummaryBytes: 0 }); // summaries as files, whatever their size
    const first = await ledger.publish(alice, sampleSummary('first'));
    fail = true;
    const err = await ledger.publish(alice, sampleSummary('second')).catch((e) => e);
    expect(err).toMatchObject({ name: 'StoreError', code: 'STORAGE_FAILED' });
    expect(err.cause).toMatchObject({ code: 'EIO' });
    expect((await ledger.resume(alice))?.id).toBe(first.id);
    expect((await ledger.history(alice)).length).toBe(1);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    fail = false;
    expect((await ledger.publish(alice, sampleSummary('retry'))).seq).toBe(1);
    await ledger.close();
  });

  it('a cancelled publish leaves no manifest and no staging file', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const first = await ledger.publish(alice, sampleSummary('first'));
    const ac = new AbortController();
    ac.abort(new Error('user pressed stop'));
    await expect(ledger.publish(alice, sampleSummary('x'), { signal: ac.signal })).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'CANCELLED',
    });
    expect((await ledger.resume(alice))?.id).toBe(first.id);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    await ledger.close();
  });

  it("a publish cancelled while another publish of its chain holds the chain's lock ends at once, nothing written", async () => {
    // The first publish is held in its signature (an injected signer may answer later); the second waits its turn.
    const inner = new LocalSigner(generateJwk());
    let hold: Promise<void> | undefined;
    let held!: () => void;
    const signing = new Promise<void>((r) => (held = r));
    const signer = {
      keyId: inner.keyId,
      publicKey: inner.publicKey,
      sign: async (m: Uint8Array) => {
        if (hold) {
          held();
          await hold;
        }
        return inner.sign(m);
      },
    };
    const ledger = await open(tempDir(), { signer });
    let letGo!: () => void;
    hold = new Promise<void>((r) => (letGo = r));
    const first = ledger.publish(alice, sampleSummary('first'));
    await signing;
    hold = undefined;
    const waiting = firstCall(KeyedMutex.prototype, 'run');
    const ac = new AbortController();
    const second = ledger.publish(alice, sampleSummary('second'), { signal: ac.signal }).catch((e: unknown) => e);
    await waiting.called; // at the chain's lock, which the first holds
    waiting.restore();
    ac.abort(new Error('user pressed stop'));
    // Settled while the first still holds the lock: the wait ended at the abort.
    // The first holds it until letGo(), after this: a wait that ignored the abort would not end (a race against 2 s
    // stood for that, and lost on a loaded machine).
    expect(await settledWithin(second, ENDS_AT_SIGNAL_MS), 'still waiting').toBe('settled');
    expect(await second).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
    letGo();
    expect((await first).seq).toBe(0);
    expect((await ledger.history(alice)).map((h) => h.manifest.seq)).toEqual([0]);
    expect((await ledger.publish(alice, sampleSummary('third'))).seq).toBe(1);
    await ledger.close();
  });
});

describe('large summaries are encoded while they are written', () => {
  const MiB = 1024 * 1024;
  const big = (marker: string, text: string, units: number) => ({
    ...sampleSummary(marker),
    state: text.repeat(Math.ceil(units / text.length)).slice(0, units),
  });

  it('stores exactly the canonical bytes of a summary over the streaming threshold, and resumes it', async () => {
    const root = tempDir();
    const ledger = await open(root, { maxSummaryBytes: 64 * MiB });
    const summary = big('large', 'line "one"\n\tC:\\dir → ok 😀\n', STREAM_SUMMARY_FROM + 12345);
    const bytes = validateSummary(summary, 64 * MiB).bytes;
    const r = await ledger.publish(alice, summary);
    expect(r).toMatchObject({ size: bytes.length, digest: await hashBytes(bytes, nobleBlake3) });
    expect(readFileSync(blobPath(root, r.digest)).equals(Buffer.from(bytes))).toBe(true);
    expect((await ledger.resume(alice))?.summary).toEqual(summary);
    await ledger.close();
  });

  it('resumes a large summary by decoding its chunks as they are read, to the same value', async () => {
    const ledger = await open(tempDir(), { maxSummaryBytes: 64 * MiB });
    const summary = {
      ...big('large', 'prose "quoted" \\ back\n\ttab é 😀 \u0007 ', 3 * MiB),
      files: [{ path: 'src/a.ts', note: 'n "q"' }],
      decisions: ['d\u2028'],
    };
    await ledger.publish(alice, summary);
    const chunks = vi.spyOn(ledger.blobs, 'chunks');
    const get = vi.spyOn(ledger.blobs, 'get');
    expect((await ledger.resume(alice))?.summary).toEqual(summary);
    expect(chunks).toHaveBeenCalledTimes(1);
    expect(get).not.toHaveBeenCalled();
    await ledger.close();
  });

  /** A summary of exactly `bytes` canonical bytes (ASCII state). */
  const ofBytes = (marker: string, bytes: number) => {
    const base = big(marker, 'x', 1);
    const overhead = validateSummary(base, 64 * MiB).bytes.length - 1;
    return big(marker, 'x', bytes - overhead);
  };

  it('decodes a summary of STREAM_DECODE_FROM bytes or more as it is read, one below whole, each to the same value', async () => {
    const ledger = await open(tempDir(), { maxSummaryBytes: 64 * MiB });
    const chunks = vi.spyOn(ledger.blobs, 'chunks');
    const get = vi.spyOn(ledger.blobs, 'get');
    const prose = 'prose "quoted" \\ back\n\ttab é 😀 \u0007 \u2028';
    const cases = [
      ofBytes('below', STREAM_DECODE_FROM - 1),
      ofBytes('at', STREAM_DECODE_FROM),
      { ...big('mixed', prose, 200_000), files: [{ path: 'src/a.ts', note: 'n "q"' }], decisions: ['d\u2028'] },
      big('under a MiB', prose, 300_000),
    ];
    for (const [i, summary] of cases.entries()) {
      const scope = { ...alice, session: `mid-${i}` };
      const r = await ledger.publish(scope, summary);
      chunks.mockClear();
      get.mockClear();
      expect((await ledger.resume(scope))?.summary).toEqual(summary);
      const streamed = r.size >= STREAM_DECODE_FROM;
      expect(streamed).toBe(i > 0);
      expect(chunks).toHaveBeenCalledTimes(streamed ? 1 : 0);
      expect(get).toHaveBeenCalledTimes(streamed ? 0 : 1);
    }
    expect(validateSummary(cases[0], 64 * MiB).bytes.length).toBe(STREAM_DECODE_FROM - 1);
    await ledger.close();
  });

  it('cancels a resume whose signal is aborted as the summary is read (streamed decode)', async () => {
    const ledger = await open(tempDir(), { maxSummaryBytes: 64 * MiB });
    const r = await ledger.publish(alice, ofBytes('cancelled', STREAM_DECODE_FROM + 10));
    const ac = new AbortController();
    const original = ledger.blobs.chunks.bind(ledger.blobs);
    vi.spyOn(ledger.blobs, 'chunks').mockImplementation((digest, options) => {
      ac.abort(new Error('user pressed stop'));
      return original(digest, options);
    });
    await expect(ledger.resume(alice, { signal: ac.signal })).rejects.toMatchObject({ code: 'CANCELLED' });
    vi.restoreAllMocks();
    expect((await ledger.resume(alice))?.id).toBe(r.id);
    await ledger.close();
  });

  it.each([
    ['of 1 MiB or more', 2 * MiB],
    ['from STREAM_DECODE_FROM to 1 MiB', 300_000],
  ])(
    'reports a blob %s whose bytes were changed as BLOB_INTEGRITY, also when the change breaks its JSON first',
    async (_, units) => {
      const root = tempDir();
      const ledger = await open(root, { maxSummaryBytes: 64 * MiB });
      const r = await ledger.publish(alice, big('tampered', 'some text\n', units));
      const path = blobPath(root, r.digest);
      for (const [at, byte] of [
        [0, 0x78],
        [7, 0x01],
        [r.size - 1, 0x20],
      ] as const) {
        const bytes = readFileSync(path);
        const was = bytes[at]!;
        bytes[at] = byte; // '{' → 'x'; a raw control character in the first string; the closing '}'
        writeFileSync(path, bytes);
        await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'StoreError', code: 'BLOB_INTEGRITY' });
        bytes[at] = was;
        writeFileSync(path, bytes);
      }
      writeFileSync(path, readFileSync(path).subarray(0, r.size - 1)); // truncated
      await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'StoreError', code: 'BLOB_INTEGRITY' });
      await ledger.close();
    },
  );

  it('publishes large summaries (over the 8 MiB of blocks a put holds) in several sessions at once, each stored and resumed exactly', async () => {
    const ledger = await open(tempDir(), { maxSummaryBytes: 64 * MiB });
    const scopes = [1, 2, 3].map((i) => ({ principal: 'alice', session: `par-${i}`, run: 'r' }));
    const summaries = scopes.map((_, i) =>
      big(`parallel ${i}`, `text ${i} with "quotes"\n\\ and 😀 `.repeat(i + 1), 12 * MiB + i),
    );
    const receipts = await Promise.all(scopes.map((sc, i) => ledger.publish(sc, summaries[i])));
    for (const [i, sc] of scopes.entries()) {
      expect(receipts[i]!.digest).toBe(await hashBytes(validateSummary(summaries[i], 64 * MiB).bytes, nobleBlake3));
      expect((await ledger.resume(sc))?.summary).toEqual(summaries[i]);
    }
    await ledger.close();
  });

  const streamedSizes = [
    ['of 1 MiB or more', 2 * MiB],
    ['from STREAM_DECODE_FROM to 1 MiB', 300_000],
  ] as const;

  it.each(streamedSizes)(
    "refuses with BLOB_INTEGRITY, before decoding, a manifest whose size is not the stored blob's (no buffer of the claimed size), %s",
    async (_, units) => {
      const signer = new LocalSigner(generateJwk());
      const ledger = await open(tempDir(), { signer, maxSummaryBytes: 64 * MiB });
      const r = await ledger.publish(alice, big('sized', 'some text\n', units));
      await plantSeq1(ledger, r, signer, { size: 5 * 1024 ** 3 });
      await expect(ledger.resume(alice)).rejects.toMatchObject({ name: 'StoreError', code: 'BLOB_INTEGRITY' });
      await ledger.close();
    },
  );

  it.each(streamedSizes)(
    'refuses with BLOB_INTEGRITY a manifest that claims a byte less or more than the stored blob (by the stream within the limit, by the stat beside it beyond), %s',
    async (_, units) => {
      for (const delta of [-1, 1]) {
        for (const limitAfter of [64 * MiB, STREAM_DECODE_FROM]) {
          const signer = new LocalSigner(generateJwk());
          const root = tempDir();
          let ledger = await open(root, { signer, maxSummaryBytes: 64 * MiB });
          const r = await ledger.publish(alice, big('short', 'some text\n', units));
          await plantSeq1(ledger, r, signer, { size: r.size + delta });
          await ledger.close();
          ledger = await open(root, { signer, maxSummaryBytes: limitAfter });
          // Beyond the limit the claim is the most the store may read: a larger blob is not read at all.
          const tooLarge = limitAfter < r.size && delta < 0;
          await expect(ledger.resume(alice)).rejects.toMatchObject({
            name: 'StoreError',
            code: 'BLOB_INTEGRITY',
            message: tooLarge
              ? `summary ${r.digest} is larger than the manifest's ${r.size - 1} bytes`
              : `summary ${r.digest} is ${r.size} bytes, the manifest says ${r.size + delta}`,
          });
          await ledger.close();
        }
      }
    },
  );

  it('refuses with SUMMARY_TOO_LARGE a summary whose escapes take it over the limit as it streams, leaving no blob', async () => {
    const root = tempDir();
    const ledger = await open(root, { maxSummaryBytes: 4 * MiB });
    await ledger.publish(alice, sampleSummary('kept'));
    const blobsBefore = await collect(ledger.blobs.list());
    // 1 Mi code units pass the first bound; as \u0001 escapes they are 6 MiB of canonical bytes.
    const err = await ledger.publish(alice, big('escapes', '\u0001', MiB + 1)).catch((e) => e);
    expect(err).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_TOO_LARGE', cause: { code: 'BLOB_TOO_LARGE' } });
    expect(await collect(ledger.blobs.list())).toEqual(blobsBefore);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    expect((await ledger.history(alice)).length).toBe(1);
    await ledger.close();
  });

  it('a publish cancelled between two block writes leaves no manifest, no blob and no staging file', async () => {
    const root = tempDir();
    const ac = new AbortController();
    let writes = 0;
    const fs: FsOps = {
      ...nodeFsOps,
      write: async (h, data, position) => {
        if (++writes === 3) ac.abort(new Error('user pressed stop'));
        return nodeFsOps.write(h, data, position);
      },
    };
    const ledger = await open(root, { fs, maxSummaryBytes: 64 * MiB });
    const first = await ledger.publish(alice, sampleSummary('first'));
    const blobsBefore = await collect(ledger.blobs.list());
    writes = 0;
    const err = await ledger
      .publish(alice, big('cancelled', 'text with "quotes"\n', 6 * MiB), { signal: ac.signal })
      .catch((e) => e);
    expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
    expect(writes).toBeGreaterThanOrEqual(3);
    expect((await ledger.resume(alice))?.id).toBe(first.id);
    expect(await collect(ledger.blobs.list())).toEqual(blobsBefore);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    await ledger.close();
  });
});

describe('close', () => {
  it('lets the calls in flight finish, refuses later ones with CLOSED, and leaves no pin file open', async () => {
    const { readdirSync: list, readlinkSync } = await import('node:fs');
    const root = tempDir();
    const ledger = await open(root);
    const calls = Array.from({ length: 20 }, (_, i) =>
      ledger.publish({ principal: 'alice', session: `c${i}`, run: 'r' }, sampleSummary(`in flight ${i}`)),
    );
    const checkpoint = ledger.checkpoint();
    await ledger.close();
    const settled = await Promise.allSettled([...calls, checkpoint]);
    expect(
      settled.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)),
    ).toEqual([]);
    await expect(
      ledger.publish({ principal: 'alice', session: 'late', run: 'r' }, sampleSummary()),
    ).rejects.toMatchObject({
      code: 'CLOSED',
    });
    await expect(ledger.resume({ principal: 'alice', session: 'c0' })).rejects.toMatchObject({ code: 'CLOSED' });
    const open_ = list('/proc/self/fd').flatMap((fd) => {
      try {
        return [readlinkSync(`/proc/self/fd/${fd}`)];
      } catch {
        return [];
      }
    });
    expect(open_.filter((target) => target.startsWith(root))).toEqual([]);
    const again = await open(root);
    for (let i = 0; i < 20; i++) expect((await again.resume({ principal: 'alice', session: `c${i}` }))?.seq).toBe(0);
    await again.close();
  });
});

describe('close, called twice', () => {
  it('a second close() resolves once the ledger is closed, not before (the store then reopens)', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const inFlight = ledger.publish({ principal: 'alice', session: 'twice', run: 'r' }, sampleSummary('in flight'));
    const first = ledger.close();
    await ledger.close();
    const again = await open(root);
    await again.close();
    await Promise.all([inFlight, first]);
  });

  it('a second close() of a log does not free the in-process entry of a log opened on the store since', async () => {
    const path = join(tempDir(), 'log');
    const a = await LevelManifestLog.open(path);
    await a.close();
    const b = await LevelManifestLog.open(path);
    await a.close();
    await expect(LevelManifestLog.open(path)).rejects.toMatchObject({
      code: 'LOCKED',
      message: expect.stringMatching(/already open in this process/),
    });
    await b.close();
    await (await LevelManifestLog.open(path)).close();
  });
});

describe('one process owns an embedded store', () => {
  it('a second opener of the same root gets LOCKED with a message saying what to do', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const err = await open(root).catch((e) => e);
    expect(err).toMatchObject({ name: 'ManifestError', code: 'LOCKED' });
    expect(err.message).toMatch(/already open in this process/);
    await ledger.close();
    (await open(root)).close();
  });

  it('refuses a root that others can write or that is a symlink', async () => {
    const { chmodSync, symlinkSync } = await import('node:fs');
    const dir = tempDir();
    chmodSync(dir, 0o777);
    await expect(openLedger({ root: dir, host: 'h' })).rejects.toMatchObject({ code: 'UNSAFE_ROOT' });
    chmodSync(dir, 0o700);
    const link = join(tempDir(), 'link');
    symlinkSync(dir, link);
    await expect(openLedger({ root: link, host: 'h' })).rejects.toMatchObject({ code: 'UNSAFE_ROOT' });
    // Written with a trailing slash (or `/.`), lstat follows the link: still the link it is.
    for (const root of [`${link}/`, `${link}//`, `${link}/.`, `${link}/./`])
      await expect(openLedger({ root, host: 'h' }), root).rejects.toMatchObject({ code: 'UNSAFE_ROOT' });
    expect(existsSync(join(dir, 'manifests-v1'))).toBe(false);
  });

  it('refuses a root that is a file, a dangling symlink or under a file with UNSAFE_ROOT, whatever the open', async () => {
    const { symlinkSync, writeFileSync } = await import('node:fs');
    const base = tempDir();
    const file = join(base, 'file');
    writeFileSync(file, 'not a store');
    const dangling = join(base, 'dangling');
    symlinkSync(join(base, 'nowhere'), dangling);
    for (const root of [file, dangling, join(file, 'store')])
      for (const createHostKey of [true, false]) {
        // createHostKey: false is every CLI command but init, publish and demo: it looked under the root first.
        const err = await openLedger({ root, host: 'h', createHostKey, onNotice: () => {} }).catch((e: unknown) => e);
        expect(err, `${root} createHostKey ${createHostKey}`).toMatchObject({ code: 'UNSAFE_ROOT' });
      }
    expect(existsSync(join(base, 'nowhere'))).toBe(false);
  });
});
