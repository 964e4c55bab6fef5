/**
 * The Merkle tree's rows in the PostgreSQL log (`tree_nodes`, migration 2). An append adds its leaf and
 * the subtrees it completes inside its own transaction, after taking the global position: the counter row's
 * lock orders appends of every host, so the frontier it reads is exactly the tree of all earlier positions.
 */
import type pg from 'pg';
import { pgCode, UNBOUNDED_LOCK_WAIT, UNIQUE_VIOLATION, type PgDatabase } from '../../../store/pg/db.js';
import { ManifestError } from '../../errors.js';
import { leafOfEnvelope } from '../../tlog/leaf.js';
import { appendLeaves, frontierOf, rootOf, type NodeId, type TreeNode } from '../../tlog/tree.js';

/** The pool or a transaction's client: what the PostgreSQL tree and session-heads index query through. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

export class PgTree {
  private readonly sql: Record<'read' | 'insert' | 'leaves' | 'sizes' | 'lockCounter' | 'unplanted', string>;

  constructor(private readonly db: PgDatabase) {
    this.sql = {
      read: db.sql(`SELECT level, idx::text AS idx, hash FROM {schema}.tree_nodes
        WHERE (level, idx) IN (SELECT * FROM unnest($1::smallint[], $2::bigint[]))`),
      insert: db.sql(`INSERT INTO {schema}.tree_nodes (level, idx, hash)
        SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])`),
      leaves: db.sql('SELECT count(*)::text AS n FROM {schema}.tree_nodes WHERE level = 0'),
      // One statement, one snapshot: an append committing between two reads would make the tree look ahead. With a
      // tree short of the log, a node covering a position past its leaves (node (level, idx) covers idx·2^level …
      // (idx+1)·2^level − 1, so one past n leaves has idx >= n >> level; a level no tree of 2^63 leaves has counts
      // too, and no shift overflows), which no tree of that many leaves holds: a whole scan of the nodes, made only then.
      sizes: db.sql(`SELECT l.n::text AS leaves, next_position::text AS next,
          CASE WHEN l.n < next_position THEN (SELECT level || '/' || idx FROM {schema}.tree_nodes
            WHERE CASE WHEN level BETWEEN 0 AND 62 THEN idx >= (l.n >> level) ELSE true END LIMIT 1) END AS beyond
        FROM {schema}.log_counter, (SELECT count(*) AS n FROM {schema}.tree_nodes WHERE level = 0) l`),
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
    return hashesOf(
      ids,
      rows.map((r) => ({ level: r.level, idx: r.idx, hash: new Uint8Array(r.hash) })),
    );
  }

  /**
   * Inside an append's transaction, after the position was taken: stores the leaf and completed subtrees.
   * @throws ManifestError `TREE_DAMAGED` when a node is already stored there: the tree has leaves beyond the log
   */
  async grow(q: Queryable, position: number, leaves: Uint8Array[]): Promise<void> {
    const { nodes } = grown(position, leaves, await this.read(q, frontierOf(position)));
    try {
      await q.query(this.sql.insert, nodeColumns(nodes));
    } catch (err) {
      throw treeCollision(err, position);
    }
  }

  /**
   * Adds entries written before the tree existed (a store migrated from schema version 1 or 2), under the
   * counter's lock so no append interleaves; idempotent.
   * @returns undefined when the tree is the log's; else `damage`, why appends must be refused: the tree has more
   *   leaves than the log has positions (entries removed or the counter set back under it: appending would build on a
   *   tree that is not the entries'), or fewer while a node past them is stored (leaf rows lost, below the last or the
   *   last ones under a stored parent: adding the next would collide with it, and the store would not open even for
   *   fsck; the embedded log's open judges its size record so), or a position to add holds no entry (an entry lost,
   *   or the counter past the last entry: the entries before it are added and the tree ends there, since no leaf can
   *   be made for an entry that is not there and none after it would stand at its position). In that last case
   *   `size` is the tree's size, short of the counter (which a tree head takes as the size otherwise): the store
   *   opens with it for reads and fsck, which names the gap, and a later open, the entry restored, goes on from there.
   * @throws the signal's reason once `signal` aborts (its wait for the counter's lock or a step ended, the backfill
   *   rolled back whole: the next open does it again)
   */
  async backfill(signal?: AbortSignal): Promise<{ damage: string; size?: number } | undefined> {
    const sizes = (await this.db.query<{ leaves: string; next: string; beyond: string | null }>(this.sql.sizes))
      .rows[0]!;
    const [leaves, next] = [Number(sizes.leaves), Number(sizes.next)];
    if (leaves > next) return { damage: `the tree has ${leaves} leaves, the log ${next} entries` };
    if (leaves === next) return undefined;
    // Fewer leaves than entries: a store migrated before the tree (backfilled below), or leaf rows lost, which leaves
    // a node past the leaves that are left (a leaf after the lost one, or a parent covering it).
    if (sizes.beyond !== null)
      return {
        damage: `the tree has ${leaves} leaves, the log ${next} entries, and node ${sizes.beyond} past them is stored`,
      };
    return await this.db.transaction(
      async (client) => {
        const counter = Number((await client.query<{ n: string }>(this.sql.lockCounter)).rows[0]!.n);
        for (;;) {
          const from = Number((await client.query<{ n: string }>(this.sql.leaves)).rows[0]!.n);
          const rows = (await client.query<{ position: string; envelope: string }>(this.sql.unplanted, [String(from)]))
            .rows;
          // The entries end before the counter: an append, at the counter's position, would be a leaf short of it.
          if (rows.length === 0)
            return from < counter
              ? {
                  damage: `global position ${from} holds no entry (the log's counter gave out positions to ${counter - 1}): the tree was built from the entries before it only`,
                  size: from,
                }
              : undefined;
          // Only the rows at the next positions are added: a gap in the batch would shift every later leaf.
          const gap = rows.findIndex((r, i) => Number(r.position) !== from + i);
          const planted = gap === -1 ? rows : rows.slice(0, gap);
          if (planted.length > 0)
            await this.grow(
              client,
              from,
              planted.map((r) => leafOfEnvelope(r.envelope)),
            );
          if (gap !== -1)
            return {
              damage: `global position ${from + gap} holds no entry (the next entry is at ${rows[gap]!.position}): the tree was built from the entries before it only`,
              size: from + gap,
            };
        }
      },
      UNBOUNDED_LOCK_WAIT,
      signal,
    );
  }
}

