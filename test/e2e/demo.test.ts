/** `handoff-ledger demo` (the `npm start` job), run end to end into a temporary store. */
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { runDemo, shellWord } from '../../src/cli/demo-scenario.js';
import { run } from '../../src/cli/demo.js';
import { main } from '../../src/cli/main.js';
import { openLedger } from '../../src/ledger/open.js';

let base: string;
beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), 'handoff-demo-test-'));
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

function collector(): Writable & { text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return Object.assign(stream, { text: () => chunks.join('') });
}

/** The label column of each printed line, in order (blank labels continue the previous step). */
const steps = (text: string) =>
  text
    .split('\n')
    .map((l) => l.slice(0, 10).trim())
    .filter((l) => l !== '');

describe('runDemo', () => {
  it('prints each step and leaves two verified compactions in the store', async () => {
    const root = join(base, 'store');
    const out = collector();

    const report = await runDemo({ root, out });

    const text = out.text();
    expect(steps(text)).toEqual([
      'handoff-le',
      'store',
      'account',
      'session',
      'turn 1',
      'turn 2',
      'turn 3',
      'turn 4',
      'turn 5',
      'threshold',
      'published',
      'restart',
      'resume',
      'user',
      'model',
      'turn 6',
      'user',
      'published',
      'restart',
      'resume',
      'user',
      'model',
      'account',
      'demo compl',
      'look at it',
    ]);
    expect(text).toMatch(/write README\.md → ok/);
    expect(text).toMatch(/HANDOFF\.md → denied: outside_allowed_roots/);
    expect(text).toMatch(/auto compaction seq 0: manifest blake3:[0-9a-f]{64}/);
    expect(text).toMatch(/manual compaction seq 1: manifest blake3:[0-9a-f]{64}/);
    expect(text).toMatch(/turn 5 +\d+\/1000 tokens \((7\d|8\d|9\d)%\)/);
    expect(report.answers).toEqual([
      'Next I will: Add full jitter to the backoff delay.',
      'Next I will: Document the retry options in README.md.',
    ]);

    // The store holds what the demo printed, and it verifies on a fresh open.
    const ledger = await openLedger({ root, host: 'demo-host', onNotice: () => {} });
    try {
      const history = await ledger.history({ principal: 'demo-user', session: report.session });
      expect(history.map((h) => h.id)).toEqual(report.published.map((p) => p.id));
      expect(history.map((h) => [h.manifest.seq, h.manifest.host, h.manifest.principal])).toEqual([
        [0, 'demo-host', 'demo-user'],
        [1, 'demo-host', 'demo-user'],
      ]);
    } finally {
      await ledger.close();
    }
  });

  it('runs again on the same store in a new session', async () => {
    const root = join(base, 'store');
    const first = await runDemo({ root, out: collector() });
    const second = await runDemo({ root, out: collector() });
    expect(second.session).not.toBe(first.session);
    expect(second.published.map((p) => p.seq)).toEqual([0, 1]);
  });
});

