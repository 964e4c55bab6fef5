import { describe, expect, it } from 'vitest';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { lstat, mkdir, open, rm, symlink, writeFile } from 'node:fs/promises';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { digestHex } from '../../store/hash/digest.js';
import { nodeFsOps, type FsOps } from '../../store/fs/ops.js';
import { AuditError } from '../../manifests/audit/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import type { LevelManifestLog } from '../../manifests/log/level/log.js';
import { parseBundleHeader } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle, type ExportSource } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { run as exportCli } from '../../src/cli/export.js';
import { captureIo } from '../support/capture-io.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { bundleSessions } from '../support/bundle-builder.js';
import { FaultPlan, type FaultOp } from '../reliability/fault-plan.js';

/** `inlineSummaryBytes: 0` puts every summary in a blob file (for tests that damage one). */
async function ledgerWithChains(root: string, inlineSummaryBytes?: number, fs?: FsOps): Promise<Ledger> {
  const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {}, inlineSummaryBytes, fs });
  // Interleaved like concurrent sessions: s1 (alice) 3 manifests, s2 (bob) 2, and bob, granted, once in s1.
  await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a0'));
  await ledger.publish({ principal: 'bob', session: 's2', run: 'r1' }, sampleSummary('b0'));
  await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a1'));
  await ledger.grant('bob', 's1');
  await ledger.publish({ principal: 'bob', session: 's1', run: 'r2' }, sampleSummary('a2'));
  await ledger.publish({ principal: 'bob', session: 's2', run: 'r1' }, sampleSummary('b1'));
  await ledger.publish({ principal: 'carol', session: 's3', run: 'r1' }, sampleSummary('c0'));
  return ledger;
}

async function storedLines(ledger: Ledger): Promise<string[]> {
  const out: string[] = [];
  for await (const e of ledger.log.entries()) out.push(e.envelope);
  return out;
}

/**
 * The ledger as an export source whose first checkpoint is taken after alice's first manifest of s9 commits: it lands
 * while the export is under way, after the export's read snapshot and before the checkpoint it cuts at. With
 * `headsLine: false` the checkpoints carry no session-heads line.
 */
function racingSource(ledger: Ledger, { headsLine = true } = {}): ExportSource {
  let raced = false;
  return {
    host: ledger.host,
    log: ledger.log,
    blobs: ledger.blobs,
    checkpoint: async () => {
      if (!raced) {
        raced = true;
        await ledger.publish({ principal: 'alice', session: 's9', run: 'r1' }, sampleSummary('a9'));
      }
      const c = await ledger.checkpoint();
      return headsLine ? c : { note: c.note, checkpoint: { ...c.checkpoint, extensions: [] } };
    },
  };
}

