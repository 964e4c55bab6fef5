/** The results as text: a terminal table and a markdown report (benchmarks/results/latest.md). */
import { fmt, sizeLabel } from '../lib/stats.js';
import type { BenchResults, Target } from './model.js';
import type { MemoryRegime } from '../lib/memory.js';

type Cell = string;

function grid(header: Cell[], rows: Cell[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: Cell[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}

/** A markdown table; `left` lists the columns aligned left (default: the first). */
function markdown(header: Cell[], rows: Cell[][], left: number[] = [0]): string[] {
  const sep = header.map((_, i) => (left.includes(i) ? '---' : '---:'));
  return [`| ${header.join(' | ')} |`, `| ${sep.join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

const ORDER = [
  'raw durable write',
  'raw durable write (flush-behind)',
  'synced batch + pin',
  'raw read',
  'raw read + hash',
  'raw read + hash + text',
  'cacache.put',
  'cacache.get',
  'publish (native)',
  'resume (native)',
  'publish (wasm)',
  'resume (wasm)',
  'publish (noble)',
  'resume (noble)',
  'publish (postgres)',
  'resume (postgres)',
  'raw durable write, alone',
  'raw durable write (flush-behind), alone',
  'publish (native), alone',
  'publish (wasm), alone',
  'publish (noble), alone',
];

/** Case names in a fixed order (the limit, the peer, the ledger), whatever order the rounds ran them in. */
export function caseNames(r: BenchResults): string[] {
  const rank = (name: string) => (ORDER.includes(name) ? ORDER.indexOf(name) : ORDER.length);
  return [...new Set(r.sizes.map((s) => s.case))].sort((a, b) => rank(a) - rank(b));
}

/** Rows of case × size: median MiB/s with [min–max]. */
function throughputRows(r: BenchResults, spreadToo: boolean): { header: Cell[]; rows: Cell[][] } {
  const sizes = r.config.sizes;
  const header = ['MiB/s (median' + (spreadToo ? ' [min–max])' : ')'), ...sizes.map(sizeLabel)];
  const rows = caseNames(r).map((name) => [
    name,
    ...sizes.map((size) => {
      const row = r.sizes.find((s) => s.case === name && s.size === size);
      if (!row) return '–';
      const m = row.mibPerSecond;
      return spreadToo ? `${fmt(m.median)} [${fmt(m.min)}–${fmt(m.max)}]` : fmt(m.median);
    }),
  ]);
  return { header, rows };
}

function latencyRows(r: BenchResults): { header: Cell[]; rows: Cell[][] } {
  const sizes = r.config.sizes;
  return {
    header: ['ms per operation (median)', ...sizes.map(sizeLabel)],
    rows: caseNames(r).map((name) => [
      name,
      ...sizes.map((size) => {
        const row = r.sizes.find((s) => s.case === name && s.size === size);
        return row ? fmt(row.seconds.median * 1000) : '–';
      }),
    ]),
  };
}

function targetCell(t: Target): Cell[] {
  const measured = t.measured === undefined ? 'not measured' : `${fmt(t.measured)} ${t.unit}`;
  const verdict = t.met === undefined ? 'n/a' : t.met ? 'met' : 'MISSED';
  return [t.description, `${t.direction} ${fmt(t.target)} ${t.unit}`, measured, verdict];
}

function otherRows(r: BenchResults): Cell[][] {
  const rows: Cell[][] = [];
  const perSecond = (label: string, cs: BenchResults['concurrency']) => {
    for (const c of cs) {
      rows.push([
        `${c.bytes / 1024} KiB publishes/s, ${c.sessions} session${c.sessions > 1 ? 's' : ''}${label}`,
        `${fmt(c.publishesPerSecond.median)} [${fmt(c.publishesPerSecond.min)}–${fmt(c.publishesPerSecond.max)}]${c.mainThreadMicros ? `; main thread ${fmt(c.mainThreadMicros.median)} µs per publish (busy: waits for a core included)` : ''}${c.mainThreadCpuMicros ? `, ${fmt(c.mainThreadCpuMicros.median)} µs on CPU (its own time)` : ''}${c.cpuMicros ? `, process CPU ${fmt(c.cpuMicros.median)} µs` : ''}`,
      ]);
    }
  };
  perSecond('', r.concurrency);
  if (r.rawSmallWrites) {
    const w = r.rawSmallWrites;
    rows.push([
      `${w.bytes / 1024} KiB raw durable single-file writes/s, one stream`,
      `${fmt(w.perSecond.median)} [${fmt(w.perSecond.min)}–${fmt(w.perSecond.max)}]`,
    ]);
  }
  if (r.smallWriteFloors) {
    const f = r.smallWriteFloors;
    const kib = f.bytes / 1024;
    const ratio = r.rawSmallWrites ? ` (${fmt(f.syncedBatch.median / r.rawSmallWrites.perSecond.median)} × raw)` : '';
    rows.push(
      [
        `${kib} KiB bare synced LevelDB batches/s, one stream (one flush: the floor of a one-flush publish)`,
        `${fmt(f.syncedBatch.median)} [${fmt(f.syncedBatch.min)}–${fmt(f.syncedBatch.max)}]${ratio}`,
      ],
      [
        `${kib} KiB bare synced batch + 4 KiB slot overwrite (O_DSYNC)/s, one stream (batch + pin)`,
        `${fmt(f.syncedBatchAndSlot.median)} [${fmt(f.syncedBatchAndSlot.min)}–${fmt(f.syncedBatchAndSlot.max)}]`,
      ],
    );
    if (f.signedBatchAndSlot)
      rows.push([
        `${kib} KiB batch + pin with a publish's two Ed25519 signatures/s, one stream (the floor of a signed, pinned publish)`,
        `${fmt(f.signedBatchAndSlot.median)} [${fmt(f.signedBatchAndSlot.min)}–${fmt(f.signedBatchAndSlot.max)}]`,
      ]);
    if (f.grouped)
      rows.push([
        `${kib} KiB publishes/s of that floor group-committed by ${f.grouped.sessions} sessions (a signature per publish; one synced batch, checkpoint signature and pin per group; no other CPU)`,
        `${fmt(f.grouped.perSecond.median)} [${fmt(f.grouped.perSecond.min)}–${fmt(f.grouped.perSecond.max)}]`,
      ]);
  }
  perSecond(' (postgres)', r.postgres.concurrency);
  const ch = r.chain;
  const spread = (s: { median: number; min: number; max: number }) => `${fmt(s.median)} [${fmt(s.min)}–${fmt(s.max)}]`;
  if (ch.manifests > 0) rows.push(...chainRows(ch, spread));
  for (const x of r.rss) {
    rows.push([
      `peak RSS, ${sizeLabel(x.bytes)}: publish / resume (MiB)`,
      `${fmt(x.publishPeakKiB / 1024)} / ${fmt(x.resumePeakKiB / 1024)} (with the summary built: ${fmt(x.baselineKiB / 1024)})`,
    ]);
  }
  return rows;
}

