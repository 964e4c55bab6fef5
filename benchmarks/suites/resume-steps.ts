/**
 * Where a resume's time goes, step by step, for small summaries (the fixed cost that dominates them):
 * each step of `Ledger.resume` timed alone, many times, on the same stored session, beside the whole
 * resume in three states: repeated (the head and the entry before it verified by an earlier resume:
 * their verdicts are remembered), first after this ledger's publish (the new head is verified, but for its
 * signature, which this process made), and cold (a ledger
 * opened afresh: both entries verified; the opening itself is not timed). Medians in microseconds.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ManifestLog } from '../../manifests/log/log.js';
import { pae, parseEnvelope } from '../../manifests/crypto/envelope.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import { findTrustedKey } from '../../manifests/format/trust.js';
import { authorize } from '../../src/ledger/grants.js';
import { openLedger } from '../../src/ledger/open.js';
import { decodeSummary, decodeSummaryStream, STREAM_DECODE_FROM, summaryText } from '../../src/summary/summary.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { makeSummary, nextMarker, type TextKind } from '../lib/data.js';
import { collectGarbage, spread, type Spread } from '../lib/stats.js';
import { rawReadHashText } from './raw.js';

/** The same facts as the head window, read the way resume read them before it: the head, then three reads. */
async function headThenThreeReads(log: ManifestLog, session: string): Promise<unknown> {
  const head = await log.head(session);
  return Promise.all([
    head ? log.entry(session, head.seq) : undefined,
    log.entry(session, (head?.seq ?? -1) + 1),
    log.getWatermark(session),
  ]);
}

export interface ResumeStep {
  step: string;
  size: number;
  /** Microseconds per call. */
  micros: Spread;
}

export interface ResumeStepsOptions {
  sizes: number[];
  /** Calls per step and sample at 64 KiB and below; fewer above (the same bytes read in all: at least 10). */
  calls: number;
  /** Samples per step (the median of these is reported). */
  rounds: number;
  text: TextKind;
  workDir: string;
  log: (line: string) => void;
}

async function drain(chunks: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of chunks) n += c.length;
  return n;
}

/** The bytes as the file store yields them (1 MiB blocks). */
async function* inMemory(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  for (let at = 0; at < bytes.length; at += 1024 * 1024) yield bytes.subarray(at, at + 1024 * 1024);
}

async function micros(calls: number, op: () => unknown): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await op();
  return ((performance.now() - t0) * 1000) / calls;
}

