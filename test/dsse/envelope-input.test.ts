/**
 * DSSE as specified on input (secure-systems-lab/dsse envelope.md, protocol.md): verifiers accept
 * either base64 alphabet, an absent keyid, unrecognised fields and several signatures; the library's own
 * envelopes keep their one form. The independent envelopes come from securesystemslib and the DSSE
 * reference implementation (test/vectors/dsse/, see its README).
 */
import { leafOfEnvelope } from '../../manifests/tlog/leaf.js';
import { describe, expect, it } from 'vitest';
import { nobleVerifier, type SignatureVerifier } from '../../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { parseEnvelope, serializeEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import { decodeBase64Either, encodeBase64 } from '../../manifests/encoding/base64.js';
import { parseTrustStore } from '../../manifests/format/trust.js';
import { encodeManifest, MANIFEST_PAYLOAD_TYPE } from '../../manifests/format/manifest.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { createWebCryptoLineVerifier, type Subtle } from '../../manifests/audit/verify-webcrypto.js';
import { buildBundle, makeKey, readerOf, trustOf } from '../support/bundle-builder.js';
import { readVector } from '../support/vectors.js';

const variants = readVector<{ variants: Record<string, string> }>('dsse/independent-envelopes.json').variants;
const trust = parseTrustStore(readVector('dsse/trust.json'));

const ACCEPTED = [
  'ssl_keyid_match',
  'ref_keyid_match',
  'ref_no_keyid',
  'urlsafe_padded',
  'extra_top_field',
  'extra_sig_field',
  'two_sigs',
] as const;

