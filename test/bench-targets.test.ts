/**
 * Goal 3's limit (benchmarks/report/targets.ts): publish 16 / 64 MiB is held to the faster of the plain raw
 * durable write and the one with publish's flush-behind, interleaved and alone; the plain one where the other was
 * not measured (results from before it was). Runs on the committed full run's results with the raw rows replaced.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { evaluateTargets } from '../benchmarks/report/targets.js';
import type { BenchResults, SizeRow } from '../benchmarks/report/model.js';
import { mapSpread, MiB, spread } from '../benchmarks/lib/stats.js';

const LATEST = fileURLToPath(new URL('../benchmarks/results/latest.json', import.meta.url));
const RAW = ['raw durable write', 'raw durable write (flush-behind)'] as const;
const RAW_ALONE = ['raw durable write, alone', 'raw durable write (flush-behind), alone'] as const;

function row(name: string, size: number, samplesSeconds: number[]): SizeRow {
  return {
    case: name,
    group: 'limit',
    op: 'write',
    size,
    samplesSeconds,
    seconds: spread(samplesSeconds),
    mibPerSecond: mapSpread(samplesSeconds, (s) => size / MiB / s),
  };
}

/** The committed results, with the publish rows at 0.1 s and the raw rows given here (seconds per round). */
function input(raw: Record<string, number[]>): Omit<BenchResults, 'targets'> {
  const { targets: _, ...r } = JSON.parse(readFileSync(LATEST, 'utf8')) as BenchResults;
  const sizes = [16 * MiB, 64 * MiB];
  const publish = [`publish (${r.hash.fastest})`, `publish (${r.hash.fastest}), alone`];
  const replaced = new Set([...RAW, ...RAW_ALONE, ...publish]);
  return {
    ...r,
    sizes: [
      ...r.sizes.filter((x) => !(replaced.has(x.case) && sizes.includes(x.size))),
      ...sizes.flatMap((size) => [
        ...publish.map((name) => ({ ...row(name, size, [0.1, 0.1, 0.1]), group: 'ledger' as const })),
        ...Object.entries(raw).map(([name, secs]) => row(name, size, secs)),
      ]),
    ],
  };
}

const measured = (r: Omit<BenchResults, 'targets'>, id: string) => {
  const t = evaluateTargets(r).find((x) => x.id === id)!;
  return { ratio: t.measured, detail: t.detail };
};

describe('publish against cacache.put: the floor of a file blob is the faster raw write', () => {
  it('names the flush-behind write and its ratio when it was the faster, else the plain one', () => {
    const r = input({ [RAW[0]]: [0.2, 0.2, 0.2], [RAW[1]]: [0.05, 0.05, 0.05] });
    const cacache = r.sizes.find((x) => x.case === 'cacache.put' && x.size === 64 * MiB)!.seconds.median;
    const detail = () => evaluateTargets(r).find((x) => x.id === `publish-vs-cacache-${64 * MiB}`)!.detail;
    const floor = (secs: number) => `= ${(cacache / secs).toFixed(2)} × cacache.put`;
    expect(detail()).toContain(`floor: the raw durable write as publish writes (flush-behind) of the same bytes alone`);
    expect(detail()).toContain(floor(0.05));
    const slower = input({ [RAW[0]]: [0.2, 0.2, 0.2], [RAW[1]]: [0.3, 0.3, 0.3] });
    const plain = evaluateTargets(slower).find((x) => x.id === `publish-vs-cacache-${64 * MiB}`)!.detail;
    expect(plain).toContain('floor: the raw durable write of the same bytes alone');
    expect(plain).toContain(floor(0.2));
  });
});

describe('goal 3: publish against the faster raw durable write', () => {
  for (const [label, names, id] of [
    ['interleaved', RAW, 'publish-vs-raw-write-67108864'],
    ['alone', RAW_ALONE, 'publish-alone-vs-raw-alone-16777216'],
  ] as const) {
    it(`${label}: flush-behind faster → the ratio is to it, and the note names both`, () => {
      const { ratio, detail } = measured(input({ [names[0]]: [0.2, 0.2, 0.2], [names[1]]: [0.05, 0.06, 0.07] }), id);
      expect(ratio).toBeCloseTo(0.6, 12); // 0.06 / 0.1, not 0.2 / 0.1
      expect(detail).toMatch(/the faster of the plain raw write \(\d+ MiB\/s\) and the one with flush-behind/);
      expect(detail).toMatch(/: flush-behind$/);
      expect(detail).toMatch(/per round 0\.50–0\.70/);
    });
    it(`${label}: the plain write faster → the ratio is to it`, () => {
      const { ratio, detail } = measured(input({ [names[0]]: [0.08, 0.08, 0.08], [names[1]]: [0.3, 0.3, 0.3] }), id);
      expect(ratio).toBeCloseTo(0.8, 12);
      expect(detail).toMatch(/: the plain one$/);
    });
    it(`${label}: no flush-behind row (results from before) → the plain write, and the note says so`, () => {
      const { ratio, detail } = measured(input({ [names[0]]: [0.2, 0.2, 0.2] }), id);
      expect(ratio).toBeCloseTo(2, 12);
      expect(detail).toMatch(/; the raw write as publish writes \(flush-behind\) was not measured$/);
    });
    it(`${label}: only the flush-behind row → the ratio is to it, and the note says the plain one is missing`, () => {
      const { ratio, detail } = measured(input({ [names[1]]: [0.05, 0.05, 0.05] }), id);
      expect(ratio).toBeCloseTo(0.5, 12);
      expect(detail).toMatch(/the plain one was not measured$/);
    });
  }
});