describe('exportBundle', () => {
  it('writes every envelope byte for byte in global log order, the header, and the blobs', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      const out = join(dir, 'bundle');
      const result = await exportBundle(ledger, {
        out,
        withBlobs: true,
        clock: () => new Date('2026-02-01T00:00:00.000Z'),
      });
      expect(readFileSync(join(out, 'manifests.jsonl'), 'utf8')).toBe(
        (await storedLines(ledger)).map((l) => `${l}\n`).join(''),
      );
      const header = parseBundleHeader(readFileSync(join(out, 'bundle.json'), 'utf8'));
      expect(header).toEqual({
        format: 'handoff-ledger-bundle',
        version: 1,
        exportedAt: '2026-02-01T00:00:00.000Z',
        host: 'host-a',
        counts: { manifests: 6, chains: 3, blobs: 6 },
        filters: {},
      });
      expect(result.header).toEqual(header);
      expect(readdirSync(join(out, 'blobs', 'blake3'))).toHaveLength(6);
      expect(readdirSync(dir).sort()).toEqual(['bundle', 'store']); // no staging directory left
      const report = await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore() });
      expect(report.findings).toEqual([]);
      expect(report.counts).toMatchObject({ manifests: 6, chains: 3, blobsChecked: 6 });
    } finally {
      await ledger.close();
    }
  });

  it('exports one whole chain with --session, and every chain a principal published in with --principal', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      const s1 = await exportBundle(ledger, { out: join(dir, 's1'), session: 's1' });
      expect(s1.header.counts).toEqual({ manifests: 3, chains: 1 });
      const bob = await exportBundle(ledger, { out: join(dir, 'bob'), principal: 'bob' });
      expect(bob.header).toMatchObject({ counts: { manifests: 5, chains: 2 }, filters: { principal: 'bob' } });
      // The auditor names the scope asked for (the header's filters alone are SCOPE_UNCONFIRMED).
      for (const [b, scope] of [
        [s1, { session: 's1' }],
        [bob, { principal: 'bob' }],
      ] as const) {
        const r = await verifyBundle(await openBundleDir(b.dir), { trust: ledger.trustStore(), scope });
        expect(r.findings).toEqual([]);
      }
    } finally {
      await ledger.close();
    }
  });

  it('refuses an existing target with BUNDLE_EXISTS, a bad filter id with INVALID_ID and a bad signal with INVALID_ARGUMENT, as the ledger does', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      await expect(exportBundle(ledger, { out: join(dir, 'store') })).rejects.toMatchObject({
        name: 'AuditError',
        code: 'BUNDLE_EXISTS',
      });
      await expect(exportBundle(ledger, { out: join(dir, 'x'), session: '../etc' })).rejects.toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ID',
      });
      // A signal that is not an AbortSignal could never cancel: refused as the ledger's operations refuse it.
      await expect(exportBundle(ledger, { out: join(dir, 'x'), signal: {} as AbortSignal })).rejects.toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
      });
      expect(existsSync(join(dir, 'x'))).toBe(false);
    } finally {
      await ledger.close();
    }
  });

  it.each(['first', 'last'] as const)(
    'refuses with BUNDLE_EXISTS a directory that appears at --out at the %s step of publishing, and never replaces it',
    async (moment) => {
      const dir = tempDir();
      const ledger = await ledgerWithChains(join(dir, 'store'));
      const out = join(dir, 'bundle');
      try {
        let swapped = false;
        // Someone removes the empty claim and makes a directory of their own there (mode 0755: not the claim's).
        const swap = async () => {
          if (swapped) return;
          swapped = true;
          await rm(out, { recursive: true });
          await mkdir(out, { mode: 0o755 });
        };
        const inside = (p: string) => p === out || p.startsWith(`${out}/`);
        const due = (p: string) => inside(p) && (moment === 'first' || p.endsWith('bundle.json'));
        // Whatever makes the bundle appear at the target (a rename, or mkdir and link into it) meets the swap.
        const fs: FsOps = {
          ...nodeFsOps,
          rename: async (a, b) => {
            if (inside(b)) await swap();
            return nodeFsOps.rename(a, b);
          },
          mkdir: async (p, mode) => {
            if (p !== out && due(p)) await swap();
            return nodeFsOps.mkdir(p, mode);
          },
          link: async (a, b) => {
            if (due(b)) await swap();
            return nodeFsOps.link(a, b);
          },
        };
        const err = await exportBundle(ledger, { out, withBlobs: true, fs }).catch((e) => e);
        expect(swapped).toBe(true);
        expect(err).toBeInstanceOf(AuditError);
        expect(err.code).toBe('BUNDLE_EXISTS');
        // The directory that appeared is still the one there, and it did not become a bundle.
        expect((await lstat(out)).mode & 0o777).toBe(0o755);
        await expect(openBundleDir(out)).rejects.toMatchObject({ code: 'BUNDLE_INVALID' });
        expect(readdirSync(dir).filter((n) => n.endsWith('.partial'))).toEqual([]);
      } finally {
        await ledger.close();
      }
    },
  );

  it('exports where the platform reports the change time as birth time (Node without statx), the claim held by its inode', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      // libuv fills st_birthtim with st_ctim on Linux when statx is unavailable (kernels before 4.11, seccomp filters
      // that refuse it, WSL 1): the claim's "birth time" then moves with every entry published into it.
      const fs: FsOps = {
        ...nodeFsOps,
        lstat: (async (path: string, options?: { bigint?: boolean }) => {
          const st = await nodeFsOps.lstat(path, options as { bigint: true });
          if (options?.bigint) Object.defineProperty(st, 'birthtimeNs', { value: st.ctimeNs });
          return st;
        }) as FsOps['lstat'],
      };
      const out = join(dir, 'bundle');
      const result = await exportBundle(ledger, { out, withBlobs: true, fs });
      expect(result.header.counts).toEqual({ manifests: 6, chains: 3, blobs: 6 });
      expect((await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore() })).ok).toBe(true);
      expect(readdirSync(dir).sort()).toEqual(['bundle', 'store']);
      // A directory put in the claim's place between its first look and its opening is not taken for it.
      const taken = join(dir, 'taken');
      const swapping: FsOps = {
        ...fs,
        open: async (path, flags, mode) => {
          if (path === taken) {
            await rm(taken, { recursive: true });
            await mkdir(taken, { mode: 0o700 });
          }
          return nodeFsOps.open(path, flags, mode);
        },
      };
      const err = await exportBundle(ledger, { out: taken, fs: swapping }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'BUNDLE_EXISTS' });
      expect(readdirSync(taken)).toEqual([]);
      expect(readdirSync(dir).sort()).toEqual(['bundle', 'store', 'taken']);
    } finally {
      await ledger.close();
    }
  });

  it('exports to a target whose name is 240 characters long (the staging name does not grow with it)', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      const out = join(dir, 'b'.repeat(240));
      const result = await exportBundle(ledger, { out, withBlobs: true });
      expect(result.header.counts).toEqual({ manifests: 6, chains: 3, blobs: 6 });
      const report = await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore() });
      expect(report.findings).toEqual([]);
      expect(readdirSync(dir).sort()).toEqual(['b'.repeat(240), 'store']);
    } finally {
      await ledger.close();
    }
  });

  it('is BUNDLE_IO naming a thrown value that is no Error, or an Error with a megabyte message, bounded', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      // `${err}` of a value whose toString throws threw that error in place of BUNDLE_IO; a megabyte message was copied.
      const thrown: Array<[unknown, string]> = [
        [
          {
            toString: () => {
              throw new TypeError('toString says no');
            },
          },
          'an object',
        ],
        ['disk gone', 'disk gone'],
        [new Error(`EIO ${'x'.repeat(1024 * 1024)}`), 'EIO xxx'],
      ];
      for (const [value, says] of thrown) {
        const fs: FsOps = { ...nodeFsOps, mkdir: () => Promise.reject(value) };
        const err = await exportBundle(ledger, { out: join(dir, 'bundle'), fs }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AuditError);
        expect((err as AuditError).code).toBe('BUNDLE_IO');
        expect((err as AuditError).message).toContain(`failed: ${says}`);
        expect((err as AuditError).message.length).toBeLessThan(5000);
      }
    } finally {
      await ledger.close();
    }
  });

  it('leaves no bundle and no staging directory when an fsync fails', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      let calls = 0;
      const fs: FsOps = {
        ...nodeFsOps,
        fsync: async (h) => {
          if (++calls === 3) throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
          return nodeFsOps.fsync(h);
        },
      };
      const err = await exportBundle(ledger, { out: join(dir, 'bundle'), withBlobs: true, fs }).catch((e) => e);
      expect(err).toBeInstanceOf(AuditError);
      expect(err.code).toBe('BUNDLE_IO');
      expect(readdirSync(dir)).toEqual(['store']);
    } finally {
      await ledger.close();
    }
  });

  it('exports without a blob the store cannot return intact, so verify reports BLOB_MISSING', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    const ledger = await ledgerWithChains(root, 0);
    try {
      const digest = (await ledger.resume({ principal: 'carol', session: 's3' }))!.manifest.summary.digest;
      const hex = digestHex(digest);
      const h = await open(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex), 'r+');
      await h.write(Buffer.from('X'), 0, 1, 0);
      await h.close();
      const result = await exportBundle(ledger, { out: join(dir, 'bundle'), withBlobs: true });
      expect(result.unavailableBlobs).toEqual([{ digest, code: 'BLOB_INTEGRITY' }]);
      const r = await verifyBundle(await openBundleDir(result.dir), { trust: ledger.trustStore() });
      expect(r.findings.map((f) => `${f.code}@${f.line}`)).toEqual(['BLOB_MISSING@6']);
    } finally {
      await ledger.close();
    }
  });
  it('reads a blob larger than its manifest says no further than that size: left out BLOB_INTEGRITY, as resume refuses it', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    // The bytes read from each blob file, by path.
    const read = new Map<string, number>();
    const fs: FsOps = {
      ...nodeFsOps,
      async open(path, flags, mode) {
        const handle = await nodeFsOps.open(path, flags, mode);
        if (path.includes('/blobs-v1/')) {
          const readOf = handle.read.bind(handle) as (...args: unknown[]) => Promise<{ bytesRead: number }>;
          handle.read = (async (...args: unknown[]) => {
            const r = await readOf(...args);
            read.set(path, (read.get(path) ?? 0) + r.bytesRead);
            return r;
          }) as typeof handle.read;
        }
        return handle;
      },
    };
    const ledger = await ledgerWithChains(root, 0, fs);
    try {
      const { digest, size } = (await ledger.resume({ principal: 'carol', session: 's3' }))!.manifest.summary;
      const hex = digestHex(digest);
      const path = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      // The summary's bytes with 4 MiB more after them: larger than the manifest says, within the store's limit.
      const h = await open(path, 'a');
      await h.write(Buffer.alloc(4 * 1024 * 1024));
      await h.close();
      read.clear();
      const result = await exportBundle(ledger, { out: join(dir, 'bundle'), withBlobs: true });
      expect(result.unavailableBlobs).toEqual([{ digest, code: 'BLOB_INTEGRITY' }]);
      expect(read.get(path) ?? 0).toBeLessThanOrEqual(size);
      expect(result.header.counts).toEqual({ manifests: 6, chains: 3, blobs: 5 });
      await expect(ledger.resume({ principal: 'carol', session: 's3' })).rejects.toMatchObject({
        code: 'BLOB_INTEGRITY',
        message: expect.stringContaining(`larger than the manifest's ${size} bytes`),
      });
    } finally {
      await ledger.close();
    }
  });
  it('leaves out, and lists, a blob whose path holds a symlink or a directory, as one missing or corrupt', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    const ledger = await ledgerWithChains(root, 0);
    try {
      const blobPath = async (principal: string, session: string) => {
        const digest = (await ledger.resume({ principal, session }))!.manifest.summary.digest;
        const hex = digestHex(digest);
        return { digest, path: join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex) };
      };
      const linked = await blobPath('bob', 's2');
      const dirAt = await blobPath('carol', 's3');
      await writeFile(join(dir, 'elsewhere'), 'not a blob');
      await rm(linked.path);
      await symlink(join(dir, 'elsewhere'), linked.path);
      await rm(dirAt.path);
      await mkdir(dirAt.path);
      const result = await exportBundle(ledger, { out: join(dir, 'bundle'), withBlobs: true });
      expect(result.unavailableBlobs).toEqual([
        { digest: linked.digest, code: 'UNSAFE_PATH' },
        { digest: dirAt.digest, code: 'UNSAFE_PATH' },
      ]);
      expect(result.header.counts).toEqual({ manifests: 6, chains: 3, blobs: 4 });
      const r = await verifyBundle(await openBundleDir(result.dir), { trust: ledger.trustStore() });
      expect(r.findings.map((f) => `${f.code}@${f.line}`)).toEqual(['BLOB_MISSING@5', 'BLOB_MISSING@6']);
    } finally {
      await ledger.close();
    }
  });

  it('refuses, with RECORD_CORRUPT naming it and fsck, an export that needs an unreadable record, and leaves nothing', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      await (ledger.log as LevelManifestLog).raw.put('e!s2!000000000001', '{not json');
      // A full or --principal export reads the whole log; --session s2 reads s2's chain.
      for (const options of [{}, { principal: 'alice' }, { session: 's2' }, { session: 's2', principal: 'bob' }]) {
        const err = await exportBundle(ledger, { out: join(dir, 'bundle'), withBlobs: true, ...options }).catch(
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ManifestError);
        expect(err).toMatchObject({ code: 'RECORD_CORRUPT' });
        expect((err as Error).message).toMatch(/record e!s2!000000000001 is corrupt: not JSON; no bundle was written/);
        expect((err as Error).message).toContain('run `handoff-ledger fsck`');
        expect(readdirSync(dir)).toEqual(['store']);
      }
      // --session s1 reads s1's chain alone: s2's damage does not stop it.
      for (const [name, options] of [
        ['s1', { session: 's1' }],
        ['alice-s1', { session: 's1', principal: 'alice' }],
      ] as const) {
        const result = await exportBundle(ledger, { out: join(dir, name), withBlobs: true, ...options });
        expect(result.header.counts).toEqual({ manifests: 3, chains: 1, blobs: 3 });
        const report = await verifyBundle(await openBundleDir(result.dir), {
          trust: ledger.trustStore(),
          scope: options,
        });
        expect(report.findings).toEqual([]);
        expect(report.checked.completeness).toEqual({ checked: true, sessions: 1 });
      }
    } finally {
      await ledger.close();
    }
  });
});

