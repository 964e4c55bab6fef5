/**
 * The floor of parallel chain verification on this machine: `threads` worker threads, each holding its share of the
 * bundle's lines before the clock starts, doing only what any verifier of a DSSE-enveloped manifest must do per
 * line, with the fastest primitives Node has — `JSON.parse` of the envelope, the payload and signature out of
 * base64 (Buffer), the PAE message, one node:crypto Ed25519 verify with a key object made once, the BLAKE3 id of the
 * payload (native), `JSON.parse` of the payload (the fields the chain rules need). No schema, no canonical check, no
 * trust lookup, no messages per batch, no chain rules, nothing on the main thread: more generous than any real
 * verifier, so its rate is the most a pool of that many threads reaches here. The goal (0.8 × the bare
 * verify rate per core × threads) is out of reach of any verifier when this floor is below it.
 *
 * Node only, compiled (the benchmark runs from dist/): the module starts itself as the worker.
 */
import { createRequire } from 'node:module';
import { createPublicKey, verify } from 'node:crypto';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const KIND = 'handoff-ledger/bench-chain-floor@1';

interface FloorData {
  kind: typeof KIND;
  lines: string[];
  /** The signing key, base64url (the trust store's form). */
  publicKey: string;
}

interface NativeHasher {
  update(input: Uint8Array): unknown;
  digestBuffer(): Buffer;
}

function runFloorWorker(data: FloorData): void {
  const { Blake3Hasher } = createRequire(import.meta.url)('@napi-rs/blake-hash') as {
    Blake3Hasher: new () => NativeHasher;
  };
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: data.publicKey }, format: 'jwk' });
  parentPort!.once('message', () => {
    let verified = 0;
    for (const line of data.lines) {
      const envelope = JSON.parse(line) as { payloadType: string; payload: string; signatures: Array<{ sig: string }> };
      const payload = Buffer.from(envelope.payload, 'base64');
      const sig = Buffer.from(envelope.signatures[0]!.sig, 'base64');
      const type = envelope.payloadType;
      const message = Buffer.concat([Buffer.from(`DSSEv1 ${type.length} ${type} ${payload.length} `), payload]);
      if (!verify(null, message, key, sig)) continue;
      const hasher = new Blake3Hasher();
      hasher.update(payload);
      hasher.digestBuffer();
      JSON.parse(payload.toString('latin1'));
      verified++;
    }
    parentPort!.postMessage({ verified });
  });
  parentPort!.postMessage({ ready: true });
}

/**
 * Verifies `lines` (split evenly) on `threads` fresh worker threads; returns manifests per second from the moment all
 * were told to start (each already holding its lines and key) until the last is done. Throws unless every line
 * verified: a floor that skips work would mean nothing.
 */
export async function parallelFloorRate(lines: string[], publicKey: string, threads: number): Promise<number> {
  const share = Math.ceil(lines.length / threads);
  const workers = Array.from(
    { length: threads },
    (_, i) =>
      new Worker(new URL(import.meta.url), {
        workerData: { kind: KIND, lines: lines.slice(i * share, (i + 1) * share), publicKey } satisfies FloorData,
      }),
  );
  try {
    const next = (w: Worker) =>
      new Promise<{ ready?: true; verified?: number }>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      });
    await Promise.all(workers.map(next));
    const done = workers.map(next);
    const t0 = performance.now();
    for (const w of workers) w.postMessage('go');
    const results = await Promise.all(done);
    const seconds = (performance.now() - t0) / 1000;
    const verified = results.reduce((n, r) => n + (r.verified ?? 0), 0);
    if (verified !== lines.length) throw new Error(`floor verified ${verified} of ${lines.length} manifests`);
    return lines.length / seconds;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

if (!isMainThread && (workerData as { kind?: string } | null)?.kind === KIND) runFloorWorker(workerData as FloorData);
