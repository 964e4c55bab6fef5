/**
 * Node only: runs the per-line audit steps (parse, payload type, key, signature, schema) on worker
 * threads, so a large bundle's signature checks use every core. The main thread keeps splitting
 * lines and applies the chain rules; results come back in batch order, so reports are identical to
 * the in-thread verifier's.
 *
 * A worker must load compiled JavaScript. From dist/ this module starts itself; when it runs as
 * TypeScript (vitest), it starts its dist/ twin, which `npm run build` (the `pretest` script) produces.
 */
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { AuditError } from './errors.js';
import { digestOfReady } from '../../store/hash/digest.js';
import { nobleVerifier, type SignatureVerifier } from '../crypto/ed25519.js';
import { nodeVerifier } from '../crypto/ed25519.node.js';
import type { TrustStore } from '../format/trust.js';
import { verifyLineText, type LineOutcome, type LineVerifier } from './verify-line.js';

const WORKER_KIND = 'handoff-ledger/verify-lines@1';

export interface WorkerLineVerifierOptions {
  trust: TrustStore;
  /** Threads to start (default: available parallelism, at least 1). */
  threads?: number;
  /** Signature backend inside the workers (default `node`, i.e. node:crypto). */
  verifier?: 'node' | 'noble';
  /** Overrides the compiled worker script (tests). */
  scriptUrl?: URL;
}

type Request = { id: number; batch: Array<{ line: number; text: string }> };
type Reply = { id: number; results: LineOutcome[] } | { ready: true } | { id: number; error: string };

/** The compiled script a worker runs: this file itself from dist/, its dist/ twin from source. */
export function workerScriptUrl(): URL {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return new URL(here);
  return new URL('../../dist/manifests/audit/verify-workers.node.js', here);
}

/**
 * Starts `threads` workers and resolves once each has loaded.
 * @throws AuditError `WORKER_FAILED` (no compiled script, a worker failed to start)
 */
export async function createWorkerLineVerifier(options: WorkerLineVerifierOptions): Promise<LineVerifier> {
  const threads = Math.max(1, options.threads ?? availableParallelism());
  const script = options.scriptUrl ?? workerScriptUrl();
  if (script.protocol === 'file:' && !existsSync(fileURLToPath(script))) {
    throw new AuditError('WORKER_FAILED', `worker script ${fileURLToPath(script)} is missing; run \`npm run build\``);
  }
  const data = { kind: WORKER_KIND, trust: options.trust, verifier: options.verifier ?? 'node' };
  const pending = new Map<
    number,
    { resolve: (r: LineOutcome[]) => void; reject: (e: unknown) => void; worker: Worker }
  >();
  const load = new Map<Worker, number>();
  let failure: AuditError | undefined;
  let nextId = 0;

  const fail = (err: AuditError) => {
    failure ??= err;
    for (const [id, p] of pending) {
      pending.delete(id);
      p.reject(failure);
    }
  };

  const workers = await Promise.all(
    Array.from({ length: threads }, () => {
      const worker = new Worker(script, { workerData: data });
      load.set(worker, 0);
      return new Promise<Worker>((resolve, reject) => {
        worker.on('message', (msg: Reply) => {
          if ('ready' in msg) return resolve(worker);
          const p = pending.get(msg.id);
          if (!p) return;
          pending.delete(msg.id);
          load.set(worker, load.get(worker)! - 1);
          if ('error' in msg) p.reject(new AuditError('WORKER_FAILED', `verification worker failed: ${msg.error}`));
          else p.resolve(msg.results);
        });
        const died = (why: string, cause?: unknown) => {
          const err = new AuditError('WORKER_FAILED', `verification worker ${why}`, { cause });
          reject(err);
          fail(err);
        };
        worker.on('error', (err) => died(`crashed: ${err.message}`, err));
        worker.on('exit', (code) => {
          if (code !== 0) died(`exited with code ${code}`);
        });
      });
    }),
  ).catch(async (err) => {
    await Promise.all([...load.keys()].map((w) => w.terminate()));
    throw err;
  });

  return {
    concurrency: threads * 2,
    verifyLines(batch) {
      if (failure) return Promise.reject(failure);
      // Least-loaded worker: batches cost about the same, so this keeps every thread busy.
      let worker = workers[0]!;
      for (const w of workers) if (load.get(w)! < load.get(worker)!) worker = w;
      const id = nextId++;
      load.set(worker, load.get(worker)! + 1);
      return new Promise<LineOutcome[]>((resolve, reject) => {
        pending.set(id, { resolve, reject, worker });
        worker.postMessage({ id, batch } satisfies Request);
      });
    },
    async close() {
      failure ??= new AuditError('WORKER_FAILED', 'worker pool is closed');
      await Promise.all(workers.map((w) => w.terminate()));
    },
  };
}

async function runWorker(data: { trust: TrustStore; verifier: 'node' | 'noble' }): Promise<void> {
  // Manifest ids are hashed by a WebAssembly instance that loads asynchronously; until it has, the pure-JS
  // reference serves at ~10x the cost, which the first batches of a fresh thread would otherwise pay.
  await digestOfReady;
  const verifier: SignatureVerifier = data.verifier === 'noble' ? nobleVerifier : nodeVerifier;
  const ctx = { trust: data.trust, verifier };
  parentPort!.on('message', (req: Request) => {
    try {
      parentPort!.postMessage({
        id: req.id,
        results: req.batch.map((l) => verifyLineText(l.line, l.text, ctx)),
      } satisfies Reply);
    } catch (err) {
      parentPort!.postMessage({ id: req.id, error: (err as Error)?.message ?? String(err) } satisfies Reply);
    }
  });
  parentPort!.postMessage({ ready: true } satisfies Reply);
}

if (!isMainThread && (workerData as { kind?: string } | null)?.kind === WORKER_KIND) void runWorker(workerData);
