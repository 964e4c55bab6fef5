/**
 * Throughput by summary size, one run, interleaved: every round visits every size, and in every
 * size every case (raw write, plain and with flush-behind, the floor of an inline publish, cacache.put,
 * publish per backend; then raw read, raw read + hash, cacache.get, resume per backend), in an order
 * rotated from round to round so that drift of a shared machine is spread over all cases alike. The first round is a warm-up and is discarded.
 * Every write case starts after a `sync` and is followed by one (both untimed; see lib/quiet.ts).
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as cacache from 'cacache';
import { formatDigest, type HashBackend } from '../../store/hash/digest.js';
import { loadHashBackend, type HashBackendName } from '../../store/hash/backends.node.js';
import { DEFAULT_INLINE_SUMMARY_BYTES, type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { validateSummary } from '../../src/summary/summary.js';
import { makeSummary, nextMarker, type TextKind } from '../lib/data.js';
import { collectGarbage, MiB, sizeLabel } from '../lib/stats.js';
import { syncPageCache } from '../lib/quiet.js';
import { openPinFloor, type PinFloor } from '../lib/floor.js';
import { rawDurableWrite, rawDurableWriteFlushBehind, rawRead, rawReadHash, rawReadHashText } from './raw.js';

/** The raw durable write with publish's flush-behind (benchmarks/suites/raw.ts). */
export const RAW_FLUSH_BEHIND = 'raw durable write (flush-behind)';

export type CaseGroup = 'limit' | 'peer' | 'ledger';

export interface CaseSamples {
  case: string;
  group: CaseGroup;
  op: 'write' | 'read';
  size: number;
  /** Seconds per operation, one per measured round. */
  samples: number[];
  /**
   * Write cases: seconds per operation that the `sync` right after the case took, outside its timing: the
   * writeback the case left for others (near zero for a durable write; cacache's unsynced bytes).
   */
  writebackSeconds?: number[];
}

export interface SizeSuiteOptions {
  sizes: number[];
  /** Measured rounds (a warm-up round comes first). */
  rounds: number;
  /** Operations timed together as one sample, by size (small operations are timed in batches). */
  batch: (size: number) => number;
  /** The pure-JS backend is measured up to this size only, to keep the run short. */
  nobleMaxBytes: number;
  text: TextKind;
  workDir: string;
  log: (line: string) => void;
}

export interface SizeSuiteResult {
  cases: CaseSamples[];
  fastestHash: string;
  hashProbeMiBps: Record<string, number>;
}

interface Item {
  marker: string;
  bytes: Uint8Array;
}

interface Ctx {
  /** A bare LevelDB and a two-slot file opened with O_DSYNC: the floor of an inline publish (see CASES). */
  floor: PinFloor;
  size: number;
  items: Item[];
  rawDir: string;
  cache: string;
  ledgers: Map<string, Ledger>;
  fastest: HashBackend;
  receipts: Map<string, string>;
  text: TextKind;
}

interface CaseDef {
  name: string;
  group: CaseGroup;
  op: 'write' | 'read';
  backend?: string;
  /** Measured at sizes up to this many bytes only. */
  maxSize?: number;
  /** Measured at sizes from this many bytes only. */
  minSize?: number;
  run(ctx: Ctx): Promise<void>;
}

const MAX_SUMMARY = 1024 * MiB;
const scopeOf = (size: number) => ({ principal: 'bench', session: `size-${size}`, run: 'bench' });

function ledgerCases(backend: string): CaseDef[] {
  return [
    {
      name: `publish (${backend})`,
      group: 'ledger',
      op: 'write',
      backend,
      async run(ctx) {
        const ledger = ctx.ledgers.get(backend)!;
        for (const item of ctx.items) {
          const summary = makeSummary(ctx.size, item.marker, ctx.text);
          const receipt = await timed(() => ledger.publish(scopeOf(ctx.size), summary));
          ctx.receipts.set(`${backend}:${item.marker}`, receipt.digest);
        }
      },
    },
    {
      name: `resume (${backend})`,
      group: 'ledger',
      op: 'read',
      backend,
      async run(ctx) {
        const ledger = ctx.ledgers.get(backend)!;
        for (let i = 0; i < ctx.items.length; i++) {
          const r = await timed(() => ledger.resume(scopeOf(ctx.size)));
          if (r?.manifest.summary.size !== ctx.size) throw new Error(`resume (${backend}) returned the wrong summary`);
        }
      },
    },
  ];
}

