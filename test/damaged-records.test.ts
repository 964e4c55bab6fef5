/**
 * Damaged records of each kind, written behind the library's back into both backends' stores (LevelDB keys, PostgreSQL
 * rows), and every public operation that reads them: open, publish, resume, history, inclusionProof, exportBundle, fsck
 * and gc. What each must give is a coded error (or its answer), never a TypeError or another uncoded crash, and no lost
 * data (gc removes no blob a manifest names, nothing is rewritten); where both backends can hold the same damage, the
 * same outcome on both. A damage that PostgreSQL's typed columns cannot hold (text where a number is kept, a record
 * that is not JSON) is run on the embedded log alone.
 */
import { join } from 'node:path';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { digestHex, digestOf, type Digest } from '../store/hash/digest.js';
import { isHandoffLedgerError } from '../store/errors.js';
import { decodeBase64, encodeBase64 } from '../manifests/encoding/base64.js';
import { encodeManifest } from '../manifests/format/manifest.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { openLedger } from '../src/ledger/open.js';
import type { OpenLedgerOptions } from '../src/ledger/options.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { exportBundle } from '../src/ops/export.js';
import { fsck, gc } from '../src/ops/maintenance.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = (session: string) => ({ principal: 'alice', session, run: 'r' });
const ZERO_HASH = new Uint8Array(32);
const hex12 = (n: number) => n.toString(16).padStart(12, '0');

/** What a store holds before it is damaged: four manifests, s1 at positions 0 and 2, s2 at 1 and 3, and a grant. */
interface Made {
  opts: OpenLedgerOptions;
  ids: Digest[];
  /** The summary digest of each manifest (inline blobs: every summary here is small). */
  digests: Digest[];
  /** The key that signed them. */
  keyId: string;
  /** The stored envelope at each position (the same order as ids). */
  envelopes: string[];
}

type Raw = {
  /** LevelDB: puts (a value) or deletes (undefined) under the log's keys; `read` gives a record as stored. */
  level?: (
    made: Made,
    read: (key: string) => Promise<string>,
  ) => Record<string, string | undefined> | Promise<Record<string, string | undefined>>;
  /** PostgreSQL: statements on the store's schema (`{s}` replaced by it), each with its values. */
  pg?: (made: Made) => Array<[string, unknown[]?]>;
};

type Outcomes = Record<string, string>;

interface Damage extends Raw {
  name: string;
  /** The operations that do not simply answer ('ok'), with what they give instead (the same on both backends). */
  want: Outcomes;
  /** Where PostgreSQL gives another outcome, because what it keeps differs (each says why). */
  pgDiffers?: Outcomes;
}

/** Every operation's outcome: 'ok' where `want` names none. */
const expected = (want: Outcomes, ran: Outcomes): Outcomes =>
  Object.fromEntries(Object.keys(ran).map((op) => [op, want[op] ?? 'ok']));

/** An envelope with its manifest's `run` changed, the signature kept: what a signature check refuses. */
function editedRun(envelope: string): string {
  const env = JSON.parse(envelope);
  const manifest = JSON.parse(new TextDecoder().decode(decodeBase64(env.payload)!));
  return JSON.stringify({ ...env, payload: encodeBase64(encodeManifest({ ...manifest, run: 'run-forged' })) });
}

/** An envelope with another payload type, its payload and signature kept. */
const otherPayloadType = (envelope: string): string =>
  JSON.stringify({ ...JSON.parse(envelope), payloadType: 'application/json' });

/** s1's entry at seq 1 (position 2) with `envelope` in place of its own, every other field kept. */
const s1Seq1WithEnvelope = async (read: (key: string) => Promise<string>, envelope: string) => {
  const key = `e!s1!${hex12(1)}`;
  return { [key]: JSON.stringify({ ...JSON.parse(await read(key)), envelope }) };
};

