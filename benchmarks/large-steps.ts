/**
 * Where a large publish's time goes, each step measured alone in the same run (issue #17: publish 16 and
 * 64 MiB against a raw durable write of the same bytes). Per round, in alternating order, each durable case
 * after `sync` and a GC:
 *   raw durable write        staging file, write, fsync, rename, directory fsync (benchmarks/suites/raw.ts)
 *   raw durable write (flush-behind)   the same as publish writes: through eight reused 1 MiB blocks, an fsync
 *                            started every 8 MiB
 *   put, bytes               the filesystem blob store given the canonical bytes already encoded
 *   put, stream              the same store given the canonical pieces as publish streams them
 *   publish                  the whole publish of the summary
 *   publish, inline          a publish of a small (inline) summary: the append's fixed cost (chain head,
 *                            signature, the log's synced batch, the checkpoint pin) with no blob file
 * and, CPU only (no I/O): validation (`prepareSummary`), the canonical encoding (all pieces, no write), and
 * native BLAKE3 over the bytes on this thread.
 *
 *   node --expose-gc dist/benchmarks/large-steps.js [--sizes 16,64] [--rounds 6] [--work DIR]
 *
 * Prints a Markdown table (medians, [min–max]) and the ratios of each case to the raw write. The machine's
 * load average is printed with it: on a shared machine only figures of one run compare.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openLedger } from '../src/ledger/open.js';
import { prepareSummary, validateSummary } from '../src/summary/summary.js';
import { canonicalChunks } from '../manifests/encoding/canonical.js';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { largeStepsRows } from './large-steps-cases.js';
import { makeSummary, nextMarker } from './lib/data.js';
import { syncPageCache } from './lib/quiet.js';
import { collectGarbage, MiB } from './lib/stats.js';
import { rawDurableWrite, rawDurableWriteFlushBehind } from './suites/raw.js';

const { values } = parseArgs({
  options: { sizes: { type: 'string' }, rounds: { type: 'string' }, work: { type: 'string' } },
});
const sizes = (values.sizes ?? '16,64').split(',').map((s) => Number(s) * MiB);
const rounds = Number(values.rounds ?? 6);
const log = (line: string) => process.stderr.write(`${line}\n`);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

const work = await mkdtemp(join(values.work ?? tmpdir(), 'hl-large-steps-'));
const limit = 1024 * MiB;
const hash = await loadHashBackend('native');
const { store } = await FsBlobStore.open(join(work, 'blobs'), { hash, maxBlobBytes: limit });
const ledger = await openLedger({ root: join(work, 'ledger'), host: 'bench', hash: 'native', maxSummaryBytes: limit });
await mkdir(join(work, 'raw'), { mode: 0o700 });
await syncPageCache(); // the sync helper starts before anything is timed
const scope = { principal: 'bench', session: 'large-steps', run: 'bench' };

const samples = new Map<string, number[]>();
const record = (key: string, ms: number) => samples.set(key, [...(samples.get(key) ?? []), ms]);

async function timed(durable: boolean, op: () => Promise<unknown> | unknown): Promise<number> {
  collectGarbage();
  if (durable) await syncPageCache();
  const t0 = performance.now();
  await op();
  return performance.now() - t0;
}

const startLoad = load();
try {
  for (let round = 0; round <= rounds; round++) {
    for (const size of sizes) {
      const label = `${size / MiB} MiB`;
      // A fresh summary (and marker) per case: no put finds its bytes already stored.
      const fresh = () => makeSummary(size, nextMarker(), 'ascii');
      const forRaw = validateSummary(fresh(), limit).bytes;
      const forBytes = validateSummary(fresh(), limit).bytes;
      const forStream = fresh();
      const forPublish = fresh();
      const inline = makeSummary(2000, nextMarker(), 'ascii');
      const forCpu = fresh();
      const cpuBytes = validateSummary(forCpu, limit).bytes;
      const cases: Array<[string, boolean, () => Promise<unknown> | unknown]> = [
        ['raw durable write', true, () => rawDurableWrite(join(work, 'raw'), nextMarker(), forRaw)],
        [
          'raw durable write (flush-behind)',
          true,
          () => rawDurableWriteFlushBehind(join(work, 'raw'), nextMarker(), forRaw),
        ],
        ['put, bytes', true, () => store.put(forBytes, { maxBytes: limit })],
        [
          'put, stream',
          true,
          () =>
            store.put(
              (async function* () {
                yield* canonicalChunks(forStream);
              })(),
              { maxBytes: limit },
            ),
        ],
        ['publish', true, () => ledger.publish(scope, forPublish)],
        ['publish, inline (2 KB)', true, () => ledger.publish(scope, inline)],
        ['CPU: validate (prepareSummary)', false, () => prepareSummary(forCpu, limit)],
        [
          'CPU: encode (all pieces)',
          false,
          () => {
            for (const piece of canonicalChunks(forCpu)) void piece;
          },
        ],
        [
          'CPU: native BLAKE3 here',
          false,
          async () => {
            const h = await hash.create();
            for (let off = 0; off < cpuBytes.length; off += MiB) h.update(cpuBytes.subarray(off, off + MiB));
            h.digest();
          },
        ],
      ];
      if (round % 2 === 1) cases.reverse();
      for (const [name, durable, op] of cases) {
        const ms = await timed(durable, op);
        if (round > 0) record(`${label}\t${name}`, ms);
      }
    }
    log(round === 0 ? 'warm-up round done' : `round ${round}/${rounds} done (load ${load()})`);
  }
} finally {
  await ledger.close();
  await store.close();
  await rm(work, { recursive: true, force: true });
}

const lines = [
  `Large publish, step by step: ${rounds} rounds, load average ${startLoad} at start, ${load()} at end.`,
  '',
  '| size | case | median ms [min–max] | raw write / case (median of rounds) |',
  '| --- | --- | ---: | ---: |',
];
for (const size of sizes) {
  const label = `${size / MiB} MiB`;
  lines.push(...largeStepsRows(label, (name) => samples.get(`${label}\t${name}`)!));
}
process.stdout.write(`${lines.join('\n')}\n`);
