/**
 * `npm run bench` — throughput of the ledger beside the physical limit and a peer.
 *
 *   node --expose-gc dist/benchmarks/run.js [--quick] [--out DIR] [--work DIR] [--text ascii|mixed]
 *                                           [--only sizes,alone,resume-steps,concurrency,chain,rss,postgres]
 *
 * Writes latest.json, latest.md and throughput.svg to benchmarks/results/ (quick runs: results/quick/)
 * and prints the tables. Progress goes to stderr. Timings are medians of interleaved rounds.
 * The PostgreSQL rows need the server binaries (initdb, pg_ctl); without them they are skipped with a notice.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { TextKind } from './lib/data.js';
import { syncPageCache } from './lib/quiet.js';
import { KiB, MiB, mapSpread, spread } from './lib/stats.js';
import { SCHEMA, type BenchResults } from './report/model.js';
import { throughputSvg } from './report/svg.js';
import { markdownReport, terminalReport } from './report/tables.js';
import { evaluateTargets } from './report/targets.js';
import { RAW_ALONE, RAW_FLUSH_BEHIND_ALONE, runAloneSuite } from './suites/alone.js';
import { runChainSuite } from './suites/chain.js';
import { runConcurrencySuite } from './suites/concurrency.js';
import { runPostgresSuite } from './suites/postgres.js';
import { runResumeStepsSuite } from './suites/resume-steps.js';
import { runRssSuite } from './suites/rss.js';
import { measureMemoryRegime } from './lib/memory.js';
import { runSizeSuite } from './suites/sizes.js';

const FULL = {
  sizes: [KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB],
  rounds: 5,
  batch: { [KiB]: 20, [64 * KiB]: 10, [MiB]: 4, [16 * MiB]: 1, [64 * MiB]: 1 } as Record<number, number>,
  nobleMaxBytes: 16 * MiB,
  concurrency: { sessions: [1, 32], bytes: 4 * KiB, rounds: 3, durationMs: 2000 },
  // A multiple of 3: each of the three cases (two raw writes, publish) goes first in as many rounds.
  alone: { sizes: [16 * MiB, 64 * MiB], rounds: 6 },
  resumeSteps: { sizes: [KiB, 64 * KiB, MiB], calls: 200, rounds: 3 },
  chain: { manifests: 100_000, sessions: 1000, rounds: 2, threads: 2, nodeSample: 20_000, nobleSample: 1000 },
  rssSizes: [KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB],
  // No 64 MiB row: it ran at the 16 MiB rate (~45 MiB/s) and added ~20 s to the suite's ~30 s.
  postgres: {
    sizes: [KiB, 64 * KiB, MiB, 16 * MiB],
    rounds: 5,
    maxConnections: 10,
    concurrency: { sessions: [1, 32], bytes: 4 * KiB, rounds: 3, durationMs: 2000 },
  },
};

const QUICK: typeof FULL = {
  sizes: [KiB, 64 * KiB, MiB],
  rounds: 2,
  batch: { [KiB]: 3, [64 * KiB]: 2, [MiB]: 1 },
  nobleMaxBytes: 16 * MiB,
  concurrency: { sessions: [1, 32], bytes: 4 * KiB, rounds: 1, durationMs: 250 },
  alone: { sizes: [MiB], rounds: 1 },
  resumeSteps: { sizes: [KiB], calls: 10, rounds: 1 },
  chain: { manifests: 2000, sessions: 50, rounds: 1, threads: 2, nodeSample: 500, nobleSample: 100 },
  rssSizes: [MiB],
  postgres: {
    sizes: [KiB, 64 * KiB, MiB],
    rounds: 2,
    maxConnections: 10,
    concurrency: { sessions: [1, 32], bytes: 4 * KiB, rounds: 1, durationMs: 250 },
  },
};

const SUITES = ['sizes', 'alone', 'resume-steps', 'concurrency', 'chain', 'rss', 'postgres'] as const;
const emptySpread = { n: 0, median: 0, min: 0, max: 0, q1: 0, q3: 0 };

function settings() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      out: { type: 'string' },
      work: { type: 'string' },
      text: { type: 'string' },
      only: { type: 'string' },
    },
  });
  const text = (values.text ?? 'ascii') as TextKind;
  if (text !== 'ascii' && text !== 'mixed') throw new Error('--text must be ascii or mixed');
  const only = new Set(values.only ? values.only.split(',') : SUITES);
  for (const s of only) if (!(SUITES as readonly string[]).includes(s)) throw new Error(`--only: unknown suite ${s}`);
  const quick = values.quick === true;
  const results = fileURLToPath(new URL('../../benchmarks/results/', import.meta.url));
  return {
    quick,
    cfg: quick ? QUICK : FULL,
    text,
    only,
    out: values.out ?? (quick ? join(results, 'quick') : results),
    work: values.work,
  };
}

/** The disk's own durable write speed in this run: the raw writes alone at the largest size measured alone. */
function diskRecord(cases: Array<{ case: string; size: number; samples: number[] }>): BenchResults['disk'] {
  const raw = cases.filter((c) => c.case === RAW_ALONE && c.samples.length > 0).sort((a, b) => b.size - a.size)[0];
  if (!raw) return undefined;
  const rate = (sec: number) => raw.size / MiB / sec;
  const behind = cases.find((c) => c.case === RAW_FLUSH_BEHIND_ALONE && c.size === raw.size && c.samples.length > 0);
  return {
    bytes: raw.size,
    durableWriteMiBps: mapSpread(raw.samples, rate),
    ...(behind ? { flushBehindMiBps: mapSpread(behind.samples, rate) } : {}),
  };
}

