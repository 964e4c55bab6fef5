/**
 * A nested dedicated worker as the pool sees it (a `PoolPort`). Kept apart from verify.worker.ts, which takes the
 * worker's global scope as it loads, and written against `EventTarget` rather than the DOM's Worker type, so the
 * adapter is tested in Node with a fake worker (test/web/worker-port.test.ts).
 */
import type { PoolPort, PoolReply } from './line-pool.js';

/** What the adapter uses of a Worker: its messages, errors and message errors are events it listens for. */
export interface WorkerLike extends EventTarget {
  postMessage(message: unknown): void;
  terminate(): void;
}

/**
 * Starts a worker from `url` with `Ctor` and adapts it. Its events are listened for, not set as `on…` attributes:
 * a worker started from a worker in Chromium may have no `onmessageerror` attribute, and setting one there
 * would add a property no event ever calls, leaving a message that could not be read unsaid (the pool would wait
 * on that worker's batch for ever).
 *
 * @internal exported for the verification worker and its test
 */
export function workerPort(url: string, Ctor: new (url: string) => WorkerLike): PoolPort {
  const worker = new Ctor(url);
  return {
    post: (m) => worker.postMessage(m),
    listen(onReply, onFail) {
      worker.addEventListener('message', (e) => onReply((e as Event & { data: PoolReply }).data));
      worker.addEventListener('error', (e) => {
        e.preventDefault();
        onFail(`failed: ${(e as Event & { message?: string }).message || 'its script did not load'}`);
      });
      worker.addEventListener('messageerror', () => onFail('sent a message that could not be read'));
    },
    terminate: () => worker.terminate(),
  };
}
