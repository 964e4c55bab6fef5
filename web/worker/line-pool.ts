/**
 * The page's pool of line verifiers: the verification worker starts N dedicated workers (the same
 * bundled source, given the pool role by their first message) and hands them batches of lines, as
 * `verify`'s worker threads (manifests/audit/verify-workers.node.ts) take them from the CLI: two
 * batches in flight per worker, each to the least-loaded one. `verifyBundle` awaits the batches in the
 * order it cut them and keeps at most `concurrency` of them in flight, so findings come out in the CLI's
 * order and memory stays bounded however large the bundle.
 *
 * Both halves are here: `startLinePool` (in the verification worker) and `servePoolWorker` (in each
 * pool worker). The batches are handed out by the dispatcher `verify`'s threads use too
 * (manifests/audit/line-dispatch.ts); this file holds the page's messages. Neither touches a DOM type: the workers are reached through `PoolPort`, so the pool's
 * logic is tested in Node with in-process ports (test/web/line-pool.test.ts) and in Chromium for real.
 */
import { AuditError, auditUsage } from '../../manifests/audit/errors.js';
import { startLineDispatcher, type LinePort } from '../../manifests/audit/line-dispatch.js';
import { inlineLineVerifier, type LineOutcome, type LineVerifier } from '../../manifests/audit/verify-line.js';
import { createWebCryptoLineVerifier } from '../../manifests/audit/verify-webcrypto.js';
import { nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { ManifestError } from '../../manifests/errors.js';
import { mergeTrust, parseTrustStore, sameKeyRevoked, type TrustStore } from '../../manifests/format/trust.js';
import { quoted } from '../../manifests/encoding/printable.js';
import { errorText } from '../../store/errors.js';
import { digestOfReady } from '../../store/hash/digest.js';

/** The most workers a pool starts, as `verify --workers` accepts at most. */
export const MAX_POOL_WORKERS = 256;

/**
 * Below this many bytes of manifests.jsonl (~4,000 manifests) the page, left to choose, verifies in one
 * worker: starting a pool costs more than it saves. The same bound as `verify --workers auto`'s
 * (WORKERS_FROM_BYTES in src/cli/verify.ts).
 */
export const POOL_FROM_BYTES = 3 * 1024 * 1024;

/** How long a pool may take to start before the page verifies in one worker instead (a slow start only costs time). */
export const POOL_START_MS = 30_000;

export type SignatureBackend = 'webcrypto' | 'noble';

/** Verification worker → pool worker. */
export type PoolRequest =
  | { type: 'pool-start'; trustText: string }
  /**
   * A batch as two values, not one object a line: the line numbers, and the texts end to end with each one's
   * length. Copying 1,000 separate strings to a worker cost the verification worker ~15 ms a batch in
   * Chromium; one string is one copy.
   */
  | { type: 'lines'; id: number; lines: number[]; lengths: number[]; texts: string };

/** Pool worker → verification worker. */
export type PoolReply =
  | { type: 'pool-ready'; signatures: SignatureBackend }
  | { type: 'pool-failed'; message: string }
  | { type: 'lines-done'; id: number; results: LineOutcome[] }
  | { type: 'lines-failed'; id: number; message: string };

/** One pool worker as the verification worker sees it (a Worker, adapted; an in-process twin in tests). */
export type PoolPort = LinePort<PoolRequest, PoolReply>;

export interface LinePool {
  verifier: LineVerifier;
  /** The signature backend the pool workers chose (each runs the same detection as a single worker does). */
  signatures: SignatureBackend;
  workers: number;
}

/**
 * Starts `size` pool workers and resolves once each has parsed the trust file and chosen its signature
 * backend. Rejects (and terminates what it started) if any fails or the start takes longer than `startMs`;
 * the caller then verifies in its own thread.
 * @throws AuditError `WORKER_FAILED`
 */
export async function startLinePool(options: {
  size: number;
  spawn: () => PoolPort;
  trustText: string;
  startMs?: number;
}): Promise<LinePool> {
  const { verifier, ready } = await startLineDispatcher<PoolRequest, PoolReply, SignatureBackend>({
    size: options.size,
    spawn: options.spawn,
    startMs: options.startMs ?? POOL_START_MS,
    protocol: {
      start: { type: 'pool-start', trustText: options.trustText },
      batch: (id, batch) => ({ type: 'lines', id, ...packBatch(batch) }),
      read(reply) {
        switch (reply.type) {
          case 'pool-ready':
            return { ready: reply.signatures };
          case 'pool-failed':
            return { startFailed: reply.message };
          case 'lines-done':
            return { id: reply.id, results: reply.results };
          case 'lines-failed':
            return { id: reply.id, failed: reply.message };
        }
      },
    },
  });
  return {
    workers: ready.length,
    // Every worker ran the same detection in the same browser; one that fell back to noble is named.
    signatures: ready.includes('noble') ? 'noble' : 'webcrypto',
    verifier,
  };
}

/** A batch as a `lines` request carries it (`unpackBatch` gives it back). */
export function packBatch(batch: Array<{ line: number; text: string }>): {
  lines: number[];
  lengths: number[];
  texts: string;
} {
  const lines = new Array<number>(batch.length);
  const lengths = new Array<number>(batch.length);
  const texts = new Array<string>(batch.length);
  for (let i = 0; i < batch.length; i++) {
    const l = batch[i]!;
    lines[i] = l.line;
    lengths[i] = l.text.length;
    texts[i] = l.text;
  }
  return { lines, lengths, texts: texts.join('') };
}

export function unpackBatch(request: { lines: number[]; lengths: number[]; texts: string }): Array<{
  line: number;
  text: string;
}> {
  const { lines, lengths, texts } = request;
  const batch = new Array<{ line: number; text: string }>(lines.length);
  let at = 0;
  for (let i = 0; i < lines.length; i++) {
    const end = at + lengths[i]!;
    batch[i] = { line: lines[i]!, text: texts.slice(at, end) };
    at = end;
  }
  return batch;
}

/**
 * The trust file, parsed as `verify` parses it, with its code, and as a store taken alone is verified under
 * (`sameKeyRevoked`: every listing of a public key revoked from the earliest revocation any listing of it carries).
 */
export function readTrust(text: string, name?: string): TrustStore {
  try {
    return sameKeyRevoked(parseTrustStore(text));
  } catch (err) {
    // A picked file's name is data: quoted, as verify --trust names a path (src/cli/trust-file.ts).
    const which = name === undefined ? 'trust file' : `trust file ${quoted(name)}`;
    throw new AuditError('TRUST_INVALID', `${which}: ${(err as ManifestError).message}`, { cause: err });
  }
}

/**
 * The trust files the auditor chose, read as `verify --trust` reads one or several (src/cli/trust-file.ts's
 * readTrustFiles): each parsed, several merged by `mergeTrust` (a key listed by several files gets the narrowest window
 * of its listings; every listing of one public key, whatever its host, key id or kind, takes the earliest revocation
 * any listing of it carries; one key id with two public keys is refused, naming the files). One file is taken by the
 * same rule for revocations (`readTrust`) and returned with its own text, as picked; several with their union as JSON
 * (the text the pool's workers parse, each by `readTrust`).
 * @throws AuditError `TRUST_INVALID`
 */
export function readTrustFiles(files: ReadonlyArray<{ name: string; text: string }>): {
  trust: TrustStore;
  text: string;
} {
  if (files.length === 0) throw auditUsage('a trust file is required: the pinned public keys of the hosts');
  const read = files.map((f) => ({ trust: readTrust(f.text, f.name), text: f.text }));
  if (read.length === 1) return read[0]!;
  let trust: TrustStore;
  try {
    trust = mergeTrust(...read.map((r) => r.trust));
  } catch (err) {
    const names = files.map((f) => quoted(f.name)).join(', ');
    throw new AuditError('TRUST_INVALID', `trust files ${names}: ${(err as ManifestError).message}`, { cause: err });
  }
  return { trust, text: JSON.stringify(trust) };
}

/**
 * The pool role of a worker: answers `pool-start` with the signature backend it chose (WebCrypto when it
 * verifies Ed25519 correctly here, else noble: the same detection as the single worker), then each
 * `lines` request with the outcomes of `verifyLineText`, in the batch's order.
 */
export function servePoolWorker(post: (reply: PoolReply) => void): (request: PoolRequest) => void {
  let verifier: Promise<LineVerifier> | undefined;
  return (request) => {
    if (request.type === 'pool-start') {
      verifier = (async () => {
        const trust = readTrust(request.trustText);
        // Manifest ids are hashed by WebAssembly that loads asynchronously; until it has, the pure-JS
        // reference serves at ~10x the cost, which a fresh worker's first batches would otherwise pay.
        await digestOfReady;
        const web = await createWebCryptoLineVerifier(trust);
        post({ type: 'pool-ready', signatures: web ? 'webcrypto' : 'noble' });
        return web ?? inlineLineVerifier({ trust, verifier: nobleVerifier });
      })();
      verifier.catch((err: unknown) => post({ type: 'pool-failed', message: errorText(err) }));
      return;
    }
    const { id } = request;
    if (!verifier) return post({ type: 'lines-failed', id, message: 'lines before pool-start' });
    verifier
      .then((v) => v.verifyLines(unpackBatch(request)))
      .then(
        (results) => post({ type: 'lines-done', id, results }),
        (err: unknown) => post({ type: 'lines-failed', id, message: errorText(err) }),
      );
  };
}
