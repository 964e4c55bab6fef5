/**
 * gc and fsck on damaged stores, where a review found them wrong: gc removed the blobs of manifests still stored but
 * reached by neither index (their head and positions lost, or a record gone while its leaf stays in the tree), and
 * fsck checked a blob once per digest, so a second manifest claiming another size for the same blob was never
 * held to it (resume and the auditor refuse it); and fsck could not run on a store whose log does not extend its
 * pinned checkpoint, the very store it is for (the open refused with ROLLBACK / FORK). And fsck's TREE_SIZE on
 * PostgreSQL, whose tree size is the log counter: a row deleted under it, or the counter set back.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { fsck, gc } from '../src/ops/maintenance.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = (session: string) => ({ principal: 'alice', session, run: 'r' });

async function editLevel(root: string, change: (db: LevelManifestLog['raw']) => Promise<void>): Promise<void> {
  const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
  try {
    await change(log.raw);
  } finally {
    await log.close();
  }
}

async function blobCount(ledger: Ledger): Promise<number> {
  let n = 0;
  for await (const _ of ledger.blobs.list()) n++;
  return n;
}

/** Two sessions of two publishes each, positions 0-3: s1 at 0 and 2, s2 at 1 and 3. */
async function store(
  extra: Partial<Parameters<typeof openLedger>[0]> = {},
): Promise<{ root: string; opts: Parameters<typeof openLedger>[0] }> {
  const root = tempDir();
  const opts = { root, host: 'h1', ...extra };
  const ledger = await openLedger(opts);
  for (let i = 0; i < 4; i++) await ledger.publish(scope(`s${(i % 2) + 1}`), sampleSummary(i));
  await ledger.close();
  return { root, opts };
}

async function refusedGc(opts: Parameters<typeof openLedger>[0]): Promise<void> {
  const ledger = await openLedger(opts);
  try {
    const before = await blobCount(ledger);
    expect(before).toBe(4);
    await expect(gc(ledger, { graceMs: 0 })).rejects.toMatchObject({
      code: 'RECORD_CORRUPT',
      message: expect.stringMatching(
        /^gc removes nothing: the log's tree holds 4 manifests, and the manifest at position \d/,
      ),
    });
    expect(await blobCount(ledger)).toBe(before);
  } finally {
    await ledger.close();
  }
}

describe('gc on a damaged embedded store', () => {
  it("removes nothing when a session's head and positions are gone but its entries are stored", async () => {
    const { root, opts } = await store();
    await editLevel(root, async (db) => {
      await db.del('h!s2');
      await db.del(`p!${(1).toString(16).padStart(16, '0')}`);
      await db.del(`p!${(3).toString(16).padStart(16, '0')}`);
    });
    await refusedGc(opts);
  });

  it("removes nothing when the last manifest's record is gone while its leaf is in the tree", async () => {
    const { root, opts } = await store();
    await editLevel(root, async (db) => {
      await db.del(`e!s2!${(1).toString(16).padStart(12, '0')}`);
    });
    await refusedGc(opts);
  });

  it('still removes an orphan of an intact store, and still tolerates one lost index (a position gap)', async () => {
    const { root, opts } = await store();
    await editLevel(root, (db) => db.del(`p!${(2).toString(16).padStart(16, '0')}`)); // s1 seq 1 via its chain only
    const ledger = await openLedger(opts);
    try {
      const orphan = await ledger.blobs.put(new TextEncoder().encode('an orphan no manifest names'));
      const report = await gc(ledger, { graceMs: 0 });
      expect(report.removed).toEqual([orphan.digest]);
      expect(await blobCount(ledger)).toBe(4);
    } finally {
      await ledger.close();
    }
  });
});

describe('fsck of blobs named by several manifests', () => {
  it('holds every manifest to its own size claim: a second manifest naming a stored blob with a wrong size is BLOB_SIZE', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'h1' });
    try {
      const summary = sampleSummary('shared');
      const first = await ledger.publish(scope('a1'), summary);
      // A manifest signed for the same blob with another size (what a faulty writer or a bug would append).
      const writable = ledger as unknown as { storeSummary: unknown };
      const honest = writable.storeSummary;
      writable.storeSummary = async () => ({
        digest: first.digest,
        size: first.size + 7,
      });
      await ledger.publish(scope('z9'), summary);
      writable.storeSummary = honest;
      await expect(ledger.resume(scope('z9'))).rejects.toMatchObject({ code: 'BLOB_INTEGRITY' });
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual([
        expect.objectContaining({
          code: 'BLOB_SIZE',
          session: 'z9',
          seq: 0,
          message: expect.stringMatching(/manifest says/),
        }),
      ]);
      expect(report.blobsChecked).toBe(1);
    } finally {
      await ledger.close();
    }
  });
});

/** s2's head set back to seq 0 and its seq 1 (position 3, the newest) deleted; the tree keeps the leaf. */
function dropNewestRow(connectionString: string, schema: string): Promise<unknown> {
  return sqlOn(
    connectionString,
    `BEGIN;
     UPDATE "${schema}".heads SET seq = 0, id = (SELECT id FROM "${schema}".entries WHERE session = 's2' AND seq = 0) WHERE session = 's2';
     DELETE FROM "${schema}".entries WHERE position = 3;
     COMMIT;`,
  );
}

