/**
 * Resume against entries planted in the log behind the ledger's back, each signed by the host's own key: cases a
 * mutation review found no test for (a forged prev, a size claim other than the stored blob's, a huge size claim,
 * the entry before the head gone).
 */
import { describe, expect, it } from 'vitest';
import { type Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { type Digest } from '../store/hash/digest.js';
import { signEnvelope, serializeEnvelope } from '../manifests/crypto/envelope.js';
import { encodeManifest, manifestId, MANIFEST_PAYLOAD_TYPE, type Manifest } from '../manifests/format/manifest.js';
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const alice = { principal: 'alice', session: 'sess-1', run: 'run-1' };
const MEDIA = 'application/vnd.handoff-ledger.summary.v1+json' as const;
const entryKey = (session: string, seq: number) => `e!${session}!${seq.toString(16).padStart(12, '0')}`;
const raw = (l: Ledger) => (l.log as LevelManifestLog).raw;

/** Writes a manifest signed by the host's key at `seq` of sess-1 and makes it the head. */
async function plant(
  ledger: Ledger,
  signer: LocalSigner,
  m: { seq: number; prev: Digest | null; summary: Manifest['summary'] },
): Promise<void> {
  const forged = {
    v: 1,
    kind: 'compaction',
    host: 'host-a',
    principal: 'alice',
    session: 'sess-1',
    run: 'run-x',
    createdAt: new Date().toISOString(),
    keyId: signer.keyId,
    ...m,
  } as Manifest;
  const payload = encodeManifest(forged);
  const envelope = serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, signer));
  const id = manifestId(payload);
  const record = { position: m.seq, session: 'sess-1', seq: m.seq, id, principal: 'alice', envelope };
  await raw(ledger).put(entryKey('sess-1', m.seq), JSON.stringify(record));
  await raw(ledger).put('h!sess-1', JSON.stringify({ session: 'sess-1', seq: m.seq, id, owner: 'alice' }));
}

async function withLedger(fn: (ledger: Ledger, signer: LocalSigner) => Promise<void>): Promise<void> {
  const signer = new LocalSigner(generateJwk());
  const ledger = await openLedger({ root: tempDir(), host: 'host-a', signer });
  try {
    await fn(ledger, signer);
  } finally {
    await ledger.close();
  }
}

describe('resume refuses a planted head', () => {
  it('whose prev is not the entry before it: CHAIN_BROKEN, though the host signed it', () =>
    withLedger(async (ledger, signer) => {
      const r0 = await ledger.publish(alice, sampleSummary(0));
      const prev = `blake3:${'ab'.repeat(32)}` as Digest;
      await plant(ledger, signer, { seq: 1, prev, summary: { digest: r0.digest, size: r0.size, mediaType: MEDIA } });
      await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'CHAIN_BROKEN', message: /prev/ });
    }));

  it('whose summary size is not the stored blob’s: BLOB_INTEGRITY', () =>
    withLedger(async (ledger, signer) => {
      const r0 = await ledger.publish(alice, sampleSummary(0));
      const summary = { digest: r0.digest, size: r0.size + 1, mediaType: MEDIA };
      await plant(ledger, signer, { seq: 1, prev: r0.id, summary });
      await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'BLOB_INTEGRITY' });
    }));

  it('claiming 256 MiB for a small blob: BLOB_INTEGRITY before any buffer is sized by the claim', () =>
    withLedger(async (ledger, signer) => {
      const r0 = await ledger.publish(alice, sampleSummary(0));
      const summary = { digest: r0.digest, size: 256 * 1024 * 1024, mediaType: MEDIA };
      await plant(ledger, signer, { seq: 1, prev: r0.id, summary });
      const before = process.memoryUsage().arrayBuffers;
      await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'BLOB_INTEGRITY' });
      expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 1024 * 1024);
    }));

  it('whose entry before it is gone: CHAIN_BROKEN, not a TypeError', () =>
    withLedger(async (ledger) => {
      await ledger.publish(alice, sampleSummary(0));
      await ledger.publish(alice, sampleSummary(1));
      await raw(ledger).del(entryKey('sess-1', 0));
      await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'CHAIN_BROKEN' });
    }));
});
