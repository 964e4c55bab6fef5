/**
 * The layouts a publish can meet on disk, for the fault-injection suite (faults.test.ts): each prepares
 * the store and returns the summary whose publish is then faulted call by call.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { validateSummary } from '../../src/summary/summary.js';
import { loadHashBackend } from '../../store/hash/backends.node.js';
import { hashBytes, digestHex } from '../../store/hash/digest.js';
import { ERRNOS, type Errno, type FaultPlan } from './fault-plan.js';
import { SOAK } from './figures.js';
import { blobPath, sizedSummary } from './store-support.js';

export const main = { principal: 'alice', session: 'main', run: 'run-f' };
const other = { principal: 'bob', session: 'other', run: 'run-o' };
const MAX = 16 * 1024 * 1024;

export type Summary = ReturnType<typeof sizedSummary>;

// The soak run fails every call site with all four errnos; npm test with two of them per site, rotating,
// so every errno still meets every kind of step (the errno changes no code path below EEXIST/ENOENT).
let rotation = 0;
export function errnosFor(): readonly Errno[] {
  if (SOAK) return ERRNOS;
  rotation = (rotation + 2) % ERRNOS.length;
  return [ERRNOS[rotation]!, ERRNOS[(rotation + 1) % ERRNOS.length]!];
}

export interface Ctx {
  root: string;
  ledger: Ledger;
  /** The ledger's inlineSummaryBytes (reopens keep it). */
  inline: number;
  plan: FaultPlan;
  marker: () => string;
}

function shardExists(root: string, hex: string, depth: 1 | 2): boolean {
  const parts = depth === 1 ? [hex.slice(0, 2)] : [hex.slice(0, 2), hex.slice(2, 4)];
  return existsSync(join(root, 'blobs-v1', 'blake3', ...parts));
}

export const wasm = await loadHashBackend('wasm');
export async function hexOf(summary: Summary): Promise<string> {
  return digestHex(await hashBytes(validateSummary(summary, MAX).bytes, wasm));
}

export interface Scenario {
  name: string;
  /** Summaries up to this size go inline into the log batch (0: every summary is a blob file). */
  inline: number;
  prepare: (c: Ctx) => Promise<Summary>;
}

export const scenarios: Scenario[] = [
  {
    // Over 8 MiB of text: the ledger streams it, the store writes 1 MiB blocks at their offsets and starts
    // a flush-behind fsync after 8 MiB, so each of those calls fails in turn too.
    name: 'a new blob in new shard directories',
    inline: 0,
    async prepare(c) {
      for (;;) {
        const s = sizedSummary(c.marker(), 9 * 1024 * 1024 + 64 * 1024);
        if (!shardExists(c.root, await hexOf(s), 1)) return s;
      }
    },
  },
  {
    name: 'a new blob beside existing blobs',
    inline: 0,
    async prepare(c) {
      for (;;) {
        const s = sizedSummary(c.marker());
        const hex = await hexOf(s);
        if (shardExists(c.root, hex, 1) && !shardExists(c.root, hex, 2)) return s;
      }
    },
  },
  {
    name: 'the same bytes already stored',
    inline: 0,
    async prepare(c) {
      const s = sizedSummary(c.marker());
      await c.ledger.publish(other, s);
      return s;
    },
  },
  {
    name: 'a corrupt copy at the blob path (quarantined, replaced)',
    inline: 0,
    async prepare(c) {
      const s = sizedSummary(c.marker());
      const r = await c.ledger.publish(other, s);
      const path = blobPath(c.root, r.digest);
      const bytes = readFileSync(path);
      bytes[bytes.length - 2]! ^= 0x20;
      writeFileSync(path, bytes);
      return s;
    },
  },
  {
    // A small summary goes into the log's batch itself: the one durable write there is to fail.
    name: 'a small summary inline in the log batch',
    inline: 64 * 1024,
    async prepare(c) {
      return sizedSummary(c.marker());
    },
  },
];

/**
 * A ledger whose blob store and LevelDB commit go through the fault plan. By default every summary is a
 * blob file (`inline` 0), so the file steps are there to fail.
 */
export async function openFaulty(root: string, plan: FaultPlan, inline = 0): Promise<Ledger> {
  return openLedger({
    root,
    host: 'fault-host',
    inlineSummaryBytes: inline,
    fs: plan.fs,
    levelLog: { writeBatch: plan.writeBatch },
    maxSummaryBytes: MAX,
    onNotice: () => {},
  });
}

export async function entryCount(ledger: Ledger): Promise<number> {
  let n = 0;
  for await (const _ of ledger.log.entries()) n++;
  return n;
}
