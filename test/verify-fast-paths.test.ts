import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { canonicalize } from '../manifests/encoding/canonical.js';
import { decodeBase64, encodeBase64 } from '../manifests/encoding/base64.js';
import { canonicalManifestText } from '../manifests/format/manifest-text.js';
import {
  encodeManifest,
  manifestSchema,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Manifest,
} from '../manifests/format/manifest.js';
import { keyIdOf, type TrustStore } from '../manifests/format/trust.js';
import { pae } from '../manifests/crypto/envelope.js';
import { noblePublicKey, nobleSign } from '../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { verifyManifestEnvelope } from '../manifests/crypto/verify-manifest.js';
import { encodeBase64Url } from '../manifests/encoding/base64.js';
import { ManifestError } from '../manifests/errors.js';

const id = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,20}$/);
const digest = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `blake3:${Buffer.from(b).toString('hex')}`);
const time = fc
  .integer({ min: Date.parse('2000-01-01T00:00:00.000Z'), max: Date.parse('2099-12-31T23:59:59.999Z') })
  .map((t) => new Date(t).toISOString());

const manifestArb: fc.Arbitrary<Manifest> = fc
  .record(
    {
      host: id,
      principal: id,
      session: id,
      run: id,
      seq: fc.nat({ max: 2 ** 40 }),
      prevDigest: digest,
      summary: fc.record({ digest, size: fc.nat({ max: Number.MAX_SAFE_INTEGER }) }),
      covers: fc.option(
        fc.record({ transcriptThrough: fc.nat(), transcriptDigest: digest }, { requiredKeys: ['transcriptThrough'] }),
        { nil: undefined },
      ),
      createdAt: time,
      keyId: fc.stringMatching(/^[\x21-\x7e]{1,40}$/),
    },
    { requiredKeys: ['host', 'principal', 'session', 'run', 'seq', 'prevDigest', 'summary', 'createdAt', 'keyId'] },
  )
  .map((r) => ({
    v: 1 as const,
    kind: 'compaction' as const,
    host: r.host,
    principal: r.principal,
    session: r.session,
    run: r.run,
    seq: r.seq,
    prev: r.seq === 0 ? null : (r.prevDigest as Manifest['prev']),
    summary: {
      digest: r.summary.digest as Manifest['summary']['digest'],
      size: r.summary.size,
      mediaType: SUMMARY_MEDIA_TYPE,
    },
    ...(r.covers ? { covers: r.covers as Manifest['covers'] } : {}),
    createdAt: r.createdAt,
    keyId: r.keyId,
  }));

describe('canonicalManifestText', () => {
  it('equals the generic RFC 8785 canonicalizer on every manifest the schema accepts', () => {
    fc.assert(
      fc.property(manifestArb, (m) => {
        expect(manifestSchema.safeParse(m).success).toBe(true);
        expect(canonicalManifestText(m)).toBe(canonicalize(m));
      }),
      { numRuns: 500 },
    );
  });

  it('is ASCII for every schema-valid manifest, so its length is its byte length', () => {
    fc.assert(
      fc.property(manifestArb, (m) => {
        const text = canonicalManifestText(m);
        expect(Buffer.byteLength(text, 'utf8')).toBe(text.length);
      }),
      { numRuns: 200 },
    );
  });
});

