/**
 * The memory regime of a run, beside the disk's (report/tables.ts prints both): how fast this machine hands a
 * process memory it has not touched before, against rewriting memory already touched. Every figure that makes a
 * large new string or buffer pays the first (a page fault per 4 KiB page); on a virtual machine whose host reclaims
 * the guest's free pages it can be many times slower than the second, and it changes from one moment to the next
 * (benchmarks/README.md, 2026-12-03): in-memory figures of a run are read against it.
 */
import { collectGarbage, spread, type Spread } from './stats.js';

export interface MemoryRegime {
  bytes: number;
  /** Allocating `bytes` not touched before and writing every page once, MiB/s. */
  firstTouchMiBps: Spread;
  /** Writing the same `bytes` again, every page already mapped, MiB/s: what the first touch is compared with. */
  rewriteMiBps: Spread;
}

/**
 * Measures `rounds` times: a fresh `bytes` buffer (larger than glibc's largest mmap threshold, so each one is new
 * memory from the kernel, given back when collected), filled once (first touch), then filled again (rewrite).
 */
export function measureMemoryRegime(rounds = 5, bytes = 64 * 1024 * 1024): MemoryRegime {
  const first: number[] = [];
  const again: number[] = [];
  const mib = bytes / (1024 * 1024);
  for (let i = 0; i < rounds; i++) {
    collectGarbage(); // the last round's buffer is given back first
    let t0 = performance.now();
    const buf = Buffer.allocUnsafeSlow(bytes);
    buf.fill(i + 1);
    first.push(mib / ((performance.now() - t0) / 1000));
    t0 = performance.now();
    buf.fill(i + 2);
    again.push(mib / ((performance.now() - t0) / 1000));
  }
  collectGarbage();
  return { bytes, firstTouchMiBps: spread(first), rewriteMiBps: spread(again) };
}
