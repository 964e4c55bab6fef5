/**
 * The embedded backend (filesystem blobs, LevelDB manifest log) against the shared conformance suites,
 * the same suites the PostgreSQL backend runs (test/pg-backend.test.ts).
 */
import { open, rm, utimes } from 'node:fs/promises';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { digestHex } from '../store/hash/digest.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { blobStoreSuite } from './conformance/blob-store.js';
import { manifestLogSuite } from './conformance/manifest-log.js';
import { ledgerSuite } from './conformance/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { gc } from '../src/ops/maintenance.js';
import { describe, expect, it } from 'vitest';

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

manifestLogSuite('LevelManifestLog', async () => {
  const dir = freshDir();
  const path = join(dir, 'log');
  const fx = {
    log: await LevelManifestLog.open(path),
    async reopen() {
      await fx.log.close();
      fx.log = await LevelManifestLog.open(path);
      return fx.log;
    },
    async dispose() {
      await fx.log.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return fx;
});

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

describe('LevelDB inline blob records', () => {
  const manifestError = (code: string, key: string) =>
    expect.objectContaining({ name: 'ManifestError', code, message: expect.stringContaining(key) });

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
