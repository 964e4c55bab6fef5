/**
 * The root's format marker (`<root>/format.json`, src/ledger/root-format.ts): a new root gets it, a root made before
 * it (none there) opens as layout version 1 and gets it at its next open that is not diagnosing (fsck writes none), and
 * a root whose marker names a higher layout version or another format (FORMAT_UNSUPPORTED), or whose marker is damaged
 * (RECORD_CORRUPT), is refused before anything under it is written or opened: no LevelDB open, no key made, every file
 * as it was. A process killed while it writes the marker leaves none or the whole one, never a torn file.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { readRootFormat, rootFormatText, writeRootFormat } from '../src/ledger/root-format.js';
import { FIXTURE, FIXTURE_ROOT } from './fixtures/write-store-v1.js';
import { sampleSummary, tempDir, treeSnapshot } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/src/ledger/root-format.js', import.meta.url));
const WRITER = fileURLToPath(new URL('./support/root-format-writer.mjs', import.meta.url));
const MARKER = '{"format":"handoff-ledger-root","version":1}\n';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

function cli(args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, HANDOFF_LEDGER_HOST: 'h1' },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const open = (root: string, extra: Partial<Parameters<typeof openLedger>[0]> = {}) =>
  openLedger({ root, host: 'h1', onNotice: () => {}, ...extra });

/** A store with one publish, closed, as a root made before the marker: its marker removed. */
async function storeWithoutMarker(): Promise<string> {
  const root = join(tempDir(), 'store');
  const ledger = await open(root);
  await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary(0));
  await ledger.close();
  rmSync(join(root, 'format.json'));
  return root;
}

async function refusal(promise: Promise<{ close(): Promise<void> }>): Promise<Error & { code?: string }> {
  return promise.then(
    async (l) => {
      await l.close();
      throw new Error('the open was not refused');
    },
    (e: unknown) => e as Error & { code?: string },
  );
}

describe('a root is marked with its format', () => {
  it('a new root gets format.json (layout version 1), through openLedger and through `init`', async () => {
    const root = join(tempDir(), 'store');
    await (await open(root)).close();
    expect(readFileSync(join(root, 'format.json'), 'utf8')).toBe(MARKER);
    expect(rootFormatText()).toBe(MARKER);
    expect(statSync(join(root, 'format.json')).mode & 0o777).toBe(0o600);
    await expect(readRootFormat(root)).resolves.toEqual({ present: true, version: 1 });

    const viaCli = join(tempDir(), 'cli-store');
    expect(cli(['init', '--root', viaCli])).toMatchObject({ code: 0 });
    expect(readFileSync(join(viaCli, 'format.json'), 'utf8')).toBe(MARKER);
  });

  it('a root made before the marker opens as version 1 and gets it at its next ordinary open, not at fsck', async () => {
    const root = await storeWithoutMarker();
    await expect(readRootFormat(root)).resolves.toEqual({ present: false, version: 1 });
    const before = treeSnapshot(root).filter((l) => !l.startsWith('manifests-v1'));
    // fsck (a diagnosing open) writes no marker, through the library and through the CLI.
    const diagnosing = await open(root, { diagnose: true });
    await diagnosing.close();
    const r = cli(['fsck', '--root', root]);
    expect(r, r.stderr).toMatchObject({ code: 0 });
    expect(existsSync(join(root, 'format.json'))).toBe(false);
    expect(treeSnapshot(root).filter((l) => !l.startsWith('manifests-v1'))).toEqual(before);
    // An ordinary open (a read: resume) marks it, and the store is as it was otherwise.
    const ledger = await open(root);
    expect((await ledger.resume({ principal: 'alice', session: 's1' }))?.summary.task).toBe(sampleSummary(0).task);
    await ledger.close();
    expect(readFileSync(join(root, 'format.json'), 'utf8')).toBe(MARKER);
  });

  it('the kept store of format version 1 (test/fixtures/store-v1) has none, and gets it at its first open', async () => {
    expect(existsSync(join(FIXTURE_ROOT, 'format.json'))).toBe(false);
    const root = join(tempDir(), 'v1');
    await cp(FIXTURE_ROOT, root, { recursive: true });
    // git keeps no modes: the root and its key as a store's are.
    spawnSync('chmod', ['-R', 'go-rwx', root]);
    await (await openLedger({ root, host: FIXTURE.host, onNotice: () => {} })).close();
    expect(readFileSync(join(root, 'format.json'), 'utf8')).toBe(MARKER);
  });
});

