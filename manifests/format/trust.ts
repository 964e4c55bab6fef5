/**
 * Trust stores: which public keys may sign for which host, and when (docs/DESIGN.md, "Keys and trust").
 * A manifest verifies only with a key listed for the manifest's own host and valid at its createdAt.
 * Isomorphic. Keys are a list (not an object keyed by host) so hostile host names cannot touch prototypes.
 */
import { z } from 'zod';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { checkBooleanOption, checkBytesArgument, readOptionFields, shownValue } from '../../store/errors.js';
import { decodeBase64Url, encodeBase64Url } from '../encoding/base64.js';
import { fileBytes, fileText } from '../encoding/file-bytes.js';
import { canonicalBytes } from '../encoding/canonical.js';
import { ManifestError } from '../errors.js';
import { idSchema } from './ids.js';
import { quoted } from '../encoding/printable.js';
import { keyIdSchema, timestampSchema } from './manifest.js';
import { describeZodError } from './zod-issue.js';
import { checkStoreList, checkStoreObject } from './trust-lookup.js';
import { encodeVerifierKey, parseVerifierKey, type NoteVerifierKey } from '../crypto/note.js';

export { findTrustedKey, type KeyLookup } from './trust-lookup.js';

export const trustedKeySchema = z.strictObject({
  host: idSchema,
  keyId: keyIdSchema,
  /** Raw 32-byte Ed25519 public key, base64url (the JWK `x`). */
  publicKey: z.string().refine((s) => decodeBase64Url(s)?.length === 32, 'must be a base64url 32-byte Ed25519 key'),
  notBefore: timestampSchema,
  notAfter: timestampSchema.optional(),
  revokedAt: timestampSchema.optional(),
});

/**
 * A verifier key as the ledger writes it (its hash in lowercase hex): the keyring finds its own key in the trust store
 * by this text, so a trust store holds each key in one spelling only, though a key given elsewhere (a witness's) may
 * spell its hash in either case.
 */
const isVerifierKey = (s: string) => {
  try {
    const key = parseVerifierKey(s);
    return encodeVerifierKey(key.name, key.publicKey) === s;
  } catch {
    return false;
  }
};

/**
 * A checkpoint key: signs the log's C2SP checkpoints (never manifests: one key, one message format).
 * Checkpoints carry no time, so only `revokedAt` matters to a verifier: a revoked key's checkpoints
 * are refused whenever they were signed; `notBefore`/`notAfter` record rotation.
 */
export const trustedCheckpointKeySchema = z.strictObject({
  host: idSchema,
  keyId: keyIdSchema,
  /** The C2SP signed-note verifier key `<origin>+<key hash>+<base64(0x01 ‖ key)>`. */
  vkey: z
    .string()
    .max(1024)
    .refine(isVerifierKey, 'must be a C2SP Ed25519 note verifier key, its hash in lowercase hex'),
  notBefore: timestampSchema,
  notAfter: timestampSchema.optional(),
  revokedAt: timestampSchema.optional(),
});

export const trustStoreSchema = z
  .strictObject({
    version: z.literal(1),
    keys: z.array(trustedKeySchema).max(10_000),
    checkpointKeys: z.array(trustedCheckpointKeySchema).max(10_000).optional(),
  })
  // With two entries for one key, whichever a lookup found first would decide: an unrevoked copy would hide a revocation.
  .superRefine((store, ctx) => {
    for (const [field, list] of [
      ['keys', store.keys],
      ['checkpointKeys', store.checkpointKeys ?? []],
    ] as const) {
      const seen = new Set<string>();
      list.forEach((k, i) => {
        const name = `${k.host}\u0000${k.keyId}`;
        if (seen.has(name))
          ctx.addIssue({
            code: 'custom',
            path: [field, i],
            message: `key ${quoted(k.keyId)} of host ${k.host} is listed twice; keep one entry per (host, keyId)`,
          });
        seen.add(name);
      });
    }
  });

export type TrustedKey = z.infer<typeof trustedKeySchema>;
export type TrustedCheckpointKey = z.infer<typeof trustedCheckpointKeySchema>;

