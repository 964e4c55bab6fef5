/**
 * The throughput targets, as ratios of medians from this one run. A target the run did not measure
 * (quick mode has no 16/64 MiB sizes) is reported as not measured, never as met.
 */
import { MiB, sizeLabel } from '../lib/stats.js';
import type { BenchResults, SizeRow, Target } from './model.js';

type Input = Omit<BenchResults, 'targets'>;

function median(rows: SizeRow[], name: string, size: number): number | undefined {
  return rows.find((r) => r.case === name && r.size === size)?.seconds.median;
}

function check(t: Omit<Target, 'met' | 'measured'>, measured: number | undefined): Target {
  if (measured === undefined || !Number.isFinite(measured)) return { ...t };
  return { ...t, measured, met: t.direction === '>=' ? measured >= t.target : measured <= t.target };
}

/** Ratio of medians: how many times faster `fast` is than `slow` (their seconds per operation). */
function speedup(rows: SizeRow[], fast: string, base: string, size: number): number | undefined {
  const a = median(rows, fast, size);
  const b = median(rows, base, size);
  return a === undefined || b === undefined ? undefined : b / a;
}

/** The same ratio within each round (the cases of one round ran minutes apart at most): its range. */
function perRound(rows: SizeRow[], fast: string, base: string, size: number): string {
  const a = rows.find((r) => r.case === fast && r.size === size)?.samplesSeconds;
  const b = rows.find((r) => r.case === base && r.size === size)?.samplesSeconds;
  if (!a || !b || a.length !== b.length || a.length === 0) return '';
  const ratios = a.map((x, i) => b[i]! / x).sort((p, q) => p - q);
  return `; per round ${ratios[0]!.toFixed(2)}–${ratios[ratios.length - 1]!.toFixed(2)}`;
}

/**
 * The limit of a large durable write: the faster (lower median time) of the plain raw durable write and the one as
 * publish writes (flush-behind), at this size. Where only one was measured it is that one, and the note says the
 * other was not (a limit held to the plain write alone may understate the disk: benchmarks/README.md).
 */
function rawLimit(rows: SizeRow[], plain: string, behind: string, size: number): { name: string; note: string } {
  const a = median(rows, plain, size);
  const b = median(rows, behind, size);
  if (b === undefined)
    return {
      name: plain,
      note: a === undefined ? '' : '; the raw write as publish writes (flush-behind) was not measured',
    };
  if (a === undefined)
    return {
      name: behind,
      note: '; against the raw write as publish writes (flush-behind); the plain one was not measured',
    };
  const rate = (sec: number) => Math.round(size / MiB / sec);
  const name = b < a ? behind : plain;
  return {
    name,
    note: `; the limit is the faster of the plain raw write (${rate(a)} MiB/s) and the one with flush-behind (${rate(b)} MiB/s): ${name === plain ? 'the plain one' : 'flush-behind'}`,
  };
}

/** Resume against the least it must do (read, hash, and make the text a JS string), when measured. */
function floorNote(rows: SizeRow[], resume: string, size: number): string {
  const ratio = speedup(rows, resume, 'raw read + hash + text', size);
  return ratio === undefined ? '' : `; against raw read + hash + text (the floor of any resume): ${ratio.toFixed(2)} ×`;
}

/**
 * What 1.5 × cacache.put can reach on this disk: the least a publish of that size writes before it is acknowledged,
 * timed in the same rounds. Up to the inline threshold that is one synced LevelDB batch with the bytes and the pin's
 * slot write; above it, the blob's own file (a raw durable write) comes first.
 */
function cacacheFloorNote(rows: SizeRow[], size: number): string {
  const inline = speedup(rows, 'synced batch + pin', 'cacache.put', size);
  if (inline !== undefined)
    return `; floor: one synced LevelDB batch of the same bytes + the pin's slot write = ${inline.toFixed(2)} × cacache.put${inline < 1.5 ? ' (below 1.5 ×: out of reach of a publish acknowledged after its pin on this disk)' : " (the goal is within the floor: the rest is the publish's own CPU and round trips)"}`;
  const raw = rawLimit(rows, 'raw durable write', 'raw durable write (flush-behind)', size).name;
  const file = speedup(rows, raw, 'cacache.put', size);
  if (file !== undefined)
    return `; floor: the ${raw === 'raw durable write' ? 'raw durable write' : 'raw durable write as publish writes (flush-behind)'} of the same bytes alone (what a file blob costs before its batch and pin; the faster raw write) = ${file.toFixed(2)} × cacache.put${file < 1.5 ? ' (below 1.5 ×: out of reach of any durable publish of a file blob on this disk)' : ''}`;
  return '';
}

