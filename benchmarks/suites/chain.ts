/**
 * Chain verification rate: a bundle of N signed manifests (many sessions, chains interleaved in global
 * order) verified (a) by the auditor (verifyChain: lines, signatures, schema, chain rules) with the
 * per-line steps spread over the auditor's worker_threads pool (manifests/audit/verify-workers.node.ts),
 * (b) by the auditor on one core, (c) manifest by manifest with verifyManifestEnvelope on one core, over
 * a subset, with node:crypto and with noble; (e) as (a) with one worker thread fewer and the calling
 * thread verifying a share; and (d) the ceiling: bare node:crypto Ed25519 verifications per second on one
 * core, measured between the pool rounds; and (f) the floor of any pool of that many threads (./chain-floor.ts).
 *
 * The bundle is deterministic (fixed seed and times; Ed25519 signatures are deterministic), so it is
 * built once and cached in the system temp directory: signing 100,000 manifests takes longer than
 * verifying them on a slow machine. A damaged cache file fails verification, which fails the run.
 */
import { createPrivateKey, generateKeyPairSync, sign as nodeSign, verify as nodeVerify } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeBase64Url } from '../../manifests/encoding/base64.js';
import { noblePublicKey, nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { serializeEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import {
  encodeManifest,
  manifestId,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Manifest,
} from '../../manifests/format/manifest.js';
import { keyIdOf, type TrustStore } from '../../manifests/format/trust.js';
import { verifyChain } from '../../manifests/audit/verify-chain.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { collectGarbage } from '../lib/stats.js';
import { createWorkerLineVerifier } from '../../manifests/audit/verify-workers.node.js';
import { parallelFloorRate } from './chain-floor.js';

export interface ChainOptions {
  manifests: number;
  sessions: number;
  /**
   * Rounds of the pool measurement (the target's figure), with verifyManifestEnvelope on one core and the bare
   * ceiling between them; verifyChain on one core and noble are measured once.
   */
  rounds: number;
  threads: number;
  /** Manifests verified one by one with node:crypto, and with noble (the latter is ~10x slower). */
  nodeSample: number;
  nobleSample: number;
  log: (line: string) => void;
}

export interface ChainResult {
  manifests: number;
  sessions: number;
  threads: number;
  /** Manifests per second, one sample per round, by method. */
  perManifestNode: number[];
  verifyChainOneCore: number[];
  verifyChainPool: number[];
  /**
   * The same bundle with `threads - 1` worker threads and the calling thread verifying a share
   * (`mainShare`): as many threads verify, one fewer isolate, and the caller's batches are never copied.
   */
  verifyChainMainShare: number[];
  perManifestNoble: number[];
  /** Bare node:crypto Ed25519 verifications per second on one core: the ceiling per thread. */
  rawVerifyNode: number[];
  /** verifyManifestEnvelope on one core / the bare verify measured right after it, one per round. */
  perCoreRatio: number[];
  /**
   * The floor (./chain-floor.ts): `threads` threads doing only what any verifier must per line, no messages, no
   * chain rules, manifests per second, one per round.
   */
  parallelFloor: number[];
  /** That floor / (`threads` × the bare verify measured right after it), one per round. */
  parallelFloorRatio: number[];
  buildSeconds: number;
  cached: boolean;
}

/** Builds `n` signed manifest lines: `sessions` chains, round-robin, with increasing createdAt. */
export async function buildBundle(n: number, sessions: number): Promise<{ lines: string[]; trust: TrustStore }> {
  const seed = new Uint8Array(32).fill(7);
  const publicKey = noblePublicKey(seed);
  const keyId = keyIdOf(publicKey);
  const key = createPrivateKey({
    key: { kty: 'OKP', crv: 'Ed25519', d: encodeBase64Url(seed), x: encodeBase64Url(publicKey) },
    format: 'jwk',
  });
  const signer = { keyId, publicKey, sign: (msg: Uint8Array) => new Uint8Array(nodeSign(null, msg, key)) };
  const heads: Array<Digest | null> = new Array(sessions).fill(null);
  const t0 = Date.parse('2026-01-01T00:00:00.000Z');
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = i % sessions;
    const seq = Math.floor(i / sessions);
    const manifest: Manifest = {
      v: 1,
      kind: 'compaction',
      host: 'bench-host',
      principal: `p${s % 97}`,
      session: `s${s}`,
      run: `r${seq}`,
      seq,
      prev: heads[s]!,
      summary: {
        digest: digestOf(new Uint8Array([i & 0xff, i >> 8, i >> 16])),
        size: 1000 + i,
        mediaType: SUMMARY_MEDIA_TYPE,
      },
      createdAt: new Date(t0 + i * 1000).toISOString(),
      keyId,
    };
    const payload = encodeManifest(manifest);
    heads[s] = manifestId(payload);
    lines.push(serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, signer)));
  }
  const trust: TrustStore = {
    version: 1,
    keys: [{ host: 'bench-host', keyId, publicKey: encodeBase64Url(publicKey), notBefore: '2020-01-01T00:00:00.000Z' }],
  };
  return { lines, trust };
}

async function rate(n: number, run: () => Promise<void> | void): Promise<number> {
  collectGarbage();
  const t0 = performance.now();
  await run();
  return n / ((performance.now() - t0) / 1000);
}

function perManifest(lines: string[], trust: TrustStore, verifier = nodeVerifier): void {
  for (const line of lines) verifyManifestEnvelope(line, { trust, verifier });
}