describe('handoff-ledger demo (command)', () => {
  it('exits 0 and uses HANDOFF_LEDGER_ROOT when no --root is given', async () => {
    const stdout = collector();
    const stderr = collector();
    const code = await run([], { stdout, stderr, env: { HANDOFF_LEDGER_ROOT: join(base, 'env-root') } });
    expect(stderr.text()).toBe('');
    expect(code).toBe(0);
    expect(stdout.text()).toContain(`store      ${join(base, 'env-root')}`);
  });

  it('publishes as HANDOFF_LEDGER_HOST when no --host is given, as demo-host when neither is', async () => {
    for (const [env, host] of [
      [{ HANDOFF_LEDGER_HOST: 'build-box-7' }, 'build-box-7'],
      [{}, 'demo-host'],
    ] as const) {
      const root = join(base, host);
      const code = await run(['--root', root], { stdout: collector(), stderr: collector(), env: { ...env } });
      expect(code).toBe(0);
      const ledger = await openLedger({ root, host, onNotice: () => {} });
      try {
        expect(ledger.trustStore().keys.map((k) => k.host)).toEqual([host]);
      } finally {
        await ledger.close();
      }
    }
  });

  it('runs on a relative --root or HANDOFF_LEDGER_ROOT, taken from the working directory', async () => {
    // Test files run in forked processes (vitest.config.ts): changing this one's directory touches no other file.
    const cwd = process.cwd();
    process.chdir(base);
    onTestFinished(() => process.chdir(cwd));
    for (const [argv, env] of [
      [['--root', 'rel-root'], {}],
      [[], { HANDOFF_LEDGER_ROOT: 'rel-env-root' }],
    ] as const) {
      const stdout = collector();
      const stderr = collector();
      const code = await run([...argv], { stdout, stderr, env });
      expect(stderr.text()).toBe('');
      expect(code).toBe(0);
      expect(stdout.text()).toContain(`HANDOFF.md → denied: outside_allowed_roots`);
    }
    expect((await readdir(base)).sort()).toEqual(['rel-env-root', 'rel-root']);
  });

  it('removes its temporary project directory when the first open is refused', async () => {
    const tmp = join(base, 'tmp');
    await mkdir(tmp);
    vi.stubEnv('TMPDIR', tmp);
    try {
      const stderr = collector();
      const code = await run(['--root', join(base, 'store'), '--host', 'not a host id'], {
        stdout: collector(),
        stderr,
        env: {},
      });
      expect(code).toBe(1);
      expect(stderr.text()).toContain('INVALID_ID');
    } finally {
      vi.unstubAllEnvs();
    }
    expect(await readdir(tmp)).toEqual([]);
  });

  // The demo ended at "demo complete" without saying where its sessions are or under which host: every other command
  // opens as the machine's host name, which has no key in a store only the demo wrote (KEY_INVALID). Its last line is
  // now the command that lists what it published, and that command does.
  it('ends with the command that shows what it wrote, which lists its two compactions', async () => {
    const root = join(base, 'look');
    const stdout = collector();
    expect(await run(['--root', root], { stdout, stderr: collector(), env: {} })).toBe(0);
    const last = stdout.text().trimEnd().split('\n').at(-1)!;
    const session = /--session (demo-[a-z0-9-]+)$/.exec(last)?.[1];
    expect(last).toBe(
      `look at it: handoff-ledger history --root ${root} --host demo-host --principal demo-user --session ${session}`,
    );
    const shown = collector();
    const argv = last.replace(/^look at it: handoff-ledger /, '').split(' ');
    expect(await main(argv, { stdout: shown, stderr: collector(), env: {} })).toBe(0);
    expect(shown.text().trimEnd().split('\n')).toHaveLength(2);
    expect(shown.text()).toMatch(/^0\t.*\tdemo-user\tdemo-host\t/m);
  });

  it('names the command as `npm start` in a checkout runs it, and quotes what a shell would split', async () => {
    const root = join(base, "it's a store");
    const stdout = collector();
    const env = { npm_lifecycle_event: 'start', npm_package_name: 'handoff-ledger', HANDOFF_LEDGER_HOST: 'h-1' };
    expect(await run(['--root', root], { stdout, stderr: collector(), env })).toBe(0);
    expect(stdout.text().trimEnd().split('\n').at(-1)).toMatch(
      new RegExp(`^look at it: node dist/src/cli/main\\.js history --root '${base}/it'\\\\''s a store' --host h-1 `),
    );
    // Read back by a shell, each word is what it was.
    for (const word of [root, 'plain', 'a b', "'", '$HOME', '*', ''])
      expect(spawnSync('sh', ['-c', `printf '%s' ${shellWord(word)}`]).stdout.toString(), word).toBe(word);
  });

  it('exits 2 on an unknown option', async () => {
    const stderr = collector();
    expect(await run(['--nope'], { stdout: collector(), stderr, env: {} })).toBe(2);
    expect(stderr.text()).toMatch(/nope/);
  });
});
