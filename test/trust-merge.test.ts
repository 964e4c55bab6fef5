/**
 * mergeTrust indexes the union by host and key id: the same stores, keys, windows, order and refusals as the linear
 * search it replaced (kept here as the reference), and a number of field reads that grows with the keys, not with
 * their square.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  mergeTrust,
  mergeTrustedKey,
  restrictiveWindow,
  type TrustedCheckpointKey,
  type TrustedKey,
  type TrustStore,
} from '../manifests/format/trust.js';

/** The algorithm before the index: a scan of the union for every key merged. */
function linearMergeTrust(...stores: Array<TrustStore | undefined>): TrustStore {
  const keys: TrustedKey[] = [];
  const checkpointKeys: TrustedCheckpointKey[] = [];
  for (const s of stores) {
    for (const k of s?.keys ?? []) {
      const at = keys.findIndex((x) => x.host === k.host && x.keyId === k.keyId);
      if (at < 0) keys.push(k);
      else keys[at] = mergeTrustedKey(keys[at]!, k);
    }
    for (const k of s?.checkpointKeys ?? []) {
      const at = checkpointKeys.findIndex((x) => x.host === k.host && x.vkey === k.vkey);
      if (at < 0) checkpointKeys.push(k);
      else checkpointKeys[at] = restrictiveWindow(checkpointKeys[at]!, k);
    }
  }
  return checkpointKeys.length > 0 ? { version: 1, keys, checkpointKeys } : { version: 1, keys };
}

const outcome = (merge: () => TrustStore): unknown => {
  try {
    return { store: merge() };
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
};

// Few hosts, ids and keys, so that stores share keys often: the same key with other windows, a key id listed twice
// in one store, the same id with another public key (refused), the same verifier key under two key ids.
const time = fc.integer({ min: 0, max: 40 }).map((d) => new Date(Date.UTC(2026, 0, 1 + d)).toISOString());
const windowed = {
  notBefore: time,
  notAfter: fc.option(time, { nil: undefined }),
  revokedAt: fc.option(time, { nil: undefined }),
};
const drop = <K extends object>(k: K): K =>
  Object.fromEntries(Object.entries(k).filter(([, v]) => v !== undefined)) as K;
const key = fc
  .record({
    host: fc.constantFrom('h1', 'h2', 'h3'),
    keyId: fc.constantFrom('ed25519:a', 'ed25519:b', 'ed25519:c', 'ed25519:d'),
    publicKey: fc.constantFrom('P1', 'P1', 'P1', 'P2'),
    ...windowed,
  })
  .map(drop);
const checkpointKey = fc
  .record({
    host: fc.constantFrom('h1', 'h2'),
    keyId: fc.constantFrom('ed25519:a', 'ed25519:e'),
    vkey: fc.constantFrom('log+00000001+AQ', 'log+00000002+AQ', 'other+00000003+AQ'),
    ...windowed,
  })
  .map(drop);
const store = fc.option(
  fc
    .record({
      keys: fc.array(key, { maxLength: 12 }),
      checkpointKeys: fc.option(fc.array(checkpointKey, { maxLength: 6 }), { nil: undefined }),
    })
    .map((s) => ({ version: 1, ...drop(s) }) as TrustStore),
  { nil: undefined, freq: 8 },
);

describe('mergeTrust', () => {
  it('gives what the linear search gave, for random stores with keys listed again under other windows', () => {
    fc.assert(
      fc.property(fc.array(store, { maxLength: 5 }), (stores) => {
        expect(outcome(() => mergeTrust(...stores))).toEqual(outcome(() => linearMergeTrust(...stores)));
      }),
      { numRuns: 2000 },
    );
  });

  it('reads each key of two 2,000-key stores a bounded number of times, where the scan read them 10 million times', () => {
    let reads = 0;
    const counted = (host: string, i: number): TrustedKey => {
      const k = { keyId: `ed25519:${i}`, publicKey: 'P', notBefore: '2026-01-01T00:00:00.000Z' } as TrustedKey;
      Object.defineProperty(k, 'host', {
        get: () => {
          reads++;
          return host;
        },
        enumerable: true,
      });
      return k;
    };
    const n = 2000;
    const a: TrustStore = { version: 1, keys: Array.from({ length: n }, (_, i) => counted('h1', i)) };
    // Half the second store's keys are the first's again: merged, not appended.
    const b: TrustStore = { version: 1, keys: Array.from({ length: n }, (_, i) => counted(i % 2 ? 'h1' : 'h2', i)) };
    const merged = mergeTrust(a, b);
    expect(merged.keys.length).toBe(n + n / 2);
    expect(reads).toBeLessThan(10 * 2 * n);
  });
});