function chainRows(
  ch: BenchResults['chain'],
  spread: (s: { median: number; min: number; max: number }) => string,
): Cell[][] {
  const rows: Cell[][] = [];
  rows.push([
    `chain verify, verifyChain + ${ch.threads}-thread pool (manifests/s, ${ch.manifests.toLocaleString('en-US')} manifests)`,
    spread(ch.verifyChainPool),
  ]);
  if (ch.verifyChainMainShare && ch.verifyChainMainShare.median > 0)
    rows.push([
      `chain verify, ${ch.threads - 1} worker thread${ch.threads === 2 ? '' : 's'} + the main thread's share (manifests/s)`,
      spread(ch.verifyChainMainShare),
    ]);
  rows.push(['chain verify, verifyChain on one core (manifests/s)', spread(ch.verifyChainOneCore)]);
  rows.push(['verifyManifestEnvelope, node:crypto, one core (manifests/s)', spread(ch.perManifestNode)]);
  rows.push(['verifyManifestEnvelope, noble, one core (manifests/s)', spread(ch.perManifestNoble)]);
  rows.push(['bare Ed25519 verify, node:crypto, one core (per s): the ceiling per thread', spread(ch.rawVerifyNode)]);
  if (ch.perCoreRatio && ch.perCoreRatio.median > 0)
    rows.push([
      'verifyManifestEnvelope / the bare verify right after it, one core, per round (×)',
      `${ch.perCoreRatio.median.toFixed(2)} [${ch.perCoreRatio.min.toFixed(2)}–${ch.perCoreRatio.max.toFixed(2)}]`,
    ]);
  if (ch.parallelFloor && ch.parallelFloor.median > 0)
    rows.push([
      `the floor of ${ch.threads} threads: only what any verifier must per line, no messages, no chain rules (manifests/s)`,
      spread(ch.parallelFloor),
    ]);
  if (ch.parallelFloorRatio && ch.parallelFloorRatio.median > 0)
    rows.push([
      `that floor / (${ch.threads} × the bare verify right after it), per round (×)`,
      `${ch.parallelFloorRatio.median.toFixed(2)} [${ch.parallelFloorRatio.min.toFixed(2)}–${ch.parallelFloorRatio.max.toFixed(2)}]`,
    ]);
  return rows;
}

