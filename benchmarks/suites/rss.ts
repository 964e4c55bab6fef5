/** Peak RSS per size: one child process per size (benchmarks/rss-child.ts), so every figure is clean. */
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TextKind } from '../lib/data.js';

export interface RssResult {
  bytes: number;
  /** Process RSS with the summary built, before publishing (KiB). */
  baselineKiB: number;
  /** Peak RSS during publish, and during resume (KiB): absolute, the runtime and the input included. */
  publishPeakKiB: number;
  resumePeakKiB: number;
  method: 'VmHWM' | 'maxRSS';
}

const run = promisify(execFile);

export async function runRssSuite(o: {
  sizes: number[];
  text: TextKind;
  workDir: string;
  log: (line: string) => void;
}): Promise<RssResult[]> {
  const child = fileURLToPath(new URL('../rss-child.js', import.meta.url));
  const out: RssResult[] = [];
  for (const bytes of o.sizes) {
    const root = await mkdtemp(join(o.workDir, 'rss-'));
    const { stdout } = await run(process.execPath, ['--expose-gc', child, String(bytes), root, o.text], {
      maxBuffer: 1024 * 1024,
    });
    const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as RssResult;
    out.push(r);
    o.log(
      `  ${bytes} B: publish peak ${Math.round(r.publishPeakKiB / 1024)} MiB, resume peak ${Math.round(r.resumePeakKiB / 1024)} MiB`,
    );
  }
  return out;
}
