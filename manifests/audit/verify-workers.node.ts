/**
 * Node only: runs the per-line audit steps (parse, payload type, key, signature, schema) on worker
 * threads, so a large bundle's signature checks use every core. The main thread keeps splitting
 * lines and applies the chain rules; results come back in batch order, so reports are identical to
 * the in-thread verifier's. The batches are handed out by the dispatcher both pools share
 * (manifests/audit/line-dispatch.ts; the page's pool is web/worker/line-pool.ts).
 *
 * A worker must load compiled JavaScript. From dist/ this module starts itself; when it runs as
 * TypeScript (vitest), it starts its dist/ twin, which `npm run build` (the `pretest` script) produces.
 */
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { AuditError, auditUsage, readAuditOptions } from './errors.js';
import { errorText, shownValue, type NamesEveryField } from '../../store/errors.js';
import { startLineDispatcher, type LinePort } from './line-dispatch.js';
import { digestOfReady } from '../../store/hash/digest.js';
import type { SignatureVerifier } from '../crypto/ed25519.js';
import { nodeVerifier } from '../crypto/ed25519.node.js';
import type { TrustStore } from '../format/trust.js';
import { verifyCanonicalLine } from './verify-line-fast.js';
import type { LineOutcome, LineVerifier } from './verify-line.js';

// A worker loads only what verifies an honest bundle (./verify-line-fast.ts: no zod, no @noble/ed25519). The full
// line checklist (./verify-line.ts with the schemas) and the portable verifier are loaded on first need; starting two
// workers went from ~300 to ~170 ms on the benchmark machine (benchmarks/README.md).
const fullVerifier = () => import('./verify-line.js');
const nobleBackend = async () => (await import('../crypto/ed25519.js')).nobleVerifier;

const WORKER_KIND = 'handoff-ledger/verify-lines@1';

/** Options of `createWorkerLineVerifier`. */
export interface WorkerLineVerifierOptions {
  /** The keys each line's signature is checked against. */
  trust: TrustStore;
  /** Threads to start (default: available parallelism, at least 1). */
  threads?: number | undefined;
  /** Signature backend inside the workers (default `node`, i.e. node:crypto). */
  verifier?: 'node' | 'noble' | undefined;
  /**
   * The calling thread verifies a share of the batches too, whenever every worker has two in flight: for
   * `threads` = cores - 1, so that all cores verify and the calling thread's batches are never copied.
   */
  mainShare?: boolean | undefined;
  /** Overrides the compiled worker script (tests). */
  scriptUrl?: URL | undefined;
}

type Request = { id: number; batch: Array<{ line: number; text: string }> };
type Reply = { id: number; results: LineOutcome[] } | { ready: true } | { id: number; error: string };

/** The compiled script a worker runs: this file itself from dist/, its dist/ twin from source. */
export function workerScriptUrl(): URL {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return new URL(here);
  return new URL('../../dist/manifests/audit/verify-workers.node.js', here);
}

const WORKER_FIELDS = ['trust', 'threads', 'verifier', 'mainShare', 'scriptUrl'] as const satisfies ReadonlyArray<
  keyof WorkerLineVerifierOptions
>;
const everyWorkerField: NamesEveryField<WorkerLineVerifierOptions, typeof WORKER_FIELDS> = true;
void everyWorkerField;

/**
 * The options read once and as their types say, before a worker starts: no options or no `trust` (every worker would
 * start, then fail each line, or a JavaScript caller's `null` a TypeError), a `threads` that is no whole number ≥ 0
 * (`cores - 1` on one core is 0: one worker, as ever), a `verifier` other than `node` or `noble` (taken for `node` by
 * the calling thread, sent as given to the workers), a field it does not know.
 * @throws AuditError `USAGE`
 */
function readWorkerOptions(given: unknown): WorkerLineVerifierOptions {
  // Each field read once (a getter that throws, or a name it does not know: USAGE naming it), with a trust store.
  const options = readAuditOptions<WorkerLineVerifierOptions>(given, WORKER_FIELDS, 'createWorkerLineVerifier');
  const { threads, verifier } = options;
  if (threads !== undefined && !(Number.isSafeInteger(threads) && (threads as number) >= 0))
    throw auditUsage(
      `createWorkerLineVerifier: threads must be a whole number (0 and 1: one worker), not ${shownValue(threads)}`,
    );
  if (verifier !== undefined && verifier !== 'node' && verifier !== 'noble')
    throw auditUsage(`createWorkerLineVerifier: verifier must be 'node' or 'noble', not ${shownValue(verifier)}`);
  return options;
}

