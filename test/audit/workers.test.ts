/**
 * The worker-thread line verifier runs the compiled dist/ twin of manifests/audit/verify-workers.node.ts
 * (`npm test` builds it first through `pretest`).
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { encodeBase64, encodeBase64Url } from '../../manifests/encoding/base64.js';
import { nobleSign, noblePublicKey } from '../../manifests/crypto/ed25519.js';
import { pae } from '../../manifests/crypto/envelope.js';
import { encodeManifest, MANIFEST_PAYLOAD_TYPE, SUMMARY_MEDIA_TYPE } from '../../manifests/format/manifest.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { inlineLineVerifier } from '../../manifests/audit/verify-line.js';
import { createWorkerLineVerifier, workerScriptUrl } from '../../manifests/audit/verify-workers.node.js';
import { digestOf } from '../../store/hash/digest.js';
import { buildBundle, jsonl, readerOf, trustOf } from '../support/bundle-builder.js';
import { TAMPER_CASES, TAMPER_SPEC } from '../support/tamper-cases.js';

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

  it('gives the in-thread report on every case of the tamper matrix', async () => {
    const b = await buildBundle(TAMPER_SPEC);
    const pool = await createWorkerLineVerifier({ trust: b.trust, threads: 1 });
    try {
      for (const c of TAMPER_CASES) {
        const t = await c.make(b);
        const trust = t.trust ?? b.trust;
        const options = { trust, verifier: nodeVerifier };
        const inline = await verifyBundle(readerOf(t.lines, t.layout), options);
        const threaded =
          trust === b.trust
            ? await verifyBundle(readerOf(t.lines, t.layout), { ...options, lineVerifier: pool })
            : await withPool(trust, (p) => verifyBundle(readerOf(t.lines, t.layout), { ...options, lineVerifier: p }));
        expect(threaded, c.name).toEqual(inline);
      }
    } finally {
      await pool.close();
    }
  });

  it('accepts, through the schemas it loads on demand, a valid manifest the fast path leaves to them', async () => {
    // A keyId with characters JSON escapes is valid, but not matched by the canonical reader (verify-fast-paths.test.ts).
    const seed = new Uint8Array(32).fill(5);
    const keyId = 'key"with\\escapes';
    const trust = trustOf({
      host: 'h1',
      keyId,
      publicKey: encodeBase64Url(noblePublicKey(seed)),
      notBefore: '2000-01-01T00:00:00.000Z',
    });
    const payload = encodeManifest({
      v: 1,
      kind: 'compaction',
      host: 'h1',
      principal: 'alice',
      session: 's1',
      run: 'r1',
      seq: 0,
      prev: null,
      summary: { digest: digestOf(new Uint8Array([1])), size: 1, mediaType: SUMMARY_MEDIA_TYPE },
      createdAt: '2026-01-01T00:00:00.000Z',
      keyId,
    });
    const text = JSON.stringify({
      payloadType: MANIFEST_PAYLOAD_TYPE,
      payload: encodeBase64(payload),
      signatures: [{ keyid: keyId, sig: encodeBase64(nobleSign(pae(MANIFEST_PAYLOAD_TYPE, payload), seed)) }],
    });
    const expected = await inlineLineVerifier({ trust, verifier: nodeVerifier }).verifyLines([{ line: 1, text }]);
    expect(expected[0]!.ok).toBe(true);
    await withPool(trust, async (pool) => expect(await pool.verifyLines([{ line: 1, text }])).toEqual(expected));
  });

  it('loads no zod in a worker for an honest bundle or a bad signature, and the full checklist once a line needs it', async () => {
    // Talks to the compiled worker script directly (its protocol is internal): a probe message answered beside the
    // worker's own handler says whether zod has run in that thread (zod 4 sets globalThis.__zod_globalConfig).
    const b = await buildBundle({ chains: [{ session: 's1', count: 20 }] });
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       parentPort.on('message', (m) => { if (m && m.probe) parentPort.postMessage({ zod: globalThis.__zod_globalConfig !== undefined }); });
       import(${JSON.stringify(workerScriptUrl().href)});`,
      { eval: true, workerData: { kind: 'handoff-ledger/verify-lines@1', trust: b.trust, verifier: 'node' } },
    );
    const replies: unknown[] = [];
    let wake: (() => void) | undefined;
    worker.on('message', (m) => {
      replies.push(m);
      wake?.();
    });
    const next = async (match: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> => {
      for (;;) {
        const i = replies.findIndex((m) => match(m as Record<string, unknown>));
        if (i >= 0) return replies.splice(i, 1)[0] as Record<string, unknown>;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    };
    try {
      await next((m) => m.ready === true);
      worker.postMessage({ id: 1, batch: b.lines.map((text, i) => ({ line: i + 1, text })) });
      const honest = (await next((m) => m.id === 1)) as { results: Array<{ ok: boolean }> };
      expect(honest.results.map((r) => r.ok)).toEqual(b.lines.map(() => true));
      worker.postMessage({ probe: true });
      expect(await next((m) => 'zod' in m)).toEqual({ zod: false });
      // A bad signature is a finding of the fast path itself: still no schemas.
      const forged = b.lines[3]!.replace(/"sig":"(.)/, (_m, c: string) => `"sig":"${c === 'A' ? 'B' : 'A'}`);
      worker.postMessage({ id: 3, batch: [{ line: 4, text: forged }] });
      const bad = (await next((m) => m.id === 3)) as { results: Array<{ ok: boolean; finding?: { code: string } }> };
      expect(bad.results[0]!.finding?.code).toBe('SIGNATURE_INVALID');
      worker.postMessage({ probe: true });
      expect(await next((m) => 'zod' in m)).toEqual({ zod: false });
      worker.postMessage({ id: 2, batch: [{ line: 1, text: 'garbage' }] });
      const damaged = (await next((m) => m.id === 2)) as {
        results: Array<{ ok: boolean; finding?: { code: string } }>;
      };
      expect(damaged.results[0]!.finding?.code).toBe('LINE_NOT_JSON');
      worker.postMessage({ probe: true });
      expect(await next((m) => 'zod' in m)).toEqual({ zod: true });
    } finally {
      await worker.terminate();
    }
  });
});

async function withPool<T>(
  trust: Parameters<typeof createWorkerLineVerifier>[0]['trust'],
  fn: (pool: Awaited<ReturnType<typeof createWorkerLineVerifier>>) => Promise<T>,
): Promise<T> {
  const pool = await createWorkerLineVerifier({ trust, threads: 1 });
  try {
    return await fn(pool);
  } finally {
    await pool.close();
  }
}
