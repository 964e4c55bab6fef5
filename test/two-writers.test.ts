/**
 * Two writer processes on one store. Embedded (LevelDB): while one process publishes (large summaries, so its staging
 * files are in flight), every other opener — this process's openLedger, the CLI in a process of its own — is refused
 * `LOCKED` at once (docs/ARCHITECTURE.md, "Storage": the log's lock is taken before staging files are cleared) and
 * damages nothing: the writer goes on publishing, and once it is SIGKILLed the store opens, recovers and checks whole
 * (test/reliability/crash-check.ts). PostgreSQL: two processes publish 50 summaries each into one session at once,
 * each with the expectedPrev of the head it read, retrying a CHAIN_CONFLICT: the chain is one line with exactly as
 * many manifests as publishes landed, and a refused publish wrote nothing.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import {
  checkAfterKill,
  checkWholeStore,
  noCrashFigures,
  openCrashStore,
  type Ack,
  type CrashFigures,
} from './reliability/crash-check.js';
import { stagingFiles, Tally } from './reliability/store-support.js';
import { startLineChild } from './support/line-child.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CRASH_CHILD = fileURLToPath(new URL('./reliability/crash-child.mjs', import.meta.url));
const RACER = fileURLToPath(new URL('./support/session-racer.mjs', import.meta.url));
const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

/** Runs the CLI in a process of its own, `input` on its standard input. */
function cliProcess(args: string[], input: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stderr }));
    child.stdin.end(input);
  });
}

describe('a second process opening an embedded store another process writes', () => {
  it('is refused LOCKED at once, every time, and damages nothing of the first one’s publishes in flight', async () => {
    expect(existsSync(CLI), 'dist/ is missing: run `npm run build` (npm test does it in pretest)').toBe(true);
    const root = tempDir('hl-two-writers-');
    await (await openCrashStore(root)).close();
    // The writer: crash-child.mjs publishing 128 KiB – 1 MiB summaries (each through a staging file) until it is killed.
    const writer: ChildProcessWithoutNullStreams = spawn(process.execPath, [CRASH_CHILD, '0', '4242', 'staged']);
    let stderr = '';
    writer.stderr.on('data', (d) => (stderr += d));
    const acks: Ack[] = [];
    const failures: string[] = [];
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    createInterface({ input: writer.stdout }).on('line', (line) => {
      let ev: { t: string };
      try {
        ev = JSON.parse(line) as { t: string };
      } catch {
        return; // cut by the kill
      }
      if (ev.t === 'loaded') writer.stdin.write(`${root}\n`);
      else if (ev.t === 'open') opened();
      else if (ev.t === 'ack') acks.push(ev as unknown as Ack);
      else if (ev.t === 'error') failures.push(line);
    });
    const exited = new Promise<void>((resolve) => writer.on('close', () => resolve()));
    try {
      await Promise.race([
        open,
        exited.then(() => Promise.reject(new Error(`the writer exited before it opened:\n${stderr}`))),
      ]);
      let whileStaging = 0;
      for (let attempt = 0; attempt < 20 || whileStaging === 0 || acks.length === 0; attempt++) {
        if (attempt >= 200) throw new Error(`the writer never had staging files in flight (${acks.length} acks)`);
        const staged = stagingFiles(root).length;
        const err = (await openCrashStore(root).then(
          async (l) => {
            await l.close();
            return undefined;
          },
          (e: unknown) => e,
        )) as { name?: string; code?: string; message?: string } | undefined;
        // (Opened: the writer is gone, its lock with it; its failures say why.)
        expect(
          err,
          `a second opener of a store another process writes; the writer: ${failures.join('\n')}`,
        ).toMatchObject({
          name: 'ManifestError',
          code: 'LOCKED',
          message: expect.stringMatching(/another process/),
        });
        if (staged > 0 && stagingFiles(root).length > 0) whileStaging++;
        await new Promise((r) => setTimeout(r, 10 + (attempt % 5) * 10));
      }
      // The CLI, a process of its own, is refused the same way (exit 2), publishing nothing.
      const cli = await cliProcess(
        [
          'publish',
          '--root',
          root,
          '--host',
          'crash-host',
          '--principal',
          'owner-0',
          '--session',
          'session-0',
          '--run',
          'r',
        ],
        JSON.stringify(sampleSummary('second writer')),
      );
      expect(`${cli.code} ${cli.stderr}`).toMatch(/^2 handoff-ledger: LOCKED: /);
      // The writer went on publishing throughout: nothing it had in flight was taken from it.
      expect(failures).toEqual([]);
      expect(writer.exitCode).toBeNull();
      writer.kill('SIGKILL');
      await exited;
    } finally {
      if (writer.exitCode === null) writer.kill('SIGKILL');
      await exited;
    }
    expect(acks.length).toBeGreaterThan(0);
    // Once its holder is gone (killed, lock and all), the store opens: recovery clears the staging files, every
    // acknowledged publish is there and verifies, and the whole store checks (chains, blobs, offline audit).
    const tally = new Tally();
    const fig: CrashFigures = noCrashFigures();
    await checkAfterKill(root, acks, tally, fig);
    const committed = await checkWholeStore(root, acks, tally, fig);
    expect(committed - acks.length).toBeLessThanOrEqual(3); // at most the writer's publishes cut before their acks
    const ledger = await openCrashStore(root);
    try {
      expect((await fsck(ledger)).findings).toEqual([]);
    } finally {
      await ledger.close();
    }
    expect([tally.losses, tally.wrongAnswers]).toEqual([0, 0]);
  }, 60_000);
});

