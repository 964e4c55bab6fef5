/** trustDigest and mergeTrust of a store built by hand that is none: a coded refusal, never a TypeError. */
import { describe, expect, it } from 'vitest';
import { mergeTrust, trustDigest, type TrustStore } from '../../manifests/audit/index.js';

const code = (store: unknown, of: (store: TrustStore) => unknown = trustDigest): string | undefined => {
  try {
    of(store as TrustStore);
  } catch (err) {
    return (err as { code?: string }).code ?? `uncoded ${(err as Error).name}`;
  }
  return undefined;
};

describe('trustDigest', () => {
  it('refuses what is no trust store with TRUST_INVALID', () => {
    const key = { host: 'h', keyId: 'k', publicKey: 'p', notBefore: '2026-01-01T00:00:00.000Z' };
    for (const store of [
      null,
      7,
      'store',
      { version: 1 },
      { version: 1, keys: 'h1' },
      { version: 1, keys: [null] },
      { version: 1, keys: [7] },
      { version: 1, keys: [{ ...key, host: 1 }] },
      { version: 1, keys: [{ ...key, notAfter: {} }] },
      { version: 1, keys: [], checkpointKeys: {} },
      { version: 1, keys: [], checkpointKeys: [null] },
      // A lone surrogate has no UTF-8 (no trust file holds one): the canonical encoding threw a TypeError.
      { version: 1, keys: [{ ...key, keyId: 'k\ud800' }] },
      { version: 1, keys: [{ ...key, host: '\udc00h' }] },
    ])
      expect(code(store), JSON.stringify(store)).toBe('TRUST_INVALID');
    expect(code({ version: 1, keys: [key] })).toBeUndefined();
  });

  it('names the list that is none, keys or checkpointKeys, in one check of each', () => {
    const message = (store: unknown) => {
      try {
        trustDigest(store as TrustStore);
      } catch (err) {
        return (err as Error).message;
      }
      return undefined;
    };
    expect(message({ version: 1 })).toBe('trust store is malformed: keys is not a list');
    expect(message({ version: 1, keys: 'h1' })).toBe('trust store is malformed: keys is not a list');
    // checkpointKeys may be absent, but not something else; it was "a key list that is not an array".
    expect(message({ version: 1, keys: [], checkpointKeys: {} })).toBe(
      'trust store is malformed: checkpointKeys is not a list',
    );
    expect(message({ version: 1, keys: [], checkpointKeys: null })).toBe(
      'trust store is malformed: checkpointKeys is not a list',
    );
    expect(message({ version: 1, keys: [7] })).toBe('trust store is malformed: an entry of keys that is not an object');
    expect(message({ version: 1, keys: [], checkpointKeys: [null] })).toBe(
      'trust store is malformed: an entry of checkpointKeys that is not an object',
    );
    expect(message({ version: 1, keys: [] })).toBeUndefined();
  });
});

describe("mergeTrust (exported: a library auditor merges several hosts' trust files as verify --trust does)", () => {
  const key = { host: 'h', keyId: 'k', publicKey: 'p', notBefore: '2026-01-01T00:00:00.000Z' };
  const good = { version: 1 as const, keys: [key] };

  it('refuses what is no trust store with TRUST_INVALID, beside a store or alone (null is no "no store")', () => {
    for (const store of [
      null,
      7,
      'store',
      { version: 1 },
      { version: 1, keys: 'h1' },
      { version: 1, keys: [null] },
      { version: 1, keys: [7] },
      { version: 1, keys: [{ ...key, host: 1 }] },
      { version: 1, keys: [{ ...key, publicKey: 1 }] },
      { version: 1, keys: [{ ...key, notAfter: {} }] },
      { version: 1, keys: [], checkpointKeys: {} },
      { version: 1, keys: [], checkpointKeys: [null] },
    ]) {
      expect(
        code(store, (s) => mergeTrust(good, s)),
        JSON.stringify(store),
      ).toBe('TRUST_INVALID');
      expect(
        code(store, (s) => mergeTrust(s)),
        JSON.stringify(store),
      ).toBe('TRUST_INVALID');
    }
  });

  it('merges stores (undefined: none), refusing one key id with two public keys', () => {
    expect(
      mergeTrust(good, undefined, { version: 1, keys: [{ ...key, revokedAt: '2026-06-01T00:00:00.000Z' }] }),
    ).toEqual({
      version: 1,
      keys: [{ ...key, revokedAt: '2026-06-01T00:00:00.000Z' }],
    });
    expect(code({ version: 1, keys: [{ ...key, publicKey: 'q' }] }, (s) => mergeTrust(good, s))).toBe('TRUST_INVALID');
  });
});
