/**
 * The trusted-key lookup of a parsed trust store (./trust.ts parses and validates one), without zod: the
 * verifiers' fast path and the auditor's worker threads load this, not the schemas. Isomorphic.
 */
import { decodeBase64Url } from '../encoding/base64.js';
import type { ManifestErrorCode } from '../errors.js';
import type { TrustedKey, TrustStore } from './trust.js';

export type KeyLookup =
  | { ok: true; key: TrustedKey; publicKey: Uint8Array }
  | { ok: false; code: Extract<ManifestErrorCode, 'KEY_UNTRUSTED' | 'KEY_EXPIRED' | 'KEY_REVOKED'>; message: string };

/**
 * Finds the key `keyId` listed for `host` and checks it was valid at `at` (ISO time):
 * notBefore <= at < notAfter, and at < revokedAt.
 */
export function findTrustedKey(trust: TrustStore, host: string, keyId: string, at: string): KeyLookup {
  const key = trust.keys.find((k) => k.host === host && k.keyId === keyId);
  if (!key) return { ok: false, code: 'KEY_UNTRUSTED', message: `key ${keyId} is not trusted for host ${host}` };
  const t = Date.parse(at);
  if (key.revokedAt !== undefined && t >= Date.parse(key.revokedAt)) {
    return { ok: false, code: 'KEY_REVOKED', message: `key ${keyId} of host ${host} was revoked at ${key.revokedAt}` };
  }
  if (t < Date.parse(key.notBefore) || (key.notAfter !== undefined && t >= Date.parse(key.notAfter))) {
    return { ok: false, code: 'KEY_EXPIRED', message: `key ${keyId} of host ${host} was not valid at ${at}` };
  }
  return { ok: true, key, publicKey: publicKeyBytes(key) };
}

/** Decoded public keys per trust entry: a chain's manifests look the same few keys up again and again. */
const decodedKeys = new WeakMap<TrustedKey, { text: string; bytes: Uint8Array }>();

/** A copy each time, so a caller that changes the bytes it got cannot change the next lookup's. */
function publicKeyBytes(key: TrustedKey): Uint8Array {
  let known = decodedKeys.get(key);
  if (known?.text !== key.publicKey) {
    known = { text: key.publicKey, bytes: decodeBase64Url(key.publicKey)! };
    decodedKeys.set(key, known);
  }
  return known.bytes.slice();
}