interface RacerMsg {
  type: 'ready' | 'ack' | 'conflict' | 'fail' | 'done';
  i?: number;
  seq?: number;
  id?: string;
  prev?: string | null;
  code?: string;
  error?: string;
}

describePostgres('two processes publishing into one session of a PostgreSQL store at once', (pg) => {
  const COUNT = 50;

  it(`each of ${COUNT} publishes per process lands or is CHAIN_CONFLICT; the chain is one line of exactly the landed ones`, async () => {
    expect(existsSync(CLI), 'dist/ is missing: run `npm run build` (npm test does it in pretest)').toBe(true);
    const root = tempDir();
    const schema = `two_writers_${process.pid}`;
    const postgres = { connectionString: pg.connectionString, schema };
    // The root's key, trust.json and pin, made before the writers start; both processes share them.
    const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
    try {
      const racers = ['a', 'b'].map((name) => ({
        name,
        ...startLineChild<RacerMsg>(
          RACER,
          { root, host: 'h', ...postgres, session: 's', count: COUNT, name },
          `racer ${name}`,
        ),
      }));
      let results: RacerMsg[][];
      try {
        await Promise.all(racers.map((r) => r.ready));
        for (const r of racers) r.child.stdin.end('go\n');
        results = await Promise.all(racers.map((r) => r.done));
      } finally {
        for (const r of racers) r.kill();
      }
      for (const [k, messages] of results.entries()) {
        // Every publish either landed or was refused CHAIN_CONFLICT (and retried): nothing else.
        expect(
          messages.filter((m) => m.type === 'fail'),
          racers[k]!.name,
        ).toEqual([]);
        expect(messages.at(-1)?.type).toBe('done');
        expect(messages.filter((m) => m.type === 'ack').map((m) => m.i)).toEqual([...Array(COUNT).keys()]);
      }
      const acks = results.flat().filter((m) => m.type === 'ack');
      const conflicts = results.flat().filter((m) => m.type === 'conflict');
      // They really raced for one head.
      expect(conflicts.length).toBeGreaterThan(0);

      // history() verifies every signature and every prev link up to the head: one line, no fork, no gap.
      const chain = await ledger.history({ principal: 'alice', session: 's' });
      expect(chain.map((e) => e.manifest.seq)).toEqual([...Array(2 * COUNT).keys()]);
      // Exactly the landed publishes, each where its receipt says, built on the head its process expected.
      expect(chain.length).toBe(acks.length);
      for (const a of acks) {
        expect(chain[a.seq!]!.id).toBe(a.id);
        expect(chain[a.seq!]!.manifest.prev).toBe(a.prev);
      }
      // A refused publish wrote nothing: no entry, no inline summary, no blob beyond those of the chain.
      const count = async (table: string) =>
        Number((await sqlOn<{ n: string }>(pg.connectionString, `SELECT count(*) AS n FROM ${schema}.${table}`))[0]!.n);
      expect(await count('entries')).toBe(2 * COUNT);
      expect(await count('inline_blobs')).toBe(2 * COUNT);
      expect(await count('blobs')).toBe(0);
      expect((await ledger.log.treeHead()).size).toBe(2 * COUNT);
      const report = await fsck(ledger);
      expect(report.findings).toEqual([]);
      expect(report.manifests).toBe(2 * COUNT);
    } finally {
      await ledger.close();
    }
  }, 90_000);
});
