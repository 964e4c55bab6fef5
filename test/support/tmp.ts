import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';

const made: string[] = [];

/** A fresh private temp directory, removed after the test. */
export function tempDir(prefix = 'hl-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o700);
  made.push(dir);
  return dir;
}

afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A valid summary with a marker so tests can tell versions apart. */
export function sampleSummary(marker: string | number = 1) {
  return {
    task: `Refactor the billing module (${marker})`,
    state: 'Extracted the invoice calculator; tests green',
    nextSteps: ['Move tax rules into their own module', 'Update the README'],
    files: [{ path: 'src/billing/invoice.ts', note: 'new calculator' }],
  };
}

/**
 * Every path under `root` (a store's LevelDB files included) with its type, mode and bytes' hash, sorted: two snapshots
 * are equal when nothing under `root` was written, made or removed.
 */
export function treeSnapshot(root: string): string[] {
  return (readdirSync(root, { recursive: true }) as string[])
    .map((name) => {
      const path = join(root, name);
      const st = lstatSync(path);
      if (st.isDirectory()) return `${name}/ ${st.mode.toString(8)}`;
      if (!st.isFile()) return `${name} (not a file)`;
      return `${name} ${st.mode.toString(8)} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    })
    .sort();
}
