/**
 * Issue 6, "what must be shown": every hash and signature backend gives the reference answer — on the
 * official vectors, on random inputs, and through the paths that use them (the blob store's
 * hash-while-write, the manifest verifier) — and a fast backend that fails to load, or loads and lies,
 * is replaced by the reference with one clear notice, never used.
 * (test/primitives.test.ts and test/ed25519.test.ts hold the per-primitive vector suites; this file
 * adds backend selection, fallback and the cross-backend properties.)
 */
import { describe, expect, it, vi } from 'vitest';
import fc from 'fast-check';
import { blake3 } from '@noble/hashes/blake3.js';
import {
  bytesToHex,
  formatDigest,
  hashBytes,
  nobleBlake3,
  type HashBackend,
  type Hasher,
} from '../store/hash/digest.js';
import { loadHashBackend, type HashBackendName } from '../store/hash/backends.node.js';
import { loadWasmBlake3 } from '../store/hash/wasm.js';
import { loadNativeBlake3 } from '../store/hash/native.node.js';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { nobleSign, noblePublicKey, nobleVerifier, type SignatureVerifier } from '../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { encodeBase64, encodeBase64Url } from '../manifests/encoding/base64.js';
import { serializeEnvelope, signEnvelope } from '../manifests/crypto/envelope.js';
import { ManifestError } from '../manifests/errors.js';
import {
  encodeManifest,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Manifest,
} from '../manifests/format/manifest.js';
import { keyIdOf, type TrustStore } from '../manifests/format/trust.js';
import { verifyManifestEnvelope } from '../manifests/crypto/verify-manifest.js';
import { canonicalBytes, canonicalChunks, canonicalize } from '../manifests/encoding/canonical.js';
import { loadEscaper, PIECE, type EscaperKind } from '../manifests/encoding/json-escape.js';
import { validateSummary } from '../src/summary/summary.js';
import { readVector } from './support/vectors.js';
import { tempDir } from './support/tmp.js';
import { openLedger } from '../src/ledger/open.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const input = (len: number) => Uint8Array.from({ length: len }, (_, i) => i % 251);
const ref = (bytes: Uint8Array) => formatDigest(blake3(bytes));
const NAMES: HashBackendName[] = ['auto', 'native', 'wasm', 'noble'];
const noNative = async (): Promise<HashBackend> => Promise.reject(new Error('no binary for this platform'));
const quiet = () => {};

/** A backend that answers like `inner` except where `lie` says otherwise. */
function lyingBackend(inner: HashBackend, lie: (chunks: Uint8Array[], digest: Uint8Array) => Uint8Array): HashBackend {
  return {
    name: 'liar',
    async create(): Promise<Hasher> {
      const h = await inner.create();
      const chunks: Uint8Array[] = [];
      return {
        update: (chunk) => {
          chunks.push(chunk);
          h.update(chunk);
        },
        digest: () => lie(chunks, h.digest()),
      };
    },
  };
}

const flipFirstBit = (d: Uint8Array) => Uint8Array.from(d, (b, i) => (i === 0 ? b ^ 1 : b));

describe('hash backend selection', () => {
  it.each(NAMES)('"%s" reproduces every official BLAKE3 vector, one-shot and in uneven pieces', async (name) => {
    const backend = await loadHashBackend(name, quiet);
    const doc = readVector<{ cases: Array<{ input_len: number; hash: string }> }>('blake3/test_vectors.json');
    for (const [i, c] of doc.cases.entries()) {
      const want = `blake3:${c.hash.slice(0, 64)}`;
      expect(await hashBytes(input(c.input_len), backend), `${name} case #${i}`).toBe(want);
      const h = await backend.create();
      const bytes = input(c.input_len);
      for (let off = 0, step = 1; off < bytes.length; off += step, step = ((step * 7) % 1500) + 1)
        h.update(bytes.subarray(off, off + step));
      expect(formatDigest(h.digest()), `${name} case #${i} in pieces`).toBe(want);
    }
  });

  it('refuses an unknown backend name with INVALID_ARGUMENT, and openLedger before anything is written', async () => {
    await expect(loadHashBackend('sha256' as HashBackendName, quiet)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    const root = join(tempDir(), 'store');
    await expect(openLedger({ root, host: 'h', hash: 'sha256' as HashBackendName })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('unknown BLAKE3 backend "sha256"'),
    });
    expect(existsSync(root)).toBe(false);
  });
});

