import { Level } from 'level';
import { describe, expect, it, beforeAll } from 'vitest';
import { spawnSync, spawn } from 'node:child_process';
import { existsSync, writeFileSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openLedger } from '../src/ledger/open.js';
import { validateSummary } from '../src/summary/summary.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { helpHint } from './support/capture-io.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

function cli(args: string[], opts: { input?: string | Uint8Array; env?: Record<string, string> } = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    input: opts.input ?? '',
    encoding: 'utf8',
    env: { ...process.env, HANDOFF_LEDGER_HOST: 'cli-host', ...opts.env },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `resume` of alice's session s on `root` as host h, in a process of its own (a second process of the store). */
function resumeInChild(root: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const args = ['resume', '--root', root, '--host', 'h', '--principal', 'alice', '--session', 's'];
    const child = spawn(process.execPath, [CLI, ...args]);
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

describe('handoff-ledger CLI', () => {
  it('init, publish from stdin and file, resume, history — on HANDOFF_LEDGER_ROOT', () => {
    const root = join(tempDir(), 'store');
    const env = { HANDOFF_LEDGER_ROOT: root };
    expect(cli(['init'], { env })).toMatchObject({ code: 0 });
    const s = ['--principal', 'alice', '--session', 'cli-s', '--run', 'r1'];
    const pub = cli(['publish', ...s, '--json'], { env, input: JSON.stringify(sampleSummary('stdin')) });
    expect(pub.code, pub.stderr).toBe(0);
    expect(JSON.parse(pub.stdout)).toMatchObject({ seq: 0 });
    const file = join(tempDir(), 'summary.json');
    writeFileSync(file, JSON.stringify(sampleSummary('file')));
    expect(cli(['publish', ...s, file], { env }).code).toBe(0);
    const res = cli(['resume', '--principal', 'alice', '--session', 'cli-s'], { env });
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual(sampleSummary('file'));
    const hist = cli(['history', '--principal', 'alice', '--session', 'cli-s', '--json'], { env });
    expect(JSON.parse(hist.stdout).map((h: any) => h.manifest.seq)).toEqual([0, 1]);
    expect(cli(['fsck'], { env })).toMatchObject({ code: 0 });
    // A session with nothing yet: resume and history both say so (stderr), and succeed with no data.
    const none = ['--principal', 'alice', '--session', 'cli-none'];
    const said = { code: 0, stdout: '', stderr: 'session cli-none has no compaction yet\n' };
    expect(cli(['resume', ...none], { env })).toEqual(said);
    expect(cli(['history', ...none], { env })).toEqual(said);
    expect(cli(['history', ...none, '--json'], { env })).toEqual({ ...said, stdout: '[]\n' });
  });

  it('--root wins over the environment, and the default root follows XDG_STATE_HOME', () => {
    const state = tempDir();
    const r = cli(['init', '--json'], { env: { HANDOFF_LEDGER_ROOT: '', XDG_STATE_HOME: state } });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).root).toBe(join(state, 'handoff-ledger'));
    // ${XDG_STATE_HOME:-~/.local/state}: with XDG_STATE_HOME unset or empty, the home directory's .local/state.
    const home = tempDir();
    const { XDG_STATE_HOME: _, ...unset } = process.env;
    for (const env of [unset, { ...unset, XDG_STATE_HOME: '' }]) {
      const h = spawnSync(process.execPath, [CLI, 'init', '--json'], {
        encoding: 'utf8',
        env: { ...env, HOME: home, HANDOFF_LEDGER_ROOT: '', HANDOFF_LEDGER_HOST: 'cli-host' },
        timeout: 60_000,
      });
      expect(h.status, h.stderr).toBe(0);
      expect(JSON.parse(h.stdout).root).toBe(join(home, '.local', 'state', 'handoff-ledger'));
    }
    const explicit = join(tempDir(), 'x');
    expect(
      JSON.parse(cli(['init', '--json', '--root', explicit], { env: { XDG_STATE_HOME: state } }).stdout).root,
    ).toBe(explicit);
  });

  it('refuses an empty --postgres, --origin or --root as a usage error, writing nothing', () => {
    const root = join(tempDir(), 'store');
    for (const [args, env] of [
      [['--postgres', ''], {}],
      // The empty option does not fall back to the environment either.
      [['--postgres', ''], { HANDOFF_LEDGER_POSTGRES: 'postgres://nobody@127.0.0.1:1/none' }],
      [['--origin', ''], {}],
    ] as const) {
      const r = cli(['init', '--root', root, ...args], { env });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toBe(
        `handoff-ledger: USAGE: --${args[0] === '--postgres' ? 'postgres' : 'origin'} must not be empty\n${helpHint('init')}`,
      );
      expect(existsSync(root)).toBe(false);
    }
    const r = cli(['init', '--json', '--root', ''], { env: { HANDOFF_LEDGER_ROOT: root } });
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({ error: { code: 'USAGE', message: '--root must not be empty' } });
    expect(existsSync(root)).toBe(false);
  });

  it('takes the BLAKE3 backend from HANDOFF_LEDGER_HASH, and refuses an unknown one as a usage error', () => {
    const root = join(tempDir(), 'store');
    for (const name of ['noble', 'wasm']) {
      const r = cli(['init', '--json', '--root', root], { env: { HANDOFF_LEDGER_HASH: name } });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).hash).toBe(name);
    }
    expect(JSON.parse(cli(['init', '--json', '--root', root]).stdout).hash).toMatch(/^(native|wasm)$/);
    const bad = cli(['init', '--root', root], { env: { HANDOFF_LEDGER_HASH: 'sha256' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('HANDOFF_LEDGER_HASH must be one of auto, native, wasm, noble');
    const badVerify = cli(['verify', '--trust', join(root, 'trust.json'), root], {
      env: { HANDOFF_LEDGER_HASH: 'fast' },
    });
    expect(badVerify.code).toBe(2);
    expect(badVerify.stderr).toContain('HANDOFF_LEDGER_HASH');
  });

  it('refuses a malformed id or --expected-prev before it reads the summary: a piped summary is not taken in vain', async () => {
    const root = join(tempDir(), 'store');
    // Standard input is left open: a publish that read it first would wait for its end.
    const refusedWithOpenInput = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string; timedOut: boolean }>((resolve) => {
        const child = spawn(process.execPath, [CLI, 'publish', '--root', root, ...args], {
          env: { ...process.env, HANDOFF_LEDGER_HOST: 'cli-host' },
          stdio: ['pipe', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.on('close', (code, signal) => {
          clearTimeout(timer);
          child.stdin.destroy();
          resolve({ code, stderr, timedOut: signal === 'SIGKILL' });
        });
      });
    const scope = ['--principal', 'alice', '--session', 's', '--run', 'r'];
    const badId = await refusedWithOpenInput(['--principal', '../etc', '--session', 's', '--run', 'r']);
    expect(badId).toMatchObject({ code: 1, timedOut: false });
    expect(badId.stderr).toContain('INVALID_ID');
    const badPrev = await refusedWithOpenInput([...scope, '--expected-prev', 'the-last-one']);
    expect(badPrev).toMatchObject({ code: 1, timedOut: false });
    expect(badPrev.stderr).toContain('INVALID_ARGUMENT');
    expect(existsSync(root)).toBe(false);
  });

  it('refuses a summary publish would refuse before it opens the store: no store made, no host key added', () => {
    const scope = ['--principal', 'alice', '--session', 's', '--run', 'r'];
    const refused: Array<[string, string, string[]]> = [
      ['SUMMARY_INVALID', '{"task":"t"}', []],
      ['SUMMARY_EMPTY', '{"task":" ","state":"s","nextSteps":["n"]}', []],
      ['SUMMARY_INCOMPLETE', JSON.stringify({ ...sampleSummary('x'), incomplete: true }), []],
      ['SUMMARY_TOO_LARGE', JSON.stringify(sampleSummary('x')), ['--max-bytes', '10']],
    ];
    const fresh = join(tempDir(), 'store');
    for (const [code, input, extra] of refused) {
      const r = cli(['publish', '--root', fresh, ...scope, ...extra], { input });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`handoff-ledger: ${code}: `);
    }
    expect(existsSync(fresh)).toBe(false);
    // On a store: a new --host would have been given a key (and trust.json a new trusted key) by the open.
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    const trust = readFileSync(join(root, 'trust.json'));
    const keys = readdirSync(join(root, 'keys')).sort();
    for (const [code, input, extra] of refused) {
      const r = cli(['publish', '--root', root, '--host', 'new-host', ...scope, ...extra], { input });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`handoff-ledger: ${code}: `);
    }
    expect(readFileSync(join(root, 'trust.json'))).toEqual(trust);
    expect(readdirSync(join(root, 'keys')).sort()).toEqual(keys);
  });

  it('exits 1 with the error code for a refused summary and an invalid id, 2 for usage errors', () => {
    const root = join(tempDir(), 'store');
    const bad = cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], {
      input: '{"task":"","state":"","nextSteps":[]}',
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('SUMMARY_EMPTY');
    const notJson = cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], {
      input: 'Error: rate limited',
    });
    expect(notJson).toMatchObject({ code: 1 });
    // Where JSON.parse stopped, and what publish takes: an operator who piped plain text learns the form.
    expect(notJson.stderr).toContain(
      `SUMMARY_INVALID: the summary is not JSON: Unexpected token 'E', "Error: rate limited" is not valid JSON; publish ` +
        'takes a summary object as JSON text, e.g. {"task": "…", "state": "…", "nextSteps": ["…"]} (README, ' +
        '"Summary schema (v1)")',
    );
    // The text quoted from the input is escaped: nothing a terminal acts on reaches it raw.
    const acting = cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], {
      input: '\u001b[2J\u202e',
    });
    expect(acting.stderr).toContain(`the summary is not JSON: Unexpected token '\\u001b', "\\u001b[2J\\u202e" is not`);
    expect(acting.stderr).not.toMatch(/[\u001b\u202e]/);
    const notUtf8 = cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], {
      input: Buffer.from([0x7b, 0xff, 0x7d]),
    });
    expect(notUtf8.stderr).toContain('SUMMARY_INVALID: the summary is not valid UTF-8 text; publish takes a summary');
    // No summary at all (a model call that returned nothing, piped): empty, not malformed.
    for (const input of ['', ' \n\t\r\n']) {
      const empty = cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], { input });
      expect(empty).toMatchObject({ code: 1 });
      expect(empty.stderr).toContain('SUMMARY_EMPTY: the summary input is empty');
    }
    // The refusals above made no store (a summary is judged before the open): a store for the ids to be judged in.
    expect(existsSync(root)).toBe(false);
    expect(cli(['init', '--root', root]).code).toBe(0);
    const id = cli(['resume', '--root', root, '--principal', '../etc', '--session', 's']);
    expect(id.code).toBe(1);
    expect(id.stderr).toContain('INVALID_ID');
    const exportId = cli(['export', '--root', root, '--principal', '../etc', '--out', join(tempDir(), 'b')]);
    expect(exportId.code).toBe(1);
    expect(exportId.stderr).toContain('INVALID_ID');
    expect(cli(['publish', '--root', root]).code).toBe(2);
    expect(cli(['frobnicate']).code).toBe(2);
    expect(cli(['resume', '--bogus']).code).toBe(2);
  });

  it('refuses a summary over --max-bytes with SUMMARY_TOO_LARGE, exit 1, whether a little or far over', () => {
    const root = join(tempDir(), 'store');
    const publish = (input: string) =>
      cli(['publish', '--root', root, '--principal', 'a', '--session', 's', '--run', 'r', '--max-bytes', '1000'], {
        input,
      });
    const little = publish(JSON.stringify({ ...sampleSummary(), state: 'x'.repeat(1000) }));
    const far = publish('x'.repeat(100_000));
    for (const r of [little, far]) {
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^handoff-ledger: SUMMARY_TOO_LARGE: /);
    }
    expect(far.stderr).toContain('over 10096 bytes');
  });

  it('accepts a summary within --max-bytes written with \\u escapes (as json.dumps writes it: 3x the bytes of é)', () => {
    const root = join(tempDir(), 'store');
    const summary = { ...sampleSummary(), state: '\u00e9'.repeat(45_000) };
    const escaped = JSON.stringify(summary).replace(
      /[\u0080-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    expect(escaped.length).toBeGreaterThan(2 * 100_000 + 4096);
    const args = ['--root', root, '--principal', 'a', '--session', 's', '--run', 'r', '--max-bytes', '100000'];
    const r = cli(['publish', ...args, '--json'], { input: escaped });
    expect(r.code, r.stderr).toBe(0);
    const res = cli(['resume', ...args.slice(0, 6)]);
    expect(JSON.parse(res.stdout)).toEqual(summary);
  });

  it.skipIf(!existsSync('/dev/zero'))(
    'reads --since bounded: a file over 64 KiB, or a device, is a usage error before it is read, in export, verify and audit-ui',
    () => {
      const root = join(tempDir(), 'store');
      const trust = join(tempDir(), 'trust.json');
      expect(cli(['init', '--root', root]).code).toBe(0);
      expect(cli(['keys', 'export', '--root', root, '--out', trust]).code).toBe(0);
      const big = join(tempDir(), 'big.note');
      writeFileSync(big, 'x'.repeat(64 * 1024 + 1));
      for (const args of [
        ['export', '--root', root, '--out', join(tempDir(), 'bundle')],
        ['verify', join(tempDir(), 'no-bundle'), '--trust', trust],
        ['audit-ui'],
      ]) {
        let r = cli([...args, '--since', big]);
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toBe(`handoff-ledger: USAGE: --since "${big}": over 64 KiB\n`);
        // An endless device is no regular file: refused before a byte of it is read (test/cli-file-inputs.test.ts).
        r = cli([...args, '--since', '/dev/zero']);
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toBe('handoff-ledger: USAGE: --since "/dev/zero": not a regular file\n');
      }
    },
  );

  it('export into an --out that exists: BUNDLE_EXISTS, exit 2 as its help says, the target untouched', () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    const out = join(tempDir(), 'bundle');
    expect(cli(['export', '--root', root, '--out', out]).code).toBe(0);
    const before = readFileSync(join(out, 'bundle.json'), 'utf8');
    const r = cli(['export', '--root', root, '--out', out]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^handoff-ledger: BUNDLE_EXISTS: .* already exists; export never overwrites\n$/);
    expect(readFileSync(join(out, 'bundle.json'), 'utf8')).toBe(before);
    expect(cli(['help', 'export']).stdout).toMatch(/\n {2}2 {3}[^\n]*\n {6}an --out that exists \(BUNDLE_EXISTS/);
  });

  it("export's hint names the keys export of the store it exported: its --root and --host", () => {
    // It said `handoff-ledger keys export` alone, which run as shown opens the default store and this machine's host.
    const root = join(tempDir(), 'my store');
    expect(cli(['init', '--root', root, '--host', 'h1']).code).toBe(0);
    const r = cli(['export', '--root', root, '--host', 'h1', '--out', join(tempDir(), 'bundle')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[1]).toBe(
      `auditors also need this host's public keys: handoff-ledger keys export --root '${root}' --host h1`,
    );
    const env = cli(['export', '--out', join(tempDir(), 'bundle')], {
      env: { HANDOFF_LEDGER_ROOT: root, HANDOFF_LEDGER_HOST: 'h1' },
    });
    expect(env.code, env.stderr).toBe(0);
    expect(env.stdout.split('\n')[1]).toBe("auditors also need this host's public keys: handoff-ledger keys export");
  });

  it('grant, revoke, grants and keys export', () => {
    const root = join(tempDir(), 'store');
    const s = ['--root', root];
    expect(
      cli(['publish', ...s, '--principal', 'alice', '--session', 'g', '--run', 'r'], {
        input: JSON.stringify(sampleSummary()),
      }).code,
    ).toBe(0);
    expect(cli(['resume', ...s, '--principal', 'bob', '--session', 'g']).stderr).toContain('UNAUTHORIZED');
    expect(cli(['grant', ...s, '--principal', 'bob', '--session', 'g']).code).toBe(0);
    expect(cli(['resume', ...s, '--principal', 'bob', '--session', 'g']).code).toBe(0);
    expect(cli(['revoke', ...s, '--principal', 'bob', '--session', 'g']).code).toBe(0);
    expect(cli(['resume', ...s, '--principal', 'bob', '--session', 'g']).stderr).toContain('REVOKED');
    expect(JSON.parse(cli(['grants', ...s, '--json']).stdout)).toEqual([
      expect.objectContaining({ principal: 'bob', session: 'g', state: 'revoked' }),
    ]);
    expect(cli(['grant', ...s, '--principal', 'bob']).code).toBe(2);
    const out = join(tempDir(), 'trust.json');
    expect(cli(['keys', 'export', ...s, '--out', out]).code).toBe(0);
    const trust = JSON.parse(readFileSync(out, 'utf8'));
    expect(trust).toMatchObject({ version: 1, keys: [expect.objectContaining({ host: 'cli-host' })] });
    expect(cli(['keys', 'rotate', ...s]).code).toBe(0);
    expect(JSON.parse(cli(['keys', 'export', ...s]).stdout).keys).toHaveLength(2);
  });

  it('a second open in this process, refused (LOCKED), leaves the lock held; so does a second spelling of the root', async () => {
    const { symlinkSync } = await import('node:fs');
    const base = tempDir();
    const root = join(base, 'store');
    const ledger = await openLedger({ root, host: 'h' });
    await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary());
    // LevelDB's refusal of a second open closed a descriptor of its LOCK file, which dropped the process's lock.
    await expect(openLedger({ root, host: 'h' })).rejects.toMatchObject({ code: 'LOCKED' });
    const aliasParent = join(tempDir(), 'via-link');
    symlinkSync(base, aliasParent);
    await expect(openLedger({ root: join(aliasParent, 'store'), host: 'h' })).rejects.toMatchObject({
      code: 'LOCKED',
      message: expect.stringMatching(/already open in this process/),
    });
    const r = await resumeInChild(root);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/LOCKED: .*another process/s);
    await ledger.close();
    const again = await openLedger({ root: join(aliasParent, 'store'), host: 'h' });
    await again.close();
  });

  it('a second process opening the same root gets LOCKED, exit 2, with what to do', async () => {
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({ root, host: 'h' });
    await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary());
    const r = await resumeInChild(root);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/LOCKED: .*another process.*PostgreSQL/s);
    // What the README's Schedules say to do beside a running Harness: the maintenance in that process.
    expect(r.stderr).toMatch(
      /run the maintenance in it \(the library's fsck, gc and exportBundle on the ledger it has open\)/,
    );
    await ledger.close();
    expect(cli(['resume', '--root', root, '--host', 'h', '--principal', 'alice', '--session', 's']).code).toBe(0);
  });

  it('fsck prints stored data escaped: a tampered session id reaches the terminal without control characters', async () => {
    const root = join(tempDir(), 'store');
    const pub = cli(['publish', '--root', root, '--principal', 'a', '--session', 's', '--run', 'r', '--json'], {
      input: JSON.stringify(sampleSummary()),
    });
    expect(pub.code, pub.stderr).toBe(0);
    const { LevelManifestLog } = await import('../manifests/log/level/log.js');
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    // A copy of the real entry (so the Merkle tree can take it as a leaf) under a hostile session id (its key names it
    // too: an entry naming another session than its key is RECORD_CORRUPT).
    const planted = { ...(await log.entryAt(0))!, position: 1, session: 'evil\u001b[2J' };
    await log.raw.put(`p!${'1'.padStart(16, '0')}`, 'e!evil\u001b[2J!000000000000');
    await log.raw.put('e!evil\u001b[2J!000000000000', JSON.stringify(planted));
    await log.close();
    const f = cli(['fsck', '--root', root]);
    expect(f.code).toBe(1);
    expect(f.stdout).toContain('ROLLBACK\tevil\\x1b[2J\t');
    expect(f.stdout).not.toContain('\u001b');
  });

  it('fsck exits 1 on a finding; gc needs --grace', async () => {
    const root = join(tempDir(), 'store');
    const pub = cli(['publish', '--root', root, '--principal', 'a', '--session', 's', '--run', 'r', '--json'], {
      input: JSON.stringify(sampleSummary()),
    });
    const { digest } = JSON.parse(pub.stdout);
    // A small summary is stored inline in the log: change its bytes there.
    const db = new Level<string, Uint8Array>(join(root, 'manifests-v1'), { valueEncoding: 'view' });
    const key = `b!${digest.slice(7)}`;
    const bytes = Uint8Array.from((await db.get(key))!);
    bytes[0]! ^= 1;
    await db.put(key, bytes);
    await db.close();
    const f = cli(['fsck', '--root', root]);
    expect(f.code).toBe(1);
    expect(f.stdout).toContain('BLOB_DIGEST');
    expect(cli(['gc', '--root', root]).code).toBe(2);
    expect(cli(['gc', '--root', root, '--grace', '1h']).code).toBe(0);
  });
});