describe('export and verify commands', () => {
  it('export --out writes a bundle that verify --trust passes with exit 0', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    await (await ledgerWithChains(root)).close();
    const ex = captureIo();
    expect(
      await exportCli(['--root', root, '--host', 'host-a', '--out', join(dir, 'bundle'), '--with-blobs'], ex.io),
    ).toBe(0);
    expect(ex.stdout()).toContain('exported 6 manifests in 3 chains and 6 blobs');
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    await writeFile(join(dir, 'keys.json'), JSON.stringify(ledger.trustStore()));
    await ledger.close();
    const v = captureIo();
    expect(await verifyCli([join(dir, 'bundle'), '--trust', join(dir, 'keys.json')], v.io)).toBe(0);
    expect(v.stdout()).toMatch(/verdict: OK — 6 manifests in 3 chains verified, 6 blobs checked\n$/);
  });

  it('export exits 2 with BUNDLE_EXISTS for an existing target and with usage errors', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    await (await ledgerWithChains(root)).close();
    const a = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a', '--out', root], a.io)).toBe(2);
    expect(a.stderr()).toContain('BUNDLE_EXISTS');
    const b = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a'], b.io)).toBe(2);
    expect(b.stderr()).toContain('--out DIR is required');
  });

  it('says an existing --out that is a file is one (BUNDLE_EXISTS, exit 2), and leaves it as it was', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    await (await ledgerWithChains(root)).close();
    const file = join(dir, 'notes.txt');
    writeFileSync(file, 'mine');
    const c = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a', '--out', file], c.io)).toBe(2);
    expect(c.stderr()).toBe(
      `handoff-ledger: BUNDLE_EXISTS: "${file}" is a regular file, not a new directory: export writes the bundle as a directory it makes there; export never overwrites\n`,
    );
    expect(readFileSync(file, 'utf8')).toBe('mine');
    // A symbolic link (even to nothing) is named as one; an existing directory as before.
    const link = join(dir, 'link');
    await symlink(join(dir, 'nowhere'), link);
    const l = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a', '--out', link], l.io)).toBe(2);
    expect(l.stderr()).toContain(`BUNDLE_EXISTS: "${link}" is a symbolic link, not a new directory`);
    expect(existsSync(join(dir, 'nowhere'))).toBe(false);
    const d = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a', '--out', dir], d.io)).toBe(2);
    expect(d.stderr()).toBe(`handoff-ledger: BUNDLE_EXISTS: "${dir}" already exists; export never overwrites\n`);
  });
});

