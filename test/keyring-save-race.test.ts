/**
 * A read's reload of trust.json that ends while this process's own write of it is being stamped (Keyring `save`):
 * the reload read the file before the write replaced it. Whatever the order, the keyring must end up holding the
 * trust it wrote, or know that trust.json changed since what it holds (and read it again): never the older trust
 * stamped as current, which no later read would replace (a revocation this process made, silently not enforced).
 * The same of the ledger's reload of the keys (storeTrust, publish's retry), which reads trust.json and the key files;
 * and of the ledger's merged trust, which must follow the keyring's the moment it changes (a head judged while a
 * revocation releases the trust lock).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { join } from 'node:path';
import type * as fsPromises from 'node:fs/promises';
import { Keyring } from '../src/keys/keyring.js';
import { openLedger } from '../src/ledger/open.js';
import { sampleSummary, tempDir } from './support/tmp.js';

/** Gates on the trust file's open (held once opened) and lstat (held before it answers), armed by the test. */
const gate = vi.hoisted(() => ({
  path: '',
  holdOpen: undefined as undefined | { opened: () => void; release: Promise<void> },
  holdLstat: undefined as undefined | { called: () => void; release: Promise<void> },
  /** Holds the unlink of `unlinkPath` (a lock's release) before it happens. */
  unlinkPath: '',
  holdUnlink: undefined as undefined | { called: () => void; release: Promise<void> },
}));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof fsPromises>();
  return {
    ...real,
    open: async (...args: Parameters<typeof real.open>) => {
      const handle = await real.open(...args);
      const hold = args[0] === gate.path ? gate.holdOpen : undefined;
      if (hold) {
        gate.holdOpen = undefined;
        hold.opened();
        await hold.release;
      }
      return handle;
    },
    lstat: async (...args: Parameters<typeof real.lstat>) => {
      const hold = args[0] === gate.path ? gate.holdLstat : undefined;
      if (hold) {
        gate.holdLstat = undefined;
        hold.called();
        await hold.release;
      }
      return real.lstat(...args);
    },
    unlink: async (...args: Parameters<typeof real.unlink>) => {
      const hold = args[0] === gate.unlinkPath ? gate.holdUnlink : undefined;
      if (hold) {
        gate.holdUnlink = undefined;
        hold.called();
        await hold.release;
      }
      return real.unlink(...args);
    },
  };
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

afterEach(() => {
  gate.holdOpen = undefined;
  gate.holdLstat = undefined;
  gate.holdUnlink = undefined;
});

describe("Keyring: a reload that read trust.json before this process's write replaced it", () => {
  it('ending while the write is stamped, does not leave the older trust held as current', async () => {
    const root = tempDir();
    const options = { root, host: 'host-a', origin: 'handoff-ledger.test/race', clock: () => new Date() };
    // The first open writes the keys and trust.json (under the trust lock); this one only reads them.
    await Keyring.open(options);
    const keyring = await Keyring.open(options);
    gate.path = join(root, 'trust.json');
    const keyId = keyring.signer.keyId;
    const at = '2999-01-01T00:00:00.000Z';
    await keyring.exclusive(async () => {
      // A read's reload opens trust.json as it is (no revocation) and is held there.
      const opened = deferred();
      const readerGo = deferred();
      gate.holdOpen = { opened: opened.resolve, release: readerGo.promise };
      const reading = keyring.reloadTrust();
      await opened.promise;
      // The revocation writes trust.json anew; its stamp's lstat is held until the reload has ended.
      const stamping = deferred();
      const stampGo = deferred();
      gate.holdLstat = { called: stamping.resolve, release: stampGo.promise };
      const revoking = keyring.revoke(keyId, at);
      await stamping.promise;
      readerGo.resolve();
      await reading;
      stampGo.resolve();
      await revoking;
    });
    const held = keyring.trustStore().keys.find((k) => k.keyId === keyId);
    // Either the revocation is held, or the keyring knows trust.json is not what it holds (a read reloads).
    expect(held?.revokedAt === at || (await keyring.changedOnDisk())).toBe(true);
    expect(held?.revokedAt).toBe(at);
  });
});

