/**
 * The PostgreSQL backend's answers to a review (test/RELIABILITY.md is not involved): a store upgraded from
 * schema v2 gets the tree of its entries in position order, unique violations name what they are, a stalled
 * writer cannot block every append forever, long uploads leave connections for everything else, and bad
 * options are refused with codes.
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import pgLib from 'pg';
import { digestOf, nobleBlake3 } from '../store/hash/digest.js';
import { StoreError, isHandoffLedgerError } from '../store/errors.js';
import { PgBlobStore } from '../store/pg/blob-store.js';
import { ManifestError } from '../manifests/errors.js';
import { MANIFEST_MIGRATIONS } from '../manifests/log/pg/schema.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import type { AppendRequest } from '../manifests/log/log.js';
import { leafOfEnvelope } from '../manifests/tlog/leaf.js';
import { leafHash, nodeHash } from '../manifests/tlog/merkle.js';
import { appendLeaves } from '../manifests/tlog/tree.js';
import { PgDatabase } from '../store/pg/db.js';
import { fsckTree } from '../src/ops/fsck-tree.js';
import { openLedger } from '../src/ledger/open.js';
import { describePostgres } from './support/postgres.js';

let schemas = 0;
const nextSchema = () => `h${process.pid}_${schemas++}`;

const utf8 = (s: string) => new TextEncoder().encode(s);
const idOf = (session: string, seq: number) => digestOf(utf8(`${session}/${seq}`));
const envelopeOf = (text: string) => `{"payload":"${Buffer.from(text).toString('base64')}"}`;
const link = (session: string, seq: number): AppendRequest => ({
  session,
  principal: 'alice',
  seq,
  prev: seq === 0 ? null : idOf(session, seq - 1),
  id: idOf(session, seq),
  envelope: envelopeOf(`${session}/${seq}`),
});

/** RFC 6962 MTH, written out: the tree the log must hold over its entries in position order. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 1) return leafHash(leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.unreachable('expected a rejection'),
    (err: unknown) => err,
  );
}

describePostgres(
  'PostgreSQL backend hardening',
  (pg) => {
    /** Runs SQL on its own connection, outside the stores under test. */
    async function sql<R extends pgLib.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
      const client = new pgLib.Client({ connectionString: pg.connectionString });
      await client.connect();
      try {
        return (await client.query<R>(text, values)).rows;
      } finally {
        await client.end();
      }
    }

    /**
     * A store as release 0.1.0 left it (manifest schema v2: entries, no tree), one entry per position of `positions`,
     * the counter after the last. Returns the envelopes by position.
     */
    async function schemaV2Store(schema: string, positions: number[]): Promise<Map<number, string>> {
      const db = new PgDatabase({ connectionString: pg.connectionString, schema });
      try {
        await db.migrate('manifests', MANIFEST_MIGRATIONS.slice(0, 2));
      } finally {
        await db.close();
      }
      const envelopes = new Map<number, string>();
      for (const p of positions) {
        const session = `s${p}`;
        const envelope = envelopeOf(`entry ${p}`);
        envelopes.set(p, envelope);
        const id = digestOf(utf8(envelope));
        await sql(`INSERT INTO "${schema}".entries VALUES ($1, $2, 0, $3, 'alice', $4)`, [p, session, id, envelope]);
        await sql(`INSERT INTO "${schema}".heads VALUES ($1, 0, $2, 'alice')`, [session, id]);
      }
      await sql(`UPDATE "${schema}".log_counter SET next_position = $1`, [Math.max(...positions) + 1]);
      return envelopes;
    }

    describe('tree backfill of a store upgraded from schema v2', () => {
      it('adds the leaves in position order: the root is the RFC 6962 root of the entries (> 10 of them)', async () => {
        const schema = nextSchema();
        const count = 23;
        const envelopes = await schemaV2Store(
          schema,
          Array.from({ length: count }, (_, p) => p),
        );
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          const head = await log.treeHead();
          expect(head.size).toBe(count);
          const leaves = [...envelopes.values()].map(leafOfEnvelope);
          expect(hex(head.root)).toBe(hex(mth(leaves)));
          // Each stored leaf is its own position's entry.
          const stored = await log.treeNodes(leaves.map((_, index) => ({ level: 0, index })));
          expect(stored.map(hex)).toEqual(leaves.map((l) => hex(leafHash(l))));
          expect(await fsckTree(log)).toEqual([]);
          // An append after the upgrade grows the same tree.
          const entry = await log.append(link('after', 0));
          expect(entry.position).toBe(count);
          expect(hex((await log.treeHead()).root)).toBe(
            hex(mth([...leaves, leafOfEnvelope(link('after', 0).envelope)])),
          );
          // positionOf orders by the number too: an id stored at positions 10 and 9 is found at 9.
          await sql(`UPDATE "${schema}".entries SET id = (SELECT id FROM "${schema}".entries WHERE position = 10)
            WHERE position = 9`);
          expect(await log.positionOf(digestOf(utf8(envelopes.get(10)!)))).toBe(9);
        } finally {
          await log.close();
        }
      });

      it('refuses (TREE_DAMAGED) to open a store whose positions have a gap inside a batch', async () => {
        const schema = nextSchema();
        await schemaV2Store(
          schema,
          Array.from({ length: 12 }, (_, p) => p).filter((p) => p !== 5),
        );
        const err = await rejection(PgManifestLog.open({ connectionString: pg.connectionString, schema }));
        expect(err).toBeInstanceOf(ManifestError);
        expect((err as ManifestError).code).toBe('TREE_DAMAGED');
        expect((err as Error).message).toMatch(/global position 5 is missing/);
      });

      it('lets fsck find a tree an earlier build backfilled in text order (0, 1, 10, 11, 2, …)', async () => {
        const schema = nextSchema();
        const envelopes = await schemaV2Store(
          schema,
          Array.from({ length: 12 }, (_, p) => p),
        );
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          // What the backfill before this fix stored: the tree of the entries in their positions' text order.
          const textOrder = [...envelopes.keys()].sort((a, b) => (String(a) < String(b) ? -1 : 1));
          const { nodes } = appendLeaves(
            [],
            0,
            textOrder.map((p) => leafOfEnvelope(envelopes.get(p)!)),
          );
          await sql(`DELETE FROM "${schema}".tree_nodes`);
          for (const n of nodes)
            await sql(`INSERT INTO "${schema}".tree_nodes VALUES ($1, $2, $3)`, [
              n.level,
              n.index,
              Buffer.from(n.hash),
            ]);
          const codes = new Set((await fsckTree(log)).map((f) => f.code));
          expect(codes.has('TREE_NODE_MISMATCH')).toBe(true);
          expect(codes.has('TREE_ROOT')).toBe(true);
        } finally {
          await log.close();
        }
        // The repair the changelog gives: without its rows, the next open backfills the tree again.
        await sql(`DELETE FROM "${schema}".tree_nodes`);
        const reopened = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          expect(await fsckTree(reopened)).toEqual([]);
        } finally {
          await reopened.close();
        }
      });
    });

    describe('unique violations in an append', () => {
      const codeOf = async (p: Promise<unknown>) => ((await rejection(p)) as ManifestError).code;

      it('are CHAIN_CONFLICT only for the chain keys: two first appends of one session race, one wins', async () => {
        const schema = nextSchema();
        const [a, b] = await Promise.all(
          [0, 1].map(() => PgManifestLog.open({ connectionString: pg.connectionString, schema })),
        );
        try {
          for (let round = 0; round < 5; round++) {
            const settled = await Promise.allSettled([a!, b!].map((log) => log.append(link(`race${round}`, 0))));
            expect(settled.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
            const lost = settled.find((r) => r.status === 'rejected')!;
            expect((lost.reason as ManifestError).code).toBe('CHAIN_CONFLICT');
          }
        } finally {
          await Promise.all([a!.close(), b!.close()]);
        }
      });

      it('are TREE_DAMAGED for a tree row beyond the log, and a reopened store refuses appends so', async () => {
        const schema = nextSchema();
        const open = () => PgManifestLog.open({ connectionString: pg.connectionString, schema });
        const log = await open();
        try {
          await log.append(link('s', 0));
          await log.append(link('s', 1));
          // A leaf at the next position, as a restore of tree_nodes from a later backup than the entries leaves it.
          await sql(`INSERT INTO "${schema}".tree_nodes VALUES (0, 2, decode(repeat('ab', 32), 'hex'))`);
          expect(await codeOf(log.append(link('s', 2)))).toBe('TREE_DAMAGED');
          expect(await codeOf(log.append(link('t', 0)))).toBe('TREE_DAMAGED');
        } finally {
          await log.close();
        }
        // Open finds more leaves (3) than positions (2): it opens (fsck, reads) and refuses appends, as LevelDB does.
        const reopened = await open();
        try {
          const err = await rejection(reopened.append(link('s', 2)));
          expect((err as ManifestError).code).toBe('TREE_DAMAGED');
          expect((err as Error).message).toMatch(/the tree has 3 leaves, the log 2 entries/);
          expect((await reopened.head('s'))?.seq).toBe(1);
        } finally {
          await reopened.close();
        }
      });

      it("are TREE_DAMAGED when the log's counter is behind its entries", async () => {
        const schema = nextSchema();
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          await log.append(link('s', 0));
          await log.append(link('s', 1));
          await sql(`UPDATE "${schema}".log_counter SET next_position = 1`);
          expect(await codeOf(log.append(link('u', 0)))).toBe('TREE_DAMAGED');
        } finally {
          await log.close();
        }
      });
    });

    describe('connection options', () => {
      it('refuses a bad schema name or an empty connection string with INVALID_ARGUMENT, through openLedger too', async () => {
        const root = mkdtempSync(join(tmpdir(), 'hl-pg-options-'));
        try {
          for (const postgres of [
            { connectionString: pg.connectionString, schema: 'HandoffLedger' },
            { connectionString: pg.connectionString, schema: 'a;drop' },
            { connectionString: '' },
          ]) {
            const err = await rejection(openLedger({ root, host: 'h', postgres, onNotice: () => {} }));
            expect(isHandoffLedgerError(err), String(err)).toBe(true);
            expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
          }
          const bad = { connectionString: pg.connectionString, schema: 'Bad' };
          const logErr = await rejection(PgManifestLog.open(bad));
          expect(logErr).toBeInstanceOf(ManifestError);
          expect(logErr).toMatchObject({ code: 'INVALID_ARGUMENT' });
          const blobErr = await rejection(PgBlobStore.open({ ...bad, hash: nobleBlake3 }));
          expect(blobErr).toBeInstanceOf(StoreError);
          expect(blobErr).toMatchObject({ code: 'INVALID_ARGUMENT' });
          expect(await rejection(PgManifestLog.open({ connectionString: '' }))).toMatchObject({
            code: 'INVALID_ARGUMENT',
          });
        } finally {
          await rm(root, { recursive: true, force: true });
        }
      });
    });
  },
  'handoff_ledger_hardening',
);
