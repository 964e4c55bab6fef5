/** The shape of benchmarks/results/latest.json (schema `handoff-ledger-bench/2`). */
import type { MemoryRegime } from '../lib/memory.js';
import type { Spread } from '../lib/stats.js';
import type { CaseGroup } from '../suites/sizes.js';
import type { RssResult } from '../suites/rss.js';
import type { ResumeStep } from '../suites/resume-steps.js';

export const SCHEMA = 'handoff-ledger-bench/2';

export interface SizeRow {
  case: string;
  group: CaseGroup;
  op: 'write' | 'read';
  size: number;
  /** Seconds per operation, one per measured round. */
  samplesSeconds: number[];
  seconds: Spread;
  mibPerSecond: Spread;
  /** Write cases: seconds per operation of the `sync` after the case (untimed): writeback it left behind. */
  writebackSeconds?: Spread;
}

export interface Target {
  id: string;
  description: string;
  /** The target, as a number in `unit` (a ratio, a rate, bytes). */
  target: number;
  /** How the target compares: measured ≥ target, or measured ≤ target. */
  direction: '>=' | '<=';
  unit: string;
  /** Undefined when this run did not measure it (quick mode). */
  measured?: number;
  /** True met, false missed, undefined not measured. */
  met?: boolean;
  detail: string;
}

export interface BenchResults {
  schema: typeof SCHEMA;
  mode: 'full' | 'quick';
  startedAt: string;
  durationSeconds: number;
  machine: {
    node: string;
    v8: string;
    platform: string;
    arch: string;
    cpus: number;
    cpuModel: string;
    memoryGiB: number;
    loadAverage: { start: number[]; end: number[] };
  };
  config: {
    sizes: number[];
    rounds: number;
    batch: Record<string, number>;
    nobleMaxBytes: number;
    text: string;
    concurrency: { sessions: number[]; bytes: number; rounds: number; durationMs: number };
    chain: {
      manifests: number;
      sessions: number;
      rounds: number;
      threads: number;
      nodeSample: number;
      nobleSample: number;
    };
    rssSizes: number[];
    postgres: {
      sizes: number[];
      rounds: number;
      maxConnections: number;
      concurrency: { sessions: number[]; bytes: number; rounds: number; durationMs: number };
    };
    alone: { sizes: number[]; rounds: number };
    resumeSteps: { sizes: number[]; calls: number; rounds: number };
  };
  /** The regime: the disk's raw durable write speed, measured alone in this run (absent when not measured). */
  disk?: {
    bytes: number;
    /** One write, one fsync. */
    durableWriteMiBps: Spread;
    /** With publish's flush-behind: an fsync started every 8 MiB while writing (absent in results from before). */
    flushBehindMiBps?: Spread;
  };
  /**
   * The memory regime, at the start and at the end of the run (lib/memory.ts): how fast fresh memory is first touched,
   * beside rewriting touched memory (absent in results from before it was measured).
   */
  memory?: { start: MemoryRegime; end: MemoryRegime };
  hash: { fastest: string; probeMiBps: Record<string, number> };
  sizes: SizeRow[];
  /** Where a small resume's time goes: each step timed alone, and the whole resume repeated, first after a publish, cold. */
  resumeSteps: ResumeStep[];
  concurrency: Array<{
    sessions: number;
    bytes: number;
    samples: number[];
    publishesPerSecond: Spread;
    /**
     * The main thread's busy time per publish, µs: event-loop utilization's active time, wall-clock inside callbacks,
     * so on a loaded machine it also counts time the thread waited for a core (absent in results from before it was
     * measured).
     */
    mainThreadMicros?: Spread;
    /**
     * The main thread's own on-CPU time per publish, µs (the kernel's count for the thread: Linux's
     * `/proc/thread-self/schedstat`); not what it waited for a core. Absent where the platform does not tell it and in
     * results from before it was measured.
     */
    mainThreadCpuMicros?: Spread;
    /**
     * The process's CPU time per publish (user + system, all its threads), µs (absent in results from before it was
     * measured; a PostgreSQL server's CPU is not counted).
     */
    cpuMicros?: Spread;
  }>;
  /** Raw durable single-file writes of the concurrency suite's size, one stream: what a file per summary allows. */
  rawSmallWrites?: { bytes: number; samples: number[]; perSecond: Spread };
  /**
   * Floors of the same size, one stream: a bare `level` batch with `{ sync: true }` (one flush, what any
   * one-flush publish reaches), and that batch plus a 4 KiB slot overwritten in place with O_DSYNC (the two
   * flushes of a publish: its batch and its checkpoint pin).
   */
  smallWriteFloors?: {
    bytes: number;
    syncedBatch: Spread;
    syncedBatchAndSlot: Spread;
    signedBatchAndSlot?: Spread;
    /** The signed, pinned floor group-committed by `sessions` concurrent publishers (publishes/s). */
    grouped?: { sessions: number; perSecond: Spread };
  };
  chain: {
    manifests: number;
    sessions: number;
    threads: number;
    buildSeconds: number;
    bundleCached: boolean;
    /** Manifests per second. */
    verifyChainPool: Spread;
    /** `threads - 1` worker threads plus the calling thread's share (absent in runs before it was measured). */
    verifyChainMainShare?: Spread;
    verifyChainOneCore: Spread;
    perManifestNode: Spread;
    /** verifyManifestEnvelope on one core / bare verify measured right after it, per round. */
    perCoreRatio?: Spread;
    /**
     * The floor of any pool of `threads` threads (benchmarks/suites/chain-floor.ts), manifests/s, and it against the
     * ceiling measured right after it, per round (absent in runs before it was measured).
     */
    parallelFloor?: Spread;
    parallelFloorRatio?: Spread;
    perManifestNoble: Spread;
    /** Bare node:crypto Ed25519 verifications per second, one core: the ceiling per thread. */
    rawVerifyNode: Spread;
  };
  rss: RssResult[];
  /** The PostgreSQL backend's rows: its sizes are in `sizes` (`publish (postgres)`, `resume (postgres)`). */
  postgres: {
    /** Why they were not measured (no PostgreSQL binaries, or not selected by --only). */
    skipped?: string;
    serverVersion?: string;
    concurrency: BenchResults['concurrency'];
  };
  targets: Target[];
}
