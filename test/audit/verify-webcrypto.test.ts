import { webcrypto } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hexToBytes } from '../../store/hash/digest.js';
import { nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import {
  createWebCryptoLineVerifier,
  pointIsCanonical,
  webCryptoLineVerifier,
  type Subtle,
  scalarIsCanonical,
  webCryptoEd25519,
} from '../../manifests/audit/verify-webcrypto.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { inlineLineVerifier } from '../../manifests/audit/verify-line.js';
import { buildBundle, readerOf, signPayload } from '../support/bundle-builder.js';
import { readVector } from '../support/vectors.js';

const subtle = webcrypto.subtle as unknown as Subtle;

describe('WebCrypto Ed25519 (strict)', () => {
  it('gives the Wycheproof result on every test case, as the noble verifier does', async () => {
    const check = webCryptoEd25519(subtle);
    const doc = readVector<any>('ed25519/wycheproof_ed25519_test.json');
    let n = 0;
    for (const group of doc.testGroups) {
      const pub = hexToBytes(group.publicKey?.pk ?? group.key?.pk);
      for (const t of group.tests) {
        const [sig, msg] = [hexToBytes(t.sig), hexToBytes(t.msg)];
        const expected = t.result === 'valid';
        expect(await check(sig, msg, pub), `tcId ${t.tcId} (${t.comment})`).toBe(expected);
        expect(nobleVerifier.verify(sig, msg, pub), `noble tcId ${t.tcId}`).toBe(expected);
        n++;
      }
    }
    expect(n).toBeGreaterThan(100);
  });

  it('gives the answer of the other backends on every ZIP-215 and edge-case vector (small-order keys refused)', async () => {
    const check = webCryptoEd25519(subtle);
    const cases: Array<{ file: string; sig: string; msg: Uint8Array; pub: string }> = [
      ...readVector<Array<{ vk_bytes: string; sig_bytes: string }>>('ed25519/zip215.json').map((c) => ({
        file: 'zip215',
        sig: c.sig_bytes,
        msg: new TextEncoder().encode('Zcash'),
        pub: c.vk_bytes,
      })),
      ...readVector<Array<{ message: string; pub_key: string; signature: string }>>('ed25519/edge-cases.json').map(
        (c) => ({ file: 'edge-cases', sig: c.signature, msg: hexToBytes(c.message), pub: c.pub_key }),
      ),
    ];
    for (const [i, c] of cases.entries()) {
      const [sig, pub] = [hexToBytes(c.sig), hexToBytes(c.pub)];
      const want = nobleVerifier.verify(sig, c.msg, pub);
      expect(nodeVerifier.verify(sig, c.msg, pub), `${c.file} #${i} node`).toBe(want);
      expect(await check(sig, c.msg, pub), `${c.file} #${i} webcrypto`).toBe(want);
    }
  });

  it('refuses a small-order key itself, whatever the platform answers (BoringSSL accepts them)', async () => {
    const permissive: Subtle = { importKey: async () => ({}), verify: async () => true };
    const check = webCryptoEd25519(permissive);
    // The identity as the key, R = B and S = 1: [S]B = R + [k]A for every message, no secret needed.
    const identity = hexToBytes('0100000000000000000000000000000000000000000000000000000000000000');
    const base = hexToBytes('5866666666666666666666666666666666666666666666666666666666666666');
    const sig = new Uint8Array(64);
    sig.set(base, 0);
    sig[32] = 1;
    const msg = new TextEncoder().encode('any manifest');
    expect(nobleVerifier.verify(sig, msg, identity)).toBe(false);
    expect(nodeVerifier.verify(sig, msg, identity)).toBe(false);
    expect(await check(sig, msg, identity)).toBe(false);
    // The same permissive platform is asked about an ordinary key (so the refusal above is the small-order check).
    const ordinary = hexToBytes('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c');
    expect(await check(sig, msg, ordinary)).toBe(true);
  });

  it('rejects S = L and accepts S = L - 1 as a scalar', () => {
    const l = hexToBytes('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010');
    expect(scalarIsCanonical(l, 0)).toBe(false);
    const below = l.slice();
    below[0]! -= 1;
    expect(scalarIsCanonical(below, 0)).toBe(true);
  });

  it('rejects a point encoding whose y is p or above', () => {
    const p = new Uint8Array(32).fill(0xff);
    p[0] = 0xed;
    p[31] = 0x7f;
    expect(pointIsCanonical(p)).toBe(false);
    p[0] = 0xec;
    expect(pointIsCanonical(p)).toBe(true);
  });
});

describe('the WebCrypto line verifier', () => {
  it('reports exactly what the in-thread verifier reports, on good and tampered lines', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 6 }] });
    const lines = [...b.lines];
    const env = JSON.parse(lines[2]!);
    const sig = Buffer.from(env.signatures[0].sig, 'base64');
    sig[3]! ^= 1;
    env.signatures[0].sig = sig.toString('base64');
    lines[2] = JSON.stringify(env);
    // A second, valid signature under the same key id after an invalid one still verifies.
    const twice = JSON.parse(b.lines[4]!);
    twice.signatures.unshift({ keyid: twice.signatures[0].keyid, sig: env.signatures[0].sig });
    lines[4] = JSON.stringify(twice);
    lines.push((await signPayload({ not: 'a manifest' }, b.key)).line);
    const web = await createWebCryptoLineVerifier(b.trust, subtle);
    expect(web).toBeDefined();
    const viaWeb = await verifyBundle(readerOf(lines), { trust: b.trust, lineVerifier: web!, batchSize: 3 });
    const inline = inlineLineVerifier({ trust: b.trust, verifier: nobleVerifier });
    const viaNoble = await verifyBundle(readerOf(lines), { trust: b.trust, lineVerifier: inline, batchSize: 3 });
    expect(viaWeb).toEqual(viaNoble);
    expect(viaWeb.findings.map((f) => `${f.code}@${f.line}`)).toEqual(
      expect.arrayContaining(['SIGNATURE_INVALID@3', 'MANIFEST_INVALID@7']),
    );
    expect(viaWeb.findings.some((f) => f.line === 5)).toBe(false);
  });

  it('checks a valid line once, and runs only lines whose check failed again, with the in-thread verdicts', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 9 }] });
    const lines = [...b.lines];
    const tamper = (sig: string) => {
      const bytes = Buffer.from(sig, 'base64');
      bytes[7]! ^= 1;
      return bytes.toString('base64');
    };
    // Line 2: three valid signatures; line 4: an invalid one then a valid one; line 6: only invalid ones;
    // line 8: a valid signature on a payload whose schema fails (its check holds, its outcome is a finding).
    const three = JSON.parse(lines[1]!);
    three.signatures = [three.signatures[0], three.signatures[0], three.signatures[0]];
    lines[1] = JSON.stringify(three);
    const late = JSON.parse(lines[3]!);
    late.signatures.unshift({ keyid: late.signatures[0].keyid, sig: tamper(late.signatures[0].sig) });
    lines[3] = JSON.stringify(late);
    const bad = JSON.parse(lines[5]!);
    bad.signatures = [0, 1].map(() => ({ keyid: bad.signatures[0].keyid, sig: tamper(bad.signatures[0].sig) }));
    lines[5] = JSON.stringify(bad);
    lines[7] = (
      await signPayload({ host: b.key.host, keyId: b.key.keyId, createdAt: '2026-01-01T00:00:00.000Z' }, b.key)
    ).line;
    let checks = 0;
    const strict = webCryptoEd25519(subtle);
    const counted = webCryptoLineVerifier(b.trust, (sig, msg, pk) => {
      checks++;
      return strict(sig, msg, pk);
    });
    const inline = inlineLineVerifier({ trust: b.trust, verifier: nobleVerifier });
    for (const batchSize of [1, 2, 4, 9]) {
      const viaWeb = await verifyBundle(readerOf(lines), { trust: b.trust, lineVerifier: counted, batchSize });
      const viaNoble = await verifyBundle(readerOf(lines), { trust: b.trust, lineVerifier: inline, batchSize });
      expect(viaWeb).toEqual(viaNoble);
    }
    expect(
      (await verifyBundle(readerOf(lines), { trust: b.trust, lineVerifier: inline })).findings.map(
        (f) => `${f.code}@${f.line}`,
      ),
    ).toEqual(expect.arrayContaining(['SIGNATURE_INVALID@6', 'MANIFEST_INVALID@8']));
    // A bundle of valid lines, three signatures on one of them: one check a line, none repeated.
    checks = 0;
    const valid = [...b.lines];
    valid[1] = JSON.stringify(three);
    const report = await verifyBundle(readerOf(valid), { trust: b.trust, lineVerifier: counted });
    expect(report.ok).toBe(true);
    expect(checks).toBe(valid.length);
  });

  it('declines (undefined) on a platform whose Ed25519 does not verify', async () => {
    const broken = { importKey: subtle.importKey.bind(subtle), verify: async () => true } as unknown as Subtle;
    expect(await createWebCryptoLineVerifier({ version: 1, keys: [] }, broken)).toBeUndefined();
  });
});
