/**
 * The session-heads index's rows in the PostgreSQL log (`session_heads`, migration 5). An append updates the
 * nodes on its session's path inside its own transaction, after taking the global position: the counter row's
 * lock orders appends of every host, so the nodes it reads are those of every earlier append, and the index
 * and the tree's size commit together. `treeHead` reads the size and the index root in one statement.
 */
import { UNBOUNDED_LOCK_WAIT, type PgDatabase } from '../../../store/pg/db.js';
import {
  buildSessionHeads,
  hashOfNode,
  likelyPaths,
  type HeadsNode,
  type HeadsNodeReader,
  nodeName,
  type NodePath,
  SessionHeadsUpdate,
  type SessionHead,
} from '../../tlog/session-heads.js';
import type { Queryable } from './tree.js';

interface NodeRow {
  depth: number;
  prefix: Buffer;
  hash: Buffer;
  leaf_key: Buffer | null;
}

const toNode = (r: Pick<NodeRow, 'hash' | 'leaf_key'>): HeadsNode =>
  r.leaf_key === null
    ? { leaf: false, hash: new Uint8Array(r.hash) }
    : { leaf: true, key: new Uint8Array(r.leaf_key), value: new Uint8Array(r.hash) };

const BUILT = 'session-heads';

/** The nodes an append reads ahead (`readAhead`), and how many depths of the path they reach. */
export interface ReadAhead {
  depths: number;
  paths: NodePath[];
}

/** A node row as a statement that read it with other things returns it (json: byteas in hex). */
export interface PrefetchedNodeRow {
  depth: number;
  prefix: string;
  hash: string;
  leaf_key: string | null;
}

/**
 * A reader answering from `rows`, the nodes stored at `paths` read a moment ago in the same transaction (a path with no
 * row holds none); a read of any other path goes to `fallback`, whole.
 */
export function prefetched(paths: NodePath[], rows: PrefetchedNodeRow[], fallback: HeadsNodeReader): HeadsNodeReader {
  const known = new Map<string, HeadsNode | undefined>(paths.map((p) => [nodeName(p), undefined]));
  for (const r of rows) {
    const path = { depth: r.depth, prefix: new Uint8Array(Buffer.from(r.prefix, 'hex')) };
    const node = toNode({
      hash: Buffer.from(r.hash, 'hex'),
      leaf_key: r.leaf_key === null ? null : Buffer.from(r.leaf_key, 'hex'),
    });
    known.set(nodeName(path), node);
  }
  return (asked) =>
    asked.every((p) => known.has(nodeName(p))) ? asked.map((p) => known.get(nodeName(p))) : fallback(asked);
}

/** The depths an append reads ahead at first (`readAhead`): the index of a few dozen sessions. */
const FIRST_READ_AHEAD = 8;
/** At most a walk's round: a path deeper than that (2³² sessions, or a damaged index) is read on as it is walked. */
const MAX_READ_AHEAD = 32;

export class PgSessionHeads {
  /**
   * How many depths the next append reads ahead: a few past the deepest its recent walks ended at, lowered by a
   * sixteenth of a depth an append (the paths of one index end a few depths apart; reading ahead as deep as the deepest
   * of them spares every append a read of its own).
   */
  private depth = FIRST_READ_AHEAD;

  private readonly sql: Record<
    'read' | 'upsert' | 'head' | 'built' | 'markBuilt' | 'heads' | 'clear' | 'lock' | 'count' | 'remove',
    string
  >;

  constructor(private readonly db: PgDatabase) {
    this.sql = {
      read: db.sql(`SELECT depth, prefix, hash, leaf_key FROM {schema}.session_heads
        WHERE (depth, prefix) IN (SELECT * FROM unnest($1::smallint[], $2::bytea[]))`),
      upsert: db.sql(`INSERT INTO {schema}.session_heads (depth, prefix, hash, leaf_key)
        SELECT * FROM unnest($1::smallint[], $2::bytea[], $3::bytea[], $4::bytea[])
        ON CONFLICT (depth, prefix) DO UPDATE SET hash = EXCLUDED.hash, leaf_key = EXCLUDED.leaf_key`),
      // One statement, one snapshot: the size and the index root of the same commit.
      head: db.sql(`SELECT c.next_position::text AS n, h.hash, h.leaf_key FROM {schema}.log_counter c
        LEFT JOIN {schema}.session_heads h ON h.depth = 0`),
      built: db.sql(`SELECT value FROM {schema}.log_meta WHERE key = '${BUILT}'`),
      markBuilt: db.sql(
        `INSERT INTO {schema}.log_meta (key, value) VALUES ('${BUILT}', '1') ON CONFLICT (key) DO NOTHING`,
      ),
      heads: db.sql('SELECT session, seq, id FROM {schema}.heads'),
      clear: db.sql('DELETE FROM {schema}.session_heads'),
      lock: db.sql('SELECT 1 FROM {schema}.log_counter FOR UPDATE'),
      count: db.sql('SELECT count(*)::text AS n FROM {schema}.session_heads'),
      remove: db.sql(`DELETE FROM {schema}.session_heads
        WHERE (depth, prefix) IN (SELECT * FROM unnest($1::smallint[], $2::bytea[]))`),
    };
  }

  /** How many nodes the index stores. */
  async count(q: Queryable): Promise<number> {
    return Number((await q.query<{ n: string }>(this.sql.count)).rows[0]!.n);
  }

