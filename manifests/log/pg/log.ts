/**
 * The manifest log on PostgreSQL (docs/DESIGN.md, "Scale-out"): many processes and hosts append to one set of
 * chains. Each append is one transaction: lock the chain's head row, check the link, move the head,
 * take the next global position, insert the entry. Two writers racing for one seq serialize on the
 * head row (or on the primary key when the chain is new) and the loser gets `CHAIN_CONFLICT`, so a
 * chain can neither fork nor gap.
 */
import type pg from 'pg';
import type { Digest } from '../../../store/hash/digest.js';
import {
  errorText,
  refuseOutsideOpen,
  OPENING,
  isHandoffLedgerError,
  OPERATION_CANCELLED,
  readOptionFields,
  refuseNonSignal,
  storageFailure,
  throwIfAborted,
  type NamesEveryField,
} from '../../../store/errors.js';
import { quoted } from '../../encoding/printable.js';
import {
  BEGIN,
  DEADLOCK_DETECTED,
  failedAfterCommitSent,
  isPgWaitTimeout,
  PG_CONNECT_FIELDS,
  PgDatabase,
  pgCode,
  pgOptionsProblem,
  pgTimeoutProblem,
  UNIQUE_VIOLATION,
  type PgConnectOptions,
} from '../../../store/pg/db.js';
import { ManifestError, rollbackRefused } from '../../errors.js';
import { AbstractManifestLog, CheckedInlineBlobTable, isGrantTime, readSnapshotSignal } from '../abstract-log.js';
import {
  cutBackProblems,
  headProblems,
  indexFacts,
  type CutBackFacts,
  type HeadProblem,
} from '../../chain/head-rules.js';
import type {
  AppendOptions,
  AppendRequest,
  ChainHead,
  GrantRecord,
  GrantState,
  GrantTable,
  HeadHold,
  IdPositionRecord,
  InlineBlobTable,
  InlineDeleteOptions,
  HeadWindow,
  LogEntry,
  LogTreeHead,
  ManifestLog,
  SigningKeyRecord,
  SigningKeyTable,
} from '../log.js';
import { MANIFEST_MIGRATIONS } from './schema.js';
import { leafOfEnvelope } from '../../tlog/leaf.js';
import { equalBytes } from '../../tlog/merkle.js';
import { frontierOf, treeHeadAt, type NodeId, type TreeHead } from '../../tlog/tree.js';
import {
  extendedHead,
  hashOfNode,
  indexedHeadProblem,
  KEY_BITS,
  likelyPaths,
  type HeadsNode,
  type IndexedHeadProblem,
  type NodePath,
  type SessionHead,
} from '../../tlog/session-heads.js';
import { grown, hashesOf, nodeColumns, PgTree, treeCollision } from './tree.js';
import { PgSessionHeads, prefetched, type PrefetchedNodeRow, type ReadAhead } from './session-heads.js';
import { onAbort } from '../../../store/abort.js';

const PAGE = 500;
/**
 * Transactions of appends one log runs at once: the second does its work before the counter's lock while the first
 * holds it. Appends that arrive meanwhile wait, and the next transaction takes them together (`appendMany`).
 */
const APPEND_TRANSACTIONS = 2;
/** Most appends one transaction takes. */
const MAX_BATCH = 64;

/**
 * Most heads a log with a pool of `max` connections holds at once (`holdHead`): half of them, and fewer than those its
 * APPEND_TRANSACTIONS leave. Each holder needs one more connection for its reads before it appends; the transactions
 * of appends may all be waiting on heads other processes hold, whose holders wait likewise for reads of their own: were
 * the holds and those waits to take every connection of both pools, neither holder could go on until the lock waits
 * time out (`lockTimeoutMs`), a cycle through the pools that PostgreSQL's deadlock check cannot see.
 */
const maxHolds = (max: number) => Math.max(0, Math.min(Math.floor(max / 2), max - APPEND_TRANSACTIONS - 1));

/** What `appendLocked` appends: a request and its leaf (`leafOfEnvelope`). */
interface Taken {
  request: AppendRequest;
  leaf: Uint8Array;
}

/** Thrown inside `appendLocked`'s transaction when there is nothing to append: it rolls back. */
const RELEASED = Symbol('released');

/** An append waiting for a transaction of its log, or in one. */
interface PendingAppend {
  request: AppendRequest;
  /** The request's leaf (`leafOfEnvelope`), taken before it was queued. */
  leaf: Uint8Array;
  signal: AbortSignal | undefined;
  resolve: (entry: LogEntry) => void;
  reject: (err: unknown) => void;
  /** Takes the waiting append's abort listener off. */
  stopListening: (() => void) | undefined;
  /** While it waits its turn to go by itself (`waitingAlone`): lets its session go once its abort answers it. */
  answeredWaiting?: (() => void) | undefined;
}

/** What a transaction of several appends made of one: its entry, its refusal, or `alone` (appended by itself after). */
type BatchOutcome = { entry: LogEntry } | { error: unknown } | 'alone';

/**
 * A tree one of this log's transactions grew and committed: `after` from `before`, whose nodes it read under the
 * counter's lock (ManifestLog.ownGrowth).
 */
interface Growth {
  before: TreeHead;
  after: LogTreeHead;
}

/** How many of its own transactions' trees a log keeps (ManifestLog.ownGrowth): a guard asks of the newest few. */
const GROWTHS_KEPT = 8;

/**
 * The growth of a transaction that appended `count` entries from `position`: the tree's roots from `grown`, the
 * session-heads root from the index's changes (its root node is among them: every head change moves it). Undefined
 * when the root node is not among them, which no append makes: the guard then reads the tree.
 */
function growthOf(
  position: number,
  count: number,
  tree: { before: Uint8Array; after: Uint8Array },
  changes: Array<{ path: NodePath; node: HeadsNode }>,
): Growth | undefined {
  const root = changes.find((c) => c.path.depth === 0);
  if (root === undefined) return undefined;
  return {
    before: { size: position, root: tree.before },
    after: { size: position + count, root: tree.after, sessionHeads: hashOfNode(root.node) },
  };
}

export interface PgManifestLogOptions extends PgConnectOptions {
  /**
   * Ends the open: once it aborts, `PgManifestLog.open` rejects `CANCELLED` (the signal's reason as the cause) with the
   * pool it made ended, so nothing is left connected. It ends the waits the open may hang in (a free connection, the
   * migration lock another opener holds) and its steps, each one transaction rolled back whole at the abort: the
   * migrations, and in a store an older version wrote, the tree's backfill and the building of the session-heads index
   * (each waits for the appends' lock): the next open does them again. The log keeps none. `openLedger` passes its own
   * `signal`. Not an AbortSignal: `INVALID_ARGUMENT`.
   */
  signal?: AbortSignal | undefined;
}

/** Every field of PgManifestLogOptions: `PgManifestLog.open` reads these once and refuses any other name. */
const PG_LOG_FIELDS = [...PG_CONNECT_FIELDS, 'signal'] as const satisfies ReadonlyArray<keyof PgManifestLogOptions>;
const everyPgLogField: NamesEveryField<PgManifestLogOptions, typeof PG_LOG_FIELDS> = true;
void everyPgLogField;

interface EntryRow {
  // int8 arrives as a decimal string from pg.
  position: string;
  session: string;
  seq: number;
  id: string;
  principal: string;
  envelope: string;
}

interface HeadRow {
  session: string;
  seq: number;
  id: string;
  owner: string;
}

const toEntry = (r: EntryRow): LogEntry => ({
  position: Number(r.position),
  session: r.session,
  seq: r.seq,
  id: r.id as Digest,
  principal: r.principal,
  envelope: r.envelope,
});

/** `lockHead`'s row: the head, with the facts that say whether its chain was cut back. */
interface LockedHeadRow extends HeadRow {
  watermark: number | null;
  beyond: boolean;
}

const toHeadRow = ({ session, seq, id, owner }: LockedHeadRow): HeadRow => ({ session, seq, id, owner });

const toHead = (r: HeadRow): ChainHead => ({ session: r.session, seq: r.seq, id: r.id as Digest, owner: r.owner });

/**
 * The log's error for a failed operation: a lock wait past `lock_timeout`, or a statement past the role's
 * `statement_timeout`, is `LOCKED` (retryable: the lock's holder stalled), a transaction the server ended for idling is
 * `STORAGE_FAILED` saying so, anything else as storageFailure.
 */
function storageFailed(what: string, err: unknown): Error {
  const timeout = pgTimeoutProblem(err);
  if (timeout)
    return new ManifestError(
      isPgWaitTimeout(err) ? 'LOCKED' : 'STORAGE_FAILED',
      `postgres manifest log: ${what}: ${timeout}`,
      { cause: err },
    );
  return storageFailure(ManifestError, `postgres manifest log: ${what}`, err);
}

/**
 * The rows of one statement, a storage error told as `what`. A write runs in a READ COMMITTED transaction of its own
 * (PgDatabase.write): alone, it would run at the database's default level.
 */
async function rowsOf<R extends pg.QueryResultRow>(
  db: PgDatabase,
  kind: 'read' | 'write',
  what: string,
  text: string,
  values: unknown[],
): Promise<R[]> {
  try {
    return (await (kind === 'write' ? db.write<R>(text, values) : db.query<R>(text, values))).rows;
  } catch (err) {
    throw storageFailed(what, err);
  }
}

/**
 * Could the transaction have committed although it failed? Not when this library refused it, when it failed before
 * its COMMIT was sent (`failedAfterCommitSent`: a pool busy past its wait, a statement's error, a connection lost
 * mid-statement), or when the server answered COMMIT with an error (rolled back); possibly when the connection was
 * lost once COMMIT was sent (no SQLSTATE, class 08 connection exception, 57P0x the server going away).
 */
function outcomeUnknown(err: unknown): boolean {
  if (isHandoffLedgerError(err) || !failedAfterCommitSent(err)) return false;
  const code = pgCode(err);
  return code === undefined || code.startsWith('08') || code.startsWith('57P0');
}

/**
 * A transaction of several appends whose insert of new chains' heads waited past `lock_timeout` (or the role's
 * `statement_timeout`) for another writer's first append of one of them (uncommitted, so not skipped as a held head is): each append then goes by itself.
 */
class FirstHeadHeld extends Error {
  constructor(readonly lockWait: unknown) {
    super("a new chain's first head is held by another writer's transaction", { cause: lockWait });
  }
}

/** The abort of an append's `signal`, as `throwIfAborted` throws it. */
const cancelled = (signal: AbortSignal) =>
  new ManifestError('CANCELLED', OPERATION_CANCELLED, { cause: signal.reason as unknown });

/** An append whose seq and prev are not the head's next. */
const chainConflict = (request: AppendRequest, head: HeadRow | undefined) =>
  new ManifestError(
    'CHAIN_CONFLICT',
    `session ${request.session}: append at seq ${request.seq} does not extend the head (seq ${head?.seq ?? 'none'})`,
  );

