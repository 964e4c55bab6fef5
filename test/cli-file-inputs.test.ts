/**
 * The files the auditor's commands are given by path — `verify --trust`, `--witness-keys`, `--since` and `export
 * --since` — are read as regular files only: a FIFO was waited on for a writer for ever (createReadStream opens it
 * blocking), now it is refused at once, as a directory is, with each option's code for a file it cannot read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
    refused: (file) => `handoff-ledger: TRUST_INVALID: cannot read trust file ${file}: not a regular file\n`,
    accepted: () => ({ file: trust, code: 0 }),
  },
  {
    name: 'verify --witness-keys',
    args: (file) => ['verify', join(dir, 'first'), '--trust', trust, '--witness-keys', file, '--quorum', '1'],
    refused: (file) => `handoff-ledger: USAGE: --witness-keys ${file}: not a regular file\n`,
    // Read and parsed: the bundle's checkpoint carries no cosignature by the pinned witness (a finding, exit 1).
    accepted: () => ({ file: witnessKeys, code: 1, stderr: /^$/ }),
  },
  {
    name: 'verify --since',
    args: (file) => ['verify', join(dir, 'first'), '--trust', trust, '--since', file],
    refused: (file) => `handoff-ledger: USAGE: --since ${file}: not a regular file\n`,
    accepted: () => ({ file: note, code: 0 }),
  },
  {
    name: 'export --since',
    args: (file) => ['export', '--root', root, '--out', join(tempDir(), 'next'), '--since', file],
    refused: (file) => `handoff-ledger: USAGE: --since ${file}: not a regular file\n`,
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
      expect(r.stderr).toBe('handoff-ledger: USAGE: --since /dev/zero: not a regular file\n');
    },
  );
});