describe("Ledger: a reload of the keys that read trust.json before this process's revocation replaced it", () => {
  // storeTrust() (fsck's, on a live ledger) and publish's retry after a closed window load the keys again outside the
  // signing lock. One that read trust.json before a revocation of this process wrote it, and ended after, must not
  // put the older keys back over the revocation: the ledger (an embedded store reads trust.json no more) would verify
  // with the key unrevoked, and resume a handoff its key's revocation refuses.
  it('does not take back the revocation: resume refuses the head the revoked key signed', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      const scope = { principal: 'alice', session: 's1', run: 'r1' };
      await ledger.publish(scope, sampleSummary(0));
      const keyId = ledger.keyId;
      gate.path = join(root, 'trust.json');
      // The reload opens trust.json as it is (the key unrevoked) and is held there.
      const opened = deferred();
      const readerGo = deferred();
      gate.holdOpen = { opened: opened.resolve, release: readerGo.promise };
      const reading = ledger.storeTrust();
      await opened.promise;
      // Revoked from before anything it signed (a compromise found late), while the reload is held.
      const at = '2001-01-01T00:00:00.000Z';
      expect(await ledger.revokeKey(keyId, at)).toBe(at);
      readerGo.resolve();
      await reading;
      expect(ledger.trustStore().keys.find((k) => k.keyId === keyId)?.revokedAt).toBe(at);
      await expect(ledger.resume(scope)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    } finally {
      await ledger.close();
    }
  });
});

describe('Ledger: a head judged while a revocation of this process releases the trust lock', () => {
  // The revocation's new trust and generation are the keyring's before revokeKey resolves (it still releases the
  // trust lock); the ledger's merged trust was dropped only once it had. A head judged in between was judged under
  // the old trust but remembered under the new generation, so no later publish judged it again: a publish after
  // revokeKey resolved appended a handoff on a head signed by the revoked key, which resume then refused for good.
  it('is judged again: a publish after revokeKey resolved refuses KEY_REVOKED, nothing appended', async () => {
    const root = tempDir();
    let now = Date.parse('2026-12-05T10:00:00.000Z');
    const ledger = await openLedger({ root, host: 'host-a', clock: () => new Date(now), onNotice: () => {} });
    const releaseGo = deferred();
    try {
      const scope = { principal: 'alice', session: 's1', run: 'r1' };
      now += 1000;
      await ledger.publish(scope, sampleSummary(0)); // the head, signed by the key about to be rotated out
      const old = ledger.keyId;
      now += 1000;
      await ledger.rotateKey();
      expect((await ledger.resume(scope))?.seq).toBe(0); // verified under the trust as it is now
      // The revocation (from before the head) is held as it releases the trust lock.
      gate.unlinkPath = join(root, 'trust.json.lock');
      const releasing = deferred();
      gate.holdUnlink = { called: releasing.resolve, release: releaseGo.promise };
      const revoking = ledger.revokeKey(old, '2026-12-05T10:00:00.500Z');
      await releasing.promise;
      // A check of the session meanwhile judges its head (then waits for the signing lock the revocation holds).
      const read = deferred();
      const entry = ledger.log.entry.bind(ledger.log);
      const spy = vi.spyOn(ledger.log, 'entry').mockImplementation(async (...args) => {
        const found = await entry(...args);
        read.resolve();
        return found;
      });
      const checking = ledger.checkPublish(scope).catch(() => {});
      await read.promise;
      await new Promise((r) => setImmediate(r)); // the judgment after the read is synchronous: it has been made
      spy.mockRestore();
      releaseGo.resolve();
      await revoking;
      await checking;
      await expect(ledger.publish(scope, sampleSummary(1))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
      expect((await ledger.log.head('s1'))?.seq).toBe(0);
    } finally {
      releaseGo.resolve(); // a revocation held at the gate ends before the close waits for it
      await ledger.close();
    }
  });
});
