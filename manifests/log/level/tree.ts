/**
 * The Merkle tree's records in the LevelDB log (manifests/tlog/tree.ts says which nodes exist):
 *
 *   n!<level:2 hex>!<index:16 hex>   node hash (base64)     n!size   leaves in the tree (decimal)
 *   i!<manifest id>                  global position        m!origin the log's checkpoint origin
 *
 * They are written in the append's own batch, so the tree always covers exactly the committed entries.
 */
import type { Level } from 'level';
import { encodeBase64 } from '../../encoding/base64.js';
import { throwIfAborted } from '../../../store/errors.js';
import { ManifestError } from '../../errors.js';
import { leafOfEnvelope } from '../../tlog/leaf.js';
import { appendLeaves, frontierOf, type NodeId, type TreeNode } from '../../tlog/tree.js';
import type { LogEntry } from '../log.js';
import { parseCountRecord, parseTreeNodeRecord } from './records.js';
import { storageFailed, writeSyncedBatch } from './tables.js';

export const TREE_SIZE_KEY = 'n!size';
export const ORIGIN_KEY = 'm!origin';
export const nodeKey = (id: NodeId) =>
  `n!${id.level.toString(16).padStart(2, '0')}!${id.index.toString(16).padStart(16, '0')}`;
export const idKey = (id: string) => `i!${id}`;

export type Put = { type: 'put'; key: string; value: string };

/**
 * Node hashes by id. @throws ManifestError `TREE_DAMAGED` when one is missing, `RECORD_CORRUPT` (naming the record)
 * when one is not 32 bytes in base64, `STORAGE_FAILED` (naming the read) when the storage fails
 */
export async function readNodes(db: Level<string, string>, ids: NodeId[]): Promise<Uint8Array[]> {
  const keys = ids.map(nodeKey);
  let raws: Array<string | undefined>;
  try {
    raws = ids.length === 0 ? [] : await db.getMany(keys);
  } catch (err) {
    throw storageFailed('tree node read', err);
  }
  return raws.map((raw, i) => {
    if (raw === undefined)
      throw new ManifestError('TREE_DAMAGED', `tree node ${ids[i]!.level}/${ids[i]!.index} is missing`);
    return parseTreeNodeRecord(keys[i]!, raw);
  });
}

/**
 * The tree's size. No `n!size` record is the empty tree only while no tree record is stored either (a new store, or one
 * from before the tree, which open then builds): every batch writes the record with its nodes, so one missing beside
 * leaf 0, or beside any other node, was lost, and the size is unknown — not 0, which a pinned checkpoint would take for
 * a rollback. A read or two more, made only when the record is missing.
 * @throws ManifestError `RECORD_CORRUPT` when `n!size` is not a decimal count, or is missing while leaf 0 (or, leaf 0
 *   missing too, another tree node) is stored
 */
export async function readTreeSize(db: Level<string, string>): Promise<number> {
  const raw = await db.get(TREE_SIZE_KEY);
  if (raw !== undefined) return parseCountRecord(TREE_SIZE_KEY, raw);
  const leaf0 = nodeKey({ level: 0, index: 0 });
  if ((await db.get(leaf0)) !== undefined)
    throw new ManifestError(
      'RECORD_CORRUPT',
      `manifest log record ${TREE_SIZE_KEY} (the tree's size) is missing, while the tree's leaves are stored: the ` +
        "tree's size is unknown; restore the record from a backup",
    );
  // Leaf 0 lost too: a store from before the tree holds no tree record at all, so any other node (a later leaf, an
  // inner node) says the tree was there, of a size no record tells. Building it again from the entries would hide
  // the loss (and a larger tree's, which the pinned checkpoint would no longer see). One seek more, only here.
  const [other] = await db.keys({ gte: 'n!', lt: 'n!\xff', limit: 1 }).all();
  if (other !== undefined)
    throw new ManifestError(
      'RECORD_CORRUPT',
      `manifest log records ${TREE_SIZE_KEY} (the tree's size) and ${leaf0} (leaf 0) are missing, while other ` +
        `tree records are stored (${other}): the tree's size is unknown; restore the records from a backup`,
    );
  return 0;
}

