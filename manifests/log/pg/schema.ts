/**
 * The manifest log's tables in PostgreSQL, as versioned forward-only migrations (applied by
 * store/pg/db.ts under an advisory lock). Ids are compared and ordered bytewise (COLLATE "C"), the same
 * order the LevelDB log keeps, whatever the database's locale.
 */
import type { PgMigration } from '../../../store/pg/db.js';

export const MANIFEST_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: 'entries, heads, grants, watermarks',
    sql: `
      -- One row: the next global position. Appends update it inside their transaction, so its row lock
      -- orders them: positions are gap-free and follow commit order (a sequence is neither).
      CREATE TABLE {schema}.log_counter (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        next_position bigint NOT NULL CHECK (next_position >= 0));
      INSERT INTO {schema}.log_counter (singleton, next_position) VALUES (true, 0);

      -- A session id names one session in the whole store, so (session, seq) is the chain key: a
      -- second writer at the same seq violates it and loses (CHAIN_CONFLICT), it cannot fork the chain.
      CREATE TABLE {schema}.entries (
        position bigint PRIMARY KEY CHECK (position >= 0),
        session text COLLATE "C" NOT NULL,
        seq integer NOT NULL CHECK (seq >= 0),
        id text NOT NULL,
        principal text COLLATE "C" NOT NULL,
        envelope text NOT NULL,
        UNIQUE (session, seq));

      CREATE TABLE {schema}.heads (
        session text COLLATE "C" PRIMARY KEY,
        seq integer NOT NULL,
        id text NOT NULL,
        owner text COLLATE "C" NOT NULL,
        FOREIGN KEY (session, seq) REFERENCES {schema}.entries (session, seq) DEFERRABLE INITIALLY DEFERRED);

      CREATE TABLE {schema}.grants (
        principal text COLLATE "C" NOT NULL,
        session text COLLATE "C" NOT NULL,
        state text NOT NULL CHECK (state IN ('granted', 'revoked')),
        at text NOT NULL,
        by text,
        PRIMARY KEY (principal, session));

      CREATE TABLE {schema}.watermarks (
        session text COLLATE "C" PRIMARY KEY,
        seq integer NOT NULL CHECK (seq >= 0));`,
  },
  {
    version: 2,
    name: 'inline blobs',
    sql: `
      -- Small summaries, inserted in the transaction of the entry that names them (one commit, not two).
      CREATE TABLE {schema}.inline_blobs (
        digest text COLLATE "C" PRIMARY KEY CHECK (digest ~ '^blake3:[0-9a-f]{64}$'),
        size integer NOT NULL CHECK (size >= 0),
        bytes bytea NOT NULL,
        stored_at timestamptz NOT NULL DEFAULT clock_timestamp());
      ALTER TABLE {schema}.inline_blobs ALTER COLUMN bytes SET STORAGE EXTERNAL;`,
  },
  {
    version: 3,
    name: 'Merkle tree over the global order, manifest id index, log metadata',
    sql: `
      -- Perfect subtrees of the RFC 6962 tree (manifests/tlog/tree.ts): (level, idx) covers the leaves
      -- [idx·2^level, (idx+1)·2^level). Written in the append's transaction, after the counter row is
      -- locked, so the tree grows in global order and always covers exactly the committed entries.
      CREATE TABLE {schema}.tree_nodes (
        level smallint NOT NULL CHECK (level >= 0 AND level < 64),
        idx bigint NOT NULL CHECK (idx >= 0),
        hash bytea NOT NULL CHECK (length(hash) = 32),
        PRIMARY KEY (level, idx));
      CREATE INDEX entries_by_id ON {schema}.entries (id);
      CREATE TABLE {schema}.log_meta (
        key text COLLATE "C" PRIMARY KEY,
        value text NOT NULL);`,
  },
  {
    version: 4,
    name: 'signing keys: newest signed createdAt and closed window per key',
    sql: `
      -- Written in the append's transaction under the counter row's lock, which rotation takes too: a window
      -- end is chosen after every committed createdAt of its key, and an append dated past it is refused.
      -- Times are ISO-8601 UTC with milliseconds, whose text order (COLLATE "C") is time order.
      CREATE TABLE {schema}.signing_keys (
        key_id text COLLATE "C" PRIMARY KEY,
        last_signed_at text COLLATE "C",
        closed_at text COLLATE "C");`,
  },
  {
    version: 5,
    name: 'session-heads index',
    sql: `
      -- Nodes of the sparse Merkle tree over every session's head (manifests/tlog/session-heads.ts), at
      -- (depth, the first depth bits of their keys, zero-padded to 32 bytes): an interior node's hash, or a
      -- leaf's value hash with its key. Written in the append's transaction under the counter row's lock, so
      -- the index always describes exactly the committed heads. Existing stores build it at open (log_meta
      -- 'session-heads' marks it built).
      CREATE TABLE {schema}.session_heads (
        depth smallint NOT NULL CHECK (depth >= 0 AND depth <= 256),
        prefix bytea NOT NULL CHECK (length(prefix) = 32),
        hash bytea NOT NULL CHECK (length(hash) = 32),
        leaf_key bytea CHECK (length(leaf_key) = 32),
        PRIMARY KEY (depth, prefix));`,
  },
];
