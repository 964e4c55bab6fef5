/**
 * The worker-thread line verifier runs the compiled dist/ twin of manifests/audit/verify-workers.node.ts
 * (`npm test` builds it first through `pretest`).
 */
import { describe, expect, it } from 'vitest';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { createWorkerLineVerifier, workerScriptUrl } from '../../manifests/audit/verify-workers.node.js';
import { buildBundle, jsonl, trustOf } from '../support/bundle-builder.js';

/** 2,000 manifests with a gap, a non-JSON line, a duplicate and a bad signature; its in-thread report. */
async function damagedBundle() {
  const b = await buildBundle({ chains: Array.from({ length: 20 }, (_, i) => ({ session: `s${i}`, count: 100 })) });
  const lines = [...b.lines];
  lines.splice(700, 1);
  lines.splice(1200, 0, 'garbage', lines[5]!);
  lines[1500] = lines[1500]!.replace(/"sig":"(.)/, (_m, c: string) => `"sig":"${c === 'A' ? 'B' : 'A'}`);
  const reader = () => memoryBundleReader({ manifests: jsonl(lines) });
  const inline = await verifyBundle(reader(), { trust: b.trust, verifier: nodeVerifier, batchSize: 64 });
  return { b, reader, inline };
}

describe('createWorkerLineVerifier', () => {
  it('runs from the compiled dist/ twin when the module itself is TypeScript', () => {
    expect(workerScriptUrl().pathname).toMatch(/\/dist\/manifests\/audit\/verify-workers\.node\.js$/);
  });

  it('produces exactly the in-thread report, findings and line numbers included', async () => {
    const { b, reader, inline } = await damagedBundle();
    const pool = await createWorkerLineVerifier({ trust: b.trust, threads: 2 });
    try {
      const threaded = await verifyBundle(reader(), { trust: b.trust, lineVerifier: pool, batchSize: 64 });
      expect(threaded).toEqual(inline);
      expect(inline.findings.map((f) => f.code)).toEqual([
        'SEQ_GAP',
        'LINE_NOT_JSON',
        'DUPLICATE',
        'SIGNATURE_INVALID',
        'SEQ_GAP',
      ]);
    } finally {
      await pool.close();
    }
  });

  it('gives the in-thread report when the calling thread verifies a share of the batches (mainShare)', async () => {
    const { b, reader, inline } = await damagedBundle();
    const pool = await createWorkerLineVerifier({ trust: b.trust, threads: 1, mainShare: true });
    try {
      expect(pool.concurrency).toBe(3);
      const threaded = await verifyBundle(reader(), { trust: b.trust, lineVerifier: pool, batchSize: 64 });
      expect(threaded).toEqual(inline);
    } finally {
      await pool.close();
    }
  });

  it('uses the trust store it was given, not the one passed to verifyBundle', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const pool = await createWorkerLineVerifier({ trust: trustOf(), threads: 1 });
    try {
      const r = await verifyBundle(memoryBundleReader({ manifests: jsonl(b.lines) }), {
        trust: b.trust,
        lineVerifier: pool,
      });
      expect(r.findings.map((f) => f.code)).toEqual(['KEY_UNTRUSTED', 'KEY_UNTRUSTED', 'KEY_UNTRUSTED']);
    } finally {
      await pool.close();
    }
  });

  it('fails with WORKER_FAILED when the compiled script is missing', async () => {
    await expect(
      createWorkerLineVerifier({ trust: trustOf(), scriptUrl: new URL('file:///nonexistent/verify-workers.js') }),
    ).rejects.toMatchObject({
      name: 'AuditError',
      code: 'WORKER_FAILED',
    });
  });

  it('fails with WORKER_FAILED when a worker crashes while starting', async () => {
    const crash = new URL('data:text/javascript,throw new Error("boom")');
    await expect(createWorkerLineVerifier({ trust: trustOf(), threads: 2, scriptUrl: crash })).rejects.toMatchObject({
      name: 'AuditError',
      code: 'WORKER_FAILED',
    });
  });

  it('rejects batches with WORKER_FAILED after it is closed', async () => {
    const pool = await createWorkerLineVerifier({ trust: trustOf(), threads: 1 });
    await pool.close();
    await expect(pool.verifyLines([{ line: 1, text: '{}' }])).rejects.toMatchObject({ code: 'WORKER_FAILED' });
  });
});