/** The resume step breakdown: one row per step, one column per size (µs per call, median). */
function resumeStepRows(r: BenchResults): { header: Cell[]; rows: Cell[][] } {
  const sizes = [...new Set(r.resumeSteps.map((s) => s.size))];
  const steps = [...new Set(r.resumeSteps.map((s) => s.step))];
  return {
    header: ['resume, step by step (µs per call, median)', ...sizes.map(sizeLabel)],
    rows: steps.map((step) => [
      step,
      ...sizes.map((size) => {
        const m = r.resumeSteps.find((s) => s.step === step && s.size === size)?.micros;
        return m ? fmt(m.median) : '–';
      }),
    ]),
  };
}

/** Which PostgreSQL the postgres rows ran against, or why there are none ('' when not selected). */
function postgresLine(r: BenchResults): string {
  const p = r.postgres;
  if (p.serverVersion !== undefined)
    return `PostgreSQL rows: server ${p.serverVersion}, throw-away local cluster over a Unix socket (fsync on, default settings), a pool of ${r.config.postgres.maxConnections} connections; measured after the embedded suites (not interleaved with them), ${r.config.postgres.rounds} rounds after a warm-up.`;
  return p.skipped !== undefined && !p.skipped.startsWith('not selected')
    ? `PostgreSQL rows skipped: ${p.skipped}.`
    : '';
}

/** The regime a figure comes from: the disk's own durable write speed in this run. */
function diskLine(r: BenchResults): string {
  const d = r.disk;
  if (!d) return 'Disk: raw durable write not measured in this run (suite "alone" not selected).';
  const m = d.durableWriteMiBps;
  const f = d.flushBehindMiBps;
  const behind = f
    ? `; as publish writes (flush-behind: reused 1 MiB blocks, an fsync started every 8 MiB) ${fmt(f.median)} MiB/s [${fmt(f.min)}–${fmt(f.max)}]`
    : '';
  return `Disk: raw durable write of ${sizeLabel(d.bytes)} alone (after sync) ${fmt(m.median)} MiB/s [${fmt(m.min)}–${fmt(m.max)}]${behind}.`;
}

/** The memory regime: first touch of fresh memory against rewriting touched memory, at the run's start and end. */
function memoryLine(r: BenchResults): string | undefined {
  const m = r.memory;
  if (!m) return undefined;
  const at = (x: MemoryRegime) =>
    `${fmt(x.firstTouchMiBps.median)} MiB/s [${fmt(x.firstTouchMiBps.min)}–${fmt(x.firstTouchMiBps.max)}] first touch, ${fmt(x.rewriteMiBps.median)} rewriting`;
  return `Memory (${sizeLabel(m.start.bytes)} not touched before, then again): at start ${at(m.start)}; at end ${at(m.end)} — a figure that makes large new strings or buffers pays the first touch.`;
}

