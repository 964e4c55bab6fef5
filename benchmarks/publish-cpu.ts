/**
 * The main thread's own CPU time per small publish, the concurrency suite's 32-session case measured alone: a fresh
 * embedded store, 32 sessions publishing 4 KiB summaries back to back, a warm-up, then rounds of a fixed length, each
 * reporting the main thread's on-CPU time per publish (lib/thread-cpu.ts: the kernel's count for the thread, not what
 * it waited for a core), the process's CPU per publish and publishes/s. Prints one JSON line.
 *
 *   node --expose-gc dist/benchmarks/publish-cpu.js [--sessions 32] [--bytes 4096] [--rounds 5] [--seconds 2]
 *     [--warmup 1.5] [--work DIR] [--against CLONE]
 *
 * On-CPU time is what a cut of the publish path changes even on a machine whose cores are busy with other work; the
 * rate and the busy time (event-loop utilization) move with that work. Builds run in separate processes, alternated,
 * spread by more than a cut of a few µs on a shared machine; `--against CLONE` loads another built tree's ledger
 * (`CLONE/dist/src/ledger/open.js`, e.g. a clone of the commit before, built) into this process and alternates the
 * two round by round (which goes first alternates too), each in a store of its own: the JSON line then also has the
 * other's figures, the median of the rounds' on-CPU ratios, other / this, and of their rates, this / other
 * (benchmarks/README.md).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
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
    against: { type: 'string' },
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

type Open = typeof openLedger;

/** A ledger of `open` in a store of its own under `work`, and what publishes one summary to it. */
async function side(open: Open, dir: string) {
  const ledger = await open({ root: join(work, dir), host: 'bench', hash: 'auto', onNotice: () => {} });
  const publish = (session: string) =>
    ledger.publish({ principal: 'bench', session, run: 'bench' }, makeSummary(BYTES, nextMarker()));
  return {
    ledger,
    publish,
    onCpu: [] as number[],
    busy: [] as number[],
    process: [] as number[],
    rate: [] as number[],
  };
}

const summary = (xs: number[], digits = 1) => {
  if (xs.length === 0) return null;
  const s = spread(xs);
  return { median: +s.median.toFixed(digits), min: +s.min.toFixed(digits), max: +s.max.toFixed(digits) };
};

const work = await mkdtemp(join(values.work ?? tmpdir(), 'hl-publish-cpu-'));
try {
  const other =
    values.against === undefined
      ? undefined
      : ((await import(pathToFileURL(resolve(values.against, 'dist/src/ledger/open.js')).href)) as { openLedger: Open })
          .openLedger;
  const sides = [await side(openLedger, 'store')];
  if (other) sides.push(await side(other, 'other'));
  for (const s of sides) await measurePublishes(s.publish, SESSIONS, WARMUP * 1000);
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 === 0 ? sides : [...sides].reverse()) {
      collectGarbage();
      const m = await measurePublishes(s.publish, SESSIONS, SECONDS * 1000);
      if (m.mainThreadCpuMicros !== undefined) s.onCpu.push(m.mainThreadCpuMicros);
      s.busy.push(m.mainThreadMicros);
      s.process.push(m.cpuMicros);
      s.rate.push(m.perSecond);
    }
  }
  for (const s of sides) await s.ledger.close();
  const figures = (s: (typeof sides)[number]) => ({
    mainThreadCpuMicros: summary(s.onCpu),
    mainThreadBusyMicros: summary(s.busy),
    processCpuMicros: summary(s.process),
    publishesPerSecond: summary(s.rate),
  });
  const [own, against] = sides;
  process.stdout.write(
    `${JSON.stringify({
      sessions: SESSIONS,
      bytes: BYTES,
      rounds: ROUNDS,
      ...figures(own!),
      ...(against
        ? {
            against: { dir: values.against, ...figures(against) },
            // Per round, the other's on-CPU time over this build's: below 1, the other is the cheaper.
            againstOverThis: summary(
              own!.onCpu.length === against.onCpu.length ? own!.onCpu.map((x, i) => against.onCpu[i]! / x) : [],
              4,
            ),
            // Per round, this build's publishes/s over the other's: above 1, this build is the faster.
            rateThisOverAgainst: summary(
              own!.rate.length === against.rate.length ? own!.rate.map((x, i) => x / against.rate[i]!) : [],
              4,
            ),
          }
        : {}),
    })}\n`,
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
