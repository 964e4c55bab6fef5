/**
 * Where the reliability suites leave their figures. Suites run in parallel worker processes, so the
 * write of one suite's figures and the regeneration of RELIABILITY.md happen under a directory lock:
 * whichever suite finishes last renders a table that includes every suite's latest figures.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderReport, type SuiteFigures } from './report.js';

const here = fileURLToPath(new URL('.', import.meta.url));
export const FIGURES_DIR = join(here, 'figures');
export const REPORT_FILE = join(here, '..', 'RELIABILITY.md');
const LOCK = join(FIGURES_DIR, '.lock');

/** True for `npm run test:soak` (the long variants). */
export const SOAK = process.env.HANDOFF_LEDGER_SOAK === '1';

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.partial`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

async function withLock<T>(fn: () => T): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A lock left by a killed test run is stale after 30 s; nothing holds it that long.
      const st = statSync(LOCK, { throwIfNoEntry: false });
      if (st && Date.now() - st.mtimeMs > 30_000) rmdirSync(LOCK, { recursive: false });
      if (Date.now() > deadline) throw new Error(`figures lock ${LOCK} is held too long`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  try {
    return fn();
  } finally {
    rmdirSync(LOCK);
  }
}

/** Reads every suite's recorded figures. */
export function readAllFigures(): SuiteFigures[] {
  let names: string[] = [];
  try {
    names = readdirSync(FIGURES_DIR).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  return names.map((n) => JSON.parse(readFileSync(join(FIGURES_DIR, n), 'utf8')) as SuiteFigures);
}

/**
 * Records one suite's figures and regenerates test/RELIABILITY.md from all of them. Standard and soak
 * runs keep separate files, so the table shows the latest of each.
 */
export async function recordFigures(figures: Omit<SuiteFigures, 'mode' | 'finishedAt'>): Promise<void> {
  mkdirSync(FIGURES_DIR, { recursive: true });
  const full: SuiteFigures = {
    ...figures,
    mode: SOAK ? 'soak' : 'standard',
    finishedAt: new Date().toISOString().slice(0, 19) + 'Z',
  };
  await withLock(() => {
    writeAtomic(join(FIGURES_DIR, `${figures.suite}${SOAK ? '.soak' : ''}.json`), JSON.stringify(full, null, 2) + '\n');
    writeAtomic(REPORT_FILE, renderReport(readAllFigures()));
  });
}

/** A counter map that starts every key at 0. */
export function counter(): { counts: Record<string, number>; add(key: string, n?: number): void } {
  const counts: Record<string, number> = {};
  return {
    counts,
    add(key, n = 1) {
      counts[key] = (counts[key] ?? 0) + n;
    },
  };
}
