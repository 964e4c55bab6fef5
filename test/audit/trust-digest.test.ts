/** trustDigest of a store built by hand that is none: a coded refusal, never a TypeError. */
import { describe, expect, it } from 'vitest';
import { trustDigest, type TrustStore } from '../../manifests/format/trust.js';

const code = (store: unknown): string | undefined => {
  try {
    trustDigest(store as TrustStore);
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