/** A first append that another writer's first append of the same chain beat. */
const lostRace = (request: AppendRequest, cause?: unknown) =>
  new ManifestError(
    'CHAIN_CONFLICT',
    `session ${request.session}: another writer appended seq ${request.seq} first`,
    ...(cause === undefined ? [] : [{ cause }]),
  );

/** An entry dated at or after its key's window closed. */
const keyExpired = (signed: { keyId: string; createdAt: string }, closedAt: string) =>
  new ManifestError(
    'KEY_EXPIRED',
    `key ${signed.keyId}: its window closed at ${closedAt} (rotated or revoked), the entry is dated ${signed.createdAt}`,
  );

/** A row of `headWindow`: the head's columns on every row, one entry (or none: nulls) per row. */
interface HeadWindowRow extends Omit<EntryRow, 'seq'> {
  head_seq: number | null;
  head_id: string | null;
  owner: string | null;
  watermark: number | null;
  /** With no head: whether the session has any entry (false when it has a head). */
  headless_beyond: boolean;
  seq: number | null;
}

interface HeadFactsRow {
  session: string;
  head_seq: number | null;
  head_id: string | null;
  owner: string | null;
  entry_id: string | null;
  watermark: number | null;
  beyond: boolean;
}

/**
 * The SQL of the facts a chain is judged cut back by (the head rules judge them: `cutBackProblems`, `headProblems`):
 * the session's watermark, and whether an entry lies beyond its head — the entry after the head, or, with no head, any
 * entry of the session. Spelled once here for every statement that reads them (the append's `lockHead` / `headless`,
 * `cutBackFacts`, `headWindow`, fsck's `headFacts`). `session` is the statement's SQL for the session id; `head` the
 * alias of its `heads` row (its columns null when the session has no head).
 */
const cutBack = {
  watermark: (session: string) => `(SELECT w.seq FROM {schema}.watermarks w WHERE w.session = ${session})`,
  entryAfterHead: (session: string, head: string) =>
    `EXISTS (SELECT 1 FROM {schema}.entries x WHERE x.session = ${session} AND x.seq = ${head}.seq + 1)`,
  anyEntry: (session: string) => `EXISTS (SELECT 1 FROM {schema}.entries x WHERE x.session = ${session})`,
  beyond: (session: string, head: string) =>
    `CASE WHEN ${head}.seq IS NULL THEN ${cutBack.anyEntry(session)} ELSE ${cutBack.entryAfterHead(session, head)} END`,
};

/**
 * What an append's statement after the counter's lock reads besides its gates, as json columns: the tree's nodes
 * `frontierOf` names (`levels`, `indexes`: the parameters holding them) and the session-heads nodes read ahead
 * (`depths`, `prefixes`).
 */
const readAlong = {
  frontier: (levels: string, indexes: string) =>
    `(SELECT coalesce(json_agg(json_build_object('level', level, 'idx', idx::text, 'hash', encode(hash, 'hex'))),
        '[]'::json)
      FROM {schema}.tree_nodes WHERE (level, idx) IN (SELECT * FROM unnest(${levels}::smallint[], ${indexes}::bigint[])))
      AS frontier`,
  /**
   * The session-heads nodes at `depths` (smallint[]) whose prefixes are `prefixes`, one bytea of 32 bytes each in the
   * same order (one parameter, not an array of byteas to quote and parse: ~90 µs a statement less), as JSON rows of
   * depth, prefix, hash and leaf key (`PrefetchedNodeRow`); absent ones are left out. No column name (`headsNodes`
   * names it for the append's gates; the head window's statement names it with its CASE).
   */
  pathNodes: (depths: string, prefixes: string) =>
    `(SELECT coalesce(json_agg(json_build_object('depth', h.depth, 'prefix', encode(h.prefix, 'hex'),
          'hash', encode(h.hash, 'hex'), 'leaf_key', encode(h.leaf_key, 'hex'))), '[]'::json)
      FROM unnest(${depths}::smallint[]) WITH ORDINALITY AS p(depth, i)
      JOIN {schema}.session_heads h ON h.depth = p.depth AND h.prefix = substring(${prefixes}::bytea FROM (p.i::integer - 1) * 32 + 1 FOR 32))`,
  headsNodes: (depths: string, prefixes: string) => `${readAlong.pathNodes(depths, prefixes)} AS heads_nodes`,
};

export class PgManifestLog extends AbstractManifestLog {
  readonly inlineBlobs: InlineBlobTable;
  private readonly sql: Record<string, string>;
  private readonly tree: PgTree;
  private readonly headsIndex: PgSessionHeads;
  /**
   * The tree's size when its build at open (a store from before the tree) stopped short of the counter, at a position
   * that holds no entry: the size `treeHead` answers (the counter's otherwise) while appends are refused
   * (`treeDamage`).
   */
  private treeBuiltTo: number | undefined;

