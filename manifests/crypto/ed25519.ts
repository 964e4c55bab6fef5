/**
 * Ed25519 verification backends. Both are strict RFC 8032 (cofactorless, canonical encodings, S < L, no small-order key);
 * the shared vector suite (test/ed25519.test.ts) holds them to the same answer on every Wycheproof
 * and edge-case vector. Primitives return booleans: a bad signature is `false`, never an exception.
 * Isomorphic: the node:crypto backend lives in ed25519-node.ts.
 */
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { isUint8Array } from '../../store/errors.js';

ed.hashes.sha512 = sha512;

export interface SignatureVerifier {
  readonly name: string;
  /** True iff `signature` is a valid strict-RFC-8032 Ed25519 signature of `message` under `publicKey`. */
  verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
}

/**
 * Whether `value` can stand for a `SignatureVerifier`: it has a `verify` method. What the functions that take a verifier
 * from a caller check first (one without it failed every signature check: each valid signature reported as not
 * verifying).
 */
export const isSignatureVerifier = (value: unknown): value is SignatureVerifier =>
  typeof (value as Partial<SignatureVerifier> | null)?.verify === 'function';

/**
 * The verifiers' first look, shared: a signature of 64 bytes, a message and a 32-byte key, each a Uint8Array of any
 * realm (`isUint8Array`: a valid signature in another realm's arrays must not verify as false). Anything else is no
 * signature that verifies: `verify` answers false, never an exception (a missing signature or key was a TypeError
 * reading its length).
 */
export const verifiableArguments = (signature: unknown, message: unknown, publicKey: unknown): boolean =>
  isUint8Array(signature) &&
  isUint8Array(message) &&
  isUint8Array(publicKey) &&
  signature.length === 64 &&
  publicKey.length === 32;

/** The group order L. */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

const littleEndian = (bytes: Uint8Array): bigint => {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]!);
  return n;
};

/**
 * Canonical encodings of the eight small-order points (and the sign-bit forms of the two with x = 0): public keys
 * every backend refuses (a signature under one says nothing of who made it; noble's strict mode and libsodium refuse
 * them too). Shared by the node:crypto and WebCrypto backends, which ask their platform only about other keys.
 */
export const SMALL_ORDER_POINTS: ReadonlySet<string> = new Set([
  '0100000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000080',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0000000000000000000000000000000000000000000000000000000000000080',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
]);

/**
 * True iff a point encoding's y (sign bit cleared) is below p = 2^255 - 19: RFC 8032's canonical encoding, which the
 * node:crypto and WebCrypto backends demand of A and R before asking their platform (noble refuses the others itself).
 */
export function pointIsCanonical(enc: Uint8Array): boolean {
  if ((enc[31]! & 0x7f) !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (enc[i] !== 0xff) return true;
  return enc[0]! < 0xed;
}

/** True iff `publicKey` is the encoding of a small-order point (`SMALL_ORDER_POINTS`). */
export function isSmallOrderKey(publicKey: Uint8Array): boolean {
  let hex = '';
  for (const b of publicKey) hex += b.toString(16).padStart(2, '0');
  return SMALL_ORDER_POINTS.has(hex);
}

/**
 * The portable reference: `@noble/ed25519`'s strict rules (as `zip215: false`: canonical encodings, S < L, small-order
 * keys refused), and the cofactorless equation [S]B = R + [k]A. noble checks the cofactored one ([8][S]B = [8]R + [8][k]A),
 * which also holds for R moved by a point of small order; node:crypto (OpenSSL) and WebCrypto check the cofactorless
 * one, so without it the same signature verified here and not there (and the auditor's page, which checks notes
 * with this verifier, disagreed with `verify`).
 */
export const nobleVerifier: SignatureVerifier = {
  name: 'noble',
  verify(signature, message, publicKey) {
    if (!verifiableArguments(signature, message, publicKey)) return false;
    try {
      // noble's strict decoding (y < p, no x = 0 with the sign bit), its small-order key refusal and S < L; then the
      // cofactorless equation in place of noble's cofactored one (the same multiplications, so the same cost).
      const r = signature.subarray(0, 32);
      const A = ed.Point.fromBytes(publicKey, false);
      if (A.isSmallOrder()) return false;
      const R = ed.Point.fromBytes(r, false);
      const S = littleEndian(signature.subarray(32));
      if (S >= L) return false;
      const k = ed.etc.mod(littleEndian(sha512(ed.etc.concatBytes(r, publicKey, message))), L);
      return ed.Point.BASE.multiply(S, false).equals(R.add(A.multiply(k, false)));
    } catch {
      return false;
    }
  },
};

/** Signs with a raw 32-byte Ed25519 secret key (seed) using noble; for portable code and tests. */
export function nobleSign(message: Uint8Array, secretKey: Uint8Array): Uint8Array {
  return ed.sign(message, secretKey);
}

export function noblePublicKey(secretKey: Uint8Array): Uint8Array {
  return ed.getPublicKey(secretKey);
}
