/**
 * The benchmark runs (quick mode) and writes results of the documented shape. Timings are not
 * asserted — only that every figure is there, finite, and consistent (min ≤ median ≤ max).
 * Runs the compiled benchmark in dist/ (`npm test` builds it first, in pretest).
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { findPostgresBin } from '../benchmarks/lib/pg-cluster.js';
import type { BenchResults } from '../benchmarks/report/model.js';
import { threadCpuNanos } from '../benchmarks/lib/thread-cpu.js';
import { tempDir } from './support/tmp.js';

const RUN = fileURLToPath(new URL('../dist/benchmarks/run.js', import.meta.url));
const KiB = 1024;
const MiB = 1024 * KiB;

function expectSpread(
  s: { n: number; median: number; min: number; max: number; q1: number; q3: number },
  what: string,
): void {
  for (const k of ['median', 'min', 'max', 'q1', 'q3'] as const)
    expect(Number.isFinite(s[k]) && s[k] >= 0, `${what}.${k}`).toBe(true);
  expect(s.min <= s.median && s.median <= s.max, `${what}: min ≤ median ≤ max`).toBe(true);
  expect(s.q1 <= s.q3, `${what}: q1 ≤ q3`).toBe(true);
  expect(s.n, `${what}.n`).toBeGreaterThan(0);
}

const onLinux = process.platform === 'linux';

describe("the main thread's own CPU time (benchmarks/lib/thread-cpu.ts)", () => {
  it('reads a count of nanoseconds that never goes back on Linux, and nothing elsewhere', () => {
    const a = threadCpuNanos();
    let x = 0;
    for (let i = 0; i < 1e5; i++) x += Math.sqrt(i);
    const b = threadCpuNanos();
    expect(x).toBeGreaterThan(0);
    if (!onLinux) {
      expect(a).toBeUndefined();
      return;
    }
    expect(Number.isFinite(a) && a! >= 0, `first reading ${a}`).toBe(true);
    expect(Number.isFinite(b) && b! >= a!, `second reading ${b} after ${a}`).toBe(true);
  });
});

describe('benchmarks/publish-cpu.ts', () => {
  it('prints one JSON line: the main thread on CPU, busy, the process and the rate; with --against, both and the ratio', async () => {
    const script = fileURLToPath(new URL('../dist/benchmarks/publish-cpu.js', import.meta.url));
    expect(existsSync(script), 'dist/ is missing: run `npm run build`').toBe(true);
    const clone = fileURLToPath(new URL('..', import.meta.url));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [script, '--sessions', '4', '--rounds', '2', '--seconds', '0.2', '--warmup', '0.1', '--against', clone],
      { maxBuffer: MiB },
    );
    type Figure = { median: number; min: number; max: number } | null;
    const r = JSON.parse(stdout) as Record<string, unknown> & {
      against: Record<string, Figure>;
      againstOverThis: Figure;
    };
    expect(r).toMatchObject({ sessions: 4, bytes: 4096, rounds: 2, against: { dir: clone } });
    const figure = (f: Figure, what: string) => {
      expect(f, what).not.toBeNull();
      expect(f!.min <= f!.median && f!.median <= f!.max && f!.min > 0, what).toBe(true);
    };
    for (const [side, figures] of [
      ['this', r],
      ['against', r.against],
    ] as const) {
      for (const k of ['mainThreadBusyMicros', 'processCpuMicros', 'publishesPerSecond'])
        figure(figures[k] as Figure, `${side}.${k}`);
      if (onLinux) figure(figures.mainThreadCpuMicros as Figure, `${side}.mainThreadCpuMicros`);
      else expect(figures.mainThreadCpuMicros).toBeNull();
    }
    if (onLinux) figure(r.againstOverThis, 'againstOverThis');
  }, 60_000);
});

describe('npm run bench -- --quick', () => {
  it('writes latest.json, latest.md and throughput.svg with every case, size and target', async () => {
    expect(existsSync(RUN), 'dist/ is missing: run `npm run build` (npm test does it in pretest)').toBe(true);
    const out = tempDir('hl-bench-out-');
    const work = tempDir('hl-bench-work-');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--expose-gc', RUN, '--quick', '--out', out, '--work', work],
      { maxBuffer: 16 * MiB },
    );
    expect(stdout).toMatch(/handoff-ledger benchmark \(quick\)/);

    const r = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as BenchResults;
    expect(r.schema).toBe('handoff-ledger-bench/2');
    expect(r.mode).toBe('quick');
    expect(r.config.sizes).toEqual([KiB, 64 * KiB, MiB]);
    expect(r.machine.cpus).toBeGreaterThan(0);

    // The PostgreSQL rows are measured exactly when the server binaries are there, and say why when not.
    const pgFound = findPostgresBin();
    const pgCases = 'bin' in pgFound ? ['publish (postgres)', 'resume (postgres)'] : [];
    if ('bin' in pgFound) {
      expect(r.postgres.skipped).toBeUndefined();
      expect(r.postgres.serverVersion).toMatch(/^\d+/);
      expect(r.postgres.concurrency.map((c) => c.sessions)).toEqual([1, 32]);
      for (const c of r.postgres.concurrency) {
        expectSpread(c.publishesPerSecond, `postgres ${c.sessions} sessions`);
        expectSpread(c.mainThreadMicros!, `postgres ${c.sessions} sessions: main thread per publish`);
        if (onLinux) expectSpread(c.mainThreadCpuMicros!, `postgres ${c.sessions} sessions: main thread on CPU`);
        expectSpread(c.cpuMicros!, `postgres ${c.sessions} sessions: process CPU per publish`);
      }
    } else {
      expect(r.postgres.skipped).toContain(pgFound.reason);
      expect(r.postgres.concurrency).toEqual([]);
    }
    // Native rows where its binary loads here, as for the ledger's own default.
    const nativeLoads = await loadHashBackend('native', () => {}).then(
      () => true,
      () => false,
    );
    const nativeCases = nativeLoads ? ['publish (native)', 'resume (native)'] : [];
    const cases = [
      'raw durable write',
      'raw read',
      'raw read + hash',
      'raw read + hash + text',
      'cacache.put',
      'cacache.get',
      ...nativeCases,
      'publish (wasm)',
      'resume (wasm)',
      'publish (noble)',
      'resume (noble)',
      ...pgCases,
    ];
    // The pair timed alone, each after a sync, at the sizes of config.alone; the publish on the ledger's default backend.
    const aloneCases = [
      'raw durable write, alone',
      'raw durable write (flush-behind), alone',
      `publish (${nativeLoads ? 'native' : 'wasm'}), alone`,
    ];
    // The floor of an inline publish (synced batch + the pin's slot write), at the sizes stored inline only; the raw
    // write with publish's flush-behind from 1 MiB (below, it is the plain write).
    const floorCase = 'synced batch + pin';
    const behindCase = 'raw durable write (flush-behind)';
    expect(new Set(r.sizes.map((s) => s.case))).toEqual(new Set([...cases, ...aloneCases, floorCase, behindCase]));
    expect(r.sizes.filter((s) => s.case === floorCase).map((s) => s.size)).toEqual([KiB, 64 * KiB]);
    expect(r.sizes.filter((s) => s.case === behindCase).map((s) => s.size)).toEqual([MiB]);
    for (const row of r.sizes.filter((s) => s.case === floorCase || s.case === behindCase)) {
      expect(row.samplesSeconds).toHaveLength(r.config.rounds);
      expectSpread(row.seconds, `${row.case} @ ${row.size} seconds`);
    }
    expect(r.config.alone.sizes).toEqual([MiB]);
    for (const name of aloneCases) {
      const row = r.sizes.find((s) => s.case === name && s.size === MiB);
      expect(row, `${name} @ 1 MiB`).toBeDefined();
      expect(row!.samplesSeconds).toHaveLength(r.config.alone.rounds);
    }
    // The regime: the disk's durable write speed, from the raw write alone.
    expect(r.disk?.bytes).toBe(MiB);
    expectSpread(r.disk!.durableWriteMiBps, 'disk.durableWriteMiBps');
    expectSpread(r.disk!.flushBehindMiBps!, 'disk.flushBehindMiBps');
    // And the memory's: first touch of fresh memory against rewriting it, at the run's start and end.
    for (const at of ['start', 'end'] as const) {
      expect(r.memory?.[at].bytes).toBe(64 * MiB);
      expectSpread(r.memory![at].firstTouchMiBps, `memory.${at}.firstTouchMiBps`);
      expectSpread(r.memory![at].rewriteMiBps, `memory.${at}.rewriteMiBps`);
      expect(r.memory![at].firstTouchMiBps.n).toBe(2);
    }
    // Write cases report the writeback they left (synced after them, outside their timing); reads do not.
    for (const row of r.sizes.filter((s) => !pgCases.includes(s.case) && !s.case.endsWith(', alone'))) {
      if (row.op === 'write') expectSpread(row.writebackSeconds!, `${row.case} @ ${row.size} writeback`);
      else expect(row.writebackSeconds, `${row.case} @ ${row.size}`).toBeUndefined();
    }
    expect(r.config.postgres.sizes).toEqual([KiB, 64 * KiB, MiB]);
    for (const name of cases) {
      const pgRow = pgCases.includes(name);
      for (const size of pgRow ? r.config.postgres.sizes : r.config.sizes) {
        const row = r.sizes.find((s) => s.case === name && s.size === size);
        expect(row, `${name} @ ${size}`).toBeDefined();
        expect(row!.samplesSeconds).toHaveLength(pgRow ? r.config.postgres.rounds : r.config.rounds);
        expectSpread(row!.seconds, `${name} @ ${size} seconds`);
        expectSpread(row!.mibPerSecond, `${name} @ ${size} MiB/s`);
      }
    }
    expect(nativeLoads ? ['native', 'wasm', 'noble'] : ['wasm', 'noble']).toContain(r.hash.fastest);

    // Resume, step by step, at the sizes of config.resumeSteps: every step, and the whole resume three ways.
    expect(r.config.resumeSteps.sizes).toEqual([KiB]);
    const steps = new Set(r.resumeSteps.map((x) => x.step));
    for (const step of [
      'resume, repeated (verdicts remembered)',
      "resume, first after this ledger's publish (the new head verified, but for its own signature)",
      'resume, cold (a freshly opened ledger: both entries verified)',
      'head window (head, entries at, before and after it, watermark: what resume reads)',
      'head read, separately (head; then entry at head, entry after, watermark)',
      'signature check (bare Ed25519)',
      // As resume authorizes: the head given (the window's), not read again; beside it the path with a read of its own.
      'authorization (owner, grants; the head given, as resume gives it)',
      'authorization with its own head read (not what resume does)',
      'blob read + re-hash',
      'summary decode + schema',
      'text made from the bytes + JSON.parse (no schema)',
    ])
      expect(steps.has(step), step).toBe(true);
    for (const x of r.resumeSteps) {
      expect(x.size).toBe(KiB);
      expectSpread(x.micros, `resumeSteps ${x.step}`);
    }

    expect(r.concurrency.map((c) => c.sessions)).toEqual([1, 32]);
    for (const c of r.concurrency) {
      expectSpread(c.publishesPerSecond, `${c.sessions} sessions`);
      expectSpread(c.mainThreadMicros!, `${c.sessions} sessions: main thread per publish`);
      // Beside the busy time (event-loop utilization, waits for a core included), the thread's own on-CPU time where
      // the kernel tells it (Linux), one sample per round; absent elsewhere.
      if (onLinux) {
        expectSpread(c.mainThreadCpuMicros!, `${c.sessions} sessions: main thread on CPU per publish`);
        expect(c.mainThreadCpuMicros!.n).toBe(c.mainThreadMicros!.n);
      } else expect(c.mainThreadCpuMicros).toBeUndefined();
      expectSpread(c.cpuMicros!, `${c.sessions} sessions: process CPU per publish`);
    }
    expect(r.targets.find((x) => x.id === 'concurrency-32-rate')!.detail).toMatch(
      onLinux
        ? /the main thread was busy \d+ µs per publish \(event-loop utilization: waits for a core included\), on CPU \d+ µs per publish \(its own time\): at most [\d,]+\/s on one main thread/
        : /the main thread was busy \d+ µs per publish \(event-loop utilization: waits for a core included\): at most/,
    );
    expect(r.rawSmallWrites?.bytes).toBe(4 * KiB);
    expectSpread(r.rawSmallWrites!.perSecond, 'rawSmallWrites');
    expect(r.smallWriteFloors?.bytes).toBe(4 * KiB);
    expectSpread(r.smallWriteFloors!.syncedBatch, 'smallWriteFloors.syncedBatch');
    expectSpread(r.smallWriteFloors!.syncedBatchAndSlot, 'smallWriteFloors.syncedBatchAndSlot');
    expectSpread(r.smallWriteFloors!.signedBatchAndSlot!, 'smallWriteFloors.signedBatchAndSlot');
    // The same floor group-committed by the ledger's largest session count, named in the 32-session target.
    expect(r.smallWriteFloors!.grouped!.sessions).toBe(Math.max(...r.concurrency.map((c) => c.sessions)));
    expectSpread(r.smallWriteFloors!.grouped!.perSecond, 'smallWriteFloors.grouped.perSecond');
    expect(r.targets.find((x) => x.id === 'concurrency-32-rate')!.detail).toMatch(
      /the commits alone \(group-committed by \d+ sessions: signatures, synced batch, pin; no other CPU\) ran [\d,]+\/s/,
    );
    expect(r.chain.manifests).toBe(2000);
    // verifyManifestEnvelope per core is measured in every pool round, beside the ceiling; the target names the ratio.
    expect(r.chain.perManifestNode.n).toBe(r.config.chain.rounds);
    expect(r.chain.perCoreRatio!.n).toBe(r.config.chain.rounds);
    expect(r.targets.find((x) => x.id === 'chain-verify-vs-ceiling')!.detail).toMatch(
      /per core, verifyManifestEnvelope ran at [\d.]+ × the bare verify measured right after it/,
    );
    // The floor of a pool of that many threads, in every round, against the ceiling right after it.
    expect(r.chain.parallelFloor!.n).toBe(r.config.chain.rounds);
    expect(r.chain.parallelFloorRatio!.n).toBe(r.config.chain.rounds);
    expect(r.targets.find((x) => x.id === 'chain-verify-vs-ceiling')!.detail).toMatch(
      /the floor of \d+ threads doing only what any verifier must per line \(no messages, no chain rules\) ran at [\d.]+ × the ceiling/,
    );
    for (const k of [
      'verifyChainPool',
      'verifyChainMainShare',
      'verifyChainOneCore',
      'perManifestNode',
      'perManifestNoble',
      'rawVerifyNode',
      'parallelFloor',
      'parallelFloorRatio',
    ] as const)
      expectSpread(r.chain[k]!, `chain.${k}`);
    expect(r.rss.map((x) => x.bytes)).toEqual([MiB]);
    expect(r.rss[0]!.publishPeakKiB).toBeGreaterThan(0);

    // Targets: all listed; those quick mode does not measure are "not measured", never met or missed.
    const ids = r.targets.map((t) => t.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'publish-vs-raw-write-67108864',
        'resume-vs-raw-read-hash-16777216',
        'publish-vs-cacache-1024',
        'concurrency-32-vs-1',
        'chain-verify-rate',
        'rss-publish-64MiB',
        'publish-alone-vs-raw-alone-16777216',
        'publish-alone-vs-raw-alone-67108864',
        'resume-vs-floor-1024',
        'resume-vs-floor-65536',
        'publish-small-vs-raw-durable-write-rate',
        'concurrency-32-rate',
        'chain-verify-vs-ceiling',
      ]),
    );
    for (const id of [
      'publish-vs-raw-write-16777216',
      'chain-verify-rate',
      'rss-publish-64MiB',
      'publish-alone-vs-raw-alone-16777216',
      'chain-verify-vs-ceiling',
    ]) {
      const t = r.targets.find((x) => x.id === id)!;
      expect(t.measured, id).toBeUndefined();
      expect(t.met, id).toBeUndefined();
    }
    // Against cacache, the floor measured in the same rounds: inline sizes the batch + pin, larger ones the raw write.
    expect(r.targets.find((x) => x.id === 'publish-vs-cacache-1024')!.detail).toMatch(
      /floor: one synced LevelDB batch of the same bytes \+ the pin's slot write = [\d.]+ × cacache\.put/,
    );
    expect(r.targets.find((x) => x.id === `publish-vs-cacache-${MiB}`)!.detail).toMatch(
      /floor: the raw durable write (as publish writes \(flush-behind\) )?of the same bytes alone .* = [\d.]+ × cacache\.put/,
    );
    for (const id of [
      'publish-vs-cacache-1024',
      'concurrency-32-vs-1',
      'resume-vs-floor-1024',
      'publish-small-vs-raw-durable-write-rate',
      'concurrency-32-rate',
    ])
      expect(typeof r.targets.find((x) => x.id === id)!.met, id).toBe('boolean');

    // The figures are the arithmetic of the samples, not only of the right shape: each MiB/s median is the median of
    // the per-round rates (even sample counts included), and a target's ratio is base time / ledger time.
    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    for (const row of r.sizes) {
      expect(row.seconds.median, `${row.case} ${row.size}: seconds`).toBeCloseTo(median(row.samplesSeconds), 12);
      const rates = row.samplesSeconds.map((sec) => row.size / MiB / sec);
      expect(row.mibPerSecond.median / median(rates), `${row.case} ${row.size}: MiB/s`).toBeCloseTo(1, 9);
    }
    const secondsOf = (c: string, size: number) => r.sizes.find((x) => x.case === c && x.size === size)!.seconds.median;
    for (const size of r.config.sizes) {
      const t = r.targets.find((x) => x.id === `publish-vs-cacache-${size}`)!;
      const ratio = secondsOf('cacache.put', size) / secondsOf(`publish (${r.hash.fastest})`, size);
      expect(t.measured! / ratio, t.id).toBeCloseTo(1, 9);
      expect(t.met, t.id).toBe(ratio >= t.target);
    }

    const md = readFileSync(join(out, 'latest.md'), 'utf8');
    expect(md).toMatch(/\| raw durable write \|/);
    expect(md).toMatch(/## Targets/);
    expect(md).toMatch(
      /Disk: raw durable write of 1 MiB alone \(after sync\) [\d,.]+ MiB\/s \[[\d,.]+–[\d,.]+\]; as publish writes \(flush-behind: .*\) [\d,.]+ MiB\/s/,
    );
    expect(md).toMatch(
      /Memory \(64 MiB not touched before, then again\): at start [\d,.]+ MiB\/s \[[\d,.]+–[\d,.]+\] first touch/,
    );
    expect(md).toMatch(/\| writeback left \(ms\/op, median\) \|/);
    expect(md).toMatch(
      onLinux
        ? /\| 4 KiB publishes\/s, 32 sessions \| [^|]*; main thread [\d,.]+ µs per publish \(busy: waits for a core included\), [\d,.]+ µs on CPU \(its own time\), process CPU/
        : /\| 4 KiB publishes\/s, 32 sessions \| [^|]*; main thread [\d,.]+ µs per publish \(busy: waits for a core included\), process CPU/,
    );
    if (pgCases.length > 0) {
      expect(md).toMatch(/\| publish \(postgres\) \|/);
      expect(md).toMatch(/\| 4 KiB publishes\/s, 32 sessions \(postgres\) \|/);
    } else {
      expect(md).toMatch(/PostgreSQL rows skipped: /);
    }
    const svg = readFileSync(join(out, 'throughput.svg'), 'utf8');
    expect(svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(svg.match(/<polyline /g)).toHaveLength(cases.length + aloneCases.length + 2);
  }, 300_000);
});

describe('npm run bench -- --quick --only alone', () => {
  it('names no fastest hash backend and no interleaved sizes when the size suite did not run', async () => {
    expect(existsSync(RUN), 'dist/ is missing: run `npm run build` (npm test does it in pretest)').toBe(true);
    const out = tempDir('hl-bench-only-out-');
    const work = tempDir('hl-bench-only-work-');
    await promisify(execFile)(
      process.execPath,
      ['--expose-gc', RUN, '--quick', '--only', 'alone', '--out', out, '--work', work],
      {
        maxBuffer: 16 * MiB,
      },
    );
    const r = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as BenchResults;
    // Only the pair timed alone; no backend was probed, so none is the fastest (it read "wasm", a default, before).
    expect(new Set(r.sizes.map((s) => s.case.endsWith(', alone')))).toEqual(new Set([true]));
    expect(r.hash.probeMiBps).toEqual({});
    expect(r.hash.fastest).toBe('not measured');
    const md = readFileSync(join(out, 'latest.md'), 'utf8');
    expect(md).not.toMatch(/Fastest hash backend/);
    expect(md).not.toMatch(/interleaved; \d+ measured rounds/);
    expect(md).toMatch(/Size suite not run \(not selected by --only\)/);
  }, 120_000);
});
