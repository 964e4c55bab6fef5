/**
 * Holding heads to the session-heads index under load (LevelManifestLog._headWindow, `indexedHead`): publishes to
 * sessions shared by several writers and to sessions new each time, interleaved with resumes and histories of the same
 * sessions, head windows of the log and of read views (`readSnapshot`, a pinned snapshot that falls behind), and
 * filtered exports (which read through a read view). No read or append may take a head this process wrote, or one it
 * read a moment before, for a head the index does not commit: none fails `ROLLBACK`, `TREE_DAMAGED` or
 * `RECORD_CORRUPT`. The batch write is slowed after it lands in LevelDB, so that snapshots are taken while the batch is
 * readable but its main-thread commit (node cache, remembered heads) has not run yet.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { LevelManifestLog } from '../../manifests/log/level/log.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { exportBundle } from '../../src/ops/export.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { open, scope } from './ledger-support.js';

const INDEX_CODES = new Set(['ROLLBACK', 'TREE_DAMAGED', 'RECORD_CORRUPT']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

describe('heads held to the session-heads index under concurrent publishes and reads', () => {
  it('never refuses a head this process wrote or read (no ROLLBACK, TREE_DAMAGED, RECORD_CORRUPT)', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const log = ledger.log as LevelManifestLog;
    // The batch lands in LevelDB, then its commit on the main thread waits a little: snapshots taken meanwhile see it.
    const raw = log as unknown as { writeBatch: (db: unknown, ops: unknown[]) => Promise<void> };
    const write = raw.writeBatch;
    raw.writeBatch = async (db, ops) => {
      await write(db, ops);
      await sleep(Math.random() * 3);
    };
    const failures: string[] = [];
    const counts = { publish: 0, resume: 0, history: 0, window: 0, view: 0, export: 0 };
    const note = (what: string, err: unknown) => {
      const code = (err as { code?: string }).code ?? '';
      // Two publishes to one shared session: the loser is told so; anything else is a failure.
      if (what === 'publish' && code === 'CHAIN_CONFLICT') return;
      // An export that met a new checkpoint at each of its attempts says so (export.ts: retry when appends pause).
      if (what === 'export' && code === 'BUNDLE_IO' && /moved on/.test((err as Error).message)) return;
      failures.push(`${what}: ${code} ${(err as Error).message}`);
    };
    const shared = Array.from({ length: 6 }, (_, i) => `shared-${i}`);
    const fresh: string[] = []; // published once each, newest last
    let next = 0;
    try {
      for (const s of shared.slice(0, 3)) await ledger.publish(scope(s), sampleSummary(s));
      const sessions = () => [...shared, ...fresh.slice(-8), `fresh-${next}`, `fresh-${next + 1}`];
      const until = Date.now() + 4_000;
      const loop = async (what: keyof typeof counts, step: () => Promise<void>) => {
        while (Date.now() < until) {
          try {
            await step();
            counts[what]++;
          } catch (err) {
            note(what, err);
          }
        }
      };
      const windowOk = (w: Awaited<ReturnType<ManifestLog['headWindow']>>, where: string) => {
        if (w.index !== undefined) failures.push(`${where} ${w.session}: ${w.index.code} ${w.index.problem}`);
      };
      await Promise.all([
        ...Array.from({ length: 4 }, () =>
          loop('publish', async () => {
            const s = Math.random() < 0.5 ? pick(shared) : `fresh-${next++}`;
            await ledger.publish(scope(s), sampleSummary(`${s} ${Math.random()}`));
            if (s.startsWith('fresh-')) fresh.push(s);
          }),
        ),
        ...Array.from({ length: 3 }, () =>
          loop('resume', async () => {
            await ledger.resume(scope(pick(sessions())));
          }),
        ),
        loop('history', async () => {
          await ledger.history(scope(pick(sessions())));
        }),
        loop('window', async () => {
          windowOk(await log.headWindow(pick(sessions())), 'log window');
        }),
        loop('view', async () => {
          // A pinned snapshot read over several turns while publishes go on: its heads fall behind the log's.
          await log.readSnapshot(async (view) => {
            for (let i = 0; i < 4; i++) {
              windowOk(await view.headWindow(pick(sessions())), 'view window');
              await sleep(1);
            }
          });
        }),
        loop('export', async () => {
          const session = pick(shared);
          await exportBundle(ledger, { out: join(tempDir('hl-idx-export-'), 'b'), session });
        }),
      ]);
      expect(failures.filter((f) => INDEX_CODES.has(f.split(/[: ]/)[1] ?? '') || /session-heads/.test(f))).toEqual([]);
      expect(failures).toEqual([]);
      for (const [what, n] of Object.entries(counts)) expect(n, what).toBeGreaterThan(0);
      raw.writeBatch = write;
      // Each session read again by this process, then by the next one (every head walked from the stored index).
      for (const s of [...shared, ...fresh]) await ledger.history(scope(s));
    } finally {
      await ledger.close();
    }
    const again = await open(root);
    try {
      for (const s of [...shared, ...fresh]) {
        const got = await again.resume(scope(s));
        if (shared.indexOf(s) < 3 || fresh.includes(s)) expect(got, s).toBeDefined();
      }
    } finally {
      await again.close();
    }
  }, 60_000);
});
