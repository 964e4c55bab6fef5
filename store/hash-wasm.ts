/**
 * BLAKE3 in WebAssembly (hash-wasm): ~15x the pure-JS reference on this machine class.
 * Isomorphic: the WASM binary is embedded in the package, so it loads in browsers too.
 */
import { createBLAKE3 } from 'hash-wasm';
import type { HashBackend, Hasher } from './digest.js';

/** Creates the WASM backend; rejects if WebAssembly is unavailable. */
export async function loadWasmBlake3(): Promise<HashBackend> {
  await createBLAKE3(); // fail here, at load time, rather than in the middle of a publish
  return {
    name: 'wasm',
    async create(): Promise<Hasher> {
      const h = await createBLAKE3();
      return {
        update: (chunk) => void h.update(chunk),
        digest: () => h.digest('binary'),
      };
    },
  };
}
