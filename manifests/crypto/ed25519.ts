/**
 * Ed25519 verification backends. Both are strict RFC 8032 (cofactorless, canonical encodings, S < L);
 * the shared vector suite (test/ed25519.test.ts) holds them to the same answer on every Wycheproof
 * and edge-case vector. Primitives return booleans: a bad signature is `false`, never an exception.
 * Isomorphic: the node:crypto backend lives in ed25519-node.ts.
 */
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';

ed.hashes.sha512 = sha512;

export interface SignatureVerifier {
  readonly name: string;
  /** True iff `signature` is a valid strict-RFC-8032 Ed25519 signature of `message` under `publicKey`. */
  verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
}

/** The portable reference: `@noble/ed25519` with `zip215: false` (strict RFC 8032 / FIPS 186-5). */
export const nobleVerifier: SignatureVerifier = {
  name: 'noble',
  verify(signature, message, publicKey) {
    if (signature.length !== 64 || publicKey.length !== 32) return false;
    try {
      return ed.verify(signature, message, publicKey, { zip215: false });
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