describe('export into the store root', () => {
  it('is refused (USAGE, exit 2, as keys export --out there) with nothing made: a bundle in <root>/tmp/ was deleted by the next open', async () => {
    const dir = tempDir();
    const root = join(dir, 'store');
    await (await ledgerWithChains(root)).close();
    for (const out of [join(root, 'tmp', 'audit'), join(root, 'audit'), join(root, 'keys', 'x', 'audit')]) {
      const c = captureIo();
      expect(await exportCli(['--root', root, '--host', 'host-a', '--out', out, '--json'], c.io), out).toBe(2);
      const { error } = JSON.parse(c.stdout()) as { error: { code: string; message: string } };
      expect(error, out).toMatchObject({
        code: 'USAGE',
        message: expect.stringContaining(`--out "${out}" is inside the store root "${root}"`),
      });
      expect(existsSync(out), out).toBe(false);
    }
    // The same through a path that reaches the root by another name (a symlink to it).
    const alias = join(dir, 'alias');
    await symlink(root, alias);
    const c = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a', '--out', join(alias, 'tmp', 'audit')], c.io)).toBe(2);
    expect(c.stderr()).toMatch(/^handoff-ledger: USAGE: --out .* is inside the store root /);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    // The library refuses it too, with its own code (a library caller passes no option string).
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      await expect(exportBundle(ledger, { out: join(root, 'tmp', 'audit') })).rejects.toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
      });
    } finally {
      await ledger.close();
    }
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    // Beside the root: written as ever.
    const ok = captureIo();
    expect(await exportCli(['--root', root, '--host', 'host-a', '--out', join(dir, 'audit')], ok.io)).toBe(0);
  });
});