/**
 * The listings (host and verifier key, as `checkpointRevocationKey` names them) a trust store revokes. A note's
 * signature names its key by origin and key hash, never by the entry's key id: a host's key revoked in one of its
 * listings is revoked in all of them, whatever key id another gives it. Another host's listing of the same key stands on
 * its own in one store; a merge (`mergeTrust`, as every verifier of several stores and the ledger take them) revokes
 * every listing of a public key, whatever its host, once any listing revokes it.
 */
export function revokedCheckpointListings(trust: TrustStore): Set<string> {
  return new Set(
    (trust.checkpointKeys ?? []).filter((k) => k.revokedAt !== undefined).map((k) => checkpointRevocationKey(k)),
  );
}

/** A checkpoint key listing's host and verifier key, as one text (`revokedCheckpointListings`). */
export const checkpointRevocationKey = (k: { host: string; vkey: string }): string => `${k.host}\u0000${k.vkey}`;

/**
 * The unrevoked checkpoint keys of a trust store, as note verifiers (optionally only those named `origin`): a key
 * its host revokes in any listing is left out (`revokedCheckpointListings`). `withRevoked` adds the revoked ones: only
 * for a ledger reading back the pin in its own root (see CheckpointGuard).
 * @throws ManifestError `TRUST_INVALID` for a store built by hand that is none (as `trustDigest`; it was a TypeError,
 *   `Cannot read properties of null (reading 'checkpointKeys')`), `KEY_INVALID` for a verifier key that does not parse,
 *   `INVALID_ARGUMENT` for an origin that is no text or options that are none (`withRevoked` not true or false)
 */
export function checkpointVerifiers(
  trust: TrustStore,
  origin?: string,
  options: { withRevoked?: boolean | undefined } = {},
): NoteVerifierKey[] {
  checkStoreObject(trust);
  checkStoreList(trust.checkpointKeys, 'checkpointKeys');
  // An origin that is no text matched no key (none to verify with); options that were null a TypeError.
  if (origin !== undefined && typeof origin !== 'string')
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `checkpointVerifiers: origin must be a log's name (text), or absent for every origin, not ${shownValue(origin)}`,
    );
  const { withRevoked } = readOptionFields(options, ['withRevoked'], 'checkpointVerifiers options', ManifestError);
  const revoked =
    checkBooleanOption(withRevoked, 'checkpointVerifiers: withRevoked', ManifestError) === true
      ? new Set<string>()
      : revokedCheckpointListings(trust);
  return (trust.checkpointKeys ?? [])
    .filter((k) => !revoked.has(checkpointRevocationKey(k)))
    .map((k) => parseVerifierKey(k.vkey))
    .filter((k) => origin === undefined || k.name === origin);
}
export type TrustStore = z.infer<typeof trustStoreSchema>;

/**
 * Key ids derived from the public key: `ed25519:` + the first 128 bits of its BLAKE3, in hex.
 * @throws ManifestError `INVALID_ARGUMENT` for a public key that is no Uint8Array
 */
export function keyIdOf(publicKey: Uint8Array): string {
  checkBytesArgument(publicKey, 'keyIdOf: the public key', ManifestError);
  return `ed25519:${digestOf(publicKey).slice(7, 39)}`;
}

/** The largest trust file read (a trust file names keys: a few KiB; an enormous one is refused, never read). */
export const MAX_TRUST_FILE_BYTES = 16 * 1024 * 1024;

/**
 * Parses a trust store from untrusted input: a trust file's text, its bytes (UTF-8: an ArrayBuffer, as
 * `fetch(url).then((r) => r.arrayBuffer())` gives it, a Uint8Array or Node Buffer, as `readFileSync(file)` does, any
 * other typed array or a DataView), or its parsed JSON value.
 * @throws ManifestError `TRUST_INVALID` for input that is not a trust store (text that is not JSON, a value off the
 *   schema; bytes are read as the CLI reads a trust file, `readFileSync(file, 'utf8')`: one that is not UTF-8 becomes
 *   U+FFFD)
 */
