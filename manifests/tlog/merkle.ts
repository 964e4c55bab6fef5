/**
 * RFC 6962 / RFC 9162 Merkle tree hashing and proof verification (SHA-256; leaf `0x00 ||`, node `0x01 ||`).
 * SHA-256 is used here only, for interoperability with the transparency-log world; BLAKE3 stays the
 * content address of blobs and manifests. Isomorphic: no `node:` import.
 *
 * The verifiers follow transparency-dev/merkle's `proof` package (the reference RFC 9162 section 2.1.3.2 /
 * 2.1.4.2 algorithms, decomposed into inner and border parts). Sizes and indexes are handled as bigint so
 * that 64-bit trees never meet JavaScript's 32-bit bitwise operators.
 */
import { sha256 } from '../crypto/sha256.js';
import { checkBytesArgument, isUint8Array } from '../../store/errors.js';
import { ManifestError } from '../errors.js';

export const HASH_SIZE = 32;

/** RFC 6962 section 2.1: MTH({}) = SHA-256(""). */
export const EMPTY_ROOT: Uint8Array = sha256(new Uint8Array(0));

/** MTH({d}) = SHA-256(0x00 || d). @throws ManifestError `INVALID_ARGUMENT` for a leaf that is no Uint8Array */
export function leafHash(leaf: Uint8Array): Uint8Array {
  // A string was hashed as that many zero bytes (Uint8Array.set of its characters), an object as none.
  checkBytesArgument(leaf, 'leafHash: the leaf', ManifestError);
  const buf = new Uint8Array(leaf.length + 1);
  buf.set(leaf, 1);
  return sha256(buf);
}

/**
 * `nodeHash`'s input, reused: `sha256` reads it synchronously and returns fresh bytes, and a 65-byte array is past
 * the size V8 keeps on its own heap (each fresh one was a malloc'd backing store for the sweeper to free).
 */
const NODE_INPUT = new Uint8Array(1 + 2 * HASH_SIZE);

/** SHA-256(0x01 || left || right). @throws ManifestError `INVALID_ARGUMENT` for a side that is no Uint8Array */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  checkBytesArgument(left, 'nodeHash: left', ManifestError);
  checkBytesArgument(right, 'nodeHash: right', ManifestError);
  return domainHash(1, left, right);
}

/** SHA-256(domain byte || a || b): the interior nodes of this tree and of the session-heads map (session-heads.ts). */
export function domainHash(domain: number, a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === HASH_SIZE && b.length === HASH_SIZE) {
    NODE_INPUT[0] = domain;
    NODE_INPUT.set(a, 1);
    NODE_INPUT.set(b, 1 + HASH_SIZE);
    return sha256(NODE_INPUT);
  }
  // Any other length (an earlier root a caller of verifyConsistency passed, the proof's seed) is hashed as its bytes
  // are, as transparency-dev/merkle hashes it: a 65-byte buffer cut a longer one off (its extra bytes overwritten by
  // `b`, so root ‖ junk verified as root) or threw past 64 bytes, and padded a shorter one with zeros.
  const buf = new Uint8Array(1 + a.length + b.length);
  buf[0] = domain;
  buf.set(a, 1);
  buf.set(b, 1 + a.length);
  return sha256(buf);
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Why a proof did not verify (the verifiers never throw on bad input). */
export type ProofResult = { ok: true } | { ok: false; reason: string };

const fail = (reason: string): ProofResult => ({ ok: false, reason });

const bitLength = (x: bigint): number => (x === 0n ? 0 : x.toString(2).length);
const onesCount = (x: bigint): number => x.toString(2).replace(/0/g, '').length;
function trailingZeros(x: bigint): number {
  let n = 0;
  while (x > 0n && (x & 1n) === 0n) {
    x >>= 1n;
    n++;
  }
  return n;
}

function toIndex(value: number | bigint): bigint | undefined {
  if (typeof value === 'bigint') return value >= 0n && value < 1n << 64n ? value : undefined;
  return Number.isSafeInteger(value) && value >= 0 ? BigInt(value) : undefined;
}

/** Inner proof nodes (below the point where the paths to `index` and to the last leaf meet) and border nodes. */
function decompose(index: bigint, size: bigint): { inner: number; border: number } {
  const inner = bitLength(index ^ (size - 1n));
  return { inner, border: onesCount(index >> BigInt(inner)) };
}

function chainInner(seed: Uint8Array, proof: Uint8Array[], index: bigint): Uint8Array {
  proof.forEach((h, i) => {
    seed = ((index >> BigInt(i)) & 1n) === 0n ? nodeHash(seed, h) : nodeHash(h, seed);
  });
  return seed;
}

function chainInnerRight(seed: Uint8Array, proof: Uint8Array[], index: bigint): Uint8Array {
  proof.forEach((h, i) => {
    if (((index >> BigInt(i)) & 1n) === 1n) seed = nodeHash(h, seed);
  });
  return seed;
}

function chainBorderRight(seed: Uint8Array, proof: Uint8Array[]): Uint8Array {
  for (const h of proof) seed = nodeHash(h, seed);
  return seed;
}

