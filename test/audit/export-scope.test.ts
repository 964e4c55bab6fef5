/**
 * `export --principal P` chooses chains by the principal in each manifest's signed payload, on both backends: the
 * `principal` column stored beside an entry (a LevelDB record field, a PostgreSQL column) is not signed, and a
 * writer of the database who changes it must neither hide P's chains from P's bundle nor put another's chain in it.
 * The same holds for the session stored beside an entry: a filtered export places each entry by its signed session,
 * and `--session S`, which reads S's chain by that column, refuses an entry signed for another session.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import type { LevelManifestLog } from '../../manifests/log/level/log.js';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { ManifestError } from '../../manifests/errors.js';
import { describePostgres, sqlOn, type PostgresHandle } from '../support/postgres.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { bundleSessions } from '../support/bundle-builder.js';

interface Backend {
  open(root: string): Promise<Ledger>;
  /** Rewrites the unsigned principal stored beside the entry at (session, seq), as a writer of the database can. */
  setPrincipalColumn(ledger: Ledger, session: string, seq: number, principal: string): Promise<void>;
  /** Moves the entry at (session, seq) into another session's chain by its unsigned session column (same seq). */
  setSessionColumn(ledger: Ledger, session: string, seq: number, to: string): Promise<void>;
}

const entryKey = (session: string, seq: number) => `e!${session}!${seq.toString(16).padStart(12, '0')}`;

const embedded: Backend = {
  open: (root) => openLedger({ root, host: 'host-a', onNotice: () => {} }),
  async setPrincipalColumn(ledger, session, seq, principal) {
    const raw = (ledger.log as LevelManifestLog).raw;
    const key = entryKey(session, seq);
    await raw.put(key, JSON.stringify({ ...JSON.parse(await raw.get(key)), principal }));
  },
  async setSessionColumn(ledger, session, seq, to) {
    const raw = (ledger.log as LevelManifestLog).raw;
    const entry = JSON.parse(await raw.get(entryKey(session, seq))) as { position: number };
    await raw.batch([
      { type: 'del', key: entryKey(session, seq) },
      { type: 'put', key: entryKey(to, seq), value: JSON.stringify({ ...entry, session: to }) },
      { type: 'put', key: `p!${entry.position.toString(16).padStart(16, '0')}`, value: entryKey(to, seq) },
    ]);
  },
};

let schemas = 0;
function postgres(pg: PostgresHandle): Backend {
  const schema = () => `export_scope_${schemas}`;
  return {
    open: (root) => {
      schemas++;
      return openLedger({
        root,
        host: 'host-a',
        postgres: { connectionString: pg.connectionString, schema: schema() },
        onNotice: () => {},
      });
    },
    async setPrincipalColumn(_ledger, session, seq, principal) {
      await sqlOn(
        pg.connectionString,
        `UPDATE ${schema()}.entries SET principal = $1 WHERE session = $2 AND seq = $3`,
        [principal, session, seq],
      );
    },
    async setSessionColumn(_ledger, session, seq, to) {
      await sqlOn(pg.connectionString, `UPDATE ${schema()}.entries SET session = $1 WHERE session = $2 AND seq = $3`, [
        to,
        session,
        seq,
      ]);
    },
  };
}

/** s1: alice twice, then bob (granted); s2: bob; s3: carol. */
async function ledgerWithChains(backend: Backend, root: string): Promise<Ledger> {
  const ledger = await backend.open(root);
  await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a0'));
  await ledger.publish({ principal: 'bob', session: 's2', run: 'r1' }, sampleSummary('b0'));
  await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('a1'));
  await ledger.grant('bob', 's1');
  await ledger.publish({ principal: 'bob', session: 's1', run: 'r2' }, sampleSummary('a2'));
  await ledger.publish({ principal: 'carol', session: 's3', run: 'r1' }, sampleSummary('c0'));
  return ledger;
}

