/**
 * openBundleDir reads every file within its bound whatever the file's stat says: a file system may report a size of 0
 * for a file with content (procfs, some FUSE ones), and a file may grow between the stat and the read. Here the stat of
 * chosen files reports 0 bytes while the files hold more than their bound.
 */
import { describe, expect, it, vi } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleBlobPath } from '../../manifests/audit/bundle.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { buildBundle, writeBundleDir } from '../support/bundle-builder.js';
import { tempDir } from '../support/tmp.js';

const lying = vi.hoisted(() => new Set<string>());

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const open: typeof actual.open = async (...args) => {
    const h = await actual.open(...args);
    if (lying.has(String(args[0]))) {
      const stat = h.stat.bind(h);
      h.stat = (async (...a: Parameters<typeof stat>) => Object.assign(await stat(...a), { size: 0 })) as never;
    }
    return h;
  };
  return { ...actual, open, default: { ...actual, open } };
});

describe('openBundleDir under a stat that reports 0 bytes', () => {
  it('refuses a bundle.json over its 64 KiB bound as BUNDLE_INVALID, read no further than the bound', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    const header = join(dir, 'bundle.json');
    // Still one JSON document: read whole, it parsed and the bound did nothing.
    writeFileSync(header, `${(await import('node:fs')).readFileSync(header, 'utf8').trimEnd()}${' '.repeat(70_000)}\n`);
    lying.add(header);
    try {
      await expect(openBundleDir(dir)).rejects.toMatchObject({
        name: 'AuditError',
        code: 'BUNDLE_INVALID',
        message: expect.stringContaining(`"${header}" is over 65536 bytes when read (its size said 0)`),
      });
    } finally {
      lying.delete(header);
    }
  });

  it('reads a blob no further than its signed size, and gives the size it found over it, no bytes', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    const digest = b.manifests[0]!.manifest.summary.digest;
    const signed = b.manifests[0]!.manifest.summary.size;
    const path = join(dir, bundleBlobPath(digest));
    writeFileSync(path, Buffer.concat([Buffer.from(b.blobs.get(digest)!), Buffer.alloc(3 * 1024 * 1024)]));
    lying.add(path);
    try {
      const reader = await openBundleDir(dir);
      const got = await reader.readBlob!(digest, signed);
      // Read whole before (3 MiB in memory for a blob signed at a few bytes); now one byte past the signed size tells
      // it is over, and with a stat that says 0, that byte is all the size known.
      expect(got).toEqual({ size: signed + 1 });
    } finally {
      lying.delete(path);
    }
  });
});