describe('a root this version does not read is refused before anything under it is written or opened', () => {
  const unsupported: Array<[string, string, RegExp]> = [
    [
      'a higher layout version',
      '{"format":"handoff-ledger-root","version":2}\n',
      /layout version 2, written by a newer/,
    ],
    [
      'a far higher one',
      '{"format":"handoff-ledger-root","version":9007199254740991}',
      /layout version 9007199254740991/,
    ],
    ['another format', '{"format":"other-tool","version":1}', /names the format "other-tool"/],
  ];

  it.each(unsupported)('%s: FORMAT_UNSUPPORTED, saying to upgrade, every file as it was', async (_, marker, says) => {
    const root = await storeWithoutMarker();
    writeFileSync(join(root, 'format.json'), marker, { mode: 0o600 });
    const before = treeSnapshot(root);
    for (const diagnose of [false, true]) {
      const err = await refusal(open(root, { diagnose }));
      expect(err).toMatchObject({ name: 'LedgerError', code: 'FORMAT_UNSUPPORTED' });
      expect(err.message).toMatch(says);
      expect(err.message).toMatch(/upgrade handoff-ledger/i);
      expect(err.message).toContain(join(root, 'format.json'));
    }
    // LevelDB writes LOG and MANIFEST at every open: manifests-v1/ unchanged means it was not opened.
    expect(treeSnapshot(root)).toEqual(before);
    // Every command, fsck included, says so (exit 1, the code on stderr), and changes nothing either.
    for (const args of [['fsck'], ['history', '--principal', 'alice', '--session', 's1'], ['init']]) {
      const r = cli([...args, '--root', root]);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toMatch(/^handoff-ledger: FORMAT_UNSUPPORTED: .*[Uu]pgrade handoff-ledger/);
    }
    const json = cli(['fsck', '--root', root, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'FORMAT_UNSUPPORTED' } });
    expect(treeSnapshot(root)).toEqual(before);
  });

  it('a root holding only a newer marker: no store, no key made in it', async () => {
    const root = join(tempDir(), 'store');
    mkdirSync(root, { mode: 0o700 });
    writeFileSync(join(root, 'format.json'), '{"format":"handoff-ledger-root","version":2}');
    const err = await refusal(open(root));
    expect(err.code).toBe('FORMAT_UNSUPPORTED');
    expect(readdirSync(root)).toEqual(['format.json']);
  });

  it('what the marker says is escaped in the message (a terminal escape in a format name)', async () => {
    const root = await storeWithoutMarker();
    writeFileSync(join(root, 'format.json'), JSON.stringify({ format: 'x\u001b]0;owned\u0007\u202e', version: 1 }));
    const err = await refusal(open(root));
    expect(err.code).toBe('FORMAT_UNSUPPORTED');
    expect(err.message).toContain('"x\\u001b]0;owned\\u0007\\u202e"');
    expect(err.message).not.toMatch(/[\u001b\u0007\u202e]/);
  });

  const damaged: Array<[string, (path: string) => void, RegExp]> = [
    ['not JSON (an escape in it)', (p) => writeFileSync(p, '\u001b[31mversion=1'), /not JSON: it begins "\\u001b\[31m/],
    ['empty', (p) => writeFileSync(p, ''), /not JSON/],
    ['not UTF-8', (p) => writeFileSync(p, Buffer.from([0x7b, 0xff, 0x7d])), /not UTF-8/],
    ['an array', (p) => writeFileSync(p, '[1]'), /not an object/],
    ['no format', (p) => writeFileSync(p, '{"version":1}'), /its format is undefined/],
    ['no version', (p) => writeFileSync(p, '{"format":"handoff-ledger-root"}'), /its version is undefined/],
    ['version 0', (p) => writeFileSync(p, '{"format":"handoff-ledger-root","version":0}'), /version is 0/],
    ['version 1.5', (p) => writeFileSync(p, '{"format":"handoff-ledger-root","version":1.5}'), /version is 1.5/],
    ['a version string', (p) => writeFileSync(p, '{"format":"handoff-ledger-root","version":"2"}'), /version is "2"/],
    ['oversized', (p) => writeFileSync(p, `${MARKER.trim()}${' '.repeat(5000)}`), /5044 bytes, larger than any/],
    ['a directory', (p) => mkdirSync(p), /not a regular file/],
    ['a symlink to a valid marker', (p) => linkTo(p, MARKER), /not a regular file/],
    ['a FIFO (not waited on)', (p) => spawnSync('mkfifo', [p]), /not a regular file/],
  ];

  function linkTo(path: string, text: string) {
    const target = `${path}-target`;
    writeFileSync(target, text);
    symlinkSync(target, path);
  }

  it.each(damaged)('a marker %s: RECORD_CORRUPT, saying what to do, every file as it was', async (_, plant, says) => {
    const root = await storeWithoutMarker();
    plant(join(root, 'format.json'));
    const before = treeSnapshot(root);
    for (const diagnose of [false, true]) {
      const err = await refusal(open(root, { diagnose }));
      expect(err).toMatchObject({ name: 'LedgerError', code: 'RECORD_CORRUPT' });
      expect(err.message).toMatch(says);
      expect(err.message).toMatch(/upgrade handoff-ledger; otherwise the marker was damaged: restore it/);
      expect(err.message).not.toMatch(/[\u001b]/);
    }
    const r = cli(['fsck', '--root', root]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^handoff-ledger: RECORD_CORRUPT: ".*format\.json" is no format marker/);
    expect(treeSnapshot(root)).toEqual(before);
  });
});

