/**
 * SIGINT / SIGTERM and the CLI's commands on a store, in real child processes of the built CLI (dist/, `npm run build`).
 * A command still opening its store stops on the first signal: exit 130 / 143, one `CANCELLED` line on stderr, nothing
 * on stdout, nothing left behind (no staging file, no key, no lock of its own) and the next command works. The open
 * is held in a wait it cannot end by itself: the trust lock another process (this test) holds while a new store or a
 * new host key is written, or a PostgreSQL server that accepts and never answers, for every command on a store.
 * `publish` waiting for its summary (standard input held open, a FIFO with no writer or a writer that writes no more)
 * stops the same way, before the open: nothing made. After the open, `publish` stops before its append commits
 * (nothing published) and, once committed, reports the publish whatever signal came (exit 0, the receipt on stdout).
 * `demo` stops the same way at an open, a compaction's publish before its append commits, or its next step, its
 * temporary project directory removed.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stopSignals } from '../src/cli/stop-signals.js';
import { takeFileLock } from '../src/ledger/file-lock.js';
import { findAtomicStagingLeftovers } from '../store/fs/atomic-file.js';
import { digestHex, digestOf } from '../store/hash/digest.js';
import { describePostgres } from './support/postgres.js';
import { blockedOpeningFifo, openAt, polledFds, until } from './support/proc.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const HOLD_APPEND = fileURLToPath(new URL('./support/hold-publish-append.mjs', import.meta.url));
const EXITS = { SIGINT: 130, SIGTERM: 143 } as const;
const linux = process.platform === 'linux';

interface Child {
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
  stderr(): string;
  kill(signal: NodeJS.Signals): void;
  /** Ends standard input (held open with `holdStdin`). */
  endStdin(): void;
}

/**
 * The built CLI in a child process (`preload`: a module `--import`ed first); `stdin` is written and ended, or, with
 * `holdStdin`, written and held open (the child waits for more) until `endStdin`.
 */
function cli(
  args: string[],
  options: { stdin?: string; holdStdin?: boolean; env?: NodeJS.ProcessEnv; preload?: string } = {},
): Child {
  const child = spawn(process.execPath, [...(options.preload ? ['--import', options.preload] : []), CLI, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1', ...options.env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  child.stdin.on('error', () => {});
  if (options.holdStdin) child.stdin.write(options.stdin ?? '');
  else child.stdin.end(options.stdin ?? '');
  return {
    pid: child.pid!,
    exited: new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal }))),
    stdout: () => stdout,
    stderr: () => stderr,
    kill: (signal) => child.kill(signal),
    endStdin: () => child.stdin.end(),
  };
}

async function run(args: string[], stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const c = cli(args, { stdin });
  const { code } = await c.exited;
  return { code, stdout: c.stdout(), stderr: c.stderr() };
}