  private constructor(
    token: typeof OPENING,
    private readonly db: PgDatabase,
  ) {
    refuseOutsideOpen(token, ManifestError, 'PgManifestLog', 'PgManifestLog.open(options)');
    super(new PgGrantTable(db), new PgSigningKeys(db));
    this.inlineBlobs = new CheckedInlineBlobTable(new PgInlineBlobs(db));
    this.tree = new PgTree(db);
    this.headsIndex = new PgSessionHeads(db);
    const q = (text: string) => db.sql(text);
    const entryCols = 'position, session, seq, id, principal, envelope';
    this.sql = {
      head: q('SELECT session, seq, id, owner FROM {schema}.heads WHERE session = $1'),
      // With what says the chain was cut back (the watermark above the head, an entry beyond it): the append refuses.
      lockHead: q(`SELECT h.session, h.seq, h.id, h.owner, ${cutBack.watermark('h.session')} AS watermark,
          ${cutBack.entryAfterHead('h.session', 'h')} AS beyond
        FROM {schema}.heads h WHERE h.session = $1 FOR UPDATE OF h`),
      // The same for a session with no head: a watermark, or any entry at all. Kept apart from lockHead (not one
      // statement judging whichever it finds): the append read the head first, and a head another writer's first
      // append made since is a lost race (CHAIN_CONFLICT), which the append tells apart only by reading it again.
      headless: q(`SELECT ${cutBack.watermark('$1')} AS watermark, ${cutBack.anyEntry('$1')} AS beyond`),
      // lockHead's and headless's facts in one statement, nothing locked (sessionAppendRefusal: what the append
      // would judge now), with the session-heads nodes of the session's path and beside it ($2, $3: `likelyPaths`) from
      // the same snapshot, which the append's index update holds the head to (`SessionHeadsUpdate.set`'s `previous`).
      cutBackFacts: q(`SELECT h.seq AS head_seq, h.id AS head_id, ${cutBack.watermark('$1')} AS watermark,
          ${cutBack.beyond('$1', 'h')} AS beyond, ${readAlong.pathNodes('$2', '$3')} AS heads_nodes
        FROM (SELECT 1) one LEFT JOIN {schema}.heads h ON h.session = $1`),
      newHead: q('INSERT INTO {schema}.heads (session, seq, id, owner) VALUES ($1, $2, $3, $4)'),
      // appendMany's statements. Heads are locked in session order (and new ones inserted in it), then the counter:
      // two transactions of several sessions each never wait for each other in a circle.
      lockHeads: q(`SELECT h.session, h.seq, h.id, h.owner, ${cutBack.watermark('h.session')} AS watermark,
          ${cutBack.entryAfterHead('h.session', 'h')} AS beyond
        FROM {schema}.heads h WHERE h.session = ANY($1::text[]) ORDER BY h.session FOR UPDATE OF h SKIP LOCKED`),
      // For the sessions lockHeads did not return: a head there is one another transaction holds (an append of
      // another process, or one stalled), which the batch does not wait for (the append goes by itself).
      headlessFacts: q(`SELECT s.session, ${cutBack.watermark('s.session')} AS watermark,
          ${cutBack.anyEntry('s.session')} AS beyond,
          EXISTS (SELECT 1 FROM {schema}.heads h WHERE h.session = s.session) AS held
        FROM unnest($1::text[]) AS s(session)`),
      // A head another writer's first append made meanwhile is kept (not returned): that append is a lost race.
      newHeads: q(`INSERT INTO {schema}.heads (session, seq, id, owner)
          SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[]) AS n(session) ORDER BY n.session COLLATE "C"
        ON CONFLICT (session) DO NOTHING RETURNING session`),
      lockCounter: q('SELECT next_position::text AS n FROM {schema}.log_counter FOR UPDATE'),
      // After the counter's lock, as writeEntry reads them: each append's revocation, the keys' window ends, the tree's
      // frontier at the first position and the session-heads nodes read ahead.
      gates: q(`SELECT
          (SELECT json_agg(EXISTS (SELECT 1 FROM {schema}.grants g WHERE g.principal = m.principal
              AND g.session IN ('*', m.session) AND g.state = 'revoked') ORDER BY m.i)
            FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS m(principal, session, i)) AS revoked,
          (SELECT coalesce(json_agg(json_build_object('key_id', key_id, 'closed_at', closed_at)), '[]'::json)
            FROM {schema}.signing_keys WHERE key_id = ANY($3::text[])) AS keys,
          ${readAlong.frontier('$4', '$5')},
          ${readAlong.headsNodes('$6', '$7')}`),
      // The accepted appends' entries at their positions, inline blobs (one row a digest), watermarks, heads moved (a
      // new chain's head was inserted already: seq 0), the keys' newest createdAt and the counter; the heads inserted
      // for appends refused since are taken back.
      writeMany: q(`WITH m AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::text[],
            $6::text[]) AS m(position, session, seq, id, principal, envelope)),
        e AS (INSERT INTO {schema}.entries (position, session, seq, id, principal, envelope)
          SELECT position, session, seq, id, principal, envelope FROM m RETURNING 1),
        h AS (UPDATE {schema}.heads SET seq = m.seq, id = m.id FROM m
          WHERE {schema}.heads.session = m.session AND m.seq > 0 RETURNING 1),
        b AS (INSERT INTO {schema}.inline_blobs (digest, size, bytes)
          SELECT * FROM unnest($7::text[], $8::integer[], $9::bytea[])
          ON CONFLICT (digest) DO UPDATE SET size = EXCLUDED.size, bytes = EXCLUDED.bytes, stored_at = clock_timestamp()),
        w AS (INSERT INTO {schema}.watermarks (session, seq) SELECT session, seq FROM m
          ON CONFLICT (session) DO UPDATE SET seq = GREATEST({schema}.watermarks.seq, EXCLUDED.seq)),
        k AS (INSERT INTO {schema}.signing_keys (key_id, last_signed_at) SELECT * FROM unnest($10::text[], $11::text[])
          ON CONFLICT (key_id) DO UPDATE
            SET last_signed_at = GREATEST({schema}.signing_keys.last_signed_at, EXCLUDED.last_signed_at)),
        c AS (UPDATE {schema}.log_counter SET next_position = next_position + $12::bigint RETURNING 1),
        u AS (DELETE FROM {schema}.heads WHERE session = ANY($13::text[]) RETURNING 1)
        SELECT (SELECT count(*) FROM e)::integer AS written, (SELECT count(*) FROM h)::integer AS moved,
          (SELECT count(*) FROM u)::integer AS undone, (SELECT count(*) FROM c)::integer AS counted`),
      // Under the counter row's lock, in one statement (one round trip while the log's global lock is held): the entry,
      // its inline blob (committed with the entry that names it: both or neither), the rollback watermark rising with
      // the head, the head moved to it ($16: a head there was, locked by lockHead; a new one was inserted before), the
      // key's newest createdAt; the key's window end and whether the principal is revoked, so rotation and revocation
      // are ordered with this append; the tree's frontier at the position taken ($12, $13: the nodes `frontierOf`
      // names, each committed by an append that held the lock before); and the session-heads nodes the index's update
      // usually reads ($14, $15: `PgSessionHeads.readAhead`, written only by appends under this lock too). It runs after
      // `takePosition` took the lock, as a statement of its own: its snapshot holds every revocation, rotation and
      // tree node committed before the lock was had (in takePosition's statement the snapshot would be older than the
      // wait). The writes are gated on the refusals (`ok`), so a refused append writes nothing and is refused as
      // before, whatever else its rows would have met (damage: a unique violation); the refusal then throws, and the
      // transaction rolls back.
      writeEntry: q(`WITH k AS (
          INSERT INTO {schema}.signing_keys (key_id, last_signed_at) SELECT $1, $2 WHERE $1::text IS NOT NULL
          ON CONFLICT (key_id) DO UPDATE
            SET last_signed_at = GREATEST({schema}.signing_keys.last_signed_at, EXCLUDED.last_signed_at)
          RETURNING closed_at),
        g AS (SELECT (SELECT closed_at FROM k) AS closed_at,
          EXISTS (SELECT 1 FROM {schema}.grants WHERE principal = $3 AND session IN ('*', $4) AND state = 'revoked')
            AS revoked),
        ok AS (SELECT 1 FROM g WHERE NOT g.revoked AND (g.closed_at IS NULL OR $2::text COLLATE "C" < g.closed_at)),
        e AS (INSERT INTO {schema}.entries (position, session, seq, id, principal, envelope)
          SELECT $5::bigint, $4, $6::integer, $7, $3, $8 FROM ok RETURNING 1),
        b AS (INSERT INTO {schema}.inline_blobs (digest, size, bytes)
          SELECT $9::text, $10::integer, $11::bytea FROM ok WHERE $9::text IS NOT NULL
          ON CONFLICT (digest) DO UPDATE SET size = EXCLUDED.size, bytes = EXCLUDED.bytes, stored_at = clock_timestamp()),
        w AS (INSERT INTO {schema}.watermarks (session, seq) SELECT $4, $6::integer FROM ok
          ON CONFLICT (session) DO UPDATE SET seq = GREATEST({schema}.watermarks.seq, EXCLUDED.seq)),
        m AS (UPDATE {schema}.heads SET seq = $6::integer, id = $7 WHERE session = $4 AND $16::boolean
          AND EXISTS (SELECT 1 FROM ok) RETURNING 1)
        SELECT g.closed_at, g.revoked, (SELECT count(*) FROM e)::integer AS written,
          (SELECT count(*) FROM m)::integer AS moved,
          ${readAlong.frontier('$12', '$13')},
          ${readAlong.headsNodes('$14', '$15')}
        FROM g`),
      // The tree's new nodes and the session-heads index's changed ones, in one statement (one round trip under the
      // counter's lock): a node already stored in the tree is a unique violation (TREE_DAMAGED, see treeCollision).
      growIndexes: q(`WITH t AS (INSERT INTO {schema}.tree_nodes (level, idx, hash)
          SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[]))
        INSERT INTO {schema}.session_heads (depth, prefix, hash, leaf_key)
          SELECT * FROM unnest($4::smallint[], $5::bytea[], $6::bytea[], $7::bytea[])
        ON CONFLICT (depth, prefix) DO UPDATE SET hash = EXCLUDED.hash, leaf_key = EXCLUDED.leaf_key`),
      takePosition: q(
        'UPDATE {schema}.log_counter SET next_position = next_position + 1 RETURNING (next_position - 1)::text AS position',
      ),
      entry: q(`SELECT ${entryCols} FROM {schema}.entries WHERE session = $1 AND seq = $2`),
      // One statement, so one snapshot: the head, its watermark and the entries at seq − 1, seq and seq + 1 (at
      // least one row; the entry columns are null when there is none). With no head, no entry rows, and any entry of
      // the session is one beyond it (`headless_beyond`, as `headless` judges it for the append; not only seq 0).
      // Only the headless half of `cutBack.beyond` on purpose: with a head, the entry rows it returns answer it.
      headWindow: q(`SELECT h.seq AS head_seq, h.id AS head_id, h.owner, ${cutBack.watermark('$1')} AS watermark,
          CASE WHEN h.seq IS NULL THEN ${cutBack.anyEntry('$1')} ELSE false END AS headless_beyond,
          e.position, e.session, e.seq, e.id, e.principal, e.envelope
        FROM (SELECT 1) one
        LEFT JOIN {schema}.heads h ON h.session = $1
        LEFT JOIN {schema}.entries e ON e.session = $1 AND e.seq BETWEEN h.seq - 1 AND h.seq + 1
        ORDER BY e.seq`),
      // The same, with the session-heads nodes of the session's path and beside it ($2, $3: `likelyPaths`) from the
      // same snapshot, to hold the head to the index (`_headWindow`): on the first row alone (the rows are up to three).
      headWindowIndexed: q(`SELECT h.seq AS head_seq, h.id AS head_id, h.owner, ${cutBack.watermark('$1')} AS watermark,
          CASE WHEN h.seq IS NULL THEN ${cutBack.anyEntry('$1')} ELSE false END AS headless_beyond,
          e.position, e.session, e.seq, e.id, e.principal, e.envelope,
          CASE WHEN row_number() OVER (ORDER BY e.seq) = 1 THEN ${readAlong.pathNodes('$2', '$3')} END AS heads_nodes
        FROM (SELECT 1) one
        LEFT JOIN {schema}.heads h ON h.session = $1
        LEFT JOIN {schema}.entries e ON e.session = $1 AND e.seq BETWEEN h.seq - 1 AND h.seq + 1
        ORDER BY e.seq`),
      chain: q(`SELECT ${entryCols} FROM {schema}.entries WHERE session = $1 AND seq >= $2 ORDER BY seq LIMIT ${PAGE}`),
      entries: q(`SELECT ${entryCols} FROM {schema}.entries WHERE position > $1 ORDER BY position LIMIT ${PAGE}`),
      heads: q(`SELECT session, seq, id, owner FROM {schema}.heads WHERE session > $1 ORDER BY session LIMIT ${PAGE}`),
      entryAt: q(`SELECT ${entryCols} FROM {schema}.entries WHERE position = $1`),
      // ORDER BY the column: the output alias `position` is text, whose order is not the positions'.
      positionOf: q(
        'SELECT position::text AS position FROM {schema}.entries WHERE id = $1 ORDER BY entries.position LIMIT 1',
      ),
      // Each id with the position positionOf answers for it (its lowest), a page at a time along the id index.
      idPositions: q(`SELECT id, min(position)::text AS position FROM {schema}.entries
        WHERE $1::text IS NULL OR id > $1 GROUP BY id ORDER BY id LIMIT ${PAGE}`),
      getOrigin: q("SELECT value FROM {schema}.log_meta WHERE key = 'origin'"),
      setOrigin: q("INSERT INTO {schema}.log_meta (key, value) VALUES ('origin', $1) ON CONFLICT (key) DO NOTHING"),
      getWatermark: q('SELECT seq FROM {schema}.watermarks WHERE session = $1'),
      // The facts the head rules need, for a page of sessions that have a head or a watermark (with no head, any
      // entry of the session is one beyond it, as in the head window).
      headFacts: q(`SELECT s.session, h.seq AS head_seq, h.id AS head_id, h.owner, e.id AS entry_id,
          ${cutBack.watermark('s.session')} AS watermark, ${cutBack.beyond('s.session', 'h')} AS beyond
        FROM (SELECT session FROM {schema}.heads WHERE session > $1
              UNION SELECT session FROM {schema}.watermarks WHERE session > $1 ORDER BY session LIMIT ${PAGE}) s
        LEFT JOIN {schema}.heads h ON h.session = s.session
        LEFT JOIN {schema}.entries e ON e.session = h.session AND e.seq = h.seq
        ORDER BY s.session`),
      // Only ever raised: two readers recording different heights must not lower each other's.
      setWatermark: q(`INSERT INTO {schema}.watermarks (session, seq) VALUES ($1, $2)
        ON CONFLICT (session) DO UPDATE SET seq = GREATEST({schema}.watermarks.seq, EXCLUDED.seq)`),
    };
  }

  /**
   * The origin the log in this schema records, read without making or migrating anything: none when the schema, its
   * metadata table (a store from before it) or the record is missing. For an open that must judge a name before it
   * makes the store (openLedger: a new log's origin). Its reads run in one transaction that takes `signal` (openLedger
   * passes its own): an abort ends the wait for a connection or a statement (a wait for the lock of a migration under
   * way, say: cancelled), rolls back and ends the pool it made, so nothing is left connected.
   * @throws ManifestError `INVALID_ARGUMENT` as `open`, `CANCELLED` once `signal` aborts (the pool it made ended),
   *   `STORAGE_FAILED` when the database cannot be reached or read
   */
  static async storedOrigin(given: PgManifestLogOptions): Promise<string | undefined> {
    // Read as `open` reads them: options that were null a TypeError of this destructuring, a misspelt one ignored.
    const { signal, ...options } = readOptionFields(
      given,
      PG_LOG_FIELDS,
      'PgManifestLog.storedOrigin options',
      ManifestError,
    ) as PgManifestLogOptions;
    refuseNonSignal(signal, ManifestError);
    const problem = pgOptionsProblem(options);
    if (problem) throw new ManifestError('INVALID_ARGUMENT', `postgres manifest log: ${problem}`);
    throwIfAborted(signal, ManifestError);
    const db = new PgDatabase(options);
    try {
      return await db.transaction(
        async (client) => {
          // to_regclass: NULL for a schema or table that is not there, where a SELECT from it would fail.
          const [table] = (
            await client.query<{ found: string | null }>('SELECT to_regclass($1) AS found', [
              db.sql('{schema}.log_meta'),
            ])
          ).rows;
          if (table?.found == null) return undefined;
          const [row] = (
            await client.query<{ value: string }>(db.sql("SELECT value FROM {schema}.log_meta WHERE key = 'origin'"))
          ).rows;
          return row?.value;
        },
        BEGIN,
        signal,
      );
    } catch (err) {
      if (signal?.aborted) throwIfAborted(signal, ManifestError);
      throw storageFailed('origin read', err);
    } finally {
      await db.close().catch(() => {});
    }
  }