describe('hash backend fallback', () => {
  it('falls back to WASM with exactly one notice when the native backend fails to load', async () => {
    const notices: string[] = [];
    const backend = await loadHashBackend('auto', (m) => notices.push(m), { native: noNative });
    expect(backend.name).toBe('wasm');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/native BLAKE3 unavailable \(no binary for this platform\); using WASM/);
    expect(await hashBytes(input(1025), backend)).toBe(ref(input(1025)));
  });

  it('keeps its choice when the notice sink throws: WASM still serves, and nothing is refused', async () => {
    const backend = await loadHashBackend(
      'auto',
      () => {
        throw new Error('log sink closed');
      },
      { native: noNative },
    );
    expect(backend.name).toBe('wasm');
    expect(await hashBytes(input(1025), backend)).toBe(ref(input(1025)));
  });

  it('falls back to WASM when the native backend loads but fails its self-test', async () => {
    const notices: string[] = [];
    const liar = lyingBackend(await loadNativeBlake3(), (_, d) => flipFirstBit(d));
    expect((await loadHashBackend('auto', (m) => notices.push(m), { native: async () => liar })).name).toBe('wasm');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/native BLAKE3 unavailable.*self-test/);
  });

  it('falls back to noble with exactly one notice when neither fast backend loads', async () => {
    const notices: string[] = [];
    const backend = await loadHashBackend('auto', (m) => notices.push(m), {
      native: noNative,
      wasm: async () => Promise.reject(new Error('WebAssembly is disabled')),
    });
    expect(backend.name).toBe('noble');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(
      /native BLAKE3 unavailable.*WASM BLAKE3 unavailable.*WebAssembly is disabled.*@noble\/hashes/,
    );
    expect(await hashBytes(input(1025), backend)).toBe(ref(input(1025)));
  });

  it('refuses, through its self-test, a fast backend that loads but returns wrong digests', async () => {
    const notices: string[] = [];
    const liar = lyingBackend(await loadWasmBlake3(), (_, d) => flipFirstBit(d));
    const backend = await loadHashBackend('auto', (m) => notices.push(m), { native: noNative, wasm: async () => liar });
    expect(backend.name).toBe('noble');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/self-test/);
  });

  it('refuses a backend that is right on whole inputs but wrong when fed in pieces', async () => {
    const notices: string[] = [];
    const liar = lyingBackend(await loadNativeBlake3(), (chunks, d) => (chunks.length > 1 ? flipFirstBit(d) : d));
    expect(await hashBytes(input(1025), liar)).toBe(ref(input(1025))); // a one-shot check alone would pass it
    const backend = await loadHashBackend('auto', (m) => notices.push(m), { native: async () => liar });
    expect(backend.name).toBe('wasm');
    expect(notices).toHaveLength(1);
  });

  it('refuses a backend that is right on short inputs but wrong past one 1 KiB chunk tree level', async () => {
    const liar = lyingBackend(await loadWasmBlake3(), (chunks, d) =>
      chunks.reduce((n, c) => n + c.length, 0) > 4096 ? flipFirstBit(d) : d,
    );
    const notices: string[] = [];
    expect(
      (await loadHashBackend('auto', (m) => notices.push(m), { native: noNative, wasm: async () => liar })).name,
    ).toBe('noble');
    expect(notices).toHaveLength(1);
  });

  it('makes an explicit "native" or "wasm" choice fail loudly instead of falling back', async () => {
    await expect(loadHashBackend('native', quiet, { native: noNative })).rejects.toThrow(/no binary/);
    await expect(
      loadHashBackend('wasm', quiet, { wasm: async () => Promise.reject(new Error('no wasm')) }),
    ).rejects.toThrow(/no wasm/);
    const liar = lyingBackend(await loadWasmBlake3(), (_, d) => flipFirstBit(d));
    await expect(loadHashBackend('wasm', quiet, { wasm: async () => liar })).rejects.toThrow(/self-test/);
    await expect(loadHashBackend('native', quiet, { native: async () => liar })).rejects.toThrow(/self-test/);
  });

  it('uses a healthy injected backend without any notice', async () => {
    const notices: string[] = [];
    const native = await loadNativeBlake3();
    expect(await loadHashBackend('auto', (m) => notices.push(m), { native: async () => native })).toBe(native);
    expect(notices).toEqual([]);
  });
});

