/**
 * What a review of the PostgreSQL backend found, held: a store upgraded from schema v2 gets the tree of its
 * entries in position order, unique violations name what they are, a writer stalled inside a transaction cannot
 * block every append forever, long uploads leave connections for everything else, bad options are refused with
 * codes, and an append whose COMMIT reply was lost is looked up rather than reported failed.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import pgLib from 'pg';
import { digestOf, nobleBlake3 } from '../store/hash/digest.js';
import { StoreError, isHandoffLedgerError } from '../store/errors.js';
import { LedgerError } from '../src/errors.js';
import { PgBlobStore } from '../store/pg/blob-store.js';
import { ManifestError } from '../manifests/errors.js';
import { MANIFEST_MIGRATIONS } from '../manifests/log/pg/schema.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import type { AppendRequest } from '../manifests/log/log.js';
import { leafOfEnvelope } from '../manifests/tlog/leaf.js';
import { leafHash, nodeHash } from '../manifests/tlog/merkle.js';
import { appendLeaves } from '../manifests/tlog/tree.js';
import { createPgPool, PgDatabase, pgOptionsProblem } from '../store/pg/db.js';
import { fsckTree } from '../src/ops/fsck-tree.js';
import { openLedger } from '../src/ledger/open.js';
import { openPostgresBackends } from '../src/ledger/pg-backend.js';
import {
  describePostgres,
  replyCuttingProxy,
  settledCount,
  sqlOn,
  statementText,
  waitingForLock,
} from './support/postgres.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from './support/settled.js';

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

/**
 * A pool whose first query matching `statement` pauses before it is sent (a paused process, a GC pause, a lost host)
 * until `resume()`, each connection bounded by `idleInTransactionTimeoutMs`. `paused`: resolves as the pause begins.
 * The pause lasts as long as the test wants, not a few seconds the server's bound had to beat on a loaded machine.
 */
