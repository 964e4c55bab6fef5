/**
 * Small publishes per second: one session publishing back to back, against 32 sessions publishing
 * concurrently (each its own chain, all in one ledger: what group commit and parallel blob fsyncs are for).
 * Rounds alternate 1 and 32 so both see the same machine.
 */
import { join } from 'node:path';
import { openLedger } from '../../src/ledger/open.js';
import { makeSummary, nextMarker } from '../lib/data.js';
import { collectGarbage } from '../lib/stats.js';

export interface ConcurrencyOptions {
  sessions: number[];
  bytes: number;
  rounds: number;
  /** How long each measurement publishes for. */
  durationMs: number;
  workDir: string;
  log: (line: string) => void;
}

export interface ConcurrencyResult {
  sessions: number;
  bytes: number;
  /** Publishes per second, one per round. */
  samples: number[];
}

/** Publishes for `durationMs` from `sessions` concurrent loops; returns publishes per second. */
export async function publishesPerSecond(
  publish: (session: string) => Promise<unknown>,
  sessions: number,
  durationMs: number,
): Promise<number> {
  let done = 0;
  const t0 = performance.now();
  const deadline = t0 + durationMs;
  await Promise.all(
    Array.from({ length: sessions }, async (_, i) => {
      while (performance.now() < deadline) {
        await publish(`c${sessions}-${i}`);
        done++;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}

export async function runConcurrencySuite(o: ConcurrencyOptions): Promise<ConcurrencyResult[]> {
  const ledger = await openLedger({
    root: join(o.workDir, 'ledger-concurrency'),
    host: 'bench',
    hash: 'auto',
    onNotice: o.log,
  });
  const results = o.sessions.map((sessions) => ({ sessions, bytes: o.bytes, samples: [] as number[] }));
  const publish = (session: string) =>
    ledger.publish({ principal: 'bench', session, run: 'bench' }, makeSummary(o.bytes, nextMarker()));
  try {
    await publishesPerSecond(publish, Math.max(...o.sessions), Math.min(300, o.durationMs)); // warm-up
    for (let round = 0; round < o.rounds; round++) {
      for (const r of round % 2 === 0 ? results : [...results].reverse()) {
        collectGarbage();
        r.samples.push(await publishesPerSecond(publish, r.sessions, o.durationMs));
      }
      o.log(
        `  round ${round + 1}/${o.rounds}: ${results.map((r) => `${r.sessions} session(s) ${Math.round(r.samples.at(-1)!)}/s`).join(', ')}`,
      );
    }
  } finally {
    await ledger.close();
  }
  return results;
}
