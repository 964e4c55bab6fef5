import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import jcsReference from 'canonicalize';
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex, digestHex, digestOf, hashBytes, isDigest, nobleBlake3 } from '../store/hash/digest.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { loadWasmBlake3 } from '../store/hash/wasm.js';
import { isErrnoError, StoreError } from '../store/errors.js';
import { canonicalize } from '../manifests/encoding/canonical.js';
import { pae, parseEnvelope } from '../manifests/crypto/envelope.js';
import { ManifestError } from '../manifests/errors.js';
import {
  decodeBase64,
  decodeBase64Url,
  encodeBase64,
  encodeBase64Portable,
  encodeBase64Url,
} from '../manifests/encoding/base64.js';
import { readVector } from './support/vectors.js';
import { sha256, sha256Backend, sha256Portable } from '../manifests/crypto/sha256.js';

const input = (len: number) => Uint8Array.from({ length: len }, (_, i) => i % 251);

describe('BLAKE3', async () => {
  const backends = [nobleBlake3, await loadWasmBlake3()];

  it('matches inline official vectors (lengths 0, 1, 1024, 1025) on every backend', async () => {
    const inline: Array<[number, string]> = [
      [0, 'af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262'],
      [1, '2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213'],
      [1024, '42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7'],
      [1025, 'd00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444'],
    ];
    for (const b of backends)
      for (const [len, hex] of inline)
        expect(await hashBytes(input(len), b), `${b.name} len ${len}`).toBe(`blake3:${hex}`);
  });

  it('matches every official vector from shared/vectors on every backend, one-shot and chunked', async () => {
    const doc = readVector<{ cases: Array<{ input_len: number; hash: string }> }>('blake3/test_vectors.json');
    expect(doc.cases.length).toBeGreaterThan(30);
    for (const [i, c] of doc.cases.entries()) {
      for (const b of backends) {
        expect(await hashBytes(input(c.input_len), b), `${b.name} case #${i} len ${c.input_len}`).toBe(
          `blake3:${c.hash.slice(0, 64)}`,
        );
        const h = await b.create();
        const bytes = input(c.input_len);
        for (let off = 0; off < bytes.length; off += 1000) h.update(bytes.subarray(off, off + 1000));
        expect(`blake3:${bytesToHex(h.digest())}`, `${b.name} chunked case #${i}`).toBe(
          `blake3:${c.hash.slice(0, 64)}`,
        );
      }
    }
  });

  it('gives the same digest on every backend for random inputs and chunkings', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 20_000 }), fc.integer({ min: 1, max: 5000 }), async (bytes, step) => {
        const ref = `blake3:${bytesToHex(blake3(bytes))}`;
        for (const b of backends) {
          const h = await b.create();
          for (let off = 0; off < bytes.length; off += step) h.update(bytes.subarray(off, off + step));
          expect(`blake3:${bytesToHex(h.digest())}`).toBe(ref);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('auto-selects native where its binary loads, else WASM; noble stays selectable', async () => {
    const nativeLoads = await loadHashBackend('native', () => {}).then(
      () => true,
      () => false,
    );
    expect((await loadHashBackend('auto')).name).toBe(nativeLoads ? 'native' : 'wasm');
    expect((await loadHashBackend('noble')).name).toBe('noble');
  });

  it('formats and parses digests strictly', () => {
    expect(digestOf(new Uint8Array())).toBe('blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262');
    expect(isDigest('blake3:' + 'a'.repeat(64))).toBe(true);
    for (const bad of [
      'blake3:' + 'A'.repeat(64),
      'sha256:' + 'a'.repeat(64),
      'blake3:' + 'a'.repeat(63),
      'blake3:../../etc',
      '',
      42,
    ]) {
      expect(isDigest(bad)).toBe(false);
      expect(() => digestHex(bad as string)).toThrow(
        expect.objectContaining({ name: 'StoreError', code: 'INVALID_DIGEST' }),
      );
    }
    expect(() => digestHex('x')).toThrow(StoreError);
  });
});

describe('SHA-256 (node:crypto under Node, @noble/hashes elsewhere)', () => {
  it('uses node:crypto under Node, and gives the same bytes as the portable hash at every length (property)', () => {
    expect(sha256Backend).toBe('node:crypto');
    // FIPS 180-2's "abc": both implementations.
    const abc = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
    expect(Buffer.from(sha256(new TextEncoder().encode('abc'))).toString('hex')).toBe(abc);
    expect(Buffer.from(sha256Portable(new TextEncoder().encode('abc'))).toString('hex')).toBe(abc);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (data) => {
        const got = sha256(data);
        expect(got).toEqual(sha256Portable(data));
        // A plain array of its own 32 bytes (a Buffer from a shared pool would carry other bytes in .buffer).
        expect(Object.getPrototypeOf(got)).toBe(Uint8Array.prototype);
        expect(got.buffer.byteLength).toBe(32);
      }),
    );
  });
});

