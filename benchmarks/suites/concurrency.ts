/**
 * Small publishes per second: one session publishing back to back, against 32 sessions publishing
 * concurrently (each its own chain, all in one ledger: what group commit and parallel blob fsyncs are for).
 * Rounds alternate 1 and 32 so both see the same machine. Beside them, the limit a file per summary
 * would hit: raw durable writes of the same size, one after another (file fsync + directory fsync each);
 * and the floors of a design that commits a small summary in one synced batch: a bare `level` batch of the
 * same bytes with `{ sync: true }` (one flush: the most any one-flush publish reaches on this disk), and that
 * batch followed by an in-place overwrite of a 4 KiB slot on a file opened with O_DSYNC (two flushes: what the ledger's batch
 * plus its checkpoint pin cost with nothing else in the way), and those two flushes with the two Ed25519 signatures a
 * publish makes (the manifest's before the batch, the checkpoint's overlapped with it); and that signed, pinned
 * work group-committed by as many sessions as the ledger's largest case (what the commits allow with no other CPU).
 * Every measurement starts after a `sync` (lib/quiet.ts).
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openLedger } from '../../src/ledger/open.js';
import { validateSummary } from '../../src/summary/summary.js';
import { makeSummary, nextMarker } from '../lib/data.js';
import { openPinFloor } from '../lib/floor.js';
import { syncPageCache } from '../lib/quiet.js';
import { collectGarbage } from '../lib/stats.js';
import { threadCpuNanos } from '../lib/thread-cpu.js';
import { rawDurableWrite } from './raw.js';

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
  /**
   * The main thread's busy time per publish (event-loop utilization's active time / publishes), µs, one per round.
   * Wall-clock inside callbacks: on a machine whose cores are busy with other work it also counts the time the thread
   * sat preempted, waiting for a core (`mainThreadCpuMicros` does not).
   */
  mainThreadMicros: number[];
  /**
   * The main thread's own on-CPU time per publish (lib/thread-cpu.ts: the kernel's sum for the thread), µs, one per
   * round; empty where the platform does not tell it (not Linux). With one main thread, 1e6 / this is the most
   * publishes per second its CPU path allows, however well grouped.
   */
  mainThreadCpuMicros: number[];
  /**
   * The process's CPU time per publish (user + system, every thread: main, thread pool, LevelDB's, GC), µs, one per
   * round: with `cpus` cores, cpus × 1e6 / this is the most publishes per second the machine allows this path.
   */
  cpuMicros: number[];
}

/** Publishes for `durationMs` from `sessions` concurrent loops; returns publishes per second. */
export async function publishesPerSecond(
  publish: (session: string) => Promise<unknown>,
  sessions: number,
  durationMs: number,
): Promise<number> {
  return (await measurePublishes(publish, sessions, durationMs)).perSecond;
}

/**
 * As `publishesPerSecond`, with the main thread's busy time per operation (event-loop utilization, µs), its own on-CPU
 * time per operation (µs; absent where the platform does not tell it) and the process's CPU time per operation (µs).
 */
export async function measurePublishes(
  publish: (session: string) => Promise<unknown>,
  sessions: number,
  durationMs: number,
): Promise<{ perSecond: number; mainThreadMicros: number; mainThreadCpuMicros?: number; cpuMicros: number }> {
  let done = 0;
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const threadCpu = threadCpuNanos(); // this is the main thread: every publish's callbacks run on it
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
  const perSecond = done / ((performance.now() - t0) / 1000);
  const threadCpuEnd = threadCpuNanos();
  const used = process.cpuUsage(cpu);
  return {
    perSecond,
    mainThreadMicros: (performance.eventLoopUtilization(elu).active * 1000) / done,
    ...(threadCpu !== undefined && threadCpuEnd !== undefined
      ? { mainThreadCpuMicros: (threadCpuEnd - threadCpu) / 1000 / done }
      : {}),
    cpuMicros: (used.user + used.system) / done,
  };
}

export interface ConcurrencySuiteResult {
  ledger: ConcurrencyResult[];
  /** Raw durable single-file writes of `bytes` per second, one stream, one per round. */
  rawWrites: number[];
  /** Bare `level` batches of `bytes` with `{ sync: true }` per second, one stream, one per round. */
  syncedBatches: number[];
  /** The same batch, then a 4 KiB slot overwritten in place with O_DSYNC (the pin's flush), per second, one per round. */
  syncedBatchesAndSlot: number[];
  /**
   * Batch and slot with the two Ed25519 signatures every publish makes: one over a manifest-sized message before the
   * batch (the manifest's), one while the batch is being synced (the checkpoint's, as early as it could be), per
   * second, one per round: the floor of a signed, pinned publish with no other CPU.
   */
  signedBatchesAndSlot: number[];
  /**
   * The same work group-committed with as many sessions as the most the ledger was measured with: a signature per
   * publish, one synced batch, checkpoint signature and pin per group; per second, one per round. What the commits
   * allow with no other CPU.
   */
  groupedFloor: number[];
  groupedSessions: number;
}