export function parseTrustStore(input: string | ArrayBufferLike | ArrayBufferView | unknown): TrustStore {
  let value = input;
  // A file's bytes are its text (they were refused, and before that judged as an object: 'version: expected 1').
  const bytes = fileBytes(input);
  const text = bytes === undefined ? input : fileText(bytes);
  if (typeof text === 'string') {
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new ManifestError('TRUST_INVALID', 'trust store is not valid JSON', { cause: err });
    }
  }
  const parsed = trustStoreSchema.safeParse(value);
  if (!parsed.success) {
    throw new ManifestError(
      'TRUST_INVALID',
      `trust store is malformed: ${describeZodError(parsed.error, { escaped: true, schema: trustStoreSchema })}`,
    );
  }
  return parsed.data;
}

/**
 * One listing of a key from two sources: the most restrictive window (latest notBefore, earliest notAfter and
 * revokedAt). @throws ManifestError `TRUST_INVALID` when the two give the key id different public keys
 */
export function mergeTrustedKey(a: TrustedKey, b: TrustedKey): TrustedKey {
  if (a.publicKey !== b.publicKey)
    throw new ManifestError('TRUST_INVALID', `key ${quoted(a.keyId)} of host ${a.host} is listed with two public keys`);
  return restrictiveWindow(a, b);
}

/** The earlier of two window bounds (ISO times); an absent bound is no bound. */
export function earlierTime<T extends string | undefined>(x: string | undefined, y: T): string | T {
  return x === undefined ? y : y === undefined ? x : Date.parse(x) <= Date.parse(y) ? x : y;
}

/** Where a trust listing ends its key's window: `notAfter` (a rotation), or `revokedAt` when earlier; undefined while current. */
export const windowEndOf = (key: { notAfter?: string; revokedAt?: string }): string | undefined =>
  earlierTime(key.notAfter, key.revokedAt);

/** `a` with the most restrictive window of `a` and `b`: latest notBefore, earliest notAfter and revokedAt. */
export function restrictiveWindow<K extends { notBefore: string; notAfter?: string; revokedAt?: string }>(
  a: K,
  b: K,
): K {
  const later = (x: string, y: string) => (Date.parse(x) >= Date.parse(y) ? x : y);
  const notAfter = earlierTime(a.notAfter, b.notAfter);
  const revokedAt = earlierTime(a.revokedAt, b.revokedAt);
  return {
    ...a,
    notBefore: later(a.notBefore, b.notBefore),
    ...(notAfter !== undefined ? { notAfter } : {}),
    ...(revokedAt !== undefined ? { revokedAt } : {}),
  };
}

/**
 * Union of trust stores (a store's own file plus keys of other hosts given by the caller; an auditor's several
 * `--trust` files, or a shared store's hosts' `keys export` files, as `verify --trust a.json --trust b.json` and the
 * `trust` option take them). A key listed in
 * more than one of them gets the most restrictive window of all its listings (see `mergeTrustedKey`); a
 * checkpoint key listed twice is revoked when either listing revokes it. Every listing of one public key, whatever its
 * host, key id or kind (a checkpoint key's by its verifier key), takes the earliest revocation of any of them, as the
 * keyring lists a key: a store listing under another key id a key another store revokes does not trust again what it
 * signs after its revocation. `undefined` stands for no store.
 * @throws ManifestError `TRUST_INVALID` when one key id is listed with two public keys, or for a store built by hand
 *   that is none (as `trustDigest`); stores `parseTrustStore` gave never are.
 */