async function main(): Promise<void> {
  const s = settings();
  const { cfg } = s;
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const started = new Date();
  const loadStart = loadavg();
  const t0 = performance.now();
  // The memory regime before and after the suites (it can change within a run): fewer rounds in a quick run.
  const memoryRounds = s.quick ? 2 : 5;
  const memoryStart = measureMemoryRegime(memoryRounds);
  const workDir = await mkdtemp(join(s.work ?? tmpdir(), 'hl-bench-'));
  try {
    log(`handoff-ledger bench (${s.quick ? 'quick' : 'full'}), work dir ${workDir}`);
    // Starts the sync helper before any suite (no process is forked while a suite measures), from a quiet cache.
    await syncPageCache();
    log('sizes:');
    const sizes = s.only.has('sizes')
      ? await runSizeSuite({
          sizes: cfg.sizes,
          rounds: cfg.rounds,
          batch: (n) => cfg.batch[n] ?? 1,
          nobleMaxBytes: cfg.nobleMaxBytes,
          text: s.text,
          workDir,
          log,
        })
      : { cases: [], fastestHash: 'not measured', hashProbeMiBps: {} };
    log('alone (publish alone vs raw durable write alone, plain and with flush-behind):');
    const alone = s.only.has('alone')
      ? await runAloneSuite({ ...cfg.alone, text: s.text, workDir, log })
      : { cases: [], backend: '' };
    log('resume, step by step:');
    const resumeSteps = s.only.has('resume-steps')
      ? await runResumeStepsSuite({ ...cfg.resumeSteps, text: s.text, workDir, log })
      : [];
    log('concurrency:');
    const concurrency = s.only.has('concurrency')
      ? await runConcurrencySuite({ ...cfg.concurrency, workDir, log })
      : {
          ledger: [],
          rawWrites: [],
          syncedBatches: [],
          syncedBatchesAndSlot: [],
          signedBatchesAndSlot: [],
          groupedFloor: [],
          groupedSessions: 0,
        };
    log('chain:');
    const chain = s.only.has('chain') ? await runChainSuite({ ...cfg.chain, log }) : undefined;
    log('rss:');
    const rss = s.only.has('rss') ? await runRssSuite({ sizes: cfg.rssSizes, text: s.text, workDir, log }) : [];
    log('postgres:');
    const pgc = cfg.postgres;
    const postgres = s.only.has('postgres')
      ? await runPostgresSuite({
          sizes: pgc.sizes,
          rounds: pgc.rounds,
          batch: (n) => cfg.batch[n] ?? 1,
          concurrency: pgc.concurrency,
          maxConnections: pgc.maxConnections,
          text: s.text,
          workDir,
          log,
        })
      : { skipped: 'not selected (--only)', cases: [], concurrency: [] };
    const cpu = cpus();
    const partial: Omit<BenchResults, 'targets'> = {
      schema: SCHEMA,
      mode: s.quick ? 'quick' : 'full',
      startedAt: started.toISOString(),
      durationSeconds: (performance.now() - t0) / 1000,
      machine: {
        node: process.versions.node,
        v8: process.versions.v8,
        platform: process.platform,
        arch: process.arch,
        cpus: cpu.length,
        cpuModel: cpu[0]?.model.trim() ?? 'unknown',
        memoryGiB: totalmem() / 1024 ** 3,
        loadAverage: { start: loadStart, end: loadavg() },
      },
      config: {
        sizes: cfg.sizes,
        rounds: cfg.rounds,
        batch: Object.fromEntries(cfg.sizes.map((n) => [String(n), cfg.batch[n] ?? 1])),
        nobleMaxBytes: cfg.nobleMaxBytes,
        text: s.text,
        concurrency: cfg.concurrency,
        chain: cfg.chain,
        rssSizes: cfg.rssSizes,
        postgres: cfg.postgres,
        alone: cfg.alone,
        resumeSteps: cfg.resumeSteps,
      },
      disk: diskRecord(alone.cases),
      memory: { start: memoryStart, end: measureMemoryRegime(memoryRounds) },
      hash: { fastest: sizes.fastestHash, probeMiBps: sizes.hashProbeMiBps },
      sizes: [...sizes.cases, ...alone.cases, ...postgres.cases].map((c) => {
        const seconds = spread(c.samples);
        return {
          case: c.case,
          group: c.group,
          op: c.op,
          size: c.size,
          samplesSeconds: c.samples,
          seconds,
          mibPerSecond: mapSpread(c.samples, (sec) => c.size / MiB / sec),
          ...(c.writebackSeconds ? { writebackSeconds: spread(c.writebackSeconds) } : {}),
        };
      }),
      resumeSteps,
      concurrency: concurrency.ledger.map(({ mainThreadMicros, mainThreadCpuMicros, cpuMicros, ...c }) => ({
        ...c,
        publishesPerSecond: spread(c.samples),
        mainThreadMicros: spread(mainThreadMicros),
        ...(mainThreadCpuMicros.length > 0 ? { mainThreadCpuMicros: spread(mainThreadCpuMicros) } : {}),
        cpuMicros: spread(cpuMicros),
      })),
      rawSmallWrites:
        concurrency.rawWrites.length > 0
          ? { bytes: cfg.concurrency.bytes, samples: concurrency.rawWrites, perSecond: spread(concurrency.rawWrites) }
          : undefined,
      smallWriteFloors:
        concurrency.syncedBatches.length > 0
          ? {
              bytes: cfg.concurrency.bytes,
              syncedBatch: spread(concurrency.syncedBatches),
              syncedBatchAndSlot: spread(concurrency.syncedBatchesAndSlot),
              signedBatchAndSlot: spread(concurrency.signedBatchesAndSlot),
              grouped: { sessions: concurrency.groupedSessions, perSecond: spread(concurrency.groupedFloor) },
            }
          : undefined,
      chain: chain
        ? {
            manifests: chain.manifests,
            sessions: chain.sessions,
            threads: chain.threads,
            buildSeconds: chain.buildSeconds,
            bundleCached: chain.cached,
            verifyChainPool: spread(chain.verifyChainPool),
            verifyChainMainShare:
              chain.verifyChainMainShare.length > 0 ? spread(chain.verifyChainMainShare) : emptySpread,
            verifyChainOneCore: spread(chain.verifyChainOneCore),
            perManifestNode: spread(chain.perManifestNode),
            perCoreRatio: spread(chain.perCoreRatio),
            parallelFloor: spread(chain.parallelFloor),
            parallelFloorRatio: spread(chain.parallelFloorRatio),
            perManifestNoble: spread(chain.perManifestNoble),
            rawVerifyNode: spread(chain.rawVerifyNode),
          }
        : {
            manifests: 0,
            sessions: 0,
            threads: 0,
            buildSeconds: 0,
            bundleCached: false,
            verifyChainPool: emptySpread,
            verifyChainMainShare: emptySpread,
            verifyChainOneCore: emptySpread,
            perManifestNode: emptySpread,
            perManifestNoble: emptySpread,
            rawVerifyNode: emptySpread,
          },
      rss,
      postgres: {
        ...(postgres.skipped === undefined ? {} : { skipped: postgres.skipped }),
        ...(postgres.serverVersion === undefined ? {} : { serverVersion: postgres.serverVersion }),
        concurrency: postgres.concurrency.map(({ mainThreadMicros, mainThreadCpuMicros, cpuMicros, ...c }) => ({
          ...c,
          publishesPerSecond: spread(c.samples),
          mainThreadMicros: spread(mainThreadMicros),
          ...(mainThreadCpuMicros.length > 0 ? { mainThreadCpuMicros: spread(mainThreadCpuMicros) } : {}),
          cpuMicros: spread(cpuMicros),
        })),
      },
    };
    const results: BenchResults = { ...partial, targets: evaluateTargets(partial) };
    await mkdir(s.out, { recursive: true });
    await writeFile(join(s.out, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    await writeFile(join(s.out, 'latest.md'), markdownReport(results));
    await writeFile(join(s.out, 'throughput.svg'), throughputSvg(results));
    process.stdout.write(terminalReport(results));
    log(`wrote ${join(s.out, 'latest.json')}, latest.md, throughput.svg`);
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
