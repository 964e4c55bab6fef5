/**
 * The page's verification worker: runs the same verifier as `handoff-ledger verify` (manifests/audit)
 * off the page's thread, streaming manifests.jsonl and posting progress. Signatures go to WebCrypto
 * when the browser verifies Ed25519 correctly, else to the portable noble verifier.
 */
import { z } from 'zod';
import { AuditError } from '../../manifests/audit/errors.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { inlineLineVerifier, type LineVerifier, type VerifiedLine } from '../../manifests/audit/verify-line.js';
import { createWebCryptoLineVerifier } from '../../manifests/audit/verify-webcrypto.js';
import { readWitnessPolicy } from '../../manifests/audit/verify-witnesses.js';
import { nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { ManifestError } from '../../manifests/errors.js';
import { parseTrustStore, type TrustStore } from '../../manifests/format/trust.js';
import { storedSummaryProblem } from '../../manifests/format/summary.js';
import type { ManifestMark, VerifyRequest, WorkerMessage } from '../protocol.js';
import { readerFor } from './bundle-source.js';

// zod would otherwise probe `new Function`, which the page's Content-Security-Policy forbids.
z.config({ jitless: true });

const scope = self as unknown as {
  postMessage(message: WorkerMessage): void;
  onmessage: ((event: { data: VerifyRequest }) => void) | null;
};
const post = (m: WorkerMessage) => scope.postMessage(m);

function readTrust(text: string): TrustStore {
  try {
    return parseTrustStore(text);
  } catch (err) {
    throw new AuditError('TRUST_INVALID', `trust file: ${(err as ManifestError).message}`, { cause: err });
  }
}

/** Keeps each verified line (what the history picture draws), delegating the verdict to `inner`. */
function recording(inner: LineVerifier, into: ManifestMark[]): LineVerifier {
  return {
    concurrency: inner.concurrency,
    async verifyLines(batch) {
      const outcomes = await inner.verifyLines(batch);
      for (const o of outcomes) if (o.ok) into.push(markOf(o.entry));
      return outcomes;
    },
    close: () => inner.close(),
  };
}

function markOf(e: VerifiedLine): ManifestMark {
  const { line, id, host, principal, session, seq, prev, createdAt, summary } = e;
  return { line, id, host, principal, session, seq, prev, createdAt, summary };
}

async function verify(request: VerifyRequest): Promise<void> {
  const started = performance.now();
  const trust = readTrust(request.trustText);
  // Checked as the CLI checks its arguments, with its words, before anything of the bundle is read.
  const keys = request.witnessKeys;
  const witnesses = await readWitnessPolicy(keys && { name: keys.name, read: async () => keys.text }, request.quorum);
  const web = await createWebCryptoLineVerifier(trust);
  const inner = web ?? inlineLineVerifier({ trust, verifier: nobleVerifier });
  const manifests: ManifestMark[] = [];
  let lastPost = 0;
  const report = await verifyBundle(readerFor(request.source), {
    trust,
    lineVerifier: recording(inner, manifests),
    checkSummary: storedSummaryProblem,
    ...(request.since !== undefined ? { since: request.since } : {}),
    ...(witnesses ? { witnesses } : {}),
    onProgress(p) {
      const now = performance.now();
      if (now - lastPost < 50) return;
      lastPost = now;
      post({ type: 'progress', ...p });
    },
  });
  // Findings keep line order; the picture wants file order too (batches settle in order, so it is already).
  post({
    type: 'done',
    report,
    manifests,
    verifier: web ? 'webcrypto' : 'noble',
    ms: Math.round(performance.now() - started),
  });
}

scope.onmessage = (event) => {
  verify(event.data).catch((err: unknown) => {
    const code = err instanceof AuditError ? err.code : 'INTERNAL';
    post({ type: 'error', code, message: (err as Error)?.message ?? String(err) });
  });
};
