/**
 * The page's pool of line verifiers (web/worker/line-pool.ts) with in-process ports: each "worker" is
 * `servePoolWorker` behind structured clones and a task hop, as a real one is behind postMessage. The
 * pooled verifier must give `verifyBundle` exactly the in-thread verifier's report, whatever the batch
 * size and worker count; a pool that cannot start, or a worker that dies, is `WORKER_FAILED`. The same
 * module runs in Chromium's workers in test/web/page-pool.test.ts.
 */
import { setImmediate } from 'node:timers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuditError } from '../../manifests/audit/errors.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import {
  packBatch,
  readTrustFiles,
  servePoolWorker,
  startLinePool,
  unpackBatch,
  type PoolPort,
  type PoolReply,
  type PoolRequest,
} from '../../web/worker/line-pool.js';
import { buildBundle, readerOf } from '../support/bundle-builder.js';
import { flipSignatureBit } from '../support/tamper-cases.js';

interface FakeWorker extends PoolPort {
  batches: number;
  terminated: boolean;
  /** Makes the worker fail as a crashed one does (its `error` event). */
  crash(why: string): void;
}

/** A worker in this thread: messages are cloned and delivered a task later, both ways. */
function inProcessWorker(behaviour: 'serve' | 'silent' = 'serve'): FakeWorker {
  let onReply: (r: PoolReply) => void = () => {};
  let onFail: (why: string) => void = () => {};
  const w: FakeWorker = {
    batches: 0,
    terminated: false,
    crash: (why) => onFail(why),
    post(message: PoolRequest) {
      if (w.terminated || behaviour === 'silent') return;
      if (message.type === 'lines') w.batches++;
      const copy = structuredClone(message);
      setImmediate(() => serve(copy));
    },
    listen(reply, fail) {
      onReply = reply;
      onFail = fail;
    },
    terminate() {
      w.terminated = true;
    },
  };
  const serve = servePoolWorker((reply) => {
    const copy = structuredClone(reply);
    setImmediate(() => !w.terminated && onReply(copy));
  });
  return w;
}