/** Standard base64 to the URL-safe alphabet, padding kept. */
const urlSafe = (b64: string) => b64.replace(/\+/g, '-').replace(/\//g, '_');

describe.each<[string, SignatureVerifier]>([
  ['noble', nobleVerifier],
  ['node:crypto', nodeVerifier],
])('verifyManifestEnvelope on independent DSSE envelopes (%s verifier)', (_name, verifier) => {
  const reference = verifyManifestEnvelope(variants.ssl_keyid_match!, { trust, verifier });

  it.each(ACCEPTED)('accepts %s as the same manifest', (name) => {
    const v = verifyManifestEnvelope(variants[name]!, { trust, verifier });
    expect(v.id).toBe(reference.id);
    expect(v.manifest).toEqual(reference.manifest);
    expect(v.payload).toEqual(reference.payload);
  });

  it('refuses unpadded base64 with ENVELOPE_INVALID, as the reference implementation does', () => {
    expect(() => verifyManifestEnvelope(variants.urlsafe_unpadded!, { trust, verifier })).toThrow(
      expect.objectContaining({ code: 'ENVELOPE_INVALID' }),
    );
  });

  it('skips a signature whose keyid names another key (SIGNATURE_INVALID when no other remains)', () => {
    expect(() => verifyManifestEnvelope(variants.ssl_own_keyid!, { trust, verifier })).toThrow(
      expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
    );
  });

  it('accepts two signatures when the good one comes first and the other is by an untrusted key', () => {
    const env = JSON.parse(variants.two_sigs!) as { signatures: unknown[] };
    env.signatures.reverse();
    expect(verifyManifestEnvelope(env, { trust, verifier }).id).toBe(reference.id);
  });

  it('tries a signature whose keyid is empty as one without a keyid (envelope.md: unset is the same as set-but-empty)', () => {
    // Writers that emit every field (protobuf's JSON with defaults, sigstore's bundles) write "keyid": "" for no hint.
    const env = JSON.parse(variants.ref_keyid_match!) as { signatures: Array<{ keyid?: string; sig: string }> };
    env.signatures = env.signatures.map((s) => ({ ...s, keyid: '' }));
    expect(verifyManifestEnvelope(JSON.stringify(env), { trust, verifier }).id).toBe(reference.id);
    const parsed = parseEnvelope(JSON.stringify(env));
    expect(parsed.envelope.signatures[0]!.keyid).toBe(''); // the envelope as given
    expect(parsed.signatures[0]!.keyid).toBeUndefined(); // the hint: none
  });

  it('refuses an envelope whose only keyless signature is by another key', () => {
    const env = JSON.parse(variants.two_sigs!) as { signatures: Array<{ keyid?: string; sig: string }> };
    env.signatures = [{ sig: env.signatures[0]!.sig }];
    expect(() => verifyManifestEnvelope(env, { trust, verifier })).toThrow(
      expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
    );
    env.signatures = [{ keyid: '', sig: env.signatures[0]!.sig }];
    expect(() => verifyManifestEnvelope(env, { trust, verifier })).toThrow(
      expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
    );
  });
});

describe('parseEnvelope (DSSE input forms)', () => {
  const good = JSON.parse(variants.ssl_keyid_match!) as {
    payloadType: string;
    payload: string;
    signatures: Array<{ keyid: string; sig: string }>;
  };

  it('ignores unknown envelope and signature fields, keeping only the DSSE fields', () => {
    const parsed = parseEnvelope(variants.extra_top_field!);
    expect(Object.keys(parsed.envelope).sort()).toEqual(['payload', 'payloadType', 'signatures']);
    expect(Object.keys(parseEnvelope(variants.extra_sig_field!).envelope.signatures[0]!).sort()).toEqual([
      'keyid',
      'sig',
    ]);
  });

  it('reads an absent keyid as absent', () => {
    const parsed = parseEnvelope(variants.ref_no_keyid!);
    expect(parsed.signatures[0]!.keyid).toBeUndefined();
    expect(parsed.envelope.signatures[0]).not.toHaveProperty('keyid');
  });

  it('ignores a __proto__ field without taking fields from it', () => {
    const parsed = parseEnvelope(`{"__proto__":{"payloadType":"x"},${variants.ssl_keyid_match!.slice(1)}`);
    expect(parsed.envelope.payloadType).toBe(MANIFEST_PAYLOAD_TYPE);
    expect(() => parseEnvelope(`{"__proto__":${variants.ssl_keyid_match!}}`)).toThrow(
      expect.objectContaining({ code: 'ENVELOPE_INVALID' }),
    );
  });

  it.each([
    ['a keyid that is not a string', { ...good, signatures: [{ keyid: 7, sig: good.signatures[0]!.sig }] }],
    ['a signature without sig', { ...good, signatures: [{ keyid: good.signatures[0]!.keyid }] }],
    ['a signature that is not an object', { ...good, signatures: ['x'] }],
    ['a payload mixing the two base64 alphabets', { ...good, payload: `-${good.payload.slice(1, -4)}+A==` }],
    ['unpadded URL-safe base64', { ...good, payload: urlSafe(good.payload).replace(/=+$/, '') }],
  ])('refuses %s with ENVELOPE_INVALID', (_, value) => {
    expect(() => parseEnvelope(value)).toThrow(expect.objectContaining({ code: 'ENVELOPE_INVALID' }));
  });

  it('decodes both alphabets to the same bytes and refuses a mix', () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const std = encodeBase64(bytes);
    expect(std).toMatch(/[+/]/);
    expect(decodeBase64Either(std)).toEqual(bytes);
    expect(decodeBase64Either(urlSafe(std))).toEqual(bytes);
    expect(decodeBase64Either(urlSafe(std).replace('-', '+'))).toBeUndefined();
  });

  it('gives the tree the payload bytes of either alphabet, as the signature check takes them (leafOfEnvelope)', () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const std = encodeBase64(bytes);
    const envelope = (payload: string) =>
      JSON.stringify({ payloadType: MANIFEST_PAYLOAD_TYPE, payload, signatures: [] });
    expect(leafOfEnvelope(envelope(std))).toEqual(bytes);
    // The old code decoded the standard alphabet alone: such a line had no leaf, a false TREE_ROOT_MISMATCH in a
    // bundle whose lines step 1 had verified (a payload's base64 differs in the two alphabets where its bytes hold
    // '>', '?' or '~' at the right offset: a keyId may).
    expect(leafOfEnvelope(envelope(urlSafe(std)))).toEqual(bytes);
    for (const payload of [urlSafe(std).replace('-', '+'), urlSafe(std).replace(/=+$/, ''), 'not base64'])
      expect(() => leafOfEnvelope(envelope(payload))).toThrow(expect.objectContaining({ code: 'ENVELOPE_INVALID' }));
  });
});

describe('signEnvelope (library output)', () => {
  it('still writes exactly payloadType, payload, signatures[{keyid, sig}] in standard padded base64', async () => {
    const key = makeKey('host-a');
    const payload = new TextEncoder().encode('{"a":1}');
    const env = await signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, key.signer);
    const text = serializeEnvelope(env);
    const sig = JSON.parse(text).signatures[0].sig as string;
    expect(text).toBe(
      `{"payloadType":"${MANIFEST_PAYLOAD_TYPE}","payload":"${encodeBase64(payload)}",` +
        `"signatures":[{"keyid":"${key.signer.keyId}","sig":"${sig}"}]}`,
    );
    expect(sig).toMatch(/^[A-Za-z0-9+/]{86}==$/);
  });
});

