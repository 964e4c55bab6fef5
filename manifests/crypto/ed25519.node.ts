/**
 * Ed25519 verification with node:crypto (OpenSSL): ~13x the pure-JS reference. Used by default in Node.
 *
 * Strict RFC 8032, like noble's strict mode, and never accepting what noble refuses:
 * - noble refuses non-canonical encodings of A and R and small-order public keys; OpenSSL accepts some of
 *   those, so they are refused here first.
 * - OpenSSL checks the cofactorless equation (R == [S]B - [k]A), which implies noble's cofactored one, so an
 *   OpenSSL "valid" is noble's "valid". OpenSSL's "invalid" is final: asking the pure-JS verifier again would
 *   let every garbage signature cost ~10x a valid one. The only signatures on which the two then differ pass
 *   the cofactored equation alone (a small-order component in R or A); no honest signer makes one, and
 *   node:crypto refuses them (docs/ARCHITECTURE.md, "Ed25519").
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { encodeBase64Url } from '../encoding/base64.js';
import { pointIsCanonical, verifiableArguments, SMALL_ORDER_POINTS, type SignatureVerifier } from './ed25519.js';

/**
 * Per public key (by hex): its OpenSSL key object, or null when noble's strict rules refuse the key
 * (non-canonical, small order). A chain is signed by a handful of keys, so these checks and the key
 * import are paid once per key rather than once per signature.
 */
const keyCache = new Map<string, KeyObject | null>();

/** The last key looked up: a chain's manifests name the same key one after another (no hex string per check). */
let last: { bytes: Uint8Array; key: KeyObject | null } | undefined;

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function publicKeyObject(publicKey: Uint8Array): KeyObject | null {
  if (last !== undefined && sameBytes(last.bytes, publicKey)) return last.key;
  const key = cachedKeyObject(publicKey);
  last = { bytes: publicKey.slice(), key };
  return key;
}

function cachedKeyObject(publicKey: Uint8Array): KeyObject | null {
  const hex = Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('hex');
  let key = keyCache.get(hex);
  if (key === undefined) {
    key =
      pointIsCanonical(publicKey) && !SMALL_ORDER_POINTS.has(hex)
        ? createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: encodeBase64Url(publicKey) }, format: 'jwk' })
        : null;
    if (keyCache.size > 1024) keyCache.clear();
    keyCache.set(hex, key);
  }
  return key;
}

export const nodeVerifier: SignatureVerifier = {
  name: 'node:crypto',
  verify(signature, message, publicKey) {
    if (!verifiableArguments(signature, message, publicKey)) return false;
    if (!pointIsCanonical(signature.subarray(0, 32))) return false;
    let valid = false;
    try {
      const key = publicKeyObject(publicKey);
      valid = key !== null && verify(null, message, key, signature);
    } catch {
      valid = false;
    }
    return valid;
  },
};
