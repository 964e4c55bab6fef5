/**
 * `export --principal P` chooses chains by the principal in each manifest's signed payload, on both backends: the
 * `principal` column stored beside an entry (a LevelDB record field, a PostgreSQL column) is not signed, and a
 * writer of the database who changes it must neither hide P's chains from P's bundle nor put another's chain in it.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import type { LevelManifestLog } from '../../manifests/log/level/log.js';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { describePostgres, sqlOn, type PostgresHandle } from '../support/postgres.js';
import { sampleSummary, tempDir } from '../support/tmp.js';

interface Backend {
  open(root: string): Promise<Ledger>;
  /** Rewrites the unsigned principal stored beside the entry at (session, seq), as a writer of the database can. */
  setPrincipalColumn(ledger: Ledger, session: string, seq: number, principal: string): Promise<void>;
}

const embedded: Backend = {
  open: (root) => openLedger({ root, host: 'host-a', onNotice: () => {} }),
  async setPrincipalColumn(ledger, session, seq, principal) {
    const raw = (ledger.log as LevelManifestLog).raw;
    const key = `e!${session}!${seq.toString(16).padStart(12, '0')}`;
    await raw.put(key, JSON.stringify({ ...JSON.parse(await raw.get(key)), principal }));
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

/** The signed session of every manifest in the bundle, in order. */
function bundleSessions(out: string): string[] {
  return readFileSync(join(out, 'manifests.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => (JSON.parse(Buffer.from(JSON.parse(l).payload, 'base64').toString()) as { session: string }).session);
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
      const report = await verifyBundle(await openBundleDir(alice.dir), { trust: ledger.trustStore() });
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
}

describe('export --principal (embedded)', () => scopeTests(() => embedded));

describePostgres('export --principal (PostgreSQL)', (pg) => scopeTests(() => postgres(pg)), 'export_scope');
