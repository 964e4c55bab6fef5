/**
 * The one dispatcher behind both pools of line verifiers: `verify`'s worker threads
 * (manifests/audit/verify-workers.node.ts) and the page's nested workers (web/worker/line-pool.ts).
 * It starts the workers (and waits until each says it is ready), then hands each batch to the
 * least-loaded one, keeps two batches in flight per worker, resolves each batch with its own results
 * (so `verifyLines`' in-order awaiting gives findings in file order), and rejects every pending batch
 * with the first failure. Isomorphic: a worker is reached only through `LinePort`, and what the
 * messages look like is the `LinePoolProtocol`'s business.
 */
import { AuditError } from './errors.js';
import { errorText } from '../../store/errors.js';
import type { LineOutcome, LineVerifier } from './verify-line.js';

/** One worker as the dispatcher sees it (a node:worker_threads Worker or a browser Worker, adapted; a fake in tests). */
export interface LinePort<Request, Reply> {
  post(message: Request): void;
  /** `onFail` is called when the worker cannot go on: it failed to load, threw, exited, or sent an unreadable message. */
  listen(onReply: (reply: Reply) => void, onFail: (why: string) => void): void;
  terminate(): void | Promise<unknown>;
}

/** What a reply means to the dispatcher (`undefined`: nothing it needs to act on). */
export type PoolEvent<Ready> =
  | { ready: Ready }
  | { startFailed: string }
  | { id: number; results: LineOutcome[] }
  | { id: number; failed: string }
  | undefined;

/** The messages of one kind of pool. */
export interface LinePoolProtocol<Request, Reply, Ready> {
  /** Sent to each worker once it listens (absent: the worker starts from its own data and says when it is ready). */
  start?: Request;
  /** The request carrying batch `id`. */
  batch(id: number, lines: Array<{ line: number; text: string }>): Request;
  read(reply: Reply): PoolEvent<Ready>;
}

export interface LineDispatcher<Ready> {
  verifier: LineVerifier;
  /** What each worker said when it was ready, in worker order. */
  ready: Ready[];
}

/** Batches in flight per worker: one being verified, one waiting, so a worker never idles between batches. */
export const BATCHES_PER_WORKER = 2;

/**
 * Starts `size` workers through `spawn` and resolves once each is ready. Rejects (after terminating what
 * it started) if any fails to start, or when `startMs` is given and the start takes longer.
 * @throws AuditError `WORKER_FAILED`
 */
export async function startLineDispatcher<Request, Reply, Ready>(options: {
  size: number;
  spawn: (index: number) => LinePort<Request, Reply>;
  protocol: LinePoolProtocol<Request, Reply, Ready>;
  startMs?: number;
  /**
   * Verifies a batch in the calling thread whenever every worker already has its two: the caller's thread
   * is then a verifier too (for when the workers plus the caller's thread are as many as the cores), and
   * the batches it takes are neither copied to a worker nor their outcomes copied back.
   */
  inline?: LineVerifier;
}): Promise<LineDispatcher<Ready>> {
  const { protocol, inline } = options;
  const ports: Array<LinePort<Request, Reply>> = [];
  const load: number[] = [];
  const pending = new Map<number, { resolve: (r: LineOutcome[]) => void; reject: (e: unknown) => void; at: number }>();
  let failure: AuditError | undefined;
  let nextId = 0;
  let inlineMayTake = true;

  const fail = (err: AuditError): void => {
    failure ??= err;
    for (const [id, p] of pending) {
      pending.delete(id);
      p.reject(failure);
    }
  };
  const terminateAll = async (): Promise<void> => {
    await Promise.allSettled(ports.map(async (port) => port.terminate()));
  };

  const started = Promise.all(
    Array.from({ length: options.size }, (_, index) => {
      const name = `verification worker ${index + 1}`;
      let port: LinePort<Request, Reply>;
      try {
        port = options.spawn(index);
      } catch (err) {
        return Promise.reject(
          new AuditError('WORKER_FAILED', `${name} did not start: ${errorText(err)}`, {
            cause: err,
          }),
        );
      }
      ports.push(port);
      load.push(0);
      return new Promise<Ready>((resolve, reject) => {
        port.listen(
          (reply) => {
            const event = protocol.read(reply);
            if (event === undefined) return;
            if ('ready' in event) return resolve(event.ready);
            if ('startFailed' in event) {
              const err = new AuditError('WORKER_FAILED', `${name} did not start: ${event.startFailed}`);
              reject(err);
              return fail(err);
            }
            const p = pending.get(event.id);
            if (!p) return;
            pending.delete(event.id);
            load[p.at]!--;
            inlineMayTake = true;
            if ('failed' in event) p.reject(new AuditError('WORKER_FAILED', `${name} failed: ${event.failed}`));
            else p.resolve(event.results);
          },
          (why) => {
            const err = new AuditError('WORKER_FAILED', `${name} ${why}`);
            reject(err);
            fail(err);
          },
        );
        if (protocol.start !== undefined) port.post(protocol.start);
      });
    }),
  );
  // Every start promise may reject while another is awaited: attach a handler now, await below.
  started.catch(() => {});
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout =
    options.startMs === undefined
      ? undefined
      : new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new AuditError('WORKER_FAILED', `the verification workers did not start within ${options.startMs} ms`),
              ),
            options.startMs,
          );
        });
  let ready: Ready[];
  try {
    ready = await (timeout ? Promise.race([started, timeout]) : started);
  } catch (err) {
    fail(err instanceof AuditError ? err : new AuditError('WORKER_FAILED', errorText(err), { cause: err }));
    await terminateAll();
    throw err;
  } finally {
    clearTimeout(timer);
  }

  return {
    ready,
    verifier: {
      concurrency: ports.length * BATCHES_PER_WORKER + (inline ? 1 : 0),
      verifyLines(batch) {
        if (failure) return Promise.reject(failure);
        // Least-loaded worker: batches cost about the same, so this keeps every worker busy.
        let at = 0;
        for (let i = 1; i < ports.length; i++) if (load[i]! < load[at]!) at = i;
        if (inline && inlineMayTake && load[at]! >= BATCHES_PER_WORKER) {
          // Once between two replies: a worker's reply is read only when this thread returns to its event
          // loop, so a second inline batch in a row could leave that worker idle with its outcomes unread.
          inlineMayTake = false;
          return inline.verifyLines(batch);
        }
        const id = nextId++;
        load[at]!++;
        return new Promise<LineOutcome[]>((resolve, reject) => {
          pending.set(id, { resolve, reject, at });
          ports[at]!.post(protocol.batch(id, batch));
        });
      },
      async close() {
        fail(new AuditError('WORKER_FAILED', 'the pool of verification workers is closed'));
        await terminateAll();
      },
    },
  };
}
