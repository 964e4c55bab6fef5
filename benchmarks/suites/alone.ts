/**
 * Publish alone against a raw durable write alone: the pair the interleaved size suite cannot give. Each
 * timed operation runs by itself after a `sync`, so neither carries anything else's writeback, and the
 * ratio shows what publish costs over the disk in this run's regime. The raw write is timed twice, plain
 * (one write, one fsync) and as publish writes (through reused 1 MiB blocks, an fsync started every 8 MiB);
 * the limit is the faster of the two. The same raw writes, on the largest size, are the run's record of the disk's own
 * durable write speed.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openLedger } from '../../src/ledger/open.js';
import { validateSummary } from '../../src/summary/summary.js';
import { makeSummary, nextMarker, type TextKind } from '../lib/data.js';
import { syncPageCache } from '../lib/quiet.js';
import { collectGarbage, MiB, sizeLabel } from '../lib/stats.js';
import { rawDurableWrite, rawDurableWriteFlushBehind } from './raw.js';
import type { CaseSamples } from './sizes.js';

export interface AloneOptions {
  sizes: number[];
  rounds: number;
  text: TextKind;
  workDir: string;
  log: (line: string) => void;
}

export const RAW_ALONE = 'raw durable write, alone';
export const RAW_FLUSH_BEHIND_ALONE = 'raw durable write (flush-behind), alone';
export const publishAlone = (backend: string) => `publish (${backend}), alone`;

async function timedAlone(op: () => Promise<unknown>): Promise<number> {
  collectGarbage();
  await syncPageCache();
  const t0 = performance.now();
  await op();
  return (performance.now() - t0) / 1000;
}

/** Rounds rotate which of the three goes first; the first round is a warm-up. */
export async function runAloneSuite(o: AloneOptions): Promise<{ cases: CaseSamples[]; backend: string }> {
  const rawDir = join(o.workDir, 'raw-alone');
  await mkdir(rawDir, { recursive: true, mode: 0o700 });
  const ledger = await openLedger({
    root: join(o.workDir, 'ledger-alone'),
    host: 'bench',
    hash: 'auto',
    maxSummaryBytes: 1024 * MiB,
    onNotice: o.log,
  });
  const backend = ledger.hashBackend.name;
  const raw = new Map<number, CaseSamples>();
  const behind = new Map<number, CaseSamples>();
  const pub = new Map<number, CaseSamples>();
  try {
    for (const size of o.sizes) {
      raw.set(size, { case: RAW_ALONE, group: 'limit', op: 'write', size, samples: [] });
      behind.set(size, { case: RAW_FLUSH_BEHIND_ALONE, group: 'limit', op: 'write', size, samples: [] });
      pub.set(size, { case: publishAlone(backend), group: 'ledger', op: 'write', size, samples: [] });
    }
    for (let round = 0; round <= o.rounds; round++) {
      for (const size of o.sizes) {
        const marker = nextMarker();
        const summary = makeSummary(size, marker, o.text);
        const bytes = validateSummary(summary, 1024 * MiB).bytes;
        const scope = { principal: 'bench', session: `alone-${size}`, run: 'bench' };
        const three = [
          async () => {
            const t = await timedAlone(() => rawDurableWrite(rawDir, marker, bytes));
            if (round > 0) raw.get(size)!.samples.push(t);
          },
          async () => {
            const t = await timedAlone(() => rawDurableWriteFlushBehind(rawDir, `${marker}.fb`, bytes));
            if (round > 0) behind.get(size)!.samples.push(t);
          },
          async () => {
            const t = await timedAlone(() => ledger.publish(scope, summary));
            if (round > 0) pub.get(size)!.samples.push(t);
          },
        ];
        // The three rotate which goes first from round to round (the first write after a pause can be the slow one).
        const k = round % three.length;
        for (const run of [...three.slice(k), ...three.slice(0, k)]) await run();
      }
      o.log(
        round === 0
          ? '  warm-up round done'
          : `  round ${round}/${o.rounds} done (${o.sizes.map(sizeLabel).join(', ')})`,
      );
    }
  } finally {
    await ledger.close();
  }
  return { cases: [...raw.values(), ...behind.values(), ...pub.values()], backend };
}
