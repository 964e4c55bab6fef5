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