/** One damage of each record kind each backend keeps, as far as its types let it be written. */
const DAMAGES: Damage[] = [
  {
    name: 'watermark above the head',
    want: { resume: 'ROLLBACK', history: 'ROLLBACK', fsck: 'findings ROLLBACK' },
    level: () => ({ 'w!s1': '9' }),
    pg: () => [['UPDATE {s}.watermarks SET seq = 9 WHERE session = $1', ['s1']]],
  },
  {
    name: 'watermark that is no number',
    want: { resume: 'RECORD_CORRUPT', history: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT' },
    level: () => ({ 'w!s1': 'nine' }),
  },
  {
    name: 'head naming another id',
    want: { resume: 'CHAIN_BROKEN', history: 'CHAIN_BROKEN', fsck: 'findings HEAD_MISMATCH,SESSION_HEADS_ROOT' },
    level: () => ({ 'h!s1': JSON.stringify({ session: 's1', seq: 1, id: digestOf(ZERO_HASH), owner: 'alice' }) }),
    pg: () => [['UPDATE {s}.heads SET id = $2 WHERE session = $1', ['s1', digestOf(ZERO_HASH)]]],
  },
  {
    name: 'head that is not JSON',
    // s2's head stands: fsck walks its chain too (it named s2 a rollback, its chain unwalked, before).
    want: {
      resume: 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
    },
    level: () => ({ 'h!s1': '{"session' }),
  },
  {
    name: 'entry whose signed manifest was edited',
    // The edited payload is no longer the leaf the tree holds, nor the id its position record names.
    want: {
      resume: 'SIGNATURE_INVALID',
      history: 'SIGNATURE_INVALID',
      fsck: 'findings ID_POSITION_MISMATCH,SIGNATURE_INVALID,TREE_NODE_MISMATCH,TREE_ROOT',
      // Its id is not its payload's: the record is not what the log wrote, and gc does not judge by it.
      gc: 'RECORD_CORRUPT',
    },
    level: (m, read) => s1Seq1WithEnvelope(read, editedRun(m.envelopes[2]!)),
    pg: (m) => [['UPDATE {s}.entries SET envelope = $1 WHERE position = 2', [editedRun(m.envelopes[2]!)]]],
  },
  {
    name: "entry whose envelope's payload type was changed",
    want: { resume: 'PAYLOAD_TYPE', history: 'PAYLOAD_TYPE', fsck: 'findings PAYLOAD_TYPE' },
    level: (m, read) => s1Seq1WithEnvelope(read, otherPayloadType(m.envelopes[2]!)),
    pg: (m) => [['UPDATE {s}.entries SET envelope = $1 WHERE position = 2', [otherPayloadType(m.envelopes[2]!)]]],
  },
  {
    name: "entry holding another session's manifest",
    // s2's seq 1 in s1's seq 1 entry: its prev is s2's seq 0, not s1's (PREV_MISMATCH). The manifest the log committed
    // at that position is no longer stored, and so the summary it names is unknown: gc removes nothing.
    want: {
      resume: 'SCOPE_MISMATCH',
      history: 'SCOPE_MISMATCH',
      fsck: 'findings ID_POSITION_MISMATCH,PREV_MISMATCH,SCOPE_MISMATCH,TREE_NODE_MISMATCH,TREE_ROOT',
      gc: 'RECORD_CORRUPT',
    },
    level: (m, read) => s1Seq1WithEnvelope(read, m.envelopes[3]!),
    pg: () => [
      ['UPDATE {s}.entries SET envelope = (SELECT envelope FROM {s}.entries WHERE position = 3) WHERE position = 2'],
    ],
  },
  {
    name: 'first entry of a chain removed',
    want: {
      resume: 'CHAIN_BROKEN',
      history: 'CHAIN_BROKEN',
      fsck: 'findings POSITION_GAP,SEQ_NOT_ZERO',
      gc: 'RECORD_CORRUPT',
    },
    level: () => ({ [`e!s1!${hex12(0)}`]: undefined, 'p!0000000000000000': undefined }),
    pg: () => [['DELETE FROM {s}.entries WHERE position = 0']],
  },
  {
    name: 'entry whose envelope is replaced',
    want: {
      resume: 'ENVELOPE_INVALID',
      history: 'ENVELOPE_INVALID',
      fsck: 'findings ENVELOPE_INVALID',
      gc: 'RECORD_CORRUPT',
    },
    level: (m) => ({
      [`e!s1!${hex12(1)}`]: JSON.stringify({
        position: 2,
        session: 's1',
        seq: 1,
        id: m.ids[2],
        principal: 'alice',
        envelope: 'damaged',
      }),
    }),
    pg: () => [["UPDATE {s}.entries SET envelope = 'damaged' WHERE position = 2"]],
  },
  {
    name: 'entry that is not JSON',
    want: {
      resume: 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      exportBundle: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
    },
    level: () => ({ [`e!s1!${hex12(1)}`]: '{"position":2,' }),
  },
  {
    name: 'position record that names no entry',
    want: { exportBundle: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT', gc: 'RECORD_CORRUPT' },
    level: () => ({ 'p!0000000000000002': 'not a key' }),
  },
  // PostgreSQL's id index is the entries' id column, damaged with the entry (test/fsck-ids.test.ts): not the same damage.
  {
    name: 'id index naming another position',
    want: { inclusionProof: 'RECORD_CORRUPT', fsck: 'findings ID_POSITION_MISMATCH' },
    level: (m) => ({ [`i!${m.ids[1]}`]: '3' }),
  },
  {
    name: 'id index that is no number',
    want: { inclusionProof: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT' },
    level: (m) => ({ [`i!${m.ids[1]}`]: 'one' }),
  },
  {
    name: 'grant whose time is no date',
    // Refused as a grant with any other bad field: listing and fsck name it, not served as a valid grant.
    want: { grants: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT' },
    level: () => ({ 'g!bob!s1': JSON.stringify({ principal: 'bob', session: 's1', state: 'granted', at: 'never' }) }),
    pg: () => [["UPDATE {s}.grants SET at = 'never' WHERE principal = 'bob'"]],
  },
  {
    name: 'grant whose fields name another principal than its key',
    want: { grants: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT' },
    level: () => ({
      'g!bob!s1': JSON.stringify({ principal: 'mallory', session: 's1', state: 'granted', at: '2026-01-01' }),
    }),
  },
  {
    name: 'grant that is not JSON',
    want: { grants: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT' },
    level: () => ({ 'g!bob!s1': '{"principal"' }),
  },
  {
    name: 'origin that is no valid origin',
    // A diagnosing open goes on under the name trust.json lists the checkpoint key under, writing nothing: fsck names
    // the record; every operation that checks the log (or writes) refuses with it.
    want: {
      open: 'RECORD_CORRUPT',
      resume: 'RECORD_CORRUPT',
      'resume s2': 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      inclusionProof: 'RECORD_CORRUPT',
      exportBundle: 'RECORD_CORRUPT',
      grants: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
      publish: 'RECORD_CORRUPT',
    },
    level: () => ({ 'm!origin': 'has space' }),
    pg: () => [["UPDATE {s}.log_meta SET value = 'has space' WHERE key = 'origin'"]],
  },
  {
    name: 'tree node with another hash',
    want: { fsck: 'findings TREE_NODE_MISMATCH' },
    level: () => ({ 'n!00!0000000000000000': encodeBase64(ZERO_HASH) }),
    pg: () => [['UPDATE {s}.tree_nodes SET hash = $1 WHERE level = 0 AND idx = 0', [Buffer.from(ZERO_HASH)]]],
  },
  {
    name: 'tree node that is not 32 bytes',
    want: { inclusionProof: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT' },
    level: () => ({ 'n!00!0000000000000000': 'AAAA' }),
  },
  {
    name: 'frontier tree node with another hash',
    want: {
      open: 'FORK',
      resume: 'FORK',
      'resume s2': 'FORK',
      history: 'FORK',
      inclusionProof: 'FORK',
      exportBundle: 'FORK',
      grants: 'FORK',
      fsck: 'findings PIN_MISMATCH,TREE_NODE_MISMATCH,TREE_ROOT',
      gc: 'FORK',
      publish: 'FORK',
    },
    level: () => ({ 'n!02!0000000000000000': encodeBase64(ZERO_HASH) }),
    pg: () => [['UPDATE {s}.tree_nodes SET hash = $1 WHERE level = 2 AND idx = 0', [Buffer.from(ZERO_HASH)]]],
  },
  {
    name: 'tree size that is no number',
    // The tree's size, and so its head, is unknown: the record is named (as a damaged node on the tree's right edge
    // is), not taken for the empty tree, which the pinned checkpoint would call a ROLLBACK.
    want: {
      open: 'RECORD_CORRUPT',
      resume: 'RECORD_CORRUPT',
      'resume s2': 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      inclusionProof: 'RECORD_CORRUPT',
      exportBundle: 'RECORD_CORRUPT',
      grants: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
      publish: 'RECORD_CORRUPT',
    },
    level: () => ({ 'n!size': 'four' }),
  },
  {
    name: 'tree size record removed',
    // Not the empty tree (a store from before the tree holds no leaf either, and is built at open): leaf 0 is stored,
    // so the size is unknown, and named as a size that is no number is.
    want: {
      open: 'RECORD_CORRUPT',
      resume: 'RECORD_CORRUPT',
      'resume s2': 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      inclusionProof: 'RECORD_CORRUPT',
      exportBundle: 'RECORD_CORRUPT',
      grants: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
      publish: 'RECORD_CORRUPT',
    },
    level: () => ({ 'n!size': undefined }),
  },
  {
    name: 'tree size record and leaf 0 removed',
    // Leaf 0 lost with the size, later nodes kept: no store from before the tree (which holds no tree record at all,
    // and is built at open), so not built again from the entries over what is left, but named as above.
    want: {
      open: 'RECORD_CORRUPT',
      resume: 'RECORD_CORRUPT',
      'resume s2': 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      inclusionProof: 'RECORD_CORRUPT',
      exportBundle: 'RECORD_CORRUPT',
      grants: 'RECORD_CORRUPT',
      // fsck's walk of the tree finds the leaf gone as well.
      fsck: 'findings RECORD_CORRUPT,TREE_DAMAGED',
      gc: 'RECORD_CORRUPT',
      publish: 'RECORD_CORRUPT',
    },
    level: () => ({ 'n!size': undefined, [`n!00!${'0'.repeat(16)}`]: undefined }),
  },
  {
    name: 'session-heads root with another hash',
    want: {
      open: 'FORK',
      resume: 'FORK',
      'resume s2': 'FORK',
      history: 'FORK',
      inclusionProof: 'FORK',
      exportBundle: 'FORK',
      grants: 'FORK',
      fsck: 'findings PIN_MISMATCH,SESSION_HEADS_ROOT',
      gc: 'FORK',
      publish: 'FORK',
    },
    level: () => ({ 'x!000!': `i ${encodeBase64(ZERO_HASH)}` }),
    pg: () => [['UPDATE {s}.session_heads SET hash = $1 WHERE depth = 0', [Buffer.from(ZERO_HASH)]]],
  },
  {
    name: 'session-heads node that is malformed',
    // Every session's path passes the root: resume and history cannot hold a head to the index (before: ok).
    want: {
      fsck: 'findings RECORD_CORRUPT',
      publish: 'TREE_DAMAGED',
      resume: 'RECORD_CORRUPT',
      'resume s2': 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
    },
    level: () => ({ 'x!000!': 'q' }),
  },
  {
    name: 'signing key whose time is no time',
    want: { open: 'RECORD_CORRUPT', fsck: 'findings RECORD_CORRUPT', publish: 'RECORD_CORRUPT' },
    level: (m) => ({ [`k!${m.keyId}`]: JSON.stringify({ keyId: m.keyId, lastSignedAt: 'yesterday' }) }),
    pg: () => [["UPDATE {s}.signing_keys SET last_signed_at = 'yesterday'"]],
  },
  {
    name: 'inline blob size record that is wrong',
    want: {},
    level: (m) => ({ [`t!${digestHex(m.digests[0]!)}`]: JSON.stringify({ size: 1, storedAtMs: Date.now() }) }),
    pg: (m) => [['UPDATE {s}.inline_blobs SET size = 1 WHERE digest = $1', [m.digests[0]]]],
  },
  {
    name: 'inline blob size record that is not JSON',
    want: { fsck: 'findings RECORD_CORRUPT' },
    level: (m) => ({ [`t!${digestHex(m.digests[0]!)}`]: 'x' }),
  },
  {
    name: 'entry whose id is no digest',
    // gc: the record's id is not its payload's (as an entry holding another manifest): it removes nothing.
    want: {
      resume: 'CHAIN_BROKEN',
      history: 'CHAIN_BROKEN',
      fsck: 'findings HEAD_MISMATCH,ID_MISMATCH',
      gc: 'RECORD_CORRUPT',
    },
    // PostgreSQL's id index is this very column: the manifest's own id is no longer found at its position either.
    pgDiffers: { fsck: 'findings HEAD_MISMATCH,ID_MISMATCH,ID_POSITION_MISMATCH' },
    level: async (_m, read) => {
      const key = `e!s1!${hex12(1)}`;
      return { [key]: JSON.stringify({ ...JSON.parse(await read(key)), id: 'not-a-digest' }) };
    },
    pg: () => [["UPDATE {s}.entries SET id = 'not-a-digest' WHERE position = 2"]],
  },
  {
    name: 'head whose id is no digest',
    want: { resume: 'CHAIN_BROKEN', history: 'CHAIN_BROKEN', fsck: 'findings HEAD_MISMATCH,SESSION_HEADS_ROOT' },
    level: () => ({ 'h!s1': JSON.stringify({ session: 's1', seq: 1, id: 'not-a-digest', owner: 'alice' }) }),
    pg: () => [["UPDATE {s}.heads SET id = 'not-a-digest' WHERE session = 's1'"]],
  },
  {
    name: 'head whose owner is no id',
    want: { resume: 'UNAUTHORIZED', history: 'UNAUTHORIZED', fsck: 'findings OWNER_MISMATCH' },
    level: (m) => ({ 'h!s1': JSON.stringify({ session: 's1', seq: 1, id: m.ids[2], owner: 'a b' }) }),
    pg: () => [["UPDATE {s}.heads SET owner = 'a b' WHERE session = 's1'"]],
  },
  {
    name: 'head whose session is not its key',
    // As for a head that is not JSON: s2's own head stands, and its chain is walked.
    want: {
      resume: 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
    },
    level: (m) => ({ 'h!s1': JSON.stringify({ session: 's2', seq: 1, id: m.ids[2], owner: 'alice' }) }),
  },
  {
    name: 'chain renamed to a session that is no id',
    // s2's entries, head and watermark moved under the session "a b" behind the log's back: reading that chain is
    // refused INVALID_ID, which ended fsck and gc before; fsck names the head record, gc refuses, s1 is untouched.
    // The embedded store holds s2's missing head to the session-heads index, which still commits one: resume and
    // publish refuse ROLLBACK (before: none was resumed, and a publish began s2 anew); so does PostgreSQL, whose head
    // window reads the session's path with the head and whose append holds the head it extends (none) to the index.
    want: {
      'resume s2': 'ROLLBACK',
      publish: 'ROLLBACK',
      fsck: 'findings RECORD_CORRUPT,SESSION_HEADS_ROOT',
      gc: 'RECORD_CORRUPT',
    },
    level: async (_m, read) => {
      const ops: Record<string, string | undefined> = { 'h!s2': undefined, 'w!s2': undefined };
      const head = JSON.parse(await read('h!s2'));
      ops['h!a b'] = JSON.stringify({ ...head, session: 'a b' });
      ops['w!a b'] = await read('w!s2');
      for (const [seq, position] of [
        [0, 1],
        [1, 3],
      ] as const) {
        const entry = JSON.parse(await read(`e!s2!${hex12(seq)}`));
        ops[`e!s2!${hex12(seq)}`] = undefined;
        ops[`e!a b!${hex12(seq)}`] = JSON.stringify({ ...entry, session: 'a b' });
        ops[`p!${position.toString(16).padStart(16, '0')}`] = `e!a b!${hex12(seq)}`;
      }
      return ops;
    },
    pg: () => [
      [
        `WITH e AS (UPDATE {s}.entries SET session = 'a b' WHERE session = 's2' RETURNING 1),
          w AS (UPDATE {s}.watermarks SET session = 'a b' WHERE session = 's2' RETURNING 1)
        UPDATE {s}.heads SET session = 'a b' WHERE session = 's2'`,
      ],
    ],
  },
  {
    name: 'entry whose seq is not its key',
    want: {
      resume: 'RECORD_CORRUPT',
      history: 'RECORD_CORRUPT',
      exportBundle: 'RECORD_CORRUPT',
      fsck: 'findings RECORD_CORRUPT',
      gc: 'RECORD_CORRUPT',
    },
    level: (m) => ({
      [`e!s1!${hex12(1)}`]: JSON.stringify({
        position: 2,
        session: 's1',
        seq: 0,
        id: m.ids[2],
        principal: 'alice',
        envelope: '',
      }),
    }),
  },
  {
    name: 'entry whose position is not its position record',
    want: { fsck: 'findings POSITION_GAP', gc: 'RECORD_CORRUPT' },
    level: async (_m, read) => {
      const key = `e!s1!${hex12(1)}`;
      return { [key]: JSON.stringify({ ...JSON.parse(await read(key)), position: 3 }) };
    },
  },
  {
    name: 'grant whose principal is no id',
    want: {},
    level: () => ({
      'g!bob!s1': undefined,
      'g!a b!s1': JSON.stringify({ principal: 'a b', session: 's1', state: 'granted', at: '2026-01-01' }),
    }),
    pg: () => [["UPDATE {s}.grants SET principal = 'a b' WHERE principal = 'bob'"]],
  },
  {
    name: 'watermark of a session that is no id',
    // A watermark with no head: a chain removed (fsck names it as it names any).
    want: { fsck: 'findings ROLLBACK' },
    level: () => ({ 'w!a b': '3' }),
    pg: () => [["INSERT INTO {s}.watermarks (session, seq) VALUES ('a b', 3)"]],
  },
  {
    name: 'head removed',
    want: { resume: 'ROLLBACK', history: 'ROLLBACK', fsck: 'findings ROLLBACK,SESSION_HEADS_ROOT' },
    level: () => ({ 'h!s1': undefined }),
    pg: () => [["DELETE FROM {s}.heads WHERE session = 's1'"]],
  },
  {
    name: 'tree node removed',
    want: { inclusionProof: 'TREE_DAMAGED', fsck: 'findings TREE_DAMAGED' },
    // PostgreSQL counts its leaves (it keeps no tree size of its own): one fewer than its positions while the next one
    // is stored is a tree it will not grow (the embedded log's open judges its n!size so), and the store opens for fsck.
    // The embedded log keeps its size apart and appends on its right edge (the frontier and the last leaf, read at
    // open), which is intact: finding a lost leaf below it would take a scan of the leaves.
    pgDiffers: { publish: 'TREE_DAMAGED' },
    level: () => ({ 'n!00!0000000000000000': undefined }),
    pg: () => [['DELETE FROM {s}.tree_nodes WHERE level = 0 AND idx = 0']],
  },
  {
    name: 'last tree leaf removed (its parent kept)',
    // Both open for fsck and refuse appends: PostgreSQL counts one leaf fewer than its positions while a node past them
    // (the lost leaf's parent) is stored; the embedded log reads the tree's last leaf with its frontier at open.
    want: { fsck: 'findings TREE_DAMAGED', publish: 'TREE_DAMAGED' },
    level: () => ({ 'n!00!0000000000000003': undefined }),
    pg: () => [['DELETE FROM {s}.tree_nodes WHERE level = 0 AND idx = 3']],
  },
  {
    name: 'session-heads root removed',
    want: {
      open: 'FORK',
      resume: 'FORK',
      'resume s2': 'FORK',
      history: 'FORK',
      inclusionProof: 'FORK',
      exportBundle: 'FORK',
      grants: 'FORK',
      fsck: 'findings PIN_MISMATCH,SESSION_HEADS_ROOT',
      gc: 'FORK',
      publish: 'FORK',
    },
    level: () => ({ 'x!000!': undefined }),
    pg: () => [['DELETE FROM {s}.session_heads WHERE depth = 0']],
  },
  {
    name: 'signing key record removed',
    want: {},
    level: (m) => ({ [`k!${m.keyId}`]: undefined }),
    pg: () => [['DELETE FROM {s}.signing_keys']],
  },
  {
    name: 'inline blob removed',
    want: { fsck: 'findings BLOB_MISSING' },
    level: (m) => ({ [`t!${digestHex(m.digests[0]!)}`]: undefined, [`b!${digestHex(m.digests[0]!)}`]: undefined }),
    pg: (m) => [['DELETE FROM {s}.inline_blobs WHERE digest = $1', [m.digests[0]]]],
  },
];

/** Outcome of one operation: what it answered (briefly) or the code it failed with; an uncoded failure spelled out. */
async function outcome(run: () => Promise<unknown>): Promise<string> {
  try {
    const value = await run();
    return typeof value === 'string' ? value : 'ok';
  } catch (err) {
    if (isHandoffLedgerError(err)) return err.code;
    return `UNCODED ${(err as Error)?.name}: ${(err as Error)?.message}`;
  }
}

async function blobCount(ledger: Ledger): Promise<number> {
  let n = 0;
  for await (const _ of ledger.blobs.list()) n++;
  return n;
}

/** Every operation against a store damaged as `damage` says, each on the ledger one open gives (diagnose if refused). */
async function runAll(made: Made): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  let ledger: Ledger | undefined;
  out.open = await outcome(async () => {
    ledger = await openLedger(made.opts);
  });
  if (!ledger) {
    const diagnosing = await outcome(async () => {
      ledger = await openLedger({ ...made.opts, diagnose: true });
    });
    out['open (diagnose)'] = diagnosing;
    if (!ledger) return out;
  }
  const l: Ledger = ledger;
  try {
    out.resume = await outcome(() => l.resume(scope('s1')));
    out['resume s2'] = await outcome(() => l.resume(scope('s2')));
    out.history = await outcome(() => l.history(scope('s1')));
    out.inclusionProof = await outcome(() => l.inclusionProof(made.ids[1]!));
    out.exportBundle = await outcome(() => exportBundle(l, { out: join(tempDir(), 'bundle') }));
    out.grants = await outcome(() => l.grants());
    out.fsck = await outcome(async () => {
      const report = await fsck(l);
      return report.ok ? 'ok' : `findings ${[...new Set(report.findings.map((f) => f.code))].sort().join(',')}`;
    });
    const before = await blobCount(l);
    out.gc = await outcome(async () => {
      const report = await gc(l, { graceMs: 0 });
      return report.removed.length === 0 ? 'ok' : `removed ${report.removed.length}`;
    });
    expect(await blobCount(l), 'gc removed a blob').toBe(before);
    out.publish = await outcome(() => l.publish(scope('s2'), sampleSummary('after')));
  } finally {
    await l.close();
  }
  return out;
}

async function fill(opts: OpenLedgerOptions): Promise<Made> {
  const ledger = await openLedger(opts);
  try {
    const receipts = [];
    for (let i = 0; i < 4; i++) receipts.push(await ledger.publish(scope(`s${(i % 2) + 1}`), sampleSummary(i)));
    await ledger.grant('bob', 's1');
    const envelopes: string[] = [];
    for await (const e of ledger.log.entries()) envelopes[e.position] = e.envelope;
    return {
      opts,
      ids: receipts.map((r) => r.id),
      digests: receipts.map((r) => r.digest),
      keyId: ledger.keyId,
      envelopes,
    };
  } finally {
    await ledger.close();
  }
}

async function levelStore(damage: Damage): Promise<Made> {
  const root = tempDir();
  const made = await fill({ root, host: 'h1', onNotice: () => {} });
  const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
  try {
    const read = async (key: string) => (await log.raw.get(key))!;
    for (const [key, value] of Object.entries(await damage.level!(made, read))) {
      if (value === undefined) await log.raw.del(key);
      else await log.raw.put(key, value);
    }
  } finally {
    await log.close();
  }
  return made;
}

const ORIGIN_NO_ORIGIN = DAMAGES.find((d) => d.name === 'origin that is no valid origin')!;

/** Every file under `root` but the embedded log's own (LevelDB rewrites its files as it opens), with its bytes. */
function filesOf(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (path !== join(root, 'manifests-v1')) walk(path);
      } else out[path] = readFileSync(path).toString('base64');
    }
  };
  walk(root);
  return out;
}

/**
 * An origin record that is no valid origin: the open refuses it, the diagnosing one opens writing nothing (no origin,
 * no pin, no key made or listed: every file of the root as it was, the record as damaged) and fsck names the record.
 */
async function diagnoseDamagedOrigin(made: Made, storedOrigin: () => Promise<string | undefined>): Promise<void> {
  await expect(openLedger(made.opts)).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
  const root = made.opts.root!;
  const before = filesOf(root);
  const ledger = await openLedger({ ...made.opts, diagnose: true });
  try {
    const report = await fsck(ledger);
    expect(report.findings).toEqual([
      { code: 'RECORD_CORRUPT', message: expect.stringContaining(`origin record "has space"`) },
    ]);
    await expect(ledger.grant('carol', 's1')).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
  } finally {
    await ledger.close();
  }
  expect(filesOf(root)).toEqual(before);
  expect(await storedOrigin()).toBe('has space');
  // Its keys are what trust.json lists under that name, or it does not open: a key file lost is not made anew (nor
  // listed), the host's or the checkpoint key's; a key a rotation staged is not installed. Refused with the damage.
  const keys = join(root, 'keys');
  for (const name of readdirSync(keys).filter((n) => n.endsWith('.jwk'))) {
    const path = join(keys, name);
    const held = readFileSync(path);
    rmSync(path);
    const without = filesOf(root);
    await expect(openLedger({ ...made.opts, diagnose: true }), name).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
    expect(filesOf(root), name).toEqual(without);
    writeFileSync(`${path}.next`, held, { mode: 0o600 });
    const staged = filesOf(root);
    await expect(openLedger({ ...made.opts, diagnose: true }), `${name}.next`).rejects.toMatchObject({
      code: 'RECORD_CORRUPT',
    });
    expect(filesOf(root), `${name}.next`).toEqual(staged);
    renameSync(`${path}.next`, path);
  }
  expect(filesOf(root)).toEqual(before);
}

const GRANT_TIME_NO_DATE = DAMAGES.find((d) => d.name === 'grant whose time is no date')!;

/** What the grantee (bob, granted s1) gets from resume, publish and checkPublish in s1 and what the store's grant lists give. */
async function granteeOutcomes(made: Made): Promise<Outcomes> {
  const ledger = await openLedger(made.opts);
  try {
    const bob = { principal: 'bob', session: 's1', run: 'r' };
    return {
      resume: await outcome(() => ledger.resume(bob)),
      publish: await outcome(() => ledger.publish(bob, sampleSummary('bob'))),
      grant: await outcome(async () => JSON.stringify(await ledger.log.grants.get('bob', 's1'))),
      list: await outcome(() => ledger.log.grants.list({ principal: 'bob' })),
    };
  } finally {
    await ledger.close();
  }
}

/** A grant with a time that is no date grants nothing: every read of it refuses it, as a grant with another bad field. */
const GRANTEE_REFUSED: Outcomes = {
  resume: 'RECORD_CORRUPT',
  publish: 'RECORD_CORRUPT',
  grant: 'RECORD_CORRUPT',
  list: 'RECORD_CORRUPT',
};

/** fsck's findings on a diagnosing open of the store. */
/**
 * A store from before the tree, s1's seq 1 (position 2 of 0–3) lost: it opens over the tree of the two entries before
 * it, resumes s2, refuses appends naming the position, and fsck finds what it finds in the store that had its tree.
 */
async function expectOpenOverTreeBeforeGap(made: Made, withTree: unknown[]): Promise<void> {
  const ledger = await openLedger(made.opts);
  try {
    expect((await ledger.log.treeHead()).size).toBe(2);
    await expect(ledger.resume(scope('s2'))).resolves.toBeDefined();
    await expect(ledger.publish(scope('s2'), sampleSummary('after'))).rejects.toMatchObject({
      code: 'TREE_DAMAGED',
      message: expect.stringContaining('global position 2 holds no entry (the next entry is at 3)'),
    });
  } finally {
    await ledger.close();
  }
  expect(await diagnosedFindings(made)).toEqual(withTree);
}

const diagnosedFindings = async (made: Made) => {
  const ledger = await openLedger({ ...made.opts, diagnose: true });
  try {
    return (await fsck(ledger)).findings;
  } finally {
    await ledger.close();
  }
};

describe('damaged records of the embedded store', () => {
  it('an origin record that is no valid origin: fsck runs on a diagnosing open, which writes nothing', async () => {
    const made = await levelStore(ORIGIN_NO_ORIGIN);
    await diagnoseDamagedOrigin(made, async () => {
      const log = await LevelManifestLog.open(join(made.opts.root!, 'manifests-v1'));
      try {
        return await log.raw.get('m!origin');
      } finally {
        await log.close();
      }
    });
  });

  it.each([
    ['that is no number', 'tree size that is no number', 'n!size is corrupt: not a decimal count', []],
    ['removed', 'tree size record removed', "n!size (the tree's size) is missing", []],
    [
      'removed with leaf 0',
      'tree size record and leaf 0 removed',
      `n!size (the tree's size) and n!00!${'0'.repeat(16)} (leaf 0) are missing, while other tree records are stored (n!00!`,
      [{ code: 'TREE_DAMAGED', message: 'tree node 0/0 is missing' }],
    ],
  ])(
    'a tree size record %s is named by the refused open and by fsck, not called a rollback',
    async (_, name, says, more) => {
      const made = await levelStore(DAMAGES.find((d) => d.name === name)!);
      await expect(openLedger(made.opts)).rejects.toMatchObject({
        code: 'RECORD_CORRUPT',
        message: expect.stringContaining(says),
      });
      const ledger = await openLedger({ ...made.opts, diagnose: true });
      try {
        const report = await fsck(ledger);
        expect(report.findings).toEqual([...more, { code: 'RECORD_CORRUPT', message: expect.stringContaining(says) }]);
      } finally {
        await ledger.close();
      }
    },
  );

  it('a grant whose time is no date is not served as a grant: its grantee is refused (RECORD_CORRUPT)', async () => {
    expect(await granteeOutcomes(await levelStore(GRANT_TIME_NO_DATE))).toEqual(GRANTEE_REFUSED);
  });

  /** A store damaged as `damage` says, then as the version before the tree wrote it: no tree, id or session-heads records, no pin. */
  async function levelStoreBeforeTree(damage: Damage): Promise<Made> {
    const made = await levelStore(damage);
    const log = await LevelManifestLog.open(join(made.opts.root!, 'manifests-v1'));
    try {
      const later: string[] = [];
      for await (const key of log.raw.keys()) if (/^(?:n!|i!|x!|m!session-heads$)/.test(key)) later.push(key);
      await log.raw.batch(later.map((key) => ({ type: 'del' as const, key })));
    } finally {
      await log.close();
    }
    rmSync(join(made.opts.root!, 'checkpoints'), { recursive: true });
    return made;
  }

  it('an entry lost from a store made before the tree: both opens go on over the tree of the entries before it, fsck names it as in a store with its tree, appends are refused', async () => {
    // s1's seq 1, at position 2 (of 0–3), entry and position record.
    const lost = {
      name: 'entry lost',
      want: {},
      level: () => ({ [`e!s1!${hex12(1)}`]: undefined, 'p!0000000000000002': undefined }),
    };
    const withTree = await diagnosedFindings(await levelStore(lost));
    expect(withTree.map((f) => f.code).sort()).toEqual(['HEAD_MISMATCH', 'POSITION_GAP', 'POSITION_GAP']);
    await expectOpenOverTreeBeforeGap(await levelStoreBeforeTree(lost), withTree);
  });

  it("the last entry's record lost from a store made before the tree, its position record kept: appends are refused, not built on a tree a leaf short", async () => {
    // s2's seq 1, at position 3 (the last): the entries listed end before the position records do.
    const made = await levelStoreBeforeTree({
      name: 'last entry lost',
      want: {},
      level: () => ({ [`e!s2!${hex12(1)}`]: undefined }),
    });
    const ledger = await openLedger(made.opts);
    try {
      expect((await ledger.log.treeHead()).size).toBe(3);
      // An append at position 4 would be leaf 3 of the tree, and the next open would add it again as leaf 4.
      await expect(ledger.publish(scope('s1'), sampleSummary('after'))).rejects.toMatchObject({
        code: 'TREE_DAMAGED',
        message: expect.stringContaining('global position 3 holds no entry'),
      });
    } finally {
      await ledger.close();
    }
    expect((await diagnosedFindings(made)).map((f) => [f.code, f.session])).toEqual([['HEAD_MISMATCH', 's2']]);
  });

  it.each(DAMAGES.filter((d) => !d.pg).map((d) => [d.name, d] as const))(
    '%s: every operation gives its answer or a coded error',
    async (_name, damage) => {
      const results = await runAll(await levelStore(damage));
      for (const [op, result] of Object.entries(results)) expect(result, op).not.toMatch(/^UNCODED/);
      expect(results).toEqual(expected(damage.want, results));
    },
  );
});

describePostgres('damaged records of both stores', (pg) => {
  let schemas = 0;
  const nextSchema = () => `dmg${process.pid}_${schemas++}`;

  async function pgStore(damage: Damage): Promise<Made> {
    const schema = nextSchema();
    const root = mkdtempSync(join(tmpdir(), 'hl-dmg-'));
    const made = await fill({
      root,
      host: 'h1',
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
    });
    for (const [text, values] of damage.pg!(made))
      await sqlOn(pg.connectionString, text.replaceAll('{s}', `"${schema}"`), values);
    return made;
  }

  it('an origin record that is no valid origin: fsck runs on a diagnosing open of PostgreSQL, which writes nothing', async () => {
    const made = await pgStore(ORIGIN_NO_ORIGIN);
    const { schema } = made.opts.postgres!;
    await diagnoseDamagedOrigin(made, async () => {
      const rows = await sqlOn<{ value: string }>(
        pg.connectionString,
        `SELECT value FROM "${schema}".log_meta WHERE key = 'origin'`,
      );
      return rows[0]?.value;
    });
    // A host whose root lists no checkpoint key of this log has no name to go on under without listing one: refused.
    const other = { ...made.opts, root: mkdtempSync(join(tmpdir(), 'hl-dmg-')), host: 'h2', diagnose: true };
    await expect(openLedger(other)).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
    expect(filesOf(other.root)).toEqual({});
  });

  it('a middle entry of a chain removed: SEQ_GAP from fsck, CHAIN_BROKEN from resume and history, on both stores', async () => {
    const chainOfThree = async (opts: OpenLedgerOptions) => {
      const ledger = await openLedger(opts);
      try {
        for (let i = 0; i < 3; i++) await ledger.publish(scope('s1'), sampleSummary(i));
      } finally {
        await ledger.close();
      }
    };
    const outcomes = async (opts: OpenLedgerOptions) => {
      const ledger = await openLedger(opts);
      try {
        const report = await fsck(ledger);
        return {
          resume: await outcome(() => ledger.resume(scope('s1'))),
          history: await outcome(() => ledger.history(scope('s1'))),
          gap: report.findings.filter((f) => f.code === 'SEQ_GAP').map((f) => [f.session, f.seq]),
        };
      } finally {
        await ledger.close();
      }
    };
    const want = { resume: 'CHAIN_BROKEN', history: 'CHAIN_BROKEN', gap: [['s1', 2]] };
    const root = tempDir();
    await chainOfThree({ root, host: 'h1', onNotice: () => {} });
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    try {
      await log.raw.batch([
        { type: 'del', key: `e!s1!${hex12(1)}` },
        { type: 'del', key: 'p!0000000000000001' },
      ]);
    } finally {
      await log.close();
    }
    expect(await outcomes({ root, host: 'h1', onNotice: () => {} })).toEqual(want);
    const schema = nextSchema();
    const opts = {
      root: mkdtempSync(join(tmpdir(), 'hl-dmg-')),
      host: 'h1',
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
    };
    await chainOfThree(opts);
    await sqlOn(pg.connectionString, `DELETE FROM "${schema}".entries WHERE position = 1`);
    expect(await outcomes(opts)).toEqual(want);
  });

  /**
   * A store damaged as `damage` says, then as a schema migrated from before the tree (versions 1 and 2) holds it at
   * its first open after the migration: no tree or session-heads rows, no pin.
   */
  async function pgStoreBeforeTree(damage: Damage): Promise<Made> {
    const made = await pgStore(damage);
    const s = `"${made.opts.postgres!.schema}"`;
    await sqlOn(
      pg.connectionString,
      `DELETE FROM ${s}.tree_nodes; DELETE FROM ${s}.session_heads; DELETE FROM ${s}.log_meta WHERE key = 'session-heads'`,
    );
    rmSync(join(made.opts.root!, 'checkpoints'), { recursive: true });
    return made;
  }

  /**
   * The entry at `position` removed as the embedded tests remove it: a head's entry too, past the heads' foreign key
   * (as a restore with triggers disabled, or a session with them off, loses it).
   */
  const entryLost = (position: number): Damage => ({
    name: `entry at ${position} lost`,
    want: {},
    pg: () => [[`SET session_replication_role = replica; DELETE FROM {s}.entries WHERE position = ${position}`]],
  });

  it('an entry lost from a store migrated from before the tree: both opens go on over the tree of the entries before it, fsck names it as in a store with its tree, appends are refused', async () => {
    // s1's seq 1, at position 2 (of 0–3): its head's entry, as in the embedded store's test.
    const withTree = await diagnosedFindings(await pgStore(entryLost(2)));
    expect(withTree.map((f) => f.code).sort()).toEqual(['HEAD_MISMATCH', 'POSITION_GAP', 'POSITION_GAP']);
    await expectOpenOverTreeBeforeGap(await pgStoreBeforeTree(entryLost(2)), withTree);
  });

  it('the last entry lost from a store migrated from before the tree, the counter past it: it opens over the tree of the entries before it, appends are refused naming the position (checkPublish too), fsck names the lost head entry only', async () => {
    // s2's seq 1, at position 3 (the last): the entries end before the counter does, which the tree head took as its
    // size (a node of a tree of 4 missing: the open refused, and fsck named that node).
    const made = await pgStoreBeforeTree(entryLost(3));
    const ledger = await openLedger(made.opts);
    try {
      expect((await ledger.log.treeHead()).size).toBe(3);
      // An append at position 4 would need leaf 3 of the tree: refused by checkPublish too (compact's check before it
      // asks the model), as by the append, in words that name the position.
      const refusal = {
        code: 'TREE_DAMAGED',
        message: expect.stringContaining(
          "global position 3 holds no entry (the log's counter gave out positions to 3)",
        ),
      };
      await expect(ledger.checkPublish(scope('s1'))).rejects.toMatchObject(refusal);
      await expect(ledger.publish(scope('s1'), sampleSummary('after'))).rejects.toMatchObject(refusal);
    } finally {
      await ledger.close();
    }
    expect((await diagnosedFindings(made)).map((f) => [f.code, f.session])).toEqual([['HEAD_MISMATCH', 's2']]);
  });

  it('a grant whose time is no date is not served as a grant on PostgreSQL either (RECORD_CORRUPT)', async () => {
    expect(await granteeOutcomes(await pgStore(GRANT_TIME_NO_DATE))).toEqual(GRANTEE_REFUSED);
  });

  it.each(DAMAGES.filter((d) => d.pg).map((d) => [d.name, d] as const))(
    '%s: the same outcome on both backends, each coded',
    async (_name, damage) => {
      const level = await runAll(await levelStore(damage));
      const postgres = await runAll(await pgStore(damage));
      for (const [op, result] of Object.entries({ ...level, ...postgres })) expect(result, op).not.toMatch(/^UNCODED/);
      expect(level).toEqual(expected(damage.want, level));
      expect(postgres).toEqual(expected({ ...damage.want, ...damage.pgDiffers }, postgres));
    },
  );
});
