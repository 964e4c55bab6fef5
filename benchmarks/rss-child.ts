/**
 * Peak RSS of one publish and one resume, in a fresh process so nothing else the benchmark allocated
 * is counted. Linux: the high-water mark is reset just before each operation (/proc/self/clear_refs),
 * so each peak belongs to that operation alone; elsewhere the process-wide maxRSS is reported.
 * Usage: node --expose-gc rss-child.js <bytes> <root> [ascii|mixed]   → one JSON line on stdout.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { openLedger } from '../src/ledger/open.js';
import { makeSummary, nextMarker, type TextKind } from './lib/data.js';
import { collectGarbage } from './lib/stats.js';

function statusKiB(field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const m = readFileSync('/proc/self/status', 'utf8').match(new RegExp(`${field}:\\s+(\\d+) kB`));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

function resetPeak(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

const peakKiB = (resettable: boolean) =>
  (resettable ? statusKiB('VmHWM') : undefined) ?? process.resourceUsage().maxRSS;

const [bytesArg, root, text = 'ascii'] = process.argv.slice(2);
const bytes = Number(bytesArg);
const ledger = await openLedger({
  root: root!,
  host: 'bench',
  hash: 'auto',
  maxSummaryBytes: 1024 ** 3,
  onNotice: () => {},
});
const scope = { principal: 'bench', session: 'rss', run: 'bench' };
await ledger.publish(scope, makeSummary(4096, nextMarker())); // code loaded and compiled before measuring
await ledger.resume(scope);
const summary = makeSummary(bytes, nextMarker(), text as TextKind);
collectGarbage();
const baselineKiB = statusKiB('VmRSS') ?? process.memoryUsage().rss / 1024;
const resettable = resetPeak();
await ledger.publish(scope, summary);
const publishPeakKiB = peakKiB(resettable);
collectGarbage();
resetPeak();
const resumed = await ledger.resume(scope);
const resumePeakKiB = peakKiB(resettable);
if (resumed?.manifest.summary.size !== bytes) throw new Error('resume returned the wrong summary');
await ledger.close();
process.stdout.write(
  `${JSON.stringify({ bytes, baselineKiB, publishPeakKiB, resumePeakKiB, method: resettable ? 'VmHWM' : 'maxRSS' })}\n`,
);
