/**
 * benchmarks/large-steps.ts runs and prints every step of its table, with finite figures, and the floor
 * row. Timings are not asserted. Runs the compiled script in dist/ (`npm test` builds it first, in pretest).
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tempDir } from './support/tmp.js';
import { LARGE_STEP_CASES, largeStepsRows, type LargeStepCase } from '../benchmarks/large-steps-cases.js';

const SCRIPT = fileURLToPath(new URL('../dist/benchmarks/large-steps.js', import.meta.url));
const STEPS = LARGE_STEP_CASES;

describe('node dist/benchmarks/large-steps.js', () => {
  it('prints each step and the floor for each size, and leaves nothing in its work directory', async () => {
    expect(existsSync(SCRIPT), 'dist/ is missing: run `npm run build` (npm test does it in pretest)').toBe(true);
    const work = tempDir('hl-large-steps-');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--expose-gc', SCRIPT, '--sizes', '1,2', '--rounds', '1', '--work', work],
      { maxBuffer: 1024 * 1024 },
    );
    expect(stdout).toMatch(/^Large publish, step by step: 1 rounds, load average /);
    const rows = stdout
      .split('\n')
      .filter((line) => /^\| \d+ MiB \|/.test(line))
      .map((line) => line.split('|').map((cell) => cell.trim()));
    for (const size of ['1 MiB', '2 MiB']) {
      const ofSize = rows.filter((cells) => cells[1] === size);
      expect(ofSize.map((cells) => cells[2])).toEqual([
        ...STEPS,
        'floor: put, bytes + publish, inline',
        'publish vs the faster raw write of each round',
      ]);
      for (const cells of ofSize.slice(0, STEPS.length)) {
        const m = /^(\d+\.\d) \[(\d+)–(\d+)\]$/.exec(cells[3]!);
        expect(m, `${size} ${cells[2]}: ${cells[3]}`).not.toBeNull();
        const [median, min, max] = [Number(m![1]), Number(m![2]), Number(m![3])];
        // Printed rounded (median to 0.1, min and max to 1): min ≤ median ≤ max within that rounding.
        expect(min - 0.55 <= median && median <= max + 0.55, `${size} ${cells[2]}: ${cells[3]}`).toBe(true);
        if (!cells[2]!.startsWith('CPU')) expect(cells[4]).toMatch(/^\d+\.\d\d×$/);
      }
      for (const cells of ofSize.slice(STEPS.length)) expect(cells[4]).toMatch(/^\d+\.\d\d×$/);
    }
    expect(readdirSync(work)).toEqual([]);
  }, 120_000);
});

describe('largeStepsRows (the table of benchmarks/large-steps.ts)', () => {
  it('takes the median of an even number of rounds as the mean of the two middle ones, for every figure', () => {
    // Four rounds (the script's default is six), ms per round; every other case 10, 20, 30, 40.
    const ms: Record<string, number[]> = Object.fromEntries(LARGE_STEP_CASES.map((name) => [name, [10, 20, 30, 40]]));
    ms['raw durable write'] = [100, 200, 300, 400];
    ms['raw durable write (flush-behind)'] = [400, 400, 100, 300];
    ms['publish'] = [200, 200, 200, 200];
    ms['put, bytes'] = [40, 80, 270, 360];
    const rows = largeStepsRows('16 MiB', (name: LargeStepCase) => ms[name]!).map((line) =>
      line.split('|').map((cell) => cell.trim()),
    );
    const cell = (name: string) => rows.find((cells) => cells[2] === name)!;
    // Median 250 (not 300, the upper middle), with min and max.
    expect(cell('raw durable write')[3]).toBe('250.0 [100–400]');
    expect(cell('CPU: encode (all pieces)')[3]).toBe('25.0 [10–40]');
    // Per-round ratios raw / case: 10 in every round for the 10…40 cases; publish 0.5, 1, 1.5, 2 → 1.25 (not 1.5).
    expect(cell('put, stream')[4]).toBe('10.00×');
    expect(cell('publish')[4]).toBe('1.25×');
    // The floor per round, raw / (put, bytes + publish, inline): 100/50, 200/100, 300/300, 400/400 → 1.5 (not 2).
    expect(cell('floor: put, bytes + publish, inline')[4]).toBe('1.50×');
    // Publish against the faster raw write of each round (100, 200, 100, 300): 0.5, 1, 0.5, 1.5 → 0.75 (not 1).
    expect(cell('publish vs the faster raw write of each round')[4]).toBe('0.75×');
  });
});
