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

/** A value from a manifest or trust file in a message: quoted, and cut where it is long. */
const quoted = (value: string): string => JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);

/**
 * Finds the key `keyId` listed for `host` and checks it was valid at `at` (ISO time):
 * notBefore <= at < notAfter, and at < revokedAt.
 */
export function findTrustedKey(trust: TrustStore, host: string, keyId: string, at: string): KeyLookup {
  const key = trust.keys.find((k) => k.host === host && k.keyId === keyId);
  const named = () => `key ${quoted(keyId)} of host ${quoted(host)}`;
  if (!key) return { ok: false, code: 'KEY_UNTRUSTED', message: `${named()} is not trusted` };
  const t = Date.parse(at);
  // A bound that does not parse is no bound to pass: NaN compares false both ways, so it is refused, not skipped.
  if (key.revokedAt !== undefined && !(t < Date.parse(key.revokedAt))) {
    return { ok: false, code: 'KEY_REVOKED', message: `${named()} was revoked at ${quoted(key.revokedAt)}` };
  }
  if (!(t >= Date.parse(key.notBefore)) || (key.notAfter !== undefined && !(t < Date.parse(key.notAfter)))) {
    return { ok: false, code: 'KEY_EXPIRED', message: `${named()} was not valid at ${quoted(at)}` };
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