/**
 * What the 2× goal can reach on this disk: a bare synced LevelDB batch of the same bytes (one flush) against the
 * raw rate. Below 2×, no publish that makes its summary durable in one flush can meet the goal here.
 */
function reachNote(r: Input, raw: number | undefined): string {
  const f = r.smallWriteFloors;
  if (!f || !raw) return '';
  const one = f.syncedBatch.median / raw;
  const two = f.syncedBatchAndSlot.median / raw;
  let note = `; floors: a bare synced LevelDB batch ${Math.round(f.syncedBatch.median)}/s = ${one.toFixed(2)} × raw${one < 2 ? ' (below 2 ×: the goal is out of reach of any one-flush publish on this disk)' : ''}, with the pin's slot (O_DSYNC) ${Math.round(f.syncedBatchAndSlot.median)}/s = ${two.toFixed(2)} × raw`;
  if (f.signedBatchAndSlot) {
    const signed = f.signedBatchAndSlot.median / raw;
    note += `, with the two Ed25519 signatures of a publish ${Math.round(f.signedBatchAndSlot.median)}/s = ${signed.toFixed(2)} × raw${signed < 2 ? ' (below 2 ×: out of reach of a signed publish acknowledged after its pin, whatever else it costs)' : ''}`;
  }
  return note;
}

/**
 * Per core, one manifest's whole verification against the bare signature check measured right after it, per round:
 * the most any pool of verifying threads reaches before its own costs.
 */
function perCoreNote(r: Input): string {
  const ratio = r.chain.perCoreRatio;
  if (!ratio || !(ratio.median > 0)) return '';
  const range = ratio.n > 1 ? `, per round ${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)}` : '';
  let note = `; per core, verifyManifestEnvelope ran at ${ratio.median.toFixed(2)} × the bare verify measured right after it (median of the rounds${range}): no pool of verifying threads gets past that`;
  const floor = r.chain.parallelFloorRatio;
  if (floor && floor.median > 0) {
    const floorRange = floor.n > 1 ? `, per round ${floor.min.toFixed(2)}–${floor.max.toFixed(2)}` : '';
    note += `; the floor of ${r.chain.threads} threads doing only what any verifier must per line (no messages, no chain rules) ran at ${floor.median.toFixed(2)} × the ceiling${floorRange}${floor.max < 0.8 ? ' (below 0.8 × in every round: out of reach of any verifier on this machine)' : ''}`;
  }
  return note;
}

/**
 * What one main thread allows: its own on-CPU time per publish at 32 sessions (Linux; the kernel's count for the
 * thread). Above 200 µs, 5,000/s is out of reach of this CPU path however the commits are grouped. Beside it the busy
 * time (event-loop utilization), which on a loaded machine also counts the time the thread waited for a core; where
 * the on-CPU time is not measured, the bound is taken from the busy time.
 */
function cpuNote(r: Input): string {
  const c = r.concurrency.find((x) => x.sessions === 32);
  const busy = c?.mainThreadMicros?.median;
  const onCpu = c?.mainThreadCpuMicros?.median;
  const us = onCpu ?? busy;
  let note = '';
  if (busy !== undefined)
    note += `; the main thread was busy ${Math.round(busy)} µs per publish (event-loop utilization: waits for a core included)`;
  if (onCpu !== undefined)
    note += `${busy === undefined ? '; the main thread was' : ','} on CPU ${Math.round(onCpu)} µs per publish (its own time)`;
  if (us !== undefined) {
    const most = 1e6 / us;
    note += `: at most ${Math.round(most)}/s on one main thread${most < 5000 ? ' (below 5,000/s: the CPU path, not the commits, is the limit)' : ''}`;
  }
  const all = c?.cpuMicros?.median;
  if (all !== undefined) {
    const cores = r.machine.cpus;
    const machine = (cores * 1e6) / all;
    note += `; the process used ${Math.round(all)} µs of CPU per publish (all threads): at most ${Math.round(machine)}/s on ${cores} cores${machine < 5000 ? ' (below 5,000/s)' : ''}`;
  }
  const floor = r.smallWriteFloors?.grouped;
  if (floor)
    note += `; the commits alone (group-committed by ${floor.sessions} sessions: signatures, synced batch, pin; no other CPU) ran ${Math.round(floor.perSecond.median)}/s${floor.perSecond.median < 5000 ? ' (below 5,000/s: out of reach of a signed, pinned publish on this machine)' : ''}`;
  return note;
}