/**
 * The hashes of `ids` among stored rows (`idx` as text, as the statements return it).
 * @throws ManifestError `TREE_DAMAGED` when one is missing
 */
export function hashesOf(ids: NodeId[], rows: Array<{ level: number; idx: string; hash: Uint8Array }>): Uint8Array[] {
  const byKey = new Map(rows.map((r) => [`${r.level}/${r.idx}`, r.hash]));
  return ids.map((id) => {
    const hash = byKey.get(`${id.level}/${id.index}`);
    if (!hash) throw new ManifestError('TREE_DAMAGED', `tree node ${id.level}/${id.index} is missing`);
    return hash;
  });
}

/**
 * The nodes an append of `leaves` at `position` adds, from the hashes of the frontier there (`frontierOf`), and the
 * roots of the tree before (`position` leaves: those hashes folded) and after it.
 */
export function grown(
  position: number,
  leaves: Uint8Array[],
  frontierHashes: Uint8Array[],
): { nodes: TreeNode[]; before: Uint8Array; after: Uint8Array } {
  const frontier: TreeNode[] = frontierOf(position).map((id, i) => ({ ...id, hash: frontierHashes[i]! }));
  const next = appendLeaves(frontier, position, leaves);
  return { nodes: next.nodes, before: rootOf(frontier), after: rootOf(next.frontier) };
}

/** `nodes` as the insert's three array parameters (levels, indexes as text, hashes). */
export function nodeColumns(nodes: TreeNode[]): [number[], string[], Buffer[]] {
  return [nodes.map((n) => n.level), nodes.map((n) => String(n.index)), nodes.map((n) => Buffer.from(n.hash))];
}

/** A unique violation of a tree row as `TREE_DAMAGED` (the tree has leaves beyond the log); any other error as it is. */
export function treeCollision(err: unknown, position: number): unknown {
  if (pgCode(err) !== UNIQUE_VIOLATION) return err;
  return new ManifestError(
    'TREE_DAMAGED',
    `the tree already has a node at global position ${position} or after it, beyond the log's entries; run fsck`,
    { cause: err },
  );
}