const CASES: CaseDef[] = [
  {
    name: 'raw durable write',
    group: 'limit',
    op: 'write',
    async run(ctx) {
      for (const item of ctx.items) await timed(() => rawDurableWrite(ctx.rawDir, item.marker, item.bytes));
    },
  },
  {
    // The same as publish writes (reused 1 MiB blocks, an fsync started every 8 MiB): the limit of a large publish
    // is the faster of the two. Up to 8 MiB no fsync runs behind the writes; at 1 MiB it is one block.
    name: RAW_FLUSH_BEHIND,
    group: 'limit',
    op: 'write',
    minSize: MiB,
    async run(ctx) {
      for (const item of ctx.items)
        await timed(() => rawDurableWriteFlushBehind(ctx.rawDir, `${item.marker}.fb`, item.bytes));
    },
  },
  {
    // What an inline publish cannot do without: its bytes in one synced LevelDB batch, then the pin's 4 KiB slot
    // overwritten in place on a file opened with O_DSYNC (as the embedded store pins). No signature, no other CPU.
    name: 'synced batch + pin',
    group: 'limit',
    op: 'write',
    maxSize: DEFAULT_INLINE_SUMMARY_BYTES,
    async run(ctx) {
      const f = ctx.floor;
      for (const item of ctx.items)
        await timed(async () => {
          await f.db.batch().put(`b!${item.marker}`, item.bytes).write({ sync: true });
          await f.pin();
        });
    },
  },
  {
    name: 'cacache.put',
    group: 'peer',
    op: 'write',
    async run(ctx) {
      for (const item of ctx.items) await timed(() => cacache.put(ctx.cache, item.marker, item.bytes));
    },
  },
  ...ledgerCases('native'),
  ...ledgerCases('wasm'),
  ...ledgerCases('noble'),
  {
    name: 'raw read',
    group: 'limit',
    op: 'read',
    async run(ctx) {
      for (const item of ctx.items) await timed(() => rawRead(join(ctx.rawDir, item.marker), ctx.size));
    },
  },
  {
    name: 'raw read + hash',
    group: 'limit',
    op: 'read',
    async run(ctx) {
      for (const item of ctx.items) {
        const digest = formatDigest(
          await timed(() => rawReadHash(join(ctx.rawDir, item.marker), ctx.size, ctx.fastest)),
        );
        // The limit and the ledger must have handled the very same bytes.
        const published = ctx.receipts.get(`wasm:${item.marker}`);
        if (published !== undefined && published !== digest) throw new Error('raw bytes and published bytes differ');
      }
    },
  },
  {
    name: 'raw read + hash + text',
    group: 'limit',
    op: 'read',
    async run(ctx) {
      for (const item of ctx.items) {
        const { text } = await timed(() => rawReadHashText(join(ctx.rawDir, item.marker), ctx.size, ctx.fastest));
        if (text.length === 0 && ctx.size > 0) throw new Error('raw read + hash + text produced no text');
      }
    },
  },
  {
    name: 'cacache.get',
    group: 'peer',
    op: 'read',
    async run(ctx) {
      for (const item of ctx.items) {
        const got = await timed(() => cacache.get(ctx.cache, item.marker));
        if (got.data.length !== ctx.size) throw new Error('cacache.get returned the wrong size');
      }
    },
  },
];

// Accumulates the time of the awaited operation only (item preparation stays outside).
let clock = 0;
async function timed<T>(op: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const out = await op();
  clock += performance.now() - t0;
  return out;
}

