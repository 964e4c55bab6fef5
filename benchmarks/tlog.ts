/**
 * `npm run bench:tlog` — the transparency tree at scale: a 1,000,000-entry tree built through the real
 * LevelDB append path (entry, head, position, watermark and tree nodes in one synced batch, 64 appends in
 * flight so group commit works as in production), the tree's own CPU cost per append, and proof sizes and
 * read times at full size.
 *
 *   node dist/benchmarks/tlog.js [--entries N] [--work DIR]
 *
 * Writes benchmarks/results/tlog.json and tlog.md. Separate from `npm run bench`: it takes minutes.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { digestOf } from '../store/hash/digest.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { leafHash, verifyConsistency, verifyInclusion } from '../manifests/tlog/merkle.js';
import { appendLeaves, consistencyRanges, hashRanges, inclusionRanges, type TreeNode } from '../manifests/tlog/tree.js';

const { values } = parseArgs({ options: { entries: { type: 'string' }, work: { type: 'string' } } });
const N = Number(values.entries ?? 1_000_000);
const log = (line: string) => process.stderr.write(`${line}\n`);

/** A manifest-sized payload (~420 bytes of canonical JSON, as the ledger signs) and its envelope (~700 bytes). */
function payload(i: number): Uint8Array {
  const hex = (s: string) => digestOf(new TextEncoder().encode(s)).slice(7);
  return new TextEncoder().encode(
    `{"covers":{"transcriptThrough":${i}},"createdAt":"2026-12-01T00:00:00.000Z","host":"bench-host","keyId":"ed25519:${hex('k').slice(0, 32)}",` +
      `"kind":"compaction","prev":"blake3:${hex(`p${i}`)}","principal":"alice","run":"r${i}","seq":${i},"session":"s${i % 10_000}",` +
      `"summary":{"digest":"blake3:${hex(`b${i}`)}","mediaType":"application/vnd.handoff-ledger.summary.v1+json","size":${1000 + (i % 5000)}},"v":1}`,
  );
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function treeCpuCost(): Promise<{ usPerAppend: number; nodesPerAppend: number; maxNodesPerAppend: number }> {
  let frontier: TreeNode[] = [];
  let size = 0;
  let nodes = 0;
  let maxNodes = 0;
  const leaves = Array.from({ length: 1024 }, (_, i) => payload(i));
  const t0 = performance.now();
  while (size < N) {
    const r = appendLeaves(frontier, size, [leaves[size % 1024]!]);
    frontier = r.frontier;
    size = r.size;
    nodes += r.nodes.length;
    maxNodes = Math.max(maxNodes, r.nodes.length);
  }
  return { usPerAppend: ((performance.now() - t0) * 1000) / N, nodesPerAppend: nodes / N, maxNodesPerAppend: maxNodes };
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(values.work ?? tmpdir(), 'hl-bench-tlog-'));
  const started = new Date();
  const load = loadavg();
  try {
    log(`tree CPU cost, ${N} leaves in memory…`);
    const cpu = await treeCpuCost();
    log(`  ${cpu.usPerAppend.toFixed(2)} µs per append, ${cpu.nodesPerAppend.toFixed(3)} nodes per append`);

    log(`LevelDB log: ${N} appends, 64 in flight…`);
    const db = await LevelManifestLog.open(join(work, 'log'));
    const inFlight = 64;
    let next = 0;
    const t0 = performance.now();
    let lastReport = t0;
    const streams = Array.from({ length: inFlight }, async (_, stream) => {
      // One session per stream: each append extends its own chain, as independent sessions do.
      let seq = 0;
      let prev: `blake3:${string}` | null = null;
      while (next < N) {
        const i = next++;
        const p = payload(i);
        const id = digestOf(p);
        await db.append({
          session: `bench-${stream}`,
          principal: 'alice',
          seq,
          prev,
          id,
          envelope: JSON.stringify({ payload: Buffer.from(p).toString('base64'), payloadType: 't', signatures: [] }),
        });
        prev = id;
        seq++;
        const now = performance.now();
        if (now - lastReport > 10_000) {
          lastReport = now;
          log(`  ${next} appended, ${(next / ((now - t0) / 1000)).toFixed(0)}/s`);
        }
      }
    });
    await Promise.all(streams);
    const seconds = (performance.now() - t0) / 1000;
    const head = await db.treeHead();
    log(`  ${N} appends in ${seconds.toFixed(1)} s (${(N / seconds).toFixed(0)}/s); tree size ${head.size}`);

    log('proofs at full size…');
    const read = (ids: Parameters<typeof db.treeNodes>[0]) => db.treeNodes(ids);
    const inclusion: number[] = [];
    const inclusionMs: number[] = [];
    for (let k = 0; k < 1000; k++) {
      const index = Math.floor((k / 1000) * head.size);
      const t = performance.now();
      const proof = await hashRanges(inclusionRanges(index, head.size), read);
      inclusionMs.push(performance.now() - t);
      if (!verifyInclusion(index, head.size, leafHash(payload(index)), proof, head.root).ok)
        throw new Error(`inclusion proof of ${index} does not verify`);
      inclusion.push(proof.length);
    }
    const consistency: number[] = [];
    const consistencyMs: number[] = [];
    for (const old of [1, 1000, 123_457, Math.floor(head.size / 2), head.size - 1].filter((m) => m < head.size)) {
      const t = performance.now();
      const proof = await hashRanges(consistencyRanges(old, head.size), read);
      consistencyMs.push(performance.now() - t);
      const oldHead = await hashRanges([[0, old]], read);
      if (!verifyConsistency(old, head.size, proof, oldHead[0]!, head.root).ok)
        throw new Error(`consistency proof from ${old} does not verify`);
      consistency.push(proof.length);
    }
    await db.close();
    inclusion.sort((a, b) => a - b);
    inclusionMs.sort((a, b) => a - b);
    const result = {
      startedAt: started.toISOString(),
      entries: N,
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim(), loadAverage: { start: load, end: loadavg() } },
      treeCpu: cpu,
      levelAppend: { seconds, perSecond: N / seconds, inFlight },
      inclusionProof: {
        hashes: { min: inclusion[0], median: percentile(inclusion, 0.5), max: inclusion[inclusion.length - 1] },
        bytes: { max: inclusion[inclusion.length - 1]! * 32 },
        readMs: { median: percentile(inclusionMs, 0.5), p99: percentile(inclusionMs, 0.99) },
      },
      consistencyProof: { hashes: consistency, readMs: consistencyMs },
    };
    const md = [
      `# Transparency tree at ${N.toLocaleString('en')} entries (${result.startedAt})`,
      '',
      `Machine: ${result.machine.cpus} × ${result.machine.cpuModel}, load ${load.map((x) => x.toFixed(1)).join('/')} at start (shared).`,
      '',
      '| measure | value |',
      '| --- | --- |',
      `| tree CPU per append (SHA-256 leaf + completed subtrees, in memory) | ${cpu.usPerAppend.toFixed(2)} µs |`,
      `| stored nodes per append (mean / max) | ${cpu.nodesPerAppend.toFixed(3)} / ${cpu.maxNodesPerAppend} |`,
      `| LevelDB appends incl. tree, 64 in flight, synced group commits | ${(N / seconds).toFixed(0)} /s (${seconds.toFixed(1)} s) |`,
      `| inclusion proof at size ${head.size} (hashes min / median / max) | ${inclusion[0]} / ${percentile(inclusion, 0.5)} / ${inclusion[inclusion.length - 1]} (≤ ${inclusion[inclusion.length - 1]! * 32} bytes) |`,
      `| inclusion proof read from LevelDB (median / p99) | ${percentile(inclusionMs, 0.5).toFixed(2)} / ${percentile(inclusionMs, 0.99).toFixed(2)} ms |`,
      `| consistency proofs from 1, 1000, 123457, n/2, n−1 (hashes) | ${consistency.join(', ')} |`,
      '',
    ].join('\n');
    const out = fileURLToPath(new URL('../../benchmarks/results/', import.meta.url));
    await writeFile(join(out, 'tlog.json'), `${JSON.stringify(result, null, 2)}\n`);
    await writeFile(join(out, 'tlog.md'), md);
    process.stdout.write(md);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
