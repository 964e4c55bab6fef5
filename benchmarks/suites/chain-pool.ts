/**
 * A worker_threads pool behind the auditor's `LineVerifier` seam (manifests/audit/verify-line.ts): batches of
 * lines go round-robin to the threads, results come back in input order because verifyChain awaits
 * them in order. The benchmark's own pool, so the chain rate on N cores can be measured today.
 */
import { Worker } from 'node:worker_threads';
import type { TrustStore } from '../../manifests/format/trust.js';
import type { LineOutcome, LineVerifier } from '../../manifests/audit/verify-line.js';

interface Pending {
  resolve: (outcomes: LineOutcome[]) => void;
  reject: (err: unknown) => void;
}

/** Starts `threads` verification threads; resolves once every thread is online. */
export async function workerLineVerifier(trust: TrustStore, threads: number): Promise<LineVerifier> {
  const url = new URL('./chain-worker.js', import.meta.url);
  const workers = Array.from({ length: threads }, () => new Worker(url, { workerData: { trust } }));
  const pending = new Map<number, Pending>();
  let nextId = 0;
  let failure: unknown;
  for (const w of workers) {
    w.on('message', (msg: { id: number; outcomes: LineOutcome[] }) => {
      pending.get(msg.id)?.resolve(msg.outcomes);
      pending.delete(msg.id);
    });
    w.on('error', (err) => {
      failure = err;
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    });
  }
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once('online', resolve))));
  return {
    // Two batches per thread: one being verified, one queued, so no thread waits for the main thread.
    concurrency: threads * 2,
    verifyLines(batch) {
      if (failure) return Promise.reject(failure);
      const id = nextId++;
      return new Promise<LineOutcome[]>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        workers[id % threads]!.postMessage({ id, batch });
      });
    },
    async close() {
      await Promise.all(workers.map((w) => w.terminate()));
    },
  };
}
