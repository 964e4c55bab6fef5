/**
 * The conventions every command keeps: `--help` and `help <command>`, `--version`, `--json` on every
 * command that prints data, the documented exit codes (0 ok, 1 refused, 2 usage), errors on stderr and
 * data on stdout, and NO_COLOR. The table below must name every command, so a new one is held to them too.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Readable, type Writable } from 'node:stream';
import { Level } from 'level';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commands } from '../src/cli/commands.js';
import { main } from '../src/cli/main.js';
import { captureIo, helpHint } from './support/capture-io.js';
import { sampleSummary } from './support/tmp.js';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

// One store for the whole file (tempDir() is removed after each test).
const base = mkdtempSync(join(tmpdir(), 'hl-conventions-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const root = join(base, 'store');
const store = ['--root', root, '--host', 'conv-host'];
const scope = [...store, '--principal', 'alice', '--session', 's1'];
const badHost = ['--root', root, '--host', 'not a host id'];
let fresh = 0;
const newDir = () => join(base, `out-${fresh++}`);
const files = {
  summary: join(base, 'summary.json'),
  invalid: join(base, 'invalid.json'),
  bundle: join(base, 'bundle'),
  trust: join(base, 'keys.json'),
  strangerTrust: join(base, 'stranger.json'),
};

async function cli(argv: string[], o: { env?: NodeJS.ProcessEnv; tty?: boolean } = {}) {
  const c = captureIo({ env: o.env ?? {} });
  if (o.tty) (c.io.stdout as Writable & { isTTY?: boolean }).isTTY = true;
  const code = await main(argv, c.io);
  return { code, stdout: c.stdout(), stderr: c.stderr() };
}

beforeAll(async () => {
  writeFileSync(files.summary, JSON.stringify(sampleSummary('conventions')));
  writeFileSync(files.invalid, JSON.stringify({ task: '' }));
  for (const argv of [
    ['publish', ...scope, '--run', 'r1', files.summary],
    ['export', ...store, '--out', files.bundle],
    ['keys', 'export', ...store, '--out', files.trust],
    ['init', '--root', join(base, 'stranger'), '--host', 'stranger'],
    ['keys', 'export', '--root', join(base, 'stranger'), '--host', 'stranger', '--out', files.strangerTrust],
  ]) {
    const r = await cli(argv);
    if (r.code !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
  }
}, 120_000);

/** Per command: a line that succeeds and one that is refused with exit 1. */
const cases: Record<string, { ok: () => string[]; refused: () => string[] }> = {
  init: { ok: () => ['init', ...store], refused: () => ['init', ...badHost] },
  publish: {
    ok: () => ['publish', ...scope, '--run', 'r2', files.summary],
    refused: () => ['publish', ...scope, '--run', 'r2', files.invalid],
  },
  resume: {
    ok: () => ['resume', ...scope],
    refused: () => ['resume', ...store, '--principal', 'alice', '--session', 'not a session'],
  },
  history: {
    ok: () => ['history', ...scope],
    refused: () => ['history', ...store, '--principal', 'alice', '--session', 'not a session'],
  },
  grant: {
    ok: () => ['grant', ...store, '--principal', 'bob', '--session', 's1'],
    refused: () => ['grant', ...store, '--principal', 'not a principal', '--session', 's1'],
  },
  revoke: {
    ok: () => ['revoke', ...store, '--principal', 'carol', '--session', 's1'],
    refused: () => ['revoke', ...store, '--principal', 'not a principal', '--session', 's1'],
  },
  grants: { ok: () => ['grants', ...store], refused: () => ['grants', ...badHost] },
  keys: { ok: () => ['keys', 'list', ...store], refused: () => ['keys', 'revoke', 'no-such-key', ...store] },
  export: {
    ok: () => ['export', ...store, '--out', newDir()],
    refused: () => ['export', ...badHost, '--out', newDir()],
  },
  verify: {
    ok: () => ['verify', files.bundle, '--trust', files.trust],
    refused: () => ['verify', files.bundle, '--trust', files.strangerTrust],
  },
  fsck: { ok: () => ['fsck', ...store], refused: () => ['fsck', ...badHost] },
  checkpoint: { ok: () => ['checkpoint', ...store], refused: () => ['checkpoint', ...badHost] },
  prove: {
    ok: () => ['prove', 'consistency', '1', ...store],
    refused: () => ['prove', 'inclusion', `blake3:${'a'.repeat(64)}`, ...store],
  },
  gc: { ok: () => ['gc', ...store, '--grace', '1h'], refused: () => ['gc', ...badHost, '--grace', '1h'] },
  'audit-ui': { ok: () => ['audit-ui'], refused: () => ['audit-ui'] },
  // serve runs until interrupted: its exits are tested with real processes in test/witness/.
  witness: {
    ok: () => ['witness', 'keygen', '--name', 'witness.example/w1', '--out', `${newDir()}.key`],
    refused: () => ['witness', 'keygen', '--name', 'not a name', '--out', `${newDir()}.key`],
  },
  demo: {
    ok: () => ['demo', '--root', newDir()],
    refused: () => ['demo', '--root', newDir(), '--host', 'not a host id'],
  },
};
/** Commands whose refusal is a report of findings on stdout rather than an error on stderr. */
const findingsOnStdout = new Set(['verify']);
/** demo narrates its steps on stdout as it goes; a refusal stops the story, its error still on stderr. */
const narrates = new Set(['demo']);
/** audit-ui serves until interrupted and has no refusal; its exits are tested in test/web/audit-ui.test.ts. */
const serves = new Set(['audit-ui']);

describe('the command table', () => {
  it('names every command the CLI has', () => {
    expect(Object.keys(cases).sort()).toEqual(Object.keys(commands).sort());
  });
});

describe('handoff-ledger --version', () => {
  it("prints the package's version and a newline on stdout", async () => {
    for (const flag of ['--version', '-V', 'version'])
      expect(await cli([flag])).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });
});

