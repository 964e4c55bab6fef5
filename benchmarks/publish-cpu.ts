/**
 * The main thread's own CPU time per small publish, the concurrency suite's 32-session case measured alone: a fresh
 * embedded store, 32 sessions publishing 4 KiB summaries back to back, a warm-up, then rounds of a fixed length, each
 * reporting the main thread's on-CPU time per publish (lib/thread-cpu.ts: the kernel's count for the thread, not what
 * it waited for a core), the process's CPU per publish and publishes/s. Prints one JSON line.
 *
 *   node --expose-gc dist/benchmarks/publish-cpu.js [--sessions 32] [--bytes 4096] [--rounds 5] [--seconds 2]
 *     [--warmup 1.5] [--work DIR]
 *
 * On-CPU time is what a cut of the publish path changes even on a machine whose cores are busy with other work; the
 * rate and the busy time (event-loop utilization) move with that work. Compare builds by running this several times
 * each, alternated, and comparing the medians (benchmarks/README.md).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openLedger } from '../src/ledger/open.js';
import { makeSummary, nextMarker } from './lib/data.js';
import { collectGarbage, spread } from './lib/stats.js';
import { measurePublishes } from './suites/concurrency.js';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string' },
    bytes: { type: 'string' },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    work: { type: 'string' },
  },
});
const positive = (name: string, given: string | undefined, fallback: number) => {
  const n = Number(given ?? fallback);
  if (!(Number.isFinite(n) && n > 0)) throw new Error(`--${name} must be a positive number, got ${given}`);
  return n;
};
const SESSIONS = Math.round(positive('sessions', values.sessions, 32));
const BYTES = Math.round(positive('bytes', values.bytes, 4096));
const ROUNDS = Math.round(positive('rounds', values.rounds, 5));
const SECONDS = positive('seconds', values.seconds, 2);
const WARMUP = positive('warmup', values.warmup, 1.5);

const work = await mkdtemp(join(values.work ?? tmpdir(), 'hl-publish-cpu-'));
try {
  const ledger = await openLedger({ root: join(work, 'store'), host: 'bench', hash: 'auto', onNotice: () => {} });
  const publish = (session: string) =>
    ledger.publish({ principal: 'bench', session, run: 'bench' }, makeSummary(BYTES, nextMarker()));
  await measurePublishes(publish, SESSIONS, WARMUP * 1000);
  const onCpu: number[] = [];
  const busy: number[] = [];
  const process: number[] = [];
  const perSecond: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    collectGarbage();
    const m = await measurePublishes(publish, SESSIONS, SECONDS * 1000);
    if (m.mainThreadCpuMicros !== undefined) onCpu.push(m.mainThreadCpuMicros);
    busy.push(m.mainThreadMicros);
    process.push(m.cpuMicros);
    perSecond.push(m.perSecond);
  }
  await ledger.close();
  const summary = (xs: number[]) => {
    if (xs.length === 0) return null;
    const s = spread(xs);
    return { median: +s.median.toFixed(1), min: +s.min.toFixed(1), max: +s.max.toFixed(1) };
  };
  globalThis.process.stdout.write(
    `${JSON.stringify({
      sessions: SESSIONS,
      bytes: BYTES,
      rounds: ROUNDS,
      mainThreadCpuMicros: summary(onCpu),
      mainThreadBusyMicros: summary(busy),
      processCpuMicros: summary(process),
      publishesPerSecond: summary(perSecond),
    })}\n`,
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
