/**
 * fsck of the Merkle tree: rebuilds it from the log's entries in global order and compares every stored
 * node, the size and the root. The tree is never trusted to describe the entries: an entry removed,
 * changed or reordered under it shows here. The same walk gives each leaf's manifest id to the check of the id →
 * position records (fsck-ids.ts), so the log is read once for both.
 */
import { throwIfCancelled } from '../errors.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { isTreeDamage } from '../../manifests/errors.js';
import { equalBytes } from '../../manifests/tlog/merkle.js';
import { leafOfEnvelope } from '../../manifests/tlog/leaf.js';
import { appendLeaves, rootOf, type TreeNode } from '../../manifests/tlog/tree.js';
import type { FsckFinding } from './maintenance.js';
import type { LeafIds } from './fsck-ids.js';

const BATCH = 1024;

/** `ids`: told every leaf in order, and `complete` once the walk reached the end of the log. */
export async function fsckTree(log: ManifestLog, signal?: AbortSignal, ids?: LeafIds): Promise<FsckFinding[]> {
  const findings: FsckFinding[] = [];
  let frontier: TreeNode[] = [];
  let size = 0;
  let pending: Uint8Array[] = [];
  let mismatches = 0;
  const compare = async () => {
    const grown = appendLeaves(frontier, size, pending);
    let stored: Uint8Array[];
    try {
      stored = await log.treeNodes(grown.nodes);
    } catch (err) {
      if (!isTreeDamage(err)) throw err;
      findings.push({ code: err.code, message: err.message });
      stored = [];
    }
    grown.nodes.forEach((n, i) => {
      if (stored[i] && !equalBytes(stored[i]!, n.hash) && mismatches++ < 100)
        findings.push({
          code: 'TREE_NODE_MISMATCH',
          message: `stored tree node ${n.level}/${n.index} is not the hash of the entries it covers`,
        });
    });
    ({ frontier, size } = grown);
    pending = [];
  };
  for await (const entry of log.entries()) {
    throwIfCancelled(signal);
    const expected = size + pending.length;
    if (entry.position !== expected) {
      const missing =
        entry.position - 1 > expected
          ? `global positions ${expected}–${entry.position - 1} hold`
          : `global position ${expected} holds`;
      findings.push({
        code: 'POSITION_GAP',
        message:
          entry.position > expected
            ? `${missing} no entry (the next entry is at ${entry.position})`
            : `the entry listed after global position ${expected - 1} is at ${entry.position}`,
      });
      return findings;
    }
    let leaf: Uint8Array;
    try {
      leaf = leafOfEnvelope(entry.envelope);
    } catch (err) {
      findings.push({
        code: 'ENVELOPE_INVALID',
        session: entry.session,
        seq: entry.seq,
        message: (err as Error).message,
      });
      return findings;
    }
    pending.push(leaf);
    ids?.add(leaf);
    if (pending.length === BATCH) await compare();
  }
  if (ids) ids.complete = true;
  await compare();
  let head: Awaited<ReturnType<ManifestLog['treeHead']>>;
  try {
    head = await log.treeHead();
  } catch (err) {
    // A node on the tree's right edge, which the root is folded from, that cannot be read: named once.
    if (!isTreeDamage(err)) throw err;
    if (!findings.some((f) => f.code === err.code && f.message === err.message))
      findings.push({ code: err.code, message: err.message });
    return findings;
  }
  if (head.size !== size)
    findings.push({ code: 'TREE_SIZE', message: `the tree has ${head.size} leaves, the log ${size} entries` });
  else if (!equalBytes(head.root, rootOf(frontier)))
    findings.push({ code: 'TREE_ROOT', message: 'the stored tree root is not the root of the entries' });
  return findings;
}