/**
 * The frontier of a tree of `size` leaves (the nodes its root is folded from, which appends build on), read at open
 * with the tree's last leaf in the same read (no read more per append). A last leaf lost while its parent is kept
 * leaves that frontier intact (an even size holds no leaf in it), and appends would go on over the hole; PostgreSQL's
 * open, which counts its leaves, refuses them. Here it is named as a missing node of the frontier is.
 * @throws ManifestError `TREE_DAMAGED` / `RECORD_CORRUPT` as `readNodes`
 */
export async function loadFrontier(db: Level<string, string>, size: number): Promise<TreeNode[]> {
  const ids = frontierOf(size);
  const lastLeaf: NodeId[] = size > 0 && ids.at(-1)!.level !== 0 ? [{ level: 0, index: size - 1 }] : [];
  const hashes = await readNodes(db, [...ids, ...lastLeaf]);
  return ids.map((id, i) => ({ ...id, hash: hashes[i]! }));
}

/**
 * Adds the entries at positions ≥ the tree's size to the tree (stores written before the tree existed), in
 * batches; each batch is synced, so an interruption resumes where it stopped. An entry lost from the store (its
 * position holds none, or the entry listed next is at another position) ends the tree before it: the entries before
 * it are added, and `gap` says where it stopped (no leaf can be made for an entry that is not there, and none after
 * it would be at its position). The caller opens the store with that damage (appends refused, fsck names the gap); a
 * later open, the entry restored, goes on from that size.
 * @param signal looked at before each entry is taken: once it aborts, `CANCELLED` (the signal's reason as the
 *   cause), the batches written before it kept whole with their size, the entries taken since dropped unwritten; the
 *   next open goes on from that size
 */
export async function backfillTree(
  db: Level<string, string>,
  entries: AsyncIterable<LogEntry>,
  state: { frontier: TreeNode[]; size: number },
  signal?: AbortSignal,
): Promise<{ frontier: TreeNode[]; size: number; gap?: string | undefined }> {
  let pending: Array<{ id: string; position: number; leaf: Uint8Array }> = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const next = treePuts(state.frontier, state.size, pending, (id) => db.getSync(idKey(id)) !== undefined);
    await writeSyncedBatch(db, next.puts);
    state = { frontier: next.frontier, size: next.size };
    pending = [];
  };
  for await (const e of entries) {
    throwIfAborted(signal, ManifestError);
    const expected = state.size + pending.length;
    if (e.position !== expected) {
      await flush();
      return {
        ...state,
        gap:
          e.position > expected
            ? `global position ${expected} holds no entry (the next entry is at ${e.position}): the tree was built from the entries before it only`
            : `the entry listed after global position ${expected - 1} is at ${e.position}: the tree was built from the entries before it only`,
      };
    }
    pending.push({ id: e.id, position: e.position, leaf: leafOfEnvelope(e.envelope) });
    if (pending.length === 1000) await flush();
  }
  await flush();
  return state;
}

/**
 * The puts that add `entries` (consecutive, from position `size`) to the tree, and the new frontier. An id that an
 * earlier entry of `entries` has, or that `hasRecord` says is stored already (at a lower position: the log grows only
 * upwards), keeps that record. The backfill asks (it runs once, over entries a caller may have appended twice); the
 * append does not (a LevelDB get per append costs more than the rule is worth: see the append), so an id appended
 * again in a later batch takes its latest position (ManifestLog.positionOf). The ledger appends each id once.
 */
export function treePuts(
  frontier: TreeNode[],
  size: number,
  entries: Array<{ id: string; position: number; leaf: Uint8Array }>,
  hasRecord: (id: string) => boolean = () => false,
): { puts: Put[]; frontier: TreeNode[]; size: number } {
  const grown = appendLeaves(
    frontier,
    size,
    entries.map((e) => e.leaf),
  );
  const puts: Put[] = grown.nodes.map((n) => ({ type: 'put', key: nodeKey(n), value: encodeBase64(n.hash) }));
  const recorded = new Set<string>();
  for (const e of entries) {
    if (recorded.has(e.id) || hasRecord(e.id)) continue;
    recorded.add(e.id);
    puts.push({ type: 'put', key: idKey(e.id), value: String(e.position) });
  }
  puts.push({ type: 'put', key: TREE_SIZE_KEY, value: String(grown.size) });
  return { puts, frontier: grown.frontier, size: grown.size };
}