describe('export interrupted by a signal', () => {
  const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
  const HOLD = fileURLToPath(new URL('../support/hold-export-staging.mjs', import.meta.url));

  it.skipIf(process.platform !== 'linux').each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)(
    'on %s removes its staging directory and its claim, exits %i, and the same export then succeeds',
    async (signal, code) => {
      expect(existsSync(CLI), 'dist/ is built by `npm test` (pretest)').toBe(true);
      const dir = tempDir();
      const root = join(dir, 'store');
      await (await ledgerWithChains(root, 0)).close();
      const args = ['--root', root, '--host', 'host-a', '--out', join(dir, 'bundle'), '--with-blobs'];
      // The preload holds the export at its first blob copy until the signal has come (see the file).
      const child = spawn(process.execPath, ['--import', HOLD, CLI, 'export', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
      const staged = () => readdirSync(dir).some((n) => n.endsWith('.partial'));
      while (!staged() && child.exitCode === null) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(existsSync(join(dir, 'bundle')), 'the claim is made before the staging directory').toBe(true);
      child.kill(signal);
      expect(await exited, stderr).toBe(code);
      expect(stderr).toContain(`handoff-ledger: CANCELLED: export interrupted by ${signal}; no bundle was written`);
      expect(readdirSync(dir)).toEqual(['store']);
      const again = captureIo();
      expect(await exportCli(args, again.io), again.stderr()).toBe(0);
      expect(again.stdout()).toContain('exported 6 manifests in 3 chains and 6 blobs');
    },
    60_000,
  );

  it.skipIf(process.platform !== 'linux').each([
    ['SIGINT', 'SIGINT'],
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
  ] as const)(
    'a second signal ends an export whose stopping hangs at once: %s then %s (a SIGTERM after SIGINT waited for it)',
    async (first, second) => {
      const dir = tempDir();
      const root = join(dir, 'store');
      await (await ledgerWithChains(root, 0)).close();
      const args = ['--root', root, '--host', 'host-a', '--out', join(dir, 'bundle'), '--with-blobs'];
      // The staged blob's fsync goes on only 20 s after the first signal: a stalled disk.
      const child = spawn(process.execPath, ['--import', HOLD, CLI, 'export', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, HOLD_EXPORT_AFTER_SIGNAL_MS: '20000' },
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.on('close', (code, signal) => resolve({ code, signal })),
      );
      const until = async (text: string) => {
        while (!stderr.includes(text) && child.exitCode === null) await new Promise((r) => setTimeout(r, 5));
      };
      await until('export holding fsync');
      child.kill(first);
      await until('export held');
      // Ended by the second signal itself (no exit code): an export that waited out the held fsync would exit with
      // one, so no bound on the clock is needed (10 s was one a loaded machine could pass).
      child.kill(second);
      expect(await exited, stderr).toEqual({ code: null, signal: second });
      // Ended outright: its claim and staging stay, and the next export removes them.
      const again = captureIo();
      expect(await exportCli(args, again.io), again.stderr()).toBe(0);
      expect(readdirSync(dir).sort()).toEqual(['bundle', 'store']);
    },
    60_000,
  );

  it.skipIf(process.platform !== 'linux')(
    'killed (SIGKILL) mid-export: the next export to the same target removes its claim and staging, and succeeds',
    async () => {
      const dir = tempDir();
      const root = join(dir, 'store');
      await (await ledgerWithChains(root, 0)).close();
      const args = ['--root', root, '--host', 'host-a', '--out', join(dir, 'bundle'), '--with-blobs'];
      const child = spawn(process.execPath, ['--import', HOLD, CLI, 'export', ...args], { stdio: 'ignore' });
      const exited = new Promise<unknown>((resolve) => child.on('close', resolve));
      const staged = () => readdirSync(dir).some((n) => n.endsWith('.partial'));
      while (!staged() && child.exitCode === null) await new Promise((resolve) => setTimeout(resolve, 5));
      child.kill('SIGKILL'); // no handler runs: the claim, the staging (copies of summaries) and the owner stay
      await exited;
      expect(readdirSync(dir).filter((n) => n !== 'store').length).toBe(3);
      const again = captureIo();
      expect(await exportCli(args, again.io), again.stderr()).toBe(0);
      expect(again.stdout()).toContain('exported 6 manifests in 3 chains and 6 blobs');
      expect(readdirSync(dir).sort()).toEqual(['bundle', 'store']);
      // An export still running is never touched: its owner record names a live process (this one).
      const alive = join(dir, '.handoff-ledger-export.0.0.partial');
      mkdirSync(alive);
      writeFileSync(
        join(dir, '.handoff-ledger-export.0.0.claim'),
        JSON.stringify({ host: hostname(), pid: process.pid, out: join(dir, 'other'), claim: 'x' }),
      );
      const third = captureIo();
      expect(await exportCli([...args.slice(0, 4), '--out', join(dir, 'third')], third.io), third.stderr()).toBe(0);
      expect(existsSync(alive)).toBe(true);
    },
    60_000,
  );
});

describe('export beside records of exports it did not make', () => {
  it.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0)(
    "removes nothing a record another user planted names, and is not held by a FIFO in a record's place",
    async () => {
      const dir = tempDir();
      const root = join(dir, 'store');
      await (await ledgerWithChains(root, 0)).close();
      // A directory of this user's, without bundle.json, named by a record another user wrote (dead process).
      const mine = join(dir, 'mine');
      mkdirSync(mine, { mode: 0o700 });
      writeFileSync(join(mine, 'keep.txt'), 'mine');
      const st = await lstat(mine, { bigint: true });
      const planted = join(dir, '.handoff-ledger-export.1.0123456789abcdef.claim');
      writeFileSync(
        planted,
        JSON.stringify({
          host: hostname(),
          pid: 2 ** 22 + 1, // no such process
          out: mine,
          claim: `${st.dev}:${st.ino}:${st.birthtimeNs}:${st.uid}:${st.mode}`,
        }),
      );
      chownSync(planted, 65534, 65534);
      execFileSync('mkfifo', [join(dir, '.handoff-ledger-export.2.0123456789abcdef.claim')]);
      const c = captureIo();
      expect(
        await exportCli(['--root', root, '--host', 'host-a', '--out', join(dir, 'bundle')], c.io),
        c.stderr(),
      ).toBe(0);
      expect(readFileSync(join(mine, 'keep.txt'), 'utf8')).toBe('mine');
      expect(existsSync(planted)).toBe(true);
    },
    60_000,
  );
});