function rotate<T>(xs: T[], by: number): T[] {
  const k = by % xs.length;
  return [...xs.slice(k), ...xs.slice(0, k)];
}

async function probeHash(backends: HashBackend[]): Promise<Record<string, number>> {
  const bytes = new Uint8Array(4 * MiB).fill(0x61);
  const out: Record<string, number> = {};
  for (const b of backends) {
    const t0 = performance.now();
    const h = await b.create();
    h.update(bytes);
    h.digest();
    out[b.name] = 4 / ((performance.now() - t0) / 1000);
  }
  return out;
}

/** Runs the size suite; returns seconds per operation for every case and size. */
export async function runSizeSuite(o: SizeSuiteOptions): Promise<SizeSuiteResult> {
  // Native where its binary loads here (a platform without one measures WASM and noble only).
  const native = await loadHashBackend('native').catch(
    (err: Error) => void o.log(`  native BLAKE3 not measured: ${err.message}`),
  );
  const backends = [...(native ? [native] : []), await loadHashBackend('wasm'), await loadHashBackend('noble')];
  await probeHash(backends); // warm both
  const hashProbeMiBps = await probeHash(backends);
  const fastest = backends.reduce((a, b) => (hashProbeMiBps[a.name]! >= hashProbeMiBps[b.name]! ? a : b));
  const rawDir = join(o.workDir, 'raw');
  const cache = join(o.workDir, 'cacache');
  await mkdir(rawDir, { recursive: true, mode: 0o700 });
  const ledgers = new Map<string, Ledger>();
  for (const { name } of backends) {
    ledgers.set(
      name,
      await openLedger({
        root: join(o.workDir, `ledger-${name}`),
        host: 'bench',
        hash: name as HashBackendName,
        maxSummaryBytes: MAX_SUMMARY,
        onNotice: o.log,
      }),
    );
  }
  const results = new Map<string, CaseSamples>();
  let floor: PinFloor | undefined;
  try {
    floor = await openPinFloor(o.workDir, 'floor');
    for (let round = 0; round <= o.rounds; round++) {
      const warmup = round === 0;
      for (const size of o.sizes) {
        const k = warmup ? Math.min(2, o.batch(size)) : o.batch(size);
        const items = Array.from({ length: k }, () => {
          const marker = nextMarker();
          return { marker, bytes: validateSummary(makeSummary(size, marker, o.text), MAX_SUMMARY).bytes };
        });
        const ctx: Ctx = { floor, size, items, rawDir, cache, ledgers, fastest, receipts: new Map(), text: o.text };
        const applicable = CASES.filter(
          (c) =>
            (c.backend === undefined || ledgers.has(c.backend)) &&
            (c.backend !== 'noble' || size <= o.nobleMaxBytes) &&
            size <= (c.maxSize ?? Infinity) &&
            size >= (c.minSize ?? 0),
        );
        for (const op of ['write', 'read'] as const) {
          for (const c of rotate(
            applicable.filter((x) => x.op === op),
            round,
          )) {
            collectGarbage();
            // A durable case starts from a quiet page cache: no other case's writeback on its clock.
            if (c.op === 'write') await syncPageCache();
            clock = 0;
            await c.run(ctx);
            const writeback = c.op === 'write' ? await syncPageCache() : undefined;
            if (warmup) continue;
            const key = `${c.name}@${size}`;
            const entry = results.get(key) ?? { case: c.name, group: c.group, op: c.op, size, samples: [] };
            entry.samples.push(clock / 1000 / k);
            if (writeback !== undefined) (entry.writebackSeconds ??= []).push(writeback / k);
            results.set(key, entry);
          }
        }
      }
      o.log(
        warmup ? '  warm-up round done' : `  round ${round}/${o.rounds} done (${o.sizes.map(sizeLabel).join(', ')})`,
      );
    }
  } finally {
    // Each closed whatever another's close does.
    await Promise.allSettled([...[...ledgers.values()].map((l) => l.close()), floor?.close()]);
  }
  return { cases: [...results.values()], fastestHash: fastest.name, hashProbeMiBps };
}