function scopeTests(backend: () => Backend): void {
  it('export --principal selects by the signed principal: a rewritten principal column neither hides nor adds a chain', async () => {
    const dir = tempDir();
    const b = backend();
    const ledger = await ledgerWithChains(b, join(dir, 'store'));
    try {
      // alice's manifests of s1 now say mallory beside them; carol's s3 says alice beside it.
      await b.setPrincipalColumn(ledger, 's1', 0, 'mallory');
      await b.setPrincipalColumn(ledger, 's1', 1, 'mallory');
      await b.setPrincipalColumn(ledger, 's3', 0, 'alice');
      const alice = await exportBundle(ledger, { out: join(dir, 'alice'), principal: 'alice' });
      expect(alice.header.counts).toEqual({ manifests: 3, chains: 1 });
      expect(bundleSessions(alice.dir)).toEqual(['s1', 's1', 's1']);
      const report = await verifyBundle(await openBundleDir(alice.dir), {
        trust: ledger.trustStore(),
        scope: { principal: 'alice' },
      });
      expect(report.findings).toEqual([]);
      // Nobody signed a manifest as mallory, whatever the columns say.
      const mallory = await exportBundle(ledger, { out: join(dir, 'mallory'), principal: 'mallory' });
      expect(mallory.header.counts).toEqual({ manifests: 0, chains: 0 });
      // With --session too: the signed principal of that session's manifests decides.
      const s3 = await exportBundle(ledger, { out: join(dir, 's3'), principal: 'alice', session: 's3' });
      expect(s3.header.counts).toEqual({ manifests: 0, chains: 0 });
      const s1 = await exportBundle(ledger, { out: join(dir, 's1'), principal: 'alice', session: 's1' });
      expect(s1.header.counts).toEqual({ manifests: 3, chains: 1 });
    } finally {
      await ledger.close();
    }
  });

  it('a filtered export places entries by their signed session: a rewritten session column is refused or ignored', async () => {
    const dir = tempDir();
    const b = backend();
    const ledger = await ledgerWithChains(b, join(dir, 'store'));
    try {
      // alice's s1 seq 1 now sits in s2's chain by its column, her s1 seq 0 in a session s4 nobody published in
      // (entries below the heads: PostgreSQL's heads reference their entries).
      await b.setSessionColumn(ledger, 's1', 1, 's2');
      await b.setSessionColumn(ledger, 's1', 0, 's4');
      for (const [session, position, seq] of [
        ['s2', 2, 1],
        ['s4', 0, 0],
      ] as const) {
        const err = await exportBundle(ledger, { out: join(dir, session), session }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ManifestError);
        expect((err as ManifestError).code).toBe('RECORD_CORRUPT');
        expect((err as ManifestError).message).toContain(
          `the log entry at position ${position} is stored in session ${session}'s chain (seq ${seq}) but holds a manifest signed for session s1`,
        );
      }
      // --principal reads the whole log: alice's chain s1 is whole in her bundle.
      const alice = await exportBundle(ledger, { out: join(dir, 'alice'), principal: 'alice' });
      expect(bundleSessions(alice.dir)).toEqual(['s1', 's1', 's1']);
      const asked = { trust: ledger.trustStore(), expect: 'filtered' } as const;
      expect((await verifyBundle(await openBundleDir(alice.dir), asked)).findings).toEqual([]);
      // Entries moved out of S's chain are not read by --session S: the auditor finds the chain incomplete.
      const s1 = await exportBundle(ledger, { out: join(dir, 's1'), session: 's1' });
      expect(bundleSessions(s1.dir)).toEqual(['s1']);
      const report = await verifyBundle(await openBundleDir(s1.dir), asked);
      expect(report.findings.map((f) => f.code)).toEqual(['SEQ_NOT_ZERO']);
    } finally {
      await ledger.close();
    }
  });
}

describe('export --principal and --session (embedded)', () => scopeTests(() => embedded));

describePostgres(
  'export --principal and --session (PostgreSQL)',
  (pg) => scopeTests(() => postgres(pg)),
  'export_scope',
);
