/**
 * The trusted-key lookup of a parsed trust store (./trust.ts parses and validates one), without zod: the
 * verifiers' fast path and the auditor's worker threads load this, not the schemas. Isomorphic.
 */
import { decodeBase64Url } from '../encoding/base64.js';
import { ManifestError, type ManifestErrorCode } from '../errors.js';
import type { TrustedKey, TrustStore } from './trust.js';
import { shownValue } from '../../store/errors.js';

export type KeyLookup =
  | { ok: true; key: TrustedKey; publicKey: Uint8Array }
  | { ok: false; code: Extract<ManifestErrorCode, 'KEY_UNTRUSTED' | 'KEY_EXPIRED' | 'KEY_REVOKED'>; message: string };

/**
 * A value from a manifest or trust file in a message: `shownValue`'s quoting (a JSON string with nothing a terminal
 * acts on left raw; the auditor prints such a message as it is, escaped once), cut at 100 characters with `…` after
 * the closing quote, as every cut value is marked (a cut key id is not read as the whole id).
 */
const shown = (value: string): string => shownValue(value, 100);

/**
 * A trust store built by hand, never parsed, may be anything: one that is no object is TRUST_INVALID, as
 * parseTrustStore says of such a file (it was a TypeError, `Cannot read properties of null`). Zod-free, for the
 * lookups here and the store's own checks in trust.ts alike.
 */
export function checkStoreObject(store: unknown): asserts store is object {
  if (typeof store !== 'object' || store === null)
    throw new ManifestError('TRUST_INVALID', 'trust store is malformed: not an object');
}

/** A store's list as it must be: `keys` a list, `checkpointKeys` a list when present. @throws ManifestError `TRUST_INVALID` */
export function checkStoreList(list: unknown, name: 'keys' | 'checkpointKeys'): void {
  if (!Array.isArray(list) && (list !== undefined || name === 'keys'))
    throw new ManifestError('TRUST_INVALID', `trust store is malformed: ${name} is not a list`);
}

/**
 * Finds the key `keyId` listed for `host` and checks it was valid at `at` (ISO time):
 * notBefore <= at < notAfter, and at < revokedAt. Only `keys` is searched, never `checkpointKeys` (a checkpoint key
 * signs no manifest). Where a store built by hand lists one key twice, the first listing decides.
 *
 * The key is found through an index of the store's `keys` list, built at the first lookup in it (see `keyIndex`):
 * a chain of 100,000 manifests under a 10,000-key store looks each one up in constant time, not by a scan.
 * @throws ManifestError `TRUST_INVALID` for a trust store that is no object or whose `keys` is no list (as `mergeTrust`
 *   and `trustDigest` refuse it; it was a TypeError, `Cannot read properties of null (reading 'keys')`);
 *   `INVALID_ARGUMENT` for a host, key id or time that is no text (a TypeError too)
 */
export function findTrustedKey(trust: TrustStore, host: string, keyId: string, at: string): KeyLookup {
  checkStoreObject(trust);
  checkStoreList(trust.keys, 'keys');
  // One test of the three on the path every verified manifest takes; the refusal names the first that is none.
  if (typeof host !== 'string' || typeof keyId !== 'string' || typeof at !== 'string') {
    const [name, value] =
      typeof host !== 'string' ? ['host', host] : typeof keyId !== 'string' ? ['keyId', keyId] : ['at', at];
    throw new ManifestError('INVALID_ARGUMENT', `findTrustedKey: ${name} must be text, not ${shownValue(value)}`);
  }
  const key = listedKey(trust, host, keyId);
  const named = () => `key ${shown(keyId)} of host ${shown(host)}`;
  if (!key) return { ok: false, code: 'KEY_UNTRUSTED', message: `${named()} is not trusted` };
  const t = Date.parse(at);
  // A bound that does not parse is no bound to pass: NaN compares false both ways, so it is refused, not skipped.
  if (key.revokedAt !== undefined && !(t < Date.parse(key.revokedAt))) {
    return { ok: false, code: 'KEY_REVOKED', message: `${named()} was revoked at ${shown(key.revokedAt)}` };
  }
  if (!(t >= Date.parse(key.notBefore)) || (key.notAfter !== undefined && !(t < Date.parse(key.notAfter)))) {
    return { ok: false, code: 'KEY_EXPIRED', message: `${named()} was not valid at ${shown(at)}` };
  }
  const publicKey = publicKeyBytes(key);
  // A store built by hand, not parsed, may list a key that is none: no key this manifest can be trusted under.
  if (!publicKey)
    return {
      ok: false,
      code: 'KEY_UNTRUSTED',
      message: `${named()} is listed with a public key that is no Ed25519 key (32 bytes, base64url)`,
    };
  return { ok: true, key, publicKey };
}

