/**
 * `memoryBundleReader` takes manifests.jsonl as text or as bytes in any of the forms a caller holds them, as
 * `parseTrustStore` and `parseWitnessKeys` take their files: an ArrayBuffer (`await response.arrayBuffer()`, the
 * natural input in a browser) was refused as 'neither text nor bytes'. Its blobs take bytes in the same forms, its
 * tree files text; anything else is refused USAGE.
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

describe("memoryBundleReader's blobs and tree files", () => {
  it('blobs as an ArrayBuffer, a Buffer or any ArrayBufferView verify as Uint8Arrays do (they read as `undefined bytes`)', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const options = { trust: b.trust, verifier: nodeVerifier, requireBlobs: true };
    const manifests = jsonl(b.lines);
    const expected = await verifyBundle(memoryBundleReader({ manifests, blobs: b.blobs }), options);
    expect(expected).toMatchObject({ ok: true, counts: { blobsChecked: 2 } });
    for (const [what, as] of [
      ['ArrayBuffer', (u: Uint8Array) => u.slice().buffer],
      ['Buffer', (u: Uint8Array) => Buffer.from(u)],
      ['DataView', (u: Uint8Array) => new DataView(u.slice().buffer)],
      [
        'subarray',
        (u: Uint8Array) => {
          const padded = new Uint8Array(u.length + 8).fill(0x0a);
          padded.set(u, 4);
          return padded.subarray(4, 4 + u.length);
        },
      ],
    ] as const) {
      const blobs = new Map([...b.blobs].map(([digest, bytes]) => [digest, as(bytes)]));
      const r = await verifyBundle(memoryBundleReader({ manifests, blobs }), options);
      expect({ ok: r.ok, counts: r.counts, findings: r.findings }, what).toEqual({
        ok: expected.ok,
        counts: expected.counts,
        findings: expected.findings,
      });
    }
  });

  it('a blob that is no bytes, or a tree file that is no text: USAGE naming it, before anything is read', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const [digest, bytes] = [...b.blobs][0]!;
    const manifests = jsonl(b.lines);
    // Text failed the audit with digestOf's StoreError; null and a number read as a blob missing or `undefined bytes`.
    for (const bad of [new TextDecoder().decode(bytes), null, 5, {}, [1, 2]])
      expect(() => memoryBundleReader({ manifests, blobs: new Map([[digest, bad]]) } as never), String(bad)).toThrow(
        expect.objectContaining({
          name: 'AuditError',
          code: 'USAGE',
          message: expect.stringMatching(
            new RegExp(`^memoryBundleReader input: blobs' "${digest}" must be the blob's bytes \\(a Uint8Array, `),
          ) as string,
        }),
      );
    // A Map-like with only `get` has its blob looked at as it is read: the audit is refused, not a finding.
    const getOnly = { get: (d: string) => (d === digest ? 'text' : undefined) };
    await expect(
      verifyBundle(memoryBundleReader({ manifests, blobs: getOnly } as never), {
        trust: b.trust,
        verifier: nodeVerifier,
      }),
    ).rejects.toMatchObject({ name: 'AuditError', code: 'USAGE' });
    // A tree file given as bytes read as a malformed checkpoint (CHECKPOINT_INVALID: not text).
    for (const bad of [new Uint8Array(3), 5, null])
      expect(
        () => memoryBundleReader({ manifests, treeFiles: { 'checkpoint.note': bad } } as never),
        String(bad),
      ).toThrow(
        expect.objectContaining({
          code: 'USAGE',
          message: expect.stringMatching(
            /^memoryBundleReader input: treeFiles\["checkpoint\.note"\] must be the file's text, not /,
          ) as string,
        }),
      );
    expect(memoryBundleReader({ manifests, treeFiles: { 'checkpoint.note': undefined } })).toBeDefined();
  });
});
