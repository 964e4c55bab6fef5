/**
 * `npm run bench:session-heads` — the session-heads index (manifests/tlog/session-heads.ts) at scale:
 *
 *   1. the pure index at 10⁶ sessions (built once in memory, in a map, as a backend stores nodes): the cost of one
 *      append's update (a new session, or an existing session's chain grown) — reads, hashes, nodes written — and
 *      the size of membership and non-membership proofs;
 *   2. a smaller run through the real LevelDB append path (entry, head, position, watermark, tree and index nodes
 *      in one synced batch, 64 appends in flight), each append a new session, so the index grows with it.
 *
 *   node dist/benchmarks/session-heads.js [--sessions N] [--log-appends M] [--work DIR]
 *
 * Writes benchmarks/results/session-heads.json and .md.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { digestOf } from '../store/hash/digest.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import {
  buildSessionHeads,
  nodeName,
  proveSessionHead,
  SessionHeadsUpdate,
  verifySessionHead,
  type HeadsNode,
  type HeadsNodeReader,
} from '../manifests/tlog/session-heads.js';

const { values } = parseArgs({
  options: { sessions: { type: 'string' }, 'log-appends': { type: 'string' }, work: { type: 'string' } },
});
const N = Number(values.sessions ?? 1_000_000);
const LOG_APPENDS = Number(values['log-appends'] ?? 20_000);
const log = (line: string) => process.stderr.write(`${line}\n`);
const idOf = (i: number, seq: number) => digestOf(new TextEncoder().encode(`${i}/${seq}`));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function pureIndex() {
  log(`building the index of ${N} sessions in memory…`);
  const t0 = performance.now();
  const built = buildSessionHeads(
    (function* () {
      for (let i = 0; i < N; i++) yield { session: `session-${i}`, head: { seq: 3, id: idOf(i, 3) } };
    })(),
  );
  const nodes = new Map<string, HeadsNode>();
  for (const n of built.nodes) nodes.set(nodeName(n.path), n.node);
  const buildSeconds = (performance.now() - t0) / 1000;
  log(`  ${nodes.size} nodes in ${buildSeconds.toFixed(1)} s`);
  let reads = 0;
  const read: HeadsNodeReader = async (paths) => {
    reads++;
    return paths.map((p) => nodes.get(nodeName(p)));
  };
  const APPENDS = 20_000;
  const measure = async (session: (k: number) => string, seq: number) => {
    reads = 0;
    let written = 0;
    const t = performance.now();
    for (let k = 0; k < APPENDS; k++) {
      const u = new SessionHeadsUpdate(read);
      await u.set(session(k), { seq, id: idOf(k, seq) });
      const changes = await u.changes();
      written += changes.length;
      for (const c of changes) nodes.set(nodeName(c.path), c.node);
    }
    return {
      usPerAppend: ((performance.now() - t) * 1000) / APPENDS,
      nodesWritten: written / APPENDS,
      reads: reads / APPENDS,
    };
  };
  log('updates: existing sessions grown…');
  const grown = await measure((k) => `session-${(k * 7919) % N}`, 4);
  log(`  ${grown.usPerAppend.toFixed(1)} µs, ${grown.nodesWritten.toFixed(1)} nodes written per append`);
  log('updates: new sessions…');
  const added = await measure((k) => `new-session-${k}`, 0);
  log(`  ${added.usPerAppend.toFixed(1)} µs, ${added.nodesWritten.toFixed(1)} nodes written per append`);

  const rootNode = nodes.get(nodeName({ depth: 0, prefix: new Uint8Array(32) }));
  const root = rootNode && !rootNode.leaf ? rootNode.hash : undefined;
  if (!root) throw new Error('no interior root');
  const sizes = async (cases: Array<[string, { seq: number; id: string } | undefined]>) => {
    const hashes: number[] = [];
    const bytes: number[] = [];
    for (const [session, head] of cases) {
      const { proof } = await proveSessionHead(read, session);
      if (!verifySessionHead(root, session, head, proof).ok) throw new Error(`the proof of ${session} does not verify`);
      hashes.push(proof.siblings.length + (proof.other ? 2 : 0));
      bytes.push(JSON.stringify(proof).length);
    }
    hashes.sort((a, b) => a - b);
    bytes.sort((a, b) => a - b);
    return {
      hashes: { median: percentile(hashes, 0.5), max: hashes[hashes.length - 1]! },
      jsonBytes: { median: percentile(bytes, 0.5), max: bytes[bytes.length - 1]! },
    };
  };
  // Sessions the update rounds above did not touch are still at seq 3.
  const touched = new Set(Array.from({ length: APPENDS }, (_, k) => (k * 7919) % N));
  const untouched = Array.from({ length: 2000 }, (_, k) => (k * 104_729 + 1) % N).filter((i) => !touched.has(i));
  const member = await sizes(
    untouched
      .slice(0, 1000)
      .map((i) => [`session-${i}`, { seq: 3, id: idOf(i, 3) }] as [string, { seq: number; id: string }]),
  );
  const absent = await sizes(Array.from({ length: 1000 }, (_, k) => [`absent-${k}`, undefined] as [string, undefined]));
  return { sessions: N, buildSeconds, storedNodes: nodes.size, grown, added, member, absent };
}

async function levelRun(work: string) {
  log(`LevelDB log: ${LOG_APPENDS} appends, each a new session, 64 in flight…`);
  const db = await LevelManifestLog.open(join(work, 'log'));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < LOG_APPENDS) {
        const i = next++;
        const payload = new TextEncoder().encode(`{"session":"s${i}","seq":0}`);
        await db.append({
          session: `s${i}`,
          principal: 'alice',
          seq: 0,
          prev: null,
          id: digestOf(payload),
          envelope: JSON.stringify({
            payload: Buffer.from(payload).toString('base64'),
            payloadType: 't',
            signatures: [],
          }),
        });
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await db.close();
  return { appends: LOG_APPENDS, seconds, perSecond: LOG_APPENDS / seconds };
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(values.work ?? tmpdir(), 'hl-bench-heads-'));
  const started = new Date();
  const load = loadavg();
  try {
    const pure = await pureIndex();
    const level = await levelRun(work);
    const result = {
      startedAt: started.toISOString(),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim(), loadAverage: { start: load, end: loadavg() } },
      pure,
      level,
    };
    const md = [
      `# Session-heads index (${result.startedAt})`,
      '',
      `Machine: ${result.machine.cpus} × ${result.machine.cpuModel}, load ${load.map((x) => x.toFixed(1)).join('/')} at start (shared).`,
      '',
      '| measure | value |',
      '| --- | --- |',
      `| index of ${N.toLocaleString('en')} sessions built in memory (rebuild, as fsck and a full-bundle auditor do) | ${pure.buildSeconds.toFixed(1)} s, ${pure.storedNodes.toLocaleString('en')} nodes |`,
      `| update per append at ${N.toLocaleString('en')} sessions, existing session (CPU, in-memory node map) | ${pure.grown.usPerAppend.toFixed(1)} µs, ${pure.grown.nodesWritten.toFixed(1)} nodes written, ${pure.grown.reads.toFixed(1)} reads |`,
      `| update per append at ${N.toLocaleString('en')} sessions, new session | ${pure.added.usPerAppend.toFixed(1)} µs, ${pure.added.nodesWritten.toFixed(1)} nodes written, ${pure.added.reads.toFixed(1)} reads |`,
      `| membership proof (hashes median / max; JSON bytes median / max) | ${pure.member.hashes.median} / ${pure.member.hashes.max}; ${pure.member.jsonBytes.median} / ${pure.member.jsonBytes.max} |`,
      `| non-membership proof (hashes median / max; JSON bytes median / max) | ${pure.absent.hashes.median} / ${pure.absent.hashes.max}; ${pure.absent.jsonBytes.median} / ${pure.absent.jsonBytes.max} |`,
      `| LevelDB appends incl. tree and index, each a new session, 64 in flight, synced group commits | ${level.perSecond.toFixed(0)} /s (${level.appends.toLocaleString('en')} in ${level.seconds.toFixed(1)} s) |`,
      '',
    ].join('\n');
    const out = fileURLToPath(new URL('../../benchmarks/results/', import.meta.url));
    await writeFile(join(out, 'session-heads.json'), `${JSON.stringify(result, null, 2)}\n`);
    await writeFile(join(out, 'session-heads.md'), md);
    process.stdout.write(md);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
