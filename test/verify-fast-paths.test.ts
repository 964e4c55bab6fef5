import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { canonicalize } from '../manifests/encoding/canonical.js';
import { decodeBase64, decodeBase64Either, encodeBase64 } from '../manifests/encoding/base64.js';
import { canonicalManifestText } from '../manifests/format/manifest-text.js';
import { readCanonicalManifest } from '../manifests/format/manifest-read.js';
import { isManifestTimestamp } from '../manifests/format/manifest-core.js';
import {
  encodeManifest,
  manifestSchema,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Manifest,
} from '../manifests/format/manifest.js';
import { keyIdOf, type TrustStore } from '../manifests/format/trust.js';
import { pae, parseEnvelope } from '../manifests/crypto/envelope.js';
import { noblePublicKey, nobleSign } from '../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { verifyManifestEnvelope } from '../manifests/crypto/verify-manifest.js';
import { encodeBase64Url } from '../manifests/encoding/base64.js';
import { ManifestError } from '../manifests/errors.js';
import { checkedPayload } from '../src/ledger/ledger.js';

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

/** One fixed manifest signed by `keyId` (members overridden by `m`). */
const sampleManifest = (keyId: string, m: Partial<Manifest> = {}): Manifest => ({
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

describe("the payload a ledger signs (checkedPayload): written member by member, the generic encoding's bytes", () => {
  it('is the generic canonical encoding of every manifest the schema accepts', () => {
    fc.assert(
      fc.property(manifestArb, (m) => {
        expect(Buffer.from(checkedPayload(m)).equals(Buffer.from(encodeManifest(m)))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('goes the generic way for what the fast reader leaves to the schema, and refuses what the schema refuses', () => {
    // A keyId with a quote: schema-valid, its canonical text escapes it, which the anchored reader leaves to the schema.
    const quoted = sampleManifest('k"1');
    expect(Buffer.from(checkedPayload(quoted)).equals(Buffer.from(encodeManifest(quoted)))).toBe(true);
    // A member the schema does not know (nothing writes one: the member-by-member text would leave it out unseen).
    const extra = { ...sampleManifest('k1'), note: 'x' } as Manifest;
    expect(() => checkedPayload(extra)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    const extraInSummary = sampleManifest('k1', {
      summary: { digest: `blake3:${'ab'.repeat(32)}`, size: 10, mediaType: SUMMARY_MEDIA_TYPE, x: 1 } as never,
    });
    expect(() => checkedPayload(extraInSummary)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    const extraInCovers = sampleManifest('k1', { covers: { transcriptThrough: 3, y: 2 } as never });
    expect(() => checkedPayload(extraInCovers)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    // Invalid values: refused, as before.
    for (const bad of [
      sampleManifest('k1', { seq: 1 }), // prev null at seq 1
      sampleManifest('k1', { seq: Number.NaN }),
      sampleManifest('k1', { createdAt: '2026-13-01T00:00:00.000Z' }),
      sampleManifest('k1', { host: 'has space' }),
    ])
      expect(() => checkedPayload(bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
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
  const manifest = (m: Partial<Manifest> = {}): Manifest => sampleManifest(keyId, m);

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

  const refusal = (envelope: string) => {
    try {
      verifyManifestEnvelope(envelope, { trust, verifier: nodeVerifier });
    } catch (e) {
      return e as ManifestError;
    }
    throw new Error('accepted');
  };
  /** A payload signed by nobody, with fields the key lookup reads set by hand. */
  const unsigned = (fields: Record<string, unknown>) =>
    JSON.stringify({
      payloadType: MANIFEST_PAYLOAD_TYPE,
      payload: encodeBase64(new TextEncoder().encode(JSON.stringify({ ...manifest(), ...fields }))),
      signatures: [{ keyid: keyId, sig: encodeBase64(new Uint8Array(64)) }],
    });

  it.each([
    ['a host that is not an id (control characters, a bidi override)', { host: 'h1\u202e\n  verdict: OK' }],
    ['a very long host', { host: 'h'.repeat(10_000) }],
    ['a keyId with a space', { keyId: 'x y' }],
    ['a very long keyId', { keyId: 'k'.repeat(10_000) }],
    ['a createdAt Date.parse reads in local time', { createdAt: '2026-05-31T23:00:00' }],
    ['a createdAt in words', { createdAt: 'Jun 1 2030 (verdict: OK)' }],
    ['no createdAt', { createdAt: undefined }],
    ['a createdAt of the right shape in month 13', { createdAt: '2026-13-01T00:00:00.000Z' }],
    ['a createdAt of the right shape at minute 60', { createdAt: '2026-01-01T00:60:00.000Z' }],
  ])('refuses %s as MANIFEST_INVALID before the key lookup, quoting none of it', (_, fields) => {
    const err = refusal(unsigned(fields));
    expect(err.code).toBe('MANIFEST_INVALID');
    expect(err.message.length).toBeLessThan(200);
    expect(err.message).not.toContain('verdict');
  });

  it('isManifestTimestamp says false, never throws, of a time of the right shape that names no date', () => {
    for (const t of [
      '2026-13-01T00:00:00.000Z',
      '2026-00-10T00:00:00.000Z',
      '2026-01-01T24:00:00.000Z',
      '2026-02-30T00:00:00.000Z',
    ])
      expect(isManifestTimestamp(t), t).toBe(false);
    expect(isManifestTimestamp('2026-02-28T23:59:59.999Z')).toBe(true);
  });

  it('quotes the keyId and host it names in a key finding, cut when long with … after the quote', () => {
    const other = 'ed25519:' + 'f'.repeat(200);
    const err = refusal(unsigned({ keyId: other }));
    expect(err.code).toBe('KEY_UNTRUSTED');
    // `…` after the closing quote, as shownValue marks every cut value: inside it, the cut id read as a whole one.
    expect(err.message).toBe(`key ${JSON.stringify(other.slice(0, 100))}… of host "h1" is not trusted`);
    const early = refusal(unsigned({ createdAt: '1999-12-31T23:59:59.999Z' }));
    expect(early.code).toBe('KEY_EXPIRED');
    expect(early.message).toBe(`key ${JSON.stringify(keyId)} of host "h1" was not valid at "1999-12-31T23:59:59.999Z"`);
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

describe("readCanonicalManifest (the verifiers' fast path) against JSON.parse + schema + canonical check", () => {
  /** The slow path's verdict: the manifest when the text is the canonical encoding of a schema-valid one. */
  const slow = (text: string): Manifest | undefined => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return undefined;
    }
    // As verifyManifestEnvelope reads it: the key lookup's fields first (no schema for an unparsable time).
    const { createdAt } = (value ?? {}) as { createdAt?: unknown };
    if (!isManifestTimestamp(createdAt)) return undefined;
    const parsed = manifestSchema.safeParse(value);
    if (!parsed.success) return undefined;
    return canonicalManifestText(parsed.data as Manifest) === text ? (parsed.data as Manifest) : undefined;
  };
  /** The one legitimate disagreement: a keyId with a character JSON escapes is left to the slow path. */
  const escapedKeyId = (text: string) => /"keyId":"(?:[^"\\]|\\.)*\\/.test(text);
  const agree = (text: string) => {
    const fast = readCanonicalManifest(text);
    const reference = slow(text);
    if (fast === undefined) {
      // Outcomes: both refuse, or the slow path accepts a keyId with an escape.
      if (reference !== undefined) expect(escapedKeyId(text), text).toBe(true);
    } else {
      // Outcome: both accept, with the same manifest, members in the same order.
      expect(reference, text).toBeDefined();
      expect(JSON.stringify(fast)).toBe(JSON.stringify(reference));
    }
  };

  it('reads every schema-valid manifest back as the schema does (or leaves an escaped keyId to it)', () => {
    fc.assert(
      fc.property(manifestArb, (m) => {
        const text = canonicalManifestText(m);
        agree(text);
        if (!/["\\]/.test(m.keyId)) expect(readCanonicalManifest(text)).toBeDefined();
      }),
      { numRuns: 1000 },
    );
  });

  it('agrees with the slow path on edited texts (characters replaced, inserted, deleted)', () => {
    const edit = fc.tuple(
      fc.constantFrom('replace', 'insert', 'delete'),
      fc.nat(),
      fc.constantFrom(...'0123456789"\\{}[],:. -+eEabfnrtuxTZ\u00e9\ufeff'.split(''), '\\u0068', 'null', '1'),
    );
    fc.assert(
      fc.property(manifestArb, fc.array(edit, { minLength: 1, maxLength: 3 }), (m, edits) => {
        let text = canonicalManifestText(m);
        for (const [op, at, s] of edits) {
          const i = at % (text.length + 1);
          text =
            op === 'insert'
              ? text.slice(0, i) + s + text.slice(i)
              : text.slice(0, i) + (op === 'replace' ? s : '') + text.slice(i + 1);
        }
        agree(text);
      }),
      { numRuns: 5000 },
    );
  });

  it.each([
    ['seq past the safe integers', (t: string) => t.replace('"seq":5', '"seq":9007199254740993')],
    ['size past the safe integers', (t: string) => t.replace('"size":10', '"size":9007199254740992')],
    [
      'a transcript position past the safe integers',
      (t: string) => t.replace('"transcriptThrough":7', '"transcriptThrough":99999999999999999'),
    ],
    ['seq 0 with a prev', (t: string) => t.replace('"seq":5', '"seq":0')],
    ['a prev of null after seq 0', (t: string) => t.replace(/"prev":"[^"]*"/, '"prev":null')],
    ['a day that does not exist', (t: string) => t.replace('2026-01-01', '2026-02-30')],
    ['a month that does not exist', (t: string) => t.replace('2026-01-01', '2026-13-01')],
    ['a leading zero', (t: string) => t.replace('"seq":5', '"seq":05')],
    ['a negative zero', (t: string) => t.replace('"size":10', '"size":-0')],
    ['an upper-case digest', (t: string) => t.replace('blake3:ab', 'blake3:AB')],
    ['an id starting with a dot', (t: string) => t.replace('"session":"s1"', '"session":".s1"')],
    ['a second kind', (t: string) => t.replace('"kind":"compaction"', '"kind":"compaction2"')],
    ['version 2', (t: string) => t.replace('"v":1}', '"v":2}')],
    ['an unknown member', (t: string) => t.replace('"v":1}', '"v":1,"x":1}')],
  ])('refuses %s, as the slow path does', (_, change) => {
    const m = sampleManifest('k1', { seq: 5, prev: `blake3:${'cd'.repeat(32)}`, covers: { transcriptThrough: 7 } });
    const original = canonicalManifestText(m);
    expect(readCanonicalManifest(original)).toEqual(m);
    const text = change(original);
    expect(text).not.toBe(original);
    expect(readCanonicalManifest(text)).toBeUndefined();
    expect(slow(text)).toBeUndefined();
  });

  it('verifyManifestEnvelope still accepts a signed manifest whose keyId JSON escapes (the slow path)', () => {
    const seed = new Uint8Array(32).fill(5);
    const publicKey = noblePublicKey(seed);
    const keyId = 'key"with\\escapes';
    const trust: TrustStore = {
      version: 1,
      keys: [{ host: 'h1', keyId, publicKey: encodeBase64Url(publicKey), notBefore: '2000-01-01T00:00:00.000Z' }],
    };
    const m = sampleManifest(keyId);
    const payload = encodeManifest(m);
    expect(readCanonicalManifest(new TextDecoder().decode(payload))).toBeUndefined();
    const envelope = JSON.stringify({
      payloadType: MANIFEST_PAYLOAD_TYPE,
      payload: encodeBase64(payload),
      signatures: [{ keyid: keyId, sig: encodeBase64(nobleSign(pae(MANIFEST_PAYLOAD_TYPE, payload), seed)) }],
    });
    expect(verifyManifestEnvelope(envelope, { trust, verifier: nodeVerifier }).manifest).toEqual(m);
  });
});

describe('decodeBase64Either on long texts (the native round trip first)', () => {
  const b64char = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ '.split(''));
  /** Reference: canonical padded standard base64, or the same in the URL alphabet, never the two mixed. */
  const reference = (text: string): Uint8Array | undefined => {
    const canonical = (t: string) => Buffer.from(Buffer.from(t, 'base64')).toString('base64') === t;
    if (canonical(text)) return new Uint8Array(Buffer.from(text, 'base64'));
    if (/[+/]/.test(text)) return undefined;
    const std = text.replace(/-/g, '+').replace(/_/g, '/');
    return canonical(std) ? new Uint8Array(Buffer.from(std, 'base64')) : undefined;
  };

  it('accepts exactly the canonical texts of either alphabet and decodes them like the reference', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 48, maxLength: 600 }),
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), b64char), { maxLength: 2 }),
        (bytes, url, edits) => {
          let text = encodeBase64(bytes);
          if (url) text = text.replace(/\+/g, '-').replace(/\//g, '_');
          const chars = text.split('');
          for (const [at, ch] of edits) chars[at % chars.length] = ch;
          text = chars.join('');
          expect(decodeBase64Either(text), text).toEqual(reference(text));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('hands out bytes of their own (never a view of a shared pool)', () => {
    const got = decodeBase64Either(encodeBase64(new Uint8Array(100).fill(9)))!;
    expect(got.byteOffset).toBe(0);
    expect(got.buffer.byteLength).toBe(100);
  });
});

describe('parseEnvelope: the payload decoded straight into its PAE frame', () => {
  const body = (n: number) => new Uint8Array(n).map((_, i) => (i * 7 + 3) & 0xff);
  const envelope = (payload: string) =>
    JSON.stringify({
      payloadType: MANIFEST_PAYLOAD_TYPE,
      payload,
      signatures: [{ sig: encodeBase64(new Uint8Array(64)) }],
    });

  it('gives the payload and exactly pae(type, payload) for canonical standard base64', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 700 }), (bytes) => {
        const parsed = parseEnvelope(envelope(encodeBase64(bytes)));
        expect(Buffer.from(parsed.payload).equals(Buffer.from(bytes))).toBe(true);
        const message = parsed.message ?? pae(MANIFEST_PAYLOAD_TYPE, parsed.payload);
        expect(Buffer.from(message).equals(Buffer.from(pae(MANIFEST_PAYLOAD_TYPE, bytes)))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('decodes the URL alphabet through the portable path, and refuses non-canonical text as before', () => {
    const bytes = body(300);
    const url = encodeBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_');
    expect(url).toMatch(/[-_]/);
    const parsed = parseEnvelope(envelope(url));
    expect(parsed.message).toBeUndefined();
    expect(Buffer.from(parsed.payload).equals(Buffer.from(bytes))).toBe(true);
    const text = encodeBase64(body(302)); // ends in one '=': the last character's two low bits must be zero
    const bent = `${text.slice(0, -2)}B=`; // 'B' is 1
    expect(() => parseEnvelope(envelope(bent))).toThrow(/payload is not canonical padded base64/);
  });
});
