import { createHash } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeBase64, encodeBase64 } from '../../manifests/encoding/base64.js';
import {
  EMPTY_ROOT,
  leafHash,
  nodeHash,
  rootFromInclusionProof,
  verifyConsistency,
  verifyInclusion,
} from '../../manifests/tlog/merkle.js';
import {
  appendLeaves,
  consistencyRanges,
  hashRanges,
  inclusionRanges,
  rootOf,
  type NodeId,
  type TreeNode,
} from '../../manifests/tlog/tree.js';
import { readVector, VECTORS_DIR } from '../support/vectors.js';

interface InclusionVector {
  leafIdx: number;
  treeSize: number;
  root: string;
  leafHash: string;
  proof: string[] | null;
  desc: string;
  wantErr: boolean;
}
interface ConsistencyVector {
  size1: number;
  size2: number;
  root1: string;
  root2: string;
  proof: string[] | null;
  desc: string;
  wantErr: boolean;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

// The vectors' base64 is Go's: an empty string is an empty byte slice.
const bytes = (b64: string) => (b64 === '' ? new Uint8Array(0) : (decodeBase64(b64) ?? new Uint8Array(0)));

/** RFC 6962 section 2.1 MTH, written straight from the definition, as the reference for the stored tree. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return EMPTY_ROOT;
  if (leaves.length === 1) return leafHash(leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

/** The RFC 6962 reference leaves (transparency-dev/merkle testonly). */
const REF_LEAVES = [
  '',
  '00',
  '10',
  '2021',
  '3031',
  '40414243',
  '5051525354555657',
  '606162636465666768696a6b6c6d6e6f',
].map((h) => Uint8Array.from(Buffer.from(h, 'hex')));

function storedTree(leaves: Uint8Array[]) {
  const store = new Map<string, Uint8Array>();
  let frontier: TreeNode[] = [];
  let size = 0;
  // One leaf at a time and in uneven groups: a group commit must store the same nodes as single appends.
  for (let i = 0; i < leaves.length;) {
    const n = Math.min(leaves.length - i, (i % 3) + 1);
    const r = appendLeaves(frontier, size, leaves.slice(i, i + n));
    for (const node of r.nodes) store.set(`${node.level}/${node.index}`, node.hash);
    frontier = r.frontier;
    size = r.size;
    i += n;
  }
  const read = async (ids: NodeId[]) =>
    ids.map((id) => {
      const h = store.get(`${id.level}/${id.index}`);
      if (!h) throw new Error(`node ${id.level}/${id.index} not stored`);
      return h;
    });
  return { frontier, size, read, store };
}

describe('RFC 6962 proof verification', () => {
  const root = join(VECTORS_DIR, 'merkle');
  const inclusion = files(join(root, 'inclusion'));
  const consistency = files(join(root, 'consistency'));

  it('has the transparency-dev/merkle vectors', () => {
    expect(inclusion.length).toBe(98);
    expect(consistency.length).toBe(98);
  });

  it('answers every inclusion vector as transparency-dev/merkle does, the failing ones included', () => {
    let failing = 0;
    for (const file of inclusion) {
      const v = readVector<InclusionVector>(relative(VECTORS_DIR, file));
      const r = verifyInclusion(v.leafIdx, v.treeSize, bytes(v.leafHash), (v.proof ?? []).map(bytes), bytes(v.root));
      expect(r.ok, `${relative(root, file)}: ${v.desc}`).toBe(!v.wantErr);
      if (v.wantErr) failing++;
    }
    expect(failing).toBeGreaterThan(50);
  });

  it('answers every consistency vector as transparency-dev/merkle does, the failing ones included', () => {
    let failing = 0;
    for (const file of consistency) {
      const v = readVector<ConsistencyVector>(relative(VECTORS_DIR, file));
      const r = verifyConsistency(v.size1, v.size2, (v.proof ?? []).map(bytes), bytes(v.root1), bytes(v.root2));
      expect(r.ok, `${relative(root, file)}: ${v.desc}`).toBe(!v.wantErr);
      if (v.wantErr) failing++;
    }
    expect(failing).toBeGreaterThan(50);
  });

  it('hashes an earlier root of another length as its bytes are, as transparency-dev/merkle does: no match, no throw', () => {
    // Tree of 2 leaves; the earlier tree (size 1, a power of two) is the proof's seed, hashed with the new leaf.
    const [a, b] = [leafHash(REF_LEAVES[1]!), leafHash(REF_LEAVES[2]!)];
    const root2 = nodeHash(a, b);
    expect(verifyConsistency(1, 2, [b], a, root2)).toEqual({ ok: true });
    // The earlier root with a byte more (or one less, its last byte 0): not the root the proof leads from. Hashing
    // them into a 65-byte buffer cut the extra byte off (or padded a zero), so the proof verified.
    const longer = Uint8Array.of(...a, 0xff);
    expect(verifyConsistency(1, 2, [b], longer, root2).ok).toBe(false);
    const endsInZero = Uint8Array.of(...a.subarray(0, 31), 0);
    const zeroRoot2 = nodeHash(endsInZero, b);
    expect(verifyConsistency(1, 2, [b], endsInZero, zeroRoot2)).toEqual({ ok: true });
    expect(verifyConsistency(1, 2, [b], endsInZero.subarray(0, 31), zeroRoot2).ok).toBe(false);
    // Longer than 64 bytes: a verdict, not a RangeError from the buffer.
    for (const length of [65, 100, 1000]) {
      const r = verifyConsistency(1, 2, [b], new Uint8Array(length), root2);
      expect(r.ok).toBe(false);
    }
    // nodeHash itself hashes its inputs' bytes, whatever their length (RFC 6962: SHA-256(0x01 || left || right)).
    const odd = Uint8Array.of(1, 2, 3);
    expect(Buffer.from(nodeHash(odd, b)).toString('hex')).toBe(
      createHash('sha256')
        .update(Uint8Array.of(1, ...odd, ...b))
        .digest('hex'),
    );
  });
});

describe('proof verification given arguments of another type (the verifiers never throw on bad input)', () => {
  it('answers a proof that is no list, or a root that is no bytes (base64 text not decoded), with a reason', () => {
    const [a, b] = [leafHash(REF_LEAVES[1]!), leafHash(REF_LEAVES[2]!)];
    const root2 = nodeHash(a, b);
    const text = encodeBase64(root2); // what consistencyProof() and inclusionProof() give: base64 text
    expect(verifyInclusion(0, 2, a, [b], root2)).toEqual({ ok: true });
    expect(verifyConsistency(1, 2, [b], a, root2)).toEqual({ ok: true });
    // A proof that is no list threw a TypeError (`hashes.every is not a function`, of undefined too).
    for (const proof of [undefined, null, encodeBase64(b), b]) {
      expect(verifyInclusion(0, 2, a, proof as never, root2)).toEqual({
        ok: false,
        reason: 'the proof is not a list of hashes',
      });
      expect(rootFromInclusionProof(0, 2, a, proof as never)).toEqual({
        ok: false,
        reason: 'the proof is not a list of hashes',
      });
      expect(verifyConsistency(1, 2, proof as never, a, root2)).toEqual({
        ok: false,
        reason: 'the proof is not a list of hashes',
      });
    }
    // A root given as its base64 text was answered as a proof that leads elsewhere (undefined threw a TypeError).
    for (const root of [text, undefined, null]) {
      expect(verifyInclusion(0, 2, a, [b], root as never)).toEqual({
        ok: false,
        reason: 'the root is not bytes (a Uint8Array)',
      });
      expect(verifyConsistency(1, 2, [b], a, root as never)).toEqual({
        ok: false,
        reason: 'the new root is not bytes (a Uint8Array)',
      });
      expect(verifyConsistency(1, 2, [b], root as never, root2)).toEqual({
        ok: false,
        reason: 'the old root is not bytes (a Uint8Array)',
      });
    }
  });
});

describe('stored tree', () => {
  it('has the RFC 6962 reference roots', async () => {
    const t = storedTree(REF_LEAVES);
    expect(Buffer.from(rootOf(t.frontier)).toString('hex')).toBe(
      '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
    );
    expect(encodeBase64(rootOf(storedTree([]).frontier))).toBe('47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=');
  });

  it('stores about two nodes per leaf and matches MTH at every size', () => {
    const leaves = Array.from({ length: 70 }, (_, i) => new TextEncoder().encode(`leaf ${i}`));
    for (let n = 0; n <= leaves.length; n++) {
      const t = storedTree(leaves.slice(0, n));
      expect(Buffer.from(rootOf(t.frontier)), `size ${n}`).toEqual(Buffer.from(mth(leaves.slice(0, n))));
      expect(t.store.size).toBeLessThan(2 * n + 1);
    }
  });

  it('splits trees of 2^49 leaves and more exactly (Math.log2 rounds up just under a power of two there)', () => {
    for (const k of [49, 50, 52]) {
      const n = 2 ** k;
      const inclusion = inclusionRanges(0, n);
      expect(inclusion).toHaveLength(k);
      // The first leaf's path: its sibling, then subtrees doubling in size.
      expect(inclusion.map(([a, b]) => b - a)).toEqual(Array.from({ length: k }, (_, i) => 2 ** i));
      // One leaf past the power: the last leaf of the left subtree has that subtree's path, then the new leaf.
      expect(inclusionRanges(n - 1, n + 1).at(-1)).toEqual([n, n + 1]);
      expect(inclusionRanges(n - 1, n + 1)).toHaveLength(k + 1);
      const consistency = consistencyRanges(n / 2, n);
      expect(consistency).toEqual([[n / 2, n]]);
    }
  });

  it('makes inclusion and consistency proofs that verify, and only for the right leaf and root', async () => {
    const leaves = Array.from({ length: 37 }, (_, i) => new TextEncoder().encode(`entry-${i}`));
    const t = storedTree(leaves);
    for (let n = 1; n <= leaves.length; n++) {
      const root = mth(leaves.slice(0, n));
      for (let i = 0; i < n; i++) {
        const proof = await hashRanges(inclusionRanges(i, n), t.read);
        expect(verifyInclusion(i, n, leafHash(leaves[i]!), proof, root).ok, `leaf ${i} of ${n}`).toBe(true);
        expect(verifyInclusion(i, n, leafHash(leaves[(i + 1) % n]!), proof, root).ok).toBe(n === 1);
      }
      for (let m = 1; m <= n; m++) {
        const proof = await hashRanges(consistencyRanges(m, n), t.read);
        const old = mth(leaves.slice(0, m));
        expect(verifyConsistency(m, n, proof, old, root).ok, `${m} → ${n}`).toBe(true);
        if (m > 0 && m < n) expect(verifyConsistency(m, n, proof, mth(leaves.slice(1, m + 1)), root).ok).toBe(false);
      }
    }
  });
});
