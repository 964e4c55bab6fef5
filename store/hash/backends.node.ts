/**
 * Choosing a BLAKE3 backend. The fastest backend that loads is the default: native, then WASM; the
 * reference (`@noble/hashes`) is the last fallback. Each fallback is reported with one clear notice,
 * never silently a wrong answer: a backend is only used after it has reproduced known digests at load
 * time, whole and in pieces.
 */
import { nobleBlake3, formatDigest, type HashBackend } from './digest.js';
import { loadNativeBlake3 } from './native.node.js';
import { loadWasmBlake3 } from './wasm.js';
import { errorText, shownValue, StoreError, typeName } from '../errors.js';

export type HashBackendName = 'auto' | 'native' | 'wasm' | 'noble';

const NAMES: readonly string[] = ['auto', 'native', 'wasm', 'noble'];

/** What is wrong with a backend name (`undefined`: nothing; absent means `auto`), for callers that check up front. */
export function hashBackendNameProblem(name: unknown): string | undefined {
  if (name === undefined || NAMES.includes(name as string)) return undefined;
  const shown = typeof name === 'string' ? shownValue(name, 40) : typeName(name);
  return `unknown BLAKE3 backend ${shown} (auto, native, wasm or noble)`;
}

/** Where the fast backends come from; tests inject failing or lying loaders here. */
export interface HashBackendLoaders {
  /** Default: native BLAKE3 from @napi-rs/blake-hash. */
  native?: (() => Promise<HashBackend>) | undefined;
  /** Default: WASM BLAKE3 from hash-wasm. */
  wasm?: (() => Promise<HashBackend>) | undefined;
}

/**
 * Known answers every backend must reproduce before it is used (official BLAKE3 vectors, input
 * `i % 251`), with the size of the pieces it is fed in (0: all at once). The set reaches past one
 * 1 KiB chunk, past several tree levels (102,400 bytes) and feeds uneven pieces, so a backend that is
 * only right on short or one-shot inputs is refused too.
 */
const SELF_TEST: ReadonlyArray<[length: number, piece: number, hex: string]> = [
  [0, 0, 'af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262'],
  [1, 0, '2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213'],
  [1025, 0, 'd00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444'],
  [8193, 1000, 'bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b'],
  [102400, 0, 'bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085'],
];

function vectorInput(len: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let i = 0; i < len; i++) out[i] = i % 251;
  return out;
}

async function selfTest(backend: HashBackend): Promise<void> {
  for (const [len, piece, hex] of SELF_TEST) {
    const bytes = vectorInput(len);
    const h = await backend.create();
    const step = piece || Math.max(1, len);
    for (let off = 0; off < len; off += step) h.update(bytes.subarray(off, off + step));
    if (formatDigest(h.digest()) !== `blake3:${hex}`) {
      throw new Error(
        `BLAKE3 backend ${backend.name} failed its self-test at length ${len}${piece ? ` in ${piece}-byte pieces` : ''}`,
      );
    }
  }
}

async function loadChecked(load: () => Promise<HashBackend>): Promise<HashBackend> {
  const backend = await load();
  await selfTest(backend);
  return backend;
}

const reason = (err: unknown) => errorText(err);

/** Native, else WASM, else noble; one notice when it is not native, naming what failed and what serves. */
async function fastest(
  loaders: Required<HashBackendLoaders>,
  onNotice: (message: string) => void,
): Promise<HashBackend> {
  let nativeFailure: unknown;
  try {
    return await loadChecked(loaders.native);
  } catch (err) {
    nativeFailure = err;
  }
  const native = `native BLAKE3 unavailable (${reason(nativeFailure)})`;
  // Chosen first, told after: a notice sink that throws changes neither the choice nor (cached) a later open's.
  let chosen: HashBackend;
  let message: string;
  try {
    chosen = await loadChecked(loaders.wasm);
    message = `handoff-ledger: ${native}; using WASM BLAKE3 (hash-wasm, ~5x slower)`;
  } catch (err) {
    chosen = nobleBlake3;
    message = `handoff-ledger: ${native}; WASM BLAKE3 unavailable (${reason(err)}); using @noble/hashes (pure JS, ~40x slower)`;
  }
  try {
    onNotice(message);
  } catch {
    // the notice is the caller's sink's to deliver; the backend stands
  }
  return chosen;
}

let cached: Promise<HashBackend> | undefined;

/**
 * Loads a BLAKE3 backend. `auto` (default) prefers native, then WASM, and falls back to noble,
 * reporting a fallback once through `onNotice` (once per process for the default loaders, whose
 * outcome is cached); `native` and `wasm` fail if that backend cannot load or fails its self-test;
 * `noble` is the reference.
 * @param loaders where the fast backends come from (tests inject failing or lying ones)
 * @throws StoreError `INVALID_ARGUMENT` for an unknown backend name
 * @throws Error when `native` or `wasm` is asked for and cannot load or fails its self-test
 */
export async function loadHashBackend(
  name: HashBackendName = 'auto',
  onNotice: (message: string) => void = (m) => console.warn(m),
  loaders: HashBackendLoaders = {},
): Promise<HashBackend> {
  const problem = hashBackendNameProblem(name);
  if (problem) throw new StoreError('INVALID_ARGUMENT', problem);
  if (name === 'noble') return nobleBlake3;
  const all = { native: loaders.native ?? loadNativeBlake3, wasm: loaders.wasm ?? loadWasmBlake3 };
  if (name === 'native') return loadChecked(all.native);
  if (name === 'wasm') return loadChecked(all.wasm);
  if (loaders.native || loaders.wasm) return fastest(all, onNotice);
  // fastest never rejects (each load is tried, the notice's failure ignored): the choice is kept for the process.
  cached ??= fastest(all, onNotice);
  return cached;
}
