/**
 * The page's verification worker: runs the same verifier as `handoff-ledger verify` (manifests/audit)
 * off the page's thread, streaming manifests.jsonl and posting progress. As `verify` spreads the per-line
 * steps over a thread per core, this worker spreads them over a pool of workers started from its own
 * source (web/worker/line-pool.ts); the same script takes the pool role when its first message is
 * `pool-start`. Signatures go to WebCrypto when the browser verifies Ed25519 correctly, else to the
 * portable noble verifier.
 */
import { z } from 'zod';
import { AuditError, auditUsage } from '../../manifests/audit/errors.js';
import { verifyBundleAs } from '../../manifests/audit/verify-chain.js';
import { inlineLineVerifier, type LineVerifier, type VerifiedLine } from '../../manifests/audit/verify-line.js';
import { createWebCryptoLineVerifier } from '../../manifests/audit/verify-webcrypto.js';
import { readWitnessPolicy } from '../../manifests/audit/verify-witnesses.js';
import { readWholeNumber } from '../../manifests/encoding/whole-number.js';
import { nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { errorText } from '../../store/errors.js';
import { storedSummaryProblem } from '../../manifests/format/summary.js';
import {
  DEFAULT_MAX_MANIFESTS_BYTES,
  readAuditorScope,
  readByteBound,
  readExpectation,
  type SettingWords,
} from '../../manifests/audit/auditor-options.js';
import type { ManifestMark, VerifyRequest, WorkerMessage } from '../protocol.js';
import { overBound, readerFor } from './bundle-source.js';
import {
  MAX_POOL_WORKERS,
  POOL_FROM_BYTES,
  readTrustFiles,
  servePoolWorker,
  startLinePool,
  type LinePool,
  type PoolReply,
  type PoolRequest,
} from './line-pool.js';
import { workerPort } from './worker-port.js';

// zod would otherwise probe `new Function`, which the page's Content-Security-Policy forbids.
z.config({ jitless: true });

const scope = self as unknown as {
  postMessage(message: WorkerMessage | PoolReply): void;
  onmessage: ((event: { data: VerifyRequest | PoolRequest }) => void) | null;
  navigator: { hardwareConcurrency?: number };
  Worker?: typeof Worker;
};
const post = (m: WorkerMessage) => scope.postMessage(m);

/**
 * Hands each verified manifest (what the history picture draws) to the page as its batch settles, in file
 * order, delegating the verdict to `inner`. Sent batch by batch, the marks are copied to the page while
 * the pool works, not all at once after the last line (100,000 marks took ~0.6 s to copy in one message).
 * A line repeating an id already marked gets no mark: as the chain tracker keeps one entry per id (the
 * repeat is its `DUPLICATE` finding, which the page shows on the first line's mark), the page keeps one mark
 * per distinct manifest, so a bundle of one valid line copied a million times costs it one mark, not a
 * million. `seen` holds the ids the tracker holds (the same strings), and no more.
 * `flushed()` resolves once every batch's marks are posted.
 */
function recording(inner: LineVerifier): LineVerifier & { flushed(): Promise<void> } {
  let tail: Promise<void> = Promise.resolve();
  const seen = new Set<string>();
  return {
    concurrency: inner.concurrency,
    verifyLines(batch) {
      const outcomes = inner.verifyLines(batch);
      // Chained, so marks go out in the order the batches were cut (the first line of an id is the one marked,
      // as the tracker keeps it); a failed batch fails the audit, not this.
      tail = Promise.all([tail, outcomes]).then(
        ([, settled]) => {
          const marks: ManifestMark[] = [];
          for (const o of settled) {
            if (!o.ok || seen.has(o.entry.id)) continue;
            seen.add(o.entry.id);
            marks.push(markOf(o.entry));
          }
          // As JSON text: one string copies to the page far faster than a thousand small objects.
          if (marks.length > 0) post({ type: 'marks', json: JSON.stringify(marks) });
        },
        () => {},
      );
      return outcomes;
    },
    close: () => inner.close(),
    flushed: () => tail,
  };
}

function markOf(e: VerifiedLine): ManifestMark {
  const { line, id, host, principal, session, seq, prev, createdAt, summary } = e;
  return { line, id, host, principal, session, seq, prev, createdAt, summary };
}

/** `?workers=` read as `verify --workers` reads its value: `auto` or a number of pool workers (0: none). */
function workersAsked(asked: string | undefined): number | 'auto' {
  if (asked === undefined || asked === 'auto') return 'auto';
  const range = { name: "the page's ?workers=", min: 0, max: MAX_POOL_WORKERS, or: 'auto' };
  return readWholeNumber(asked, range, auditUsage);
}

/** Auto: one pool worker per core; none on one core or below `POOL_FROM_BYTES`, where they cost more than they save. */
function autoPoolSize(bundleBytes: number | undefined): number {
  const cores = scope.navigator.hardwareConcurrency ?? 1;
  if (cores < 2 || (bundleBytes !== undefined && bundleBytes < POOL_FROM_BYTES)) return 0;
  return Math.min(cores, MAX_POOL_WORKERS);
}

function batchSize(asked: string | undefined): number | undefined {
  if (asked === undefined) return undefined;
  return readWholeNumber(asked, { name: "the page's ?batch=", min: 1, max: 100_000 }, auditUsage);
}

/** The page's words for the auditor's settings (its fields and `?max-bundle-bytes=`), refused as `USAGE`. */
const PAGE_WORDS: SettingWords = {
  name: (setting) =>
    setting === 'max-bundle-bytes'
      ? 'the bound on manifests.jsonl (max-bundle-bytes)'
      : setting === 'expect'
        ? "the page's Expect (?expect=)"
        : `the ${setting}`,
  refuse: (message) => auditUsage(message),
};

/** The pool, or why the lines are verified in this worker instead (the verdict is the same either way). */
async function linePool(
  request: VerifyRequest,
  trustText: string,
  size: number,
): Promise<LinePool | { fallback?: string }> {
  if (size === 0) return {};
  const Ctor = scope.Worker;
  if (typeof Ctor !== 'function') return { fallback: 'this browser does not start workers from a worker' };
  if (!request.poolSource) return { fallback: 'the page gave no worker source' };
  const url = URL.createObjectURL(request.poolSource);
  try {
    return await startLinePool({ size, trustText, spawn: () => workerPort(url, Ctor) });
  } catch (err) {
    return { fallback: errorText(err) };
  } finally {
    URL.revokeObjectURL(url);
  }
}

async function verify(request: VerifyRequest): Promise<void> {
  const started = performance.now();
  // Checked as the CLI checks its arguments, with its words, before anything of the bundle is read, and in its order:
  // the settings (`--workers`, `--principal`/`--session`, `--expect`, `--max-bundle-bytes`) before the trust files,
  // then the witness keys and quorum, so inputs wrong in two ways are refused with the code `verify` gives them.
  const asked = workersAsked(request.workers);
  const batch = batchSize(request.batch);
  const auditScope = readAuditorScope(request.principal, request.session, PAGE_WORDS);
  const expect = readExpectation(request.expect, PAGE_WORDS);
  const maxBytes =
    request.maxBundleBytes === undefined
      ? DEFAULT_MAX_MANIFESTS_BYTES
      : readByteBound(request.maxBundleBytes, PAGE_WORDS);
  const { trust, text: trustText } = readTrustFiles(request.trust);
  const keys = request.witnessKeys;
  const witnesses = await readWitnessPolicy(keys && { name: keys.name, read: async () => keys.text }, request.quorum);
  const reader = readerFor(request.source, maxBytes);
  const bundleBytes = await reader.manifestsSize?.();
  // Refused before a line is read, as `verify` refuses it when it opens the bundle.
  if (bundleBytes !== undefined && bundleBytes > maxBytes) throw overBound(bundleBytes, maxBytes);
  const size = asked === 'auto' ? autoPoolSize(bundleBytes) : asked;
  const pool = await linePool(request, trustText, size);
  let inner: LineVerifier;
  let verifier: string;
  if ('verifier' in pool) {
    inner = pool.verifier;
    verifier = pool.signatures;
    post({ type: 'pool', workers: pool.workers });
  } else {
    const web = await createWebCryptoLineVerifier(trust);
    inner = web ?? inlineLineVerifier({ trust, verifier: nobleVerifier });
    verifier = web ? 'webcrypto' : 'noble';
    post({ type: 'pool', workers: 0, ...pool });
  }
  const lines = recording(inner);
  let lastPost = 0;
  let report;
  try {
    report = await verifyBundleAs(
      reader,
      {
        trust,
        lineVerifier: lines,
        checkSummary: storedSummaryProblem,
        requireBlobs: request.requireBlobs === true,
        ...(auditScope ? { scope: auditScope } : {}),
        ...(expect ? { expect } : {}),
        ...(request.since !== undefined ? { since: request.since } : {}),
        ...(witnesses ? { witnesses } : {}),
        ...(batch !== undefined ? { batchSize: batch } : {}),
        onProgress(p) {
          const now = performance.now();
          if (now - lastPost < 50) return;
          lastPost = now;
          post({ type: 'progress', ...p });
        },
      },
      // The page's refusals say what the command line's say (`--since: …`), word for word.
      { since: '--since' },
    );
  } finally {
    await inner.close();
  }
  // Every mark reaches the page before the verdict does.
  await lines.flushed();
  post({ type: 'done', report, verifier, ms: Math.round(performance.now() - started) });
}

/** Set when this worker was started as a pool worker: every later message is the pool's. */
let poolRole: ((request: PoolRequest) => void) | undefined;

scope.onmessage = (event) => {
  const m = event.data;
  if (poolRole) return poolRole(m as PoolRequest);
  if (m.type === 'pool-start') {
    poolRole = servePoolWorker((reply) => scope.postMessage(reply));
    return poolRole(m);
  }
  if (m.type !== 'verify') return;
  verify(m).catch((err: unknown) => {
    // A coded refusal is said in its own words, as `verify` prints it (its message, never its cause's: a cause's
    // words are the engine's, such as JSON.parse's, which differ between Node and each browser).
    if (err instanceof AuditError)
      return post({ type: 'error', code: err.code, message: err.message || errorText(err) });
    post({ type: 'error', code: 'INTERNAL', message: errorText(err) });
  });
};