/**
 * A resume returns the parsed summary: it pays JSON.parse of the text on top of the reference. From the
 * step-by-step suite, when it measured this size: the parse alone against the reference.
 */
function parseNote(r: Input, size: number): string {
  const step = (name: string) => r.resumeSteps.find((s) => s.size === size && s.step.startsWith(name))?.micros.median;
  const parse = step('JSON.parse of the summary text alone');
  const ref = step('raw read + hash + text of the same bytes');
  if (ref === undefined) return '';
  // From 128 KiB resume decodes while it reads: no JSON.parse of the whole text; its own steps are timed instead.
  const streamed = step('blob read + re-hash + streamed decode + schema');
  const whole = step('resume, repeated');
  if (streamed !== undefined)
    return `; step by step, what resume does with the bytes (read, re-hash, streamed decode, schema) took ${Math.round(streamed)} µs, ${(streamed / ref).toFixed(2)} × the reference's ${Math.round(ref)} µs${whole === undefined ? '' : `, the whole resume repeated ${Math.round(whole)} µs`}`;
  if (parse === undefined) return '';
  return `; step by step, JSON.parse of the summary text alone took ${Math.round(parse)} µs, ${Math.round((parse / ref) * 100)}% of the reference's ${Math.round(ref)} µs (a resume returns the parsed summary, so it pays that on top of the reference)`;
}

/** The goals of fair measurement and small summaries inline (README, Performance), from this run. */
function roundTwoTargets(r: Input): Target[] {
  const out: Target[] = [];
  const fastest = r.hash.fastest;
  const alonePublish = r.sizes.find((x) => x.case.endsWith(', alone') && x.case.startsWith('publish'))?.case;
  for (const size of [16 * MiB, 64 * MiB]) {
    const limit = rawLimit(r.sizes, 'raw durable write, alone', 'raw durable write (flush-behind), alone', size);
    out.push(
      check(
        {
          id: `publish-alone-vs-raw-alone-${size}`,
          description: `publish ${sizeLabel(size)} alone vs raw durable write alone`,
          target: 0.9,
          direction: '>=',
          unit: '×',
          detail: `each timed by itself after a sync; raw time / publish time, medians${alonePublish ? perRound(r.sizes, alonePublish, limit.name, size) : ''}${limit.note}`,
        },
        alonePublish ? speedup(r.sizes, alonePublish, limit.name, size) : undefined,
      ),
    );
  }
  for (const size of r.config.sizes) {
    const goal = size >= 64 * 1024 ? 0.8 : 0.5;
    out.push(
      check(
        {
          id: `resume-vs-floor-${size}`,
          description: `resume ${sizeLabel(size)} vs raw read + hash + text`,
          target: goal,
          direction: '>=',
          unit: '×',
          detail: `raw read + hash + text time / resume (${fastest}) time, medians${perRound(r.sizes, `resume (${fastest})`, 'raw read + hash + text', size)}${parseNote(r, size)}`,
        },
        speedup(r.sizes, `resume (${fastest})`, 'raw read + hash + text', size),
      ),
    );
  }
  const one = r.concurrency.find((c) => c.sessions === 1)?.publishesPerSecond.median;
  const many = r.concurrency.find((c) => c.sessions === 32)?.publishesPerSecond.median;
  const raw = r.rawSmallWrites?.perSecond.median;
  out.push(
    check(
      {
        id: 'publish-small-vs-raw-durable-write-rate',
        description: `${(r.config.concurrency.bytes / 1024).toFixed(0)} KiB publishes/s, one session, vs raw durable single-file writes/s`,
        target: 2,
        direction: '>=',
        unit: '×',
        detail: `median publishes/s of one session / median raw durable writes/s (file fsync + directory fsync) of the same size, one stream${raw ? ` (${Math.round(raw)}/s)` : ''}${reachNote(r, raw)}`,
      },
      one && raw ? one / raw : undefined,
    ),
  );
  out.push(
    check(
      {
        id: 'concurrency-32-rate',
        description: `${(r.config.concurrency.bytes / 1024).toFixed(0)} KiB publishes/s, 32 sessions`,
        target: 5000,
        direction: '>=',
        unit: 'publishes/s',
        detail: `median publishes/s with 32 concurrent sessions in one ledger (group commit)${cpuNote(r)}`,
      },
      many,
    ),
  );
  const ceiling = r.chain.threads * r.chain.rawVerifyNode.median;
  out.push(
    check(
      {
        id: 'chain-verify-vs-ceiling',
        description: `chain verification vs the bare-verify ceiling (${r.chain.threads} threads)`,
        target: 0.8,
        direction: '>=',
        unit: '×',
        detail: `verifyChain pool manifests/s / (${r.chain.threads} threads × bare node:crypto verify/s per core${ceiling > 0 ? `, ${Math.round(ceiling).toLocaleString('en-US')}/s` : ''})${perCoreNote(r)}`,
      },
      r.chain.manifests >= 100_000 && ceiling > 0 ? r.chain.verifyChainPool.median / ceiling : undefined,
    ),
  );
  return out;
}