describe('handoff-ledger help', () => {
  it('prints the usage on stdout for --help, and on stderr with exit 2 when no command is given', async () => {
    const help = await cli(['--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage: handoff-ledger <command>[\s\S]*Exit codes:[\s\S]*\n$/);
    const none = await cli([]);
    expect(none).toMatchObject({ code: 2, stdout: '', stderr: help.stdout });
  });

  it("ends an unknown command's message with a newline before the usage", async () => {
    const r = await cli(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    // Coded as every other usage error is (`handoff-ledger: USAGE: …`): it was the one refusal without its code.
    expect(r.stderr).toMatch(/^handoff-ledger: USAGE: unknown command "frobnicate"\n\nusage: [\s\S]*\n$/);
  });

  it('refuses help for a command that does not exist, with its code', async () => {
    const r = await cli(['help', 'frobnicate']);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/^handoff-ledger: USAGE: no command "frobnicate"\n\nusage: [\s\S]*\n$/);
  });

  // A misspelt option names the one it is a slip of (`init --hots x` said only "Unknown option '--hots'").
  it.each([
    [['init', '--hots', 'x'], `unknown option "--hots" (did you mean '--host'?)`],
    [['history', '--Session', 's'], `unknown option "--Session" (did you mean '--session'?)`],
    [['gc', '--dryrun'], `unknown option "--dryrun" (did you mean '--dry-run'?)`],
    [['history', '--limit', '2'], 'unknown option "--limit"\n'],
    // A command that takes arguments (verify DIR, publish FILE, keys, prove, witness, audit-ui) got Node's own message,
    // whose hint about `--` ends in an unclosed quote, with the did-you-mean after it:
    // `Unknown option '--trusst'. To specify a positional argument … as in '-- "--trusst" (did you mean '--trust'?)`.
    [['verify', 'bundle', '--trusst', 'keys.json'], `unknown option "--trusst" (did you mean '--trust'?)\n`],
    [['publish', '--princpal', 'a'], `unknown option "--princpal" (did you mean '--principal'?)\n`],
    [['keys', 'rotate', '--hots', 'x'], `unknown option "--hots" (did you mean '--host'?)\n`],
    [['audit-ui', '--trsut', 'x'], `unknown option "--trsut" (did you mean '--trust'?)\n`],
    [
      ['publish', '--bogus'],
      `unknown option "--bogus"; an argument that begins with '-' goes after '--': -- --bogus\n`,
    ],
  ])('names the option %j is close to, if one is', async (argv, message) => {
    const r = await cli(argv);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toContain(`handoff-ledger: USAGE: ${message}`);
  });

  // The option echoed back is the argument given, whole, quoted once (`quoted`: a JSON string, what a terminal acts on
  // as \uXXXX): put in raw, one holding a quote was cut at it (`--a'b` said "Unknown option '--a'"), and one holding a
  // control character had the whole line escaped. The hint's argument after `--` is one shell word (a pasted
  // `-- --$(id)` ran `id`), printed as it is (its `'\''` was printed `'\\''`, which a shell reads as another word); a
  // short option in a group (`-xyz`) or with a value (`--bogus=v`) is given back as typed after `--`. A word that
  // cannot be shown to paste (a line break or control character in it, which prints escaped) is not offered: the
  // argument is named quoted instead.
  it.each([
    [
      ['publish', "--a'b"],
      `unknown option "--a'b"; an argument that begins with '-' goes after '--': -- '--a'\\''b'\n`,
    ],
    [['publish', '--a b'], `unknown option "--a b"; an argument that begins with '-' goes after '--': -- '--a b'\n`],
    [['publish', '--a\nb'], `unknown option "--a\\nb"; an argument that begins with '-' goes after '--'\n`],
    [
      ['publish', '--$(id)'],
      `unknown option "--$(id)"; an argument that begins with '-' goes after '--': -- '--$(id)'\n`,
    ],
    [['publish', '-xyz'], `unknown option "-x"; an argument that begins with '-' goes after '--': -- -xyz\n`],
    [
      ['publish', '--bogus=v'],
      `unknown option "--bogus"; an argument that begins with '-' goes after '--': -- --bogus=v\n`,
    ],
    [
      ['publish', '--bogus=v\u001b\\'],
      `unknown option "--bogus"; an argument that begins with '-' goes after '--' ("--bogus=v\\u001b\\\\")\n`,
    ],
    [['history', "--a'b"], `unknown option "--a'b"\n`],
    [['history', '-\u202ex'], 'unknown option "-\\u202e"\n'],
    // Quoted once beside a raw control of its own: the quote's backslashes as --json gives them, never doubled.
    [['history', '--k\u001b\\'], 'unknown option "--k\\u001b\\\\"\n'],
  ])('gives back the unknown option of %j whole, quoted once', async (argv, message) => {
    const r = await cli(argv);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe(`handoff-ledger: USAGE: ${message}${helpHint(argv[0]!)}`);
  });

  // parseArgs' own refusals put the argument in raw (`Unexpected argument 'x…'. This command does not take positional
  // arguments`), or spread over three lines (an option's value that begins with '-'), printed escaped whole.
  it.each([
    [['history', 'x\u001b\\y'], 'unexpected argument "x\\u001b\\\\y"; this command takes no arguments\n'],
    [['history', 'a b', 'c'], 'unexpected argument "a b"; this command takes no arguments\n'],
    [
      ['history', '--root', '-x\u001b'],
      "the value after --root begins with '-', as an option does (was its value left out?); give such a value as --root=-XYZ\n",
    ],
  ])('words parseArgs refusal of %j on one line, the argument quoted once', async (argv, message) => {
    const r = await cli(argv);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe(`handoff-ledger: USAGE: ${message}${helpHint(argv[0]!)}`);
  });

  it('a refusal of the command line in --json gives the same words, the argument quoted once', async () => {
    const r = await cli(['history', '--json', 'x\u001by']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({
      error: { code: 'USAGE', message: 'unexpected argument "x\\u001by"; this command takes no arguments' },
    });
  });

  // `grants` with nothing to list printed nothing at all, where history and resume say "has no compaction yet".
  it('says on stderr that grants found no record, and prints [] with --json', async () => {
    const r = await cli(['grants', ...store, '--principal', 'nobody', '--session', 's1']);
    expect(r).toEqual({
      code: 0,
      stdout: '',
      stderr: "no grant or revocation records for nobody on session s1 (a session's owner needs none)\n",
    });
    const json = await cli(['grants', ...store, '--principal', 'nobody', '--json']);
    expect(json).toMatchObject({ code: 0, stdout: '[]\n' });
    expect(json.stderr).toContain('no grant or revocation records for nobody (');
  });

  // A missing or misspelt subcommand is named before the usage (`keys lst` printed "USAGE: usage: …" alone).
  it.each([
    [['keys'], 'keys needs a subcommand first; usage: keys export'],
    [['keys', '--root', 'x', 'list'], 'keys needs a subcommand first, not "--root"; usage: keys export'],
    [['keys', 'lst'], 'unknown keys subcommand "lst"; usage: keys export'],
    [['prove'], 'prove needs a subcommand; usage: prove inclusion'],
    [['prove', 'incl', 'blake3:00'], 'unknown prove subcommand "incl"; usage: prove inclusion'],
    [['prove', 'inclusion'], 'prove inclusion needs a MANIFEST-ID; usage: prove inclusion'],
    [['prove', 'consistency'], 'prove consistency needs an OLD-SIZE; usage: prove inclusion'],
    [['prove', 'consistency', '1', '2'], 'unexpected argument "2"; usage: prove inclusion'],
    [['witness'], 'witness needs a subcommand first; usage: handoff-ledger witness'],
    [['witness', 'srve'], 'unknown witness subcommand "srve"; usage: handoff-ledger witness'],
  ])('names what is wrong with the subcommand of %j before its usage', async (argv, message) => {
    const r = await cli(argv);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr.startsWith(`handoff-ledger: USAGE: ${message}`), r.stderr).toBe(true);
    // With --json too (after a subcommand: given first, --json is what the subcommand is missing for).
    if (argv.length > 1) {
      const json = await cli([...argv, '--json']);
      expect(JSON.parse(json.stdout).error.message.startsWith(message), json.stdout).toBe(true);
    }
  });

  it('escapes control and bidi characters of an unknown command or option name (C1 and U+202E survive JSON quoting)', async () => {
    const hostile = 'x\u009b2J\u202eevil';
    // A command name and an option are quoted as a refusal quotes a value (a JSON string, what it leaves raw as
    // \uXXXX), once.
    for (const [argv, shown] of [
      [[hostile], '"x\\u009b2J\\u202eevil"'],
      [['help', hostile], '"x\\u009b2J\\u202eevil"'],
      [['history', `--${hostile}`], '"--x\\u009b2J\\u202eevil"'],
    ] as const) {
      const r = await cli([...argv]);
      expect(r.code).toBe(2);
      expect(r.stderr).not.toMatch(/[\u009b\u202e]/);
      expect(r.stderr.split('\n')[0]).toContain(shown);
    }
  });
});

describe.each(Object.keys(commands))('%s', (name) => {
  const spec = commands[name]!;

  it('prints its help for --help and for help <command>: usage, options and exit codes, on stdout', async () => {
    const viaFlag = await cli([name, '--help']);
    expect(viaFlag).toMatchObject({ code: 0, stderr: '' });
    expect(viaFlag.stdout.startsWith(`usage: handoff-ledger ${name}`)).toBe(true);
    expect(viaFlag.stdout).toMatch(/Options:[\s\S]*Exit codes:\n {2}0 [\s\S]*\n {2}1 [\s\S]*\n {2}2 [\s\S]*\n$/);
    expect(await cli(['help', name])).toEqual(viaFlag);
    expect(await cli([...cases[name]!.ok(), '-h'])).toEqual(viaFlag);
    // A command's own exit codes are listed after the shared ones (every command on a store: stopped by a signal,
    // while it opens the store at least; the demo too, which stops at its next step; not the commands without a store).
    for (const line of spec.exits.more ?? []) expect(viaFlag.stdout).toContain(`\n  ${line}\n`);
    expect(viaFlag.stdout.includes('\n  130 stopped by SIGINT')).toBe(
      !['verify', 'audit-ui', 'witness'].includes(name),
    );
  });

  // audit-ui serves until interrupted and has no refusal: these two are not registered for it (see `serves`).
  if (!serves.has(name))
    it('exits 0 on success', async () => {
      const r = await cli(cases[name]!.ok());
      expect(r.code, r.stderr).toBe(0);
    }, 60_000);

  if (!serves.has(name))
    it('exits 1 on a refusal, with the error code on stderr and no data on stdout', async () => {
      const r = await cli(cases[name]!.refused());
      expect(r.code, r.stderr + r.stdout).toBe(1);
      if (findingsOnStdout.has(name)) expect(r.stdout).toMatch(/FAILED/);
      else {
        if (!narrates.has(name)) expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/^handoff-ledger: [A-Z_]+: .*\n$/m);
      }
    }, 60_000);

  it('exits 2 on a usage error, with the message on stderr and nothing on stdout', async () => {
    const sub = { keys: ['keys', 'list'], witness: ['witness', 'serve'] }[name] ?? [name];
    const r = await cli([...sub, '--no-such-option']);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/^handoff-ledger: .*no-such-option.*\n/);
    // The line after it says where the command's options are listed.
    expect(r.stderr.split('\n').slice(1).join('\n')).toBe(helpHint(name));
  });

  if (spec.json)
    it('prints its data as JSON with --json, and a refusal as a JSON error object', async () => {
      const ok = await cli([...cases[name]!.ok(), '--json']);
      expect(ok.code, ok.stderr).toBe(0);
      expect(() => JSON.parse(ok.stdout)).not.toThrow();
      const refused = await cli([...cases[name]!.refused(), '--json']);
      expect(refused.code).toBe(1);
      const body = JSON.parse(refused.stdout) as { error?: { code: string }; ok?: boolean };
      if (findingsOnStdout.has(name)) expect(body.ok).toBe(false);
      else expect(body.error?.code).toMatch(/^[A-Z_]+$/);
    }, 60_000);
});

