import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { hexToBytes } from '../store/hash/digest.js';
import { nobleVerifier, nobleSign, noblePublicKey, type SignatureVerifier } from '../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { readVector } from './support/vectors.js';

const verifiers: SignatureVerifier[] = [nobleVerifier, nodeVerifier];
const utf8 = (s: string) => new TextEncoder().encode(s);

// RFC 8032 section 7.1, TEST 1 and TEST 2: inline so a standalone checkout still checks the primitive.
const RFC8032_INLINE = [
  {
    priv: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    pub: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    msg: '',
    sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  },
  {
    priv: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    pub: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    msg: '72',
    sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  },
];

type Rfc = { priv: string; pub: string; msg: string; sig: string };

function checkRfc(vectors: Rfc[]) {
  vectors.forEach((v, i) => {
    expect(Buffer.from(noblePublicKey(hexToBytes(v.priv))).toString('hex'), `pub #${i}`).toBe(v.pub);
    expect(Buffer.from(nobleSign(hexToBytes(v.msg), hexToBytes(v.priv))).toString('hex'), `sig #${i}`).toBe(v.sig);
    for (const b of verifiers) {
      expect(b.verify(hexToBytes(v.sig), hexToBytes(v.msg), hexToBytes(v.pub)), `${b.name} #${i}`).toBe(true);
      const bad = hexToBytes(v.sig);
      bad[5]! ^= 1;
      expect(b.verify(bad, hexToBytes(v.msg), hexToBytes(v.pub)), `${b.name} flipped #${i}`).toBe(false);
    }
  });
}

describe('Ed25519', () => {
  it('signs and verifies the inline RFC 8032 vectors with every backend', () => checkRfc(RFC8032_INLINE));

  it('signs and verifies every RFC 8032 vector from shared/vectors', () => {
    const vectors = readVector<Rfc[]>('ed25519/rfc8032.json');
    checkRfc(vectors);
  });

  it('gives the Wycheproof result on every test case with every backend (strict RFC 8032)', () => {
    const doc = readVector<any>('ed25519/wycheproof_ed25519_test.json');
    let n = 0;
    for (const group of doc.testGroups) {
      const pub = hexToBytes(group.publicKey?.pk ?? group.key?.pk);
      for (const t of group.tests) {
        for (const b of verifiers) {
          expect(b.verify(hexToBytes(t.sig), hexToBytes(t.msg), pub), `${b.name} tcId ${t.tcId} (${t.comment})`).toBe(
            t.result === 'valid',
          );
        }
        n++;
      }
    }
    expect(n).toBe(doc.numberOfTests);
  });

  it('agrees across backends on the ZIP-215 cases and never accepts what strict RFC 8032 forbids', () => {
    const cases =
      readVector<Array<{ vk_bytes: string; sig_bytes: string; valid_legacy: boolean; valid_zip215: boolean }>>(
        'ed25519/zip215.json',
      );
    const msg = utf8('Zcash');
    cases.forEach((c, i) => {
      const results = verifiers.map((b) => b.verify(hexToBytes(c.sig_bytes), msg, hexToBytes(c.vk_bytes)));
      expect(results, `case #${i}`).toEqual(results.map(() => results[0]));
      // These are all small-order or non-canonical corner cases: a strict verifier accepts none that ZIP-215 rejects.
      if (!c.valid_zip215) expect(results[0], `case #${i}`).toBe(false);
    });
  });

  it('agrees across backends on every permissive/strict edge case, the two mixed-order ones refused', () => {
    const cases = readVector<Array<{ message: string; pub_key: string; signature: string }>>('ed25519/edge-cases.json');
    cases.forEach((c, i) => {
      const results = verifiers.map((b) =>
        b.verify(hexToBytes(c.signature), hexToBytes(c.message), hexToBytes(c.pub_key)),
      );
      expect(results, `edge case #${i}`).toEqual(results.map(() => results[0]));
      // Cases 4 and 5 pass only the cofactored equation (a small-order component in R): every backend checks the
      // cofactorless one ([S]B = R + [k]A), as OpenSSL and WebCrypto do, so all refuse them.
      if (i === 4 || i === 5) expect(results[0], `edge case #${i}`).toBe(false);
    });
  });

  it('agrees across backends on random keys, messages and mutated signatures', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ maxLength: 300 }),
        fc.nat(511),
        (seed, msg, bit) => {
          const pub = noblePublicKey(seed);
          const sig = nobleSign(msg, seed);
          for (const b of verifiers) expect(b.verify(sig, msg, pub)).toBe(true);
          const bad = sig.slice();
          bad[bit >> 3]! ^= 1 << (bit & 7);
          const results = verifiers.map((b) => b.verify(bad, msg, pub));
          expect(results[0]).toBe(results[1]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('returns false, not an exception, for wrong lengths', () => {
    for (const b of verifiers) {
      expect(b.verify(new Uint8Array(63), new Uint8Array(), new Uint8Array(32))).toBe(false);
      expect(b.verify(new Uint8Array(64), new Uint8Array(), new Uint8Array(31))).toBe(false);
    }
  });
});

describe('node:crypto verifier cost', () => {
  it('refuses a garbage signature at about the cost of accepting a valid one (no pure-JS second opinion)', () => {
    const seed = new Uint8Array(32).fill(3);
    const pub = noblePublicKey(seed);
    const msg = utf8('cost of a refusal');
    const sig = nobleSign(msg, seed);
    const garbage = Array.from({ length: 64 }, (_, i) => {
      const g = sig.slice();
      g[40 + (i % 20)]! ^= 1 + i; // S changed: a well-formed signature that does not verify
      return g;
    });
    const time = (sigs: Uint8Array[]) => {
      const t0 = performance.now();
      for (let round = 0; round < 5; round++) for (const s of sigs) nodeVerifier.verify(s, msg, pub);
      return performance.now() - t0;
    };
    const valid = Array.from({ length: 64 }, () => sig);
    time(valid);
    time(garbage);
    // Interleaved, best of three: a loaded machine slows both sides alike.
    const ratio = Math.min(...[0, 1, 2].map(() => time(garbage) / time(valid)));
    expect(garbage.every((g) => !nodeVerifier.verify(g, msg, pub))).toBe(true);
    expect(ratio).toBeLessThan(3);
  });
});
