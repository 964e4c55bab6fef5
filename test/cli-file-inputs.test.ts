/**
 * The files the auditor's commands are given by path — `verify --trust`, `--witness-keys`, `--since` and `export
 * --since` — are read as regular files only: a FIFO was waited on for a writer for ever (createReadStream opens it
 * blocking), now it is refused at once, as a directory is, with each option's code for a file it cannot read.
 * The summary `publish FILE` reads is the one input read as a stream, as standard input is, with the same bound: a
 * FIFO (or the pipe of a shell's `<(…)`) is read to its end, waiting for its writer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { blockedOpeningFifo, openAt, until } from './support/proc.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

/** Long enough for a slow, shared machine; a FIFO waited on never ends, and is killed here. */
const TIMEOUT_MS = 20_000;

function cli(args: string[], input = '') {
  const started = Date.now();
  const r = spawnSync(process.execPath, [CLI, ...args], {
    input,
    encoding: 'utf8',
    env: { ...process.env, HANDOFF_LEDGER_HOST: 'cli-host' },
    timeout: TIMEOUT_MS,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - started };
}

let dir: string;
let root: string;
let trust: string;
let witnessKeys: string;
let note: string;
let fifo: string;
let subdir: string;

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
  // Made once for the file (tempDir's are removed after each test).
  dir = mkdtempSync(join(tmpdir(), 'hl-file-inputs-'));
  root = join(dir, 'store');
  trust = join(dir, 'trust.json');
  expect(cli(['init', '--root', root]).code).toBe(0);
  const scope = ['--principal', 'alice', '--session', 's', '--run', 'r'];
  expect(cli(['publish', '--root', root, ...scope], JSON.stringify(sampleSummary())).code).toBe(0);
  expect(cli(['keys', 'export', '--root', root, '--out', trust]).code).toBe(0);
  const bundle = join(dir, 'first');
  expect(cli(['export', '--root', root, '--out', bundle]).code).toBe(0);
  note = join(bundle, 'checkpoint.note');
  witnessKeys = join(dir, 'witnesses.txt');
  const vkey = cli(['witness', 'keygen', '--name', 'witness.example', '--out', join(dir, 'witness.key')]);
  expect(vkey.code, vkey.stderr).toBe(0);
  writeFileSync(witnessKeys, vkey.stdout);
  fifo = join(dir, 'input.fifo');
  execFileSync('mkfifo', [fifo]);
  subdir = join(dir, 'a-directory');
  mkdirSync(subdir);
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Each option: the command line with FILE in it, and the stderr of a file it cannot read. */
const cases: Array<{
  name: string;
  args: (file: string) => string[];
  refused: (file: string) => string;
  /** What a readable file leads to: the command went on past reading it. */
  accepted: () => { file: string; code: number; stderr?: RegExp };
}> = [
  {
    name: 'verify --trust',
    args: (file) => ['verify', join(dir, 'first'), '--trust', file],
    refused: (file) => `handoff-ledger: TRUST_INVALID: cannot read trust file "${file}": not a regular file\n`,
    accepted: () => ({ file: trust, code: 0 }),
  },
  {
    name: 'verify --witness-keys',
    args: (file) => ['verify', join(dir, 'first'), '--trust', trust, '--witness-keys', file, '--quorum', '1'],
    refused: (file) => `handoff-ledger: USAGE: --witness-keys "${file}": not a regular file\n`,
    // Read and parsed: the bundle's checkpoint carries no cosignature by the pinned witness (a finding, exit 1).
    accepted: () => ({ file: witnessKeys, code: 1, stderr: /^$/ }),
  },
  {
    name: 'verify --since',
    args: (file) => ['verify', join(dir, 'first'), '--trust', trust, '--since', file],
    refused: (file) => `handoff-ledger: USAGE: --since "${file}": not a regular file\n`,
    accepted: () => ({ file: note, code: 0 }),
  },
  {
    name: 'export --since',
    args: (file) => ['export', '--root', root, '--out', join(tempDir(), 'next'), '--since', file],
    refused: (file) => `handoff-ledger: USAGE: --since "${file}": not a regular file\n`,
    accepted: () => ({ file: note, code: 0 }),
  },
];

describe('file options read by path: a regular file only, a FIFO refused without waiting for a writer', () => {
  it.each(cases)('$name: a FIFO with no writer is refused promptly', (c) => {
    const r = cli(c.args(fifo));
    expect(r.code, `${r.stderr} (${r.ms} ms)`).toBe(2);
    expect(r.stderr).toBe(c.refused(fifo));
    expect(r.stdout).toBe('');
  });

  it.each(cases)('$name: a directory is refused', (c) => {
    const r = cli(c.args(subdir));
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(c.refused(subdir));
  });

  it.each(cases)('$name: a regular file is read', (c) => {
    const want = c.accepted();
    const r = cli(c.args(want.file));
    expect(r.code, r.stderr + r.stdout).toBe(want.code);
    if (want.stderr) expect(r.stderr).toMatch(want.stderr);
  });

  it.skipIf(!existsSync('/dev/zero'))(
    'a device is refused before it is read (--since /dev/zero is not a regular file, not 64 KiB of it)',
    () => {
      const r = cli(['verify', join(dir, 'first'), '--trust', trust, '--since', '/dev/zero']);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('handoff-ledger: USAGE: --since "/dev/zero": not a regular file\n');
    },
  );
});

/** The README's example of how a refusal names a file it cannot read (CLI, "Everything the CLI prints …"). */
const README_FILE_REFUSAL = /`cannot read trust file "t\.json": ENOENT \(no such file or directory\)`/;

describe('a file or directory the CLI is given that is not there: named quoted, the failure by its errno code', () => {
  // As the README shows it for a trust file: every such refusal names its path once, as a JSON string (a control
  // character in it as \u001b), and the failure as `ENOENT (no such file or directory)`; never the errno's own message,
  // which repeats the path raw (`ENOENT: no such file or directory, open '…'`).
  const gone = () => join(tempDir(), 'gone\u001b[2J');
  const enoent = 'ENOENT (no such file or directory)';

  it('is what the README says of a trust file', () => {
    const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
    expect(readme).toMatch(README_FILE_REFUSAL);
    const file = gone();
    expect(cli(['verify', join(dir, 'first'), '--trust', file]).stderr).toBe(
      `handoff-ledger: TRUST_INVALID: cannot read trust file ${JSON.stringify(file)}: ${enoent}\n`,
    );
  });

  it.each(cases)('$name: the same words as for a FIFO, the errno code in place of "not a regular file"', (c) => {
    const file = gone();
    const r = cli(c.args(file));
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(c.refused(JSON.stringify(file).slice(1, -1)).replace('not a regular file', enoent));
  });

  it('verify DIR: a bundle directory that is not there (BUNDLE_IO), one that is no directory, one that holds no bundle', () => {
    const missing = gone();
    const r = cli(['verify', missing, '--trust', trust]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`handoff-ledger: BUNDLE_IO: cannot read ${JSON.stringify(missing)}: ${enoent}\n`);
    expect(cli(['verify', trust, '--trust', trust]).stderr).toBe(
      `handoff-ledger: BUNDLE_INVALID: ${JSON.stringify(trust)} is not a directory\n`,
    );
    expect(cli(['verify', subdir, '--trust', trust]).stderr).toBe(
      `handoff-ledger: BUNDLE_INVALID: ${JSON.stringify(subdir)} has no bundle.json; not a bundle\n`,
    );
  });

  it('export --out: a target whose directory is not there (BUNDLE_IO), and one that exists (BUNDLE_EXISTS)', () => {
    const out = join(gone(), 'bundle');
    const r = cli(['export', '--root', root, '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`handoff-ledger: BUNDLE_IO: export: creating ${JSON.stringify(out)} failed: ${enoent}\n`);
    const taken = join(tempDir(), 'taken\u001b');
    mkdirSync(taken);
    expect(cli(['export', '--root', root, '--out', taken]).stderr).toBe(
      `handoff-ledger: BUNDLE_EXISTS: ${JSON.stringify(taken)} already exists; export never overwrites\n`,
    );
  });

  it('publish FILE: IO_FAILED, its errno code kept in --json', () => {
    const file = gone();
    const scope = ['--principal', 'alice', '--session', 's', '--run', 'r'];
    const r = cli(['publish', '--root', join(tempDir(), 'store'), ...scope, '--json', file]);
    expect(r.code).toBe(2);
    const message = `cannot read summary file ${JSON.stringify(file)}: ${enoent}`;
    expect(r.stderr).toBe(`handoff-ledger: IO_FAILED: ${message}\n`);
    expect(JSON.parse(r.stdout)).toEqual({ error: { code: 'IO_FAILED', message } });
  });
});

/** A child of `node -e script args…`, and how it ended with what it printed. */
function child(args: string[]) {
  const proc = spawn(process.execPath, args, { env: { ...process.env, HANDOFF_LEDGER_HOST: 'cli-host' } });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => (stdout += d));
  proc.stderr.on('data', (d) => (stderr += d));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
    (resolve) => proc.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  let exited = false;
  void ended.then(() => (exited = true));
  return { proc, ended, running: () => !exited };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until `pid` has reached the FIFO at `path`: it has it open (publish opens it without blocking and polls it),
 * or a thread of it is blocked in its open (test/support/proc.ts), so a test knows the child reached the FIFO, not
 * that it is still starting. Where /proc tells nothing (not Linux), half a second instead.
 * @returns false when the child never got there within 15 s
 */
async function reachedFifo(pid: number, path: string): Promise<boolean> {
  if (!existsSync(`/proc/${pid}`)) {
    await sleep(500);
    return true;
  }
  return until(() => openAt(pid, path).length > 0 || blockedOpeningFifo(pid), 'the FIFO', 15_000).then(
    () => true,
    () => false,
  );
}

describe('publish FILE: a FIFO is read as standard input is, to its end, within the same bound', () => {
  const publishScope = ['--principal', 'alice', '--session', 's', '--run', 'r'];
  const fresh = () => {
    const at = tempDir();
    const path = join(at, 'summary.fifo');
    execFileSync('mkfifo', [path]);
    return { root: join(at, 'store'), fifo: path };
  };

  it('waits for its writer, then reads what it writes in parts until it closes: the whole summary published', async () => {
    const { root, fifo: path } = fresh();
    const publish = child([CLI, 'publish', '--root', root, ...publishScope, path]);
    // Waiting for a writer, as on an empty pipe: nothing read, nothing made.
    expect(await reachedFifo(publish.proc.pid!, path)).toBe(true);
    expect(publish.running()).toBe(true);
    expect(existsSync(root)).toBe(false);
    const text = JSON.stringify(sampleSummary('from a fifo'));
    const writer = child([
      '-e',
      `const fs = require('fs'); const [path, text] = process.argv.slice(1); const fd = fs.openSync(path, 'w');
       fs.writeSync(fd, text.slice(0, 10)); setTimeout(() => { fs.writeSync(fd, text.slice(10)); fs.closeSync(fd); }, 300);`,
      path,
      text,
    ]);
    const r = await publish.ended;
    expect(r.code, r.stderr).toBe(0);
    expect((await writer.ended).code).toBe(0);
    const resumed = cli(['resume', '--root', root, '--principal', 'alice', '--session', 's']);
    expect(JSON.parse(resumed.stdout)).toEqual(sampleSummary('from a fifo'));
  });

  it('a writer that never stops is cut off at the bound (SUMMARY_TOO_LARGE), not buffered: its write fails, nothing made', async () => {
    const { root, fifo: path } = fresh();
    const writer = child([
      '-e',
      `const fs = require('fs'); const fd = fs.openSync(process.argv[1], 'w'); const b = Buffer.alloc(65536, 32);
       try { for (;;) fs.writeSync(fd, b); } catch (err) { process.exitCode = err.code === 'EPIPE' ? 3 : 1; }`,
      path,
    ]);
    const publish = child([CLI, 'publish', '--root', root, ...publishScope, '--max-bytes', '1000', path]);
    const r = await publish.ended;
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'handoff-ledger: SUMMARY_TOO_LARGE: the summary input is over 10096 bytes: it cannot fit --max-bytes 1000\n',
    );
    expect((await writer.ended).code).toBe(3); // EPIPE: the reader closed the FIFO at the bound
    expect(existsSync(root)).toBe(false);
  });

  it('with no writer it waits, as standard input does; a signal ends it (CANCELLED, 143), nothing made', async () => {
    const { root, fifo: path } = fresh();
    const publish = child([CLI, 'publish', '--root', root, ...publishScope, path]);
    expect(await reachedFifo(publish.proc.pid!, path)).toBe(true);
    expect(publish.running()).toBe(true);
    publish.proc.kill('SIGTERM');
    // test/cli-stop-signals.test.ts has the cases of this wait (SIGINT, a writer that writes no more, stdin).
    expect(await publish.ended).toEqual({
      code: 143,
      signal: null,
      stdout: '',
      stderr:
        'handoff-ledger: CANCELLED: publish interrupted by SIGTERM while reading the summary, before it began; nothing was published\n',
    });
    expect(existsSync(root)).toBe(false);
  });

  it('a directory is IO_FAILED naming it (the failed read named no path)', () => {
    const root = join(tempDir(), 'store');
    const r = cli(['publish', '--root', root, ...publishScope, subdir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `handoff-ledger: IO_FAILED: cannot read summary file "${subdir}": EISDIR (illegal operation on a directory)\n`,
    );
    expect(existsSync(root)).toBe(false);
  });
});
