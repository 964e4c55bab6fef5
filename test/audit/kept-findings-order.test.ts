/**
 * The findings a report keeps (`maxFindings`: the CLI's and the page's 100,000) are the first in file order, whatever
 * the line verifier's concurrency: `verify --workers 0`, `verify` on worker threads, WebCrypto and the page's pool
 * must list the same findings for one bundle. Lines decided without the line verifier (empty, not UTF-8, over-long,
 * the cut-off last line) were added as they were read, ahead of the batches still in flight, so more batches in
 * flight kept other findings (found by a differential fuzz campaign of the verifiers, minimized).
 */
import { describe, expect, it } from 'vitest';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { inlineLineVerifier, type LineVerifier } from '../../manifests/audit/verify-line.js';
import { createWebCryptoLineVerifier } from '../../manifests/audit/verify-webcrypto.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { buildBundle, jsonl } from '../support/bundle-builder.js';
import { flipSignatureBit } from '../support/tamper-cases.js';

const found = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

describe('the findings kept under maxFindings', () => {
  it('are the first in file order, with one batch in flight or several', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 5 }] });
    const bad = b.lines.map(flipSignatureBit);
    // Two bad signatures, an empty line, a bad signature, and a cut-off last line with a bad signature.
    const text = `${jsonl([bad[0]!, bad[1]!, '', bad[2]!])}${bad[3]!}`;
    const ctx = { trust: b.trust, verifier: nodeVerifier };
    const inFlight = (concurrency: number): LineVerifier => ({ ...inlineLineVerifier(ctx), concurrency });
    const webcrypto = await createWebCryptoLineVerifier(b.trust);
    expect(webcrypto).toBeDefined();
    const all = await verifyBundle(memoryBundleReader({ manifests: text }), { ...ctx, batchSize: 1 });
    expect(found(all)).toEqual([
      'SIGNATURE_INVALID@1',
      'SIGNATURE_INVALID@2',
      'LINE_NOT_JSON@3',
      'SIGNATURE_INVALID@4',
      'LINE_TRUNCATED@5',
      'SIGNATURE_INVALID@5',
    ]);
    for (const maxFindings of [1, 2, 3, 4, 5])
      for (const lineVerifier of [undefined, inFlight(2), inFlight(4), webcrypto!]) {
        const r = await verifyBundle(memoryBundleReader({ manifests: text }), {
          ...ctx,
          batchSize: 1,
          maxFindings,
          ...(lineVerifier ? { lineVerifier } : {}),
        });
        expect({ maxFindings, concurrency: lineVerifier?.concurrency ?? 1, kept: found(r) }).toEqual({
          maxFindings,
          concurrency: lineVerifier?.concurrency ?? 1,
          kept: found(all).slice(0, maxFindings),
        });
        expect(r.counts).toEqual(all.counts);
      }
  });
});
