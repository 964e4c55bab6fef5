/**
 * A store written by format version 1 (test/fixtures/store-v1, see write-store-v1.ts) opens, verifies and
 * grows under the current code. The on-disk layout and the manifest format are the semver contract
 * (README "Compatibility"): when this test needs the fixture rewritten, the format changed, and the change
 * needs a version field and a reader or migration for this fixture — not a new fixture in its place.
 */
import { chmod, cp, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { FIXTURE, FIXTURE_ROOT, writeStoreFixture } from './fixtures/write-store-v1.js';
import { tempDir } from './support/tmp.js';

/** Entries git can keep: empty directories (tmp/, quarantine/) are re-created on open. */
async function keptEntries(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true }))
    if (!e.isDirectory() || (await readdir(join(dir, e.name))).length > 0) out.push(e.name);
  return out.sort();
}

/** A private copy: opening a store recovers it and LevelDB rewrites its files; git keeps no modes. */
async function copyOfFixture(): Promise<string> {
  const root = join(tempDir(), 'store');
  await cp(FIXTURE_ROOT, root, { recursive: true });
  const walk = async (dir: string): Promise<void> => {
    await chmod(dir, 0o700);
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else await chmod(p, 0o600);
    }
  };
  await walk(root);
  return root;
}

describe('a store written by format version 1', () => {
  it('keeps the version-1 layout: blobs-v1/blake3, manifests-v1, keys/, trust.json', async () => {
    expect(await keptEntries(FIXTURE_ROOT)).toEqual(['blobs-v1', 'keys', 'manifests-v1', 'trust.json']);
    expect(await readdir(join(FIXTURE_ROOT, 'blobs-v1'))).toEqual(['blake3']);
    expect((await stat(join(FIXTURE_ROOT, 'manifests-v1', 'CURRENT'))).isFile()).toBe(true);
  });

  it('opens, and resumes the latest summary it holds, verified', async () => {
    const ledger = await openLedger({ root: await copyOfFixture(), host: FIXTURE.host });
    try {
      const resumed = await ledger.resume({ principal: FIXTURE.principal, session: FIXTURE.session });
      expect(resumed?.seq).toBe(1);
      expect(resumed?.summary).toEqual(FIXTURE.summaries[1]);
      expect(resumed?.manifest).toMatchObject({ v: 1, kind: 'compaction', host: FIXTURE.host, run: 'run-1' });
    } finally {
      await ledger.close();
    }
  });

  it('verifies its whole history, its grants and every blob (fsck clean)', async () => {
    const ledger = await openLedger({ root: await copyOfFixture(), host: FIXTURE.host });
    try {
      const history = await ledger.history({ principal: FIXTURE.principal, session: FIXTURE.session });
      expect(history.map((h) => [h.manifest.seq, h.manifest.run])).toEqual([
        [0, 'run-0'],
        [1, 'run-1'],
      ]);
      expect(history.every((h) => h.manifest.createdAt.startsWith('2026-12-01T00:0'))).toBe(true);
      expect(await ledger.grants({ principal: 'bob' })).toMatchObject([{ session: FIXTURE.session, state: 'granted' }]);
      const report = await fsck(ledger, { checkBlobs: true });
      expect(report).toMatchObject({ ok: true, manifests: 2, chains: 1, blobsChecked: 2 });
    } finally {
      await ledger.close();
    }
  });

  it('takes new publishes on the chain it already has', async () => {
    const ledger = await openLedger({ root: await copyOfFixture(), host: FIXTURE.host });
    try {
      const receipt = await ledger.publish(
        { principal: FIXTURE.principal, session: FIXTURE.session, run: 'run-2' },
        { ...FIXTURE.summaries[1]!, state: 'Production migration scheduled' },
      );
      expect(receipt.seq).toBe(2);
      const history = await ledger.history({ principal: FIXTURE.principal, session: FIXTURE.session });
      expect(history).toHaveLength(3);
    } finally {
      await ledger.close();
    }
  });
});

describe('fsck of a store written by format version 1', () => {
  it('is refused before its first ordinary open, saying that open upgrades it (no backup holds its checkpoint key)', async () => {
    const root = await copyOfFixture();
    const before = await keptEntries(root);
    const err = await openLedger({ root, host: FIXTURE.host, diagnose: true }).then(
      async (l) => {
        await l.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'KEY_INVALID' });
    expect((err as Error).message).toMatch(/written before checkpoint keys/);
    expect((err as Error).message).toMatch(/Open it once .*then run fsck/);
    expect((err as Error).message).not.toMatch(/restore .* from a backup/);
    expect(await keptEntries(root)).toEqual(before);
    expect(await readdir(join(root, 'keys'))).toHaveLength(1);
  });

  it('runs clean once an ordinary open has upgraded it', async () => {
    const root = await copyOfFixture();
    await (await openLedger({ root, host: FIXTURE.host })).close();
    const ledger = await openLedger({ root, host: FIXTURE.host, diagnose: true });
    try {
      expect(await fsck(ledger, { checkBlobs: true })).toMatchObject({ ok: true, manifests: 2, chains: 1 });
    } finally {
      await ledger.close();
    }
  });
});

describe('the fixture writer', () => {
  it('writes a store of the same shape as the kept fixture (the recipe still runs)', async () => {
    const root = join(tempDir(), 'fresh');
    await writeStoreFixture(root);
    // Two additions since version 1: checkpoints/ (the pinned checkpoint, outside the database) and format.json (the
    // root's format marker, naming layout version 1, which the fixture's layout is). Version-1 stores get them, their
    // Merkle tree and a checkpoint key on first open (the tests above open one).
    expect(await keptEntries(root)).toEqual(
      [...(await keptEntries(FIXTURE_ROOT)), 'checkpoints', 'format.json'].sort(),
    );
  });
});