async function stepsOf(ledger: Ledger, size: number, textKind: TextKind, o: ResumeStepsOptions): Promise<ResumeStep[]> {
  const calls = Math.max(10, Math.round(o.calls * Math.min(1, (64 * 1024) / size)));
  const scope = { principal: 'bench', session: `steps-${size}`, run: 'bench' };
  await ledger.publish(scope, makeSummary(size, nextMarker(), textKind));
  const receipt = await ledger.publish(scope, makeSummary(size, nextMarker(), textKind));
  const hash = ledger.hashBackend;
  const head = (await ledger.log.entry(scope.session, 1))!;
  const knownHead = (await ledger.log.head(scope.session)) ?? null;
  const trust = ledger.trustStore();
  const parsed = parseEnvelope(head.envelope);
  const message = pae(parsed.envelope.payloadType, parsed.payload);
  const createdAt = new Date().toISOString();
  const publicKey = findTrustedKey(trust, ledger.host, ledger.keyId, createdAt);
  if (!publicKey.ok) throw new Error('bench: the ledger key is not trusted');
  const bytes = await ledger.blobs.get(receipt.digest);
  const text = new TextDecoder().decode(bytes);
  // The same bytes as a plain file: the floor's reference ("raw read + hash + text") in this very run.
  const rawFile = join(o.workDir, `resume-steps-raw-${size}`);
  await writeFile(rawFile, bytes);
  await ledger.resume(scope); // both verdicts remembered from here on
  const steps: Array<[string, () => unknown]> = [
    ['resume, repeated (verdicts remembered)', () => ledger.resume(scope)],
    // As resume makes it: the head comes from the head window (timed on its own below), not from a read of its own.
    [
      'authorization (owner, grants; the head given, as resume gives it)',
      () => authorize(ledger.log, undefined, scope.principal, scope.session, 'resume', knownHead),
    ],
    // The same with a head read of its own (`log.head`, one asynchronous read): a path no operation of the ledger takes
    // (each passes the head it read); it is what this row timed until 2026-12-05 (benchmarks/README.md).
    [
      'authorization with its own head read (not what resume does)',
      () => authorize(ledger.log, undefined, scope.principal, scope.session, 'resume'),
    ],
    ['checkpoint check (tree head vs pinned)', () => ledger.checkpoint()],
    [
      'head window (head, entries at, before and after it, watermark: what resume reads)',
      () => ledger.log.headWindow(scope.session),
    ],
    [
      'head read, separately (head; then entry at head, entry after, watermark)',
      () => headThenThreeReads(ledger.log, scope.session),
    ],
    ['entry read (the one before the head)', () => ledger.log.entry(scope.session, 0)],
    ['trust lookup', () => findTrustedKey(trust, ledger.host, ledger.keyId, createdAt)],
    [
      'signature check (bare Ed25519)',
      () => ledger.verifier.verify(parsed.signatures[0]!.sig, message, publicKey.publicKey),
    ],
    [
      'manifest verification (parse, key, signature, schema, canonical, id)',
      () => verifyManifestEnvelope(head.envelope, { trust, verifier: ledger.verifier }),
    ],
    // The read and decode resume makes at this size: whole (get, JSON.parse) below STREAM_DECODE_FROM, else streamed.
    ...((size < STREAM_DECODE_FROM
      ? [
          ['blob read + re-hash', () => ledger.blobs.get(receipt.digest)],
          ['summary decode + schema', () => decodeSummary(bytes)],
        ]
      : [
          ['blob read + re-hash (chunks)', () => drain(ledger.blobs.chunks(receipt.digest))],
          ['summary decode + schema (streamed, from memory)', () => decodeSummaryStream(inMemory(bytes), bytes.length)],
          [
            'blob read + re-hash + streamed decode + schema (what resume does)',
            () => decodeSummaryStream(ledger.blobs.chunks(receipt.digest), bytes.length),
          ],
        ]) as Array<[string, () => unknown]>),
    ['JSON.parse of the summary text alone', () => JSON.parse(text)],
    // The text made afresh from the bytes and parsed, as the whole-buffer decode does, without the schema and content
    // rules: against the row above, the cost of a fresh text; against "summary decode + schema", the schema's.
    ['text made from the bytes + JSON.parse (no schema)', () => JSON.parse(summaryText(bytes))],
    ['raw read + hash + text of the same bytes (the reference)', () => rawReadHashText(rawFile, bytes.length, hash)],
  ];
  const samples = new Map<string, number[]>(steps.map(([name]) => [name, []]));
  const firstAfterPublish: number[] = [];
  for (let round = 0; round <= o.rounds; round++) {
    for (const [name, op] of steps) {
      collectGarbage();
      const us = await micros(calls, op);
      if (round > 0) samples.get(name)!.push(us);
    }
    // First resume after a publish: the new head is verified (the entry before it was, by the last resume), all but its
    // signature: this ledger made it (VerifiedManifestCache.rememberSigned).
    const n = Math.max(1, Math.floor(calls / 10));
    let total = 0;
    for (let i = 0; i < n; i++) {
      await ledger.publish(scope, makeSummary(size, nextMarker(), textKind));
      total += await micros(1, () => ledger.resume(scope));
    }
    if (round > 0) firstAfterPublish.push(total / n);
  }
  return [
    ...steps.map(([step]) => ({ step, size, micros: spread(samples.get(step)!) })),
    {
      step: "resume, first after this ledger's publish (the new head verified, but for its own signature)",
      size,
      micros: spread(firstAfterPublish),
    },
  ];
}

/** A cold resume: a ledger opened afresh (not timed), then its first resume (timed). */
async function coldResume(root: string, size: number, o: ResumeStepsOptions): Promise<ResumeStep> {
  const scope = { principal: 'bench', session: `steps-${size}`, run: 'bench' };
  const samples: number[] = [];
  for (let round = 0; round <= o.rounds; round++) {
    const ledger = await openLedger({ root, host: 'bench', hash: 'auto', maxSummaryBytes: 1024 ** 3 });
    try {
      const us = await micros(1, () => ledger.resume(scope));
      if (round > 0) samples.push(us);
    } finally {
      await ledger.close();
    }
  }
  return { step: 'resume, cold (a freshly opened ledger: both entries verified)', size, micros: spread(samples) };
}

export async function runResumeStepsSuite(o: ResumeStepsOptions): Promise<ResumeStep[]> {
  const root = await mkdtemp(join(o.workDir, 'resume-steps-'));
  const out: ResumeStep[] = [];
  for (const size of o.sizes) {
    const ledger = await openLedger({ root, host: 'bench', hash: 'auto', maxSummaryBytes: 1024 ** 3 });
    try {
      out.push(...(await stepsOf(ledger, size, o.text, o)));
    } finally {
      await ledger.close();
    }
    out.push(await coldResume(root, size, o));
    o.log(`  ${size} B: ${out.filter((s) => s.size === size).length} steps timed`);
  }
  return out;
}