  /**
   * Connects and brings the schema up to date (idempotent; safe when many processes open at once).
   * @throws ManifestError `INVALID_ARGUMENT` for unusable connection options (`pgOptionsProblem`) or an option of a
   *   name it does not know (or one that throws as it is read), or a `signal` that is no AbortSignal, before anything
   *   connects; `CANCELLED` once `signal` aborts (the pool it made ended); `FORMAT_UNSUPPORTED` when the schema's log
   *   tables were migrated by a newer handoff-ledger (a version this one does not know) or hold a known version under
   *   another name (`PgDatabase.migrate`: nothing migrated, the pool it made ended); `STORAGE_FAILED` when the database
   *   cannot be reached or migrated.
   */
  static async open(given: PgManifestLogOptions): Promise<PgManifestLog> {
    // Each field read once; a misspelt one is refused (INVALID_ARGUMENT naming it) before anything connects.
    const { signal, ...options } = readOptionFields(
      given,
      PG_LOG_FIELDS,
      'PgManifestLog.open options',
      ManifestError,
    ) as PgManifestLogOptions;
    refuseNonSignal(signal, ManifestError);
    const problem = pgOptionsProblem(options);
    if (problem) throw new ManifestError('INVALID_ARGUMENT', `postgres manifest log: ${problem}`);
    throwIfAborted(signal, ManifestError);
    const db = new PgDatabase(options);
    try {
      await db.migrate('manifests', MANIFEST_MIGRATIONS, ManifestError, signal);
      const log = new PgManifestLog(OPENING, db);
      // A position holding no entry ends the tree built at open before it: the store opens with the tree of the
      // entries before it, for reads and fsck (which names the gap, as in a store that had its tree: POSITION_GAP),
      // and appends are refused.
      const tree = await log.tree.backfill(signal);
      log.treeDamage = tree?.damage;
      log.treeBuiltTo = tree?.size;
      await log.headsIndex.backfill(signal);
      throwIfAborted(signal, ManifestError);
      return log;
    } catch (err) {
      await db.close().catch(() => {});
      if (signal?.aborted) throwIfAborted(signal, ManifestError);
      throw storageFailed('open', err);
    }
  }

  private rows<R extends pg.QueryResultRow>(what: string, text: string, values: unknown[]): Promise<R[]> {
    return rowsOf<R>(this.db, 'read', what, text, values);
  }

  protected async _head(session: string): Promise<ChainHead | undefined> {
    const [row] = await this.rows<HeadRow>('head', this.sql.head!, [session]);
    return row && toHead(row);
  }

  protected async _entry(session: string, seq: number): Promise<LogEntry | undefined> {
    const [row] = await this.rows<EntryRow>('entry', this.sql.entry!, [session, seq]);
    return row && toEntry(row);
  }

  /**
   * The facts the append judges a cut-back chain by, read as it reads them (`lockHead` / `headless`): with no head,
   * any entry of the session is one beyond it. The head window's facts, without its entry rows, and held to the
   * session-heads index as the window's head is (`indexedRead`): a head row set back or removed under the index, with
   * its tail and watermark, is `indexProblem` (`ROLLBACK`), which the append's index update would refuse (after the
   * model, for compact); a path that is not whole is `indexDamage` (`TREE_DAMAGED`, `RECORD_CORRUPT`, in the words of the
   * append's index update, which meets it), as in the embedded log.
   */
  protected override async _cutBackFacts(session: string): Promise<CutBackFacts> {
    const { read, index } = await this.indexedRead<
      { head_seq: number | null; head_id: string | null; watermark: number | null; beyond: boolean },
      CutBackFacts & { head: SessionHead | undefined }
    >('cut-back facts', this.sql.cutBackFacts!, session, ([row]) => ({
      head: row!.head_seq === null ? undefined : { seq: row!.head_seq, id: row!.head_id! },
      entryBeyondHead: row!.beyond,
      watermark: row!.watermark ?? undefined,
    }));
    return { ...read, ...indexFacts(index) };
  }

  /**
   * The head window in one statement, so from one snapshot; unless `index: false`, with the session-heads nodes on the
   * session's path and beside it, which hold the head to the index (`indexedRead`, HeadWindow.index): a head row set
   * back or removed under the index with its tail and watermark, by whichever host, is `ROLLBACK`; a path that does not
   * hash to the stored root `TREE_DAMAGED`. Nothing is remembered (other hosts write heads too): every window reads the
   * path.
   */
  protected async _headWindow(session: string, options: { index?: boolean } = {}): Promise<HeadWindow> {
    if (options.index === false)
      return this.windowOf(session, await this.rows<HeadWindowRow>('head window', this.sql.headWindow!, [session]));
    const { read, index } = await this.indexedRead<HeadWindowRow, HeadWindow>(
      'head window',
      this.sql.headWindowIndexed!,
      session,
      (rows) => this.windowOf(session, rows),
    );
    return { ...read, index };
  }

  /**
   * `text` run for `session` ($1) with the session-heads nodes on the session's path and beside it ($2, $3:
   * `likelyPaths` as deep as the index's recent walks went, `PgSessionHeads.readDepths`), which it returns as
   * `heads_nodes` on one of its rows, from the snapshot of the rest; `read` makes of its rows what the caller reads,
   * whose head is held to those nodes (`indexedHeadProblem`: undefined when the index commits it; `ROLLBACK` when a
   * whole index commits another head or none; `TREE_DAMAGED` for a path that does not hash to the stored root;
   * `RECORD_CORRUPT` for a node that cannot be parsed). A path longer than the statement read (the index grew, or is
   * damaged) is read again, whole statement and deeper path together. The head window's and the cut-back facts' one
   * way of holding a head to the index.
   */
  private async indexedRead<R extends pg.QueryResultRow, T extends { head: SessionHead | undefined }>(
    what: string,
    text: string,
    session: string,
    read: (rows: R[]) => T,
  ): Promise<{ read: T; index: HeadWindow['index'] }> {
    for (let depths = this.headsIndex.readDepths(); ; depths = depths < 32 ? 32 : KEY_BITS + 1) {
      const paths = likelyPaths(session, depths);
      const rows = await this.rows<R & { heads_nodes: PrefetchedNodeRow[] | null }>(what, text, [
        session,
        paths.map((p) => p.depth),
        Buffer.concat(paths.map((p) => p.prefix)),
      ]);
      const made = read(rows);
      let walked = 0;
      const deeper = new Error('the path is longer than read');
      const nodes = rows.find((r) => r.heads_nodes !== null)!.heads_nodes!;
      const fromRows = prefetched(paths, nodes, () => {
        throw deeper;
      });
      let index: HeadWindow['index'];
      try {
        // Every node asked for was read with the head: the judgement is at once.
        index = indexedHeadProblem(
          (asked) => {
            for (const p of asked) walked = Math.max(walked, p.depth);
            return fromRows(asked);
          },
          session,
          made.head && { seq: made.head.seq, id: made.head.id },
        ) as IndexedHeadProblem | undefined;
      } catch (err) {
        if (err === deeper) continue;
        if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
        index = { code: 'RECORD_CORRUPT', problem: err.message };
      }
      this.headsIndex.walked(walked);
      return { read: made, index };
    }
  }

  /** A head window from its statement's rows. */
  private windowOf(session: string, rows: HeadWindowRow[]): HeadWindow {
    const first = rows[0]!;
    const head =
      first.head_seq === null
        ? undefined
        : toHead({ session, seq: first.head_seq, id: first.head_id!, owner: first.owner! });
    const seq = head?.seq ?? -1;
    const at = (s: number) => {
      const row = rows.find((r) => r.seq === s);
      return row && toEntry(row as EntryRow);
    };
    return {
      session,
      head,
      entryAtHead: head ? at(seq) : undefined,
      entryBeforeHead: seq > 0 ? at(seq - 1) : undefined,
      entryBeyondHead: head ? rows.some((r) => r.seq === seq + 1) : first.headless_beyond,
      watermark: first.watermark ?? undefined,
    };
  }

  protected async *_chain(session: string, fromSeq: number): AsyncIterable<LogEntry> {
    let from = fromSeq;
    for (;;) {
      const rows = await this.rows<EntryRow>('chain', this.sql.chain!, [session, from]);
      for (const row of rows) yield toEntry(row);
      if (rows.length < PAGE) return;
      from = rows[rows.length - 1]!.seq + 1;
    }
  }

  protected async *_entries(afterPosition: number | undefined): AsyncIterable<LogEntry> {
    let after = afterPosition ?? -1;
    for (;;) {
      const rows = await this.rows<EntryRow>('entries', this.sql.entries!, [after]);
      for (const row of rows) yield toEntry(row);
      if (rows.length < PAGE) return;
      after = Number(rows[rows.length - 1]!.position);
    }
  }