describe('non-canonical payloads', () => {
  it('are still refused (MANIFEST_INVALID) when signed in a DSSE input form', async () => {
    const key = makeKey('interop-host-1');
    const manifest = verifyManifestEnvelope(variants.ssl_keyid_match!, { trust }).manifest;
    const loose = new TextEncoder().encode(JSON.stringify({ ...manifest, keyId: key.signer.keyId }, null, 1));
    expect(loose).not.toEqual(encodeManifest({ ...manifest, keyId: key.signer.keyId }));
    const env = await signEnvelope(MANIFEST_PAYLOAD_TYPE, loose, key.signer);
    const input = { ...env, payload: urlSafe(env.payload), signatures: [{ sig: urlSafe(env.signatures[0]!.sig) }] };
    expect(() => verifyManifestEnvelope(input, { trust: trustOf(key.trusted) })).toThrow(
      expect.objectContaining({ code: 'MANIFEST_INVALID' }),
    );
  });

  it('are refused (MANIFEST_INVALID) when a byte order mark goes before the canonical bytes', async () => {
    const key = makeKey('interop-host-1');
    const manifest = verifyManifestEnvelope(variants.ssl_keyid_match!, { trust }).manifest;
    const canonical = encodeManifest({ ...manifest, keyId: key.signer.keyId });
    const marked = new Uint8Array([0xef, 0xbb, 0xbf, ...canonical]);
    const good = await signEnvelope(MANIFEST_PAYLOAD_TYPE, canonical, key.signer);
    expect(verifyManifestEnvelope(good, { trust: trustOf(key.trusted) }).manifest.keyId).toBe(key.signer.keyId);
    const env = await signEnvelope(MANIFEST_PAYLOAD_TYPE, marked, key.signer);
    expect(() => verifyManifestEnvelope(env, { trust: trustOf(key.trusted) })).toThrow(
      expect.objectContaining({ code: 'MANIFEST_INVALID' }),
    );
  });
});

describe('verifyBundle on envelopes in DSSE input forms', () => {
  it('finds nothing in a bundle whose lines use URL-safe base64, no keyid and extra fields', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', principal: 'alice', count: 3 }] });
    const lines = b.lines.map((line) => {
      const e = JSON.parse(line) as { payload: string; signatures: Array<{ keyid?: string; sig: string }> };
      return JSON.stringify({
        'x-origin': 'another DSSE writer',
        payloadType: MANIFEST_PAYLOAD_TYPE,
        payload: urlSafe(e.payload),
        signatures: e.signatures.map((s) => ({ sig: urlSafe(s.sig), cert: '' })),
      });
    });
    const report = await verifyBundle(readerOf(lines, { blobs: b.blobs }), { trust: b.trust });
    expect(report.findings).toEqual([]);
    expect(report.counts).toMatchObject({ manifests: 3, blobsChecked: 3 });
    expect(report.chains[0]!.head).toBe(b.chains.get('s1')!.built[2]!.id);
  });
});

describe('verifyBundle on envelopes whose keyid is empty', () => {
  it('finds nothing: an empty keyid is no hint, as an absent one (every line verifier, webcrypto included)', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', principal: 'alice', count: 3 }] });
    const lines = b.lines.map((line) => {
      const e = JSON.parse(line) as { signatures: Array<{ keyid?: string; sig: string }> };
      return JSON.stringify({ ...e, signatures: e.signatures.map((s) => ({ ...s, keyid: '' })) });
    });
    const report = await verifyBundle(readerOf(lines, { blobs: b.blobs }), { trust: b.trust });
    expect(report.findings).toEqual([]);
    expect(report.counts).toMatchObject({ manifests: 3 });
    const subtle = (globalThis as { crypto?: { subtle?: Subtle } }).crypto?.subtle;
    const webcrypto = await createWebCryptoLineVerifier(b.trust, subtle);
    expect(webcrypto).toBeDefined();
    const outcomes = await webcrypto!.verifyLines(lines.map((text, i) => ({ line: i + 1, text })));
    expect(outcomes.map((o) => o.ok)).toEqual([true, true, true]);
  });
});

describe('public entry point', () => {
  it('exports nodeVerifier (docs/AUDIT.md) from handoff-ledger, and it verifies what noble verifies', async () => {
    const api = await import('../../src/index.js');
    expect(api.nodeVerifier).toBe(nodeVerifier);
    expect(api.nodeVerifier.name).toBe('node:crypto');
    const v = verifyManifestEnvelope(variants.ref_no_keyid!, { trust, verifier: api.nodeVerifier });
    expect(v.id).toBe(verifyManifestEnvelope(variants.ref_no_keyid!, { trust, verifier: nobleVerifier }).id);
  });
});
