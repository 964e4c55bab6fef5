/**
 * Small statistics for benchmark samples: medians and spread, never means (a 2-core machine shared
 * with other work has long-tailed timings; the median of interleaved runs is what we compare).
 */

export interface Spread {
  /** Number of samples. */
  n: number;
  median: number;
  min: number;
  max: number;
  /** First and third quartiles (linear interpolation). */
  q1: number;
  q3: number;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 1) return sorted[0]!;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/**
 * Median, min, max and quartiles of `samples`.
 * @throws RangeError when `samples` is empty
 */
export function spread(samples: number[]): Spread {
  if (samples.length === 0) throw new RangeError('no samples');
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    median: quantile(s, 0.5),
    min: s[0]!,
    max: s[s.length - 1]!,
    q1: quantile(s, 0.25),
    q3: quantile(s, 0.75),
  };
}

/**
 * The spread of `samples` mapped one by one (e.g. seconds per op → MiB/s). Not the spread's figures mapped: with an
 * even count the median is the mean of the two middle samples, and the rate of a mean time is not the median rate.
 * @throws RangeError when `samples` is empty
 */
export function mapSpread(samples: number[], f: (x: number) => number): Spread {
  return spread(samples.map(f));
}

export const KiB = 1024;
export const MiB = 1024 * 1024;

/** `1 KiB`, `64 KiB`, `16 MiB`. */
export function sizeLabel(bytes: number): string {
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= KiB && bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} B`;
}

/** A figure with 3 significant digits and thousands separators: 1,234 / 56.7 / 0.912. */
export function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const abs = Math.abs(x);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Runs the garbage collector when the process was started with --expose-gc (npm run bench is). */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}