/**
 * Starts `threads` workers and resolves once each has loaded.
 * @throws AuditError `USAGE` (options: readWorkerOptions), `WORKER_FAILED` (no compiled script, a worker failed to
 *   start)
 */
export async function createWorkerLineVerifier(given: WorkerLineVerifierOptions): Promise<LineVerifier> {
  const options = readWorkerOptions(given);
  const threads = Math.max(1, options.threads ?? availableParallelism());
  const script = options.scriptUrl ?? workerScriptUrl();
  if (script.protocol === 'file:' && !existsSync(fileURLToPath(script))) {
    throw new AuditError('WORKER_FAILED', `worker script ${fileURLToPath(script)} is missing; run \`npm run build\``);
  }
  const data = { kind: WORKER_KIND, trust: options.trust, verifier: options.verifier ?? 'node' };
  let inline: LineVerifier | undefined;
  try {
    const signatures: SignatureVerifier = options.verifier === 'noble' ? await nobleBackend() : nodeVerifier;
    if (options.mainShare)
      inline = (await fullVerifier()).inlineLineVerifier({ trust: options.trust, verifier: signatures });
  } catch (err) {
    throw new AuditError('WORKER_FAILED', `the line verifier did not load: ${errorText(err)}`, {
      cause: err,
    });
  }
  const { verifier } = await startLineDispatcher<Request, Reply, true>({
    size: threads,
    ...(inline ? { inline } : {}),
    spawn: () => threadPort(new Worker(script, { workerData: data })),
    protocol: {
      batch: (id, batch) => ({ id, batch }),
      read: (reply) =>
        'ready' in reply ? { ready: true } : 'error' in reply ? { id: reply.id, failed: reply.error } : reply,
    },
  });
  return verifier;
}

/** A worker thread as the dispatcher sees it. */
function threadPort(worker: Worker): LinePort<Request, Reply> {
  return {
    post: (message) => worker.postMessage(message),
    listen(onReply, onFail) {
      worker.on('message', onReply);
      worker.on('error', (err) => onFail(`crashed: ${err.message}`));
      worker.on('messageerror', () => onFail('sent a message that could not be read'));
      worker.on('exit', (code) => {
        if (code !== 0) onFail(`exited with code ${code}`);
      });
    },
    terminate: () => worker.terminate(),
  };
}

async function runWorker(data: { trust: TrustStore; verifier: 'node' | 'noble' }): Promise<void> {
  // Manifest ids are hashed by a WebAssembly instance that loads asynchronously; until it has, the pure-JS
  // reference serves at ~10x the cost, which the first batches of a fresh thread would otherwise pay.
  await digestOfReady;
  const verifier: SignatureVerifier = data.verifier === 'noble' ? await nobleBackend() : nodeVerifier;
  const ctx = { trust: data.trust, verifier };
  let full: Awaited<ReturnType<typeof fullVerifier>> | undefined;
  // Batches are answered in the order they came: one that waits for the full checklist to load holds the next.
  let queue: Promise<void> = Promise.resolve();
  const answer = async (req: Request): Promise<void> => {
    try {
      const results: LineOutcome[] = [];
      for (const l of req.batch) {
        const fast = verifyCanonicalLine(l.line, l.text, ctx);
        if (fast) results.push(fast);
        else results.push((full ??= await fullVerifier()).verifyLineText(l.line, l.text, ctx));
      }
      parentPort!.postMessage({ id: req.id, results } satisfies Reply);
    } catch (err) {
      parentPort!.postMessage({ id: req.id, error: errorText(err) } satisfies Reply);
    }
  };
  parentPort!.on('message', (req: Request) => {
    queue = queue.then(() => answer(req));
  });
  parentPort!.postMessage({ ready: true } satisfies Reply);
}

if (!isMainThread && (workerData as { kind?: string } | null)?.kind === WORKER_KIND) void runWorker(workerData);
