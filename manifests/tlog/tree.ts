/**
 * The stored Merkle tree: which node hashes a log keeps, how an append extends them, and which stored
 * nodes a proof needs. A log stores every perfect subtree's hash at (level, index) — the subtree over
 * leaves [index·2^level, (index+1)·2^level) — so an append writes the new leaf and the at most log2(n)
 * subtrees it completes, and any RFC 6962 proof is a fold over O(log n) stored nodes. Isomorphic.
 */
import { EMPTY_ROOT, leafHash, nodeHash } from './merkle.js';

/** A perfect subtree: leaves [index·2^level, (index+1)·2^level). */
export interface NodeId {
  level: number;
  index: number;
}

export interface TreeNode extends NodeId {
  hash: Uint8Array;
}

/** A tree's size and RFC 6962 root. */
export interface TreeHead {
  size: number;
  root: Uint8Array;
}

/** Reads stored node hashes; a backend throws when one is missing (the tree is damaged). */
export type NodeReader = (ids: NodeId[]) => Promise<Uint8Array[]>;

/**
 * The maximal perfect subtrees that make up the leaf range [start, end), left to right. For the ranges RFC
 * 6962 proofs use (start aligned to the largest power of two below end − start) their right fold is MTH.
 */
export function rangeNodes(start: number, end: number): NodeId[] {
  const out: NodeId[] = [];
  while (start < end) {
    let level = 0;
    while (start % 2 ** (level + 1) === 0 && start + 2 ** (level + 1) <= end) level++;
    out.push({ level, index: start / 2 ** level });
    start += 2 ** level;
  }
  return out;
}

/** The subtrees whose hashes make up a tree of `size` leaves (its "frontier"), largest first. */
export const frontierOf = (size: number): NodeId[] => rangeNodes(0, size);

/** Right fold of subtree hashes (largest first) into the root; the empty tree's root is SHA-256(""). */
export function foldRight(hashes: Uint8Array[]): Uint8Array {
  if (hashes.length === 0) return EMPTY_ROOT;
  let root = hashes[hashes.length - 1]!;
  for (let i = hashes.length - 2; i >= 0; i--) root = nodeHash(hashes[i]!, root);
  return root;
}

/**
 * Appends leaves (their exact bytes) to a tree given by its frontier. Returns every node to store (the
 * leaves' hashes and each subtree they complete) and the new frontier; the caller writes the nodes in the
 * same atomic batch or transaction as the entries.
 */
export function appendLeaves(
  frontier: TreeNode[],
  size: number,
  leaves: Uint8Array[],
): { nodes: TreeNode[]; frontier: TreeNode[]; size: number } {
  return appendLeafHashes(frontier, size, leaves.map(leafHash));
}

/** As appendLeaves, for leaves whose hashes are already known (an auditor folding a bundle). */
export function appendLeafHashes(
  frontier: TreeNode[],
  size: number,
  hashes: Uint8Array[],
): { nodes: TreeNode[]; frontier: TreeNode[]; size: number } {
  const stack = frontier.slice();
  const nodes: TreeNode[] = [];
  for (const hash of hashes) {
    let node: TreeNode = { level: 0, index: size++, hash };
    nodes.push(node);
    while (stack.length > 0 && stack[stack.length - 1]!.level === node.level) {
      const left = stack.pop()!;
      node = { level: node.level + 1, index: left.index / 2, hash: nodeHash(left.hash, node.hash) };
      nodes.push(node);
    }
    stack.push(node);
  }
  return { nodes, frontier: stack, size };
}

export function rootOf(frontier: TreeNode[]): Uint8Array {
  return foldRight(frontier.map((n) => n.hash));
}

/** The largest power of two below `n` (n ≥ 2), exactly: `Math.log2` rounds up just under 2^k for k ≥ 49. */
function largestPowerBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** RFC 6962 section 2.1.1 PATH(m, D[start:end]), as the leaf ranges whose MTH are the proof's hashes. */
function pathRanges(m: number, start: number, end: number, out: Array<[number, number]>): void {
  const n = end - start;
  if (n <= 1) return;
  const k = largestPowerBelow(n);
  if (m < k) {
    pathRanges(m, start, start + k, out);
    out.push([start + k, end]);
  } else {
    pathRanges(m - k, start + k, end, out);
    out.push([start, start + k]);
  }
}

/** RFC 6962 section 2.1.2 SUBPROOF(m, D[start:end], b), as leaf ranges. */
function subproofRanges(m: number, start: number, end: number, b: boolean, out: Array<[number, number]>): void {
  const n = end - start;
  if (m === n) {
    if (!b) out.push([start, end]);
    return;
  }
  const k = largestPowerBelow(n);
  if (m <= k) {
    subproofRanges(m, start, start + k, b, out);
    out.push([start + k, end]);
  } else {
    subproofRanges(m - k, start + k, end, false, out);
    out.push([start, start + k]);
  }
}

/** Leaf ranges of the inclusion proof of leaf `index` in the tree of `size` leaves. */
export function inclusionRanges(index: number, size: number): Array<[number, number]> {
  if (!(index >= 0 && index < size)) throw new RangeError(`leaf ${index} is not in a tree of ${size}`);
  const out: Array<[number, number]> = [];
  pathRanges(index, 0, size, out);
  return out;
}

/** Leaf ranges of the consistency proof from size `m` to size `n` (empty when m is 0 or m = n). */
export function consistencyRanges(m: number, n: number): Array<[number, number]> {
  if (!(m >= 0 && m <= n)) throw new RangeError(`no consistency proof from ${m} to ${n}`);
  const out: Array<[number, number]> = [];
  if (m > 0 && m < n) subproofRanges(m, 0, n, true, out);
  return out;
}

/** The MTH of each leaf range, from stored nodes, in one read. */
export async function hashRanges(ranges: Array<[number, number]>, read: NodeReader): Promise<Uint8Array[]> {
  const parts = ranges.map(([s, e]) => rangeNodes(s, e));
  const ids: NodeId[] = [];
  const slot = new Map<string, number>();
  for (const p of parts)
    for (const id of p) {
      const key = `${id.level}/${id.index}`;
      if (!slot.has(key)) slot.set(key, ids.push(id) - 1);
    }
  const hashes = ids.length === 0 ? [] : await read(ids);
  return parts.map((p) => foldRight(p.map((id) => hashes[slot.get(`${id.level}/${id.index}`)!]!)));
}

/** The tree head for `size` from stored nodes (any size up to the stored one). */
export async function treeHeadAt(size: number, read: NodeReader): Promise<TreeHead> {
  const [root] = size === 0 ? [EMPTY_ROOT] : await hashRanges([[0, size]], read);
  return { size, root: root! };
}