  protected async *_heads(): AsyncIterable<ChainHead> {
    let after = '';
    for (;;) {
      const rows = await this.rows<HeadRow>('heads', this.sql.heads!, [after]);
      for (const row of rows) yield toHead(row);
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1]!.session;
    }
  }

  /** Appends waiting for a transaction (`startAppends`). */
  private readonly waiting: PendingAppend[] = [];
  /**
   * Appends a transaction of several left to go by themselves, waiting their turn behind the lone appends before them
   * (`runAppends`), each of which may wait for a lock: an abort meanwhile answers one at once.
   */
  private readonly waitingAlone = new Set<PendingAppend>();
  /**
   * The sessions of the appends a transaction took and has not answered yet: another append of one waits for the next
   * transaction. One answered in a transaction of several is let go then, before the lone appends after it.
   */
  private readonly appending = new Set<string>();
  private transactions = 0;
  /** The transactions of appends running (`startAppends`): `_close` lets them, and the appends waiting, finish. */
  private readonly runs = new Set<Promise<void>>();

  /**
   * Queued for one of this log's transactions of appends (at most APPEND_TRANSACTIONS at once): an append that finds
   * one free runs at once, alone (`appendOne`); those that arrive while both are busy are taken together by the next
   * (`appendMany`: one commit, one WAL flush and one hold of the counter's lock for all of them). An abort while it
   * waits takes it out of the queue (`CANCELLED`, nothing written).
   */
  protected _append(request: AppendRequest, signal: AbortSignal | undefined): Promise<LogEntry> {
    const refused = this.appendRefusal();
    if (refused) return Promise.reject(refused);
    // The request's own envelope first, before it is queued (as the embedded log judges it): a malformed one is its
    // ENVELOPE_INVALID alone, whatever its chain holds, never the failure of a transaction it would share with others.
    let leaf: Uint8Array;
    try {
      leaf = leafOfEnvelope(request.envelope);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<LogEntry>((resolve, reject) => {
      const pending: PendingAppend = { request, leaf, signal, resolve, reject, stopListening: undefined };
      if (signal)
        pending.stopListening = onAbort(signal, () => {
          const at = this.waiting.indexOf(pending);
          if (at >= 0) this.waiting.splice(at, 1);
          else if (!this.waitingAlone.delete(pending)) return; // in a transaction: it answers the abort there
          reject(cancelled(signal));
          pending.answeredWaiting?.();
        });
      this.waiting.push(pending);
      this.startAppends();
    });
  }

  /** Starts transactions for the waiting appends while fewer than APPEND_TRANSACTIONS run. */
  private startAppends(): void {
    while (this.transactions < APPEND_TRANSACTIONS && this.waiting.length > 0) {
      const batch: PendingAppend[] = [];
      const sessions = new Set<string>();
      for (let i = 0; i < this.waiting.length && batch.length < MAX_BATCH;) {
        const session = this.waiting[i]!.request.session;
        if (this.appending.has(session) || sessions.has(session)) {
          i++;
          continue;
        }
        batch.push(...this.waiting.splice(i, 1));
        sessions.add(session);
      }
      if (batch.length === 0) return;
      for (const session of sessions) this.appending.add(session);
      this.transactions++;
      // A session the transaction answered is let go then: its next append need not wait for the lone appends after
      // the transaction (each of which may wait for a held head up to lockTimeoutMs).
      const answered = (session: string) => {
        if (!sessions.delete(session)) return;
        this.appending.delete(session);
        this.startAppends();
      };
      const run = this.runAppends(batch, answered).finally(() => {
        for (const session of sessions) this.appending.delete(session);
        this.transactions--;
        this.runs.delete(run);
        this.startAppends();
      });
      this.runs.add(run);
    }
  }

  /**
   * Runs `batch` (alone, or together), settling each of its appends; never rejects. `answered(session)` is told of each
   * append of a transaction of several as it is settled (by the transaction, its abort, or its own lone append), before
   * the lone appends after it run.
   */
  private async runAppends(batch: PendingAppend[], answered: (session: string) => void): Promise<void> {
    const settle = async (p: PendingAppend, run: () => Promise<LogEntry>) => {
      try {
        p.resolve(await run());
      } catch (err) {
        p.reject(err);
      } finally {
        p.stopListening?.();
      }
    };
    if (batch.length === 1) return settle(batch[0]!, () => this.appendOne(batch[0]!, batch[0]!.signal));
    const outcomes = await this.appendTogether(batch);
    // The ones to append by themselves (a cut-back chain judged precisely, a head another transaction holds, a
    // transaction rolled back at another's abort or failing on a unique key) go each in a transaction of its own,
    // once the others have their answers.
    const alone: PendingAppend[] = [];
    for (const p of batch) {
      const outcome = outcomes.get(p) ?? 'alone';
      if (outcome === 'alone') alone.push(p);
      else {
        if ('entry' in outcome) await settle(p, async () => outcome.entry);
        else await settle(p, () => Promise.reject(outcome.error));
        answered(p.request.session);
      }
    }
    // One after another: this is one of the log's APPEND_TRANSACTIONS. One whose signal aborts while it waits its turn
    // is answered then (CANCELLED, nothing written), not once the lone appends before it, each of which may wait for a
    // lock up to lockTimeoutMs, have ended; one aborted already (during the transaction of several, after its COMMIT was
    // sent) at once.
    for (const p of alone) {
      if (p.signal?.aborted) {
        await settle(p, () => Promise.reject(cancelled(p.signal!)));
        answered(p.request.session);
      } else {
        p.answeredWaiting = () => answered(p.request.session);
        this.waitingAlone.add(p);
      }
    }
    for (const p of alone) {
      if (!this.waitingAlone.delete(p)) continue;
      await settle(p, () => this.appendOne(p, p.signal));
      answered(p.request.session);
    }
  }

  /**
   * `appendMany` for `batch` under one signal that aborts with any of theirs: an abort before COMMIT rolls all of them
   * back; the one aborted is CANCELLED and the others are appended alone. An append the transaction has refused, or
   * left to go by itself, is no longer in it: its abort from then on rolls nothing back (a refusal stands, as a lone
   * append's refused before its abort; one left to go by itself is CANCELLED then). A unique key or a deadlock met by
   * the whole leaves each to be appended alone, which answers as it does; any other failure is each one's, as appendOne
   * would answer it (a COMMIT whose outcome is unknown judged per append by its entry).
   */
  private async appendTogether(batch: PendingAppend[]): Promise<Map<PendingAppend, BatchOutcome>> {
    const anyAbort = new AbortController();
    const listeners = new Map<PendingAppend, () => void>();
    for (const p of batch) {
      if (!p.signal) continue;
      if (p.signal.aborted) anyAbort.abort(p.signal.reason);
      listeners.set(
        p,
        onAbort(p.signal, () => anyAbort.abort(p.signal!.reason)),
      );
    }
    const leftOut = (p: PendingAppend) => {
      listeners.get(p)?.();
      listeners.delete(p);
    };
    try {
      return await this.appendMany(batch, listeners.size > 0 ? anyAbort.signal : undefined, leftOut);
    } catch (err) {
      const outcomes = new Map<PendingAppend, BatchOutcome>();
      if (anyAbort.signal.aborted && err === anyAbort.signal.reason) {
        // Rolled back: the aborted ones are CANCELLED, the others go by themselves.
        for (const p of batch) if (p.signal?.aborted) outcomes.set(p, { error: cancelled(p.signal) });
        return outcomes;
      }
      const code = pgCode(err);
      // A unique key or a deadlock the batch met as a whole: each by itself meets its own, or none. So does a damaged
      // session-heads path (TREE_DAMAGED: a node that does not hash its children; RECORD_CORRUPT: interior nodes down to
      // depth 256, which the update's walk refuses), rolled back: one append's path may be what met it, and it is
      // refused alone, not the appends that happened to share its transaction (as the embedded log refuses it); as is
      // one whose head the index does not commit (ROLLBACK: a head row set back under the index).
      if (
        code === UNIQUE_VIOLATION ||
        code === DEADLOCK_DETECTED ||
        (err instanceof ManifestError &&
          (err.code === 'TREE_DAMAGED' || err.code === 'RECORD_CORRUPT' || err.code === 'ROLLBACK')) ||
        err instanceof FirstHeadHeld
      )
        return outcomes;
      const failed = isHandoffLedgerError(err) ? err : storageFailed('append', err);
      // As appendOne answers: an append found committed stands (a COMMIT whose answer was lost), else the failure,
      // never a second try (the commit may land behind the look).
      await Promise.all(
        batch.map(async (p) => {
          outcomes.set(p, await this.committedDespite(err, p.request, failed));
        }),
      );
      return outcomes;
    } finally {
      for (const stop of listeners.values()) stop();
    }
  }

  /**
   * Several appends (of distinct sessions) in one transaction: each judged as `appendOne` judges it, the accepted ones
   * written at consecutive positions, the tree and the session-heads index grown by all of them in one write.
   * A chain found cut back is left to `appendOne` (`alone`), which tells a refusal from a lost race. `leftOut(p)` is told
   * of each append refused, or left to go by itself, as soon as it is: the transaction no longer ends at its abort.
   */
  private async appendMany(
    batch: PendingAppend[],
    signal: AbortSignal | undefined,
    leftOut: (p: PendingAppend) => void,
  ): Promise<Map<PendingAppend, BatchOutcome>> {
    const sorted = [...batch].sort((a, b) => (a.request.session < b.request.session ? -1 : 1));
    let growth: Growth | undefined;
    const answered = await this.db.transaction(
      async (client) => {
        const judged = new Map<PendingAppend, BatchOutcome>();
        // What is refused or left to go alone is answered so whatever the transaction meets: its abort is let go.
        const outcomes = {
          has: (p: PendingAppend) => judged.has(p),
          set: (p: PendingAppend, outcome: Exclude<BatchOutcome, { entry: LogEntry }>) => {
            judged.set(p, outcome);
            leftOut(p);
          },
        };
        const sessions = sorted.map((p) => p.request.session);
        const locked = new Map(
          (await client.query<LockedHeadRow>(this.sql.lockHeads!, [sessions])).rows.map((r) => [r.session, r]),
        );
        const headless = sessions.filter((s) => !locked.has(s));
        const facts = new Map(
          headless.length === 0
            ? []
            : (
                await client.query<{ session: string; watermark: number | null; beyond: boolean; held: boolean }>(
                  this.sql.headlessFacts!,
                  [headless],
                )
              ).rows.map((r) => [r.session, r]),
        );
        const going: Array<{ p: PendingAppend; head: HeadRow | undefined }> = [];
        for (const p of sorted) {
          const r = p.request;
          const row = locked.get(r.session);
          const head = row && toHeadRow(row);
          const f = row ?? facts.get(r.session)!;
          // A head another transaction holds is waited for by the append alone: the batch's other heads, locked
          // already, would be held as long (a stalled writer: lockTimeoutMs).
          if (!row && (f as { held: boolean }).held) {
            outcomes.set(p, 'alone');
            continue;
          }
          const [cut] = cutBackProblems({ head, entryBeyondHead: f.beyond, watermark: f.watermark ?? undefined });
          if (cut !== undefined) outcomes.set(p, 'alone');
          else if (r.seq !== (head ? head.seq + 1 : 0) || r.prev !== (head ? head.id : null))
            outcomes.set(p, { error: chainConflict(r, head) });
          else going.push({ p, head });
        }
        const fresh = going.filter((m) => !m.head).map((m) => m.p.request);
        if (fresh.length > 0) {
          // The insert waits for another writer's first append of one of these chains, not committed yet (no head to
          // see, skip or lock before it): past lockTimeoutMs (that writer stalled) the appends go by themselves, not
          // all LOCKED for the one chain whose head is held elsewhere.
          const inserted = await client
            .query<{ session: string }>(this.sql.newHeads!, [
              fresh.map((r) => r.session),
              fresh.map((r) => r.seq),
              fresh.map((r) => r.id),
              fresh.map((r) => r.principal),
            ])
            .catch((err: unknown) => {
              throw isPgWaitTimeout(err) ? new FirstHeadHeld(err) : err;
            });
          const made = new Set(inserted.rows.map((r) => r.session));
          for (const m of going)
            if (!m.head && !made.has(m.p.request.session)) outcomes.set(m.p, { error: lostRace(m.p.request) });
        }
        const live = going.filter((m) => !outcomes.has(m.p));
        if (live.length === 0) return judged;
        const first = Number((await client.query<{ n: string }>(this.sql.lockCounter!)).rows[0]!.n);
        const frontier = frontierOf(first);
        const ahead = this.headsIndex.readAhead(live.map((m) => m.p.request.session));
        const keyIds = [...new Set(live.flatMap((m) => (m.p.request.signed ? [m.p.request.signed.keyId] : [])))];
        const [gate] = (
          await client.query<{
            revoked: boolean[];
            keys: Array<{ key_id: string; closed_at: string | null }>;
            frontier: Array<{ level: number; idx: string; hash: string }>;
            heads_nodes: PrefetchedNodeRow[];
          }>(this.sql.gates!, [
            live.map((m) => m.p.request.principal),
            live.map((m) => m.p.request.session),
            keyIds,
            frontier.map((id) => id.level),
            frontier.map((id) => String(id.index)),
            ahead.paths.map((p) => p.depth),
            Buffer.concat(ahead.paths.map((p) => p.prefix)),
          ])
        ).rows;
        const closedAt = new Map(gate!.keys.map((k) => [k.key_id, k.closed_at]));
        const accepted: typeof live = [];
        live.forEach((m, i) => {
          const r = m.p.request;
          const windowEnd = r.signed ? (closedAt.get(r.signed.keyId) ?? null) : null;
          if (gate!.revoked[i])
            outcomes.set(m.p, { error: new ManifestError('REVOKED', `principal ${r.principal} is revoked`) });
          else if (r.signed && windowEnd !== null && r.signed.createdAt >= windowEnd)
            outcomes.set(m.p, { error: keyExpired(r.signed, windowEnd) });
          else accepted.push(m);
        });
        // Heads inserted above for appends refused since: taken back, as a rolled-back append leaves none.
        const undo = live.filter((m) => !m.head && outcomes.has(m.p)).map((m) => m.p.request.session);
        const requests = accepted.map((m) => m.p.request);
        const blobs = new Map(requests.flatMap((r) => (r.blob ? [[r.blob.digest, r.blob.bytes] as const] : [])));
        const newest = new Map<string, string>();
        for (const r of requests)
          if (r.signed && !(newest.get(r.signed.keyId)! >= r.signed.createdAt))
            newest.set(r.signed.keyId, r.signed.createdAt);
        const [wrote] = (
          await client.query<{ written: number; moved: number; undone: number; counted: number }>(this.sql.writeMany!, [
            requests.map((_, i) => String(first + i)),
            requests.map((r) => r.session),
            requests.map((r) => r.seq),
            requests.map((r) => r.id),
            requests.map((r) => r.principal),
            requests.map((r) => r.envelope),
            [...blobs.keys()],
            [...blobs.values()].map((b) => b.length),
            [...blobs.values()].map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength)),
            [...newest.keys()],
            [...newest.values()],
            String(requests.length),
            undo,
          ])
        ).rows;
        const moved = accepted.filter((m) => m.head).length;
        if (
          wrote!.written !== requests.length ||
          wrote!.moved !== moved ||
          wrote!.undone !== undo.length ||
          wrote!.counted !== 1
        )
          throw new Error(
            `a batch of appends wrote ${wrote!.written} of ${requests.length} entries, moved ${wrote!.moved} of ${moved} heads, took back ${wrote!.undone} of ${undo.length}`,
          );
        if (requests.length === 0) return judged;
        const leaves = accepted.map((m) => m.p.leaf);
        growth = await this.growTreeAndHeads(client, first, requests, leaves, { frontier, ahead, gate: gate! });
        accepted.forEach((m, i) =>
          judged.set(m.p, { entry: toEntry({ position: String(first + i), ...m.p.request }) }),
        );
        return judged;
      },
      BEGIN,
      signal,
    );
    this.grew(growth);
    return answered;
  }

  /** The heads held now (`holdHead`). */
  private holds = 0;
  /** Ends each hold not yet appended to or released, which `_close` rolls back. */
  private readonly openHolds = new Set<() => void>();

  /**
   * Holds the head in a transaction of its own (`appendLocked`) until the holder's append or release: its row lock
   * keeps other writers' appends to the chain waiting meanwhile. At most half the pool's connections hold heads at
   * once (a holder reads grants and the head's entry on another connection while it signs), and fewer than the
   * connections left beside the log's transactions of appends (`maxHolds`); beyond that, and for a chain with no head
   * row to lock, undefined.
   */
  async holdHead(session: string, options?: AppendOptions): Promise<HeadHold | undefined> {
    const { session: held, signal } = this.checkHold(session, options);
    const refused = this.appendRefusal();
    if (refused) throw refused;
    if (this.holds >= maxHolds(this.db.pool.options.max ?? 10)) return undefined;
    this.holds++;
    let handOut!: (hold: HeadHold | undefined) => void;
    let failed!: (err: unknown) => void;
    const handed = new Promise<HeadHold | undefined>((resolve, reject) => {
      handOut = resolve;
      failed = reject;
    });
    let give!: (taken: Taken | undefined) => void;
    const given = new Promise<Taken | undefined>((resolve) => (give = resolve));
    // 'open' until the holder appends or releases, or the signal aborts or the log closes (then rolled back).
    let state: 'open' | 'used' | 'aborted' | 'closed' = 'open';
    const end = (why: 'aborted' | 'closed') => {
      if (state !== 'open') return;
      state = why;
      give(undefined);
    };
    const stopListening = signal && onAbort(signal, () => end('aborted'));
    const closing = () => end('closed');
    this.openHolds.add(closing);
    const done = this.appendLocked(held, signal, (head) => {
      if (head === undefined) return undefined;
      handOut({
        head,
        append: (request) => {
          if (state === 'aborted') return Promise.reject(cancelled(signal!));
          if (state === 'closed')
            return Promise.reject(
              new ManifestError('STORAGE_FAILED', 'the log was closed while the head was held: nothing was written'),
            );
          if (state === 'used')
            return Promise.reject(new ManifestError('INVALID_ARGUMENT', 'a held head takes one append'));
          state = 'used';
          let taken: Taken;
          try {
            const checked = this.checkRequest(request);
            if (checked.session !== held)
              throw new ManifestError(
                'INVALID_ARGUMENT',
                `the append is to session ${checked.session}, the head held is session ${held}'s`,
              );
            taken = { request: checked, leaf: leafOfEnvelope(checked.envelope) };
          } catch (err) {
            give(undefined);
            return done.then(() => Promise.reject(err));
          }
          give(taken);
          return done.then((entry) => entry!);
        },
        release: () => {
          if (state === 'open') {
            state = 'used';
            give(undefined);
          }
          return done.then(
            () => {},
            () => {},
          );
        },
      });
      return given;
    });
    // Settles the hold itself when it ended before it was handed out (no head to hold, the lock wait failed).
    done.then(() => handOut(undefined), failed);
    const run = done
      .then(
        () => {},
        () => {},
      )
      .finally(() => {
        stopListening?.();
        this.openHolds.delete(closing);
        this.holds--;
        this.runs.delete(run);
      });
    this.runs.add(run);
    return handed;
  }

  private async appendOne({ request, leaf }: PendingAppend, signal: AbortSignal | undefined): Promise<LogEntry> {
    return (await this.appendLocked(request.session, signal, () => ({ request, leaf }), request))!;
  }

  /**
   * One append in a transaction of its own: locks `session`'s head row (waiting for any concurrent append to the chain
   * to finish), then `take(head)` gives the append (appendOne: the one it was asked for; a hold: its holder's, built on
   * that head), or undefined to write nothing (rolled back, resolves undefined). `known`: the request, when it is known
   * before the lock (appendOne), whose failures are then the append's from the start.
   */
  private async appendLocked(
    session: string,
    signal: AbortSignal | undefined,
    take: (head: ChainHead | undefined) => Taken | undefined | Promise<Taken | undefined>,
    known?: AppendRequest,
  ): Promise<LogEntry | undefined> {
    let request: AppendRequest | undefined = known;
    const conflict = (head: HeadRow | undefined) => chainConflict(request!, head);
    let growth: Growth | undefined;
    try {
      // An abort before COMMIT is sent cancels the statement running (a wait for the head's row lock, say) and rolls
      // back: the transaction throws the signal's reason. Once COMMIT is sent, the append stands.
      const entry = await this.db.transaction(
        async (client) => {
          // Waits for any concurrent append to this chain to finish, then sees its result.
          const [locked] = (await client.query<LockedHeadRow>(this.sql.lockHead!, [session])).rows;
          const head: HeadRow | undefined = locked && toHeadRow(locked);
          const taken = await take(head && toHead(head));
          if (taken === undefined) throw RELEASED;
          request = taken.request;
          const { leaf } = taken;
          // A chain cut back is not extended (the facts of a moment before the lock are never newer than the head).
          const facts =
            locked ??
            (await client.query<{ watermark: number | null; beyond: boolean }>(this.sql.headless!, [request.session]))
              .rows[0]!;
          const [cut] = cutBackProblems({
            head,
            entryBeyondHead: facts.beyond,
            watermark: facts.watermark ?? undefined,
          });
          if (cut !== undefined) {
            // With no head, the facts were read after the head was: another writer's first append to the chain may
            // have committed in between, which is a lost race, not a cut.
            const now = head ? undefined : (await client.query<HeadRow>(this.sql.head!, [request.session])).rows[0];
            if (now) throw conflict(now);
            throw rollbackRefused(request.session, cut);
          }
          if (request.seq !== (head ? head.seq + 1 : 0) || request.prev !== (head ? head.id : null))
            throw conflict(head);
          // A new chain has no row to lock: a concurrent first append blocks here on the key, then loses. A head there
          // is moved by writeEntry, with the entry.
          if (!head)
            await client.query(this.sql.newHead!, [request.session, request.seq, request.id, request.principal]);
          // Taken last, so the global lock is held only for the insert and the commit.
          const position = (await client.query<{ position: string }>(this.sql.takePosition!)).rows[0]!.position;
          const { signed } = request;
          const blob = request.blob;
          const frontier = frontierOf(Number(position));
          const ahead = this.headsIndex.readAhead([request.session]);
          const [gate] = (
            await client.query<{
              closed_at: string | null;
              revoked: boolean;
              written: number;
              moved: number;
              frontier: Array<{ level: number; idx: string; hash: string }>;
              heads_nodes: PrefetchedNodeRow[];
            }>(this.sql.writeEntry!, [
              signed?.keyId ?? null,
              signed?.createdAt ?? null,
              request.principal,
              request.session,
              position,
              request.seq,
              request.id,
              request.envelope,
              // Same digest, same bytes: a second publish of one summary rewrites them (repairing a damaged copy) and
              // makes them young again, as a re-put does for a blob: gc's conditional delete judges by stored_at.
              blob?.digest ?? null,
              blob?.bytes.length ?? null,
              blob ? Buffer.from(blob.bytes.buffer, blob.bytes.byteOffset, blob.bytes.byteLength) : null,
              frontier.map((id) => id.level),
              frontier.map((id) => String(id.index)),
              ahead.paths.map((p) => p.depth),
              Buffer.concat(ahead.paths.map((p) => p.prefix)),
              head !== undefined,
            ])
          ).rows;
          if (gate!.revoked) throw new ManifestError('REVOKED', `principal ${request.principal} is revoked`);
          if (signed && gate!.closed_at !== null && signed.createdAt >= gate!.closed_at)
            throw keyExpired(signed, gate!.closed_at);
          // The statement's gate and the two checks above judge alike (code-unit order of the dates, as COLLATE "C"):
          // an entry not written here, unrefused, would move the head past no entry. Never committed so.
          if (gate!.written !== 1 || gate!.moved !== (head ? 1 : 0))
            throw new Error(
              `the entry's write was gated off without a refusal (wrote ${gate!.written}, moved ${gate!.moved} heads)`,
            );
          // The tree grows in the same transaction, still under the counter's lock (global order), from the frontier
          // read above; and the session-heads index, whose root commits with the tree's new size: both in one write.
          growth = await this.growTreeAndHeads(client, Number(position), [request], [leaf], {
            frontier,
            ahead,
            gate: gate!,
          });
          return toEntry({ position, ...request });
        },
        BEGIN,
        signal,
      );
      this.grew(growth);
      return entry;
    } catch (err) {
      if (err === RELEASED) return undefined;
      if (signal?.aborted && err === signal.reason) throwIfAborted(signal, ManifestError);
      // A hold that failed before its holder's append was taken (the head's lock wait): the hold's failure.
      if (request === undefined) throw storageFailed('hold of the head', err);
      // Only the chain's own keys mean another writer won; any other unique key refusing a row is damage.
      const constraint = pgCode(err) === UNIQUE_VIOLATION ? (err as { constraint?: string }).constraint : undefined;
      if (constraint === 'heads_pkey' || constraint === 'entries_session_seq_key') throw lostRace(request, err);
      if (constraint === 'entries_pkey')
        throw new ManifestError(
          'TREE_DAMAGED',
          "the log's counter is behind its entries (the global position it gave out is already taken); run fsck",
          { cause: err },
        );
      // A connection lost at COMMIT leaves the outcome unknown here, not in the log: when this very manifest is at
      // its (session, seq), the append committed, and saying so keeps a caller's retry from publishing it twice.
      const outcome = await this.committedDespite(err, request, storageFailed('append', err));
      if ('entry' in outcome) return outcome.entry;
      throw outcome.error;
    }
  }

  /**
   * What an append whose transaction failed with `err` answers. `failed` (the append's own failure) when nothing was
   * committed: the failure came before COMMIT was sent (a pool busy past its wait among them: answered at once, with
   * no second wait for a connection to look with) or the server answered it (`outcomeUnknown`). Else the COMMIT's reply
   * was lost: its entry when this very manifest is at its (session, seq) (it committed); else `STORAGE_FAILED` saying
   * that the append may have committed all the same (a commit still under way can land after the look, or the look
   * failed) and how to tell. Another manifest at its (session, seq) is `failed`: this one did not commit.
   */
  private async committedDespite(
    err: unknown,
    request: AppendRequest,
    failed: unknown,
  ): Promise<{ entry: LogEntry } | { error: unknown }> {
    if (!outcomeUnknown(err)) return { error: failed };
    let stored: LogEntry | undefined;
    let lookFailed: unknown;
    try {
      stored = await this._entry(request.session, request.seq);
    } catch (lookErr) {
      lookFailed = lookErr;
    }
    if (stored?.id === request.id) return { entry: stored };
    if (stored !== undefined) return { error: failed };
    const look =
      lookFailed === undefined
        ? 'its entry was not there when looked up, but a commit still under way can land after the look'
        : `its entry could not be looked up (${errorText(lookFailed)})`;
    return {
      error: new ManifestError(
        'STORAGE_FAILED',
        `postgres manifest log: append failed after its COMMIT was sent (${errorText(err)}): it may have committed all the same; ${look}. Read the head of session ${request.session} before appending again: the append committed if the entry at seq ${request.seq} has id ${request.id}`,
        { cause: err },
      ),
    };
  }

  /**
   * Inside an append's transaction, under the counter's lock, once its entries are written at `position` on: grows the
   * tree by their leaves from the frontier the gate statement read, and the session-heads index by their heads (from
   * the nodes read ahead with it), both in one write. Returns the growth (ManifestLog.ownGrowth), recorded once the
   * transaction commits. `leaves`: the requests' leaves (`leafOfEnvelope`), in order.
   * @throws ManifestError `TREE_DAMAGED` (a frontier node missing, a node already stored beyond the log)
   */
  private async growTreeAndHeads(
    client: pg.PoolClient,
    position: number,
    requests: AppendRequest[],
    leaves: Uint8Array[],
    read: {
      frontier: NodeId[];
      ahead: ReadAhead;
      gate: { frontier: Array<{ level: number; idx: string; hash: string }>; heads_nodes: PrefetchedNodeRow[] };
    },
  ): Promise<Growth | undefined> {
    const hashes = hashesOf(
      read.frontier,
      read.gate.frontier.map((r) => ({ level: r.level, idx: r.idx, hash: new Uint8Array(Buffer.from(r.hash, 'hex')) })),
    );
    const tree = grown(position, leaves, hashes);
    const { changes, removed } = await this.headsIndex.changesFor(
      client,
      // Each held to the head it extends (its row locked in this transaction): the index must commit it.
      requests.map((r) => ({ session: r.session, head: { seq: r.seq, id: r.id }, previous: extendedHead(r) })),
      { ahead: read.ahead, rows: read.gate.heads_nodes },
    );
    try {
      await client.query(this.sql.growIndexes!, [
        ...nodeColumns(tree.nodes),
        ...this.headsIndex.upsertColumns(changes),
      ]);
    } catch (err) {
      throw treeCollision(err, position);
    }
    await this.headsIndex.remove(client, removed);
    return growthOf(position, requests.length, tree, changes);
  }

  /** The trees this log's own transactions committed (`Growth`), by size, the largest last. */
  private readonly growths: Growth[] = [];

  /** Records a committed transaction's growth (none: nothing to record). */
  private grew(growth: Growth | undefined): void {
    if (growth === undefined) return;
    const at = this.growths.findIndex((g) => g.after.size > growth.after.size);
    this.growths.splice(at < 0 ? this.growths.length : at, 0, growth);
    if (this.growths.length > GROWTHS_KEPT) this.growths.shift();
  }

  ownGrowth(): { head: LogTreeHead; grewFrom(size: number, root: Uint8Array): boolean } | undefined {
    const growths = this.growths.slice();
    const newest = growths.at(-1);
    if (newest === undefined) return undefined;
    return {
      head: newest.after,
      grewFrom: (size, root) => {
        // Back from the newest, through trees each the one the next transaction grew from.
        let tree: TreeHead = newest.after;
        for (let i = growths.length - 1; ;) {
          if (tree.size === size) return equalBytes(tree.root, root);
          if (tree.size < size) return false;
          const g = growths[i];
          if (g === undefined || g.after.size !== tree.size || !equalBytes(g.after.root, tree.root)) return false;
          tree = g.before;
          i--;
        }
      },
    };
  }

  async treeHead(): Promise<LogTreeHead> {
    try {
      // The size and the index root from one snapshot; tree nodes never change once committed, so reading the
      // size first and its nodes next is consistent. (One statement for all three was tried: its plan over the
      // frontier's lateral lookups went from 0.1 ms to 7 ms once the tables had grown: benchmarks/README.md.)
      const { size, root: sessionHeads } = await this.headsIndex.head(this.db);
      return {
        ...(await treeHeadAt(this.treeBuiltTo ?? size, (ids) => this.tree.read(this.db, ids))),
        sessionHeads,
      };
    } catch (err) {
      throw storageFailed('tree head', err);
    }
  }

  protected async _sessionHeadNodes(paths: NodePath[]): Promise<Array<HeadsNode | undefined>> {
    try {
      return await this.headsIndex.read(this.db, paths);
    } catch (err) {
      throw storageFailed('session-heads read', err);
    }
  }

  async sessionHeadNodeCount(): Promise<number> {
    try {
      return await this.headsIndex.count(this.db);
    } catch (err) {
      throw storageFailed('session-heads count', err);
    }
  }

  protected async _treeNodes(ids: NodeId[]): Promise<Uint8Array[]> {
    try {
      return await this.tree.read(this.db, ids);
    } catch (err) {
      throw storageFailed('tree read', err);
    }
  }

  protected async _entryAt(position: number): Promise<LogEntry | undefined> {
    const [row] = await this.rows<EntryRow>('entry', this.sql.entryAt!, [String(position)]);
    return row && toEntry(row);
  }

  protected async _positionOf(id: Digest): Promise<number | undefined> {
    const [row] = await this.rows<{ position: string }>('id lookup', this.sql.positionOf!, [id]);
    return row && Number(row.position);
  }

  /**
   * The ids of `entries`, each with its lowest position (what positionOf answers), a page at a time: the id column is
   * the record here, a number that is always one, so none is listed corrupt (ManifestLog.idPositions).
   */
  async *idPositions(): AsyncIterable<IdPositionRecord> {
    let after: string | null = null;
    for (;;) {
      const rows: Array<{ id: string; position: string }> = await this.rows('id positions', this.sql.idPositions!, [
        after,
      ]);
      for (const row of rows) yield { id: row.id, position: Number(row.position) };
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1]!.id;
    }
  }

  protected async _origin(proposed: string | undefined): Promise<string | undefined> {
    if (proposed !== undefined) await rowsOf(this.db, 'write', 'origin write', this.sql.setOrigin!, [proposed]);
    const [row] = await this.rows<{ value: string }>('origin read', this.sql.getOrigin!, []);
    return row?.value;
  }

  protected async _getWatermark(session: string): Promise<number | undefined> {
    const [row] = await this.rows<{ seq: number }>('watermark read', this.sql.getWatermark!, [session]);
    return row?.seq;
  }

  protected async _setWatermark(session: string, seq: number): Promise<void> {
    // Read first: every resume records its height, and a no-op upsert would still cost a durable commit.
    const current = await this._getWatermark(session);
    if (current !== undefined && current >= seq) return;
    await rowsOf(this.db, 'write', 'watermark write', this.sql.setWatermark!, [session, seq]);
  }

  /**
   * One round trip per page of sessions instead of three per session: a shared database may hold many chains.
   * `signal` is looked at before each page (`CANCELLED` once it aborted).
   */
  protected override async _checkHeads(signal?: AbortSignal): Promise<HeadProblem[]> {
    const problems: HeadProblem[] = [];
    for (let after = ''; ;) {
      throwIfAborted(signal, ManifestError);
      const rows = await this.rows<HeadFactsRow>('head check', this.sql.headFacts!, [after]);
      for (const r of rows) {
        const head =
          r.head_seq === null
            ? undefined
            : toHead({ session: r.session, seq: r.head_seq, id: r.head_id!, owner: r.owner! });
        problems.push(
          ...headProblems({
            session: r.session,
            head,
            entryAtHead: r.entry_id === null ? undefined : { id: r.entry_id as Digest },
            entryBeyondHead: r.beyond,
            watermark: r.watermark ?? undefined,
          }),
        );
      }
      if (rows.length < PAGE) return problems;
      after = rows[rows.length - 1]!.session;
    }
  }

  /**
   * The log at one moment (PgDatabase.readSnapshot: one REPEATABLE READ READ ONLY transaction on a connection of its
   * own). A view's append fails (`STORAGE_FAILED`: its database refuses writes). `signal` ends the snapshot: before it
   * has begun, its connection (one still being made included) ended at once; after, the view's statement cancelled
   * (a wait for a lock too) and no further one sent: `CANCELLED`, the signal's reason as the cause.
   */
  async readSnapshot<T>(
    fn: (view: ManifestLog) => Promise<T>,
    options?: { signal?: AbortSignal | undefined },
  ): Promise<T> {
    const signal = readSnapshotSignal(options);
    let began = false;
    try {
      return await this.db.readSnapshot((db) => {
        began = true;
        const view = new PgManifestLog(OPENING, db);
        view.treeDamage = this.treeDamage;
        view.treeBuiltTo = this.treeBuiltTo;
        return fn(view);
      }, signal);
    } catch (err) {
      // The abort's own reason (a snapshot ended before it began, a read refused or cancelled) is the log's CANCELLED.
      if (
        signal?.aborted &&
        (err === signal.reason || (err as { cause?: unknown } | undefined)?.cause === signal.reason)
      )
        throwIfAborted(signal, ManifestError);
      // `fn`'s errors pass as they are (the view's reads report their own); a snapshot that could not begin is storage.
      if (began) throw err;
      throw storageFailed('read snapshot', err);
    }
  }

  protected async *_headlessSessions(): AsyncIterable<string> {
    // _checkHeads covers them in its one query.
  }

  protected async _close(): Promise<void> {
    // A held head its holder never appended to nor released is released, with nothing written.
    for (const end of [...this.openHolds]) end();
    // Appends made before the close are answered before the pool ends, the queued ones too (each run starts the next).
    while (this.runs.size > 0) await Promise.all([...this.runs]);
    await this.db.close();
  }
}