describe('digestOf (manifest ids, key ids): the WebAssembly fast path agrees with the reference', () => {
  it('gives the reference digest on random small inputs once its fast path is ready', async () => {
    const { digestOf, digestOfReady } = await import('../store/hash/digest.js');
    await digestOfReady;
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), (bytes) => {
        expect(digestOf(bytes)).toBe(ref(bytes));
      }),
      { numRuns: 300 },
    );
  });

  it('serves with the reference where WebAssembly is unavailable', async () => {
    vi.resetModules();
    vi.stubGlobal('WebAssembly', undefined);
    try {
      const fresh = await import('../store/hash/digest.js');
      await fresh.digestOfReady; // settles, with the fast path left unset
      expect(fresh.digestOf(input(1025))).toBe(ref(input(1025)));
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });
});

describe('hash backends agree with each other on random inputs', async () => {
  const backends = [
    nobleBlake3,
    await loadWasmBlake3(),
    await loadNativeBlake3(),
    await loadHashBackend('auto', quiet),
  ];

  it('gives one digest for random bytes around chunk and tree boundaries, in random pieces', async () => {
    const lengths = fc.oneof(
      fc.integer({ min: 0, max: 70_000 }),
      fc.constantFrom(1023, 1024, 1025, 2048, 2049, 4096, 65_536, 65_537),
    );
    await fc.assert(
      fc.asyncProperty(
        lengths,
        fc.integer({ min: 1, max: 1 << 30 }),
        fc.array(fc.integer({ min: 1, max: 9000 }), { minLength: 1, maxLength: 8 }),
        async (len, seed, steps) => {
          const bytes = Uint8Array.from({ length: len }, (_, i) => (Math.imul(i + seed, 2654435761) >>> 24) & 0xff);
          const want = ref(bytes);
          for (const b of backends) {
            const h = await b.create();
            for (let off = 0, k = 0; off < bytes.length; off += steps[k % steps.length]!, k++)
              h.update(bytes.subarray(off, off + steps[k % steps.length]!));
            expect(formatDigest(h.digest()), b.name).toBe(want);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('keeps interleaved hashers of one backend independent, also when finished ones are reused', async () => {
    for (const b of backends) {
      for (let round = 0; round < 3; round++) {
        const inputs = [input(5000), input(1), input(70_000).reverse()];
        const hashers = await Promise.all(inputs.map(() => b.create()));
        for (let off = 0; off < 70_000; off += 999)
          inputs.forEach((x, i) => hashers[i]!.update(x.subarray(off, off + 999)));
        for (const i of [2, 0, 1]) expect(formatDigest(hashers[i]!.digest()), `${b.name} #${i}`).toBe(ref(inputs[i]!));
      }
    }
    for (const b of backends.slice(1, 3)) {
      const h = await b.create();
      h.digest();
      expect(() => h.update(new Uint8Array(1)), b.name).toThrow(/after digest/);
      expect(() => h.digest(), b.name).toThrow(/after digest/);
    }
  });

  it('gives the reference digest through the blob store (hash while writing, re-hash while reading) with every backend', async () => {
    // Past the store's write and hash slices (4 MiB); the pure-JS reference gets the smaller sizes only.
    const sizes = [0, 1, 4096, 4 * 1024 * 1024 + 7, 9 * 1024 * 1024 + 3];
    for (const b of backends.slice(0, 3)) {
      const { store } = await FsBlobStore.open(tempDir(), { hash: b });
      for (const size of b.name === 'noble' ? sizes.slice(0, 4) : sizes) {
        const bytes = Uint8Array.from({ length: size }, (_, i) => (i * 31 + size) & 0xff);
        const info = await store.put(bytes);
        expect(info, `${b.name} ${size}`).toEqual({ digest: ref(bytes), size });
        async function* pieces() {
          for (let off = 0; off < bytes.length; off += 1_000_003) yield bytes.subarray(off, off + 1_000_003);
        }
        expect((await store.put(pieces())).digest, `${b.name} ${size} streamed`).toBe(info.digest);
        expect(
          Buffer.from(await store.get(info.digest)).equals(Buffer.from(bytes)),
          `${b.name} ${size} read back`,
        ).toBe(true);
      }
    }
  }, 120_000);
});

describe('signature backends agree with each other', () => {
  const verifiers: SignatureVerifier[] = [nobleVerifier, nodeVerifier];
  const L = (1n << 252n) + 27742317777372353535851937790883648493n;
  const le = (n: bigint) => Uint8Array.from({ length: 32 }, (_, i) => Number((n >> BigInt(8 * i)) & 0xffn));
  const fromLe = (b: Uint8Array) => b.reduceRight((acc, x) => (acc << 8n) | BigInt(x), 0n);
  const all = (sig: Uint8Array, msg: Uint8Array, pub: Uint8Array) => verifiers.map((v) => v.verify(sig, msg, pub));

  it('both refuse a valid signature made malleable by adding L to S (strict RFC 8032: S < L)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ maxLength: 200 }), (seed, msg) => {
        const sig = nobleSign(msg, seed);
        const s = fromLe(sig.subarray(32)) + L;
        fc.pre(s < 1n << 256n);
        const malleated = new Uint8Array(64);
        malleated.set(sig.subarray(0, 32));
        malleated.set(le(s), 32);
        expect(all(sig, msg, noblePublicKey(seed))).toEqual([true, true]);
        expect(all(malleated, msg, noblePublicKey(seed))).toEqual([false, false]);
      }),
      { numRuns: 100 },
    );
  });

  it('agree on random bytes as signatures and keys, and on non-canonical or small-order keys', () => {
    const smallOrder = [
      '0100000000000000000000000000000000000000000000000000000000000000',
      'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
      '0000000000000000000000000000000000000000000000000000000000000080',
      'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
      'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    ];
    const key = fc.oneof(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.constantFrom(...smallOrder).map((h) => Uint8Array.from(Buffer.from(h, 'hex'))),
    );
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 64, maxLength: 64 }),
        fc.uint8Array({ maxLength: 100 }),
        key,
        (sig, msg, pub) => {
          const results = all(sig, msg, pub);
          expect(results[1], 'node:crypto').toBe(results[0]);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('give one verdict on whole manifests: verifyManifestEnvelope with node:crypto and with noble', async () => {
    const seed = new Uint8Array(32).fill(9);
    const publicKey = noblePublicKey(seed);
    const keyId = keyIdOf(publicKey);
    const trust: TrustStore = {
      version: 1,
      keys: [{ host: 'h', keyId, publicKey: encodeBase64Url(publicKey), notBefore: '2020-01-01T00:00:00.000Z' }],
    };
    const signer = { keyId, publicKey, sign: (m: Uint8Array) => nobleSign(m, seed) };
    await fc.assert(
      fc.asyncProperty(fc.nat(1000), fc.nat(2 ** 31), fc.option(fc.nat(511)), async (seq, size, flip) => {
        const manifest: Manifest = {
          v: 1,
          kind: 'compaction',
          host: 'h',
          principal: 'p',
          session: 's',
          run: 'r',
          seq,
          prev: seq === 0 ? null : `blake3:${bytesToHex(blake3(new Uint8Array([seq & 0xff])))}`,
          summary: { digest: ref(new Uint8Array([size & 0xff])), size, mediaType: SUMMARY_MEDIA_TYPE },
          createdAt: '2026-01-01T00:00:00.000Z',
          keyId,
        };
        const envelope = await signEnvelope(MANIFEST_PAYLOAD_TYPE, encodeManifest(manifest), signer);
        if (flip !== null) {
          const sig = Buffer.from(envelope.signatures[0]!.sig, 'base64');
          sig[flip >> 3]! ^= 1 << (flip & 7);
          envelope.signatures[0]!.sig = encodeBase64(sig);
        }
        const verdicts = verifiers.map((verifier) => {
          try {
            return verifyManifestEnvelope(serializeEnvelope(envelope), { trust, verifier }).id;
          } catch (err) {
            expect(err).toBeInstanceOf(ManifestError);
            return (err as ManifestError).code;
          }
        });
        expect(verdicts[1]).toBe(verdicts[0]);
        if (flip === null) expect(verdicts[0]).toMatch(/^blake3:[0-9a-f]{64}$/);
        else expect(verdicts[0]).toBe('SIGNATURE_INVALID');
      }),
      { numRuns: 60 },
    );
  });
});

/** The part of the WebAssembly API these tests stub (the lib setting carries no WebAssembly types). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
  CompileError: new (message: string) => Error;
}

describe('JSON escapers: the SIMD and the byte-at-a-time WebAssembly loops agree with JSON.stringify', () => {
  const escapeWith = (kind: EscaperKind, s: string) => {
    const esc = loadEscaper(kind)!;
    const { written } = new TextEncoder().encodeInto(s, esc.src);
    return Buffer.from(esc.escape(written));
  };
  const reference = (s: string) => Buffer.from(JSON.stringify(s).slice(1, -1));

  it('loads both kinds here, and auto picks SIMD', () => {
    expect(loadEscaper('simd')?.kind).toBe('simd');
    expect(loadEscaper('scalar')?.kind).toBe('scalar');
    expect(loadEscaper()?.kind).toBe('simd');
  });

  it('escape random text byte for byte like JSON.stringify, escapes at every offset of a 16-byte block', () => {
    const chars = fc.oneof(
      { weight: 10, arbitrary: fc.constantFrom('a', ' ', 'Z', '~', '\u007f') },
      { weight: 2, arbitrary: fc.constantFrom('"', '\\', '\n', '\t', '\u0000', '\u0001', '\u001f', '\b', '\f', '\r') },
      { weight: 1, arbitrary: fc.constantFrom('é', '→', '😀', '\u2028') },
    );
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 300 }), (list) => {
        const s = list.join('');
        const want = reference(s);
        expect(escapeWith('simd', s).equals(want)).toBe(true);
        expect(escapeWith('scalar', s).equals(want)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('escape a whole piece (1 MiB) with a special character in its last 16 bytes and in its very last byte', () => {
    for (const tail of ['"', 'abc\u0002', '\\x'.padEnd(15, 'y') + '\n']) {
      const s = 'q'.repeat(PIECE - tail.length) + tail;
      const want = reference(s);
      expect(escapeWith('simd', s).equals(want)).toBe(true);
      expect(escapeWith('scalar', s).equals(want)).toBe(true);
    }
  });

  it('escape nothing for a length outside [0, PIECE] below zero, and at most PIECE bytes above', () => {
    for (const kind of ['simd', 'scalar'] as const) {
      const esc = loadEscaper(kind)!;
      esc.src.fill(0x61);
      expect(esc.escape(-2000).length, kind).toBe(0);
      expect(esc.escape(PIECE + 100).length, kind).toBe(PIECE);
    }
  });

  it('auto falls back to the byte-at-a-time loop where the SIMD module does not compile', async () => {
    const real = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
    vi.resetModules();
    // An engine without SIMD refuses the first module asked for (the SIMD one) at compile time.
    let compiled = 0;
    vi.stubGlobal('WebAssembly', {
      Instance: real.Instance,
      Module: function (bytes: Uint8Array) {
        if (compiled++ === 0) throw new real.CompileError('invalid opcode 0xfd');
        return new real.Module(bytes);
      },
    });
    try {
      const fresh = await import('../manifests/encoding/json-escape.js');
      expect(fresh.loadEscaper('simd')).toBeUndefined();
      expect(fresh.loadEscaper()?.kind).toBe('scalar');
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });

  it('does not use a loop that fails its self-test (wrong output is never taken for an escaper)', async () => {
    const real = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
    vi.resetModules();
    // Every instance's escape drops the last output byte.
    let instances = 0;
    vi.stubGlobal('WebAssembly', {
      Module: real.Module,
      Instance: function (module: object) {
        instances++;
        const inst = new real.Instance(module);
        const escape = inst.exports.escape as (a: number, b: number, c: number) => number;
        return { exports: { ...inst.exports, escape: (a: number, b: number, c: number) => escape(a, b, c) - 1 } };
      },
    });
    try {
      const fresh = await import('../manifests/encoding/json-escape.js');
      expect(fresh.loadEscaper()).toBeUndefined();
      expect(instances).toBe(2); // both loops were built, and both refused
      const canonical = await import('../manifests/encoding/canonical.js');
      const value = { s: 'long "text"\n'.repeat(5000) };
      expect(Buffer.from(canonical.canonicalBytes(value)).equals(Buffer.from(canonicalize(value)))).toBe(true);
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });
});

describe('canonical bytes: the WebAssembly escaper of long strings agrees with JSON.stringify', () => {
  const reference = (value: unknown) => new TextEncoder().encode(canonicalize(value));
  const long = (unit: string, length: number) =>
    unit
      .repeat(Math.ceil(length / unit.length))
      .slice(0, length)
      .replace(/[\ud800-\udbff]$/, 'x');

  it('gives the bytes of the canonical text for long strings of every kind of character', () => {
    const chars = fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom('a', ' ', 'z', '.', '\n') },
      {
        weight: 2,
        arbitrary: fc.constantFrom('"', '\\', '\t', '\r', '\b', '\f', '\u0000', '\u0001', '\u001f', '\u007f'),
      },
      { weight: 1, arbitrary: fc.constantFrom('é', '→', '😀', '\u2028', '\ufeff') },
    );
    fc.assert(
      fc.property(
        fc.array(chars, { minLength: 1, maxLength: 64 }),
        fc.integer({ min: 16 * 1024, max: 70_000 }),
        (unit, length) => {
          const s = long(unit.join(''), length);
          const value = { z: 1, state: s, a: [long(s, 20_000), 'short "q"'], k: { nested: s } };
          expect(Buffer.from(canonicalBytes(value)).equals(Buffer.from(reference(value)))).toBe(true);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('encodes a long string without JSON.stringify', () => {
    const s = long('text with "quotes" and\nnewlines ', 100_000);
    const want = reference({ s });
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      expect(Buffer.from(canonicalBytes({ s })).equals(Buffer.from(want))).toBe(true);
      expect(stringify.mock.calls.filter(([v]) => v === s)).toHaveLength(0);
    } finally {
      stringify.mockRestore();
    }
  });

  it("encodes a summary-sized string (from 1 Ki units) without JSON.stringify: a 4 KiB summary's state", () => {
    const s = long('text with "quotes" and\nnewlines ', 4000);
    const want = reference({ s, task: 't' });
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      expect(Buffer.from(canonicalBytes({ s, task: 't' })).equals(Buffer.from(want))).toBe(true);
      expect(stringify.mock.calls.filter(([v]) => v === s)).toHaveLength(0); // the WebAssembly escaper did the work
    } finally {
      stringify.mockRestore();
    }
  });

  it('gives the bytes of the canonical text for several strings of a summary size in one value, each result its own', () => {
    const chars = fc.constantFrom('a', ' ', '\n', '"', '\\', '\t', '\u0001', '\u001f', 'é', '→', '😀', '\u2028');
    // Around both thresholds (1 Ki: escaped by the loop; 16 Ki: a long string, then every string goes the long way).
    const length = fc.oneof(
      fc.integer({ min: 1000, max: 16 * 1024 - 1 }),
      fc.constantFrom(0, 1023, 1024, 1025, 16 * 1024 - 1, 16 * 1024),
    );
    fc.assert(
      fc.property(
        fc.array(chars, { minLength: 1, maxLength: 32 }),
        fc.array(length, { minLength: 1, maxLength: 12 }),
        (unit, lengths) => {
          const strings = lengths.map((n, i) => long(`${unit.join('')}${i}`, n));
          const value = { state: strings[0], list: strings, nested: { last: strings.at(-1), short: 'q"' }, n: 1 };
          const first = canonicalBytes(value);
          const kept = Buffer.from(first);
          expect(kept.equals(Buffer.from(reference(value)))).toBe(true);
          // The working buffer is reused by the next encoding: a result handed out stays as it was.
          const other = { list: strings.map((s) => s.toUpperCase()) };
          expect(Buffer.from(canonicalBytes(other)).equals(Buffer.from(reference(other)))).toBe(true);
          expect(Buffer.from(first).equals(kept)).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('gives the same bytes when the escapes outnumber the room it estimated (the buffer grows)', () => {
    // Clean around the four 2 Ki windows where the escape density is sampled (0, 33%, 66%, end), control characters elsewhere.
    const L = 120_000;
    const clean = [
      [0, 8192],
      [39_600, 47_792],
      [79_200, 87_392],
      [L - 8192, L],
    ];
    const s = Array.from({ length: L }, (_, i) => (clean.some(([a, b]) => i >= a! && i < b!) ? 'a' : '\u0001')).join(
      '',
    );
    const want = reference({ s });
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      expect(Buffer.from(canonicalBytes({ s })).equals(Buffer.from(want))).toBe(true);
      expect(stringify.mock.calls.filter(([v]) => v === s)).toHaveLength(0); // the WebAssembly escaper did the work
    } finally {
      stringify.mockRestore();
    }
  });

  it('encodes through JSON.stringify, to the same bytes, where WebAssembly is unavailable', async () => {
    const s = long('text with "quotes" and\nnewlines ', 100_000);
    const want = reference({ s });
    vi.resetModules();
    vi.stubGlobal('WebAssembly', undefined);
    try {
      const fresh = await import('../manifests/encoding/canonical.js');
      const stringify = vi.spyOn(JSON, 'stringify');
      try {
        expect(Buffer.from(fresh.canonicalBytes({ s })).equals(Buffer.from(want))).toBe(true);
        expect(stringify.mock.calls.filter(([v]) => v === s)).toHaveLength(1);
      } finally {
        stringify.mockRestore();
      }
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });

  it('keeps canonical bytes of a long summary equal to its canonical text through validateSummary', () => {
    const summary = { task: 't', state: long('line "one"\n\tC:\\dir → ok\n', 300_000), nextSteps: ['next'] };
    const { bytes } = validateSummary(summary, 10 * 1024 * 1024);
    expect(new TextDecoder().decode(bytes) === canonicalize(summary)).toBe(true);
    expect(JSON.parse(new TextDecoder().decode(bytes)).state === summary.state).toBe(true);
  });

  it('streams the same bytes in pieces (canonicalChunks), short values and long strings alike', () => {
    const s = long('piece "of" text\n\u0001 → 😀 ', 3 * 1024 * 1024 + 17);
    for (const value of [{ a: 1, b: ['x'] }, { s }, { z: s, a: [s, 'q'], m: { s } }]) {
      const pieces: Buffer[] = [];
      for (const piece of canonicalChunks(value)) pieces.push(Buffer.from(piece)); // a copy: a piece lives until the next is pulled
      expect(Buffer.concat(pieces).equals(Buffer.from(canonicalBytes(value)))).toBe(true);
      if (value !== null && 's' in value) expect(pieces.length).toBeGreaterThan(3); // a long string arrives in 1 MiB pieces
    }
  });

  it('streams a large value made of many strings each shorter than a long one in pieces of a few MiB at most', () => {
    const lines = Array.from({ length: 600 }, (_, i) => long(`line ${i} "q" \\ é\n`, 16 * 1024 - 1));
    const value = { task: 't', state: 's', nextSteps: lines };
    const pieces: Buffer[] = [];
    for (const piece of canonicalChunks(value)) pieces.push(Buffer.from(piece));
    expect(Buffer.concat(pieces).equals(Buffer.from(canonicalBytes(value)))).toBe(true);
    expect(pieces.length).toBeGreaterThan(3);
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThanOrEqual(4 * 1024 * 1024);
  });

  it("keeps each generator's piece intact while another encoding runs (the escaper's memory is shared)", () => {
    const a = long('first "value"\n', 2 * 1024 * 1024 + 5);
    const b = long('SECOND \\ value\t', 2 * 1024 * 1024 + 9);
    const ga = canonicalChunks({ a })[Symbol.iterator]();
    const gb = canonicalChunks({ b })[Symbol.iterator]();
    const outA: Buffer[] = [];
    const outB: Buffer[] = [];
    for (;;) {
      const pa = ga.next();
      const pb = gb.next(); // runs the escaper for b while a's piece is still held
      canonicalBytes({ c: long('third\n', 20_000) }); // and a whole encoding on top
      if (!pa.done) outA.push(Buffer.from(pa.value));
      if (!pb.done) outB.push(Buffer.from(pb.value));
      if (pa.done && pb.done) break;
    }
    expect(Buffer.concat(outA).equals(Buffer.from(canonicalBytes({ a })))).toBe(true);
    expect(Buffer.concat(outB).equals(Buffer.from(canonicalBytes({ b })))).toBe(true);
  });

  it('refuses a long string with a lone surrogate like a short one', () => {
    expect(() => canonicalBytes({ s: 'x'.repeat(20_000) + '\ud800' })).toThrow(TypeError);
  });
});