/** The floor store (lib/floor.ts: a bare LevelDB, a two-slot pin file): one put of `bytes` per synced batch. */
async function openFloors(dir: string, bytes: Uint8Array) {
  const { privateKey } = generateKeyPairSync('ed25519');
  const manifestSized = new Uint8Array(430).fill(0x6d); // a manifest's signed PAE message is ~430 bytes
  const noteSized = new Uint8Array(180).fill(0x6e); // a checkpoint note body with its extension line
  const floor = await openPinFloor(dir, 'bare');
  const { db } = floor;
  let n = 0;
  const batch = () =>
    db.batch([{ type: 'put', key: `b${String(n++).padStart(12, '0')}`, value: bytes }], { sync: true });
  // Group commit with no other CPU: each publish signs its manifest-sized message and queues its records (the
  // summary, a manifest-sized entry); one committer writes all that are queued in one synced batch, signs the
  // checkpoint while it syncs, pins, and answers the whole group.
  const entrySized = new Uint8Array(1200).fill(0x65);
  let queued: Array<{ n: number; resolve: () => void; reject: (e: unknown) => void }> = [];
  let committing = false;
  const commitGroups = async () => {
    committing = true;
    while (queued.length > 0) {
      const group = queued;
      queued = [];
      try {
        const b = db.batch();
        for (const p of group) b.put(`g${p.n}`, bytes).put(`e${p.n}`, entrySized);
        const written = b.write({ sync: true });
        sign(null, noteSized, privateKey);
        await written;
        await floor.pin();
        for (const p of group) p.resolve();
      } catch (err) {
        for (const p of group) p.reject(err);
      }
    }
    committing = false;
  };
  const grouped = () => {
    sign(null, manifestSized, privateKey);
    return new Promise<void>((resolve, reject) => {
      queued.push({ n: n++, resolve, reject });
      if (!committing) void commitGroups();
    });
  };
  return {
    batch,
    grouped,
    async batchAndSlot() {
      await batch();
      await floor.pin();
    },
    async signedBatchAndSlot() {
      sign(null, manifestSized, privateKey);
      const written = batch();
      sign(null, noteSized, privateKey); // on the main thread while the thread pool syncs the batch
      await written;
      await floor.pin();
    },
    close: () => floor.close(),
  };
}

export async function runConcurrencySuite(o: ConcurrencyOptions): Promise<ConcurrencySuiteResult> {
  const ledger = await openLedger({
    root: join(o.workDir, 'ledger-concurrency'),
    host: 'bench',
    hash: 'auto',
    onNotice: o.log,
  });
  const results: ConcurrencyResult[] = o.sessions.map((sessions) => ({
    sessions,
    bytes: o.bytes,
    samples: [],
    mainThreadMicros: [],
    mainThreadCpuMicros: [],
    cpuMicros: [],
  }));
  const publish = (session: string) =>
    ledger.publish({ principal: 'bench', session, run: 'bench' }, makeSummary(o.bytes, nextMarker()));
  const rawDir = join(o.workDir, 'raw-small');
  await mkdir(rawDir, { recursive: true, mode: 0o700 });
  const rawBytes = validateSummary(makeSummary(o.bytes, nextMarker())).bytes;
  let rawN = 0;
  const rawWrite = () => rawDurableWrite(rawDir, `w${rawN++}`, rawBytes);
  const rawWrites: number[] = [];
  const floors = await openFloors(rawDir, rawBytes);
  const syncedBatches: number[] = [];
  const syncedBatchesAndSlot: number[] = [];
  const signedBatchesAndSlot: number[] = [];
  const groupedFloor: number[] = [];
  const groupedSessions = Math.max(...o.sessions);
  try {
    await publishesPerSecond(publish, Math.max(...o.sessions), Math.min(300, o.durationMs)); // warm-up
    for (let round = 0; round < o.rounds; round++) {
      for (const r of round % 2 === 0 ? results : [...results].reverse()) {
        collectGarbage();
        await syncPageCache();
        const m = await measurePublishes(publish, r.sessions, o.durationMs);
        r.samples.push(m.perSecond);
        r.mainThreadMicros.push(m.mainThreadMicros);
        if (m.mainThreadCpuMicros !== undefined) r.mainThreadCpuMicros.push(m.mainThreadCpuMicros);
        r.cpuMicros.push(m.cpuMicros);
      }
      await syncPageCache();
      rawWrites.push(await publishesPerSecond(rawWrite, 1, o.durationMs));
      await syncPageCache();
      syncedBatches.push(await publishesPerSecond(floors.batch, 1, o.durationMs));
      await syncPageCache();
      syncedBatchesAndSlot.push(await publishesPerSecond(floors.batchAndSlot, 1, o.durationMs));
      await syncPageCache();
      signedBatchesAndSlot.push(await publishesPerSecond(floors.signedBatchAndSlot, 1, o.durationMs));
      await syncPageCache();
      groupedFloor.push(await publishesPerSecond(floors.grouped, groupedSessions, o.durationMs));
      o.log(
        `  round ${round + 1}/${o.rounds}: ${results.map((r) => `${r.sessions} session(s) ${Math.round(r.samples.at(-1)!)}/s (main thread ${Math.round(r.mainThreadMicros.at(-1)!)} µs busy${r.mainThreadCpuMicros.length > 0 ? `, ${Math.round(r.mainThreadCpuMicros.at(-1)!)} µs on CPU` : ''} each)`).join(', ')}, raw durable writes ${Math.round(rawWrites.at(-1)!)}/s, bare synced batches ${Math.round(syncedBatches.at(-1)!)}/s, + slot (O_DSYNC) ${Math.round(syncedBatchesAndSlot.at(-1)!)}/s, + two signatures ${Math.round(signedBatchesAndSlot.at(-1)!)}/s, the same group-committed by ${groupedSessions} sessions ${Math.round(groupedFloor.at(-1)!)}/s`,
      );
    }
  } finally {
    await ledger.close();
    await floors.close();
  }
  return {
    ledger: results,
    rawWrites,
    syncedBatches,
    syncedBatchesAndSlot,
    signedBatchesAndSlot,
    groupedFloor,
    groupedSessions,
  };
}