export function evaluateTargets(r: Input): Target[] {
  const out: Target[] = roundTwoTargets(r);
  for (const size of [16 * MiB, 64 * MiB]) {
    const limit = rawLimit(r.sizes, 'raw durable write', 'raw durable write (flush-behind)', size);
    out.push(
      check(
        {
          id: `publish-vs-raw-write-${size}`,
          description: `publish ${sizeLabel(size)} vs raw durable write`,
          target: 0.9,
          direction: '>=',
          unit: '×',
          detail: `raw durable write time / publish (${r.hash.fastest}) time, medians${perRound(r.sizes, `publish (${r.hash.fastest})`, limit.name, size)}${limit.note}`,
        },
        speedup(r.sizes, `publish (${r.hash.fastest})`, limit.name, size),
      ),
    );
  }
  for (const size of [16 * MiB, 64 * MiB]) {
    out.push(
      check(
        {
          id: `resume-vs-raw-read-hash-${size}`,
          description: `resume ${sizeLabel(size)} vs raw read + hash (${r.hash.fastest})`,
          target: 0.8,
          direction: '>=',
          unit: '×',
          detail: `raw read + hash time / resume (${r.hash.fastest}) time, medians${perRound(r.sizes, `resume (${r.hash.fastest})`, 'raw read + hash', size)}${floorNote(r.sizes, `resume (${r.hash.fastest})`, size)}`,
        },
        speedup(r.sizes, `resume (${r.hash.fastest})`, 'raw read + hash', size),
      ),
    );
  }
  for (const size of r.config.sizes) {
    out.push(
      check(
        {
          id: `publish-vs-cacache-${size}`,
          description: `publish ${sizeLabel(size)} vs cacache.put`,
          target: 1.5,
          direction: '>=',
          unit: '×',
          detail: `cacache.put time / publish (${r.hash.fastest}) time, medians (cacache never fsyncs)${perRound(r.sizes, `publish (${r.hash.fastest})`, 'cacache.put', size)}${cacacheFloorNote(r.sizes, size)}`,
        },
        speedup(r.sizes, `publish (${r.hash.fastest})`, 'cacache.put', size),
      ),
    );
  }
  const one = r.concurrency.find((c) => c.sessions === 1)?.publishesPerSecond.median;
  const many = r.concurrency.find((c) => c.sessions === 32)?.publishesPerSecond.median;
  out.push(
    check(
      {
        id: 'concurrency-32-vs-1',
        description: '4 KiB publishes/s, 32 sessions vs 1',
        target: 3,
        direction: '>=',
        unit: '×',
        detail: 'median publishes/s with 32 concurrent sessions / with one',
      },
      one && many ? many / one : undefined,
    ),
  );
  const full = r.chain.manifests >= 100_000;
  out.push(
    check(
      {
        id: 'chain-verify-rate',
        description: `chain verification, ${r.chain.threads} threads`,
        target: 15_000,
        direction: '>=',
        unit: 'manifests/s',
        detail:
          `verifyChain over a ${r.chain.manifests.toLocaleString('en-US')}-manifest bundle with a ${r.chain.threads}-thread pool, median; ceiling on this machine: ${r.chain.threads} × ${Math.round(r.chain.rawVerifyNode.median).toLocaleString('en-US')} bare Ed25519 verifications/s` +
          (full ? '' : ' (quick mode: a small bundle, not the 100,000 of the target)'),
      },
      full ? r.chain.verifyChainPool.median : undefined,
    ),
  );
  const rss = r.rss.find((x) => x.bytes === 64 * MiB);
  out.push(
    check(
      {
        id: 'rss-publish-64MiB',
        description: 'peak RSS publishing 64 MiB',
        target: 3 * 64 + 64,
        direction: '<=',
        unit: 'MiB',
        detail:
          'absolute peak RSS of a fresh process during the publish (runtime and the summary itself included) ≤ 3 × size + 64 MiB',
      },
      rss ? rss.publishPeakKiB / 1024 : undefined,
    ),
  );
  return out;
}
