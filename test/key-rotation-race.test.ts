/**
 * Two processes of one host that share a store root rotate its key at once: both rotations end in trust.json,
 * one after the other, each old window closed once, and everything either process signed verifies. (The embedded
 * backend cannot get here: a second process opening the store gets `LOCKED`.)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { withFileLock } from '../src/ledger/file-lock.js';
import { exportBundle } from '../src/ops/export.js';
import { openBundleDir } from '../src/ops/bundle-dir.js';
import { verifyBundle } from '../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { startLineChild } from './support/line-child.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CHILD = fileURLToPath(new URL('./support/key-rotator.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/src/index.js', import.meta.url));
const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

interface RotatorMsg {
  type: 'ready' | 'ack' | 'done' | 'fail';
  rotated?: string;
  keyId?: string;
  code?: string;
  error?: string;
}

/** Starts a rotator; `ready` settles once it has the store open, `settled` with all its messages when it exits. */
function startRotator(config: object) {
  const rotator = startLineChild<RotatorMsg>(CHILD, config, 'rotator');
  return { ...rotator, settled: Promise.allSettled([rotator.done]).then(([r]) => r!) };
}

describePostgres('two processes rotating one store key at once (PostgreSQL, one shared root)', (pg) => {
  it('keeps both new keys in trust.json, in order, each old window closed once; everything both signed verifies', async () => {
    expect(existsSync(BUILT), 'dist/ is built by `npm test` (pretest)').toBe(true);
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: 'rotate_race' };
    const scope = { principal: 'alice', session: 'before', run: 'r' };
    const first = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    await first.publish(scope, sampleSummary(0));
    await first.close();

    const rotations = 3;
    const config = { root, host: 'host-a', connectionString: pg.connectionString, schema: 'rotate_race', rotations };
    const a = startRotator({ ...config, session: 'from-a' });
    const b = startRotator({ ...config, session: 'from-b' });
    await Promise.all([a.ready, b.ready]);
    a.child.stdin.write('go\n');
    b.child.stdin.write('go\n');
    const [ra, rb] = await Promise.all([a.settled, b.settled]);
    const messages = [ra, rb].map((r) => {
      if (r.status === 'rejected') throw r.reason;
      return r.value;
    });
    for (const m of messages) expect(m.filter((x) => x.type === 'fail')).toEqual([]);
    const signedWith = messages.flatMap((m) => m.filter((x) => x.type === 'ack').map((x) => x.keyId!));
    expect(signedWith.length).toBe(2 * rotations);

    const ledger = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    try {
      // One window after the other: the first key, then six rotations, whoever made them.
      const keys = ledger
        .trustStore()
        .keys.filter((k) => k.host === 'host-a')
        .sort((x, y) => x.notBefore.localeCompare(y.notBefore));
      expect(keys.length).toBe(1 + 2 * rotations);
      for (const keyId of signedWith) expect(keys.map((k) => k.keyId)).toContain(keyId);
      for (let i = 0; i + 1 < keys.length; i++) {
        expect(keys[i]!.notAfter, `key ${i} closed where key ${i + 1} opens`).toBe(keys[i + 1]!.notBefore);
        // The log closed the same window once, at the same instant trust.json ends it.
        expect((await ledger.log.signingKeys.get(keys[i]!.keyId))?.closedAt).toBe(keys[i]!.notAfter);
      }
      expect(keys.at(-1)!.notAfter).toBeUndefined();
      expect(ledger.keyId).toBe(keys.at(-1)!.keyId);

      const report = await fsck(ledger);
      expect(report.findings).toEqual([]);
      for (const session of ['before', 'from-a', 'from-b']) {
        expect((await ledger.resume({ ...scope, session }))?.seq).toBe(session === 'before' ? 0 : rotations - 1);
      }
      await ledger.publish({ ...scope, session: 'from-a' }, sampleSummary('after both'));
      const out = join(tempDir('hl-export-'), 'bundle');
      await exportBundle(ledger, { out, withBlobs: true });
      const verdict = await verifyBundle(await openBundleDir(out), {
        trust: ledger.trustStore(),
        verifier: nodeVerifier,
      });
      expect(verdict.findings).toEqual([]);
      expect(verdict.counts.manifests).toBe(2 + 2 * rotations);
    } finally {
      await ledger.close();
    }
  }, 120_000);

  it('two ledgers with roots of their own on one database rotate at once: nothing to order, and fsck of either is clean', async () => {
    const postgres = { connectionString: pg.connectionString, schema: 'rotate_own_roots' };
    const own = (host: string) => openLedger({ root: tempDir(), host, postgres, onNotice: () => {} });
    const [a, b] = await Promise.all([own('host-a'), own('host-b')]);
    try {
      await a.publish({ principal: 'alice', session: 'sa', run: 'r' }, sampleSummary('a0'));
      await b.publish({ principal: 'bob', session: 'sb', run: 'r' }, sampleSummary('b0'));
      await Promise.all([a.rotateKey(), b.rotateKey(), a.rotateKey(), b.rotateKey()]);
      await a.publish({ principal: 'alice', session: 'sa', run: 'r' }, sampleSummary('a1'));
      await b.publish({ principal: 'bob', session: 'sb', run: 'r' }, sampleSummary('b1'));
      for (const l of [a, b]) expect(l.trustStore().keys.filter((k) => k.notAfter === undefined)).toHaveLength(1);
      // Each root's fsck judges the key records against its own trust.json; the other host's keys come as `trust`.
      const auditor = await openLedger({
        root: tempDir(),
        host: 'host-c',
        postgres,
        trust: { version: 1, keys: [...a.trustStore().keys, ...b.trustStore().keys] },
        onNotice: () => {},
      });
      try {
        for (const l of [a, b, auditor]) {
          const report = await fsck(l, { checkBlobs: false });
          expect(report.findings.filter((f) => f.code !== 'KEY_UNTRUSTED')).toEqual([]);
        }
        expect((await fsck(auditor)).findings).toEqual([]);
      } finally {
        await auditor.close();
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 60_000);
});

describe('the trust lock (trust.json.lock)', () => {
  const lockOf = (root: string) => join(root, 'trust.json.lock');

  it('takes over a lock left by a process that is gone, and removes its own when done', async () => {
    const root = tempDir();
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    writeFileSync(lockOf(root), JSON.stringify({ pid: dead, host: hostname(), nonce: 'left-behind' }));
    expect(
      await withFileLock(join(root, 'trust.json'), 'trust.json', async () => readFileSync(lockOf(root), 'utf8')),
    ).toContain(`"pid":${process.pid}`);
    expect(existsSync(lockOf(root))).toBe(false);
  });

  it('takes over a lock older than the stale age whatever its owner (another machine, a reused pid)', async () => {
    const root = tempDir();
    writeFileSync(lockOf(root), JSON.stringify({ pid: process.pid, host: 'elsewhere', nonce: 'old' }));
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(lockOf(root), old, old);
    expect(await withFileLock(join(root, 'trust.json'), 'trust.json', async () => 'ran', { staleMs: 60_000 })).toBe(
      'ran',
    );
  });

  it('waits for a live holder and refuses with LOCKED after the wait, leaving its lock in place', async () => {
    const root = tempDir();
    const held = JSON.stringify({ pid: process.pid, host: hostname(), nonce: 'live' });
    writeFileSync(lockOf(root), held);
    let ran = false;
    await expect(
      withFileLock(join(root, 'trust.json'), 'trust.json', async () => (ran = true), { waitMs: 300 }),
    ).rejects.toMatchObject({ code: 'LOCKED' });
    expect(ran).toBe(false);
    expect(readFileSync(lockOf(root), 'utf8')).toBe(held);
  });

  it('waits for a lock that is not a readable file (a directory) and refuses with LOCKED, not spinning', async () => {
    const root = tempDir();
    mkdirSync(lockOf(root));
    await expect(
      withFileLock(join(root, 'trust.json'), 'trust.json', async () => 'ran', { waitMs: 300 }),
    ).rejects.toMatchObject({
      code: 'LOCKED',
    });
  });

  it("takes over another machine's lock untouched for two minutes by default, not one touched 100 s ago", async () => {
    // The README ("Operating it"): a lock from another host is taken over once it was not touched for two minutes (a
    // live holder touches it). The CLI's commands give the lock no options: the defaults are what operators get.
    const root = tempDir();
    const lockAged = (seconds: number, nonce: string) => {
      writeFileSync(lockOf(root), JSON.stringify({ pid: process.pid, host: 'another-host', nonce }));
      const at = new Date(Date.now() - seconds * 1000);
      utimesSync(lockOf(root), at, at);
    };
    lockAged(100, 'touched-recently');
    await expect(
      withFileLock(join(root, 'trust.json'), 'trust.json', async () => 'ran', { waitMs: 300 }),
    ).rejects.toMatchObject({ code: 'LOCKED' });
    expect(readFileSync(lockOf(root), 'utf8')).toContain('touched-recently');
    lockAged(140, 'left-behind');
    expect(await withFileLock(join(root, 'trust.json'), 'trust.json', async () => 'ran', { waitMs: 300 })).toBe('ran');
    expect(existsSync(lockOf(root))).toBe(false);
  });

  it('keys rotate takes over a lock another machine left (untouched for three minutes) and rotates', () => {
    const root = join(tempDir(), 'store');
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [CLI, ...args, '--root', root, '--host', 'h1'], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    expect(run('init').status).toBe(0);
    const before = JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')).keys.length;
    writeFileSync(lockOf(root), JSON.stringify({ pid: 12345, host: 'another-host', nonce: 'left-behind' }));
    const at = new Date(Date.now() - 180_000);
    utimesSync(lockOf(root), at, at);
    const r = run('keys', 'rotate');
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')).keys).toHaveLength(before + 1);
    expect(existsSync(lockOf(root))).toBe(false);
  });

  it('runs holders of one root one after the other', async () => {
    const root = tempDir();
    const order: string[] = [];
    const hold = (name: string) =>
      withFileLock(join(root, 'trust.json'), 'trust.json', async () => {
        order.push(`${name} in`);
        await new Promise((r) => setTimeout(r, 50));
        order.push(`${name} out`);
      });
    await Promise.all([hold('a'), hold('b')]);
    expect(
      [order.slice(0, 2), order.slice(2)].map((pair) => pair[0]!.split(' ')[0] === pair[1]!.split(' ')[0]),
    ).toEqual([true, true]);
  });
});

describe('a rotation while reads of the same process load the keys again', () => {
  it('completes: the reads wait for the trust lock instead of settling its staged key files, and publishing goes on', async () => {
    const scope = { principal: 'alice', session: 's', run: 'r' };
    for (let trial = 0; trial < 5; trial++) {
      const root = join(tempDir(), 'root');
      const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
      try {
        await ledger.publish(scope, sampleSummary(1));
        // storeTrust() (what fsck calls) loads the keys again, in a loop, while one rotation runs.
        let stop = false;
        const failures: string[] = [];
        const reads = (async () => {
          while (!stop) await ledger.storeTrust().catch((err: { code?: string }) => failures.push(String(err.code)));
        })();
        const rotated = await ledger.rotateKey().finally(() => (stop = true));
        await reads;
        expect(failures, `trial ${trial}`).toEqual([]);
        expect(ledger.keyId).toBe(rotated);
        expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(1);
        expect((await fsck(ledger)).ok).toBe(true);
      } finally {
        await ledger.close();
      }
      // The new key is the one on disk: a reopen publishes with it.
      const again = await openLedger({ root, host: 'h', onNotice: () => {} });
      try {
        expect((await again.publish(scope, sampleSummary(3))).seq).toBe(2);
      } finally {
        await again.close();
      }
    }
  }, 60_000);
});