export function mergeTrust(...stores: Array<TrustStore | undefined>): TrustStore {
  // Every store is checked before any is merged: a store built by hand that is none is refused whole.
  for (const s of stores) if (s !== undefined) storeEntries(s);
  const keys: TrustedKey[] = [];
  const checkpointKeys: TrustedCheckpointKey[] = [];
  // Each key's place in the union, by host then key id (then verifier key): a lookup per key, not a scan of the
  // union (two 10,000-key stores were 10^8 comparisons). A key keeps the place of its first listing.
  const keyAt = new Map<string, Map<string, number>>();
  const checkpointAt = new Map<string, Map<string, number>>();
  const placeOf = (index: Map<string, Map<string, number>>, host: string, name: string, next: number): number => {
    let byName = index.get(host);
    if (!byName) index.set(host, (byName = new Map()));
    const at = byName.get(name);
    if (at !== undefined) return at;
    byName.set(name, next);
    return -1;
  };
  for (const s of stores) {
    for (const k of s?.keys ?? []) {
      const at = placeOf(keyAt, k.host, k.keyId, keys.length);
      if (at < 0) keys.push(k);
      else keys[at] = mergeTrustedKey(keys[at]!, k);
    }
    for (const k of s?.checkpointKeys ?? []) {
      const at = placeOf(checkpointAt, k.host, k.vkey, checkpointKeys.length);
      if (at < 0) checkpointKeys.push(k);
      else checkpointKeys[at] = restrictiveWindow(checkpointKeys[at]!, k);
    }
  }
  revokeEverySameKeyListing(keys, checkpointKeys);
  return checkpointKeys.length > 0 ? { version: 1, keys, checkpointKeys } : { version: 1, keys };
}

/**
 * The public key a listing names, as one text (base64url of its 32 bytes): a manifest key's `publicKey`, a checkpoint
 * key's read from its verifier key. `undefined` for one that names none (a store built by hand, never parsed).
 */