describe('isErrnoError (the one errno test of every layer)', () => {
  it('is true for a system call’s error and nothing else', async () => {
    const enoent = await import('node:fs/promises').then((fs) =>
      fs.readFile('/nonexistent/x').catch((e: unknown) => e),
    );
    expect(isErrnoError(enoent)).toBe(true);
    expect(isErrnoError(Object.assign(new Error('x'), { code: 'EIO' }))).toBe(true);
    // Node's own codes (ERR_PARSE_ARGS_…), a coded error of this library, a code on a non-Error, no code: not errno.
    expect(isErrnoError(Object.assign(new Error('x'), { code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' }))).toBe(false);
    expect(isErrnoError(new StoreError('STORAGE_FAILED', 'x'))).toBe(false);
    expect(isErrnoError({ code: 'ENOENT', message: 'x' })).toBe(false);
    expect(isErrnoError(new Error('x'))).toBe(false);
    expect(isErrnoError(undefined)).toBe(false);
  });
});

describe('DSSE PAE', () => {
  it('matches the DSSE protocol example', () => {
    const out = pae('http://example.com/HelloWorld', new TextEncoder().encode('hello world'));
    expect(new TextDecoder().decode(out)).toBe('DSSEv1 29 http://example.com/HelloWorld 11 hello world');
  });

  it('counts bytes, not characters', () => {
    expect(new TextDecoder().decode(pae('t/é', new TextEncoder().encode('ü')))).toBe('DSSEv1 4 t/é 2 ü');
  });
});

describe('envelope parsing', () => {
  const ok = {
    payloadType: 't',
    payload: encodeBase64(new Uint8Array([1, 2])),
    signatures: [{ keyid: 'k', sig: encodeBase64(new Uint8Array(64)) }],
  };
  it('accepts a well-formed envelope', () => {
    expect(parseEnvelope(JSON.stringify(ok)).payload).toEqual(new Uint8Array([1, 2]));
  });
  it.each([
    ['not JSON', '{'],
    ['an array', '[]'],
    ['no signatures', JSON.stringify({ ...ok, signatures: [] })],
    ['non-canonical base64', JSON.stringify({ ...ok, payload: 'AQI' })],
    ['a huge line', JSON.stringify({ ...ok, payload: 'A'.repeat(100_000) })],
    ['a __proto__ key', '{"__proto__":{"x":1},"payloadType":"t","payload":"AQI=","signatures":[]}'],
    ['fields only under __proto__', `{"__proto__":${JSON.stringify(ok)}}`],
  ])('refuses %s with ENVELOPE_INVALID', (_, text) => {
    expect(() => parseEnvelope(text)).toThrow(expect.objectContaining({ code: 'ENVELOPE_INVALID' }));
    expect(() => parseEnvelope(text)).toThrow(ManifestError);
  });
});

describe('RFC 8785 canonical JSON', () => {
  it('sorts keys by UTF-16 code units and formats numbers the ECMAScript way', () => {
    expect(canonicalize({ b: 1, a: [true, null, 'x'], '\u20ac': 0, '\ud83d\ude00': 1, '\r': 2 })).toBe(
      '{"\\r":2,"a":[true,null,"x"],"b":1,"€":0,"😀":1}',
    );
    expect(canonicalize([1e21, 1e-7, -0, 0.1, 333333333.3333333])).toBe('[1e+21,1e-7,0,0.1,333333333.3333333]');
  });

  it('equals the reference canonicalize package on random JSON values', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        expect(canonicalize(value)).toBe(jcsReference(value));
      }),
      { numRuns: 500 },
    );
  });

  it('round-trips: parsing the canonical text and canonicalizing again gives the same text', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        const text = canonicalize(value);
        expect(canonicalize(JSON.parse(text))).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses lone surrogates, non-finite numbers and class instances', () => {
    expect(() => canonicalize('a\ud800')).toThrow(TypeError);
    expect(() => canonicalize({ x: NaN })).toThrow(TypeError);
    expect(() => canonicalize(new Date())).toThrow(TypeError);
  });
});

describe('base64', () => {
  it("encodes as Node's encoder does, natively and in the portable loop, views at an offset included", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.nat(8), fc.nat(8), (b, from, cut) => {
        const view = b.subarray(Math.min(from, b.length), Math.max(Math.min(from, b.length), b.length - cut));
        const reference = Buffer.from(view).toString('base64');
        expect(encodeBase64(view)).toBe(reference);
        expect(encodeBase64Portable(view)).toBe(reference);
      }),
      { numRuns: 500 },
    );
  });

  it('round-trips and refuses non-canonical forms', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        expect(decodeBase64(encodeBase64(b))).toEqual(b);
        expect(decodeBase64Url(encodeBase64Url(b))).toEqual(b);
      }),
    );
    // Canonical iff Node's lenient decoder, re-encoded, gives back the same text.
    const b64char = fc.constantFrom(
      ...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ '.split(''),
    );
    fc.assert(
      fc.property(fc.array(b64char, { maxLength: 40 }), (chars) => {
        const text = chars.join('');
        const canonical = Buffer.from(Buffer.from(text, 'base64')).toString('base64') === text;
        expect(decodeBase64(text) !== undefined, text).toBe(canonical);
        if (canonical) expect(Buffer.from(decodeBase64(text)!).toString('base64')).toBe(text);
      }),
      { numRuns: 3000 },
    );
    expect(decodeBase64('AQ=')).toBeUndefined();
    expect(decodeBase64('AR==')).toBeUndefined(); // non-zero padding bits
    expect(decodeBase64Url('AQ==')).toBeUndefined();
  });
});
