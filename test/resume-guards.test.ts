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
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { entryKey, plantHead, SUMMARY_MEDIA_TYPE } from './support/plant.js';

const alice = { principal: 'alice', session: 'sess-1', run: 'run-1' };
const MEDIA = SUMMARY_MEDIA_TYPE;
const raw = (l: Ledger) => (l.log as LevelManifestLog).raw;
const plant = (ledger: Ledger, signer: LocalSigner, m: Parameters<typeof plantHead>[2]) => plantHead(ledger, signer, m);

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
