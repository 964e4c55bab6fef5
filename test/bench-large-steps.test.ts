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
import { LARGE_STEP_CASES } from '../benchmarks/large-steps-cases.js';

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