describe('writing the marker', () => {
  it('a root this user may not write in (its directory read-only) is read unmarked: resume, history, export work', () => {
    // Root may write anywhere: as root, the store is made and read by another user (nobody).
    const as = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const base = tempDir();
    chmodSync(base, 0o755);
    if (as.uid !== undefined) chownSync(base, as.uid, as.gid);
    const run = (args: string[]) => {
      const r = spawnSync(process.execPath, [CLI, ...args], {
        encoding: 'utf8',
        env: { ...process.env, HANDOFF_LEDGER_HOST: 'h1' },
        timeout: 60_000,
        cwd: base,
        ...as,
      });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const root = join(base, 'store');
    const summary = join(base, 'summary.json');
    writeFileSync(summary, JSON.stringify(sampleSummary(0)), { mode: 0o644 });
    expect(run(['init', '--root', root])).toMatchObject({ code: 0 });
    const scope = ['--principal', 'alice', '--session', 's1'];
    expect(run(['publish', '--root', root, ...scope, '--run', 'r1', summary])).toMatchObject({ code: 0 });
    // A store made before the marker, whose root directory was then made read-only (its subdirectories are not).
    rmSync(join(root, 'format.json'));
    chmodSync(root, 0o500);
    try {
      const resumed = run(['resume', '--root', root, ...scope, '--json']);
      expect(resumed, resumed.stderr).toMatchObject({ code: 0 });
      expect(resumed.stdout).toContain(sampleSummary(0).task);
      expect(run(['history', '--root', root, ...scope])).toMatchObject({ code: 0, stderr: '' });
      expect(run(['export', '--root', root, '--out', join(base, 'bundle')])).toMatchObject({ code: 0 });
      expect(readdirSync(root).filter((n) => n.startsWith('format.json'))).toEqual([]);
    } finally {
      chmodSync(root, 0o700);
    }
    // The first open that can write it marks the root.
    expect(run(['resume', '--root', root, ...scope])).toMatchObject({ code: 0 });
    expect(readFileSync(join(root, 'format.json'), 'utf8')).toBe(MARKER);
  });

  it('in a root this user may not write in, a marker another opener wrote meanwhile is judged still', () => {
    // Root may write anywhere: as root, the marker is written by another user (nobody).
    const as = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const root = tempDir();
    chmodSync(root, 0o755);
    writeFileSync(join(root, 'format.json'), '{"format":"handoff-ledger-root","version":3}', { mode: 0o644 });
    if (as.uid !== undefined) chownSync(root, as.uid, as.gid);
    chmodSync(root, 0o500);
    const script = `import(${JSON.stringify(BUILT)}).then((m) => m.writeRootFormat(${JSON.stringify(root)})).then(() => console.log('written'), (err) => console.log(err.code))`;
    try {
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000, ...as });
      expect(r.stdout.trim(), r.stderr).toBe('FORMAT_UNSUPPORTED');
      expect(readdirSync(root)).toEqual(['format.json']);
    } finally {
      chmodSync(root, 0o700);
    }
  });

  it('never replaces a marker that stands there (another opener wrote a newer one meanwhile): it is judged', async () => {
    const root = tempDir();
    const newer = '{"format":"handoff-ledger-root","version":3}';
    writeFileSync(join(root, 'format.json'), newer);
    await expect(writeRootFormat(root)).rejects.toMatchObject({ code: 'FORMAT_UNSUPPORTED' });
    expect(readFileSync(join(root, 'format.json'), 'utf8')).toBe(newer);
    writeFileSync(join(root, 'format.json'), MARKER);
    await expect(writeRootFormat(root)).resolves.toBeUndefined();
    expect(readdirSync(root)).toEqual(['format.json']);
  });

  it('a process killed while it writes it leaves none or the whole marker, never a torn one; the next open recovers', async () => {
    const root = await storeWithoutMarker();
    const seen = new Set<string>();
    for (let round = 0; round < 8; round++) {
      const child = spawn(process.execPath, [WRITER, root, BUILT], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        child.stdout.once('data', () => resolve());
        child.once('close', () => reject(new Error(`the writer ended: ${stderr}`)));
      });
      // Killed at some step of a write (it writes over and over: a staging file, its sync, the link, the unlink).
      await new Promise((resolve) => setTimeout(resolve, 20 + round * 15));
      child.kill('SIGKILL');
      await exited;
      const path = join(root, 'format.json');
      if (existsSync(path)) {
        expect(readFileSync(path, 'utf8')).toBe(MARKER);
        seen.add('whole');
      } else seen.add('none');
      // Beside it at most a staging file (`format.json.<16 hex>.tmp`), which the next open removes.
      const others = readdirSync(root).filter(
        (n) =>
          ![
            'blobs-v1',
            'checkpoints',
            'format.json',
            'gc-aside',
            'keys',
            'manifests-v1',
            'quarantine',
            'tmp',
            'trust.json',
          ].includes(n),
      );
      for (const name of others) expect(name).toMatch(/^format\.json\.[0-9a-f]{16}\.tmp$/);
      const ledger = await open(root);
      expect((await ledger.resume({ principal: 'alice', session: 's1' }))?.summary.task).toBe(sampleSummary(0).task);
      await ledger.close();
      expect(readFileSync(path, 'utf8')).toBe(MARKER);
      expect(readdirSync(root).filter((n) => n.endsWith('.tmp'))).toEqual([]);
      rmSync(path);
    }
    expect(seen.size).toBeGreaterThan(0);
  });
});
