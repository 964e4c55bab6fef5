/**
 * SHA-256 for the tree, the session-heads index and note key ids. Isomorphic: under Node, node:crypto's one-shot
 * `hash` (OpenSSL; about twice the rate of the pure-JS hash on the 65-byte inputs of the trees, where a batch of
 * appends and every proof check hash many); elsewhere (a browser: the auditor's page) `@noble/hashes`. Both give the
 * same bytes (the RFC 6962 and C2SP vectors and a differential test check each).
 *
 * node:crypto is reached through `process.getBuiltinModule` (Node ≥ 20.16), never a static import, so the
 * page's bundle has nothing of Node in it.
 */
import { sha256 as sha256Js } from '@noble/hashes/sha2.js';

interface NodeCryptoHash {
  hash(algorithm: string, data: Uint8Array, outputEncoding: 'buffer'): Uint8Array;
}

const nodeCrypto = (
  globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }
).process?.getBuiltinModule?.('node:crypto') as Partial<NodeCryptoHash> | undefined;

/** The pure-JS SHA-256 (every platform). */
export const sha256Portable = (data: Uint8Array): Uint8Array => sha256Js(data);

/** Which implementation `sha256` uses here: `node:crypto` under Node, else `@noble/hashes`. */
export const sha256Backend: 'node:crypto' | '@noble/hashes' =
  typeof nodeCrypto?.hash === 'function' ? 'node:crypto' : '@noble/hashes';

/** SHA-256 of `data`: 32 fresh bytes (never a view of a shared pool). */
export const sha256: (data: Uint8Array) => Uint8Array =
  sha256Backend === 'node:crypto'
    ? (data) => {
        const out = (nodeCrypto as NodeCryptoHash).hash('sha256', data, 'buffer');
        return new Uint8Array(out.buffer, out.byteOffset, 32);
      }
    : sha256Portable;