describe('export beside damaged records of its own', () => {
  it('a claim record that is JSON but no object (null, a number, a list) is left as damaged, not a TypeError of the export', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'), 0);
    try {
      const records = ['null', '7', '[]', '"x"'].map((text, i) => {
        const path = join(dir, `.handoff-ledger-export.${i}.0123456789abcdef.claim`);
        writeFileSync(path, text);
        return path;
      });
      const r = await exportBundle(ledger, { out: join(dir, 'bundle') });
      expect(r.header.counts.manifests).toBe(6);
      for (const path of records) expect(existsSync(path)).toBe(true);
    } finally {
      await ledger.close();
    }
  });
});

describe('exportBundle: session-heads proofs at the cut', () => {
  it('cuts again when the log moved on between the checkpoint and the proofs, and the bundle verifies', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      const stale = await ledger.checkpoint();
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a3'));
      let calls = 0;
      // The first checkpoint handed out predates s1's newest manifest: the index's s1 leaf no longer matches it.
      const source = {
        host: ledger.host,
        log: ledger.log,
        blobs: ledger.blobs,
        checkpoint: async () => (calls++ === 0 ? stale : ledger.checkpoint()),
      };
      const out = join(dir, 'bundle');
      await exportBundle(source, { out, session: 's1' });
      expect(calls).toBe(2);
      const heads = readFileSync(join(out, 'heads.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(heads).toEqual([{ session: 's1', head: expect.objectContaining({ seq: 3 }), proof: expect.any(Object) }]);
      const report = await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore(), expect: 'filtered' });
      expect(report.findings).toEqual([]);
      expect(report.checked.completeness).toEqual({ checked: true, sessions: 1 });
      // A log that never holds still for a cut: BUNDLE_IO, and no bundle.
      const never = { ...source, checkpoint: async () => stale };
      const err = await exportBundle(never, { out: join(dir, 'never'), session: 's1' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuditError);
      expect((err as AuditError).code).toBe('BUNDLE_IO');
      expect(existsSync(join(dir, 'never'))).toBe(false);
    } finally {
      await ledger.close();
    }
  });

  it('cuts filtered exports while four writers keep publishing: each one succeeds and verifies, --since too', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    const earlier = (await ledger.checkpoint()).note;
    let stop = false;
    let n = 0;
    const writers = [0, 1, 2, 3].map(async (w) => {
      while (!stop)
        await ledger.publish({ principal: w % 2 ? 'bob' : 'alice', session: `w${w}`, run: 'r' }, sampleSummary(n++));
    });
    try {
      const trust = ledger.trustStore();
      for (let k = 0; k < 4; k++) {
        for (const filter of [{ session: 'w1' }, { session: 's1' }, { principal: 'alice' }, { session: 'absent' }]) {
          const out = join(dir, `bundle-${k}-${Object.values(filter)[0]}`);
          await exportBundle(ledger, { out, since: earlier, ...filter });
          const report = await verifyBundle(await openBundleDir(out), { trust, since: earlier, scope: filter });
          expect(report.findings, JSON.stringify(filter)).toEqual([]);
          expect(report.checked.completeness).toMatchObject({ checked: true });
        }
      }
      expect(n).toBeGreaterThan(20); // the writers ran throughout
    } finally {
      stop = true;
      await Promise.all(writers);
      await ledger.close();
    }
  }, 120_000);

  it('cuts a filtered export at an older checkpoint that carries no session-heads line (no proofs to match)', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      const old = await ledger.checkpoint();
      const fixed = { note: old.note, checkpoint: { ...old.checkpoint, extensions: [] as string[] } };
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('later'));
      const source = { host: ledger.host, log: ledger.log, blobs: ledger.blobs, checkpoint: async () => fixed };
      const out = join(dir, 'bundle');
      const result = await exportBundle(source, { out, session: 's1' });
      // The manifests of the older tree only, and no heads file (nothing to prove them against).
      const s1Before = (await ledger.history({ principal: 'alice', session: 's1' })).length - 1;
      expect(result.header.counts.manifests).toBe(s1Before);
      expect(existsSync(join(out, 'heads.jsonl'))).toBe(false);
    } finally {
      await ledger.close();
    }
  });

  it('holds every session of a principal inside the cut, one begun just before the cut included', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'));
    try {
      const out = join(dir, 'bundle');
      await exportBundle(racingSource(ledger), { out, principal: 'alice' });
      expect(new Set(bundleSessions(out))).toEqual(new Set(['s1', 's9']));
      const report = await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore(), expect: 'filtered' });
      expect(report.findings).toEqual([]);
      expect(report.checked.completeness).toEqual({ checked: true, sessions: 2 });
    } finally {
      await ledger.close();
    }
  });

  // A source whose checkpoints carry no session-heads line (an `ExportSource` of its own, or a log whose index cannot
  // give its root): a filtered export has no heads to prove, but must still hold every chain of the principal inside
  // the tree it cuts at, one begun between the log's read snapshot and the checkpoint included.
  it('holds a session the principal began between the read snapshot and a checkpoint without a session-heads line', async () => {
    const dir = tempDir();
    const ledger = await openLedger({ root: join(dir, 'store'), host: 'host-a', onNotice: () => {} });
    try {
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a0'));
      await ledger.publish({ principal: 'bob', session: 's2', run: 'r1' }, sampleSummary('b0'));
      expect(ledger.log.readSnapshot).toBeTypeOf('function'); // the snapshot path is the one under test
      const out = join(dir, 'bundle');
      const result = await exportBundle(racingSource(ledger, { headsLine: false }), { out, principal: 'alice' });
      expect(bundleSessions(out)).toEqual(['s1', 's9']);
      expect(result.header.counts).toEqual({ manifests: 2, chains: 2 });
    } finally {
      await ledger.close();
    }
  });
});

