/**
 * Crash consistency. Child processes publish in a loop (crash-child.mjs) and are SIGKILLed
 * at random moments — while opening (recovering), mid-publish, mid-fsync, mid-commit. After each kill
 * the store is reopened and checked (crash-check.ts): nothing acknowledged is lost, nothing half
 * published is visible, every manifest and blob verifies, recovery leaves no staging files.
 * 200 kills in `npm test`, 2,000 in `npm run test:soak`. Children run the compiled ledger in dist/
 * (`npm test` builds it first).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  checkAfterKill,
  checkWholeStore,
  noCrashFigures,
  openCrashStore,
  type Ack,
  type CrashFigures,
} from './crash-check.js';
import { counter, recordFigures, SOAK } from './figures.js';
import { stagingFiles, Tally } from './store-support.js';
import { tempDir } from '../support/tmp.js';
import { mulberry32 } from '../support/prng.mjs';

const CHILD = fileURLToPath(new URL('./crash-child.mjs', import.meta.url));
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const DIST = join(REPO, 'dist', 'src', 'index.js');

/** Sources newer than their compiled JS: the children would test old code. */
function staleDist(): string[] {
  const stale: string[] = [];
  for (const dir of ['store', 'manifests', 'src']) {
    for (const rel of readdirSync(join(REPO, dir), { recursive: true }) as string[]) {
      if (!rel.endsWith('.ts') || rel.endsWith('.d.ts')) continue;
      const js = statSync(join(REPO, 'dist', dir, rel.replace(/\.ts$/, '.js')), { throwIfNoEntry: false });
      if (!js || js.mtimeMs < statSync(join(REPO, dir, rel)).mtimeMs) stale.push(`${dir}/${rel}`);
    }
  }
  return stale;
}
/** HANDOFF_LEDGER_CRASH_KILLS overrides the count (to replay a seed quickly); the defaults are the contract. */
const KILLS = Number(process.env.HANDOFF_LEDGER_CRASH_KILLS ?? (SOAK ? 2000 : 200));
const KILLS_PER_STORE = SOAK ? 100 : 50;
/** Kills of children that publish only large summaries. */
const LARGE_KILLS = SOAK ? 200 : 30;
/**
 * A child opens in ~100 ms (more under load) and then publishes every few ms. A quarter of the kills
 * land anywhere from `go` on (mostly in open = recovery); the rest up to MAX_PUBLISHING_MS into publishing.
 */
const MAX_PUBLISHING_MS = 200;
const SEED = Number(process.env.HANDOFF_LEDGER_CRASH_SEED ?? Date.now() % 1_000_000);

const tally = new Tally();
const fig: CrashFigures = noCrashFigures();
const phases = counter();
const timing = counter();
const timed = counter();
function time(key: string, ms: number): void {
  timing.add(key, ms);
  timed.add(key);
}
const totals = {
  kills: 0,
  largeKills: 0,
  /** Kills added by topUp on a loaded machine (included in kills). */
  topUpKills: 0,
  acks: 0,
  largeAcks: 0,
  committed: 0,
  stagingRemovedByChildren: 0,
  stores: 0,
};
const started = Date.now();

const random = mulberry32(SEED);

/** `mixed`: 100 B – 12 MiB, mostly small; `large`: only 9–12 MiB summaries (streamed, flush-behind). */
type Mode = 'mixed' | 'large';

/** One child: spawned early so its module loading overlaps the previous child's run. */
class Child {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly acks: Ack[] = [];
  readonly loaded: Promise<void>;
  readonly exited: Promise<number | null>;
  opened: { stagingRemoved: number } | undefined;
  failure: string | undefined;
  private stderr = '';
  private markOpened!: () => void;
  readonly openedSignal = new Promise<void>((resolve) => (this.markOpened = resolve));
  readonly spawnedAt = performance.now();
  loadedAt = 0;
  goAt = 0;
  openedAt = 0;