async function mixedBundle() {
  const b = await buildBundle({
    chains: Array.from({ length: 6 }, (_, i) => ({ session: `s${i}`, principal: `p${i % 2}`, count: 20 })),
  });
  const lines = b.lines.map((l, i) => (i === 3 || i === 77 ? flipSignatureBit(l) : l));
  lines.splice(50, 0, 'not json', '');
  lines.push(b.lines[10]!); // a duplicate, batches away from its first line
  return { lines, trustText: JSON.stringify(b.trust), trust: b.trust };
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('the page pool of line verifiers', () => {
  it.each([
    [1, 1000],
    [2, 7],
    [3, 1],
    [4, 50],
  ])('with %i workers and batches of %i lines gives the in-thread report', async (size, batchSize) => {
    const { lines, trustText, trust } = await mixedBundle();
    const workers: FakeWorker[] = [];
    const pool = await startLinePool({
      size,
      trustText,
      spawn: () => {
        const w = inProcessWorker();
        workers.push(w);
        return w;
      },
    });
    expect(pool.workers).toBe(size);
    expect(pool.verifier.concurrency).toBe(2 * size);
    const pooled = await verifyBundle(readerOf(lines), { trust, lineVerifier: pool.verifier, batchSize });
    const inline = await verifyBundle(readerOf(lines), { trust });
    await pool.verifier.close();
    expect(pooled).toEqual(inline);
    expect(pooled.counts.byCode).toMatchObject({ SIGNATURE_INVALID: 2, LINE_NOT_JSON: 2, DUPLICATE: 1 });
    // Every worker took batches when there were enough of them to go round.
    if (lines.length / batchSize >= 2 * size) for (const w of workers) expect(w.batches).toBeGreaterThan(0);
    expect(workers.every((w) => w.terminated)).toBe(true);
  });

  it('chooses WebCrypto in each worker where it verifies Ed25519, and noble where there is none', async () => {
    const { lines, trustText, trust } = await mixedBundle();
    const spawn = () => inProcessWorker();
    const inline = await verifyBundle(readerOf(lines), { trust });
    const web = await startLinePool({ size: 2, trustText, spawn });
    expect(web.signatures).toBe('webcrypto');
    await web.verifier.close();
    // A platform without SubtleCrypto (a page from http:// on another host, say): every worker falls back to noble.
    vi.stubGlobal('crypto', {});
    const noble = await startLinePool({ size: 2, trustText, spawn });
    expect(noble.signatures).toBe('noble');
    expect(await verifyBundle(readerOf(lines), { trust, lineVerifier: noble.verifier, batchSize: 10 })).toEqual(inline);
    await noble.verifier.close();
  });

  it('does not start when a worker cannot read the trust file, and stops those it started', async () => {
    const workers: FakeWorker[] = [];
    const started = startLinePool({
      size: 3,
      trustText: '{"keys": "not a list"}',
      spawn: () => {
        const w = inProcessWorker();
        workers.push(w);
        return w;
      },
    });
    const err = await started.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuditError);
    expect(err).toMatchObject({ code: 'WORKER_FAILED', message: expect.stringMatching(/did not start: trust file/) });
    expect(workers.map((w) => w.terminated)).toEqual([true, true, true]);
  });

  it('does not start when a worker cannot be created, and stops those it started', async () => {
    const workers: FakeWorker[] = [];
    const err = await startLinePool({
      size: 3,
      trustText: '{}',
      spawn: () => {
        if (workers.length === 2) throw new Error('workers are not allowed here');
        const w = inProcessWorker();
        workers.push(w);
        return w;
      },
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'WORKER_FAILED',
      message: expect.stringMatching(/workers are not allowed here/),
    });
    expect(workers.map((w) => w.terminated)).toEqual([true, true]);
  });

  it('gives up on workers that never answer after its start time', async () => {
    const workers: FakeWorker[] = [];
    const err = await startLinePool({
      size: 2,
      trustText: '{}',
      startMs: 50,
      spawn: () => {
        const w = inProcessWorker('silent');
        workers.push(w);
        return w;
      },
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_FAILED', message: expect.stringMatching(/did not start within 50 ms/) });
    expect(workers.map((w) => w.terminated)).toEqual([true, true]);
  });

  it('fails the audit with WORKER_FAILED when a worker dies during it', async () => {
    const { lines, trustText, trust } = await mixedBundle();
    const workers: FakeWorker[] = [];
    const pool = await startLinePool({
      size: 2,
      trustText,
      spawn: () => {
        const w = inProcessWorker();
        workers.push(w);
        return w;
      },
    });
    let batches = 0;
    const audit = verifyBundle(readerOf(lines), {
      trust,
      batchSize: 5,
      lineVerifier: {
        concurrency: pool.verifier.concurrency,
        verifyLines(batch) {
          // The third batch finds its worker dead.
          if (++batches === 3) workers[1]!.crash('crashed: out of memory');
          return pool.verifier.verifyLines(batch);
        },
        close: () => pool.verifier.close(),
      },
    });
    const err = await audit.catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'WORKER_FAILED', message: 'verification worker 2 crashed: out of memory' });
    // Once failed, the pool refuses further batches rather than hanging.
    await expect(pool.verifier.verifyLines([{ line: 1, text: lines[0]! }])).rejects.toMatchObject({
      code: 'WORKER_FAILED',
    });
    await pool.verifier.close();
    expect(workers.every((w) => w.terminated)).toBe(true);
  });
});

describe('a batch on the wire', () => {
  it('comes back line for line: empty texts, astral characters, lone surrogates, newlines and gaps in numbering', () => {
    const batch = [
      { line: 1, text: '{"a":1}' },
      { line: 2, text: '' },
      { line: 5, text: '😀é\uD800x' },
      { line: 6, text: 'a\nb' },
      { line: 9, text: '' },
    ];
    const packed = packBatch(batch);
    expect(typeof packed.texts).toBe('string');
    expect(unpackBatch(structuredClone(packed))).toEqual(batch);
    expect(unpackBatch(packBatch([]))).toEqual([]);
  });
});

describe("the page's trust files refused", () => {
  it('name each file quoted, as verify --trust names a path: a name is data', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const key = b.trust.keys[0]!;
    const forged = { ...b.trust, keys: [{ ...key, publicKey: 'A'.repeat(43) }] };
    // Bare, one of these names read as two files, the other as the refusal's own words.
    const one = 'a.json, b.json';
    const two = 'c.json: trust store is not valid JSON\u001b[2J';
    const refusal = (files: Array<{ name: string; text: string }>) => {
      try {
        readTrustFiles(files);
      } catch (err) {
        return err;
      }
      return 'no error';
    };
    expect(
      refusal([
        { name: one, text: JSON.stringify(b.trust) },
        { name: two, text: JSON.stringify(forged) },
      ]),
    ).toMatchObject({
      name: 'AuditError',
      code: 'TRUST_INVALID',
      message: `trust files "a.json, b.json", "c.json: trust store is not valid JSON\\u001b[2J": key "${key.keyId}" of host ${key.host} is listed with two public keys`,
    });
    expect(
      refusal([
        { name: one, text: JSON.stringify(b.trust) },
        { name: two, text: '{"keys": [' },
      ]),
    ).toMatchObject({
      code: 'TRUST_INVALID',
      message: 'trust file "c.json: trust store is not valid JSON\\u001b[2J": trust store is not valid JSON',
    });
  });
});