class PgInlineBlobs implements InlineBlobTable {
  constructor(private readonly db: PgDatabase) {}

  /** `rowsOf` with `{schema}` filled in. */
  private rows<R extends pg.QueryResultRow>(
    what: string,
    text: string,
    values: unknown[],
    kind: 'read' | 'write' = 'read',
  ): Promise<R[]> {
    return rowsOf<R>(this.db, kind, what, this.db.sql(text), values);
  }

  async get(digest: Digest): Promise<Uint8Array | undefined> {
    const [row] = await this.rows<{ bytes: Buffer }>(
      'inline blob read',
      'SELECT bytes FROM {schema}.inline_blobs WHERE digest = $1',
      [digest],
    );
    return row?.bytes;
  }

  async stat(digest: Digest): Promise<{ size: number; storedAtMs: number } | undefined> {
    const [row] = await this.rows<{ size: number; ms: number }>(
      'inline blob stat',
      'SELECT size, (extract(epoch FROM stored_at) * 1000)::float8 AS ms FROM {schema}.inline_blobs WHERE digest = $1',
      [digest],
    );
    if (!row) return undefined;
    // gc judges by this time: one that is no instant ('infinity', written under the store) is a damaged record, as
    // an unreadable time record is in the embedded log.
    if (!Number.isFinite(row.ms))
      throw new ManifestError('RECORD_CORRUPT', `inline blob ${digest}: its storage time is not a time (${row.ms})`);
    return { size: row.size, storedAtMs: row.ms };
  }

