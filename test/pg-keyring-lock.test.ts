/**
 * A process whose open made the store's keys (under the trust lock) holds that lock no longer afterwards: its later
 * reloads (a publish refused KEY_EXPIRED, fsck's storeTrust) read as any other process does and wait for the lock
 * before settling files, so they never delete another process's rotation staged under it.
 */
import { existsSync } from 'node:fs';
import { expect, vi } from 'vitest';
import { it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { hostKeyPath } from '../src/keys/keyring.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const gate: { pause?: Promise<void>; reached?: () => void } = {};
vi.mock('../src/keys/local-signer.js', async (importOriginal) => {
  const mod = await importOriginal<typeof import('../src/keys/local-signer.js')>();
  return {
    ...mod,
    writeKeyFile: async (...args: Parameters<typeof mod.writeKeyFile>) => {
      await mod.writeKeyFile(...args);
      // A rotation, after staging its new key files and before writing trust.json: held here while the test runs.
      if (String(args[0]).includes('checkpoint-') && String(args[0]).endsWith('.next') && gate.pause) {
        gate.reached?.();
        await gate.pause;
      }
    },
  };
});

const scope = { principal: 'alice', session: 's', run: 'r' };

describePostgres('the trust lock after an open that made the keys', (pg) => {
  it("is not held: another process's rotation in flight survives this one's publish and reload", async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: `keyring_lock_${process.pid}` };
    const a = await openLedger({ root, host: 'h', postgres, onNotice: () => {} }); // makes the keys, under the lock
    const b = await openLedger({ root, host: 'h', postgres, onNotice: () => {} }); // another process of the host
    try {
      await a.publish(scope, sampleSummary(0));
      let release!: () => void;
      gate.pause = new Promise<void>((r) => (release = r));
      const reached = new Promise<void>((r) => (gate.reached = r));
      const rotation = b.rotateKey().then(
        (keyId) => ({ keyId }),
        (err: unknown) => ({ err }),
      );
      await reached; // b holds trust.json.lock; its new key files are staged at *.next
      const staged = `${hostKeyPath(root, 'h')}.next`;
      expect(existsSync(staged)).toBe(true);
      // a's publish meets the window b closed (KEY_EXPIRED, then a reload that must wait for b's lock) while a
      // reads the trust file too (fsck's storeTrust): neither may touch b's staged files.
      const publishing = a.publish(scope, sampleSummary(1)).then(
        (r) => r.seq,
        (err: unknown) => (err as { code?: string }).code,
      );
      const reading = a.storeTrust().then(
        () => 'read',
        (err: unknown) => (err as { code?: string }).code,
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(existsSync(staged)).toBe(true);
      gate.pause = undefined;
      release();
      const rotated = await rotation;
      expect(rotated).toHaveProperty('keyId');
      expect(await reading).toBe('read');
      expect(await publishing).toBe(1); // signed again with b's new key once the rotation was done
    } finally {
      await a.close();
      await b.close();
    }
    const c = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
    try {
      expect((await c.publish(scope, sampleSummary(2))).seq).toBe(2);
    } finally {
      await c.close();
    }
  }, 120_000);
});
