/**
 * findTrustedKey finds a key through an index of the store's `keys` list, built once per list: the same answers as
 * the linear search it replaced (kept here as the reference) for random stores and queries (windows, revocations,
 * times that do not parse, a key listed twice, checkpoint keys of the same name, stores changed in place), and a
 * number of field reads that grows with the keys and the lookups, not with their product.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeBase64Url } from '../manifests/encoding/base64.js';
import { findTrustedKey, type KeyLookup } from '../manifests/format/trust-lookup.js';
import type { TrustedKey, TrustStore } from '../manifests/format/trust.js';

const quoted = (value: string): string =>
  value.length > 100 ? `${JSON.stringify(value.slice(0, 100))}…` : JSON.stringify(value);

/** The lookup before the index: a scan of `trust.keys` for every manifest. */
function linearFindTrustedKey(trust: TrustStore, host: string, keyId: string, at: string): KeyLookup {
  const key = trust.keys.find((k) => k.host === host && k.keyId === keyId);
  const named = () => `key ${quoted(keyId)} of host ${quoted(host)}`;
  if (!key) return { ok: false, code: 'KEY_UNTRUSTED', message: `${named()} is not trusted` };
  const t = Date.parse(at);
  if (key.revokedAt !== undefined && !(t < Date.parse(key.revokedAt))) {
    return { ok: false, code: 'KEY_REVOKED', message: `${named()} was revoked at ${quoted(key.revokedAt)}` };
  }
  if (!(t >= Date.parse(key.notBefore)) || (key.notAfter !== undefined && !(t < Date.parse(key.notAfter)))) {
    return { ok: false, code: 'KEY_EXPIRED', message: `${named()} was not valid at ${quoted(at)}` };
  }
  return { ok: true, key, publicKey: decodeBase64Url(key.publicKey)! };
}

/** What a lookup answered, with the listing found by identity (which of two listings of one key). */
const outcome = (find: typeof findTrustedKey, trust: TrustStore, host: string, keyId: string, at: string): unknown => {
  try {
    const r = find(trust, host, keyId, at);
    return r.ok ? { ok: true, at: trust.keys.indexOf(r.key), publicKey: [...r.publicKey] } : r;
  } catch (err) {
    return { threw: (err as Error).constructor.name, message: (err as Error).message };
  }
};

const publicKeys = [1, 2, 3].map((b) => Buffer.alloc(32, b).toString('base64url'));
const time = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.integer({ min: 0, max: 40 }).map((d) => new Date(Date.UTC(2026, 0, 1 + d)).toISOString()),
  },
  { weight: 1, arbitrary: fc.constant('not a time') },
);
const drop = <K extends object>(k: K): K =>
  Object.fromEntries(Object.entries(k).filter(([, v]) => v !== undefined)) as K;
const hosts = ['h1', 'h2', 'h3', '__proto__', 'constructor'];
const keyIds = ['ed25519:a', 'ed25519:b', 'ed25519:c', 'ed25519:d'];
// Few hosts and ids: a key listed twice (the first listing decides), ids shared across hosts.
const key = fc
  .record({
    host: fc.constantFrom(...hosts),
    keyId: fc.constantFrom(...keyIds),
    publicKey: fc.constantFrom(...publicKeys),
    notBefore: time,
    notAfter: fc.option(time, { nil: undefined }),
    revokedAt: fc.option(time, { nil: undefined }),
  })
  .map(drop) as fc.Arbitrary<TrustedKey>;
// Checkpoint keys under the same hosts and ids: never found by a manifest's lookup.
const checkpointKey = fc.record({
  host: fc.constantFrom(...hosts),
  keyId: fc.constantFrom(...keyIds),
  vkey: fc.constant('log+00000001+AQ'),
  notBefore: time,
});
const store = fc
  .record({ keys: fc.array(key, { maxLength: 14 }), checkpointKeys: fc.array(checkpointKey, { maxLength: 6 }) })
  .map((s) => ({ version: 1, ...s }) as TrustStore);
const query = fc.record({
  host: fc.constantFrom(...hosts, 'h4'),
  keyId: fc.constantFrom(...keyIds, 'ed25519:e'),
  at: time,
});