describe('export of a ledger that is closed meanwhile', () => {
  it('close() waits for the export under way, which completes; an export of a closed ledger is CLOSED', async () => {
    const dir = tempDir();
    const ledger = await openLedger({ root: join(dir, 'store'), host: 'host-a', onNotice: () => {} });
    // More entries than the log reads at once (256): the export reads again after the close began.
    for (let i = 0; i < 300; i++)
      await ledger.publish({ principal: 'alice', session: `s${i % 4}`, run: 'r' }, sampleSummary(i));
    // The ledger is closed as soon as the export reads its first entry.
    const log = ledger.log as unknown as { entries: (after?: number) => AsyncIterable<unknown> };
    const entries = log.entries.bind(log);
    let closing: Promise<void> | undefined;
    log.entries = async function* (after) {
      for await (const entry of entries(after)) {
        if (!closing) {
          closing = ledger.close();
          // Time for a close that does not wait for the export to close the stores under it.
          await new Promise((r) => setTimeout(r, 100));
        }
        yield entry;
      }
    };
    const out = join(dir, 'bundle');
    const result = await exportBundle(ledger, { out });
    await closing;
    expect(result.header.counts.manifests).toBe(300);
    expect((await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore() })).ok).toBe(true);
    await expect(exportBundle(ledger, { out: join(dir, 'after') })).rejects.toMatchObject({ code: 'CLOSED' });
    expect(existsSync(join(dir, 'after'))).toBe(false);
  });
});