describe('handoff-ledger CLI: options the README promises', () => {
  const s = (root: string, session = 's') => ['--root', root, '--principal', 'alice', '--session', session];
  const publish = (root: string, extra: string[] = [], marker: string | number = 1) =>
    cli(['publish', ...s(root), '--run', 'r', '--json', ...extra], { input: JSON.stringify(sampleSummary(marker)) });

  // A size the tree does not have is refused naming the range and the size given, as every refusal of a value names
  // the value: "old size: a tree size from 1 to 1" alone left the operator to find which argument it meant.
  it('prove: a size beyond the tree (or below the old size) is INVALID_ARGUMENT naming the size given', () => {
    const root = join(tempDir(), 'store');
    const first = publish(root, [], 1);
    expect(first.code, first.stderr).toBe(0);
    expect(publish(root, [], 2).code).toBe(0);
    const id = (JSON.parse(first.stdout) as { id: string }).id;
    for (const [args, said] of [
      [['consistency', '12'], 'old size: a tree size from 1 to 2, not 12'],
      [['consistency', '0'], 'old size: a tree size from 1 to 2, not 0'],
      [['consistency', '2', '--size', '1'], 'size: a tree size from 2 to 2, not 1'],
      [['inclusion', id, '--size', '7'], 'size: a tree size from 1 to 2, not 7'],
    ] as const) {
      const r = cli(['prove', ...args, '--root', root]);
      expect(r, args.join(' ')).toEqual({ code: 1, stdout: '', stderr: `handoff-ledger: INVALID_ARGUMENT: ${said}\n` });
      const json = cli(['prove', ...args, '--root', root, '--json']);
      expect(JSON.parse(json.stdout), args.join(' ')).toEqual({ error: { code: 'INVALID_ARGUMENT', message: said } });
    }
  });

  it('publish --expected-prev: the head publishes, a stale one is CHAIN_CONFLICT (exit 1) and appends nothing', () => {
    const root = join(tempDir(), 'store');
    // null: the chain must be empty.
    const first = publish(root, ['--expected-prev', 'null'], 0);
    expect(first.code, first.stderr).toBe(0);
    const id0 = (JSON.parse(first.stdout) as { id: string }).id;
    const second = publish(root, ['--expected-prev', id0], 1);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ seq: 1 });
    for (const stale of [id0, 'null']) {
      const r = publish(root, ['--expected-prev', stale], 2);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^handoff-ledger: CHAIN_CONFLICT: /);
      expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'CHAIN_CONFLICT' } });
    }
    const hist = cli(['history', ...s(root), '--json']);
    expect(JSON.parse(hist.stdout).map((h: { manifest: { seq: number } }) => h.manifest.seq)).toEqual([0, 1]);
  });

  it('keeps a summary of up to 64 KiB inline (no blob file) and writes a larger one to blobs-v1/blake3/aa/bb/<hex>, 0600', () => {
    // The README's on-disk layout: blobs-v1/ holds summaries over inlineSummaryBytes (default 64 KiB), named by digest
    // only, mode 0600; a store of small summaries has none there. The CLI opens with the default.
    const root = join(tempDir(), 'store');
    const env = { HANDOFF_LEDGER_ROOT: root };
    const sized = (bytes: number) => {
      const base = { task: 't', state: 'x', nextSteps: ['n'] };
      const state = 'x'.repeat(1 + bytes - validateSummary(base).bytes.length);
      expect(validateSummary({ ...base, state }).bytes.length).toBe(bytes);
      return JSON.stringify({ ...base, state });
    };
    const blobFiles = () =>
      readdirSync(join(root, 'blobs-v1'), { recursive: true, withFileTypes: true })
        .filter((d) => !d.isDirectory())
        .map((d) => join(d.parentPath, d.name));
    const publish = (session: string, input: string) => {
      const r = cli(['publish', '--principal', 'alice', '--session', session, '--run', 'r', '--json'], { env, input });
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { digest: string; size: number };
    };
    expect(publish('at', sized(64 * 1024)).size).toBe(64 * 1024);
    expect(blobFiles()).toEqual([]);
    const over = publish('over', sized(64 * 1024 + 1));
    expect(over.size).toBe(64 * 1024 + 1);
    const hex = over.digest.slice('blake3:'.length);
    const path = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    expect(blobFiles()).toEqual([path]);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    for (const session of ['at', 'over']) {
      const r = cli(['resume', '--principal', 'alice', '--session', session], { env });
      expect(r.code, r.stderr).toBe(0);
    }
  });

  it('fsck --skip-blobs does not read blob files: a damaged one is reported without it, not with it', async () => {
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({ root, host: 'cli-host', inlineSummaryBytes: 0 });
    const { digest } = await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary());
    await ledger.close();
    const hex = digest.slice('blake3:'.length);
    const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    const bytes = readFileSync(file);
    bytes[0]! ^= 1;
    writeFileSync(file, bytes);
    const full = cli(['fsck', '--root', root]);
    expect(full.code).toBe(1);
    expect(full.stdout).toContain('BLOB_DIGEST\ts\t0\t');
    const quick = cli(['fsck', '--root', root, '--skip-blobs']);
    expect(quick.code, quick.stdout).toBe(0);
    expect(quick.stdout).not.toContain('BLOB_');
    expect(quick.stdout).toMatch(/^clean: 1 chain, 1 manifest, 0 blobs checked$/m);
    const json = cli(['fsck', '--root', root, '--skip-blobs', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, blobsChecked: 0, findings: [] });
  });

  it('gc --dry-run lists what it would remove and removes nothing; gc without it removes that', async () => {
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({ root, host: 'cli-host', inlineSummaryBytes: 0 });
    await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary());
    const orphan = await ledger.blobs.put(new TextEncoder().encode('an orphan of a crashed publish'));
    await ledger.close();
    const blobFiles = () =>
      readdirSync(join(root, 'blobs-v1', 'blake3'), { recursive: true, withFileTypes: true })
        .filter((d) => d.isFile())
        .map((d) => d.name)
        .sort();
    const before = blobFiles();
    expect(before).toHaveLength(2);
    // A grace of 0: every unreferenced blob is old enough.
    const dry = cli(['gc', '--root', root, '--grace', '0s', '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ removed: [orphan.digest], referenced: 1 });
    const human = cli(['gc', '--root', root, '--grace', '0s', '--dry-run']);
    // The text form lists the digests too, one per line, before its count.
    expect(human.stdout).toBe(
      `${orphan.digest}\nwould remove 1 unreferenced blob; 1 referenced, 0 kept within the grace period\n`,
    );
    expect(blobFiles()).toEqual(before);
    const real = cli(['gc', '--root', root, '--grace', '0s', '--json']);
    expect(JSON.parse(real.stdout)).toMatchObject({ removed: [orphan.digest] });
    expect(blobFiles()).toEqual(before.filter((name) => `blake3:${name}` !== orphan.digest));
  });

  it('grant and revoke --by record who decided, and grants lists it', () => {
    const root = join(tempDir(), 'store');
    expect(publish(root).code).toBe(0);
    const granted = cli(['grant', '--root', root, '--principal', 'bob', '--session', 's', '--by', 'admin-1', '--json']);
    expect(granted.code, granted.stderr).toBe(0);
    expect(JSON.parse(granted.stdout)).toMatchObject({
      principal: 'bob',
      session: 's',
      state: 'granted',
      by: 'admin-1',
    });
    expect(JSON.parse(cli(['grants', '--root', root, '--json']).stdout)).toEqual([
      expect.objectContaining({ principal: 'bob', session: 's', state: 'granted', by: 'admin-1' }),
    ]);
    const revoked = cli(['revoke', '--root', root, '--principal', 'bob', '--all', '--by', 'security-team', '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ session: '*', state: 'revoked', by: 'security-team' });
    const listed = cli(['grants', '--root', root]).stdout.split('\n').filter(Boolean);
    expect(listed).toContainEqual(expect.stringMatching(/^bob\t\*\trevoked\t[^\t]+\tsecurity-team$/));
    expect(listed).toContainEqual(expect.stringMatching(/^bob\ts\tgranted\t[^\t]+\tadmin-1$/));
    // Without --by, nothing is recorded for it.
    const plain = cli(['grant', '--root', root, '--principal', 'carol', '--session', 's', '--json']);
    expect(JSON.parse(plain.stdout)).not.toHaveProperty('by');
  });

  it("grants --session S lists that session's grants and revocations alone, with --principal too; an invalid id is INVALID_ID", () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    for (const [cmd, principal, session] of [
      ['grant', 'bob', 's1'],
      ['grant', 'bob', 's2'],
      ['grant', 'carol', 's1'],
      ['revoke', 'carol', 's2'],
    ] as const)
      expect(cli([cmd, '--root', root, '--principal', principal, '--session', session]).code).toBe(0);
    const rows = (args: string[]) => {
      const r = cli(['grants', '--root', root, ...args]);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('\t').slice(0, 3).join(' '));
    };
    expect(rows([])).toEqual(['bob s1 granted', 'bob s2 granted', 'carol s1 granted', 'carol s2 revoked']);
    expect(rows(['--session', 's1'])).toEqual(['bob s1 granted', 'carol s1 granted']);
    expect(rows(['--session', 's2'])).toEqual(['bob s2 granted', 'carol s2 revoked']);
    expect(rows(['--session', 's2', '--principal', 'carol'])).toEqual(['carol s2 revoked']);
    expect(rows(['--session', 's3'])).toEqual([]);
    const json = cli(['grants', '--root', root, '--session', 's1', '--json']);
    expect(JSON.parse(json.stdout)).toEqual([
      expect.objectContaining({ principal: 'bob', session: 's1', state: 'granted' }),
      expect.objectContaining({ principal: 'carol', session: 's1', state: 'granted' }),
    ]);
    const bad = cli(['grants', '--root', root, '--session', 'bad id']);
    expect([bad.code, bad.stdout]).toEqual([1, '']);
    expect(bad.stderr).toMatch(/^handoff-ledger: INVALID_ID: session "bad id" is not a valid id/);
  });

  it('grants --session S lists the principal-wide records (revoke --all, grant --all) with it, marked as applying to every session', () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    for (const args of [
      ['grant', '--principal', 'bob', '--session', 's1'],
      ['revoke', '--principal', 'bob', '--all', '--by', 'security-team'],
      ['grant', '--principal', 'carol', '--session', 's2'],
      ['revoke', '--principal', 'dave', '--all'],
      ['grant', '--principal', 'dave', '--all'],
    ])
      expect(cli([...args, '--root', root]).code, args.join(' ')).toBe(0);
    const rows = (args: string[]) => {
      const r = cli(['grants', '--root', root, ...args]);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout
        .split('\n')
        .filter(Boolean)
        .map((line) =>
          line
            .split('\t')
            .filter((_, i) => i !== 3)
            .join(' '),
        );
    };
    // Who can access s1: bob is revoked everywhere (his grant of s1 does not let him in), dave's revocation is lifted.
    expect(rows(['--session', 's1'])).toEqual([
      'bob * revoked (every session) security-team',
      'bob s1 granted',
      'dave * revocation lifted (every session)',
    ]);
    expect(rows(['--session', 's1', '--principal', 'bob'])).toEqual([
      'bob * revoked (every session) security-team',
      'bob s1 granted',
    ]);
    expect(rows(['--session', 's3', '--principal', 'bob'])).toEqual(['bob * revoked (every session) security-team']);
    expect(rows(['--session', 's2', '--principal', 'carol'])).toEqual(['carol s2 granted']);
    // Without --session, the record is listed as before: session * is all sessions.
    expect(rows(['--principal', 'bob'])).toEqual(['bob * revoked security-team', 'bob s1 granted']);
    const json = JSON.parse(cli(['grants', '--root', root, '--session', 's3', '--json']).stdout);
    expect(json).toEqual([
      {
        principal: 'bob',
        session: '*',
        state: 'revoked',
        at: expect.any(String),
        by: 'security-team',
        everySession: true,
      },
      {
        principal: 'dave',
        session: '*',
        state: 'granted',
        at: expect.any(String),
        everySession: true,
        revocationLifted: true,
      },
    ]);
    expect(JSON.parse(cli(['grants', '--root', root, '--json']).stdout)).toContainEqual(
      expect.objectContaining({ principal: 'bob', session: '*', everySession: true }),
    );
    expect(cli(['resume', '--root', root, '--principal', 'bob', '--session', 's1']).stderr).toMatch(/REVOKED/);
    expect(cli(['grants', '--help']).stdout).toContain('which apply to it too: their state ends "(every session)"');
  });

  it('grant --all says it lifts a revocation of every session, grants no session, and names the revocations that stay', () => {
    const root = join(tempDir(), 'store');
    expect(publish(root).code).toBe(0); // alice's session s
    const as = (...args: string[]) => cli([...args, '--root', root]);
    expect(as('revoke', '--principal', 'bob', '--session', 'other').code).toBe(0);
    expect(as('revoke', '--principal', 'bob', '--all').code).toBe(0);
    const lifted = as('grant', '--principal', 'bob', '--all');
    expect(lifted.code, lifted.stderr).toBe(0);
    expect(lifted.stdout).toMatch(/^lifted the revocation of bob at \S+\n$/);
    expect(lifted.stderr).toContain('grant --all grants no session');
    expect(lifted.stderr).toContain('bob stays revoked on 1 session: other');
    // The listing does not show the lifted revocation as a grant of every session: --json keeps the record's state
    // (the --json contract) and says it beside it, `revocationLifted: true`.
    const listed = as('grants', '--principal', 'bob').stdout.split('\n').filter(Boolean);
    expect(listed).toEqual([
      expect.stringMatching(/^bob\t\*\trevocation lifted\t[^\t]+$/),
      expect.stringMatching(/^bob\tother\trevoked\t[^\t]+$/),
    ]);
    expect(JSON.parse(as('grants', '--principal', 'bob', '--json').stdout)).toEqual([
      expect.objectContaining({ session: '*', state: 'granted', everySession: true, revocationLifted: true }),
      expect.not.objectContaining({ revocationLifted: expect.anything() }),
    ]);
    // Bob still reads nothing of alice's: the help and output said so.
    const resumed = as('resume', '--principal', 'bob', '--session', 's');
    expect(resumed.code).toBe(1);
    expect(resumed.stderr).toMatch(/UNAUTHORIZED/);
    // --json of grant --all and revoke --all marks the record of every session as grants --json lists it: a bare
    // `"session": "*", "state": "granted"` read as a grant of every session, which the note on stderr says it is not.
    const json = (...args: string[]) => JSON.parse(as(...args, '--json').stdout) as Record<string, unknown>;
    const revokedAll = json('revoke', '--principal', 'erin', '--all');
    expect(revokedAll).toMatchObject({ session: '*', everySession: true });
    expect(revokedAll).not.toHaveProperty('revocationLifted');
    expect(json('grant', '--principal', 'erin', '--all')).toMatchObject({
      session: '*',
      state: 'granted',
      everySession: true,
      revocationLifted: true,
    });
    const one = json('grant', '--principal', 'erin', '--session', 's');
    expect(one).not.toHaveProperty('everySession');
    expect(one).not.toHaveProperty('revocationLifted');
    const again = as('grant', '--principal', 'carol', '--all');
    expect(again.stdout).toMatch(/^no revocation on all sessions to lift for carol at /);
    expect(again.stderr).not.toContain('stays revoked');
    expect(cli(['grant', '--help']).stdout).toMatch(
      /--all +lift a revocation of every session \(revoke --all\); grants no session/,
    );
  });

  it("grant and revoke refuse --session '*' (a glob the shell left) with USAGE naming --all, and record nothing", () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    for (const kind of ['grant', 'revoke']) {
      const r = cli([kind, '--root', root, '--principal', 'bob', '--session', '*']);
      expect(r, kind).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toContain('USAGE: --session "*" is no session id; give --all for every session');
    }
    expect(cli(['grants', '--root', root, '--json']).stdout).toBe('[]\n');
  });

  it("grants refuses --session '*' with USAGE (it listed revoke --all as a grant of a session named *), before the store is opened", () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    expect(cli(['revoke', '--root', root, '--principal', 'bob', '--all']).code).toBe(0);
    expect(cli(['grant', '--root', root, '--principal', 'carol', '--session', 's1']).code).toBe(0);
    for (const json of [[], ['--json']]) {
      const r = cli(['grants', '--root', root, '--session', '*', ...json]);
      expect(r, json.join()).toMatchObject({ code: 2 });
      expect(r.stderr).toContain('USAGE: --session "*" is no session id; without --session every record is listed');
      expect(json.length ? JSON.parse(r.stdout) : r.stdout).toEqual(
        json.length ? { error: { code: 'USAGE', message: expect.stringContaining('--session "*"') } } : '',
      );
    }
    // Refused before the store is opened: none is made.
    const missing = join(tempDir(), 'none');
    expect(cli(['grants', '--root', missing, '--session', '*'])).toMatchObject({ code: 2, stdout: '' });
    expect(existsSync(missing)).toBe(false);
    // Every record, the revocation of all sessions as session *, is listed without --session (or with --principal).
    const rows = cli(['grants', '--root', root]).stdout.split('\n').filter(Boolean);
    expect(rows.map((row) => row.split('\t').slice(0, 3).join(' '))).toEqual(['bob * revoked', 'carol s1 granted']);
    expect(cli(['grants', '--root', root, '--principal', 'bob']).stdout).toMatch(/^bob\t\*\trevoked\t[^\t]+\n$/);
    expect(cli(['grants', '--help']).stdout).toContain('session * is all sessions: revoke --all "revoked"');
  });

  it('counts in the singular for one and the plural otherwise (export, verify, fsck, gc, keys export)', () => {
    const base = tempDir();
    const [root, trust] = [join(base, 'store'), join(base, 'trust.json')];
    const put = (session: string, marker: number) =>
      cli(['publish', '--root', root, '--principal', 'a', '--session', session, '--run', 'r'], {
        input: JSON.stringify(sampleSummary(marker)),
      }).code;
    // export's, verify's and fsck's stdout, one after the other.
    const audit = (out: string, ...scope: string[]) =>
      [
        ['export', '--root', root, ...scope, '--with-blobs', '--out', join(base, out)],
        // The auditor names the scope exported (a filter only the header declares is SCOPE_UNCONFIRMED).
        ['verify', join(base, out), '--trust', trust, ...scope],
        ['fsck', '--root', root],
      ]
        .map((args) => cli(args).stdout)
        .join('');
    expect(put('s', 1)).toBe(0);
    expect(cli(['keys', 'export', '--root', root, '--out', trust]).stdout).toMatch(
      /^wrote 1 trusted key and 1 checkpoint key to /,
    );
    const one = audit('one', '--session', 's');
    expect(one).toContain('exported 1 manifest in 1 chain and 1 blob to ');
    expect(one).toContain('completeness (1 session head proven at the checkpoint)');
    expect(one).toMatch(/^chain s: 1 manifest, head seq 0 \S+ — ok$/m);
    expect(one).toContain(
      'verdict: OK — 1 manifest in 1 chain verified, 1 blob checked (filtered bundle: session s, scope from auditor)\n',
    );
    expect(one).toContain('clean: 1 chain, 1 manifest, 1 blob checked\n');
    expect(cli(['gc', '--root', root, '--grace', '0s']).stdout).toBe(
      'removed 0 unreferenced blobs; 1 referenced, 0 kept within the grace period\n',
    );
    expect([put('s', 2), put('t', 3)]).toEqual([0, 0]);
    const two = audit('two');
    expect(two).toContain('exported 3 manifests in 2 chains and 3 blobs to ');
    expect(two).toContain('completeness (2 session heads proven at the checkpoint)');
    expect(two).toMatch(/^chain s: 2 manifests, head seq 1 \S+ — ok$/m);
    expect(two).toContain('verdict: OK — 3 manifests in 2 chains verified, 3 blobs checked\n');
    expect(two).toContain('clean: 2 chains, 3 manifests, 3 blobs checked\n');
  });

  it('history names who published each manifest: the owner or a grantee, a column of its own', () => {
    const root = join(tempDir(), 'store');
    const as = (principal: string, ...args: string[]) =>
      cli([...args, '--root', root, '--principal', principal, '--session', 's'], {
        input: JSON.stringify(sampleSummary(principal)),
      });
    expect(as('alice', 'publish', '--run', 'r1').code).toBe(0);
    expect(as('bob', 'grant').code).toBe(0);
    expect(as('bob', 'publish', '--run', 'r2').code).toBe(0);
    const rows = as('alice', 'history')
      .stdout.split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t'));
    expect(rows.map((r) => r.slice(0, 6))).toEqual([
      ['0', expect.any(String), 'alice', 'cli-host', 'r1', expect.stringMatching(/^blake3:/)],
      ['1', expect.any(String), 'bob', 'cli-host', 'r2', expect.stringMatching(/^blake3:/)],
    ]);
    expect(rows[0]![6]).toMatch(/^\d+ bytes$/);
    const json = JSON.parse(as('bob', 'history', '--json').stdout) as Array<{ manifest: { principal: string } }>;
    expect(json.map((e) => e.manifest.principal)).toEqual(['alice', 'bob']);
  });

  it('keys revoke gives the code: a time without milliseconds or the checkpoint key INVALID_ARGUMENT, an unknown key KEY_INVALID', () => {
    const root = join(tempDir(), 'store');
    const trustFile = join(tempDir(), 'trust.json');
    expect(cli(['init', '--root', root]).code).toBe(0);
    expect(cli(['keys', 'export', '--root', root, '--out', trustFile]).code).toBe(0);
    const trust = JSON.parse(readFileSync(trustFile, 'utf8')) as {
      keys: Array<{ keyId: string }>;
      checkpointKeys: Array<{ keyId: string }>;
    };
    const hostKey = trust.keys[0]!.keyId;
    const before = readFileSync(join(root, 'trust.json'), 'utf8');
    for (const [args, code] of [
      [[hostKey, '--at', '2026-11-30T12:00:00Z'], 'INVALID_ARGUMENT'],
      [[trust.checkpointKeys[0]!.keyId], 'INVALID_ARGUMENT'],
      [['ed25519:no-such-key'], 'KEY_INVALID'],
    ] as const) {
      const r = cli(['keys', 'revoke', ...args, '--root', root]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^handoff-ledger: ${code}: `));
    }
    expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(before);
  });

  it('export --since refuses a checkpoint of another log and a file it cannot read as usage errors (exit 2), writing no bundle', () => {
    const root = join(tempDir(), 'store');
    expect(publish(root).code).toBe(0);
    const other = join(tempDir(), 'other');
    expect(cli(['publish', ...s(other), '--run', 'r'], { input: JSON.stringify(sampleSummary()) }).code).toBe(0);
    const foreign = join(tempDir(), 'other.note');
    const note = cli(['checkpoint', '--root', other]);
    expect(note.code, note.stderr).toBe(0);
    writeFileSync(foreign, note.stdout);
    const out = join(tempDir(), 'bundle');
    const refused = cli(['export', '--root', root, '--out', out, '--since', foreign]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^handoff-ledger: USAGE: --since: not a checkpoint of this log: /);
    const missing = cli(['export', '--root', root, '--out', out, '--since', join(tempDir(), 'none.note')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^handoff-ledger: USAGE: --since ".*none\.note": ENOENT \(no such file or directory\)$/m,
    );
    expect(existsSync(out)).toBe(false);
    // Its own checkpoint is taken.
    const own = join(tempDir(), 'own.note');
    writeFileSync(own, cli(['checkpoint', '--root', root]).stdout);
    expect(cli(['export', '--root', root, '--out', out, '--since', own]).code).toBe(0);
  });

  it('export --since names its flag in each refusal and its advice, as the library names its `since` option', () => {
    // The store's checkpoint key of the time revoked since (with the host key, after a compromise): the refusal that
    // names the key also says what to do, in the command's words (`export without --since`), not the library's.
    const root = join(tempDir(), 'store');
    expect(publish(root).code).toBe(0);
    const earlier = join(tempDir(), 'earlier.note');
    writeFileSync(earlier, cli(['checkpoint', '--root', root]).stdout);
    const trustFile = join(tempDir(), 'trust.json');
    expect(cli(['keys', 'export', '--root', root, '--out', trustFile]).code).toBe(0);
    const hostKey = (JSON.parse(readFileSync(trustFile, 'utf8')) as { keys: Array<{ keyId: string }> }).keys[0]!.keyId;
    expect(cli(['keys', 'rotate', '--root', root]).code).toBe(0);
    const revoked = cli(['keys', 'revoke', hostKey, '--at', '2000-01-01T00:00:00.000Z', '--root', root]);
    expect(revoked.code, revoked.stderr).toBe(0);
    const out = join(tempDir(), 'bundle');
    const refused = cli(['export', '--root', root, '--out', out, '--since', earlier]);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(
      /^handoff-ledger: USAGE: --since: the earlier checkpoint is signed by checkpoint key /,
    );
    expect(refused.stderr).toContain('export without --since, and give the auditor');
    expect(existsSync(out)).toBe(false);
  });
});

describe('handoff-ledger CLI: only init and publish make a host a key', () => {
  /** Every file under `root` with its bytes: what a refused command must leave exactly as it was. */
  function snapshot(root: string): Map<string, string> {
    const out = new Map<string, string>();
    for (const name of readdirSync(root, { recursive: true, encoding: 'utf8' })) {
      const path = join(root, name);
      try {
        out.set(name, readFileSync(path).toString('base64'));
      } catch {
        out.set(name, '(directory)');
      }
    }
    return out;
  }

  /** Commands that read or maintain a store, each as the argv after the store's options. */
  const readers: string[][] = [
    ['resume', '--principal', 'alice', '--session', 's'],
    ['history', '--principal', 'alice', '--session', 's'],
    ['grants', '--principal', 'alice'],
    ['grant', '--principal', 'bob', '--session', 's'],
    ['keys', 'list'],
    ['keys', 'rotate'],
    ['checkpoint'],
    ['prove', 'consistency', '1'],
    ['fsck'],
    ['gc', '--grace', '24h'],
  ];

  it('refuses every other command for a host without a key in the root (KEY_INVALID, exit 1), naming the hosts that have one, and writes nothing', () => {
    const root = join(tempDir(), 'store');
    expect(
      cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], {
        input: JSON.stringify(sampleSummary()),
      }).code,
    ).toBe(0);
    const out = join(tempDir(), 'out');
    const before = snapshot(root);
    for (const argv of [
      ...readers,
      ['export', '--out', join(out, 'bundle')],
      ['keys', 'export', '--out', join(out, 'trust.json')],
    ]) {
      const r = cli([...argv, '--root', root, '--host', 'typo-host']);
      expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toBe(
        `handoff-ledger: KEY_INVALID: host "typo-host" has no signing key in "${root}" and this command makes none; hosts with keys here: "cli-host" (choose one with --host, the library's host option), or \`init --host typo-host\` (an open without createHostKey: false) adds this host\n`,
      );
      expect(snapshot(root)).toEqual(before);
    }
    expect(existsSync(out)).toBe(false);
    // The host that has its key is served as before; init adds the new host, after which it is served too.
    expect(cli(['fsck', '--root', root]).code).toBe(0);
    expect(cli(['init', '--root', root, '--host', 'typo-host']).code).toBe(0);
    const added = cli(['history', '--root', root, '--host', 'typo-host', '--principal', 'alice', '--session', 's']);
    expect(added.code, added.stderr).toBe(0);
  });

  it('on a root with no store, refuses and creates nothing; init and publish make the store', () => {
    const root = join(tempDir(), 'none');
    for (const argv of readers) {
      const r = cli([...argv, '--root', root]);
      expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toBe(
        `handoff-ledger: KEY_INVALID: no store at "${root}" (no trust.json); \`init\` makes one (in the library, an open without createHostKey: false)\n`,
      );
      expect(existsSync(root)).toBe(false);
    }
    expect(
      cli(['publish', '--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'], {
        input: JSON.stringify(sampleSummary()),
      }).code,
    ).toBe(0);
    expect(cli(['resume', '--root', root, '--principal', 'alice', '--session', 's']).code).toBe(0);
  });

  // procfs answers ENOENT to a mkdir under an existing directory: Node's recursive mkdir then spun forever at full CPU.
  it.runIf(existsSync('/proc/self'))(
    'init on a root that cannot be made (under /proc) and witness serve on such a --state end with STORAGE_FAILED, exit 2',
    () => {
      const run = (args: string[]) =>
        spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 15_000, input: '' });
      const none = `/proc/handoff-ledger-none-${process.pid}`;
      const init = run(['init', '--root', `${none}/store`, '--host', 'h']);
      expect(init.status, init.stderr).toBe(2);
      expect(init.stderr).toMatch(/^handoff-ledger: STORAGE_FAILED: cannot create .*ENOENT/);
      const dir = tempDir();
      const key = join(dir, 'w.key');
      const logs = join(dir, 'logs.json');
      writeFileSync(logs, '{"logs":[]}');
      expect(run(['witness', 'keygen', '--name', 'w.example/w1', '--out', key]).status).toBe(0);
      const serve = run(['witness', 'serve', '--listen', '127.0.0.1:0', '--key', key, '--logs', logs, '--state', none]);
      expect(serve.status, serve.stderr).toBe(2);
      expect(serve.stderr).toMatch(/^handoff-ledger: STORAGE_FAILED: cannot create .*ENOENT/);
    },
    40_000,
  );

  it('says so when the host is listed but its key file is gone, and makes no new key', async () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    const { hostKeyPath } = await import('../src/keys/keyring.js');
    const { rmSync } = await import('node:fs');
    rmSync(hostKeyPath(root, 'cli-host'));
    const before = snapshot(root);
    const r = cli(['fsck', '--root', root]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `handoff-ledger: KEY_INVALID: host "cli-host" is listed in trust.json but this root holds no key file of it ("${hostKeyPath(root, 'cli-host')}"): lost, or held in a key file or signer of its own, which this open was not given (the CLI gives none; the library: keyFile, signer); this command makes no key. Restore it from the newest backup of this root's keys (keys/ with trust.json, README "Backups"); if it is lost: \`publish\` or \`init\` with this host (an open without createHostKey: false) makes a new one, and \`keys revoke <keyId>\` ends the lost one (README "Key rotation runbook")\n`,
    );
    expect(snapshot(root)).toEqual(before);
  });

  it('rebuilds no missing trust.json of a store that signed nothing (KEY_INVALID); init does', async () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    const { renameSync } = await import('node:fs');
    renameSync(join(root, 'trust.json'), join(root, 'trust.json.away'));
    const r = cli(['fsck', '--root', root]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `handoff-ledger: KEY_INVALID: "${join(root, 'trust.json')}" is missing and nothing was signed in this store yet; this command lists no key: \`init --host cli-host\` lists it\n`,
    );
    expect(existsSync(join(root, 'trust.json'))).toBe(false);
    expect(cli(['init', '--root', root]).code).toBe(0);
    expect(cli(['fsck', '--root', root]).code).toBe(0);
  });

  it("says what to do with a host key file copied from another store over this host's own (KEY_INVALID, nothing listed)", async () => {
    const base = tempDir();
    const ours = join(base, 'ours');
    const theirs = join(base, 'theirs');
    expect(cli(['init', '--root', theirs, '--host', 'h1']).code).toBe(0);
    const init = cli(['init', '--root', ours, '--host', 'h1', '--json']);
    const own = (JSON.parse(init.stdout) as { keyId: string }).keyId;
    const { hostKeyPath } = await import('../src/keys/keyring.js');
    const { loadKeyFile } = await import('../src/keys/local-signer.js');
    const file = hostKeyPath(ours, 'h1');
    const { copyFileSync } = await import('node:fs');
    copyFileSync(hostKeyPath(theirs, 'h1'), file);
    const copied = (await loadKeyFile(file)).keyId;
    const trust = readFileSync(join(ours, 'trust.json'));
    for (const argv of [['fsck'], ['keys', 'list'], ['history', '--principal', 'a', '--session', 's']]) {
      const r = cli([...argv, '--root', ours, '--host', 'h1']);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.stderr).toBe(
        `handoff-ledger: KEY_INVALID: "${join(ours, 'trust.json')}" does not list key "${copied}" of host "h1", read from "${file}", and lists "${own}" as this host's current key: a key file copied from another store or host over this host's own? Then put this host's own key file back at "${file}" (from a backup); if it is lost, move "${file}" aside and run \`init --host h1\`, which makes this host a new key, then revoke the lost one (\`keys revoke ${own}\`). Do not list the copy (\`init\` or \`publish\` with it in place would): this store would trust what it signs elsewhere. Or a trust.json from before its last rotation: restore the current one. This command lists no key\n`,
      );
    }
    expect(readFileSync(join(ours, 'trust.json'))).toEqual(trust);
  });

  it("says a key that signed here is the store's own when trust.json is from before its rotation (KEY_INVALID)", async () => {
    const root = join(tempDir(), 'store');
    const summary = join(tempDir(), 'summary.json');
    writeFileSync(summary, JSON.stringify(sampleSummary('rotated')));
    expect(cli(['init', '--root', root, '--host', 'h1']).code).toBe(0);
    const old = readFileSync(join(root, 'trust.json'));
    const rotated = cli(['keys', 'rotate', '--root', root, '--host', 'h1', '--json']);
    expect(rotated.code, rotated.stderr).toBe(0);
    const scope = ['--principal', 'a', '--session', 's', '--run', 'r'];
    expect(cli(['publish', '--root', root, '--host', 'h1', ...scope, summary]).code).toBe(0);
    writeFileSync(join(root, 'trust.json'), old, { mode: 0o600 }); // a backup from before the rotation
    const r = cli(['fsck', '--root', root, '--host', 'h1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^handoff-ledger: KEY_INVALID: .* does not list key "ed25519:[0-9a-f]+" of host "h1", read from ".*", which signed manifests of this store: a trust\.json from before its last rotation; restore the current one/,
    );
    // A command that may list keys (publish, init) is refused in the same words, the host named as every id is.
    for (const args of [['publish', ...scope, summary], ['init']]) {
      const refused = cli([...args, '--root', root, '--host', 'h1']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^handoff-ledger: KEY_INVALID: .* does not list key "ed25519:[0-9a-f]+" of host "h1", which signed manifests of this store: a trust\.json from before its last rotation; restore the current one .*; nothing was listed\n$/,
      );
    }
    expect(readFileSync(join(root, 'trust.json'))).toEqual(old);
  });

  it('lists no key file trust.json does not list (KEY_INVALID, no key written or listed); init lists it', async () => {
    const root = join(tempDir(), 'store');
    expect(cli(['init', '--root', root]).code).toBe(0);
    const { hostKeyPath } = await import('../src/keys/keyring.js');
    const { generateJwk, writeKeyFile, LocalSigner } = await import('../src/keys/local-signer.js');
    const jwk = generateJwk();
    await writeKeyFile(hostKeyPath(root, 'other-host'), jwk); // a first open of other-host that stopped before listing
    const keyId = new LocalSigner(jwk).keyId;
    // The keys and what trusts them (the log's database reorganises its own files at each open).
    const trustState = () => new Map([...snapshot(root)].filter(([name]) => !name.startsWith('manifests-v1')));
    const before = trustState();
    const r = cli(['history', '--root', root, '--host', 'other-host', '--principal', 'a', '--session', 's']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `handoff-ledger: KEY_INVALID: "${join(root, 'trust.json')}" does not list key "${keyId}" of host "other-host", read from "${hostKeyPath(root, 'other-host')}": a key whose first open stopped before listing it (\`init --host other-host\` lists it), or a trust.json from before its last rotation (restore the current one); a key file copied from another store or host is not to be listed: move "${hostKeyPath(root, 'other-host')}" aside, and \`init --host other-host\` makes this host a key of its own. This command lists no key\n`,
    );
    expect(trustState()).toEqual(before);
    const init = cli(['init', '--root', root, '--host', 'other-host', '--json']);
    expect(init.code, init.stderr).toBe(0);
    expect(JSON.parse(init.stdout)).toMatchObject({ keyId });
    expect(cli(['history', '--root', root, '--host', 'other-host', '--principal', 'a', '--session', 's']).code).toBe(0);
  });
});
