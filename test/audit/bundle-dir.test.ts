import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { bundleBlobPath } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { buildBundle, writeBundleDir } from '../support/bundle-builder.js';
import { tempDir } from '../support/tmp.js';

const listenAt = (path: string) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(path, () => resolve(server));
  });

const found = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

describe('openBundleDir', () => {
  it('treats a symlinked or FIFO blob as missing, without following or blocking on it; the link is said to be one', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    const [d0, d1] = b.manifests.map((m) => m.manifest.summary.digest);
    const p0 = join(dir, bundleBlobPath(d0!));
    writeFileSync(join(dir, 'elsewhere'), b.blobs.get(d0!)!);
    unlinkSync(p0);
    symlinkSync(join(dir, 'elsewhere'), p0);
    const p1 = join(dir, bundleBlobPath(d1!));
    unlinkSync(p1);
    execFileSync('mkfifo', [p1]);
    const r = await verifyBundle(await openBundleDir(dir), { trust: b.trust });
    // The header, as exported, counts 3 blobs; the bundle holds 1 (COUNT_MISMATCH).
    expect(found(r)).toEqual(['BLOB_MISSING@1', 'BLOB_MISSING@2', 'COUNT_MISMATCH@-']);
    // The link in the words verify has for a linked tree file (BUNDLE_IO), its path inside the bundle; the FIFO absent.
    expect(r.findings[0]!.message).toBe(
      `summary blob ${d0}: ${bundleBlobPath(d0!)} is a symbolic link: a bundle's files are read only as regular ` +
        'files in the bundle, never through a link (copy the file itself into the bundle, or export it again)',
    );
    expect(r.findings[1]!.message).toBe(`summary blob ${d1} is not in the bundle`);
  });

  it('does not follow a symlinked blobs/ or blobs/blake3/: one finding says it is a link, no blob is checked elsewhere', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    for (const linked of ['blobs', 'blobs/blake3']) {
      // Counted by the header or not: a link where blobs/ stands says the bundle carries blobs, as a directory does.
      for (const counts of [true, false]) {
        const base = tempDir();
        const elsewhere = join(base, 'elsewhere');
        await writeBundleDir(elsewhere, b.lines, { blobs: b.blobs });
        const dir = join(base, 'bundle');
        await writeBundleDir(dir, b.lines, { blobs: b.blobs });
        rmSync(join(dir, linked), { recursive: true });
        symlinkSync(join(elsewhere, linked), join(dir, linked));
        if (!counts) {
          const header = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
          delete header.counts.blobs;
          writeFileSync(join(dir, 'bundle.json'), JSON.stringify(header));
        }
        const r = await verifyBundle(await openBundleDir(dir), { trust: b.trust });
        const what = `${linked}, counted: ${counts}`;
        // One finding for the bundle (no line), not one per blob; the header's count of 2 held by none of them.
        expect(found(r), what).toEqual(counts ? ['BLOB_MISSING@-', 'COUNT_MISMATCH@-'] : ['BLOB_MISSING@-']);
        expect(r.findings[0]!.message, what).toBe(
          `${linked} is a symbolic link: a bundle's files are read only as regular files in the bundle, never ` +
            'through a link (copy the directory itself into the bundle, or export it again); no blob is read ' +
            'through it (the manifests name 2 summary blobs)',
        );
        expect(r.counts.blobsChecked, what).toBe(2);
      }
    }
  });

  it('ignores files a bundle does not consist of and blobs no manifest names: none is opened, counted or reported', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    // Each would be a finding or a refusal if it were read: blobs no manifest names (bytes that do not hash to the
    // name, a link out of the bundle, a FIFO, an upper-case name, another hash's directory), and beside the bundle's
    // files a backup of manifests.jsonl that is no JSON, notes, a link out of the bundle and a FIFO.
    const blobDir = join(dir, 'blobs/blake3');
    writeFileSync(join(blobDir, 'a'.repeat(64)), 'not the blob it is named after');
    symlinkSync('/etc/passwd', join(blobDir, 'b'.repeat(64)));
    execFileSync('mkfifo', [join(blobDir, 'c'.repeat(64))]);
    writeFileSync(join(blobDir, 'D'.repeat(64)), 'an upper-case name');
    mkdirSync(join(dir, 'blobs/sha256'));
    writeFileSync(join(dir, 'blobs/sha256', 'e'.repeat(64)), 'another hash');
    writeFileSync(join(dir, 'manifests.jsonl.bak'), 'not JSON\n');
    writeFileSync(join(dir, 'README.txt'), 'notes');
    symlinkSync('/etc/passwd', join(dir, 'passwd'));
    execFileSync('mkfifo', [join(dir, 'pipe')]);
    const r = await verifyBundle(await openBundleDir(dir), { trust: b.trust });
    // The header counts the 2 blobs the manifests name: the others are not counted (no COUNT_MISMATCH) nor checked.
    expect(found(r)).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.counts.blobsChecked).toBe(2);
  });

  it('opens a bundle through a link the auditor named (latest -> b1), and still follows none inside it', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const base = tempDir();
    await writeBundleDir(join(base, 'b1'), b.lines, { blobs: b.blobs });
    symlinkSync('b1', join(base, 'latest'));
    for (const named of ['latest', 'latest/']) {
      const r = await verifyBundle(await openBundleDir(join(base, named)), { trust: b.trust });
      expect(r.ok, named).toBe(true);
      expect(r.counts.blobsChecked).toBe(2);
    }
    // A link to something that is not a directory is still refused.
    writeFileSync(join(base, 'file'), 'x');
    symlinkSync('file', join(base, 'to-file'));
    await expect(openBundleDir(join(base, 'to-file'))).rejects.toMatchObject({ code: 'BUNDLE_INVALID' });
  });

  it('checks blobs when the header counts them even if the blobs directory is gone', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: new Map() });
    const r = await verifyBundle(await openBundleDir(dir), { trust: b.trust });
    expect(found(r)).toEqual(['BLOB_MISSING@1', 'BLOB_MISSING@2']);
  });

  it('checks every blob of a bundle with an empty blobs/ directory, with or without blobs/blake3/, its header counting none', async () => {
    // The documented rule (docs/AUDIT.md, web/README.md): a blobs/ directory says the bundle carries blobs. The page
    // reads a dropped folder so (its empty blobs/ is seen); verify took a blobs/ without blobs/blake3/ for none.
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    for (const made of ['blobs', 'blobs/blake3', 'blobs/sha256']) {
      const dir = join(tempDir(), 'bundle');
      await writeBundleDir(dir, b.lines);
      mkdirSync(join(dir, made), { recursive: true });
      const r = await verifyBundle(await openBundleDir(dir), { trust: b.trust });
      expect(found(r), made).toEqual(['BLOB_MISSING@1', 'BLOB_MISSING@2']);
    }
  });

  it('skips blob checks for a bundle exported without blobs', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines);
    const r = await verifyBundle(await openBundleDir(dir), { trust: b.trust });
    expect(r.ok).toBe(true);
    expect(r.counts.blobsChecked).toBe(0);
  });

  it('treats a socket where a blob should be as missing, and a socket tree file as BUNDLE_INVALID (not BUNDLE_IO)', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    const p0 = join(dir, bundleBlobPath(b.manifests[0]!.manifest.summary.digest));
    unlinkSync(p0);
    // A UNIX socket: open(2) fails ENXIO on it, where a FIFO opens (O_NONBLOCK) and is judged by its stat.
    const servers = [await listenAt(p0), await listenAt(join(dir, 'checkpoint.note'))];
    try {
      const reader = await openBundleDir(dir);
      const r = await verifyBundle({ ...reader, treeFile: async () => undefined }, { trust: b.trust });
      expect(found(r)).toEqual(['BLOB_MISSING@1', 'COUNT_MISMATCH@-']);
      await expect(reader.treeFile!('checkpoint.note')).rejects.toMatchObject({
        name: 'AuditError',
        code: 'BUNDLE_INVALID',
        message: /checkpoint\.note" is not a regular file/,
      });
    } finally {
      for (const s of servers) s.close();
    }
  });

  it('refuses a symlinked tree file with BUNDLE_IO saying it is a link, never "too many symbolic links"', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const base = tempDir();
    const dir = join(base, 'bundle');
    await writeBundleDir(dir, b.lines);
    writeFileSync(join(base, 'outside'), 'not a note');
    symlinkSync(join(base, 'outside'), join(dir, 'checkpoint.note'));
    const reader = await openBundleDir(dir);
    // O_NOFOLLOW fails ELOOP, whose own words send an auditor looking for a loop of links.
    const err = await reader.treeFile!('checkpoint.note').then(
      () => undefined,
      (e: unknown) => e as Error & { code: string },
    );
    expect(err).toMatchObject({ name: 'AuditError', code: 'BUNDLE_IO' });
    expect(err!.message).toBe(
      `"${join(dir, 'checkpoint.note')}" is a symbolic link: a bundle's files are read only as regular files in the ` +
        'bundle, never through a link (copy the file itself into the bundle, or export it again)',
    );
  });

  it('judges manifests.jsonl by what it opens, as the tree files are: a FIFO, a socket or a link put in its place after the open', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const base = tempDir();
    const dir = join(base, 'bundle');
    await writeBundleDir(dir, b.lines);
    const path = join(dir, 'manifests.jsonl');
    const read = async (reader: Awaited<ReturnType<typeof openBundleDir>>) => {
      try {
        for await (const _ of reader.manifests()) void _;
      } catch (err) {
        return err as Error & { code: string };
      }
      return undefined;
    };
    // A FIFO opened O_NONBLOCK with no writer reads as empty: the bundle was read as one holding no manifest at all.
    const fifo = await openBundleDir(dir);
    unlinkSync(path);
    execFileSync('mkfifo', [path]);
    expect(await read(fifo)).toMatchObject({
      name: 'AuditError',
      code: 'BUNDLE_INVALID',
      message: `"${path}" is not a regular file`,
    });
    // A socket (open fails ENXIO): BUNDLE_INVALID too, not BUNDLE_IO.
    unlinkSync(path);
    await writeBundleDir(dir, b.lines);
    const socket = await openBundleDir(dir);
    unlinkSync(path);
    const server = await listenAt(path);
    try {
      expect(await read(socket)).toMatchObject({
        code: 'BUNDLE_INVALID',
        message: `"${path}" is not a regular file`,
      });
    } finally {
      server.close();
    }
    rmSync(path, { force: true });
    // A link (O_NOFOLLOW's ELOOP): said to be one, never "too many symbolic links".
    await writeBundleDir(dir, b.lines);
    const linked = await openBundleDir(dir);
    writeFileSync(join(base, 'outside'), readFileSync(path));
    unlinkSync(path);
    symlinkSync(join(base, 'outside'), path);
    const err = await read(linked);
    expect(err).toMatchObject({ name: 'AuditError', code: 'BUNDLE_IO' });
    expect(err!.message).toMatch(
      /manifests\.jsonl" is a symbolic link: a bundle's files are read only as regular files/,
    );
  });

  it('refuses a manifests.jsonl that is a symbolic link when the bundle is opened as it refuses one found later: BUNDLE_IO saying it is a link', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const base = tempDir();
    const dir = join(base, 'bundle');
    await writeBundleDir(dir, b.lines);
    const path = join(dir, 'manifests.jsonl');
    // A link to a regular file: "not a regular file" would send the auditor to look at the file it points to.
    writeFileSync(join(base, 'outside'), readFileSync(path));
    unlinkSync(path);
    symlinkSync(join(base, 'outside'), path);
    const err = await openBundleDir(dir).then(
      () => undefined,
      (e: unknown) => e as Error & { code: string },
    );
    expect(err).toMatchObject({ name: 'AuditError', code: 'BUNDLE_IO' });
    expect(err!.message).toBe(
      `"${path}" is a symbolic link: a bundle's files are read only as regular files in the ` +
        'bundle, never through a link (copy the file itself into the bundle, or export it again)',
    );
  });

  it('refuses an oversized bundle.json and a missing manifests.jsonl with BUNDLE_INVALID', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines);
    unlinkSync(join(dir, 'manifests.jsonl'));
    await expect(openBundleDir(dir)).rejects.toMatchObject({ name: 'AuditError', code: 'BUNDLE_INVALID' });
    writeFileSync(join(dir, 'bundle.json'), ' '.repeat(70_000));
    await expect(openBundleDir(dir)).rejects.toMatchObject({ name: 'AuditError', code: 'BUNDLE_INVALID' });
  });

  it('names a byte order mark that makes bundle.json no JSON (an editor shows none)', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const dir = join(tempDir(), 'bundle');
    await writeBundleDir(dir, b.lines);
    const header = readFileSync(join(dir, 'bundle.json'), 'utf8');
    writeFileSync(join(dir, 'bundle.json'), `\uFEFF${header}`);
    await expect(openBundleDir(dir)).rejects.toMatchObject({
      code: 'BUNDLE_INVALID',
      message: 'bundle.json is not JSON (it begins with a byte order mark, U+FEFF)',
    });
    writeFileSync(join(dir, 'bundle.json'), `${header.slice(0, -3)}`);
    await expect(openBundleDir(dir)).rejects.toMatchObject({ message: 'bundle.json is not JSON' });
  });
});
