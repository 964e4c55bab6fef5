/**
 * One verification thread of the benchmark's pool: runs the per-line audit steps (1-5) with the
 * node:crypto verifier on the batches the main thread sends, and answers in the same order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import { verifyLineText } from '../../manifests/audit/verify-line.js';

const ctx = { trust: (workerData as { trust: TrustStore }).trust, verifier: nodeVerifier };

parentPort!.on('message', (msg: { id: number; batch: Array<{ line: number; text: string }> }) => {
  parentPort!.postMessage({ id: msg.id, outcomes: msg.batch.map((l) => verifyLineText(l.line, l.text, ctx)) });
});