describe('verifyManifestEnvelope (canonical payload check)', () => {
  const seed = new Uint8Array(32).fill(3);
  const publicKey = noblePublicKey(seed);
  const keyId = keyIdOf(publicKey);
  const trust: TrustStore = {
    version: 1,
    keys: [{ host: 'h1', keyId, publicKey: encodeBase64Url(publicKey), notBefore: '2000-01-01T00:00:00.000Z' }],
  };
  const envelopeOf = (payload: Uint8Array) =>
    JSON.stringify({
      payloadType: MANIFEST_PAYLOAD_TYPE,
      payload: encodeBase64(payload),
      signatures: [{ keyid: keyId, sig: encodeBase64(nobleSign(pae(MANIFEST_PAYLOAD_TYPE, payload), seed)) }],
    });
  const manifest = (m: Partial<Manifest> = {}): Manifest => ({
    v: 1,
    kind: 'compaction',
    host: 'h1',
    principal: 'p1',
    session: 's1',
    run: 'r1',
    seq: 0,
    prev: null,
    summary: { digest: `blake3:${'ab'.repeat(32)}`, size: 10, mediaType: SUMMARY_MEDIA_TYPE },
    createdAt: '2026-01-01T00:00:00.000Z',
    keyId,
    ...m,
  });

  it('accepts the canonical payload', () => {
    const v = verifyManifestEnvelope(envelopeOf(encodeManifest(manifest())), { trust, verifier: nodeVerifier });
    expect(v.manifest.session).toBe('s1');
  });

  it.each([
    ['a byte order mark before it', (p: Uint8Array) => Uint8Array.of(0xef, 0xbb, 0xbf, ...p)],
    ['whitespace after it', (p: Uint8Array) => Uint8Array.of(...p, 0x20)],
    ['members out of order', () => new TextEncoder().encode(JSON.stringify(manifest()))],
    [
      'an escaped character',
      (p: Uint8Array) =>
        new TextEncoder().encode(new TextDecoder().decode(p).replace('"host":"h1"', '"host":"\\u00681"')),
    ],
  ])('refuses a signed payload with %s (MANIFEST_INVALID)', (_, change) => {
    const payload = change(encodeManifest(manifest()));
    let err: unknown;
    try {
      verifyManifestEnvelope(envelopeOf(payload), { trust, verifier: nodeVerifier });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ManifestError);
    expect((err as ManifestError).code).toBe('MANIFEST_INVALID');
  });
});

describe('decodeBase64 on long texts (the native decoder, held to the canonical form)', () => {
  const b64char = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ '.split(''));

  it('decodes what it accepts like the reference and accepts exactly the canonical texts', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 48, maxLength: 600 }),
        fc.array(fc.tuple(fc.nat(), b64char), { maxLength: 2 }),
        (bytes, edits) => {
          const chars = encodeBase64(bytes).split('');
          for (const [at, ch] of edits) chars[at % chars.length] = ch;
          const text = chars.join('');
          // Canonical iff Node's lenient decoder, re-encoded, gives back the same text.
          const canonical = Buffer.from(Buffer.from(text, 'base64')).toString('base64') === text;
          const got = decodeBase64(text);
          expect(got !== undefined, text).toBe(canonical);
          if (canonical) expect(Buffer.from(got!).toString('base64')).toBe(text);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('refuses padding in the middle, non-zero padding bits and a foreign alphabet', () => {
    const text = encodeBase64(new Uint8Array(100).fill(7)); // 136 characters, ends in '='
    expect(decodeBase64(text)).toEqual(new Uint8Array(100).fill(7));
    expect(decodeBase64(`${text.slice(0, 60)}=${text.slice(61)}`)).toBeUndefined();
    expect(decodeBase64(`${text.slice(0, -2)}x=`)).toBeUndefined(); // 'x' leaves low bits set
    expect(decodeBase64(`${text.slice(0, 10)}-${text.slice(11)}`)).toBeUndefined();
  });
});

describe('pae (prefix per payload type kept)', () => {
  const plain = (type: string, body: Uint8Array) =>
    new TextEncoder().encode(
      `DSSEv1 ${new TextEncoder().encode(type).length} ${type} ${body.length} ${new TextDecoder().decode(body)}`,
    );

  it('gives the spec bytes for one type again and again, and for more types than it keeps', () => {
    const body = new TextEncoder().encode('{"a":1}');
    for (let round = 0; round < 2; round++)
      for (let i = 0; i < 40; i++) {
        const type = `application/x-${i}+json`;
        expect(Buffer.from(pae(type, body)).equals(Buffer.from(plain(type, body))), type).toBe(true);
        expect(pae(type, new Uint8Array(0)).length).toBe(plain(type, new Uint8Array(0)).length);
      }
  });
});