/**
 * Where each key of a `keys` list is: host, then key id, to its first listing and that listing's place. `size` is the
 * list's length when it was indexed.
 */
interface KeyIndex {
  size: number;
  byHost: Map<string, Map<string, { entry: TrustedKey; at: number }>>;
}

/**
 * The index of each `keys` list looked up in, built once per list (not per store object: a store whose `keys` is
 * given another list gets another index). Held weakly: the caller's store is never written to (no hidden field, no
 * freezing), and an index goes when its list does. `null`: a list that cannot be indexed (see `keyIndex`).
 */
const keyIndexes = new WeakMap<object, KeyIndex | null>();

/**
 * The first listing of (`host`, `keyId`) in `trust.keys`: what `trust.keys.find(...)` gives, found by the index.
 * A store is read as it is: the windows and revocation of the listing found are read at each lookup, and a list that
 * has grown or shrunk since it was indexed, or whose listing found is no longer at its place or no longer names that
 * key, is indexed again. A store changed in place otherwise after a lookup (another listing put in at the place of one
 * of the same length, or renamed) is not noticed: to change a store already used, build a new one, as `mergeTrust` and
 * the keyring do. Anything the index cannot stand for exactly (a list that is no array, a listing that is no object, a
 * name that is no string) is searched as before, by a scan.
 */
function listedKey(trust: TrustStore, host: string, keyId: string): TrustedKey | undefined {
  const keys = trust.keys;
  if (typeof host !== 'string' || typeof keyId !== 'string' || !Array.isArray(keys))
    return keys.find((k) => k.host === host && k.keyId === keyId);
  for (let fresh = false; ; fresh = true) {
    let index = keyIndexes.get(keys);
    if (index === undefined || (index !== null && index.size !== keys.length) || fresh) {
      index = keyIndex(keys);
      keyIndexes.set(keys, index);
    }
    if (index === null) return keys.find((k) => k.host === host && k.keyId === keyId);
    const found = index.byHost.get(host)?.get(keyId);
    if (found === undefined) return undefined;
    if (fresh || (keys[found.at] === found.entry && found.entry.host === host && found.entry.keyId === keyId))
      return found.entry;
  }
}

/** Indexes a list, or `null` when a listing is no object or reading one throws: those are scanned, as before. */
function keyIndex(keys: TrustedKey[]): KeyIndex | null {
  const byHost: KeyIndex['byHost'] = new Map();
  try {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      if (typeof k !== 'object' || k === null) return null;
      const host: unknown = k.host;
      const keyId: unknown = k.keyId;
      // A name that is no string never equals (===) one looked up, which always is.
      if (typeof host !== 'string' || typeof keyId !== 'string') continue;
      let byId = byHost.get(host);
      if (byId === undefined) byHost.set(host, (byId = new Map()));
      if (!byId.has(keyId)) byId.set(keyId, { entry: k, at: i });
    }
  } catch {
    return null;
  }
  return { size: keys.length, byHost };
}

/** Decoded public keys per trust entry: a chain's manifests look the same few keys up again and again. */
const decodedKeys = new WeakMap<TrustedKey, { text: string; bytes: Uint8Array }>();

/** A copy each time, so a caller that changes the bytes it got cannot change the next lookup's. */
function publicKeyBytes(key: TrustedKey): Uint8Array | undefined {
  let known = decodedKeys.get(key);
  if (known?.text !== key.publicKey) {
    const text: unknown = key.publicKey;
    const bytes = typeof text === 'string' ? decodeBase64Url(text) : undefined;
    if (bytes?.length !== 32) return undefined;
    known = { text: key.publicKey, bytes };
    decodedKeys.set(key, known);
  }
  return known.bytes.slice();
}
