/**
 * The Merkle tree's rows in the PostgreSQL log (`tree_nodes`, migration 2). An append adds its leaf and
 * the subtrees it completes inside its own transaction, after taking the global position: the counter row's
 * lock orders appends of every host, so the frontier it reads is exactly the tree of all earlier positions.
 */
import type pg from 'pg';
import type { PgDatabase } from '../../../store/pg/db.js';
import { ManifestError } from '../../errors.js';
import { leafOfEnvelope } from '../../tlog/leaf.js';
import { appendLeaves, frontierOf, type NodeId, type TreeNode } from '../../tlog/tree.js';

/** The pool or a transaction's client. */
interface Queryable {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

export class PgTree {
  private readonly sql: Record<'read' | 'insert' | 'leaves' | 'counter' | 'lockCounter' | 'unplanted', string>;

  constructor(private readonly db: PgDatabase) {
    this.sql = {
      read: db.sql(`SELECT level, idx::text AS idx, hash FROM {schema}.tree_nodes
        WHERE (level, idx) IN (SELECT * FROM unnest($1::smallint[], $2::bigint[]))`),
      insert: db.sql(`INSERT INTO {schema}.tree_nodes (level, idx, hash)
        SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])`),
      leaves: db.sql('SELECT count(*)::text AS n FROM {schema}.tree_nodes WHERE level = 0'),
      counter: db.sql('SELECT next_position::text AS n FROM {schema}.log_counter'),
      lockCounter: db.sql('SELECT next_position::text AS n FROM {schema}.log_counter FOR UPDATE'),
      // ORDER BY the column, not the output alias: `position` there would be the text, and 10 sorts before 2.
      unplanted: db.sql(`SELECT position::text AS position, id, envelope FROM {schema}.entries
        WHERE position >= $1 ORDER BY entries.position LIMIT 1000`),
    };
  }

  /** Node hashes by id. @throws ManifestError `TREE_DAMAGED` when one is missing */
  async read(q: Queryable, ids: NodeId[]): Promise<Uint8Array[]> {
    if (ids.length === 0) return [];
    const rows = (
      await q.query<{ level: number; idx: string; hash: Buffer }>(this.sql.read, [
        ids.map((i) => i.level),
        ids.map((i) => String(i.index)),
      ])
    ).rows;
    const byKey = new Map(rows.map((r) => [`${r.level}/${r.idx}`, new Uint8Array(r.hash)]));
    return ids.map((id) => {
      const hash = byKey.get(`${id.level}/${id.index}`);
      if (!hash) throw new ManifestError('TREE_DAMAGED', `tree node ${id.level}/${id.index} is missing`);
      return hash;
    });
  }

  /** The committed size: the counter, which moves in the same transaction as the nodes. */
  async size(q: Queryable): Promise<number> {
    return Number((await q.query<{ n: string }>(this.sql.counter)).rows[0]!.n);
  }

  /** Inside an append's transaction, after the position was taken: stores the leaf and completed subtrees. */
  async grow(q: Queryable, position: number, leaves: Uint8Array[]): Promise<void> {
    const ids = frontierOf(position);
    const hashes = await this.read(q, ids);
    const frontier: TreeNode[] = ids.map((id, i) => ({ ...id, hash: hashes[i]! }));
    const { nodes } = appendLeaves(frontier, position, leaves);
    await q.query(this.sql.insert, [
      nodes.map((n) => n.level),
      nodes.map((n) => String(n.index)),
      nodes.map((n) => Buffer.from(n.hash)),
    ]);
  }

  /**
   * Adds entries written before the tree existed (a store migrated from schema version 1), under the
   * counter's lock so no append interleaves; idempotent.
   */
  async backfill(): Promise<void> {
    const [leaves, next] = await Promise.all([
      this.db.query<{ n: string }>(this.sql.leaves),
      this.db.query<{ n: string }>(this.sql.counter),
    ]);
    if (Number(leaves.rows[0]!.n) >= Number(next.rows[0]!.n)) return;
    await this.db.transaction(async (client) => {
      await client.query(this.sql.lockCounter);
      for (;;) {
        const from = Number((await client.query<{ n: string }>(this.sql.leaves)).rows[0]!.n);
        const rows = (await client.query<{ position: string; envelope: string }>(this.sql.unplanted, [String(from)]))
          .rows;
        if (rows.length === 0) return;
        // Every row of the batch is the next position: a gap anywhere in it would shift the later leaves.
        rows.forEach((r, i) => {
          if (Number(r.position) !== from + i)
            throw new ManifestError('TREE_DAMAGED', `global position ${from + i} is missing`);
        });
        await this.grow(
          client,
          from,
          rows.map((r) => leafOfEnvelope(r.envelope)),
        );
      }
    });
  }
}