describe('findTrustedKey', () => {
  it('gives what the linear search gave, for random stores and many queries in each', () => {
    fc.assert(
      fc.property(store, fc.array(query, { minLength: 1, maxLength: 30 }), (trust, queries) => {
        for (const q of queries)
          expect(outcome(findTrustedKey, trust, q.host, q.keyId, q.at)).toEqual(
            outcome(linearFindTrustedKey, trust, q.host, q.keyId, q.at),
          );
      }),
      { numRuns: 1500 },
    );
  });

  it('gives what the linear search gave when the store changes in place between lookups', () => {
    // Keys added, taken off the end, revoked or closed in place, the listing found replaced, `keys` given another list.
    const change = fc.oneof(
      key.map((k) => (t: TrustStore) => void t.keys.push(k)),
      fc.constant((t: TrustStore) => void t.keys.pop()),
      fc.tuple(fc.nat(), time).map(([i, at]) => (t: TrustStore) => {
        if (t.keys.length > 0) t.keys[i % t.keys.length]!.revokedAt = at;
      }),
      fc.tuple(fc.nat(), time).map(([i, at]) => (t: TrustStore) => {
        if (t.keys.length > 0) t.keys[i % t.keys.length]!.notAfter = at;
      }),
      query.map((q) => (t: TrustStore) => {
        const at = t.keys.findIndex((k) => k.host === q.host && k.keyId === q.keyId);
        if (at >= 0) t.keys[at] = { ...t.keys[at]!, revokedAt: q.at };
      }),
      fc.constant((t: TrustStore) => void (t.keys = [...t.keys].reverse())),
    );
    fc.assert(
      fc.property(
        store,
        fc.array(fc.tuple(query, fc.option(change, { nil: undefined })), { minLength: 1, maxLength: 30 }),
        (trust, steps) => {
          for (const [q, changeIt] of steps) {
            expect(outcome(findTrustedKey, trust, q.host, q.keyId, q.at)).toEqual(
              outcome(linearFindTrustedKey, trust, q.host, q.keyId, q.at),
            );
            changeIt?.(trust);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('answers as the scan did for stores built by hand that the index cannot stand for', () => {
    const valid = { host: 'h1', keyId: 'ed25519:a', publicKey: publicKeys[0]!, notBefore: '2026-01-01T00:00:00Z' };
    const odd: unknown[][] = [
      [valid, null],
      [null, valid],
      [{ ...valid, host: 1 }, valid],
      [{ ...valid, keyId: undefined }, valid],
      // eslint-disable-next-line no-sparse-arrays
      [, valid],
    ];
    for (const keys of odd) {
      const trust = { version: 1, keys } as unknown as TrustStore;
      // (A host that is no text is refused before any lookup: test/primitive-arguments.test.ts.)
      for (const [host, keyId] of [
        ['h1', 'ed25519:a'],
        ['h2', 'ed25519:a'],
      ] as Array<[string, string]>)
        for (let i = 0; i < 2; i++)
          expect(outcome(findTrustedKey, trust, host, keyId, '2026-01-02T00:00:00Z')).toEqual(
            outcome(linearFindTrustedKey, trust, host, keyId, '2026-01-02T00:00:00Z'),
          );
    }
  });

  it('answers KEY_UNTRUSTED for a listing whose public key is no Ed25519 key, not a TypeError', () => {
    // A store built by hand: parseTrustStore refuses these; verifyBundle reported each manifest MANIFEST_INVALID
    // "unverifiable: Cannot read properties of undefined (reading 'slice')".
    for (const publicKey of ['x', 'not base64url!', Buffer.alloc(31, 1).toString('base64url'), 7]) {
      const trust = {
        version: 1,
        keys: [{ host: 'h1', keyId: 'ed25519:a', publicKey, notBefore: '2026-01-01T00:00:00Z' }],
      } as unknown as TrustStore;
      expect(findTrustedKey(trust, 'h1', 'ed25519:a', '2026-01-02T00:00:00Z')).toEqual({
        ok: false,
        code: 'KEY_UNTRUSTED',
        message:
          'key "ed25519:a" of host "h1" is listed with a public key that is no Ed25519 key (32 bytes, base64url)',
      });
    }
  });

  it('reads each key of a 2,000-key store a bounded number of times over 2,000 lookups, where the scan read them 2 million times', () => {
    let reads = 0;
    const n = 2000;
    const keys = Array.from({ length: n }, (_, i) => {
      const k = { keyId: `ed25519:${i}`, publicKey: publicKeys[0]!, notBefore: '2026-01-01T00:00:00.000Z' };
      Object.defineProperty(k, 'host', {
        get: () => {
          reads++;
          return 'h1';
        },
        enumerable: true,
      });
      return k as TrustedKey;
    });
    const trust: TrustStore = { version: 1, keys };
    for (let i = n - 1; i >= 0; i--)
      expect(findTrustedKey(trust, 'h1', `ed25519:${i}`, '2026-01-02T00:00:00.000Z').ok).toBe(true);
    expect(findTrustedKey(trust, 'h1', 'ed25519:none', '2026-01-02T00:00:00.000Z').ok).toBe(false);
    expect(reads).toBeLessThan(10 * n);
  });
});
