/**
 * `npm run bench:compactions` — how often LevelDB compacts under small publishes: N publishes of 4 KiB (stored inline,
 * in the log's synced batches) from 32 concurrent sessions into a fresh embedded store, then the compactions LevelDB
 * logged (`Compacting` lines of `manifests-v1/LOG*`), beside the process's CPU time per publish.
 *
 *   node dist/benchmarks/compactions.js [--publishes N] [--work DIR]
 *
 * A count, not a timing: it does not move with a noisy machine, so it shows what a change to the append path costs in
 * LevelDB's background work. A get of a key that is not there probes every table that could hold it and charges a seek
 * to the first; tables charged enough are compacted. A read of the id's record per append (taken out again) made
 * 43 compactions over 20,000 publishes, against 19–20 without (docs/ARCHITECTURE.md). Prints one JSON line.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openLedger } from '../src/ledger/open.js';
import { makeSummary, nextMarker } from './lib/data.js';

const { values } = parseArgs({ options: { publishes: { type: 'string' }, work: { type: 'string' } } });
const N = Number(values.publishes ?? 20_000);
if (!(Number.isSafeInteger(N) && N > 0))
  throw new Error(`--publishes must be a positive whole number, got ${values.publishes}`);
const SESSIONS = 32;

const work = await mkdtemp(join(values.work ?? tmpdir(), 'hl-compactions-'));
try {
  const root = join(work, 'store');
  const ledger = await openLedger({ root, host: 'bench', onNotice: () => {} });
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  let started = 0;
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      while (started < N) {
        started++;
        await ledger.publish({ principal: 'bench', session: `c${i}`, run: 'bench' }, makeSummary(4096, nextMarker()));
      }
    }),
  );
  const ms = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  await ledger.close();
  const dir = join(root, 'manifests-v1');
  let compactions = 0;
  for (const name of await readdir(dir))
    if (/^LOG(\.old)?$/.test(name))
      compactions += (await readFile(join(dir, name), 'utf8')).split('Compacting').length - 1;
  process.stdout.write(
    `${JSON.stringify({
      publishes: started,
      sessions: SESSIONS,
      compactions,
      publishesPerSecond: Math.round((started / ms) * 1000),
      cpuMicrosPerPublish: Math.round((used.user + used.system) / started),
    })}\n`,
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
