/**
 * A small inline summary is hashed in one synchronous call (`digestOf`), a larger one by the store's backend: the
 * digest is the reference's either way, and the summary resumes (its bytes re-hashed on read).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { canonicalBytes } from '../manifests/encoding/canonical.js';
import { digestOfReady, hashBytes, nobleBlake3 } from '../store/hash/digest.js';
import { tempDir } from './support/tmp.js';

const alice = { principal: 'alice', session: 'sess-1', run: 'run-1' };

/** A summary of about `bytes` canonical bytes. */
const summaryOf = (bytes: number, marker: string) => ({
  task: `inline hash ${marker}`,
  state: 'x'.repeat(bytes),
  nextSteps: [],
  files: [],
});

describe('the digest of an inline summary', () => {
  afterEach(() => vi.restoreAllMocks());

  it('is the reference BLAKE3 of its canonical bytes; up to 4 KiB without a hasher of the backend, above with one', async () => {
    await digestOfReady;
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', hash: 'noble', onNotice: () => {} });
    try {
      const created = vi.spyOn(nobleBlake3, 'create');
      for (const [bytes, viaBackend] of [
        [512, false],
        [3_900, false],
        [8_000, true],
        [40_000, true],
      ] as const) {
        const summary = summaryOf(bytes, String(bytes));
        const canonical = canonicalBytes(summary);
        expect(canonical.length > 4096, `${bytes}`).toBe(viaBackend);
        const before = created.mock.calls.length;
        const receipt = await ledger.publish(alice, summary);
        expect(created.mock.calls.length - before, `hashers made for ${canonical.length} bytes`).toBe(
          viaBackend ? 1 : 0,
        );
        expect(receipt.digest).toBe(await hashBytes(canonical, nobleBlake3));
        expect(receipt.size).toBe(canonical.length);
        const resumed = await ledger.resume(alice);
        expect(resumed?.summary).toEqual(summary);
        expect(resumed?.id).toBe(receipt.id);
      }
    } finally {
      await ledger.close();
    }
  });
});