describe('export under an injected fault at each of its filesystem calls', () => {
  it('reports a coded failure and leaves no bundle, claim, staging or record; the same export then succeeds', async () => {
    const dir = tempDir();
    const ledger = await ledgerWithChains(join(dir, 'store'), 0); // blob files: the bundle carries blobs
    const plan = new FaultPlan();
    try {
      plan.resetCounts();
      await exportBundle(ledger, { out: join(dir, 'counted'), fs: plan.fs, withBlobs: true });
      const calls = Object.entries(plan.calls) as Array<[FaultOp, number]>;
      // The steps this test is about are among them: the claim's look, the links, the last flushes.
      expect(calls.map(([op]) => op)).toEqual(expect.arrayContaining(['lstat', 'link', 'fsyncDir', 'mkdir', 'rm']));
      const problems: string[] = [];
      const survived: string[] = [];
      let n = 0;
      for (const [op, count] of calls)
        for (let nth = 1; nth <= count; nth++) {
          const out = join(dir, `b${n++}`);
          plan.arm(op, nth, 'EIO');
          const failed = await exportBundle(ledger, { out, fs: plan.fs, withBlobs: true }).then(
            () => undefined,
            (err: unknown) => err as { code?: string },
          );
          plan.disarm();
          if (!plan.fired) continue;
          const at = `${op} #${nth}`;
          const beside = readdirSync(dir).filter((name) => name.startsWith('.handoff-ledger-export.'));
          if (failed === undefined) {
            // A fault the export may survive (removing its staging after the bundle is published): then its
            // record stays beside the staging, for a later export to remove both once this process is gone.
            if (!existsSync(join(out, 'bundle.json'))) problems.push(`${at}: succeeded without a bundle`);
            const staged = beside.filter((name) => name.endsWith('.partial'));
            const records = beside.filter((name) => name.endsWith('.claim'));
            if (staged.map((name) => name.replace(/\.partial$/, '.claim')).join() !== records.join())
              problems.push(`${at}: staging and records beside it do not pair (${beside.join(',')})`);
            if (staged.length > 0) survived.push(at);
            for (const name of beside) await rm(join(dir, name), { recursive: true });
          } else {
            if (!['BUNDLE_IO', 'STORAGE_FAILED'].includes(failed.code ?? '')) problems.push(`${at}: ${String(failed)}`);
            if (existsSync(out)) problems.push(`${at}: target left (${readdirSync(out).join(',')})`);
            if (beside.length > 0) problems.push(`${at}: left beside it ${beside.join(',')}`);
          }
          // Run again without the fault (an export left over first is removed by this one: its process is this one,
          // alive, so only a record without staging may remain; none does after a failure).
          const again = join(dir, `again${n}`);
          await exportBundle(ledger, { out: again, withBlobs: true });
          await rm(join(dir, `again${n}`), { recursive: true });
          if (failed !== undefined) await exportBundle(ledger, { out, withBlobs: true });
        }
      expect(problems).toEqual([]);
      expect(survived).toEqual(['rm #1']); // the staging's removal after success: the one fault an export survives
    } finally {
      await ledger.close();
    }
  });
});
