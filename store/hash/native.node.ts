/**
 * BLAKE3 in native code (@napi-rs/blake-hash: the Rust `blake3` crate with its SIMD kernels, shipped as
 * prebuilt per-platform binaries — nothing is compiled at install). 4–5× the WASM backend's rate on one core
 * (docs/DESIGN.md, "Performance", has the figures and how they were measured). Node only: where the binary is
 * missing (another platform, a browser) loading fails and the WASM backend serves.
 */
import { singleUseHasher, type HashBackend, type Hasher } from './digest.js';

interface NativeHasher {
  update(input: Uint8Array): unknown;
  digestBuffer(): Buffer;
}

/**
 * Creates the native backend.
 * @throws Error (rejects) where the package or its binary for this platform cannot be loaded
 */
export async function loadNativeBlake3(): Promise<HashBackend> {
  const { Blake3Hasher } = (await import('@napi-rs/blake-hash')) as unknown as { Blake3Hasher: new () => NativeHasher };
  new Blake3Hasher().digestBuffer(); // fail here, at load time, rather than in the middle of a publish
  return {
    name: 'native',
    async create(): Promise<Hasher> {
      const h = new Blake3Hasher();
      return singleUseHasher(
        (chunk) => void h.update(chunk),
        () => new Uint8Array(h.digestBuffer()),
      );
    },
  };
}