  constructor(
    readonly n: number,
    mode: Mode,
  ) {
    this.proc = spawn(process.execPath, [CHILD, String(n), String(SEED * 7919 + n), mode], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.proc.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
    let markLoaded!: () => void;
    this.loaded = new Promise((resolve) => (markLoaded = resolve));
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      let ev: { t: string } & Record<string, unknown>;
      try {
        ev = JSON.parse(line);
      } catch {
        return; // a line cut by the kill was never an acknowledgement
      }
      if (ev.t === 'loaded') {
        this.loadedAt = performance.now();
        markLoaded();
      } else if (ev.t === 'open') {
        this.opened = ev.recovery as { stagingRemoved: number };
        this.openedAt = performance.now();
        this.markOpened();
      } else if (ev.t === 'ack') this.acks.push(ev as unknown as Ack);
      else if (ev.t === 'error') this.failure = `child ${n} publish failed: ${line}`;
    });
    this.exited = new Promise((resolve) => this.proc.on('close', (code) => resolve(code)));
    this.proc.stdin.on('error', () => {});
  }

  go(root: string): void {
    this.goAt = performance.now();
    this.proc.stdin.write(`${root}\n`);
  }

  /** Waits for `after` (if given) and then `ms` more, then SIGKILLs; reports a child that died by itself. */
  async killAfter(ms: number, after?: Promise<void>): Promise<void> {
    const wait = (after ?? Promise.resolve()).then(() => new Promise<false>((r) => setTimeout(() => r(false), ms)));
    const died = await Promise.race([this.exited.then(() => true), wait]);
    if (died) throw new Error(`child ${this.n} exited before it was killed: ${this.failure ?? ''}\n${this.stderr}`);
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  async whenLoaded(): Promise<void> {
    const timeout = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`child ${this.n} did not load:\n${this.stderr}`)), 60_000),
    );
    await Promise.race([
      this.loaded,
      timeout,
      this.exited.then(() => Promise.reject(new Error(`child ${this.n} exited:\n${this.stderr}`))),
    ]);
  }
}

async function newStore(): Promise<string> {
  const root = tempDir('hl-crash-');
  // The key and trust file exist before the first kill; crashes are about publishing, not key generation.
  await (await openCrashStore(root)).close();
  totals.stores++;
  return root;
}

/**
 * `kills` cycles of: start a child on the store, SIGKILL it at a random moment, let the next child (and,
 * every third kill, the parent) recover and check; every KILLS_PER_STORE kills the whole store is
 * checked and replaced.
 */
async function crashRun(kills: number, mode: Mode, maxPublishingMs: number): Promise<void> {
  let root = await newStore();
  let storeAcks: Ack[] = [];
  let unchecked: Ack[] = [];
  // Two children load ahead: module loading (~0.5 s) is the slowest step of a cycle.
  let next = totals.kills;
  const warm = [new Child(next++, mode), new Child(next++, mode)];
  try {
    for (let k = 0; k < kills; k++) {
      const child = warm.shift()!;
      await child.whenLoaded();
      warm.push(new Child(next++, mode));
      const staged = stagingFiles(root).length;
      child.go(root);
      const anywhere = random() < 0.25;
      await child.killAfter(
        random() * (anywhere ? 150 + maxPublishingMs : maxPublishingMs),
        anywhere ? undefined : child.openedSignal,
      );
      totals.kills++;
      if (mode === 'large') totals.largeKills++;
      time('child load (spawn → loaded)', child.loadedAt - child.spawnedAt);
      if (child.opened) time('child open (go → opened)', child.openedAt - child.goAt);
      expect(child.failure, child.failure).toBeUndefined();
      phases.add(
        child.opened ? (child.acks.length > 0 ? 'publishing' : 'opened, before the first ack') : 'opening (recovery)',
      );
      if (child.opened) {
        // This child's own open was the recovery of the previous kill.
        tally.right(
          child.opened.stagingRemoved === staged,
          `child ${k} recovery removed ${child.opened.stagingRemoved} of ${staged} staging files`,
        );
        totals.stagingRemovedByChildren += child.opened.stagingRemoved;
      }
      storeAcks.push(...child.acks);
      unchecked.push(...child.acks);
      totals.acks += child.acks.length;
      totals.largeAcks += child.acks.filter((a) => a.size > 8 * 1024 * 1024).length;
      // Every third kill the parent reopens and checks; in between, the next child recovers on its own.
      if (k % 3 === 2 || (k + 1) % KILLS_PER_STORE === 0) {
        const t = performance.now();
        await checkAfterKill(root, unchecked, tally, fig);
        time('parent check after a kill', performance.now() - t);
        unchecked = [];
      }
      if ((k + 1) % KILLS_PER_STORE === 0 || k + 1 === kills) {
        totals.committed += await checkWholeStore(root, storeAcks, tally, fig);
        rmSync(root, { recursive: true, force: true });
        if (k + 1 < kills) root = await newStore();
        storeAcks = [];
      }
    }
  } finally {
    for (const c of warm) c.proc.kill('SIGKILL');
    await Promise.all(warm.map((c) => c.exited));
  }
}