export function listedPublicKey(k: TrustedKey | TrustedCheckpointKey): string | undefined {
  try {
    const bytes = 'publicKey' in k ? decodeBase64Url(k.publicKey) : parseVerifierKey(k.vkey).publicKey;
    return bytes?.length === 32 ? encodeBase64Url(bytes) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Gives every listing of a public key (whatever its host, key id or kind: a checkpoint key by its verifier key's public
 * key) the earliest revocation any listing of that key carries, in place, as the keyring lists a key (one revoked
 * anywhere is revoked everywhere): a store listing under another key id a key another store revokes would trust again
 * what it signs after its revocation. Only `revokedAt` is taken; windows (`notBefore`, `notAfter`) stay per listing.
 */
function revokeEverySameKeyListing(keys: TrustedKey[], checkpointKeys: TrustedCheckpointKey[]): boolean {
  const lists: Array<Array<TrustedKey | TrustedCheckpointKey>> = [keys, checkpointKeys];
  const revokedAt = new Map<string, string>();
  // A listing that is no object (a store built by hand, never parsed) names no key: it is left as it is.
  const listing = (k: unknown): k is TrustedKey | TrustedCheckpointKey => typeof k === 'object' && k !== null;
  for (const list of lists)
    for (const k of list) {
      if (!listing(k) || k.revokedAt === undefined) continue;
      const publicKey = listedPublicKey(k);
      if (publicKey !== undefined) revokedAt.set(publicKey, earlierTime(revokedAt.get(publicKey), k.revokedAt));
    }
  if (revokedAt.size === 0) return false;
  let changed = false;
  for (const list of lists)
    list.forEach((k, i) => {
      if (!listing(k)) return;
      const publicKey = listedPublicKey(k);
      const at = publicKey === undefined ? undefined : revokedAt.get(publicKey);
      const earliest = earlierTime(k.revokedAt, at);
      if (earliest !== k.revokedAt) {
        list[i] = { ...k, revokedAt: earliest };
        changed = true;
      }
    });
  return changed;
}

/**
 * One trust store as it is verified under: `mergeTrust`'s rule for a store taken alone (verify --trust with one file,
 * the auditor's page with one, verifyChain and verifyBundle given a store). Every listing of a public key (whatever its
 * host, key id or kind) takes the earliest revocation any listing of it carries, so a file written by an older version
 * listing one key under two key ids, one revoked, does not trust the other. Nothing else is changed (no listing is
 * merged or dropped, windows stay per listing); the store is returned as it is when no listing changes, else a copy
 * (the caller's store is never written to).
 * @throws ManifestError `TRUST_INVALID` for a store that is no object or whose `keys` (or `checkpointKeys`) is no list
 */
export function sameKeyRevoked(store: TrustStore): TrustStore {
  checkStoreObject(store);
  checkStoreList(store.keys, 'keys');
  checkStoreList(store.checkpointKeys, 'checkpointKeys');
  const keys = [...store.keys];
  const checkpointKeys = [...(store.checkpointKeys ?? [])];
  if (!revokeEverySameKeyListing(keys, checkpointKeys)) return store;
  return { ...store, keys, ...(store.checkpointKeys !== undefined ? { checkpointKeys } : {}) };
}

/** Code-unit order (never the locale's): the same on every machine. */
export const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The order trust entries are listed in (a digest's, a report's): by host, then key id, each in code-unit order. */
export const byHostThenKeyId = (a: { host: string; keyId: string }, b: { host: string; keyId: string }): number =>
  byText(a.host, b.host) || byText(a.keyId, b.keyId);

/**
 * A field as hashed: a string with no lone surrogate, which the canonical encoding refuses (a store built by hand, not
 * parsed, may hold anything; a parsed one is ASCII). @throws ManifestError
 */
function text(value: unknown): string {
  if (typeof value !== 'string')
    throw new ManifestError('TRUST_INVALID', 'trust store is malformed: a key field that is not a string');
  if (!value.isWellFormed())
    throw new ManifestError('TRUST_INVALID', 'trust store is malformed: a key field with a lone surrogate');
  return value;
}

/** A key's entry as hashed: only the schema's fields, in a fixed set (no `undefined` member). */
function windowed<K extends { notBefore: string; notAfter?: string; revokedAt?: string }, O extends object>(
  k: K,
  own: O,
): O {
  return {
    ...own,
    notBefore: text(k.notBefore),
    ...(k.notAfter !== undefined ? { notAfter: text(k.notAfter) } : {}),
    ...(k.revokedAt !== undefined ? { revokedAt: text(k.revokedAt) } : {}),
  };
}

/**
 * A list of a store, as hashed: `keys` always one, `checkpointKeys` one when present.
 * @throws ManifestError `TRUST_INVALID` for one that is not an array, or an entry that is no object
 */
function listOf<T>(list: T[] | undefined, name: 'keys' | 'checkpointKeys'): T[] {
  checkStoreList(list, name);
  const entries = [...(list ?? [])];
  if (entries.some((k) => typeof k !== 'object' || k === null))
    throw new ManifestError('TRUST_INVALID', `trust store is malformed: an entry of ${name} that is not an object`);
  return entries;
}

/**
 * A store's entries as plain records (each field read once, only the store's own fields), checked: a store built by
 * hand, never parsed, may be anything: TRUST_INVALID, as parseTrustStore says of such a file, for one that is no
 * object, whose lists are none, or an entry no object or a field no string (or one with a lone surrogate).
 */
function storeEntries(store: TrustStore) {
  checkStoreObject(store);
  return {
    keys: listOf(store.keys, 'keys').map((k) =>
      windowed(k, { host: text(k.host), keyId: text(k.keyId), publicKey: text(k.publicKey) }),
    ),
    checkpointKeys: listOf(store.checkpointKeys, 'checkpointKeys').map((k) =>
      windowed(k, { host: text(k.host), keyId: text(k.keyId), vkey: text(k.vkey) }),
    ),
  };
}

/**
 * What a trust store trusts, as one digest: `blake3:` of the RFC 8785 canonical JSON of the store with its `keys`
 * sorted by host then key id, its `checkpointKeys` by host, key id then verifier key, and `checkpointKeys` left out
 * when it lists none. The order of the keys in a file, and of the files merged (`mergeTrust`), does not change it;
 * any key, window or revocation added, dropped or changed does. A verification report names the store it was checked
 * under by this digest (`checked.trust`).
 * @throws ManifestError `TRUST_INVALID` for a store built by hand that is none (a list that is not one, an entry that is
 *   no object, a field that is no string or holds a lone surrogate); a store `parseTrustStore` gave never is.
 */
export function trustDigest(store: TrustStore): Digest {
  const entries = storeEntries(store);
  const keys = entries.keys.sort(byHostThenKeyId);
  const checkpointKeys = entries.checkpointKeys.sort((a, b) => byHostThenKeyId(a, b) || byText(a.vkey, b.vkey));
  return digestOf(
    canonicalBytes(checkpointKeys.length > 0 ? { version: 1, keys, checkpointKeys } : { version: 1, keys }),
  );
}

export function emptyTrustStore(): TrustStore {
  return { version: 1, keys: [] };
}
