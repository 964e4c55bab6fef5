/** The steps benchmarks/large-steps.ts times, in its table's order (its smoke test expects each one), and its table. */
import { spread } from './lib/stats.js';

export const LARGE_STEP_CASES = [
  'raw durable write',
  'raw durable write (flush-behind)',
  'put, bytes',
  'put, stream',
  'publish',
  'publish, inline (2 KB)',
  'CPU: validate (prepareSummary)',
  'CPU: encode (all pieces)',
  'CPU: native BLAKE3 here',
] as const;

export type LargeStepCase = (typeof LARGE_STEP_CASES)[number];

/** The median (of an even count, the mean of the two middle samples: lib/stats.ts). */
const median = (xs: number[]) => spread(xs).median;

/**
 * The table's rows for one size: each case's median ms [min–max] and, but for the CPU-only ones, the median of the
 * per-round ratios raw write / case; then the floor (put, bytes + publish, inline) and publish against the faster raw
 * write of each round, both per round too. `of` gives a case's ms, one per round, in round order.
 */
export function largeStepsRows(label: string, of: (name: LargeStepCase) => number[]): string[] {
  const lines: string[] = [];
  const raw = of('raw durable write');
  for (const name of LARGE_STEP_CASES) {
    const xs = of(name);
    const ratio = name.startsWith('CPU') ? '' : `${median(xs.map((x, i) => raw[i]! / x)).toFixed(2)}×`;
    const range = `${median(xs).toFixed(1)} [${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}]`;
    lines.push(`| ${label} | ${name} | ${range} | ${ratio} |`);
  }
  // The blob already encoded, as fast as the store writes it, then the append's fixed cost after it.
  const floor = raw.map((r, i) => r / (of('put, bytes')[i]! + of('publish, inline (2 KB)')[i]!));
  lines.push(`| ${label} | floor: put, bytes + publish, inline | | ${median(floor).toFixed(2)}× |`);
  // Goal 3's own ratio: publish against the faster raw write of the round (plain or flush-behind).
  const behind = of('raw durable write (flush-behind)');
  const best = raw.map((r, i) => Math.min(r, behind[i]!));
  const pub = of('publish').map((p, i) => best[i]! / p);
  lines.push(`| ${label} | publish vs the faster raw write of each round | | ${median(pub).toFixed(2)}× |`);
  return lines;
}
