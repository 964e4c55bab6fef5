/**
 * The verification worker's adapter for a pool worker (web/worker/worker-port.ts), with a fake Worker: an
 * EventTarget with no `on…` attributes, as a worker started from a worker may be in Chromium. A message that
 * could not be read (`messageerror`) must fail the pool worker, not leave its batch waiting for ever.
 */
import { describe, expect, it } from 'vitest';
import type { PoolReply } from '../../web/worker/line-pool.js';
import { workerPort, type WorkerLike } from '../../web/worker/worker-port.js';

/** A worker that only dispatches events: no onmessage, onerror or onmessageerror attribute. */
class FakeWorker extends EventTarget implements WorkerLike {
  static last: FakeWorker | undefined;
  posted: unknown[] = [];
  terminated = false;
  constructor(readonly url: string) {
    super();
    FakeWorker.last = this;
  }
  postMessage(message: unknown): void {
    this.posted.push(message);
  }
  terminate(): void {
    this.terminated = true;
  }
}

function started() {
  const port = workerPort('blob:pool', FakeWorker);
  const worker = FakeWorker.last!;
  const replies: PoolReply[] = [];
  const failures: string[] = [];
  port.listen(
    (r) => replies.push(r),
    (why) => failures.push(why),
  );
  return { port, worker, replies, failures };
}

describe('a pool worker as the verification worker sees it', () => {
  it('has no onmessageerror attribute to set, and a messageerror still fails it', () => {
    const { worker, failures, replies } = started();
    expect('onmessageerror' in FakeWorker.prototype).toBe(false);
    worker.dispatchEvent(new Event('messageerror'));
    expect(failures).toEqual(['sent a message that could not be read']);
    expect(replies).toEqual([]);
  });

  it('passes its replies on, says an error with its message, and is posted to and terminated', () => {
    const { port, worker, failures, replies } = started();
    expect(worker.url).toBe('blob:pool');
    worker.dispatchEvent(new MessageEvent('message', { data: { type: 'pool-ready', signatures: 'noble' } }));
    expect(replies).toEqual([{ type: 'pool-ready', signatures: 'noble' }]);
    const error = Object.assign(new Event('error', { cancelable: true }), { message: 'Uncaught Error: boom' });
    worker.dispatchEvent(error);
    // Cancelled, as the page's onerror does: the error is the pool's to say, not the console's.
    expect(error.defaultPrevented).toBe(true);
    worker.dispatchEvent(new Event('error', { cancelable: true }));
    expect(failures).toEqual(['failed: Uncaught Error: boom', 'failed: its script did not load']);
    port.post({ type: 'pool-start', trustText: '{}' });
    expect(worker.posted).toEqual([{ type: 'pool-start', trustText: '{}' }]);
    void port.terminate();
    expect(worker.terminated).toBe(true);
  });
});