/** Every file and directory under `dir`, relative to it, with its size (a file's), sorted. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p);
      out.push(`${relative(dir, p)}${st.isDirectory() ? '/' : ` ${st.size}`}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

const stagingLeft = (root: string) =>
  findAtomicStagingLeftovers([root, join(root, 'keys'), join(root, 'checkpoints')], Infinity);

const interrupted = (command: string, signal: string) =>
  `handoff-ledger: CANCELLED: ${command} interrupted by ${signal} while opening the store, before it began; run it again\n`;

const summary = JSON.stringify(sampleSummary(1));
const scope = ['--principal', 'alice', '--session', 's1'];

beforeAll(() => {
  expect(existsSync(CLI), 'dist/ is built by `npm run build`').toBe(true);
});

describe.skipIf(!linux)('a command opening its store, waiting for the trust lock another process holds', () => {
  it.each([
    ['init', 'SIGINT', [] as string[]],
    ['publish', 'SIGTERM', [...scope, '--run', 'r1']],
    ['publish', 'SIGINT', [...scope, '--run', 'r1', '--json']],
  ] as const)(
    '%s stops on %s: its exit code, one CANCELLED line, no key, trust.json or staging file made, no lock kept; the same command then works',
    async (command, signal, more) => {
      const root = join(tempDir(), 'store');
      const args = [command, ...more, '--root', root, '--host', 'h1'];
      // A new store's keys and trust.json are written under the trust lock: held here, the open waits (30 s, then LOCKED).
      mkdirSync(root, { mode: 0o700 });
      const held = await takeFileLock(join(root, 'trust.json'), 'trust.json');
      let released = false;
      try {
        const child = cli(args, { stdin: summary });
        // keys/ is made before the keyring finds it must write, and then waits for the lock.
        await until(() => existsSync(join(root, 'keys')), 'the open to reach the keyring');
        await new Promise((resolve) => setTimeout(resolve, 300));
        child.kill(signal);
        const { code } = await child.exited;
        expect({ code, stderr: child.stderr() }).toEqual({ code: EXITS[signal], stderr: interrupted(command, signal) });
        // No bound on the clock (5 s failed a loaded machine): a wait that ignored the signal ends only at its 30 s
        // bound, LOCKED, which the exit and stderr above tell apart.
        // --json: the error as JSON on stdout, as for every error; else nothing there.
        if (more.includes('--json'))
          expect(JSON.parse(child.stdout())).toEqual({
            error: {
              code: 'CANCELLED',
              message: interrupted(command, signal).slice('handoff-ledger: CANCELLED: '.length, -1),
            },
          });
        else expect(child.stdout()).toBe('');
        expect(existsSync(join(root, 'trust.json'))).toBe(false);
        expect(readdirSync(join(root, 'keys'))).toEqual([]);
        expect(await stagingLeft(root)).toEqual([]);
        expect(readdirSync(join(root, 'tmp'))).toEqual([]);
        // The only lock in the root is this test's: the child took none and left none.
        expect(readdirSync(root).filter((n) => n.includes('.lock'))).toEqual(['trust.json.lock']);
      } finally {
        if (!released) await held.release();
        released = true;
      }
      // The store is free (LevelDB's lock released with the process's open): the same command works.
      const again = await run(args, summary);
      expect(again.code, again.stderr).toBe(0);
      if (command === 'publish') {
        const resumed = await run(['resume', ...scope, '--root', root, '--host', 'h1']);
        expect(resumed.code, resumed.stderr).toBe(0);
        expect(JSON.parse(resumed.stdout)).toEqual(sampleSummary(1));
      }
    },
    60_000,
  );
});

describe.skipIf(!linux)('every command on a store, opening a PostgreSQL store whose server never answers', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  it('stops on the first SIGINT or SIGTERM with 130 / 143 and one CANCELLED line, changing nothing; later commands work', async () => {
    const dir = tempDir('hl-pg-silent-');
    let accepted = 0;
    server = createServer((socket) => {
      sockets.push(socket);
      accepted++;
    });
    await new Promise<void>((resolve) => server!.listen(join(dir, '.s.PGSQL.5432'), resolve));
    const postgres = `postgresql://nobody@/db?host=${dir}`;
    // A root that has h1's key (a command other than init and publish makes none): made by the embedded store.
    const base = tempDir();
    const root = join(base, 'store');
    expect((await run(['init', '--root', root, '--host', 'h1'])).code).toBe(0);
    const before = tree(root);
    const commands: Array<[string, string[]]> = [
      ['init', ['init']],
      ['publish', ['publish', ...scope, '--run', 'r1']],
      ['resume', ['resume', ...scope]],
      ['history', ['history', ...scope]],
      ['grant', ['grant', '--principal', 'bob', '--session', 's1']],
      ['revoke', ['revoke', '--principal', 'bob', '--session', 's1']],
      ['grants', ['grants']],
      ['keys list', ['keys', 'list']],
      ['keys rotate', ['keys', 'rotate']],
      ['checkpoint', ['checkpoint']],
      ['prove consistency', ['prove', 'consistency', '0']],
      ['fsck', ['fsck']],
      ['gc', ['gc', '--grace', '1h']],
      ['export', ['export', '--out', join(base, 'bundle')]],
    ];
    let i = 0;
    for (const [command, args] of commands) {
      const signal = i++ % 2 === 0 ? 'SIGINT' : 'SIGTERM';
      const seen = accepted;
      const child = cli([...args, '--root', root, '--host', 'h1', '--postgres', postgres], { stdin: summary });
      // Connected: the open waits for the server's answer (10 s, then a connection error).
      await until(() => accepted > seen, `${command} to connect`);
      child.kill(signal);
      const { code } = await child.exited;
      expect({ command, code, stderr: child.stderr(), stdout: child.stdout() }).toEqual({
        command,
        code: EXITS[signal],
        stderr: interrupted(command, signal),
        stdout: '',
      });
      // No bound on the clock (5 s failed a loaded machine): an open that ignored the signal ends only at the 10 s
      // connection timeout, with a connection error, which the exit and stderr above tell apart.
      expect(tree(root), command).toEqual(before);
    }
    expect(existsSync(join(base, 'bundle'))).toBe(false);
    // Nothing was held: the embedded store opens, and reads and writes.
    const published = await run(['publish', ...scope, '--run', 'r1', '--root', root, '--host', 'h1'], summary);
    expect(published.code, published.stderr).toBe(0);
    const history = await run(['history', ...scope, '--root', root, '--host', 'h1']);
    expect(history.code, history.stderr).toBe(0);
    expect(history.stdout.split('\n').filter(Boolean)).toHaveLength(1);
  }, 120_000);
});

describePostgres(
  "a command opening a shared PostgreSQL store, waiting for the pin's lock another process holds",
  (pg) => {
    it.each(['SIGINT', 'SIGTERM'] as const)(
      '%s ends the wait: its exit code, one CANCELLED line, nothing pinned, no lock of its own left; init then works',
      async (signal) => {
        const root = join(tempDir(), 'a');
        const origin = 'example.com/cli-pin';
        const args = [
          'init',
          '--root',
          root,
          '--host',
          'host-a',
          '--postgres',
          pg.connectionString,
          '--origin',
          origin,
        ];
        const pins = join(root, 'checkpoints');
        const pin = join(pins, `${digestHex(digestOf(new TextEncoder().encode(origin)))}.pin`);
        mkdirSync(pins, { recursive: true, mode: 0o700 });
        // Another process of this root pinning: the open's first pin waits for its lock (30 s, then LOCKED).
        const held = await takeFileLock(pin, 'the pinned checkpoint', { staleMs: 10_000 });
        try {
          const child = cli(args);
          // trust.json is written before the guard pins: the open is at the pin's lock, or about to be.
          await until(() => existsSync(join(root, 'trust.json')), 'the open to reach the pin');
          await new Promise((resolve) => setTimeout(resolve, 300));
          child.kill(signal);
          const { code } = await child.exited;
          expect({ code, stderr: child.stderr(), stdout: child.stdout() }).toEqual({
            code: EXITS[signal],
            stderr: interrupted('init', signal),
            stdout: '',
          });
          // No bound on the clock (5 s failed a loaded machine): a wait that ignored the signal ends only at its 30 s
          // bound, LOCKED, which the exit and stderr above tell apart.
          expect(existsSync(pin)).toBe(false);
          expect(readdirSync(pins)).toEqual([`${pin.split('/').at(-1)}.lock`]);
          expect(await stagingLeft(root)).toEqual([]);
        } finally {
          await held.release();
        }
        const again = await run(args);
        expect(again.code, again.stderr).toBe(0);
        expect(existsSync(pin)).toBe(true);
        const published = await run(
          // A session of this case's own: the other case's root holds another key of host-a, not trusted here.
          [
            'publish',
            '--principal',
            'alice',
            '--session',
            `s-${signal}`,
            '--run',
            'r1',
            '--root',
            root,
            '--host',
            'host-a',
            '--postgres',
            pg.connectionString,
          ],
          summary,
        );
        expect(published.code, published.stderr).toBe(0);
      },
      60_000,
    );
  },
  'cli_stop_signals_test',
);

describe.skipIf(!linux)('publish waiting for its summary, before the open', () => {
  const readInterrupted = (signal: string) =>
    `publish interrupted by ${signal} while reading the summary, before it began; nothing was published`;

  it.each([
    ['SIGINT', false],
    ['SIGTERM', true],
  ] as const)(
    'on a standard input held open (half a summary written): %s (--json %s) ends the wait with its exit code, one CANCELLED line, nothing made; publish then works',
    async (signal, json) => {
      const root = join(tempDir(), 'store');
      const args = ['publish', ...scope, '--run', 'r1', '--root', root, '--host', 'h1', ...(json ? ['--json'] : [])];
      const child = cli(args, { stdin: summary.slice(0, 20), holdStdin: true });
      try {
        // Its event loop polls standard input: the read has begun, and waits for the rest.
        await until(() => polledFds(child.pid).includes(0), 'the child to read standard input');
        child.kill(signal);
        const { code } = await child.exited;
        expect({ code, stderr: child.stderr() }).toEqual({
          code: EXITS[signal],
          stderr: `handoff-ledger: CANCELLED: ${readInterrupted(signal)}\n`,
        });
        if (json)
          expect(JSON.parse(child.stdout())).toEqual({
            error: { code: 'CANCELLED', message: readInterrupted(signal) },
          });
        else expect(child.stdout()).toBe('');
        expect(existsSync(root)).toBe(false);
      } finally {
        child.endStdin();
      }
      const again = await run(
        args.filter((a) => a !== '--json'),
        summary,
      );
      expect(again.code, again.stderr).toBe(0);
      const history = await run(['history', ...scope, '--root', root, '--host', 'h1']);
      expect(history.stdout.split('\n').filter(Boolean)).toHaveLength(1);
    },
    60_000,
  );

  it.each([
    ['SIGTERM', 'no writer yet'],
    ['SIGINT', 'no writer yet'],
    ['SIGTERM', 'a writer that wrote half a summary and holds it open'],
  ] as const)(
    'FILE a FIFO with %s, %s: its exit code, one CANCELLED line, nothing made; publish then works',
    async (signal, writer) => {
      const at = tempDir();
      const fifo = join(at, 'summary.fifo');
      execFileSync('mkfifo', [fifo]);
      const root = join(at, 'store');
      const args = ['publish', ...scope, '--run', 'r1', '--root', root, '--host', 'h1', fifo];
      let holder: ChildProcess | undefined;
      if (writer !== 'no writer yet') {
        holder = spawn(
          process.execPath,
          [
            '-e',
            `const fs = require('fs'); const fd = fs.openSync(process.argv[1], 'w'); fs.writeSync(fd, process.argv[2]);
             process.stdout.write('written'); setInterval(() => {}, 1000);`,
            fifo,
            summary.slice(0, 20),
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
      }
      let written = '';
      holder?.stdout?.on('data', (d) => (written += d));
      try {
        const child = cli(args);
        // The child has reached the FIFO: it has it open (and, with a writer, that writer has written), or a thread of
        // it is blocked in its open.
        await until(
          () => openAt(child.pid, fifo).length > 0 || blockedOpeningFifo(child.pid),
          'the child to open the FIFO',
        );
        if (holder) await until(() => written === 'written', 'the writer to write');
        child.kill(signal);
        const { code } = await child.exited;
        expect({ code, stderr: child.stderr(), stdout: child.stdout() }).toEqual({
          code: EXITS[signal],
          stderr: `handoff-ledger: CANCELLED: ${readInterrupted(signal)}\n`,
          stdout: '',
        });
        expect(existsSync(root)).toBe(false);
      } finally {
        holder?.kill('SIGKILL');
      }
      const again = await run(args.slice(0, -1), summary);
      expect(again.code, again.stderr).toBe(0);
    },
    60_000,
  );
});

describe.skipIf(!linux)('publish after its open', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'stopped by %s before its append commits: its exit code, CANCELLED, nothing published; publish then works',
    async (signal) => {
      const root = join(tempDir(), 'store');
      const args = ['publish', ...scope, '--run', 'r1', '--root', root, '--host', 'h1'];
      const child = cli(args, { stdin: summary, preload: HOLD_APPEND, env: { HOLD_APPEND: 'before' } });
      await until(() => child.stderr().includes('append held'), 'the append');
      child.kill(signal);
      const { code } = await child.exited;
      expect({ code, stderr: child.stderr(), stdout: child.stdout() }).toEqual({
        code: EXITS[signal],
        stderr: `append held\nhandoff-ledger: CANCELLED: publish interrupted by ${signal} before its append committed; nothing was published\n`,
        stdout: '',
      });
      const history = await run(['history', ...scope, '--root', root, '--host', 'h1']);
      expect(history).toMatchObject({ code: 0, stdout: '' });
      const again = await run(args, summary);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^published s1 seq 0\n/);
    },
    60_000,
  );

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'a %s that comes once the append has committed changes nothing: the receipt, exit 0',
    async (signal) => {
      const root = join(tempDir(), 'store');
      const args = ['publish', ...scope, '--run', 'r1', '--root', root, '--host', 'h1'];
      const child = cli(args, { stdin: summary, preload: HOLD_APPEND, env: { HOLD_APPEND: 'after' } });
      await until(() => child.stderr().includes('append held'), 'the append');
      child.kill(signal);
      const { code } = await child.exited;
      expect({ code, stderr: child.stderr() }).toEqual({ code: 0, stderr: 'append held\n' });
      expect(child.stdout()).toMatch(/^published s1 seq 0\nmanifest blake3:[0-9a-f]{64}\n/);
      const history = await run(['history', ...scope, '--root', root, '--host', 'h1']);
      expect(history.stdout.split('\n').filter(Boolean)).toHaveLength(1);
    },
    60_000,
  );
});

describe.skipIf(!linux)('demo', () => {
  /** The demo's temporary project directories under `dir` (its TMPDIR). */
  const projects = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('handoff-demo-project-'));

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'stopped by %s at its first compaction, before the append commits: its exit code, one CANCELLED line, its project directory removed; the store is free and demo then works',
    async (signal) => {
      const base = tempDir();
      const tmp = join(base, 'tmp');
      mkdirSync(tmp, { mode: 0o700 });
      const root = join(base, 'store');
      const env = { TMPDIR: tmp, HOLD_APPEND: 'before' };
      const child = cli(['demo', '--root', root], { preload: HOLD_APPEND, env });
      await until(() => child.stderr().includes('append held'), 'the append');
      expect(projects(tmp)).toHaveLength(1);
      child.kill(signal);
      const { code } = await child.exited;
      expect({ code, stderr: child.stderr() }).toEqual({
        code: EXITS[signal],
        stderr: `append held\nhandoff-ledger: CANCELLED: demo interrupted by ${signal}; its temporary project directory was removed (what it published before stays in the store)\n`,
      });
      expect(child.stdout()).not.toContain('demo complete');
      expect(projects(tmp)).toEqual([]);
      // The store is free (the ledger closed: LevelDB's lock released).
      const grants = await run(['grants', '--principal', 'demo-user', '--root', root, '--host', 'demo-host']);
      expect(grants.code, grants.stderr).toBe(0);
      const again = cli(['demo', '--root', root], { env: { TMPDIR: tmp } });
      expect((await again.exited).code, again.stderr()).toBe(0);
      expect(again.stdout()).toContain('demo complete');
      expect(projects(tmp)).toEqual([]);
    },
    60_000,
  );

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'stopped by %s while its open waits for the trust lock of a new store: its exit code, one CANCELLED line, no key made, its project directory removed',
    async (signal) => {
      const base = tempDir();
      const tmp = join(base, 'tmp');
      mkdirSync(tmp, { mode: 0o700 });
      const root = join(base, 'store');
      mkdirSync(root, { mode: 0o700 });
      // A new store's first open writes its keys and trust.json under the trust lock: held here, it waits.
      const held = await takeFileLock(join(root, 'trust.json'), 'trust.json');
      try {
        const child = cli(['demo', '--root', root], { env: { TMPDIR: tmp } });
        await until(() => existsSync(join(root, 'keys')), 'the open');
        await new Promise((resolve) => setTimeout(resolve, 200));
        child.kill(signal);
        const { code } = await child.exited;
        expect({ code, stderr: child.stderr() }).toEqual({
          code: EXITS[signal],
          stderr: `handoff-ledger: CANCELLED: demo interrupted by ${signal}; its temporary project directory was removed (what it published before stays in the store)\n`,
        });
        expect(readdirSync(join(root, 'keys'))).toEqual([]);
        expect(existsSync(join(root, 'trust.json'))).toBe(false);
        expect(projects(tmp)).toEqual([]);
      } finally {
        await held.release();
      }
    },
    60_000,
  );
});

describe('the stop signals every stopping command listens with (stopSignals)', () => {
  // README, exit codes 130 / 143: "a second signal, of either kind, ends it at once". The first signal of either kind
  // takes both listeners off, so a second one meets Node's default (the process ends), however long the stopping
  // takes. The listeners are called directly: emitting the signal would reach the test runner's own too.
  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
  ] as const)('the first %s aborts with its reason and leaves no listener for either signal', (first, other) => {
    const before = { [first]: process.listeners(first), [other]: process.listeners(other) };
    const stop = stopSignals('fsck');
    try {
      const added = process.listeners(first).filter((l) => !before[first]!.includes(l));
      expect(added).toHaveLength(1);
      expect(process.listeners(other).filter((l) => !before[other]!.includes(l))).toHaveLength(1);
      (added[0] as (signal: string) => void)(first);
      expect(stop.signal.aborted).toBe(true);
      expect((stop.signal.reason as Error).message).toBe(`fsck interrupted by ${first}`);
      expect(stop.stoppedBy()).toBe(first);
      expect(process.listeners(first)).toEqual(before[first]);
      expect(process.listeners(other)).toEqual(before[other]);
    } finally {
      stop.dispose();
    }
  });
});
