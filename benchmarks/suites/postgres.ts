/**
 * The same ledger on the PostgreSQL backend: publish and resume by size, and 4 KiB publishes/s
 * with 1 and 32 concurrent sessions, against a throw-away cluster started once for the suite and removed
 * at its end (on errors and Ctrl-C too). Rounds follow the embedded suites: a warm-up first, then every
 * round visits every size; the 1 / 32 session rounds alternate their order.
 */
import { join } from 'node:path';
import pg from 'pg';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { makeSummary, nextMarker, type TextKind } from '../lib/data.js';
import { findPostgresBin, PgCluster } from '../lib/pg-cluster.js';
import { syncPageCache } from '../lib/quiet.js';
import { collectGarbage, MiB, sizeLabel } from '../lib/stats.js';
import { measurePublishes, publishesPerSecond, type ConcurrencyResult } from './concurrency.js';
import type { CaseSamples } from './sizes.js';

export interface PostgresSuiteOptions {
  sizes: number[];
  /** Measured rounds of the size cases (a warm-up round comes first). */
  rounds: number;
  /** Operations timed together as one sample, by size. */
  batch: (size: number) => number;
  concurrency: { sessions: number[]; bytes: number; rounds: number; durationMs: number };
  /** The ledger's connection pool (32 sessions share it). */
  maxConnections: number;
  text: TextKind;
  workDir: string;
  log: (line: string) => void;
}

export interface PostgresSuiteResult {
  /** Why the suite did not run (no PostgreSQL binaries); undefined when it ran. */
  skipped?: string;
  /** `SHOW server_version` of the cluster measured. */
  serverVersion?: string;
  cases: CaseSamples[];
  concurrency: ConcurrencyResult[];
}

const MAX_SUMMARY = 1024 * MiB;
const scopeOf = (size: number) => ({ principal: 'bench', session: `pg-size-${size}`, run: 'bench' });

async function serverVersion(connectionString: string): Promise<string> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? 'unknown';
  } finally {
    await client.end();
  }
}

/** Seconds per publish and per resume of `k` summaries of `size` bytes, each timed without its preparation (a publish after `sync`). */
async function publishResume(
  ledger: Ledger,
  size: number,
  k: number,
  text: TextKind,
): Promise<{ publish: number; resume: number }> {
  let publish = 0;
  let resume = 0;
  for (let i = 0; i < k; i++) {
    const summary = makeSummary(size, nextMarker(), text);
    // As every timed write case: from a quiet page cache (other cases' writeback is not this publish's).
    await syncPageCache();
    const t0 = performance.now();
    await ledger.publish(scopeOf(size), summary);
    publish += performance.now() - t0;
  }
  collectGarbage();
  for (let i = 0; i < k; i++) {
    const t0 = performance.now();
    const r = await ledger.resume(scopeOf(size));
    resume += performance.now() - t0;
    if (r?.manifest.summary.size !== size) throw new Error('resume (postgres) returned the wrong summary');
  }
  return { publish: publish / 1000 / k, resume: resume / 1000 / k };
}

async function measure(
  ledger: Ledger,
  o: PostgresSuiteOptions,
): Promise<Pick<PostgresSuiteResult, 'cases' | 'concurrency'>> {
  const cases = new Map<string, CaseSamples>();
  const push = (name: string, op: 'write' | 'read', size: number, seconds: number) => {
    const key = `${name}@${size}`;
    const entry = cases.get(key) ?? { case: name, group: 'ledger' as const, op, size, samples: [] };
    entry.samples.push(seconds);
    cases.set(key, entry);
  };
  for (let round = 0; round <= o.rounds; round++) {
    const warmup = round === 0;
    for (const size of o.sizes) {
      collectGarbage();
      const r = await publishResume(ledger, size, warmup ? Math.min(2, o.batch(size)) : o.batch(size), o.text);
      if (warmup) continue;
      push('publish (postgres)', 'write', size, r.publish);
      push('resume (postgres)', 'read', size, r.resume);
    }
    o.log(warmup ? '  warm-up round done' : `  round ${round}/${o.rounds} done (${o.sizes.map(sizeLabel).join(', ')})`);
  }
  const c = o.concurrency;
  const concurrency: ConcurrencyResult[] = c.sessions.map((sessions) => ({
    sessions,
    bytes: c.bytes,
    samples: [],
    mainThreadMicros: [],
    mainThreadCpuMicros: [],
    cpuMicros: [],
  }));
  const publish = (session: string) =>
    ledger.publish({ principal: 'bench', session: `pg-${session}`, run: 'bench' }, makeSummary(c.bytes, nextMarker()));
  await publishesPerSecond(publish, Math.max(...c.sessions), Math.min(300, c.durationMs)); // warm-up
  for (let round = 0; round < c.rounds; round++) {
    for (const r of round % 2 === 0 ? concurrency : [...concurrency].reverse()) {
      collectGarbage();
      const m = await measurePublishes(publish, r.sessions, c.durationMs);
      r.samples.push(m.perSecond);
      r.mainThreadMicros.push(m.mainThreadMicros);
      if (m.mainThreadCpuMicros !== undefined) r.mainThreadCpuMicros.push(m.mainThreadCpuMicros);
      r.cpuMicros.push(m.cpuMicros); // this process only: the server's CPU is not counted
    }
    o.log(
      `  round ${round + 1}/${c.rounds}: ${concurrency.map((r) => `${r.sessions} session(s) ${Math.round(r.samples.at(-1)!)}/s`).join(', ')}`,
    );
  }
  return { cases: [...cases.values()], concurrency };
}

/**
 * Runs the PostgreSQL rows; without PostgreSQL binaries returns `skipped` (and logs one line saying why).
 * @throws Error when the cluster cannot be started or a measurement fails (the cluster is removed first)
 */
export async function runPostgresSuite(o: PostgresSuiteOptions): Promise<PostgresSuiteResult> {
  const found = findPostgresBin();
  if ('reason' in found) {
    const skipped = `${found.reason}; install PostgreSQL (e.g. apt-get install postgresql) to measure them`;
    o.log(`  PostgreSQL rows skipped: ${skipped}`);
    return { skipped, cases: [], concurrency: [] };
  }
  const t0 = performance.now();
  const cluster = await PgCluster.start(found.bin);
  // Ctrl-C would skip the finally below; exiting instead runs the cluster's exit hook, which stops it.
  const interrupted = () => process.exit(130);
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  let ledger: Ledger | undefined;
  try {
    const connectionString = await cluster.createDatabase('handoff_ledger_bench');
    const version = await serverVersion(connectionString);
    o.log(`  PostgreSQL ${version} (${found.bin}) ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    ledger = await openLedger({
      root: join(o.workDir, 'ledger-postgres'),
      host: 'bench',
      hash: 'auto',
      maxSummaryBytes: MAX_SUMMARY,
      onNotice: o.log,
      postgres: {
        connectionString,
        schema: 'handoff_ledger_bench',
        maxConnections: o.maxConnections,
        maxBlobBytes: MAX_SUMMARY,
      },
    });
    return { serverVersion: version, ...(await measure(ledger, o)) };
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    try {
      await ledger?.close();
    } finally {
      await cluster.stop();
    }
  }
}
