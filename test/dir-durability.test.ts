/**
 * Directories are durable in their parents before anything is written under them: every directory a new store
 * makes (including checkpoints/ and keys/, made after the blob store's own flush of the root), and a shard
 * directory a crashed process made but never flushed into its parent. Every directory fsync is recorded with what
 * the directory held at that moment.
 */
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { open, utimes, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { gc } from '../src/ops/maintenance.js';
import { digestHex, digestOf } from '../store/hash/digest.js';
import { validateSummary } from '../src/summary/summary.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { writeFileAtomic } from '../store/fs/atomic-file.js';

const flushes: Array<{ dir: string; held: string[] }> = [];
vi.mock('../store/fs/ops.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../store/fs/ops.js')>();
  const fsyncDir = real.nodeFsOps.fsyncDir;
  real.nodeFsOps.fsyncDir = async (dir: string) => {
    const held = (() => {
      try {
        return readdirSync(dir);
      } catch {
        return [];
      }
    })();
    await fsyncDir(dir);
    flushes.push({ dir, held });
  };
  return real;
});

/** True when `dir` was named in its parent at some fsync of that parent. */
const flushedInParent = (dir: string) =>
  flushes.some((f) => f.dir === dirname(dir) && f.held.includes(dir.split('/').at(-1)!));

describe('directories durable in their parents', () => {
  it('flushes every directory a new store makes into its parent, checkpoints/ and keys/ included', async () => {
    const base = tempDir();
    const root = join(base, 'a', 'store');
    flushes.length = 0;
    const ledger = await openLedger({ root, host: 'h1' });
    await ledger.publish({ principal: 'p', session: 's', run: 'r' }, sampleSummary('first'));
    await ledger.close();
    const made = [
      join(base, 'a'),
      root,
      ...readdirSync(root, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => join(root, d.name)),
    ];
    expect(made).toEqual(
      expect.arrayContaining([join(root, 'checkpoints'), join(root, 'keys'), join(root, 'manifests-v1')]),
    );
    for (const dir of made) expect(flushedInParent(dir), dir).toBe(true);
  });

  it('flushes a shard directory that was already there (made by a process that crashed) into its parent', async () => {
    const root = tempDir();
    await (await openLedger({ root, host: 'h1' })).close();
    const summary = sampleSummary('in a shard another process made');
    const hex = digestHex(digestOf(validateSummary(summary).bytes));
    const shard = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2));
    mkdirSync(join(shard, hex.slice(2, 4)), { recursive: true, mode: 0o700 }); // made, never flushed
    flushes.length = 0;
    const ledger = await openLedger({ root, host: 'h1', inlineSummaryBytes: 0 });
    await ledger.publish({ principal: 'p', session: 's', run: 'r' }, summary);
    await ledger.close();
    expect(flushedInParent(shard)).toBe(true);
    expect(flushedInParent(join(shard, hex.slice(2, 4)))).toBe(true);
  });

  it('writeFileAtomic fsyncs the staging file before it replaces the target, then the directory (pin file, keys, witness state)', async () => {
    // A kill keeps the page cache: only the order of the flushes shows that a power cut leaves the old or the new file.
    const dir = tempDir();
    const target = join(dir, 'file');
    writeFileSync(target, 'old');
    const probe = await open(target, 'r');
    const proto = Object.getPrototypeOf(probe) as FileHandle;
    await probe.close();
    const real = proto.sync;
    /** Each fsync: what it flushed, and what the target held at that moment. */
    const synced: Array<{ path: string; target: string }> = [];
    const sync = vi.spyOn(proto, 'sync').mockImplementation(function (this: FileHandle) {
      synced.push({ path: readlinkSync(`/proc/self/fd/${this.fd}`), target: readFileSync(target, 'utf8') });
      return real.call(this);
    });
    try {
      await writeFileAtomic(target, 'new');
    } finally {
      sync.mockRestore();
    }
    expect(synced).toEqual([
      { path: expect.stringMatching(/\/\.[0-9a-f]{16}\.tmp$/), target: 'old' },
      { path: dir, target: 'new' },
    ]);
    expect(readFileSync(target, 'utf8')).toBe('new');
  });

  it("gc's removal of a blob is durable before gc reports it: gc-aside/ and the shard flushed without it", async () => {
    // gc moves the file into gc-aside/, judges it there and unlinks it. Without a flush of gc-aside/ after that
    // unlink, a crash could leave the name there, and the next open links every file found aside back at its path:
    // a blob gc reported removed would reappear (and be counted, listed and exported again).
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'h1', inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const digest = await ledger.blobs.put(new TextEncoder().encode('an orphan, named by no manifest'));
      const hex = digestHex(digest.digest);
      const shard = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4));
      const old = new Date(Date.now() - 2 * 3_600_000);
      await utimes(join(shard, hex), old, old);
      flushes.length = 0;
      const report = await gc(ledger, { graceMs: 3_600_000 });
      expect(report.removed).toEqual([digest.digest]);
      const asideDir = join(root, 'gc-aside');
      expect(readdirSync(asideDir)).not.toContain(hex);
      expect(flushes.some((f) => f.dir === asideDir && !f.held.includes(hex))).toBe(true);
      expect(flushes.some((f) => f.dir === shard && !f.held.includes(hex))).toBe(true);
    } finally {
      await ledger.close();
    }
  });
});