/**
 * Liveness, not safety: a loaded machine publishes less before each kill, so when a run acknowledged too few
 * publishes to have exercised publishing, up to four more rounds of 10 kills each give the children twice the
 * time of the round before. Every added kill is checked like the others; the floors below still have to be met.
 */
async function topUp(enough: () => boolean, mode: Mode, maxPublishingMs: number): Promise<void> {
  for (let round = 1; !enough() && round <= 4; round++) {
    totals.topUpKills += 10;
    await crashRun(10, mode, maxPublishingMs * 2 ** round);
  }
}

describe('crash consistency under SIGKILL', () => {
  it(
    `loses nothing acknowledged and shows nothing half-published across ${KILLS} kills (seed ${SEED})`,
    async () => {
      expect(existsSync(DIST), 'dist/ is missing: run `npm run build` (npm test does it in pretest)').toBe(true);
      expect(
        staleDist(),
        'dist/ is older than these sources: run `npm run build` (npm test does it in pretest)',
      ).toEqual([]);
      const before = totals.acks;
      await crashRun(KILLS, 'mixed', MAX_PUBLISHING_MS);
      await topUp(() => totals.acks - before > KILLS, 'mixed', MAX_PUBLISHING_MS);
      expect(tally.losses).toBe(0);
      expect(tally.wrongAnswers).toBe(0);
      expect(totals.acks - before).toBeGreaterThan(KILLS);
      // Mostly small summaries: most were committed inline, in the manifest's own batch, and survived the kills.
      expect(fig.inlineBlobsVerified).toBeGreaterThan(0);
    },
    SOAK ? 3_600_000 : 600_000,
  );

  it(
    `streams 9–12 MiB summaries (flush-behind fsyncs) and still loses nothing across ${LARGE_KILLS} kills (seed ${SEED})`,
    async () => {
      expect(
        staleDist(),
        'dist/ is older than these sources: run `npm run build` (npm test does it in pretest)',
      ).toEqual([]);
      const before = totals.largeAcks;
      // A 9–12 MiB publish takes ~60–150 ms here: kills land before, inside and after its writes and fsyncs.
      await crashRun(LARGE_KILLS, 'large', 800);
      await topUp(() => totals.largeAcks - before > 0, 'large', 800);
      expect(tally.losses).toBe(0);
      expect(tally.wrongAnswers).toBe(0);
      expect(totals.largeAcks - before).toBeGreaterThan(0);
    },
    SOAK ? 3_600_000 : 600_000,
  );
});

afterAll(async () => {
  await recordFigures({
    suite: 'crash',
    title:
      `Children publish (1–3 concurrent writers, 6 sessions, 100 B – 12 MiB, 3% over 8 MiB; then children that publish only ` +
      `9–12 MiB summaries, streamed with a flush-behind fsync) and are SIGKILLed at random: a quarter anywhere from ` +
      `start (mostly during open = recovery), the rest 0–${MAX_PUBLISHING_MS} ms (large: 0–800 ms) into publishing; ` +
      `every ${KILLS_PER_STORE} kills the store is checked whole (chains, blobs, offline audit) and replaced. Seed ${SEED}.`,
    durationMs: Date.now() - started,
    kills: totals.kills,
    losses: tally.losses,
    wrongAnswers: tally.wrongAnswers,
    details: {
      'acknowledged publishes (all found intact)': totals.acks,
      'of them over 8 MiB (streamed, with a flush-behind fsync)': totals.largeAcks,
      'kills of children publishing only 9–12 MiB summaries': totals.largeKills,
      'kills added because a loaded machine acknowledged too few publishes': totals.topUpKills,
      'committed manifests (acknowledged or cut off before the ack)': totals.committed,
      ...Object.fromEntries(Object.entries(phases.counts).map(([k, v]) => [`kills while ${k}`, v])),
      'staging files removed by recovery (parent reopen)': fig.stagingRemovedAtReopen,
      'staging files removed by recovery (next child)': totals.stagingRemovedByChildren,
      'manifests verified (ledger history)': fig.manifestsVerified,
      'manifests verified (offline audit)': fig.auditedManifests,
      'blobs re-hashed': fig.blobsVerified,
      'of them inline in the log': fig.inlineBlobsVerified,
      'longest chain': fig.longestChain,
      stores: totals.stores,
      ...Object.fromEntries(
        Object.entries(timing.counts).map(([k, v]) => [`mean ${k}, ms`, Math.round(v / timed.counts[k]!)]),
      ),
      'checks made': tally.checks,
    },
  });
});