  async *list(): AsyncIterable<Digest> {
    let after = '';
    for (;;) {
      const rows = await this.rows<{ digest: Digest }>(
        'inline blob list',
        `SELECT digest FROM {schema}.inline_blobs WHERE digest > $1 ORDER BY digest LIMIT ${PAGE}`,
        [after],
      );
      for (const row of rows) yield row.digest;
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1]!.digest;
    }
  }

  /**
   * The server's clock, which `stored_at` is recorded by (InlineBlobTable.clock): gc's grace of an inline blob is
   * measured on it, not on the clock of a host beside it (a ledger given this log and a blob store of its own).
   */
  async clock(): Promise<number> {
    const [row] = await this.rows<{ ms: number }>(
      'inline blob clock',
      'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
      [],
    );
    return row!.ms;
  }

  async delete(digest: Digest, { storedBeforeMs, signal }: InlineDeleteOptions = {}): Promise<boolean> {
    // One statement: an append that refreshed stored_at first (its row lock orders the two) keeps the blob. An abort
    // while it waits for that lock (an append's transaction that hangs) cancels it and rolls back: nothing removed.
    const [text, values] =
      storedBeforeMs === undefined
        ? ['DELETE FROM {schema}.inline_blobs WHERE digest = $1 RETURNING 1', [digest]]
        : [
            'DELETE FROM {schema}.inline_blobs WHERE digest = $1 AND stored_at < to_timestamp($2::float8 / 1000) RETURNING 1',
            [digest, storedBeforeMs],
          ];
    try {
      return (await this.db.write(this.db.sql(text), values, signal)).rows.length > 0;
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throwIfAborted(signal, ManifestError);
      throw storageFailed('inline blob delete', err);
    }
  }
}