  async read(q: Queryable, paths: NodePath[]): Promise<Array<HeadsNode | undefined>> {
    if (paths.length === 0) return [];
    const rows = (
      await q.query<NodeRow>(this.sql.read, [paths.map((p) => p.depth), paths.map((p) => Buffer.from(p.prefix))])
    ).rows;
    const byKey = new Map(rows.map((r) => [`${r.depth}/${r.prefix.toString('hex')}`, toNode(r)]));
    return paths.map((p) => byKey.get(`${p.depth}/${Buffer.from(p.prefix).toString('hex')}`));
  }

  /** The committed size and index root, from one snapshot. */
  async head(q: Queryable): Promise<{ size: number; root: Uint8Array }> {
    const row = (await q.query<{ n: string; hash: Buffer | null; leaf_key: Buffer | null }>(this.sql.head)).rows[0]!;
    return {
      size: Number(row.n),
      root: hashOfNode(row.hash === null ? undefined : toNode({ ...row, hash: row.hash })),
    };
  }

  private async store(q: Queryable, nodes: Array<{ path: NodePath; node: HeadsNode }>): Promise<void> {
    for (let i = 0; i < nodes.length; i += 5000) {
      const part = nodes.slice(i, i + 5000);
      await q.query(this.sql.upsert, this.upsertColumns(part));
    }
  }

  /**
   * Inside an append's transaction, after the position was taken: what recording the session's new head changes (read
   * in that transaction, written by the append in the same one, with the tree's nodes): the nodes to upsert
   * (`upsertColumns`), and the stray records to remove (`remove`), usually none. Each head's `previous` (the head its
   * append extends, locked in that transaction; null: none) must be what the index commits for the session, else
   * ManifestError `ROLLBACK` (a head row set back or removed under the index: not folded into the next root).
   */
  async changesFor(
    q: Queryable,
    heads: Array<{ session: string; head: SessionHead; previous: SessionHead | null }>,
    read?: { ahead: ReadAhead; rows: PrefetchedNodeRow[] },
  ): Promise<{ changes: Array<{ path: NodePath; node: HeadsNode }>; removed: NodePath[] }> {
    const fromStore = (paths: NodePath[]) => this.read(q, paths);
    const update = read
      ? new SessionHeadsUpdate(prefetched(read.ahead.paths, read.rows, fromStore), read.ahead.depths)
      : new SessionHeadsUpdate(fromStore);
    for (const { session, head, previous } of heads) await update.set(session, head, previous);
    if (read) this.depth = Math.min(Math.max(update.walkedTo + 3, this.depth - heads.length / 16), MAX_READ_AHEAD);
    const changes = await update.changes();
    return { changes, removed: update.removed() };
  }

  /**
   * How many depths of a session's path a head window reads with the head (`likelyPaths`): as an append reads ahead.
   */
  readDepths(): number {
    return Math.max(1, Math.ceil(this.depth));
  }

  /** A head window's walk of the index ended at `depth`: the read-ahead follows it as an append's walk (`changesFor`). */
  walked(depth: number): void {
    this.depth = Math.min(Math.max(depth + 3, this.depth - 1 / 16), MAX_READ_AHEAD);
  }

  /**
   * The nodes an append of `sessions` reads with its entries (`likelyPaths` as deep as this index's recent walks went),
   * for `changesFor`'s `read`.
   */
  readAhead(sessions: string[]): ReadAhead {
    const depths = Math.max(1, Math.ceil(this.depth));
    if (sessions.length === 1) return { depths, paths: likelyPaths(sessions[0]!, depths) };
    // Several sessions' paths share the nodes near the root: each asked for once.
    const paths = new Map<string, NodePath>();
    for (const session of sessions) for (const p of likelyPaths(session, depths)) paths.set(nodeName(p), p);
    return { depths, paths: [...paths.values()] };
  }

  /** `changes` as the upsert's four array parameters (depths, prefixes, hashes or leaf values, leaf keys). */
  upsertColumns(
    changes: Array<{ path: NodePath; node: HeadsNode }>,
  ): [number[], Buffer[], Buffer[], Array<Buffer | null>] {
    return [
      changes.map((c) => c.path.depth),
      changes.map((c) => Buffer.from(c.path.prefix)),
      changes.map((c) => Buffer.from(c.node.leaf ? c.node.value : c.node.hash)),
      changes.map((c) => (c.node.leaf ? Buffer.from(c.node.key) : null)),
    ];
  }

  async remove(q: Queryable, removed: NodePath[]): Promise<void> {
    if (removed.length > 0)
      await q.query(this.sql.remove, [removed.map((p) => p.depth), removed.map((p) => Buffer.from(p.prefix))]);
  }

  /**
   * Builds the index from every head, once (a store migrated from schema version 4), under the counter's lock so
   * no append interleaves; idempotent.
   * @throws the signal's reason once `signal` aborts (its wait for the counter's lock or a step ended, nothing written
   *   and not marked built: the next open builds it again)
   */
  async backfill(signal?: AbortSignal): Promise<void> {
    if ((await this.db.query(this.sql.built)).rows.length > 0) return;
    await this.db.transaction(
      async (client) => {
        await client.query(this.sql.lock);
        if ((await client.query(this.sql.built)).rows.length > 0) return;
        await client.query(this.sql.clear);
        const heads = (await client.query<{ session: string; seq: number; id: string }>(this.sql.heads)).rows;
        const { nodes } = buildSessionHeads(heads.map((h) => ({ session: h.session, head: { seq: h.seq, id: h.id } })));
        await this.store(client, nodes);
        await client.query(this.sql.markBuilt);
      },
      UNBOUNDED_LOCK_WAIT,
      signal,
    );
  }
}