describePostgres('gc on a damaged PostgreSQL store', (pg) => {
  it("removes nothing when the last manifest's row is gone while its leaf is in the tree", async () => {
    const schema = `gcdamage_${process.pid}_${Date.now()}`;
    const { opts } = await store({ postgres: { connectionString: pg.connectionString, schema } });
    await dropNewestRow(pg.connectionString, schema);
    await refusedGc(opts);
  });
});

describePostgres('fsck of a PostgreSQL tree of another size than the log', (pg) => {
  const schemaName = (tag: string) => `fscksize_${tag}_${process.pid}_${Date.now()}`;

  it("the newest row deleted under its leaf (the counter kept): TREE_SIZE, the tree's leaves above the entries", async () => {
    const schema = schemaName('row');
    const { opts } = await store({ postgres: { connectionString: pg.connectionString, schema } });
    await dropNewestRow(pg.connectionString, schema);
    const ledger = await openLedger(opts);
    try {
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(
        expect.objectContaining({ code: 'TREE_SIZE', message: 'the tree has 4 leaves, the log 3 entries' }),
      );
    } finally {
      await ledger.close();
    }
  });

  it('the counter set back under the entries: the open refuses ROLLBACK, a diagnosing fsck reports TREE_SIZE', async () => {
    const schema = schemaName('counter');
    const { opts } = await store({ postgres: { connectionString: pg.connectionString, schema } });
    await sqlOn(pg.connectionString, `UPDATE "${schema}".log_counter SET next_position = 3`);
    await expect(openLedger(opts)).rejects.toMatchObject({ code: 'ROLLBACK' });
    const ledger = await openLedger({ ...opts, diagnose: true });
    try {
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toContainEqual(
        expect.objectContaining({ code: 'TREE_SIZE', message: 'the tree has 3 leaves, the log 4 entries' }),
      );
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'PIN_MISMATCH' }));
    } finally {
      await ledger.close();
    }
  });
});

describe('fsck of a store whose log does not extend its pinned checkpoint', () => {
  const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

  /** A store of 6 publishes whose log was replaced by its copy after the first (a rollback), or a tree node changed. */
  async function damaged(how: 'rollback' | 'fork'): Promise<string> {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1' });
    await ledger.publish(scope('s1'), sampleSummary(0));
    await ledger.close();
    const copy = join(tempDir(), 'db');
    cpSync(join(root, 'manifests-v1'), copy, { recursive: true });
    ledger = await openLedger({ root, host: 'h1' });
    for (let i = 1; i < 6; i++) await ledger.publish(scope('s1'), sampleSummary(i));
    await ledger.close();
    if (how === 'rollback') {
      rmSync(join(root, 'manifests-v1'), { recursive: true, force: true });
      cpSync(copy, join(root, 'manifests-v1'), { recursive: true });
    } else {
      // The level-1 node over leaves 4 and 5 (part of the tree's frontier at size 6) replaced: another root.
      await editLevel(root, (db) =>
        db.put(`n!01!${(2).toString(16).padStart(16, '0')}`, Buffer.alloc(32, 7).toString('base64')),
      );
    }
    return root;
  }

  for (const [how, code] of [
    ['rollback', 'ROLLBACK'],
    ['fork', 'FORK'],
  ] as const)
    it(`${code}: the open refuses, a diagnosing open reports it (PIN_MISMATCH) and still refuses every operation`, async () => {
      const root = await damaged(how);
      await expect(openLedger({ root, host: 'h1' })).rejects.toMatchObject({ code });
      const ledger = await openLedger({ root, host: 'h1', diagnose: true });
      try {
        expect(ledger.checkpointFailure?.code).toBe(code);
        await expect(ledger.resume(scope('s1'))).rejects.toMatchObject({ code });
        await expect(ledger.publish(scope('s1'), sampleSummary(9))).rejects.toMatchObject({ code });
        await expect(gc(ledger, { graceMs: 0 })).rejects.toMatchObject({ code });
        const report = await fsck(ledger);
        expect(report.ok).toBe(false);
        expect(report.findings[0]).toMatchObject({
          code: 'PIN_MISMATCH',
          message: expect.stringMatching(new RegExp(`^${code}: `)),
        });
      } finally {
        await ledger.close();
      }
      // The CLI's fsck opens to diagnose: exit 1 with the finding, not the open's refusal.
      const r = spawnSync(process.execPath, [CLI, 'fsck', '--root', root, '--host', 'h1', '--json'], {
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(1);
      const json = JSON.parse(r.stdout) as { ok: boolean; findings: Array<{ code: string; message: string }> };
      expect(json.ok).toBe(false);
      expect(json.findings.map((f) => f.code)).toContain('PIN_MISMATCH');
      // Nothing was pinned or repaired: a plain open still refuses.
      await expect(openLedger({ root, host: 'h1' })).rejects.toMatchObject({ code });
    });
});
