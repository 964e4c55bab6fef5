/**
 * BLAKE3 digests in OCI `alg:hex` form and the hash backends that compute them.
 * Isomorphic: imports no `node:` module.
 */
import { blake3 } from '@noble/hashes/blake3.js';
import { createBLAKE3 } from 'hash-wasm';
import { checkBytesArgument, shownValue, StoreError, typeWithArticle } from '../errors.js';

export type Digest = `blake3:${string}`;

const DIGEST_RE = /^blake3:[0-9a-f]{64}$/;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** True when `value` is `blake3:` followed by 64 lowercase hex digits. */
export function isDigest(value: unknown): value is Digest {
  return typeof value === 'string' && DIGEST_RE.test(value);
}

/**
 * Returns the 64-hex part of a digest.
 * @throws StoreError `INVALID_DIGEST` for anything but `blake3:<64 lowercase hex>`.
 */
export function digestHex(digest: string): string {
  if (!isDigest(digest)) {
    throw new StoreError('INVALID_DIGEST', `not a blake3 digest: ${shownValue(digest, 80)}`);
  }
  return digest.slice(7);
}

export function bytesToHex(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += HEX[bytes[i]!];
  return out;
}

export function hexToBytes(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) throw new RangeError('invalid hex');
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** A BLAKE3-256 digest's 32 bytes as `blake3:<64 hex>`. @throws StoreError `INVALID_ARGUMENT` for anything but 32 bytes */
export function formatDigest(hash: Uint8Array): Digest {
  checkBytesArgument(hash, 'formatDigest: the BLAKE3-256 digest', StoreError, 32);
  return `blake3:${bytesToHex(hash)}`;
}

/** An incremental BLAKE3-256 computation. */
export interface Hasher {
  /** @throws StoreError `INVALID_ARGUMENT` for a chunk that is no Uint8Array (the same refusal from every backend) */
  update(chunk: Uint8Array): void;
  /** The 32-byte digest; the hasher must not be used afterwards. */
  digest(): Uint8Array;
}

/**
 * A chunk given to a Hasher's `update` as its type says. The backends disagreed on anything else: noble threw a
 * TypeError, hash-wasm an Error ('Invalid data type!') but hashed a string as its UTF-8 text, the native addon hashed
 * a string and a number too: one input, three answers.
 */
const checkChunk = (chunk: unknown) => checkBytesArgument(chunk, 'Hasher.update: the chunk', StoreError);

/**
 * A Hasher over a backend's `update` and `finish` that throws on any use after `digest()`: the fast
 * backends reuse or free their state once finished, so a late update must fail loudly, not hash garbage.
 */
export function singleUseHasher(update: (chunk: Uint8Array) => void, finish: () => Uint8Array): Hasher {
  let done = false;
  const check = () => {
    if (done) throw new Error('BLAKE3 hasher used after digest()');
  };
  return {
    update: (chunk) => {
      check();
      checkChunk(chunk);
      update(chunk);
    },
    digest: () => {
      check();
      done = true;
      return finish();
    },
  };
}

/** A BLAKE3 implementation. Every backend must agree with `nobleBlake3` on every input. */
export interface HashBackend {
  readonly name: string;
  create(): Promise<Hasher>;
}

/**
 * What is wrong with a value given as a `HashBackend` (a store's `hash` option): `undefined` when it is an object with a
 * `create` function and a string `name`. A store refuses anything else at its open, not at the first put or read.
 */
export function hashBackendProblem(hash: unknown): string | undefined {
  const h = hash as Partial<Record<'create' | 'name', unknown>> | null;
  if (typeof hash === 'object' && h !== null && typeof h.create === 'function' && typeof h.name === 'string')
    return undefined;
  return `hash must be a BLAKE3 backend ({ name, create() }, as loadHashBackend gives), not ${hash === null ? 'null' : typeof hash === 'object' ? 'an object without create() and a name' : typeWithArticle(hash)}`;
}

/** The reference backend: `@noble/hashes` (pure JS, portable, audited). */
export const nobleBlake3: HashBackend = {
  name: 'noble',
  async create(): Promise<Hasher> {
    const h = blake3.create();
    return {
      update: (chunk) => {
        checkChunk(chunk);
        h.update(chunk);
      },
      digest: () => h.digest(),
    };
  },
};

type SyncHash = (bytes: Uint8Array) => Uint8Array;
let fastSmall: SyncHash | undefined;

/**
 * Resolves once `digestOf`'s fast path is prepared (or known unavailable). It is started at import: one
 * hash-wasm BLAKE3 instance, reused (init, update, digest within one synchronous call, so callers cannot
 * interleave), and only used after it agreed with the reference on probes.
 */
export const digestOfReady: Promise<void> = createBLAKE3().then(
  (h) => {
    const wasm: SyncHash = (bytes) => {
      h.init();
      h.update(bytes);
      return h.digest('binary');
    };
    const probes = [new Uint8Array(0), Uint8Array.from({ length: 2049 }, (_, i) => i % 251)];
    if (probes.every((p) => bytesToHex(wasm(p)) === bytesToHex(blake3(p)))) fastSmall = wasm;
  },
  () => {}, // no WebAssembly: the reference serves
);

/**
 * BLAKE3 of small `bytes` (manifest payloads, keys), synchronously: WebAssembly once it is ready (~3 µs for
 * a manifest), the reference implementation until then and wherever WebAssembly is unavailable (~35 µs).
 * @throws StoreError `INVALID_ARGUMENT` for anything but a Uint8Array (a string was hashed as its UTF-8 text once
 *   WebAssembly was ready, and refused by the reference before: hash a string's `TextEncoder` bytes)
 */
export function digestOf(bytes: Uint8Array): Digest {
  checkBytesArgument(bytes, 'digestOf: bytes', StoreError);
  return formatDigest(digestBytesOf(bytes));
}

/** `digestOf`'s 32 bytes, unformatted (checksums that are stored as bytes). */
export function digestBytesOf(bytes: Uint8Array): Uint8Array {
  return (fastSmall ?? blake3)(bytes);
}

/** BLAKE3 of `bytes` with the given backend. */
export async function hashBytes(bytes: Uint8Array, backend: HashBackend): Promise<Digest> {
  const h = await backend.create();
  h.update(bytes);
  return formatDigest(h.digest());
}
