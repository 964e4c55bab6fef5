/**
 * The README's on-disk layout is what an operator finds under a root: every entry a store holds after a publish is
 * named there, and it says where a published summary is (a small one inline in the log: blobs-v1/ stays empty).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const layout = readme.split('## On-disk layout (embedded store)')[1]!.split('\n## ')[0]!.split('```')[1]!;

/** The layout's entry for `name`: its line and the continuation lines below it (indented past the names). */
function entry(name: string): string {
  const lines = layout.split('\n');
  const at = lines.findIndex((l) => l.startsWith(`  ${name}`));
  if (at < 0) return '';
  const end = lines.findIndex((l, i) => i > at && /^ {2}\S/.test(l));
  return lines.slice(at, end < 0 ? undefined : end).join('\n');
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}

describe("README's on-disk layout", () => {
  it('names every top-level entry of a store and says where a small summary is stored', async () => {
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({ root, host: 'layout-host', onNotice: () => {} });
    await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary(0));
    await ledger.close();
    for (const name of readdirSync(root)) expect(layout, name).toContain(`${name}`);
    // A summary under inlineSummaryBytes is no file: the layout must not send an operator looking for one there.
    expect(filesUnder(join(root, 'blobs-v1'))).toEqual([]);
    expect(entry('manifests-v1/')).toMatch(/inline/);
    expect(entry('blobs-v1/')).toMatch(/inlineSummaryBytes/);
  });
});