function stallingPool(connectionString: string, idleInTransactionTimeoutMs: number, statement: RegExp) {
  const pool = createPgPool({ connectionString, idleInTransactionTimeoutMs });
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => Promise<pgLib.PoolClient>;
  let stall = true;
  let began!: () => void;
  const paused = new Promise<void>((resolve) => (began = resolve));
  let resume!: () => void;
  const resumed = new Promise<void>((resolve) => (resume = resolve));
  const hooked = async () => {
    const client = await connect();
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: typeof query }).query = async (...args: unknown[]) => {
      const text = statementText(args[0]);
      if (stall && text !== undefined && statement.test(text)) {
        stall = false;
        began();
        await resumed;
      }
      return query(...args);
    };
    return client;
  };
  // pool.query checks a client out with a callback: that form is passed through untouched.
  (pool as unknown as { connect: (...args: unknown[]) => unknown }).connect = (...args: unknown[]) =>
    args.length > 0 ? connect(...args) : hooked();
  return { pool, paused, resume };
}

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
    const sql = <R extends pgLib.QueryResultRow>(text: string, values?: unknown[]) =>
      sqlOn<R>(pg.connectionString, text, values);

    /**
     * A store as release 0.1.0 left it (manifest schema v2: entries, no tree), one entry per position of `positions`,
     * the counter after the last. Returns the envelopes by position.
     */
    async function schemaV2Store(schema: string, positions: number[]): Promise<Map<number, string>> {
      const db = new PgDatabase({ connectionString: pg.connectionString, schema });
      try {
        await db.migrate('manifests', MANIFEST_MIGRATIONS.slice(0, 2), ManifestError);
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

      it('opens a store whose positions have a gap inside a batch with the tree of the entries before it: appends refused (TREE_DAMAGED naming the position), fsck names the gap; restored, the next open builds the rest', async () => {
        const schema = nextSchema();
        const envelopes = await schemaV2Store(
          schema,
          Array.from({ length: 12 }, (_, p) => p).filter((p) => p !== 5),
        );
        const leaves = (positions: number[]) => positions.map((p) => leafOfEnvelope(envelopes.get(p)!));
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          const head = await log.treeHead();
          expect(head.size).toBe(5);
          expect(hex(head.root)).toBe(hex(mth(leaves([0, 1, 2, 3, 4]))));
          expect((await log.entry('s7', 0))?.position).toBe(7);
          const err = await rejection(log.append(link('after', 0)));
          expect(err).toBeInstanceOf(ManifestError);
          expect((err as ManifestError).code).toBe('TREE_DAMAGED');
          expect((err as Error).message).toMatch(/global position 5 holds no entry \(the next entry is at 6\)/);
          expect(await fsckTree(log)).toEqual([
            { code: 'POSITION_GAP', message: 'global position 5 holds no entry (the next entry is at 6)' },
          ]);
        } finally {
          await log.close();
        }
        // The entry put back (from a backup): the next open adds it and the entries after it.
        const restored = envelopeOf('entry 5');
        envelopes.set(5, restored);
        await sql(`INSERT INTO "${schema}".entries VALUES (5, 's5', 0, $1, 'alice', $2)`, [
          digestOf(utf8(restored)),
          restored,
        ]);
        const reopened = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          const head = await reopened.treeHead();
          expect(head.size).toBe(12);
          expect(hex(head.root)).toBe(hex(mth(leaves(Array.from({ length: 12 }, (_, p) => p)))));
          expect(await fsckTree(reopened)).toEqual([]);
          expect((await reopened.append(link('after', 0))).position).toBe(12);
        } finally {
          await reopened.close();
        }
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

    describe('a database whose default isolation is not READ COMMITTED', () => {
      it('appends, and races for one head, as under READ COMMITTED (the store asks for it)', async () => {
        // A DBA's setting for a database (or role): every transaction of its sessions starts SERIALIZABLE unless it asks.
        const connectionString = await pg.cluster.createDatabase('serializable_default');
        await sql(`ALTER DATABASE serializable_default SET default_transaction_isolation = 'serializable'`);
        expect(
          await sqlOn<{ default_transaction_isolation: string }>(
            connectionString,
            'SHOW default_transaction_isolation',
          ),
        ).toEqual([{ default_transaction_isolation: 'serializable' }]);
        const schema = nextSchema();
        const [a, b] = await Promise.all([0, 1].map(() => PgManifestLog.open({ connectionString, schema })));
        try {
          for (let round = 0; round < 5; round++) {
            // Two sessions at once: both take the counter row; the second waits, then goes on (no serialization error).
            const both = await Promise.allSettled([a!.append(link(`a${round}`, 0)), b!.append(link(`b${round}`, 0))]);
            expect(both.map((r) => (r.status === 'rejected' ? (r.reason as ManifestError).message : 'ok'))).toEqual([
              'ok',
              'ok',
            ]);
            // One head, two appenders: one wins, the other is CHAIN_CONFLICT (the ledger re-reads and retries on it).
            const race = await Promise.allSettled([a!, b!].map((log) => log.append(link(`race${round}`, 0))));
            expect(race.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
            expect((race.find((r) => r.status === 'rejected')!.reason as ManifestError).code).toBe('CHAIN_CONFLICT');
          }
        } finally {
          await Promise.all([a!.close(), b!.close()]);
        }
      });
    });

    describe('a database whose synchronous_commit is off', () => {
      it('commits every transaction durably (on), and leaves a stronger setting as it is', async () => {
        // off: COMMIT is answered before the WAL is flushed; a server crash then loses an acknowledged, pinned publish.
        const connectionString = await pg.cluster.createDatabase('async_commit');
        await sql(`ALTER DATABASE async_commit SET synchronous_commit = off`);
        const remote = await pg.cluster.createDatabase('remote_apply_commit');
        await sql(`ALTER DATABASE remote_apply_commit SET synchronous_commit = remote_apply`);
        for (const [cs, session, inside] of [
          [connectionString, 'off', 'on'],
          [remote, 'remote_apply', 'remote_apply'],
        ] as const) {
          const db = new PgDatabase({ connectionString: cs, schema: nextSchema() });
          try {
            expect(await sqlOn<{ synchronous_commit: string }>(cs, 'SHOW synchronous_commit')).toEqual([
              { synchronous_commit: session },
            ]);
            const seen = await db.transaction(
              async (client) => (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows,
            );
            expect(seen, session).toEqual([{ synchronous_commit: inside }]);
            // With a signal too (the BEGIN round trip then also names the transaction).
            const named = await db.transaction(
              async (client) => (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows,
              undefined,
              new AbortController().signal,
            );
            expect(named, session).toEqual([{ synchronous_commit: inside }]);
          } finally {
            await db.close();
          }
        }
        // An append through the log, in that database: its transaction commits durably too.
        const log = await PgManifestLog.open({ connectionString, schema: nextSchema() });
        try {
          await log.append(link('durable', 0));
          expect((await log.head('durable'))?.seq).toBe(0);
        } finally {
          await log.close();
        }
      });
    });

    describe('single write statements under a database default of SERIALIZABLE', () => {
      it('wait for a row another transaction holds and go on, as under READ COMMITTED (gc deletes, a watermark)', async () => {
        const connectionString = await pg.cluster.createDatabase('serializable_writes');
        await sql(`ALTER DATABASE serializable_writes SET default_transaction_isolation = 'serializable'`);
        const schema = nextSchema();
        const blobs = await PgBlobStore.open({ connectionString, schema, hash: nobleBlake3 });
        const log = await PgManifestLog.open({ connectionString, schema });
        const holder = new pgLib.Client({ connectionString });
        await holder.connect();
        try {
          const { digest } = await blobs.put(utf8('a blob gc judges while a put refreshes it'));
          await log.setWatermark('s', 1);
          // Another writer holds both rows (a put refreshing stored_at, a resume raising the watermark).
          await holder.query('BEGIN ISOLATION LEVEL READ COMMITTED');
          await holder.query(`UPDATE "${schema}".blobs SET stored_at = now() WHERE digest = $1`, [digest]);
          await holder.query(`UPDATE "${schema}".watermarks SET seq = 2 WHERE session = 's'`);
          const deleted = blobs.delete(digest, { storedBeforeMs: Date.now() + 60_000 });
          const raised = log.setWatermark('s', 3);
          // Both wait on the rows (seen waiting by the server, where a sleep of 300 ms stood for it).
          const waiters = async () =>
            Number(
              (
                await sqlOn<{ n: string }>(
                  connectionString,
                  "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                )
              )[0]!.n,
            );
          while ((await waiters()) < 2) await new Promise((r) => setTimeout(r, 20));
          await holder.query('COMMIT');
          // Re-checked against the committed rows: deleted (stored before the bound) and raised, no serialization error.
          expect(await deleted).toBe(true);
          await raised;
          expect(await log.getWatermark('s')).toBe(3);
        } finally {
          await holder.end();
          await Promise.all([blobs.close(), log.close()]);
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

    describe("the refusals an append reads after the log's counter lock", () => {
      const codeOf = async (p: Promise<unknown>) => ((await rejection(p)) as ManifestError).code;
      const signed = (session: string, seq: number, createdAt: string): AppendRequest => ({
        ...link(session, seq),
        signed: { keyId: 'ed25519:k1', createdAt },
      });
      /** A transaction of another writer holding the counter row, as a revocation or a rotation takes it first. */
      async function holdCounter(schema: string): Promise<pgLib.Client> {
        const holder = new pgLib.Client({ connectionString: pg.connectionString });
        await holder.connect();
        await holder.query('BEGIN');
        await holder.query(`SELECT 1 FROM "${schema}".log_counter FOR UPDATE`);
        return holder;
      }
      /** Until the server shows a statement matching `re` waiting for a lock (seen, not slept for). */
      async function waitingOn(re: RegExp): Promise<void> {
        for (;;) {
          const rows = await sqlOn<{ query: string }>(
            pg.connectionString,
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
          );
          if (rows.some((r) => re.test(r.query))) return;
          await new Promise((r) => setTimeout(r, 20));
        }
      }

      it('see a revocation committed while the append waited for the lock: REVOKED, nothing written', async () => {
        const schema = nextSchema();
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          await log.append(signed('s', 0, '2026-11-30T10:00:00.000Z'));
          const holder = await holdCounter(schema);
          const appending = codeOf(log.append(signed('s', 1, '2026-11-30T10:00:01.000Z')));
          await waitingOn(/UPDATE \S+\.log_counter/);
          await holder.query(
            `INSERT INTO "${schema}".grants (principal, session, state, at) VALUES ('alice', '*', 'revoked', '2026-11-30T10:00:02.000Z')`,
          );
          await holder.query('COMMIT');
          await holder.end();
          expect(await appending).toBe('REVOKED');
          expect((await log.head('s'))?.seq).toBe(0);
          expect(await log.entry('s', 1)).toBeUndefined();
        } finally {
          await log.close();
        }
      });

      it('see a key window closed while the append waited for the lock: KEY_EXPIRED, nothing written', async () => {
        const schema = nextSchema();
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          await log.append(signed('s', 0, '2026-11-30T10:00:00.000Z'));
          const holder = await holdCounter(schema);
          const appending = codeOf(log.append(signed('s', 1, '2026-11-30T10:00:05.000Z')));
          await waitingOn(/UPDATE \S+\.log_counter/);
          await holder.query(`UPDATE "${schema}".signing_keys SET closed_at = '2026-11-30T10:00:01.000Z'`);
          await holder.query('COMMIT');
          await holder.end();
          expect(await appending).toBe('KEY_EXPIRED');
          expect((await log.head('s'))?.seq).toBe(0);
        } finally {
          await log.close();
        }
      });

      it('come before what the append would meet in a damaged store: REVOKED, not TREE_DAMAGED', async () => {
        const schema = nextSchema();
        const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          await log.append(signed('s', 0, '2026-11-30T10:00:00.000Z'));
          await log.append(signed('t', 0, '2026-11-30T10:00:00.000Z'));
          await log.grants.put({ principal: 'alice', session: '*', state: 'revoked', at: '2026-11-30T10:00:01.000Z' });
          // The counter behind the entries: the next position is taken, which the entry's insert would meet.
          await sql(`UPDATE "${schema}".log_counter SET next_position = 1`);
          expect(await codeOf(log.append(signed('u', 0, '2026-11-30T10:00:02.000Z')))).toBe('REVOKED');
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
          // A pool-shaped wrapper (the typed members only): its own connections would go wherever pg's defaults and
          // PG* variables point. Refused before anything connects; a real pool of the application passes.
          const real = new pgLib.Pool({ connectionString: pg.connectionString, max: 1 });
          const facade = { connect: () => real.connect(), query: (t: string) => real.query(t), on: () => facade };
          try {
            for (const pool of [facade, { ...facade, Client: pgLib.Client }, 'postgresql://x@/y']) {
              const pooled = { pool: pool as unknown as typeof facade };
              const logRefusal = await rejection(PgManifestLog.open(pooled));
              expect(logRefusal).toMatchObject({ name: 'ManifestError', code: 'INVALID_ARGUMENT' });
              expect((logRefusal as Error).message).toMatch(/pool must be a pg\.Pool/);
              expect(await rejection(PgBlobStore.open({ ...pooled, hash: nobleBlake3 }))).toMatchObject({
                name: 'StoreError',
                code: 'INVALID_ARGUMENT',
              });
            }
            const log = await PgManifestLog.open({ pool: real, schema: 'hl_own_pool' });
            await log.close();
          } finally {
            await real.end();
          }
        } finally {
          await rm(root, { recursive: true, force: true });
        }
      });

      it('refuses a bad maxBlobBytes before anything connects: no schema made, no connection left open', async () => {
        const root = mkdtempSync(join(tmpdir(), 'hl-pg-options-'));
        const clients = async () =>
          Number(
            (
              await sql<{ n: string }>(
                `SELECT count(*)::text AS n FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
              )
            )[0]!.n,
          );
        const before = await clients();
        try {
          for (const maxBlobBytes of [-1, 1.5, 2 ** 60, '10' as unknown as number]) {
            const a = nextSchema();
            const blobErr = await rejection(
              PgBlobStore.open({ connectionString: pg.connectionString, schema: a, hash: nobleBlake3, maxBlobBytes }),
            );
            expect(blobErr).toBeInstanceOf(StoreError);
            expect(blobErr).toMatchObject({
              code: 'INVALID_ARGUMENT',
              message: expect.stringContaining('maxBlobBytes'),
            });
            const b = nextSchema();
            const ledgerErr = await rejection(
              openLedger({
                root,
                host: 'h',
                postgres: { connectionString: pg.connectionString, schema: b, maxBlobBytes },
                onNotice: () => {},
              }),
            );
            expect(ledgerErr).toBeInstanceOf(LedgerError);
            expect(ledgerErr).toMatchObject({ code: 'INVALID_ARGUMENT' });
            expect(await sql('SELECT 1 FROM pg_namespace WHERE nspname = ANY($1)', [[a, b]])).toEqual([]);
          }
          // At most as many as before: a server process of an earlier test, or of the count before, may have left since.
          expect(await settledCount(clients, before)).toBeLessThanOrEqual(before);
        } finally {
          await rm(root, { recursive: true, force: true });
        }
      });

      it('openPostgresBackends refuses a hash that is neither a backend nor its name before anything connects', async () => {
        for (const hash of [null, {}, 'no-such-backend', 7]) {
          const schema = nextSchema();
          const err = await rejection(
            openPostgresBackends({ connectionString: pg.connectionString, schema, hash } as never),
          );
          expect(err).toBeInstanceOf(LedgerError);
          expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('BLAKE3 backend') });
          expect(await sql('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).toEqual([]);
        }
        // A backend and a backend's name open as ever.
        for (const hash of [nobleBlake3, 'noble'] as const) {
          const { blobs, log } = await openPostgresBackends({
            connectionString: pg.connectionString,
            schema: nextSchema(),
            hash,
          });
          expect((await blobs.put(utf8('x'))).size).toBe(1);
          await Promise.all([blobs.close(), log.close()]);
        }
      });

      it('refuses a keyFile that does not exist (KEY_INVALID) before anything connects: no schema, no root made', async () => {
        const base = mkdtempSync(join(tmpdir(), 'hl-pg-keyfile-'));
        try {
          const schema = nextSchema();
          const root = join(base, 'root');
          const err = await rejection(
            openLedger({
              root,
              host: 'h',
              keyFile: join(base, 'nope.jwk'),
              postgres: { connectionString: pg.connectionString, schema },
              onNotice: () => {},
            }),
          );
          expect(err).toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID', message: /no such key file/ });
          expect(existsSync(root)).toBe(false);
          expect(await sql('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).toEqual([]);
        } finally {
          await rm(base, { recursive: true, force: true });
        }
      });
    });

    describe('opening while another opener migrates', () => {
      it('waits for the migration lock past lockTimeoutMs (a long migration is not a stalled writer)', async () => {
        const schema = nextSchema();
        const holder = new pgLib.Client({ connectionString: pg.connectionString });
        holder.on('error', () => {});
        await holder.connect();
        try {
          // What a migrating opener holds for as long as its migration (or a large store's backfill) takes.
          await holder.query('BEGIN');
          await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`handoff_ledger.migrate:"${schema}"`]);
          const opening = PgManifestLog.open({ connectionString: pg.connectionString, schema, lockTimeoutMs: 300 });
          const settled = opening.then(
            () => 'opened',
            (err: unknown) => `failed: ${(err as Error).message}`,
          );
          // The open waits for the lock (seen by the server), then four times the lock bound more: a wait bounded by it
          // would have failed by then. A loaded machine can only make the wait longer.
          await waitingForLock(pg, '%pg_advisory_xact_lock%', { settles: opening });
          await new Promise((r) => setTimeout(r, 1200));
          await holder.query('COMMIT');
          expect(await settled).toBe('opened');
          await (await opening).close();
        } finally {
          await holder.end();
        }
      });
    });

    describe('a writer that stalls inside a transaction', () => {
      /** A second connection holding the global counter's row lock, as an append in flight does. */
      async function holdCounter(schema: string): Promise<pgLib.Client> {
        const locker = new pgLib.Client({ connectionString: pg.connectionString });
        locker.on('error', () => {});
        await locker.connect();
        await locker.query('BEGIN');
        await locker.query(`SELECT 1 FROM "${schema}".log_counter FOR UPDATE`);
        return locker;
      }

      it('makes an append elsewhere fail LOCKED within lockTimeoutMs, and a publish too; nothing is written', async () => {
        const schema = nextSchema();
        const root = mkdtempSync(join(tmpdir(), 'hl-pg-lock-'));
        const postgres = { connectionString: pg.connectionString, schema, lockTimeoutMs: 500 };
        const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
        const log = await PgManifestLog.open(postgres);
        const scope = { principal: 'alice', session: 's1', run: 'r1' };
        try {
          await ledger.publish(scope, { task: 't', state: 's', nextSteps: ['n'] });
          const locker = await holdCounter(schema);
          // Released after 120 s at the latest: without a bound the append would wait for it and then succeed (so the
          // outcome, LOCKED, tells the bound ended it, where bounds of 4 s on the clock failed a loaded machine).
          const release = setTimeout(() => void locker.query('ROLLBACK'), 4 * ENDS_AT_SIGNAL_MS);
          try {
            const appending = rejection(log.append(link('other', 0)));
            expect(await settledWithin(appending, ENDS_AT_SIGNAL_MS), 'the append waited past its bound').toBe(
              'settled',
            );
            const err = await appending;
            expect(err).toBeInstanceOf(ManifestError);
            expect(err).toMatchObject({ code: 'LOCKED' });
            expect((err as Error).message).toMatch(/lock_timeout/);
            const publishing = rejection(ledger.publish(scope, { task: 't2', state: 's', nextSteps: ['n'] }));
            expect(await settledWithin(publishing, ENDS_AT_SIGNAL_MS), 'the publish waited past its bound').toBe(
              'settled',
            );
            expect(await publishing).toMatchObject({ code: 'LOCKED' });
          } finally {
            clearTimeout(release);
            await locker.query('ROLLBACK');
            await locker.end();
          }
          expect(await log.head('other')).toBeUndefined();
          expect((await log.head('s1'))?.seq).toBe(0);
          // Once the holder is gone, appends go through again.
          expect(await log.append(link('other', 0))).toMatchObject({ position: 1 });
        } finally {
          await ledger.close();
          await log.close();
          await rm(root, { recursive: true, force: true });
        }
      });

      it('makes a blob put that waits for a lock past lockTimeoutMs fail LOCKED (StoreError, as the log), nothing written', async () => {
        const schema = nextSchema();
        const blobs = await PgBlobStore.open({
          connectionString: pg.connectionString,
          schema,
          hash: nobleBlake3,
          lockTimeoutMs: 500,
        });
        const locker = new pgLib.Client({ connectionString: pg.connectionString });
        locker.on('error', () => {});
        await locker.connect();
        try {
          await locker.query('BEGIN');
          await locker.query(`LOCK TABLE "${schema}".blobs IN ACCESS EXCLUSIVE MODE`);
          // Released after 120 s at the latest: without a bound the put would wait for it and then succeed.
          const release = setTimeout(() => void locker.query('ROLLBACK'), 4 * ENDS_AT_SIGNAL_MS);
          try {
            const putting = rejection(blobs.put(new TextEncoder().encode('held')));
            expect(await settledWithin(putting, ENDS_AT_SIGNAL_MS), 'the put waited past its bound').toBe('settled');
            const err = await putting;
            // It was STORAGE_FAILED, where the log's append held up so is LOCKED: a caller retrying LOCKED gave up.
            expect(err).toBeInstanceOf(StoreError);
            expect(err).toMatchObject({ code: 'LOCKED', message: expect.stringMatching(/lock_timeout/) });
          } finally {
            clearTimeout(release);
            await locker.query('ROLLBACK');
          }
          const listed: string[] = [];
          for await (const d of blobs.list()) listed.push(d);
          expect(listed).toEqual([]);
        } finally {
          await locker.end();
          await blobs.close();
        }
      });

      it("makes an append and a blob put whose lock wait the role's statement_timeout ends fail LOCKED, saying so; nothing written", async () => {
        // A role whose statement_timeout (300 ms) is far below lockTimeoutMs: the server cancels the wait first.
        await sql(`DO $$ BEGIN CREATE ROLE hl_statement_timeout LOGIN SUPERUSER;
          EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
        await sql(`ALTER ROLE hl_statement_timeout SET statement_timeout = '300ms'`);
        const connectionString = pg.connectionString.replace('postgres@', 'hl_statement_timeout@');
        const schema = nextSchema();
        const options = { connectionString, schema, lockTimeoutMs: 120_000 };
        const log = await PgManifestLog.open(options);
        const blobs = await PgBlobStore.open({ ...options, hash: nobleBlake3 });
        await log.append(link('s', 0));
        const locker = await holdCounter(schema);
        try {
          await locker.query(`LOCK TABLE "${schema}".blobs IN ACCESS EXCLUSIVE MODE`);
          const said = expect.stringMatching(
            /the server cancelled the statement: it ran longer than statement_timeout/,
          );
          // Both were STORAGE_FAILED, where a lock wait ended by lock_timeout is LOCKED: a caller retrying LOCKED gave up.
          const appended = await rejection(log.append(link('s', 1)));
          expect(appended).toBeInstanceOf(ManifestError);
          expect(appended).toMatchObject({ code: 'LOCKED', message: said });
          expect((appended as Error).cause).toMatchObject({ code: '57014' });
          const put = await rejection(blobs.put(new TextEncoder().encode('held')));
          expect(put).toBeInstanceOf(StoreError);
          expect(put).toMatchObject({ code: 'LOCKED', message: said });
        } finally {
          await locker.query('ROLLBACK');
          await locker.end();
        }
        try {
          expect((await log.head('s'))?.seq).toBe(0);
          const listed: string[] = [];
          for await (const d of blobs.list()) listed.push(d);
          expect(listed).toEqual([]);
        } finally {
          await Promise.all([log.close(), blobs.close()]);
        }
      });

      it("is ended by the server after idleInTransactionTimeoutMs, releasing the lock other hosts' appends wait for", async () => {
        const schema = nextSchema();
        await (await PgManifestLog.open({ connectionString: pg.connectionString, schema })).close();
        // The stalled host: its append pauses after taking the position (a paused process, a GC pause), until the
        // other host's append is through: only the server's ending of the stalled transaction lets that one go on
        // (else it waits for the counter's lock until its lock_timeout, LOCKED), where a bound of 2.5 s on the clock
        // against a pause of 3 s stood for it.
        const { pool, paused, resume } = stallingPool(pg.connectionString, 500, /INSERT INTO .*\.entries/);
        const stalled = await PgManifestLog.open({ pool, schema });
        const other = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
        try {
          const stalledAppend = rejection(stalled.append(link('a', 0)));
          await paused;
          try {
            expect(await other.append(link('b', 0))).toMatchObject({ position: 0 });
          } finally {
            resume();
          }
          const err = await stalledAppend;
          expect(err).toBeInstanceOf(ManifestError);
          expect(err).toMatchObject({ code: 'STORAGE_FAILED' });
          expect((err as Error).message, String((err as Error).cause)).toMatch(/idle_in_transaction_session_timeout/);
          expect(await other.head('a')).toBeUndefined();
          // The pool drops the ended connection: the stalled host's next append works.
          expect(await stalled.append(link('a', 0))).toMatchObject({ position: 1 });
        } finally {
          await Promise.all([stalled.close(), other.close()]);
          await pool.end();
        }
      });

      it("bounds a put again once its row is placed: a stall there is ended, another host's put of it goes on", async () => {
        const schema = nextSchema();
        const bytes = utf8('z'.repeat(300_000));
        const other = await PgBlobStore.open({
          connectionString: pg.connectionString,
          schema,
          hash: nobleBlake3,
          lockTimeoutMs: 1000,
        });
        const { digest } = await other.put(bytes);
        // The stalled host: its put of the same bytes pauses after locking the existing row (a paused process), before
        // dropping its own chunks again, until the other host's put is through.
        const { pool, paused, resume } = stallingPool(
          pg.connectionString,
          500,
          /DELETE FROM .*blob_chunks WHERE blob_id/,
        );
        const stalled = await PgBlobStore.open({ pool, schema, hash: nobleBlake3 });
        try {
          const stalledPut = rejection(stalled.put(bytes));
          await paused;
          try {
            // The server ends the stalled transaction (its 500 ms bound), while the pause lasts: polled for as long as
            // a wait that must end is given, where one look after 1 s stood for it.
            const idle = async () =>
              (
                await sql(
                  `SELECT 1 FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`,
                )
              ).length;
            expect(await settledCount(idle, 0, ENDS_AT_SIGNAL_MS)).toBe(0);
            expect(await other.put(bytes)).toMatchObject({ digest });
          } finally {
            resume();
          }
          const err = await stalledPut;
          expect(err).toMatchObject({ code: 'STORAGE_FAILED' });
          expect((err as Error).message, String((err as Error).cause)).toMatch(/idle_in_transaction_session_timeout/);
          expect(Buffer.from(await other.get(digest)).equals(Buffer.from(bytes))).toBe(true);
          // The stalled host's next put of it works (the pool dropped the ended connection).
          expect(await stalled.put(bytes)).toMatchObject({ digest });
        } finally {
          await Promise.all([stalled.close(), other.close()]);
          await pool.end();
        }
      });

      it('leaves a blob upload whose source is slower than idleInTransactionTimeoutMs alone', async () => {
        const { blobs, log } = await openPostgresBackends({
          connectionString: pg.connectionString,
          schema: nextSchema(),
          idleInTransactionTimeoutMs: 300,
        });
        try {
          const source = (async function* () {
            for (let i = 0; i < 3; i++) {
              await new Promise((r) => setTimeout(r, 700));
              yield new Uint8Array(5 * 1024 * 1024).fill(i + 1);
            }
          })();
          const { digest, size } = await blobs.put(source);
          expect(size).toBe(15 * 1024 * 1024);
          expect((await blobs.get(digest)).length).toBe(size);
        } finally {
          await Promise.all([blobs.close(), log.close()]);
        }
      });

      it('sets the bounds and keepalive on the pools it makes (defaults 30 s and 60 s), and checks them', () => {
        const pool = createPgPool({ connectionString: pg.connectionString });
        const options = (pool as unknown as { options: Record<string, unknown> }).options;
        expect(options).toMatchObject({
          lock_timeout: 30_000,
          idle_in_transaction_session_timeout: 60_000,
          keepAlive: true,
          connectionTimeoutMillis: 60_000, // waiting for a free connection; a connection attempt is bounded at 10 s
        });
        void pool.end();
        for (const bad of [{ lockTimeoutMs: -1 }, { idleInTransactionTimeoutMs: 1.5 }, { maxConnections: 0 }])
          expect(pgOptionsProblem({ connectionString: 'postgresql://x@/y', ...bad })).toMatch(
            /must be (a positive integer|an integer number of milliseconds)/,
          );
      });
    });

    /**
     * Another connection's transaction holding the rows `select` locks (FOR UPDATE). It lets go after LET_GO_MS at the
     * latest, so a wait that ignores its signal ends, and `released` says it came to that: four times as long as a wait
     * that must end at its signal is given (ENDS_AT_SIGNAL_MS), where 8 s was not (a loaded machine took longer to
     * get from the lock to the answer). A wait it holds must be bounded by more than that (lockTimeoutMs), or by none.
     */
    const LET_GO_MS = 4 * ENDS_AT_SIGNAL_MS;
    async function holdRowLock(select: string): Promise<{ readonly released: boolean; end(): Promise<void> }> {
      const locker = new pgLib.Client({ connectionString: pg.connectionString });
      locker.on('error', () => {});
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query(select);
      let released = false;
      const timer = setTimeout(() => {
        released = true;
        void locker.query('ROLLBACK');
      }, LET_GO_MS);
      return {
        get released() {
          return released;
        },
        async end() {
          clearTimeout(timer);
          if (!released) await locker.query('ROLLBACK');
          await locker.end();
        },
      };
    }

    describe('an append whose signal aborts', () => {
      it('rolls back when the abort comes before COMMIT is sent, and stands when it comes after', async () => {
        const schema = nextSchema();
        const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1 });
        // Aborts `ac` as the statement containing `at` is sent (before the server has it).
        let at: string | undefined;
        let ac = new AbortController();
        pool.on('connect', (client) => {
          const query = client.query.bind(client) as (...args: unknown[]) => unknown;
          (client as unknown as { query: (...args: unknown[]) => unknown }).query = (text, ...rest) => {
            // COMMIT itself, not a BEGIN of READ COMMITTED.
            const sent = statementText(text);
            if (at !== undefined && sent !== undefined && (at === 'COMMIT' ? sent === 'COMMIT' : sent.includes(at))) {
              at = undefined;
              ac.abort(new Error('user pressed stop'));
            }
            return query(text, ...rest);
          };
        });
        const log = await PgManifestLog.open({ pool, schema });
        try {
          at = 'watermarks'; // the append's last statement
          const err = await rejection(log.append(link('s', 0), { signal: ac.signal }));
          expect(err).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
          expect(await log.head('s')).toBeUndefined();
          expect(await sql(`SELECT seq FROM "${schema}".entries`)).toEqual([]);
          ac = new AbortController();
          at = 'COMMIT';
          expect(await log.append(link('s', 0), { signal: ac.signal })).toMatchObject({ seq: 0, position: 0 });
          expect(ac.signal.aborted).toBe(true);
          expect(await log.head('s')).toMatchObject({ seq: 0 });
          expect(await log.append(link('s', 1))).toMatchObject({ seq: 1, position: 1 });
        } finally {
          await log.close();
          await pool.end();
        }
      });

      it("ends a publish's wait for the head row lock: CANCELLED, rolled back, its one connection healthy", async () => {
        const schema = nextSchema();
        const root = mkdtempSync(join(tmpdir(), 'hl-pg-cancel-'));
        // One connection: the publish after the cancelled one must find it back in the pool, out of its transaction.
        // Its lock waits are bounded beyond the holder's LET_GO_MS (the default 30 s would end a wait that ignored its
        // signal, CANCELLED as well, before the holder let go).
        const postgres = { connectionString: pg.connectionString, schema, maxConnections: 1, lockTimeoutMs: 600_000 };
        const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
        const scope = { principal: 'alice', session: 's1', run: 'r1' };
        const rows = async () => ({
          entries: await sql(`SELECT session, seq FROM "${schema}".entries ORDER BY position`),
          inline: await sql(`SELECT digest FROM "${schema}".inline_blobs ORDER BY digest`),
          heads: await sql(`SELECT session, seq, id FROM "${schema}".heads`),
        });
        try {
          const first = await ledger.publish(scope, { task: 't', state: 's', nextSteps: ['n'] });
          const before = await rows();
          // Another host's append in flight on this chain: its transaction holds the head's row lock.
          const lock = await holdRowLock(`SELECT 1 FROM "${schema}".heads WHERE session = 's1' FOR UPDATE`);
          try {
            const ac = new AbortController();
            const publishing = rejection(
              ledger.publish(scope, { task: 'cancelled', state: 's', nextSteps: ['n'] }, { signal: ac.signal }),
            );
            const waiting = () =>
              sql<{ n: number }>(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
              );
            await waitingForLock(pg, '%FOR UPDATE%', { settles: publishing });
            ac.abort(new Error('user pressed stop'));
            expect(await settledWithin(publishing, ENDS_AT_SIGNAL_MS), 'the wait did not end at the abort').toBe(
              'settled',
            );
            const err = await publishing;
            expect(lock.released, 'the publish answered while the lock was still held').toBe(false);
            expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
            expect((await waiting())[0]!.n).toBe(0);
            expect(await rows()).toEqual(before);
          } finally {
            await lock.end();
          }
          expect((await ledger.resume(scope))?.id).toBe(first.id);
          const next = await ledger.publish(scope, { task: 'next', state: 's', nextSteps: ['n'] });
          expect(next).toMatchObject({ seq: 1 });
          expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id, next.id]);
        } finally {
          await ledger.close();
          await rm(root, { recursive: true, force: true });
        }
      });
    });

    describe('a lock wait whose cancel can never be sent', () => {
      it('ends at lockTimeoutMs, still CANCELLED, nothing written (a connection limit reached: no cancel ever lands)', async () => {
        const schema = nextSchema();
        const root = mkdtempSync(join(tmpdir(), 'hl-pg-cancel-'));
        const postgres = { connectionString: pg.connectionString, schema, maxConnections: 1, lockTimeoutMs: 1500 };
        const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
        const scope = { principal: 'alice', session: 's1', run: 'r1' };
        const rows = async () => ({
          entries: await sql(`SELECT session, seq FROM "${schema}".entries ORDER BY position`),
          inline: await sql(`SELECT digest FROM "${schema}".inline_blobs ORDER BY digest`),
          heads: await sql(`SELECT session, seq, id FROM "${schema}".heads`),
        });
        // Every cancel is lost: its own connection cannot be made (the role's or the server's limit reached).
        const cancels = vi
          .spyOn(PgDatabase.prototype as unknown as { cancelTagged: (tag: string) => Promise<void> }, 'cancelTagged')
          .mockImplementation(async () => {});
        try {
          const first = await ledger.publish(scope, { task: 't', state: 's', nextSteps: ['n'] });
          const before = await rows();
          const lock = await holdRowLock(`SELECT 1 FROM "${schema}".heads WHERE session = 's1' FOR UPDATE`);
          try {
            const ac = new AbortController();
            const publishing = rejection(
              ledger.publish(scope, { task: 'cancelled', state: 's', nextSteps: ['n'] }, { signal: ac.signal }),
            );
            const waiting = () =>
              sql<{ n: number }>(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
              );
            await waitingForLock(pg, '%FOR UPDATE%', { settles: publishing });
            ac.abort(new Error('user pressed stop'));
            expect(await settledWithin(publishing, ENDS_AT_SIGNAL_MS), 'the wait never ended').toBe('settled');
            const err = await publishing;
            // The wait ran to the server's lock_timeout (1.5 s from its start), not to the holder's end (LET_GO_MS).
            expect(lock.released, 'the publish answered only once the lock was let go').toBe(false);
            expect(cancels).toHaveBeenCalled();
            expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
            // No cancel landed: the publish answered once the server had ended the statement's wait (lock_timeout),
            // not at the abort with the statement still waiting, where a bound of 1 s to 6 s on the clock stood for it.
            expect((await waiting())[0]!.n).toBe(0);
            expect(await rows()).toEqual(before);
          } finally {
            await lock.end();
          }
          // Its one connection is back in the pool, out of its transaction.
          const next = await ledger.publish(scope, { task: 'next', state: 's', nextSteps: ['n'] });
          expect(next).toMatchObject({ seq: 1 });
          expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id, next.id]);
        } finally {
          cancels.mockRestore();
          await ledger.close();
          await rm(root, { recursive: true, force: true });
        }
      }, 90_000);
    });

    describe("a publish's reads before its append, with every pooled connection busy", () => {
      it('end at the abort: CANCELLED while the pool is still full, nothing written', async () => {
        const schema = nextSchema();
        const root = mkdtempSync(join(tmpdir(), 'hl-pg-cancel-'));
        const postgres = { connectionString: pg.connectionString, schema, maxConnections: 1 };
        const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
        const scope = { principal: 'alice', session: 's1', run: 'r1' };
        try {
          const first = await ledger.publish(scope, { task: 't', state: 's', nextSteps: ['n'] });
          // The pool's one connection, held (a long read or another operation): the head read waits for it.
          const pool = (ledger.log as unknown as { db: { pool: pgLib.Pool } }).db.pool;
          const held = await pool.connect();
          let released = false;
          try {
            const ac = new AbortController();
            const publishing = rejection(
              ledger.publish(scope, { task: 'cancelled', state: 's', nextSteps: ['n'] }, { signal: ac.signal }),
            );
            while (pool.waitingCount === 0) await new Promise((r) => setTimeout(r, 10));
            ac.abort(new Error('user pressed stop'));
            const err = await publishing;
            expect(released, 'the publish answered while the pool was still full').toBe(false);
            expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
          } finally {
            released = true;
            held.release();
          }
          expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id]);
          expect((await ledger.publish(scope, { task: 'next', state: 's', nextSteps: ['n'] })).seq).toBe(1);
        } finally {
          await ledger.close();
          await rm(root, { recursive: true, force: true });
        }
      }, 30_000);
    });

    describe("a resume's read of an inline summary, with every pooled connection busy", () => {
      it(
        'ends at the abort: CANCELLED while the pool is still full',
        async () => {
          const schema = nextSchema();
          const root = mkdtempSync(join(tmpdir(), 'hl-pg-cancel-'));
          const postgres = { connectionString: pg.connectionString, schema, maxConnections: 1 };
          const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
          const scope = { principal: 'alice', session: 's1', run: 'r1' };
          const pool = (ledger.log as unknown as { db: { pool: pgLib.Pool } }).db.pool;
          let held: pgLib.PoolClient | undefined;
          try {
            const published = await ledger.publish(scope, { task: 't', state: 's', nextSteps: ['n'] });
            // The pool's one connection taken (a long read, another operation) as the summary's inline read begins:
            // the head and its entries were read, the summary's row waits for the connection.
            const inline = ledger.log.inlineBlobs!;
            const get = inline.get.bind(inline);
            let taken!: () => void;
            const holding = new Promise<void>((resolve) => (taken = resolve));
            inline.get = async (digest) => {
              held ??= await pool.connect();
              taken();
              return get(digest);
            };
            const ac = new AbortController();
            const resuming = rejection(ledger.resume(scope, { signal: ac.signal }));
            // Aborted once the inline read waits for the connection the test holds (the resume's reads before it, sent
            // side by side, wait for the one connection too: a wait seen before the hold is theirs).
            await holding;
            while (pool.waitingCount === 0) await new Promise((r) => setTimeout(r, 10));
            ac.abort(new Error('user pressed stop'));
            expect(await settledWithin(resuming, ENDS_AT_SIGNAL_MS)).toBe('settled'); // not the pool's 60 s
            expect(await resuming).toMatchObject({ code: 'CANCELLED' });
            held!.release();
            held = undefined;
            inline.get = get;
            expect((await ledger.resume(scope))?.id).toBe(published.id);
          } finally {
            held?.release();
            await ledger.close();
            await rm(root, { recursive: true, force: true });
          }
        },
        ENDS_AT_SIGNAL_MS + 30_000,
      );
    });

    describe('a transaction whose signal aborts', () => {
      /** A one-connection pool whose statements are recorded; `onSend` runs as each is sent. */
      const recordingPool = (onSend: (text: string) => void) => {
        const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1 });
        pool.on('connect', (client) => {
          const query = client.query.bind(client) as (...args: unknown[]) => unknown;
          (client as unknown as { query: (...args: unknown[]) => unknown }).query = (text, ...rest) => {
            const sent = statementText(text);
            if (sent !== undefined) onSend(sent);
            return query(text, ...rest);
          };
        });
        return pool;
      };

      it('cancels again when a cancel missed its statement (one still on its way runs on): ended long before it would', async () => {
        const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1 });
        const db = new PgDatabase({ pool, schema: nextSchema() });
        // The first cancel lands before the server started the statement: simulated by one that does nothing.
        const cancels = vi.spyOn(
          PgDatabase.prototype as unknown as { cancelTagged: (tag: string) => Promise<void> },
          'cancelTagged',
        );
        cancels.mockImplementationOnce(async () => {});
        const ac = new AbortController();
        try {
          const running = rejection(
            db.transaction(async (c) => void (await c.query('SELECT pg_sleep(600) AS slow')), 'BEGIN', ac.signal),
          );
          const sleeping = () =>
            sql<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600) AS slow%' AND pid <> pg_backend_pid()",
            );
          while ((await sleeping())[0]!.n === 0) await new Promise((r) => setTimeout(r, 20));
          ac.abort(new Error('user pressed stop'));
          // Without a second cancel the statement would run its 10 min (where 30 s against a race of 10 s left a loaded
          // machine too little margin).
          expect(await settledWithin(running, ENDS_AT_SIGNAL_MS), 'still running').toBe('settled');
          expect(await running).toMatchObject({ message: 'user pressed stop' });
          expect(cancels.mock.calls.length).toBeGreaterThanOrEqual(2);
          expect((await sleeping())[0]!.n).toBe(0);
        } finally {
          cancels.mockRestore();
          await pool.end();
        }
      });

      it('sends no statement of its own after the abort (one the server was between would end nothing)', async () => {
        const sent: string[] = [];
        const pool = recordingPool((text) => sent.push(text));
        const db = new PgDatabase({ pool, schema: nextSchema() });
        const ac = new AbortController();
        try {
          const err = await rejection(
            db.transaction(
              async (c) => {
                await c.query('SELECT 1 AS before_abort');
                ac.abort(new Error('user pressed stop'));
                await c.query('SELECT pg_sleep(30) AS after_abort');
              },
              'BEGIN',
              ac.signal,
            ),
          );
          expect(err).toMatchObject({ message: 'user pressed stop' });
          expect(sent.some((t) => t.includes('before_abort'))).toBe(true);
          expect(sent.filter((t) => t.includes('after_abort'))).toEqual([]);
          expect(sent.at(-1)).toBe('ROLLBACK');
          expect((await sql<{ n: number }>('SELECT 1 AS n'))[0]!.n).toBe(1);
        } finally {
          await pool.end();
        }
      });

      it('never cancels a later statement on its connection: an abort during the ROLLBACK of a failed transaction', async () => {
        const ac = new AbortController();
        let abortOnRollback = false;
        const pool = recordingPool((text) => {
          if (abortOnRollback && text === 'ROLLBACK') {
            abortOnRollback = false;
            ac.abort(new Error('user pressed stop'));
          }
        });
        const db = new PgDatabase({ pool, schema: nextSchema() });
        try {
          abortOnRollback = true;
          const err = await rejection(
            db.transaction(
              async () => {
                throw new Error('the append lost its race');
              },
              'BEGIN',
              ac.signal,
            ),
          );
          expect(err).toMatchObject({ message: 'the append lost its race' });
          expect(ac.signal.aborted).toBe(true);
          // The next transaction on the same (only) connection, with no signal, runs to its end.
          const value = await db.transaction(async (c) => {
            await c.query('SELECT pg_sleep(0.5)');
            return 'ran to its end';
          });
          expect(value).toBe('ran to its end');
        } finally {
          await pool.end();
        }
      });

      it('cancels by its own name, not by the connection id the server gave (a pooler gives its own)', async () => {
        const schema = nextSchema();
        const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1 });
        pool.on('connect', (client) => {
          // What a pooler between would hand out: no id of the server process that runs the statements.
          Object.defineProperty(client, 'processID', { value: 0, writable: true });
        });
        const db = new PgDatabase({ pool, schema });
        await db.transaction((c) => c.query(`CREATE TABLE IF NOT EXISTS public."${schema}_rows" (k int PRIMARY KEY)`));
        await db.transaction((c) => c.query(`INSERT INTO public."${schema}_rows" VALUES (1)`));
        const lock = await holdRowLock(`SELECT 1 FROM public."${schema}_rows" WHERE k = 1 FOR UPDATE`);
        try {
          const ac = new AbortController();
          const waitingOnLock = rejection(
            db.transaction(
              (c) => c.query(`SELECT 1 FROM public."${schema}_rows" WHERE k = 1 FOR UPDATE`),
              'BEGIN',
              ac.signal,
            ),
          );
          await waitingForLock(pg, `%${schema}_rows%`, { settles: waitingOnLock });
          ac.abort(new Error('user pressed stop'));
          // No lock_timeout on this pool: a wait the cancel missed lasts until the holder lets go (LET_GO_MS).
          expect(await settledWithin(waitingOnLock, ENDS_AT_SIGNAL_MS), 'the wait did not end at the abort').toBe(
            'settled',
          );
          expect(await waitingOnLock).toMatchObject({ message: 'user pressed stop' });
          expect(lock.released, 'the wait ended while the lock was still held').toBe(false);
        } finally {
          await lock.end();
          await pool.end();
        }
      });
    });

    describe('long uploads and a small pool', () => {
      /** A source that takes about `chunks` × 700 ms. */
      const slowSource = (chunks: number, fill: number) =>
        (async function* () {
          for (let i = 0; i < chunks; i++) {
            await new Promise((r) => setTimeout(r, 700));
            yield new Uint8Array(1024 * 1024).fill(fill);
          }
        })();

      it('leave connections for appends and reads: uploads hold at most maxConnections − 2', async () => {
        const schema = nextSchema();
        const { blobs, log } = await openPostgresBackends({
          connectionString: pg.connectionString,
          schema,
          maxConnections: 3,
        });
        try {
          await log.append(link('s', 0));
          // The uploads hold on after they begin until the append and the reads are done: without the limit all three
          // hold a connection each, and these wait for one for as long as the uploads do (where a bound of 1.5 s on
          // them, while uploads took ~2.8 s, failed whenever a loaded machine made the append itself that slow).
          let letGo!: () => void;
          const held = new Promise<void>((resolve) => (letGo = resolve));
          let begun!: () => void;
          const uploading = new Promise<void>((resolve) => (begun = resolve));
          const heldSource = (fill: number) =>
            (async function* () {
              begun(); // pulled: the upload holds its connection, its transaction open
              yield new Uint8Array(1024 * 1024).fill(fill);
              await held;
              for (let i = 1; i < 4; i++) yield new Uint8Array(1024 * 1024).fill(fill);
            })();
          const puts = [1, 2, 3].map((k) => blobs.put(heldSource(k)));
          // A put waiting for an upload connection still answers its signal.
          const cancelled = rejection(blobs.put(slowSource(1, 9), { signal: AbortSignal.timeout(300) }));
          await uploading;
          try {
            const served = (async () => {
              expect(await log.append(link('s', 1))).toMatchObject({ seq: 1 });
              expect((await log.head('s'))?.seq).toBe(1);
              expect(await blobs.has(digestOf(utf8('nothing')))).toBe(false);
            })();
            expect(await settledWithin(served, ENDS_AT_SIGNAL_MS), 'the append and reads waited for an upload').toBe(
              'settled',
            );
            await served;
            // Still waiting for the held upload's slot when its signal fired.
            expect(await cancelled).toMatchObject({ code: 'CANCELLED' });
          } finally {
            letGo();
          }
          const stored = await Promise.all(puts);
          expect(stored.map((b) => b.size)).toEqual([4, 4, 4].map((n) => n * 1024 * 1024));
        } finally {
          await Promise.all([blobs.close(), log.close()]);
        }
      });

      it('ends an append waiting for a free connection at its abort (CANCELLED at once), leaking no connection', async () => {
        const schema = nextSchema();
        // The pool's wait for a free connection is ten minutes: an append that waited for it would not end within the
        // test, where a bound of 2 s on the clock also failed an abort only slow to be answered (a loaded machine).
        const pool = new pgLib.Pool({
          connectionString: pg.connectionString,
          max: 1,
          connectionTimeoutMillis: 600_000,
        });
        const log = await PgManifestLog.open({ pool, schema });
        const held = await pool.connect(); // the pool's one connection, busy
        try {
          const ac = new AbortController();
          const append = rejection(log.append(link('s', 0), { signal: ac.signal }));
          // Aborted once the append waits for the connection (where a timer of 100 ms stood for that).
          while (pool.waitingCount === 0) await new Promise((r) => setTimeout(r, 10));
          ac.abort(new Error('user pressed stop'));
          expect(await settledWithin(append, ENDS_AT_SIGNAL_MS)).toBe('settled'); // not the pool's ten minutes
          expect(await append).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
          held.release();
          // The connection the abandoned wait got went back to the pool: the next append has it.
          expect(await log.append(link('s', 0))).toMatchObject({ seq: 0 });
          expect(await log.head('s')).toMatchObject({ seq: 0 });
        } finally {
          await log.close();
          await pool.end();
        }
      });

      it('ends an upload waiting for a free connection at its abort (CANCELLED at once)', async () => {
        const schema = nextSchema();
        // Ten minutes of the pool's wait, as above.
        const pool = new pgLib.Pool({
          connectionString: pg.connectionString,
          max: 3,
          connectionTimeoutMillis: 600_000,
        });
        const blobs = await PgBlobStore.open({ pool, schema, hash: nobleBlake3 });
        const held = await Promise.all([pool.connect(), pool.connect(), pool.connect()]); // every connection busy
        try {
          const ac = new AbortController();
          const put = rejection(blobs.put(utf8('an upload'), { signal: ac.signal }));
          // Aborted once the upload waits for a connection (where a timer of 100 ms stood for that).
          while (pool.waitingCount === 0) await new Promise((r) => setTimeout(r, 10));
          ac.abort(new Error('user pressed stop'));
          expect(await settledWithin(put, ENDS_AT_SIGNAL_MS)).toBe('settled'); // not the pool's ten minutes
          expect(await put).toMatchObject({ code: 'CANCELLED' });
          for (const c of held) c.release();
          expect((await blobs.put(utf8('an upload'))).size).toBe(9);
        } finally {
          await blobs.close();
          await pool.end();
        }
      });

      it(
        'ends a read (get, chunks) waiting for a free connection at its abort (CANCELLED at once), leaking no connection',
        async () => {
          const schema = nextSchema();
          // Ten minutes of the pool's wait, as above.
          const pool = new pgLib.Pool({
            connectionString: pg.connectionString,
            max: 1,
            connectionTimeoutMillis: 600_000,
          });
          const blobs = await PgBlobStore.open({ pool, schema, hash: nobleBlake3 });
          try {
            const { digest } = await blobs.put(utf8('a summary'));
            const readers = [
              (signal: AbortSignal) => blobs.get(digest, { signal }),
              async (signal: AbortSignal) => {
                for await (const chunk of blobs.chunks(digest, { signal })) void chunk;
              },
            ];
            for (const read of readers) {
              const held = await pool.connect(); // the pool's one connection, busy
              try {
                const ac = new AbortController();
                const reading = rejection(read(ac.signal));
                // Aborted once the read waits for the connection.
                while (pool.waitingCount === 0) await new Promise((r) => setTimeout(r, 10));
                ac.abort(new Error('user pressed stop'));
                expect(await settledWithin(reading, ENDS_AT_SIGNAL_MS)).toBe('settled'); // not the pool's ten minutes
                expect(await reading).toMatchObject({ name: 'StoreError', code: 'CANCELLED' });
              } finally {
                held.release();
              }
              // The connection the abandoned wait got went back to the pool: the next read has it.
              expect(Buffer.from(await blobs.get(digest)).toString()).toBe('a summary');
            }
          } finally {
            await blobs.close();
            await pool.end();
          }
        },
        2 * ENDS_AT_SIGNAL_MS + 30_000,
      );

      it('says the pool is busy when no connection becomes free in time', async () => {
        const schema = nextSchema();
        const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1, connectionTimeoutMillis: 300 });
        const blobs = await PgBlobStore.open({ pool, schema, hash: nobleBlake3 });
        const log = await PgManifestLog.open({ pool, schema });
        // The put holds the one connection from its first chunk until the head's wait has ended (where a source of
        // ~1.4 s, and a sleep of 100 ms standing for "the put has the connection", failed a loaded machine).
        let letGo!: () => void;
        const held = new Promise<void>((resolve) => (letGo = resolve));
        let begun!: () => void;
        const uploading = new Promise<void>((resolve) => (begun = resolve));
        const heldSource = (async function* () {
          begun(); // pulled: the upload holds its connection
          yield new Uint8Array(1024 * 1024).fill(1);
          await held;
          yield new Uint8Array(1024 * 1024).fill(2);
        })();
        try {
          const put = blobs.put(heldSource);
          await uploading;
          try {
            const err = await rejection(log.head('s'));
            expect(err).toMatchObject({ code: 'STORAGE_FAILED' });
            expect((err as Error).message).toMatch(/connection pool is busy/);
          } finally {
            letGo();
          }
          await put;
        } finally {
          await Promise.all([blobs.close(), log.close()]);
          await pool.end();
        }
      });

      it('answers an append the busy pool never began with its failure at once: no second wait to look its entry up', async () => {
        const schema = nextSchema();
        const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1, connectionTimeoutMillis: 300 });
        const blobs = await PgBlobStore.open({ pool, schema, hash: nobleBlake3 });
        const log = await PgManifestLog.open({ pool, schema });
        // The put holds the one connection from its first chunk until the append has its answer.
        let letGo!: () => void;
        const held = new Promise<void>((resolve) => (letGo = resolve));
        let begun!: () => void;
        const uploading = new Promise<void>((resolve) => (begun = resolve));
        const heldSource = (async function* () {
          begun();
          yield new Uint8Array(1024 * 1024).fill(1);
          await held;
          yield new Uint8Array(1024 * 1024).fill(2);
        })();
        const connects = vi.spyOn(pool, 'connect');
        try {
          const put = blobs.put(heldSource);
          await uploading;
          connects.mockClear();
          try {
            const err = await rejection(log.append(link('s', 0)));
            expect(err).toMatchObject({ name: 'ManifestError', code: 'STORAGE_FAILED' });
            expect((err as Error).message).toMatch(/connection pool is busy/);
            // The transaction never began, so nothing can have committed: its entry is not looked up, which waited for
            // the busy pool once more (up to 60 s by default) before the same answer.
            expect(connects).toHaveBeenCalledTimes(1);
          } finally {
            letGo();
          }
          await put;
          expect(await log.head('s')).toBeUndefined();
        } finally {
          connects.mockRestore();
          await Promise.all([blobs.close(), log.close()]);
          await pool.end();
        }
      });
    });

    describe('a COMMIT whose reply is lost', () => {
      it('is looked up: the append that committed resolves with its entry, and is in the log once', async () => {
        // Once armed, the connection that sends the armed statement is cut as the server's reply comes back.
        let armed: Buffer | undefined;
        const proxy = await replyCuttingProxy(pg, (d) => {
          if (!armed || !d.includes(armed)) return false;
          armed = undefined;
          return true;
        });
        const schema = nextSchema();
        const log = await PgManifestLog.open({ connectionString: proxy.connectionString, schema });
        try {
          await log.append(link('s', 0));
          armed = Buffer.from('COMMIT\0');
          const entry = await log.append(link('s', 1));
          expect(armed, 'the proxy cut a COMMIT').toBeUndefined();
          expect(entry).toMatchObject({ session: 's', seq: 1, id: idOf('s', 1), position: 1 });
          expect(await sql(`SELECT seq FROM "${schema}".entries ORDER BY position`)).toEqual([{ seq: 0 }, { seq: 1 }]);
          // A connection lost before COMMIT is still a failure: nothing was written.
          armed = Buffer.from('entries (position, session');
          const err = await rejection(log.append(link('s', 2)));
          expect(armed, 'the proxy cut the insert').toBeUndefined();
          expect(err).toMatchObject({ code: 'STORAGE_FAILED' });
          expect(await log.head('s')).toMatchObject({ seq: 1 });
          expect(await log.append(link('s', 2))).toMatchObject({ seq: 2, position: 2 });
        } finally {
          await log.close();
          proxy.close();
        }
      });

      it('says an append may have committed when its entry cannot be looked up, and how to tell', async () => {
        // The COMMIT's reply is cut and the proxy stops taking connections: the look's new connection is refused.
        let armed: Buffer | undefined;
        const proxy = await replyCuttingProxy(pg, (d) => {
          if (!armed || !d.includes(armed)) return false;
          armed = undefined;
          proxy.close();
          return true;
        });
        const schema = nextSchema();
        const log = await PgManifestLog.open({ connectionString: proxy.connectionString, schema, maxConnections: 1 });
        try {
          await log.append(link('s', 0));
          armed = Buffer.from('COMMIT\0');
          const err = await rejection(log.append(link('s', 1)));
          expect(armed, 'the proxy cut a COMMIT').toBeUndefined();
          expect(err).toMatchObject({ name: 'ManifestError', code: 'STORAGE_FAILED' });
          const message = (err as Error).message;
          expect(message).toMatch(/after its COMMIT was sent/);
          expect(message).toMatch(/may have committed all the same; its entry could not be looked up/);
          expect(message).toContain(
            `Read the head of session s before appending again: the append committed if the entry at seq 1 has id ${idOf('s', 1)}`,
          );
          // And it did.
          expect(await sql(`SELECT seq, id FROM "${schema}".entries ORDER BY position`)).toEqual([
            { seq: 0, id: idOf('s', 0) },
            { seq: 1, id: idOf('s', 1) },
          ]);
        } finally {
          await log.close();
          proxy.close();
        }
      });
    });
  },
  'handoff_ledger_hardening',
);