const wellSized = (hashes: Uint8Array[]) => hashes.every((h) => isUint8Array(h) && h.length === HASH_SIZE);

/**
 * What is wrong with the type of a proof or a root handed to a verifier (`undefined`: nothing), so that it answers with
 * a reason rather than a TypeError (a proof that is no list), or a verdict on a value never compared (a root given as
 * the base64 text the ledger's proofs carry, which reads as a proof leading elsewhere). A root of another length is
 * bytes all the same and is compared as transparency-dev/merkle compares it (see `domainHash`).
 */
function argumentProblem(proof: unknown, roots: Array<[string, unknown]>): string | undefined {
  if (!Array.isArray(proof)) return 'the proof is not a list of hashes';
  for (const [name, root] of roots) if (!isUint8Array(root)) return `${name} is not bytes (a Uint8Array)`;
  return undefined;
}

/**
 * The root that an inclusion proof of `leafHash` at `index` implies for a tree of `size` leaves, or a reason.
 * (RFC 9162 section 2.1.3.2.)
 */
export function rootFromInclusionProof(
  index: number | bigint,
  size: number | bigint,
  leaf: Uint8Array,
  proof: Uint8Array[],
): { ok: true; root: Uint8Array } | { ok: false; reason: string } {
  const i = toIndex(index);
  const n = toIndex(size);
  if (i === undefined || n === undefined) return { ok: false, reason: 'index and size must be non-negative integers' };
  if (i >= n) return { ok: false, reason: `index ${i} is beyond the tree size ${n}` };
  if (!isUint8Array(leaf) || leaf.length !== HASH_SIZE) return { ok: false, reason: 'the leaf hash is not 32 bytes' };
  const problem = argumentProblem(proof, []);
  if (problem) return { ok: false, reason: problem };
  if (!wellSized(proof)) return { ok: false, reason: 'a proof hash is not 32 bytes' };
  const { inner, border } = decompose(i, n);
  if (proof.length !== inner + border)
    return { ok: false, reason: `the proof has ${proof.length} hashes; a tree of ${n} needs ${inner + border}` };
  const root = chainBorderRight(chainInner(leaf, proof.slice(0, inner), i), proof.slice(inner));
  return { ok: true, root };
}

/** Verifies that `leaf` (a leaf hash) is at `index` in the tree of `size` leaves with root `root`. */
export function verifyInclusion(
  index: number | bigint,
  size: number | bigint,
  leaf: Uint8Array,
  proof: Uint8Array[],
  root: Uint8Array,
): ProofResult {
  const computed = rootFromInclusionProof(index, size, leaf, proof);
  if (!computed.ok) return computed;
  const problem = argumentProblem(proof, [['the root', root]]);
  if (problem) return fail(problem);
  return equalBytes(computed.root, root) ? { ok: true } : fail('the proof leads to another root');
}

/**
 * Verifies that the tree of `size2` leaves with root `root2` extends the tree of `size1` leaves with root
 * `root1` (RFC 9162 section 2.1.4.2).
 */
export function verifyConsistency(
  size1: number | bigint,
  size2: number | bigint,
  proof: Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): ProofResult {
  const m = toIndex(size1);
  const n = toIndex(size2);
  if (m === undefined || n === undefined) return fail('sizes must be non-negative integers');
  const problem = argumentProblem(proof, [
    ['the old root', root1],
    ['the new root', root2],
  ]);
  if (problem) return fail(problem);
  if (!wellSized(proof)) return fail('a proof hash is not 32 bytes');
  if (n < m) return fail(`size2 ${n} is smaller than size1 ${m}`);
  // Every tree extends the empty one: a "proof" from size 0 proves nothing and is refused, as the
  // transparency-dev/merkle vectors demand; callers treat an old size of 0 as consistent by definition.
  if (m === 0n) return fail('no consistency proof exists from the empty tree');
  if (m === n) {
    if (proof.length > 0) return fail('equal sizes need an empty proof');
    return equalBytes(root1, root2) ? { ok: true } : fail('equal sizes with different roots');
  }
  if (proof.length === 0) return fail('empty proof');
  const decomposed = decompose(m - 1n, n);
  const shift = trailingZeros(m);
  const inner = decomposed.inner - shift;
  // The proof starts with the root of the subtree of size 2^shift, unless size1 is that very subtree.
  let seed = proof[0]!;
  let start = 1;
  if (m === 1n << BigInt(shift)) {
    seed = root1;
    start = 0;
  }
  if (proof.length !== start + inner + decomposed.border)
    return fail(`the proof has ${proof.length} hashes; sizes ${m} → ${n} need ${start + inner + decomposed.border}`);
  const rest = proof.slice(start);
  const mask = (m - 1n) >> BigInt(shift);
  const hash1 = chainBorderRight(chainInnerRight(seed, rest.slice(0, inner), mask), rest.slice(inner));
  if (!equalBytes(hash1, root1)) return fail('the proof does not lead to the old root');
  const hash2 = chainBorderRight(chainInner(seed, rest.slice(0, inner), mask), rest.slice(inner));
  if (!equalBytes(hash2, root2)) return fail('the proof does not lead to the new root');
  return { ok: true };
}