describe('colour', () => {
  const clean = () => ['verify', files.bundle, '--trust', files.trust];
  const escape = /\x1b\[/;

  it('colours the verdict on a terminal', async () => {
    const r = await cli(clean(), { tty: true });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(escape);
  });

  it('prints no escape sequence when NO_COLOR is set, even with FORCE_COLOR', async () => {
    expect((await cli(clean(), { tty: true, env: { NO_COLOR: '1' } })).stdout).not.toMatch(escape);
    expect((await cli(clean(), { env: { NO_COLOR: '1', FORCE_COLOR: '1' } })).stdout).not.toMatch(escape);
  });

  it('prints none into a pipe unless FORCE_COLOR asks for it', async () => {
    expect((await cli(clean())).stdout).not.toMatch(escape);
    expect((await cli(clean(), { env: { FORCE_COLOR: '1' } })).stdout).toMatch(escape);
  });

  // A store of its own: the one the other tests share is changed by later tests.
  const colourStore = ['--root', join(base, 'colour-store'), '--host', 'conv-host'];
  const verdict = (stdout: string) => stdout.split('\n').find((l) => / chains?, /.test(l)) ?? '';

  it('still colours when NO_COLOR is set but empty (only a non-empty NO_COLOR turns it off)', async () => {
    const r = await cli(clean(), { tty: true, env: { NO_COLOR: '' } });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(escape);
  });

  it('colours the fsck verdict on a terminal: green when clean, red with findings; none in a pipe or with NO_COLOR', async () => {
    const pub = await cli([
      'publish',
      ...colourStore,
      '--principal',
      'alice',
      '--session',
      's1',
      '--run',
      'r1',
      '--json',
      files.summary,
    ]);
    expect(pub.code, pub.stderr).toBe(0);
    const { digest } = JSON.parse(pub.stdout) as { digest: string };
    const green = await cli(['fsck', ...colourStore], { tty: true });
    expect(green.code).toBe(0);
    expect(verdict(green.stdout)).toMatch(/^\x1b\[32mclean\x1b\[39m: 1 chain, /);
    const emptyNoColor = await cli(['fsck', ...colourStore], { tty: true, env: { NO_COLOR: '' } });
    expect(verdict(emptyNoColor.stdout)).toMatch(/^\x1b\[32mclean\x1b\[39m/);
    for (const plain of [
      await cli(['fsck', ...colourStore]),
      await cli(['fsck', ...colourStore], { tty: true, env: { NO_COLOR: '1' } }),
    ]) {
      expect(plain.code).toBe(0);
      expect(plain.stdout).not.toMatch(escape);
      expect(verdict(plain.stdout)).toMatch(/^clean: 1 chain, /);
    }
    expect(verdict((await cli(['fsck', ...colourStore], { env: { FORCE_COLOR: '1' } })).stdout)).toMatch(
      /^\x1b\[32mclean/,
    );
    // A finding: a byte of the (inline) summary changed in the log.
    const db = new Level<string, Uint8Array>(join(base, 'colour-store', 'manifests-v1'), { valueEncoding: 'view' });
    const key = `b!${digest.slice('blake3:'.length)}`;
    const bytes = Uint8Array.from((await db.get(key))!);
    bytes[0]! ^= 1;
    await db.put(key, bytes);
    await db.close();
    const red = await cli(['fsck', ...colourStore], { tty: true });
    expect(red.code).toBe(1);
    expect(verdict(red.stdout)).toMatch(/^\x1b\[31m\d+ findings?\x1b\[39m: /);
    const redPlain = await cli(['fsck', ...colourStore]);
    expect(redPlain.stdout).not.toMatch(escape);
  });
});

describe('keys with --json', () => {
  it('prints what rotate, revoke and export --out did as JSON', async () => {
    const before = JSON.parse((await cli(['keys', 'list', ...store, '--json'])).stdout) as {
      keys: Array<{ keyId: string }>;
      checkpointKeys: Array<{ host: string; keyId: string; vkey: string }>;
    };
    const rotated = await cli(['keys', 'rotate', ...store, '--json']);
    expect(rotated.code, rotated.stderr).toBe(0);
    const { keyId, checkpointKeysRevoked } = JSON.parse(rotated.stdout) as {
      keyId: string;
      checkpointKeysRevoked: unknown[];
    };
    expect(keyId).not.toBe(before.keys[0]!.keyId);
    expect(checkpointKeysRevoked).toEqual([]); // nothing was revoked: the rotated-out checkpoint key is only ended
    const old = before.keys[0]!.keyId;
    // The checkpoint key rotated out with the old host key is revoked with it: named, for runbook step 3 (logs.json).
    const rotatedOut = before.checkpointKeys[0]!;
    const revoked = await cli(['keys', 'revoke', old, ...store, '--json', '--at', '2030-01-01T00:00:00.000Z']);
    expect(JSON.parse(revoked.stdout)).toEqual({
      revoked: old,
      at: '2030-01-01T00:00:00.000Z',
      alsoRevoked: [],
      checkpointKeysRevoked: [
        {
          host: rotatedOut.host,
          keyId: rotatedOut.keyId,
          vkey: rotatedOut.vkey,
          revokedAt: '2030-01-01T00:00:00.000Z',
        },
      ],
    });
    // Asked again for a later time: the earlier revocation holds, and that is what is reported (nothing newly revoked).
    const again = await cli(['keys', 'revoke', old, ...store, '--json', '--at', '2099-01-01T00:00:00.000Z']);
    expect(JSON.parse(again.stdout)).toEqual({
      revoked: old,
      at: '2030-01-01T00:00:00.000Z',
      alsoRevoked: [],
      checkpointKeysRevoked: [],
    });
    const human = await cli(['keys', 'revoke', old, ...store, '--at', '2031-01-01T00:00:00.000Z']);
    expect(human.stdout).toBe(`revoked ${old} from 2030-01-01T00:00:00.000Z\n`);
    const out = newDir();
    const exported = await cli(['keys', 'export', ...store, '--out', out, '--json']);
    expect(JSON.parse(exported.stdout)).toEqual({ wrote: out, keys: 2, checkpointKeys: 2 });
  });

  it('names the checkpoint key in use when the host key in use is revoked, and the rotation that revokes it', async () => {
    // Runbook step 3 takes a revoked checkpoint key out of every witness's logs.json at once: revoke and rotate name
    // the checkpoint keys they revoked (keys list was the only way to find them) and the one a rotation must take.
    const own = ['--root', join(newDir(), 'store'), '--host', 'h'];
    expect((await cli(['init', ...own])).code).toBe(0);
    const listed = JSON.parse((await cli(['keys', 'list', ...own, '--json'])).stdout) as {
      keys: Array<{ keyId: string }>;
      checkpointKeys: Array<{ host: string; keyId: string; vkey: string }>;
    };
    const [hostKey] = listed.keys;
    const inUse = listed.checkpointKeys[0]!;
    const revoked = await cli(['keys', 'revoke', hostKey!.keyId, ...own, '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    const { at, ...rest } = JSON.parse(revoked.stdout) as { at: string };
    expect(rest).toEqual({
      revoked: hostKey!.keyId,
      alsoRevoked: [],
      checkpointKeysRevoked: [],
      checkpointKeyAtNextRotation: { host: 'h', keyId: inUse.keyId, vkey: inUse.vkey },
    });
    const again = await cli(['keys', 'revoke', hostKey!.keyId, ...own]);
    expect(again.stdout).toBe(
      `revoked ${hostKey!.keyId} from ${at}\n` +
        `the checkpoint key this store signs with (${inUse.keyId}) is revoked by the next \`keys rotate\`: run it now\n`,
    );
    const rotated = await cli(['keys', 'rotate', ...own]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout.split('\n').slice(1)).toEqual([
      `revoked checkpoint key ${inUse.keyId} of h from ${at}: take ${JSON.stringify(inUse.vkey)} out of every witness's logs.json`,
      '',
    ]);
    // Done: a revocation of it again names nothing left to do.
    const done = JSON.parse((await cli(['keys', 'revoke', hostKey!.keyId, ...own, '--json'])).stdout) as object;
    expect(done).toEqual({ revoked: hostKey!.keyId, at, alsoRevoked: [], checkpointKeysRevoked: [] });
  });

  it('prints the checkpoint verifier key of keys vkey as JSON', async () => {
    const human = await cli(['keys', 'vkey', ...store]);
    const json = await cli(['keys', 'vkey', ...store, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ vkey: human.stdout.trim() });
  });

  it('refuses --out and --at on the subcommands they are not for, and an empty --out, changing nothing', async () => {
    const before = (await cli(['keys', 'list', ...store, '--json'])).stdout;
    const file = join(newDir(), 'vk.txt');
    for (const [argv, option] of [
      [['keys', 'vkey', ...store, '--out', file], '--out'],
      [['keys', 'rotate', ...store, '--out', file], '--out'],
      [['keys', 'rotate', ...store, '--at', '2020-01-01T00:00:00.000Z'], '--at'],
      [['keys', 'export', ...store, '--at', '2020-01-01T00:00:00.000Z'], '--at'],
      [['keys', 'export', ...store, '--out', ''], '--out'],
    ] as const) {
      const r = await cli([...argv]);
      expect(r, argv.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toMatch(new RegExp(`^handoff-ledger: USAGE: ${option}`));
    }
    expect(() => readFileSync(file)).toThrow(/ENOENT/);
    expect((await cli(['keys', 'list', ...store, '--json'])).stdout).toBe(before);
  });
});

describe('usage errors with --json', () => {
  it('prints {"error":{"code":"USAGE"}} on stdout for an unknown option, a missing value and a bad value', async () => {
    for (const argv of [
      ['gc', ...store, '--grace', '1h', '--bogus', '--json'],
      ['resume', '--json', ...store, '--principal'],
      ['verify', files.bundle, '--bogus', '--json'],
      ['gc', ...store, '--grace', 'banana', '--json'],
      ['witness', 'keygen', '--json', '--name', 'witness.example/x'],
      // --json before the subcommand of keys, as before witness's.
      ['keys', '--json', 'export', ...store],
      // A duration too long to be one (Infinity ms) is a usage error as a malformed one is.
      ['gc', ...store, '--grace', '9'.repeat(400), '--json'],
    ]) {
      const r = await cli(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(JSON.parse(r.stdout), argv.join(' ')).toEqual({ error: { code: 'USAGE', message: expect.any(String) } });
      expect(r.stderr).toMatch(/^handoff-ledger: USAGE: .+\n(Try 'handoff-ledger help [a-z]+' for its options\.\n)?$/);
    }
    // An unknown command too (its stderr carries the usage after the message).
    const unknown = await cli(['bogus', '--json']);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stdout)).toEqual({ error: { code: 'USAGE', message: 'unknown command "bogus"' } });
    // --json before the command (an option where the command goes) is --json all the same, as before keys's subcommand.
    const first = await cli(['--json', 'init', ...store]);
    expect(first.code).toBe(2);
    expect(JSON.parse(first.stdout)).toEqual({ error: { code: 'USAGE', message: 'unknown command "--json"' } });
  });

  it('gives an I/O error a code too (IO_FAILED, exit 2)', async () => {
    const r = await cli(['publish', ...scope, '--run', 'r9', '--json', join(base, 'no-such-summary.json')]);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({ error: { code: 'IO_FAILED', message: expect.stringContaining('ENOENT') } });
    expect(r.stderr).toBe(
      `handoff-ledger: IO_FAILED: cannot read summary file ${JSON.stringify(join(base, 'no-such-summary.json'))}: ENOENT (no such file or directory)\n`,
    );
  });

  it('reads --json only before `--`, and prints nothing on stdout without it', async () => {
    for (const argv of [
      ['history', ...scope, '--', '--json'],
      ['history', ...scope, '--bogus'],
    ]) {
      const r = await cli(argv);
      expect(r).toMatchObject({ code: 2, stdout: '' });
    }
  });
});

describe('a file the CLI was given that cannot be read', () => {
  it('is IO_FAILED for a summary or an output file, USAGE for --since, --witness-keys and the witness files, TRUST_INVALID for --trust, BUNDLE_IO for a bundle: exit 2', async () => {
    const missing = join(base, 'no-such-file');
    for (const [argv, code] of [
      [['publish', ...scope, '--run', 'r9', missing], 'IO_FAILED'],
      [['keys', 'export', ...store, '--out', join(missing, 'trust.json')], 'IO_FAILED'],
      [['export', ...store, '--out', newDir(), '--since', missing], 'USAGE'],
      [['verify', files.bundle, '--trust', files.trust, '--since', missing], 'USAGE'],
      [['verify', files.bundle, '--trust', files.trust, '--witness-keys', missing, '--quorum', '1'], 'USAGE'],
      [
        ['witness', 'serve', '--listen', '127.0.0.1:0', '--key', missing, '--logs', missing, '--state', newDir()],
        'USAGE',
      ],
      [['audit-ui', '--since', missing], 'USAGE'],
      [['audit-ui', '--witness-keys', missing, '--quorum', '1'], 'USAGE'],
      [['verify', files.bundle, '--trust', missing], 'TRUST_INVALID'],
      [['audit-ui', '--trust', missing], 'TRUST_INVALID'],
      [['verify', missing, '--trust', files.trust], 'BUNDLE_IO'],
    ] as const) {
      const r = await cli([...argv]);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr, argv.join(' ')).toMatch(new RegExp(`^handoff-ledger: ${code}: .*ENOENT`));
    }
  });
});

describe('a file the CLI was told to write that cannot be written', () => {
  it('is IO_FAILED naming the path given and its errno code, never the staging file, and leaves none: keys export / list --out, witness keygen --out', async () => {
    const dir = newDir();
    mkdirSync(dir);
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const taken = join(dir, 'a-dir');
    mkdirSync(taken);
    // Tests may run as root, which a read-only directory does not stop: a missing directory, a path under a file.
    for (const [out, errno] of [
      [join(dir, 'missing', 'out.json'), 'ENOENT'],
      [join(file, 'out.json'), 'ENOTDIR'],
    ] as const)
      for (const argv of [
        ['keys', 'export', ...store, '--out', out],
        ['keys', 'list', ...store, '--out', out],
        ['witness', 'keygen', '--name', 'witness.example/w1', '--out', out],
      ]) {
        const r = await cli([...argv, '--json']);
        expect(r.code, argv.join(' ')).toBe(2);
        const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string } };
        expect(error.code).toBe('IO_FAILED');
        expect(
          error.message.startsWith(`${errno} (`) && error.message.endsWith(`), write "${out}"`),
          error.message,
        ).toBe(true);
        expect(r.stderr).toBe(`handoff-ledger: IO_FAILED: ${error.message}\n`);
      }
    // Here the staging file was written beside --out before the rename over a directory failed (EISDIR): removed.
    const r = await cli(['keys', 'export', ...store, '--out', taken]);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe(`handoff-ledger: IO_FAILED: EISDIR (illegal operation on a directory), write "${taken}"\n`);
    expect(readdirSync(dir).sort()).toEqual(['a-dir', 'a-file']);
    expect(readdirSync(taken)).toEqual([]);
  });
});

describe('keys export / list --out naming something that is not a regular file', () => {
  it('is refused (USAGE, exit 2) and left as it was: a symlink (also one to a device, or dangling), a FIFO or a socket would have been replaced by a file', async () => {
    const dir = newDir();
    mkdirSync(dir);
    const target = join(dir, 'target.json');
    writeFileSync(target, 'kept\n');
    const links = {
      'to-file': target,
      'to-device': '/dev/null', // `--out /dev/stdout` run as root replaced /dev/stdout (a symlink) with a file
      dangling: join(dir, 'nowhere'),
    };
    for (const [name, to] of Object.entries(links)) symlinkSync(to, join(dir, name));
    const fifo = join(dir, 'fifo');
    const made = spawnSync('mkfifo', [fifo]);
    const outs = [...Object.keys(links).map((n) => join(dir, n)), ...(made.status === 0 ? [fifo] : [])];
    for (const out of outs)
      for (const sub of ['export', 'list']) {
        const r = await cli(['keys', sub, ...store, '--out', out, '--json']);
        expect(r.code, `${sub} ${out}`).toBe(2);
        const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string } };
        expect(error).toMatchObject({ code: 'USAGE', message: expect.stringContaining('not a regular file') });
      }
    for (const [name, to] of Object.entries(links)) expect(readlinkSync(join(dir, name))).toBe(to);
    if (made.status === 0) expect(lstatSync(fifo).isFIFO()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('kept\n');
    expect(readdirSync(dir).sort()).toEqual(
      [...Object.keys(links), 'target.json', ...(made.status === 0 ? ['fifo'] : [])].sort(),
    );
    // A Unix socket a process listens on: refused as well, and left listening.
    const socket = join(dir, 'sock');
    const server = createServer();
    await new Promise<void>((done) => server.listen(socket, done));
    try {
      for (const sub of ['export', 'list']) {
        const r = await cli(['keys', sub, ...store, '--out', socket]);
        expect([r.code, r.stdout], `${sub} socket`).toEqual([2, '']);
        expect(r.stderr).toMatch(/^handoff-ledger: USAGE: --out .+ is not a regular file \(a socket\): /);
      }
      expect(lstatSync(socket).isSocket()).toBe(true);
    } finally {
      await new Promise((done) => server.close(done));
    }
    // A regular file holding a trust file is replaced, as before (the next describe: one that holds anything else).
    writeFileSync(target, JSON.stringify({ version: 1, keys: [] }));
    expect((await cli(['keys', 'export', ...store, '--out', target])).code).toBe(0);
    expect(JSON.parse(readFileSync(target, 'utf8'))).toMatchObject({ version: 1 });
  });
});

describe('keys export / list --out naming an existing file that is not a trust file', () => {
  it('is refused (USAGE, exit 2) and the file left as it was: --out into keys/ replaced the host private key', async () => {
    const dir = newDir();
    mkdirSync(dir);
    // The store's own private key file, a witness key, LevelDB's CURRENT, any other document: never replaced.
    const keyDir = join(root, 'keys');
    const hostKey = join(
      keyDir,
      readdirSync(keyDir).find((n) => !n.startsWith('checkpoint-') && n.endsWith('.jwk'))!,
    );
    const witnessKey = join(dir, 'w1.key');
    expect((await cli(['witness', 'keygen', '--name', 'witness.example/w1', '--out', witnessKey])).code).toBe(0);
    const notes = join(dir, 'notes.txt');
    writeFileSync(notes, 'not a trust file\n');
    const big = join(dir, 'big.json');
    writeFileSync(big, `{"version":1,"keys":[],"pad":"${'x'.repeat(16 * 1024 * 1024)}"}`);
    const outs = [hostKey, witnessKey, join(root, 'manifests-v1', 'CURRENT'), notes, big];
    const before = outs.map((f) => readFileSync(f));
    for (const out of outs)
      for (const sub of ['export', 'list']) {
        const r = await cli(['keys', sub, ...store, '--out', out, '--json']);
        expect(r.code, `${sub} ${out}`).toBe(2);
        const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string } };
        expect(error, `${sub} ${out}`).toMatchObject({
          code: 'USAGE',
          message: expect.stringContaining('exists and is not a trust file'),
        });
      }
    outs.forEach((f, i) => expect(readFileSync(f).equals(before[i]!), f).toBe(true));
    expect(readdirSync(dir).sort()).toEqual(['big.json', 'notes.txt', 'w1.key']);
    // The store still opens with its key: a resume works.
    expect((await cli(['resume', ...scope])).code).toBe(0);
    // An empty file, or a trust file (an earlier export, this store's or another's), is replaced.
    const empty = join(dir, 'empty.json');
    writeFileSync(empty, '');
    const earlier = join(dir, 'earlier.json');
    writeFileSync(earlier, readFileSync(files.strangerTrust));
    for (const out of [empty, earlier]) {
      expect((await cli(['keys', 'export', ...store, '--out', out])).code, out).toBe(0);
      expect(JSON.parse(readFileSync(out, 'utf8')), out).toMatchObject({ version: 1 });
    }
  }, 60_000);
});

describe('keys export / list --out inside the store root', () => {
  it("is refused (USAGE, exit 2) and the store's trust.json left as it was: the export replaced it (0644, outside the trust lock)", async () => {
    const trustPath = join(root, 'trust.json');
    const before = readFileSync(trustPath);
    const mode = lstatSync(trustPath).mode & 0o777;
    for (const sub of ['export', 'list'])
      for (const out of [trustPath, join(root, 'keys', 'copy.json'), join(root, 'tmp', 'trust.json')]) {
        const r = await cli(['keys', sub, ...store, '--out', out, '--json']);
        expect(r.code, `${sub} ${out}`).toBe(2);
        const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string } };
        expect(error, `${sub} ${out}`).toMatchObject({
          code: 'USAGE',
          message: expect.stringContaining('inside the store'),
        });
        expect(existsSync(join(root, 'keys', 'copy.json'))).toBe(false);
      }
    expect(readFileSync(trustPath).equals(before)).toBe(true);
    expect(lstatSync(trustPath).mode & 0o777).toBe(mode);
  });
});

describe('a --postgres value that is no PostgreSQL URL', () => {
  it('is INVALID_ARGUMENT (exit 1) before anything connects or is made, and the value (it may hold a password) is not echoed', async () => {
    // The driver read these as URLs relative to postgres://base: "getaddrinfo ENOTFOUND base", STORAGE_FAILED.
    for (const url of ['localhost/hl', 'host=db.example dbname=hl password=s3cret', 'alice:s3cret@db.example/hl']) {
      const fresh = join(newDir(), 'store');
      for (const how of ['option', 'env'] as const)
        for (const argv of [
          ['init', '--root', fresh, '--host', 'pg-host'],
          ['resume', ...scope],
        ]) {
          const r = await cli(
            [...argv, ...(how === 'option' ? ['--postgres', url] : [])],
            how === 'env' ? { env: { HANDOFF_LEDGER_POSTGRES: url } } : {},
          );
          expect(r.code, `${how} ${url} ${argv[0]}`).toBe(1);
          expect(r.stderr, `${how} ${url} ${argv[0]}`).toMatch(/^handoff-ledger: INVALID_ARGUMENT: .*postgresql:\/\//);
          expect(r.stderr).not.toContain('s3cret');
          expect(r.stderr).not.toContain('base');
          expect(existsSync(fresh), `${how} ${url}`).toBe(false);
        }
    }
  });
});

describe('a --root inside another store', () => {
  it("is INVALID_ARGUMENT naming that store, with nothing made: publish made a new store inside the other's manifests-v1/", async () => {
    const before = (dir: string) => readdirSync(dir).sort();
    for (const inner of ['manifests-v1', 'keys', 'blobs-v1', join('blobs-v1', 'blake3')]) {
      const at = join(root, inner);
      const listed = before(at);
      for (const argv of [
        [
          'publish',
          '--root',
          at,
          '--host',
          'conv-host',
          '--principal',
          'alice',
          '--session',
          's1',
          '--run',
          'r9',
          files.summary,
        ],
        ['init', '--root', at, '--host', 'conv-host'],
        ['resume', '--root', join(at, 'deeper'), '--host', 'conv-host', '--principal', 'alice', '--session', 's1'],
      ]) {
        const r = await cli(argv);
        expect(r.code, argv.join(' ')).toBe(1);
        expect(r.stderr, argv.join(' ')).toMatch(/^handoff-ledger: INVALID_ARGUMENT: .* is inside the store at /);
        expect(r.stderr).toContain(JSON.stringify(root));
        expect(before(at), argv.join(' ')).toEqual(listed);
      }
    }
    // The store itself opens as ever.
    expect((await cli(['resume', ...scope])).code).toBe(0);
  });
});

describe('numeric options', () => {
  it('take plain decimal digits only: blank, hex, exponent and sign are usage errors', async () => {
    for (const bad of ['', ' ', '0x10', '1e3', '+5', '-1', '1.0']) {
      const maxBytes = await cli(['publish', ...scope, '--run', 'r9', '--max-bytes', bad, files.summary]);
      expect(maxBytes.code, JSON.stringify(bad)).toBe(2);
      // parseArgs itself refuses a value that looks like an option (-1): a usage error all the same.
      expect(maxBytes.stderr).toMatch(/^handoff-ledger: USAGE: .*--max-bytes/);
      const workers = await cli(['verify', files.bundle, '--trust', files.trust, '--workers', bad]);
      expect(workers.code, JSON.stringify(bad)).toBe(2);
      expect(workers.stderr).toMatch(/^handoff-ledger: USAGE: .*--workers/);
    }
    expect((await cli(['verify', files.bundle, '--trust', files.trust, '--workers', '257'])).code).toBe(2);
    expect((await cli(['verify', files.bundle, '--trust', files.trust, '--workers', '1'])).code).toBe(0);
  }, 60_000);

  it("gc --grace: a duration's number as plain as any, blanks around it refused as USAGE, nothing collected", async () => {
    // parseDuration trims; the CLI reads --grace as it reads every number: ` 24h` is no plainer than ` 5`. And as the
    // README says of every number (`gc --grace`'s named), the refusal names the option, its range and the text: it
    // said `not a duration: "1e3h" (use e.g. 30m, 24h, 7d)`, naming neither.
    const range = `--grace must be a duration from 0 to ${Number.MAX_SAFE_INTEGER} ms`;
    for (const bad of [' 24h', '24h ', '\t1d', '5\n', '1e3h', '+5h', '5H', '٥h', '9'.repeat(400)]) {
      const r = await cli(['gc', ...store, '--grace', bad, '--json']);
      expect(r.code, JSON.stringify(bad)).toBe(2);
      expect(r.stderr, JSON.stringify(bad)).toMatch(new RegExp(`^handoff-ledger: USAGE: ${range}: `));
      const { message } = (JSON.parse(r.stdout) as { error: { message: string } }).error;
      expect(message, JSON.stringify(bad)).toContain(`not ${JSON.stringify(bad)}`);
    }
    expect((await cli(['gc', ...store, '--grace', '24h', '--dry-run'])).code).toBe(0);
    expect((await cli(['gc', ...store, '--grace', '05h', '--dry-run'])).code).toBe(0);
  });
});

describe('a required option left out', () => {
  it("is USAGE followed by the line that points to the command's help, in every command that requires one", async () => {
    const key = join(newDir(), 'w.key');
    for (const argv of [
      ['publish', ...store, '--session', 's1', '--run', 'r1', files.summary],
      ['grant', ...store, '--principal', 'bob'],
      ['export', ...store],
      ['gc', ...store],
      ['verify', files.bundle],
      ['witness', 'keygen', '--name', 'w.example/w1'],
      ['witness', 'keygen', '--out', key],
      ['witness', 'serve', '--listen', '127.0.0.1:0', '--key', key, '--logs', files.summary],
    ]) {
      const r = await cli(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stdout, argv.join(' ')).toBe('');
      expect(r.stderr, argv.join(' ')).toMatch(/^handoff-ledger: USAGE: .+\n/);
      expect(r.stderr.split('\n').slice(1).join('\n'), argv.join(' ')).toBe(helpHint(argv[0]!));
    }
    expect(existsSync(key)).toBe(false);
  });
});

describe('a subcommand or argument left out, misspelt or one too many', () => {
  // As a missing option is: a command line of the wrong shape, followed by the line that points to the command's help.
  // `verify` without DIR and `witness` alone printed the usage line without it, as did every refusal here but the
  // parser's own (`init extra`).
  it("is USAGE followed by the line that points to the command's help, in every command", async () => {
    const runs: string[][] = [
      ['verify'],
      ['verify', files.bundle, files.bundle, '--trust', files.trust],
      ['witness'],
      ['witness', '--json'],
      ['witness', 'srve'],
      ['keys'],
      ['keys', 'lst', ...store],
      ['keys', 'revoke', ...store],
      ['keys', 'close', ...store],
      ['keys', 'list', 'extra', ...store],
      ['keys', 'rotate', '--at', '2026-01-01T00:00:00.000Z', ...store],
      ['prove', ...store],
      ['prove', 'incl', ...store],
      ['prove', 'inclusion', ...store],
      ['prove', 'consistency', '1', '2', ...store],
      ['export', 'extra', '--out', join(newDir(), 'bundle'), ...store],
      ['publish', ...scope, '--run', 'r', files.summary, files.summary],
      ['audit-ui', files.bundle, files.bundle],
      ['init', 'extra', ...store],
    ];
    for (const argv of runs) {
      const r = await cli(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr, argv.join(' ')).toMatch(/^handoff-ledger: USAGE: .+\n/);
      expect(r.stderr.split('\n').slice(1).join('\n'), argv.join(' ')).toBe(helpHint(argv[0]!));
      // With --json the refusal is the JSON object on stdout, and stderr the same two lines (`keys --json` would be
      // missing its subcommand for --json, as witness's; audit-ui takes no --json: it is refused first).
      if (argv.length > 1 && argv[0] !== 'witness' && argv[0] !== 'audit-ui') {
        const json = await cli([...argv, '--json']);
        expect(JSON.parse(json.stdout), argv.join(' ')).toEqual({
          error: { code: 'USAGE', message: expect.any(String) },
        });
        expect(json.stderr, argv.join(' ')).toBe(r.stderr);
      }
    }
  });
});

describe('repeated options and extra arguments', () => {
  it('refuses an empty value of any option as USAGE (exit 2), whichever command and option', async () => {
    for (const argv of [
      ['grant', ...store, '--principal', '', '--session', 's1'],
      ['grant', ...store, '--principal', 'bob', '--session', ''],
      ['resume', ...store, '--principal', '', '--session', 's1'],
      ['export', ...store, '--session', '', '--out', newDir()],
      ['verify', files.bundle, '--trust', files.trust, '--session', ''],
      ['publish', ...scope, '--run', '', files.summary],
      ['gc', ...store, '--grace', ''],
    ]) {
      const r = await cli([...argv, '--json']);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(JSON.parse(r.stdout), argv.join(' ')).toEqual({
        error: { code: 'USAGE', message: expect.stringMatching(/^--[a-z-]+ must not be empty$/) },
      });
    }
  });

  it('refuses an empty argument as USAGE too: publish "" does not read standard input, verify "" not the working directory', async () => {
    const c = captureIo();
    const io = { ...c.io, stdin: Readable.from([JSON.stringify(sampleSummary('from stdin'))]) };
    const before = JSON.parse((await cli(['history', ...scope, '--json'])).stdout) as unknown[];
    expect(await main(['publish', ...scope, '--run', 'r9', '', '--json'], io)).toBe(2);
    expect(JSON.parse(c.stdout())).toEqual({ error: { code: 'USAGE', message: 'an argument must not be empty' } });
    expect(JSON.parse((await cli(['history', ...scope, '--json'])).stdout)).toHaveLength(before.length);
    const cwd = process.cwd();
    process.chdir(files.bundle);
    try {
      const r = await cli(['verify', '', '--trust', files.trust]);
      expect(r).toMatchObject({
        code: 2,
        stdout: '',
        stderr: `handoff-ledger: USAGE: an argument must not be empty\n${helpHint('verify')}`,
      });
    } finally {
      process.chdir(cwd);
    }
    for (const argv of [
      ['keys', 'revoke', '', ...store],
      ['prove', 'consistency', '', ...store],
      ['publish', ...scope, '--run', 'r9', '--', ''],
    ])
      expect((await cli(argv)).stderr, argv.join(' ')).toBe(
        `handoff-ledger: USAGE: an argument must not be empty\n${helpHint(argv[0]!)}`,
      );
  });

  it('demo: an empty --root is USAGE and makes no store in the working directory; a usage error is JSON with --json', async () => {
    const cwd = process.cwd();
    const here = mkdtempSync(join(base, 'cwd-'));
    process.chdir(here);
    try {
      const r = await cli(['demo', '--root', '']);
      expect(r).toMatchObject({
        code: 2,
        stdout: '',
        stderr: `handoff-ledger: USAGE: --root must not be empty\n${helpHint('demo')}`,
      });
      expect(readdirSync(here)).toEqual([]);
    } finally {
      process.chdir(cwd);
    }
    // The demo prints no JSON of its own (--json is no option of it), but a usage error is one with --json.
    const bogus = await cli(['demo', '--root', '', '--json']);
    expect(bogus.code).toBe(2);
    expect(JSON.parse(bogus.stdout)).toMatchObject({ error: { code: 'USAGE' } });
  });

  it('demo takes HANDOFF_LEDGER_HASH as every command does: an unknown backend is USAGE, and no store is made', async () => {
    const dir = newDir();
    const r = await cli(['demo', '--root', dir], { env: { HANDOFF_LEDGER_HASH: 'bogus' } });
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/^handoff-ledger: USAGE: HANDOFF_LEDGER_HASH must be one of /);
    expect(existsSync(dir)).toBe(false);
  });

  it('demo takes HANDOFF_LEDGER_ORIGIN as every command does: it names the store the demo makes, and another store’s is refused', async () => {
    const dir = newDir();
    const named = await cli(['demo', '--root', dir], { env: { HANDOFF_LEDGER_ORIGIN: 'example.com/demo-log' } });
    expect(named.code, named.stderr).toBe(0);
    // Every later command with the variable exported opens the store the demo made (a made-up name refused them all).
    const cp = await cli(['checkpoint', '--root', dir, '--host', 'demo-host', '--json'], {
      env: { HANDOFF_LEDGER_ORIGIN: 'example.com/demo-log' },
    });
    expect(cp.code, cp.stderr).toBe(0);
    expect((JSON.parse(cp.stdout) as { origin: string }).origin).toBe('example.com/demo-log');
    const other = await cli(['demo', '--root', dir], { env: { HANDOFF_LEDGER_ORIGIN: 'example.com/other-log' } });
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/handoff-ledger: INVALID_ARGUMENT: .*example\.com\/other-log/);
  });

  it('refuses a single-value option given twice, acting on neither', async () => {
    const r = await cli(['revoke', ...store, '--principal', 'mallory', '--principal', 'dave', '--session', 's1']);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe(`handoff-ledger: USAGE: --principal given more than once\n${helpHint('revoke')}`);
    const grants = JSON.parse((await cli(['grants', ...store, '--json'])).stdout) as Array<{ principal: string }>;
    expect(grants.map((g) => g.principal)).not.toContain('mallory');
    expect(grants.map((g) => g.principal)).not.toContain('dave');
  });

  it('refuses extra words after keys export, list, rotate, vkey and after the KEYID of keys revoke', async () => {
    const before = (await cli(['keys', 'list', ...store, '--json'])).stdout;
    for (const argv of [
      ['keys', 'export', 'trust.json', ...store],
      ['keys', 'list', 'extra', ...store],
      ['keys', 'rotate', 'now', ...store],
      ['keys', 'vkey', 'x', ...store],
      ['keys', 'revoke', 'ed25519:a', 'ed25519:b', ...store],
    ]) {
      const r = await cli(argv);
      expect(r, argv.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toMatch(/^handoff-ledger: USAGE: unexpected argument /);
    }
    expect((await cli(['keys', 'list', ...store, '--json'])).stdout).toBe(before);
  });

  it('refuses keys revoke without a KEYID as a usage error before it opens the store', async () => {
    // A missing argument is USAGE (exit 2) as every other: judged before the open, which on a root with no store
    // answered KEY_INVALID (exit 1) instead, and on a store opened it for nothing.
    const none = join(base, 'no-store-here');
    for (const argv of [
      ['keys', 'revoke', '--root', none, '--host', 'conv-host'],
      ['keys', 'revoke', ...store],
    ]) {
      const r = await cli(argv);
      expect(r, argv.join(' ')).toEqual({
        code: 2,
        stdout: '',
        stderr: `handoff-ledger: USAGE: keys revoke needs a KEYID\n${helpHint('keys')}`,
      });
    }
    expect(existsSync(none)).toBe(false);
  });
});

describe('HANDOFF_LEDGER_* variables set to the empty string', () => {
  // An exported but empty variable (`HANDOFF_LEDGER_ROOT=` in a unit file) is the default, as if unset: pinned here and
  // said in the README and the commands' help, unlike an empty option (`--root ""`), a usage error.
  it('count as unset: HANDOFF_LEDGER_ROOT="" is the default store, HANDOFF_LEDGER_HOST="" the machine name', async () => {
    const state = mkdtempSync(join(tmpdir(), 'hl-empty-env-'));
    try {
      const empty = ['ROOT', 'HOST', 'POSTGRES', 'ORIGIN', 'TRUST', 'HASH', 'WITNESSES'].map((n) => [
        `HANDOFF_LEDGER_${n}`,
        '',
      ]);
      const c = captureIo({ env: { ...Object.fromEntries(empty), XDG_STATE_HOME: state } });
      expect(await main(['init', '--json'], c.io), c.stderr()).toBe(0);
      const { defaultHost } = await import('../src/cli/io.js');
      expect(JSON.parse(c.stdout())).toMatchObject({
        root: join(state, 'handoff-ledger'),
        host: defaultHost({}),
      });
      const { defaultRoot } = await import('../src/ledger/open.js');
      expect(defaultRoot({ HANDOFF_LEDGER_ROOT: '', XDG_STATE_HOME: state })).toBe(join(state, 'handoff-ledger'));
      expect(defaultHost({ HANDOFF_LEDGER_HOST: '' })).toBe(defaultHost({}));
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });

  it('are said to count as unset in the README and in the help of every command on a store and of demo', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    expect(readme).toContain(
      'A `HANDOFF_LEDGER_*` variable set to the empty string counts as unset: `HANDOFF_LEDGER_ROOT=""` is the default store, `HANDOFF_LEDGER_HOST=""` the machine name',
    );
    for (const name of ['init', 'publish', 'resume', 'grants', 'fsck', 'keys'])
      expect(commands[name]!.options.join('\n'), name).toContain(
        'a HANDOFF_LEDGER_* variable set to "" counts as unset',
      );
    expect(commands.demo!.options.join('\n')).toContain(
      'HANDOFF_LEDGER_ROOT or HANDOFF_LEDGER_HOST set to "" counts as unset',
    );
  });
});

describe('an invalid --principal', () => {
  // grants said `principal is not a valid id: "x y"`, export `principal "x y" is not a valid id`, the scope commands
  // the same with the rule, verify `--principal must be a valid id`: one wording now, whichever command refuses it.
  it('is refused in one wording by every command that takes one (INVALID_ID; USAGE for the auditor)', async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-principal-'));
    try {
      const root = join(base, 'store');
      const store = ['--root', root, '--host', 'h'];
      expect(await main(['init', ...store], captureIo().io)).toBe(0);
      const rule = '"x y" is not a valid id (1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric)';
      const runs: [string[], string][] = [
        [['grants', ...store], 'INVALID_ID: principal'],
        [['grant', ...store, '--session', 's'], 'INVALID_ID: principal'],
        [['revoke', ...store, '--session', 's'], 'INVALID_ID: principal'],
        [['resume', ...store, '--session', 's'], 'INVALID_ID: principal'],
        [['history', ...store, '--session', 's'], 'INVALID_ID: principal'],
        [['export', ...store, '--out', join(base, 'bundle')], 'INVALID_ID: principal'],
        [['publish', ...store, '--session', 's', '--run', 'r', join(base, 'summary.json')], 'INVALID_ID: principal'],
        [['verify', join(base, 'bundle'), '--trust', join(base, 'trust.json')], 'USAGE: --principal'],
      ];
      writeFileSync(join(base, 'summary.json'), JSON.stringify(sampleSummary(1)));
      for (const [argv, said] of runs) {
        const c = captureIo();
        expect(await main([...argv, '--principal', 'x y'], c.io), argv[0]).not.toBe(0);
        expect(c.stderr(), argv[0]).toBe(`handoff-ledger: ${said} ${rule}\n`);
      }
      // The grants filter's session too, and the library's: the same words.
      const c = captureIo();
      expect(await main(['grants', ...store, '--session', 'x y'], c.io)).toBe(1);
      expect(c.stderr()).toBe(`handoff-ledger: INVALID_ID: session ${rule}\n`);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});

describe('publish refused on its store arguments', () => {
  // A summary piped from a model call, or a FIFO's writer, is not taken in vain by a command refused anyway: the host
  // (an id like --principal) and the variables every command on a store reads are judged before the summary is read,
  // as the ids and --expected-prev are. Before, they were judged at the open, after a read that waits for the input's
  // end (a terminal or a pipe left open: a wait, then the refusal).
  it('judges --host, HANDOFF_LEDGER_HOST and the store variables before it reads standard input', async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-publish-args-'));
    try {
      const root = join(base, 'store');
      const scope = ['--root', root, '--principal', 'alice', '--session', 's', '--run', 'r'];
      const notJson = join(base, 'trust.json');
      writeFileSync(notJson, 'not json');
      const runs: [string[], NodeJS.ProcessEnv, string][] = [
        [['--host', 'x y'], {}, 'handoff-ledger: INVALID_ID: host "x y" is not a valid id'],
        [[], { HANDOFF_LEDGER_HOST: 'x y' }, 'handoff-ledger: INVALID_ID: host "x y" is not a valid id'],
        [['--host', 'h'], { HANDOFF_LEDGER_HASH: 'fast' }, 'handoff-ledger: USAGE: HANDOFF_LEDGER_HASH must be'],
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_POSTGRES_PREPARED: 'maybe' },
          'handoff-ledger: USAGE: HANDOFF_LEDGER_POSTGRES_PREPARED must be',
        ],
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '5s' },
          'handoff-ledger: USAGE: HANDOFF_LEDGER_WITNESS_TIMEOUT_MS must be',
        ],
        // The witnesses, the trust file, the origin and the connection string, which the open judged after the read.
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_WITNESSES: 'not-a-url' },
          'handoff-ledger: INVALID_ARGUMENT: witness URL "not-a-url" is not a URL',
        ],
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_WITNESSES: 'http://127.0.0.1:9/#no-key' },
          'handoff-ledger: KEY_INVALID: malformed witness verifier key',
        ],
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_TRUST: join(base, 'no-such-trust.json') },
          'handoff-ledger: TRUST_INVALID: HANDOFF_LEDGER_TRUST: cannot read trust file',
        ],
        [['--host', 'h'], { HANDOFF_LEDGER_TRUST: notJson }, 'handoff-ledger: TRUST_INVALID: '],
        [['--host', 'h', '--origin', 'a b'], {}, 'handoff-ledger: INVALID_ARGUMENT: origin: a non-empty name'],
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_ORIGIN: 'a+b' },
          'handoff-ledger: INVALID_ARGUMENT: origin: a non-empty name',
        ],
        // A name the CLI prints escaped names no new log: the root holds no store yet.
        [
          ['--host', 'h', '--origin', 'example.com/a\\b'],
          {},
          "handoff-ledger: INVALID_ARGUMENT: origin: a new log's origin may not hold",
        ],
        [
          ['--host', 'h', '--postgres', 'not-a-url'],
          {},
          'handoff-ledger: INVALID_ARGUMENT: the PostgreSQL connection string is not',
        ],
        [
          ['--host', 'h'],
          { HANDOFF_LEDGER_POSTGRES: 'not-a-url' },
          'handoff-ledger: INVALID_ARGUMENT: the PostgreSQL connection string is not',
        ],
      ];
      for (const [args, env, said] of runs) {
        const c = captureIo({ env });
        const stdin = Readable.from([JSON.stringify(sampleSummary('unread'))]);
        const code = await main(['publish', ...scope, ...args], { ...c.io, stdin });
        expect(code, said).toBe(/USAGE|TRUST_INVALID/.test(said) ? 2 : 1);
        expect(c.stderr().startsWith(said), c.stderr()).toBe(true);
        expect(stdin.readableDidRead, `${said}: standard input was read`).toBe(false);
      }
      expect(existsSync(root)).toBe(false);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it("judges a root the open refuses before a new log's origin, as the open does, and still before the read", async () => {
    const base = mkdtempSync(join(tmpdir(), 'hl-publish-root-first-'));
    try {
      const store = join(base, 'store');
      expect(await main(['init', '--root', store, '--host', 'h'], captureIo().io)).toBe(0);
      const later = join(base, 'later');
      mkdirSync(later);
      writeFileSync(join(later, 'format.json'), '{"format":"handoff-ledger-root","version":99}');
      const file = join(base, 'a-file');
      writeFileSync(file, '');
      const runs: [string, string][] = [
        [later, 'handoff-ledger: FORMAT_UNSUPPORTED: '],
        [join(store, 'blobs-v1'), 'handoff-ledger: INVALID_ARGUMENT: root '],
        [file, 'handoff-ledger: UNSAFE_ROOT: '],
      ];
      for (const [root, said] of runs) {
        const c = captureIo();
        const stdin = Readable.from([JSON.stringify(sampleSummary('unread'))]);
        const args = ['--root', root, '--host', 'h', '--principal', 'alice', '--session', 's', '--run', 'r'];
        // An origin that may name no new log: the open refuses the root first, and so does the check before the read.
        const code = await main(['publish', ...args, '--origin', 'example.com/a\\b'], { ...c.io, stdin });
        expect(c.stderr().startsWith(said), c.stderr()).toBe(true);
        expect(code).not.toBe(0);
        expect(stdin.readableDidRead, `${said}: standard input was read`).toBe(false);
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  // The built CLI in a child process whose standard input stays open (half a summary written, no end): a refusal
  // judged before the read ends the process with its code; judged after it, the child waited for an end that never
  // comes (this test then runs into its timeout).
  it('is refused without waiting for a standard input held open (the built CLI, dist/)', async () => {
    const cliPath = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
    const base = mkdtempSync(join(tmpdir(), 'hl-publish-held-'));
    try {
      const root = join(base, 'store');
      const scope = ['--root', root, '--host', 'h', '--principal', 'alice', '--session', 's', '--run', 'r'];
      const runs: [string[], NodeJS.ProcessEnv, number, string][] = [
        [[], { HANDOFF_LEDGER_WITNESSES: 'not-a-url' }, 1, 'handoff-ledger: INVALID_ARGUMENT: witness URL'],
        [
          [],
          { HANDOFF_LEDGER_TRUST: join(base, 'no-such-trust.json') },
          2,
          'handoff-ledger: TRUST_INVALID: HANDOFF_LEDGER_TRUST: cannot read trust file',
        ],
        [['--origin', 'a b'], {}, 1, 'handoff-ledger: INVALID_ARGUMENT: origin: '],
        [[], { HANDOFF_LEDGER_ORIGIN: 'example.com/a\\b' }, 1, 'handoff-ledger: INVALID_ARGUMENT: origin: '],
      ];
      for (const [args, env, code, said] of runs) {
        const child = spawn(process.execPath, [cliPath, 'publish', ...scope, ...args], {
          stdio: ['pipe', 'pipe', 'pipe'],
          env: { ...process.env, NO_COLOR: '1', ...env },
        });
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        child.stdin.on('error', () => {});
        child.stdin.write(JSON.stringify(sampleSummary('held')).slice(0, 20));
        try {
          const exit = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
          expect({ code: exit, refused: stderr.startsWith(said) }, `${said}: ${stderr}`).toEqual({
            code,
            refused: true,
          });
        } finally {
          child.stdin.end();
          child.kill('SIGKILL');
        }
      }
      expect(existsSync(root)).toBe(false);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
