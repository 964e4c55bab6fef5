/**
 * BLAKE3 in WebAssembly (hash-wasm): ~15x the pure-JS reference on this machine class.
 * Isomorphic: the WASM binary is embedded in the package, so it loads in browsers too.
 */
import { createBLAKE3 } from 'hash-wasm';
import { singleUseHasher, type HashBackend, type Hasher } from './digest.js';

type WasmHasher = Awaited<ReturnType<typeof createBLAKE3>>;

// Each createBLAKE3() instantiates a WebAssembly module (~0.1 ms, a small share of every small publish):
// finished hashers are reset and reused. Bounded: beyond it, concurrent hashers are simply dropped.
const POOL_LIMIT = 16;

/**
 * Creates the WASM backend.
 * @throws Error (rejects) if WebAssembly is unavailable or the module cannot be instantiated
 */
export async function loadWasmBlake3(): Promise<HashBackend> {
  const pool: WasmHasher[] = [await createBLAKE3()]; // fail here, at load time, rather than in the middle of a publish
  return {
    name: 'wasm',
    async create(): Promise<Hasher> {
      const h = pool.pop() ?? (await createBLAKE3());
      h.init();
      return singleUseHasher(
        (chunk) => void h.update(chunk),
        () => {
          const out = h.digest('binary');
          if (pool.length < POOL_LIMIT) pool.push(h);
          return out;
        },
      );
    },
  };
}