async function audit(lines: string[], trust: TrustStore, threads: number, mainShare = false): Promise<void> {
  // The auditor's own pool (what `verify --threads` runs), started inside the timed region: an auditor
  // pays for its threads too.
  const lineVerifier = threads > 0 ? await createWorkerLineVerifier({ trust, threads, mainShare }) : undefined;
  try {
    const report = await verifyChain(lines, {
      trust,
      verifier: nodeVerifier,
      ...(lineVerifier ? { lineVerifier } : {}),
    });
    if (!report.ok || report.counts.manifests !== lines.length)
      throw new Error(`bundle did not verify: ${JSON.stringify(report.counts)}`);
  } finally {
    await lineVerifier?.close();
  }
}

/** The bundle from the cache, or built and cached. */
async function cachedBundle(
  n: number,
  sessions: number,
): Promise<{ lines: string[]; trust: TrustStore; cached: boolean }> {
  const dir = join(tmpdir(), 'handoff-ledger-bench');
  const file = join(dir, `bundle-v1-${n}-${sessions}.json`);
  try {
    const cached = JSON.parse(await readFile(file, 'utf8')) as { lines: string[]; trust: TrustStore };
    if (cached.lines.length === n) return { ...cached, cached: true };
  } catch {
    // absent or unreadable: build it
  }
  const built = await buildBundle(n, sessions);
  await mkdir(dir, { recursive: true });
  await writeFile(`${file}.${process.pid}.tmp`, JSON.stringify(built));
  await rename(`${file}.${process.pid}.tmp`, file);
  return { ...built, cached: false };
}

function rawVerifyRate(count: number): number {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const msg = new Uint8Array(400).fill(1);
  const sig = nodeSign(null, msg, privateKey);
  const t0 = performance.now();
  for (let i = 0; i < count; i++) if (!nodeVerify(null, msg, publicKey, sig)) throw new Error('verify failed');
  return count / ((performance.now() - t0) / 1000);
}

export async function runChainSuite(o: ChainOptions): Promise<ChainResult> {
  const t0 = performance.now();
  const { lines, trust, cached } = await cachedBundle(o.manifests, o.sessions);
  const buildSeconds = (performance.now() - t0) / 1000;
  o.log(
    `  ${cached ? 'loaded' : 'built and cached'} ${lines.length.toLocaleString('en-US')} signed manifests in ${buildSeconds.toFixed(1)} s`,
  );
  const nodeSample = lines.slice(0, o.nodeSample);
  const nobleSample = lines.slice(0, o.nobleSample);
  perManifest(nobleSample, trust, nobleVerifier); // warm-up of the verifier its row is timed with
  const r: ChainResult = {
    manifests: lines.length,
    sessions: o.sessions,
    threads: o.threads,
    perManifestNode: [],
    verifyChainOneCore: [],
    verifyChainPool: [],
    verifyChainMainShare: [],
    perManifestNoble: [],
    rawVerifyNode: [],
    perCoreRatio: [],
    parallelFloor: [],
    parallelFloorRatio: [],
    buildSeconds,
    cached,
  };
  // The ceiling is measured between the pool rounds, so the ratio compares figures of the same moments.
  r.rawVerifyNode.push(rawVerifyRate(Math.min(5000, o.nodeSample)));
  for (let round = 0; round < o.rounds; round++) {
    r.verifyChainPool.push(await rate(lines.length, () => audit(lines, trust, o.threads)));
    r.rawVerifyNode.push(rawVerifyRate(Math.min(5000, o.nodeSample)));
    if (o.threads > 1) {
      r.verifyChainMainShare.push(await rate(lines.length, () => audit(lines, trust, o.threads - 1, true)));
      r.rawVerifyNode.push(rawVerifyRate(Math.min(5000, o.nodeSample)));
    }
    // Per core, in the same rounds as the ceiling: what one manifest's verification costs beside the bare signature.
    r.perManifestNode.push(await rate(nodeSample.length, () => perManifest(nodeSample, trust)));
    r.rawVerifyNode.push(rawVerifyRate(Math.min(5000, o.nodeSample)));
    r.perCoreRatio.push(r.perManifestNode.at(-1)! / r.rawVerifyNode.at(-1)!);
    // The floor of any pool of this many threads, against the ceiling measured right after it.
    collectGarbage();
    r.parallelFloor.push(await parallelFloorRate(lines, trust.keys[0]!.publicKey, o.threads));
    r.rawVerifyNode.push(rawVerifyRate(Math.min(5000, o.nodeSample)));
    r.parallelFloorRatio.push(r.parallelFloor.at(-1)! / (o.threads * r.rawVerifyNode.at(-1)!));
    o.log(
      `  pool round ${round + 1}/${o.rounds}: ${o.threads} threads ${Math.round(r.verifyChainPool.at(-1)!)}/s` +
        (o.threads > 1
          ? `, ${o.threads - 1} + the main thread's share ${Math.round(r.verifyChainMainShare.at(-1)!)}/s`
          : '') +
        `, verifyManifestEnvelope on one core ${Math.round(r.perManifestNode.at(-1)!)}/s, the floor of ${o.threads} threads ${Math.round(r.parallelFloor.at(-1)!)}/s, bare Ed25519 verify ${Math.round(r.rawVerifyNode.at(-1)!)}/s`,
    );
  }
  r.verifyChainOneCore.push(await rate(lines.length, () => audit(lines, trust, 0)));
  r.perManifestNoble.push(await rate(nobleSample.length, () => perManifest(nobleSample, trust, nobleVerifier)));
  o.log(
    `  one core: verifyChain ${Math.round(r.verifyChainOneCore[0]!)}/s, noble verifyManifestEnvelope ${Math.round(r.perManifestNoble[0]!)}/s`,
  );
  return r;
}