interface SigningKeyRow {
  key_id: string;
  last_signed_at: string | null;
  closed_at: string | null;
}

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A row's times are ISO-8601 UTC with milliseconds (their text order is time order), or it is corrupt. */
function toSigningKey(r: SigningKeyRow): SigningKeyRecord {
  for (const [column, value] of [
    ['last_signed_at', r.last_signed_at],
    ['closed_at', r.closed_at],
  ] as const)
    if (value !== null && !ISO_MS.test(value))
      throw new ManifestError(
        'RECORD_CORRUPT',
        `manifest log record signing_keys[${quoted(r.key_id)}] is corrupt: ${column} is not an ISO-8601 UTC time with milliseconds`,
      );
  return {
    keyId: r.key_id,
    ...(r.last_signed_at !== null ? { lastSignedAt: r.last_signed_at } : {}),
    ...(r.closed_at !== null ? { closedAt: r.closed_at } : {}),
  };
}

class PgSigningKeys implements SigningKeyTable {
  constructor(private readonly db: PgDatabase) {}

  async get(keyId: string): Promise<SigningKeyRecord | undefined> {
    try {
      const { rows } = await this.db.query<SigningKeyRow>(
        this.db.sql('SELECT key_id, last_signed_at, closed_at FROM {schema}.signing_keys WHERE key_id = $1'),
        [keyId],
      );
      return rows[0] && toSigningKey(rows[0]);
    } catch (err) {
      throw storageFailed('signing key read', err);
    }
  }

  async *keyIds(): AsyncIterable<string> {
    let rows: Array<{ key_id: string }>;
    try {
      ({ rows } = await this.db.query<{ key_id: string }>(
        this.db.sql('SELECT key_id FROM {schema}.signing_keys ORDER BY key_id'),
      ));
    } catch (err) {
      throw storageFailed('signing key list', err);
    }
    for (const r of rows) yield r.key_id;
  }

  async close(keyId: string, choose: (record: SigningKeyRecord | undefined) => string): Promise<string> {
    try {
      return await this.db.transaction(async (client) => {
        // Every append takes this lock before it records its createdAt: once we hold it, none is in flight.
        await client.query(this.db.sql('SELECT 1 FROM {schema}.log_counter FOR UPDATE'));
        const { rows } = await client.query<SigningKeyRow>(
          this.db.sql('SELECT key_id, last_signed_at, closed_at FROM {schema}.signing_keys WHERE key_id = $1'),
          [keyId],
        );
        const closedAt = choose(rows[0] && toSigningKey(rows[0]));
        await client.query(
          this.db.sql(`INSERT INTO {schema}.signing_keys (key_id, closed_at) VALUES ($1, $2)
            ON CONFLICT (key_id) DO UPDATE SET closed_at = EXCLUDED.closed_at`),
          [keyId, closedAt],
        );
        return closedAt;
      });
    } catch (err) {
      throw storageFailed('signing key close', err);
    }
  }
}

interface GrantRow {
  principal: string;
  session: string;
  state: GrantState;
  at: string;
  by: string | null;
}

/**
 * The grant columns by name, never `*`: a statement is prepared once per connection (`preparedStatements`), and a
 * column a later migration adds would change the result of `SELECT *` under a plan already made, which the server
 * refuses ("cached plan must not change result type") on every pooled connection of a process still running.
 */
const GRANT_COLUMNS = 'principal, session, state, at, by';

/** A row whose time is not a date is corrupt (the embedded log's parse refuses the same record), not a valid grant. */
function toGrant(r: GrantRow): GrantRecord {
  if (!isGrantTime(r.at))
    throw new ManifestError(
      'RECORD_CORRUPT',
      `manifest log record grants[${quoted(r.principal)}, ${quoted(r.session)}] is corrupt: at is not a date`,
    );
  const rec: GrantRecord = { principal: r.principal, session: r.session, state: r.state, at: r.at };
  if (r.by !== null) rec.by = r.by;
  return rec;
}

class PgGrantTable implements GrantTable {
  constructor(private readonly db: PgDatabase) {}

  private async rows(what: string, text: string, values: unknown[]): Promise<GrantRow[]> {
    try {
      return (await this.db.query<GrantRow>(this.db.sql(text), values)).rows;
    } catch (err) {
      throw storageFailed(what, err);
    }
  }

  async forSession(principal: string, session: string): Promise<{ here?: GrantRecord; everywhere?: GrantRecord }> {
    const rows = await this.rows(
      'grant read',
      `SELECT ${GRANT_COLUMNS} FROM {schema}.grants WHERE principal = $1 AND session IN ($2, '*')`,
      [principal, session],
    );
    const out: { here?: GrantRecord; everywhere?: GrantRecord } = {};
    for (const row of rows) {
      const grant = toGrant(row);
      if (row.session === session) out.here = grant;
      if (row.session === '*') out.everywhere = grant;
    }
    return out;
  }

  async get(principal: string, session: string): Promise<GrantRecord | undefined> {
    const [row] = await this.rows(
      'grant read',
      `SELECT ${GRANT_COLUMNS} FROM {schema}.grants WHERE principal = $1 AND session = $2`,
      [principal, session],
    );
    return row && toGrant(row);
  }

  async put(record: GrantRecord): Promise<void> {
    try {
      await this.db.transaction(async (client) => {
        // The counter row's lock orders this with every append (which reads the grants under it): once the
        // revocation commits, no append of the principal that has not yet committed can.
        await client.query(this.db.sql('SELECT 1 FROM {schema}.log_counter FOR UPDATE'));
        await client.query(
          this.db.sql(`INSERT INTO {schema}.grants (principal, session, state, at, by) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (principal, session) DO UPDATE SET state = EXCLUDED.state, at = EXCLUDED.at, by = EXCLUDED.by`),
          [record.principal, record.session, record.state, record.at, record.by ?? null],
        );
      });
    } catch (err) {
      throw storageFailed('grant write', err);
    }
  }

  async list(filter: { principal?: string; session?: string } = {}): Promise<GrantRecord[]> {
    const rows = await this.rows(
      'grant list',
      `SELECT ${GRANT_COLUMNS} FROM {schema}.grants WHERE ($1::text IS NULL OR principal = $1) AND ($2::text IS NULL OR session = $2)
       ORDER BY principal, session`,
      [filter.principal ?? null, filter.session ?? null],
    );
    return rows.map(toGrant);
  }
}
