/**
 * Choosing a BLAKE3 backend. The fast backend is the default where it loads; the reference
 * (`@noble/hashes`) is the fallback, with one clear notice, never silently a wrong answer:
 * a backend is only used after it has reproduced known digests at load time.
 */
import { nobleBlake3, hashBytes, type HashBackend } from './digest.js';
import { loadWasmBlake3 } from './hash-wasm.js';

export type HashBackendName = 'auto' | 'wasm' | 'noble';

/** Known answers every backend must reproduce before it is used (official BLAKE3 vectors). */
const SELF_TEST: ReadonlyArray<[number, string]> = [
  [0, 'af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262'],
  [1, '2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213'],
  [1025, 'd00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444'],
];

function vectorInput(len: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let i = 0; i < len; i++) out[i] = i % 251;
  return out;
}

async function selfTest(backend: HashBackend): Promise<void> {
  for (const [len, hex] of SELF_TEST) {
    const got = await hashBytes(vectorInput(len), backend);
    if (got !== `blake3:${hex}`) throw new Error(`BLAKE3 backend ${backend.name} failed its self-test at length ${len}`);
  }
}

let cached: Promise<HashBackend> | undefined;

/**
 * Loads a BLAKE3 backend. `auto` (default) prefers WASM and falls back to noble, reporting the
 * fallback once through `onNotice`; `wasm` fails if WASM cannot load; `noble` is the reference.
 */
export async function loadHashBackend(
  name: HashBackendName = 'auto',
  onNotice: (message: string) => void = (m) => console.warn(m),
): Promise<HashBackend> {
  if (name === 'noble') return nobleBlake3;
  if (name === 'wasm') {
    const b = await loadWasmBlake3();
    await selfTest(b);
    return b;
  }
  cached ??= (async () => {
    try {
      const b = await loadWasmBlake3();
      await selfTest(b);
      return b;
    } catch (err) {
      onNotice(`handoff-ledger: WASM BLAKE3 unavailable (${(err as Error).message}); using @noble/hashes (slower)`);
      return nobleBlake3;
    }
  })();
  return cached;
}
