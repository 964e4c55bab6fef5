/**
 * A root PostgreSQL processes share, one process rotating the host key while another publishes on the same session:
 * the head the publisher's commit reads again (another process appended after publish judged the head before it) may
 * be signed with the key the other process rotated to, listed in trust.json since this process last read it. The
 * commit judges that head under trust.json as it is now, as resume reads it, and publishes on it; it refused it
 * KEY_UNTRUSTED ("resume refuses that head"), though resume verified it (test/reliability/maintenance-crash.test.ts
 * met this with two processes killed at random).
 */
import { expect, it } from 'vitest';
import type { BlobStore } from '../store/blob-store.js';
import { openLedger } from '../src/ledger/open.js';
import { openPostgresBackends } from '../src/ledger/pg-backend.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

/** A blob store whose puts wait for `open()`: the publish is held between its look at the head and its commit. */
function gatedBlobs(store: BlobStore) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let reached!: () => void;
  const waiting = new Promise<void>((r) => (reached = r));
  const gated = new Proxy(store, {
    get(target, name) {
      if (name === 'put')
        return async (...args: Parameters<BlobStore['put']>) => {
          reached();
          await gate;
          return target.put(...args);
        };
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { gated, waiting, open: release };
}

describePostgres('a publish whose head another process of the root appended with the key it rotated to', (pg) => {
  it('is judged under trust.json as it is now and published on (it was refused KEY_UNTRUSTED)', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: `rothead${process.pid}` };
    const scope = { principal: 'alice', session: 's1', run: 'r' };
    const rotator = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    // The publisher: the same database through backends of its own, its blob puts held at a gate.
    const { log, blobs } = await openPostgresBackends(postgres);
    const gate = gatedBlobs(blobs);
    const publisher = await openLedger({ root, host: 'host-a', log, blobs: gate.gated, onNotice: () => {} });
    try {
      await rotator.publish(scope, sampleSummary('first'));
      // Over the inline threshold: the summary is a blob, put between the look at the head and the commit.
      const large = { ...sampleSummary('large'), state: 'x'.repeat(100 * 1024) };
      const publishing = publisher.publish(scope, large);
      publishing.catch(() => {});
      await gate.waiting;
      const before = rotator.keyId;
      await rotator.rotateKey();
      expect(rotator.keyId).not.toBe(before);
      const byNewKey = await rotator.publish(scope, sampleSummary('by the new key'));
      expect(byNewKey.seq).toBe(1);
      gate.open();
      const receipt = await publishing;
      expect(receipt.seq).toBe(2);
      for (const ledger of [publisher, rotator]) expect((await ledger.resume(scope))?.seq).toBe(2);
      expect((await rotator.history(scope)).map((h) => h.manifest.keyId)).toEqual([
        before,
        rotator.keyId,
        rotator.keyId,
      ]);
    } finally {
      await publisher.close();
      await rotator.close();
    }
  }, 120_000);
});