/** Writeback each write case left unsynced, which the untimed sync after it flushed. */
function writebackRows(r: BenchResults): Cell[][] {
  const names = caseNames(r).filter((n) => r.sizes.some((s) => s.case === n && s.writebackSeconds));
  return names.map((name) => [
    name,
    ...r.config.sizes.map((size) => {
      const w = r.sizes.find((s) => s.case === name && s.size === size)?.writebackSeconds;
      return w ? fmt(w.median * 1000) : '–';
    }),
  ]);
}

/**
 * How the size suite ran, or that it did not (`--only` without `sizes`): then no hash backend was probed, and none is
 * named as the fastest.
 */
function sizeSuiteLine(r: BenchResults): string {
  if (Object.keys(r.hash.probeMiBps).length === 0)
    return 'Size suite not run (not selected by --only): no interleaved rows, no hash backend probed.';
  return (
    `Sizes ${r.config.sizes.map(sizeLabel).join(', ')}, interleaved; ${r.config.rounds} measured rounds after one warm-up round; small sizes timed in batches ` +
    `(${Object.entries(r.config.batch)
      .map(([s, k]) => `${sizeLabel(Number(s))}: ${k}`)
      .join(', ')} operations per sample). ` +
    `Summary text: ${r.config.text} prose with JSON escapes. The pure-JS hash (noble) is measured up to ${sizeLabel(r.config.nobleMaxBytes)} only. ` +
    `Fastest hash backend for "raw read + hash": ${r.hash.fastest}.`
  );
}

function machineLine(r: BenchResults): string {
  const m = r.machine;
  return `${m.cpus} × ${m.cpuModel}, ${fmt(m.memoryGiB)} GiB, Node ${m.node} (V8 ${m.v8}), ${m.platform}/${m.arch}; load average ${m.loadAverage.start.map((x) => x.toFixed(1)).join(' ')} at start, ${m.loadAverage.end.map((x) => x.toFixed(1)).join(' ')} at end`;
}

export function terminalReport(r: BenchResults): string {
  const t = throughputRows(r, true);
  const targets = r.targets.map(targetCell);
  return [
    '',
    `handoff-ledger benchmark (${r.mode}), ${r.startedAt}, ${fmt(r.durationSeconds)} s`,
    machineLine(r),
    diskLine(r),
    ...(memoryLine(r) ? [memoryLine(r)!] : []),
    ...(postgresLine(r) ? [postgresLine(r)] : []),
    '',
    ...grid(t.header, t.rows),
    '',
    ...(r.resumeSteps.length > 0 ? [...grid(resumeStepRows(r).header, resumeStepRows(r).rows), ''] : []),
    ...grid(['other', 'median [min–max]'], otherRows(r)),
    '',
    ...grid(['target', 'goal', 'measured', ''], targets),
    '',
  ].join('\n');
}

export function markdownReport(r: BenchResults): string {
  const t = throughputRows(r, true);
  const l = latencyRows(r);
  return [
    `# handoff-ledger benchmark (${r.mode})`,
    '',
    `${r.startedAt}; ${fmt(r.durationSeconds)} s. ${machineLine(r)}.`,
    '',
    diskLine(r),
    '',
    ...(memoryLine(r) ? [memoryLine(r)!, ''] : []),
    sizeSuiteLine(r),
    ...(postgresLine(r) ? ['', postgresLine(r)] : []),
    '',
    '![throughput against size](throughput.svg)',
    '',
    ...markdown(t.header, t.rows),
    '',
    ...markdown(l.header, l.rows),
    '',
    "Every write case starts after `sync` (untimed), so no other case's writeback is on its clock; the `sync` right " +
      'after it (untimed too) flushes what the case left unsynced, in ms per operation:',
    '',
    ...markdown(['writeback left (ms/op, median)', ...r.config.sizes.map(sizeLabel)], writebackRows(r)),
    '',
    ...(r.resumeSteps.length > 0 ? [...markdown(resumeStepRows(r).header, resumeStepRows(r).rows), ''] : []),
    ...markdown(['other', 'median [min–max]'], otherRows(r)),
    '',
    '## Targets, from this run',
    '',
    ...markdown(
      ['target', 'goal', 'measured', 'verdict', 'how'],
      r.targets.map((t) => [...targetCell(t), t.detail]),
      [0, 4],
    ),
    '',
  ].join('\n');
}
