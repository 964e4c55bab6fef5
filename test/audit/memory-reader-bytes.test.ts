/**
 * `memoryBundleReader` takes manifests.jsonl as text or as bytes in any of the forms a caller holds them, as
 * `parseTrustStore` and `parseWitnessKeys` take their files: an ArrayBuffer (`await response.arrayBuffer()`, the
 * natural input in a browser) was refused as 'neither text nor bytes'.
 */
import { describe, expect, it } from 'vitest';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { buildBundle, jsonl } from '../support/bundle-builder.js';

describe("memoryBundleReader's manifests", () => {
  it('as an ArrayBuffer, a Buffer or any ArrayBufferView verify as the same text does', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const text = jsonl(b.lines);
    const options = { trust: b.trust, verifier: nodeVerifier };
    const expected = await verifyBundle(memoryBundleReader({ manifests: text }), options);
    expect(expected.ok).toBe(true);
    const utf8 = new TextEncoder().encode(text);
    const padded = new Uint8Array(utf8.length + 16).fill(0x0a);
    padded.set(utf8, 7);
    for (const [what, manifests] of [
      ['ArrayBuffer', utf8.slice().buffer],
      ['Buffer', Buffer.from(text)],
      ['subarray', padded.subarray(7, 7 + utf8.length)],
      ['DataView', new DataView(padded.buffer, 7, utf8.length)],
    ] as const) {
      const reader = memoryBundleReader({ manifests });
      expect(await reader.manifestsSize?.(), what).toBe(utf8.length);
      const r = await verifyBundle(reader, options);
      expect({ ok: r.ok, counts: r.counts, findings: r.findings }, what).toEqual({
        ok: expected.ok,
        counts: expected.counts,
        findings: expected.findings,
      });
    }
  });

  it('that are neither text nor bytes: USAGE naming what was given', () => {
    for (const manifests of [5, null, {}, [1, 2]])
      expect(() => memoryBundleReader({ manifests } as never), String(manifests)).toThrow(
        expect.objectContaining({
          name: 'AuditError',
          code: 'USAGE',
          message: expect.stringMatching(
            /^memoryBundleReader input: manifests must be the text or bytes of manifests\.jsonl, not /,
          ) as string,
        }),
      );
  });
});
