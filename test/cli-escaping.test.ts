/**
 * Data a command prints from the store, a bundle or a trust file goes through the one escaper
 * (manifests/encoding/printable.ts), in human output and in --json alike: a store whose checkpoint origin carries a C1 control
 * sequence, a bidi override and DEL (a legal C2SP key name, given to new logs no more but still opened in a store named
 * so before) cannot drive the terminal through any command that shows it.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { openLedger } from '../src/ledger/open.js';
import { hostKeyPath } from '../src/keys/keyring.js';
import { createWitnessKeyFile } from '../src/witness/key.js';
import { generateJwk } from '../src/keys/local-signer.js';
import { captureIo } from './support/capture-io.js';
import { sampleSummary } from './support/tmp.js';
import { startWitness, stopWitness } from './witness/support.js';
import { embeddedNamedAsBefore } from './tlog/ledger-support.js';
import { HOSTILE_ORIGIN } from './support/hostile-names.js';

const base = mkdtempSync(join(tmpdir(), 'hl-escaping-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const root = join(base, 'store');
const store = ['--root', root, '--host', 'host-a'];
// C2SP notes refuse C0 controls, not C1 (U+009B is CSI: ESC [ on many terminals) nor bidi overrides.
const ORIGIN = 'example.com/\u009b2J\u202elog\u007f';
const RAW = /[\u009b\u202e\u007f]/;

async function cli(argv: string[]) {
  const c = captureIo({ env: {} });
  const code = await main(argv, c.io);
  return { code, stdout: c.stdout(), stderr: c.stderr() };
}

beforeAll(async () => {
  // A new log is no longer named so (isNewOrigin): a store named before the rule, which still opens.
  await embeddedNamedAsBefore(root, ORIGIN);
  const ledger = await openLedger({ root, host: 'host-a', origin: ORIGIN });
  await ledger.publish({ principal: 'alice', session: 's1', run: 'r' }, sampleSummary(1));
  await ledger.close();
  for (const argv of [
    ['export', ...store, '--out', join(base, 'bundle')],
    ['keys', 'export', ...store, '--out', join(base, 'trust.json')],
  ]) {
    const r = await cli(argv);
    if (r.code !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
  }
}, 60_000);

describe('escaping of stored data in CLI output', () => {
  it('grants: a tab in stored free text (who decided) is escaped, not a column of its own', async () => {
    const by = 'ops\trevoked\t2099-01-01T00:00:00.000Z';
    expect((await cli(['grant', ...store, '--principal', 'bob', '--session', 's1', '--by', by])).code).toBe(0);
    const rows = (await cli(['grants', ...store])).stdout.split('\n').filter(Boolean);
    const bob = rows.find((r) => r.startsWith('bob\t'))!;
    expect(bob.split('\t')).toEqual([
      'bob',
      's1',
      'granted',
      expect.any(String),
      'ops\\x09revoked\\x092099-01-01T00:00:00.000Z',
    ]);
  });

  it('checkpoint: prints the note escaped when its origin carries characters a terminal acts on; --json keeps it exact', async () => {
    const human = await cli(['checkpoint', ...store]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).not.toMatch(RAW);
    expect(human.stdout.split('\n')[0]).toBe('example.com/\\x9b2J\\u{202e}log\\x7f');
    const json = await cli(['checkpoint', ...store, '--json']);
    expect(json.stdout).not.toMatch(RAW);
    expect((JSON.parse(json.stdout) as { origin: string }).origin).toBe(ORIGIN);
  });

  it('keys vkey and keys list: the checkpoint verifier key, named by the origin, is escaped', async () => {
    for (const argv of [
      ['keys', 'vkey', ...store],
      ['keys', 'list', ...store],
    ]) {
      const r = await cli(argv);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout, argv.join(' ')).not.toMatch(RAW);
    }
    // vkey prints the key bare (escaped), list quotes it (the quote's escapes, once).
    expect((await cli(['keys', 'vkey', ...store])).stdout).toContain('\\u{202e}log');
    expect((await cli(['keys', 'list', ...store])).stdout).toContain(
      '\tcheckpoints "example.com/\\u009b2J\\u202elog\\u007f+',
    );
    const json = await cli(['keys', 'list', ...store, '--json']);
    expect(json.stdout).not.toMatch(RAW);
    const parsed = JSON.parse(json.stdout) as { checkpointKeys: Array<{ vkey: string }> };
    expect(parsed.checkpointKeys[0]!.vkey.startsWith(ORIGIN)).toBe(true);
  });

  it('verify: the human report and --json (where JSON quoting alone leaves C1 and bidi raw) escape the bundle origin', async () => {
    for (const json of [false, true]) {
      const r = await cli([
        'verify',
        join(base, 'bundle'),
        '--trust',
        join(base, 'trust.json'),
        ...(json ? ['--json'] : []),
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).not.toMatch(RAW);
      if (json) expect((JSON.parse(r.stdout) as { checkpoint: { origin: string } }).checkpoint.origin).toBe(ORIGIN);
    }
  });

  it('witness keygen refuses a name that would print escaped; witness serve prints such a name of a key file escaped', async () => {
    const name = 'w\u009b2J\u202eevil';
    for (const json of [[], ['--json']]) {
      const r = await cli(['witness', 'keygen', '--name', name, '--out', join(base, 'w1.key'), ...json]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout + r.stderr).not.toMatch(RAW);
      expect(r.stdout + r.stderr).toContain('INVALID_ARGUMENT');
    }
    expect(existsSync(join(base, 'w1.key'))).toBe(false);
    // A key file naming it (an earlier version's keygen, or edited): serve reads the name back, stored data, printed
    // escaped (a real process: it serves).
    const dir = join(base, 'w-serve');
    mkdirSync(dir);
    const file = join(dir, 'witness.key');
    await createWitnessKeyFile(file, 'witness.example/w1');
    writeFileSync(file, `${JSON.stringify({ ...(JSON.parse(readFileSync(file, 'utf8')) as object), name })}\n`);
    const w = await startWitness(dir, name, []);
    try {
      expect(w.vkey).not.toMatch(RAW);
      expect(w.vkey.startsWith('w\\x9b2J\\u{202e}evil+')).toBe(true);
    } finally {
      await stopWitness(w);
    }
  }, 60_000);
});

describe('keys quote a checkpoint verifier key escaped once', () => {
  // The key's name is the log's origin: here with markup, a quote, a backslash, U+009B and U+202E. JSON.stringify's
  // quote escaped again by printable printed `"example.com/<b>\\\"q\\\\b\x9b\u{202e}+…"`.
  const name = '"example.com/<b>\\"q\\\\b\\u009b\\u202e+';
  const hostile = join(base, 'hostile');
  const at = ['--root', hostile, '--host', 'host-a'];

  it('keys list: the row quotes it once, a field of its own; keys revoke and rotate name it so too', async () => {
    await embeddedNamedAsBefore(hostile, HOSTILE_ORIGIN);
    const ledger = await openLedger({ root: hostile, host: 'host-a', origin: HOSTILE_ORIGIN });
    const { keyId, vkey } = { keyId: ledger.keyId, vkey: ledger.checkpointVerifierKey };
    await ledger.close();
    const shown = `${name}${vkey.slice(HOSTILE_ORIGIN.length + 1)}"`;
    const listed = JSON.parse((await cli(['keys', 'list', ...at, '--json'])).stdout) as {
      checkpointKeys: Array<{ keyId: string; vkey: string }>;
    };
    expect(listed.checkpointKeys.map((k) => k.vkey)).toEqual([vkey]);
    const checkpointKeyId = listed.checkpointKeys[0]!.keyId;
    const list = await cli(['keys', 'list', ...at]);
    expect(list.code, list.stderr).toBe(0);
    const row = list.stdout.split('\n').find((l) => l.includes('\tcheckpoints '))!;
    expect(row.split('\t')).toEqual([
      'host-a',
      checkpointKeyId,
      `checkpoints ${shown}`,
      expect.stringMatching(/^from /),
    ]);

    const revoke = await cli(['keys', 'revoke', keyId, ...at]);
    expect(revoke.code, revoke.stderr).toBe(0);
    const revokedAt = /^revoked \S+ from (\S+)\n/.exec(revoke.stdout)![1]!;
    const rotate = await cli(['keys', 'rotate', ...at]);
    expect(rotate.code, rotate.stderr).toBe(0);
    const lines = rotate.stdout.split('\n');
    expect(lines[0]).toMatch(/^rotated: new signing key \S+$/);
    expect(lines.slice(1)).toEqual([
      `revoked checkpoint key ${checkpointKeyId} of host-a from ${revokedAt}: take ${shown} out of every witness's logs.json`,
      '',
    ]);
  });
});

describe('a refusal is escaped once', () => {
  // Refusals quote what they were given as a JSON string with nothing a terminal acts on left raw (`"p\u001b[2J"`):
  // terminal-safe already, printed as it is, the very words --json gives. Escaped again by the printer, every
  // backslash of the quotes printed doubled (`"p\\u001b[2J"`, `\\"`, `\\\\`).
  const cases: Array<[string, string[]]> = [
    ['INVALID_ID', ['grant', ...store, '--principal', 'p\u001b[2J\\"é', '--session', 's1']],
    ['INVALID_ID', ['prove', 'inclusion', 'blake3:\u001b[31m\\', ...store]],
    ['USAGE', ['x\u001b\\"\u009b']],
    ['USAGE', ['keys', 'lst\u009b\\', ...store]],
    ['USAGE', ['gc', ...store, '--grace', '1\u001bh\\']],
    ['USAGE', ['witness', 'serve\u202e']],
    // A root inside the store, named with a C1 control and a bidi override (JSON.stringify left them raw).
    ['INVALID_ARGUMENT', ['grants', '--root', join(root, 'keys', 'x\u009b\u202e\\'), '--host', 'host-a']],
  ];
  it.each(cases)('%s: %j prints the message --json gives, escaped once', async (code, argv) => {
    const human = await cli(argv);
    const json = await cli([...argv, '--json']);
    const { error } = JSON.parse(json.stdout) as { error: { code: string; message: string } };
    expect(error.code).toBe(code);
    expect(error.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
    expect(error.message).toMatch(/\\u00(1b|9b)|\\u202e/);
    expect(human.stderr.split('\n')[0]).toBe(`handoff-ledger: ${code}: ${error.message}`);
    expect(json.stderr.split('\n')[0]).toBe(`handoff-ledger: ${code}: ${error.message}`);
  });

  it('demo: the root it names is escaped (it was printed as given, a control character and all)', async () => {
    const dir = join(base, 'demo\u001b[31m\u202e');
    const r = await cli(['demo', '--root', dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/[\u001b\u202e]/);
    expect(r.stdout).toContain(`store      ${base}/demo\\x1b[31m\\u{202e} (embedded`);
  }, 60_000);
});

describe('an auditor refusal is escaped once, by verify and audit-ui alike', () => {
  it('a trust file with an unknown field: the field quoted once', async () => {
    const good = JSON.parse(readFileSync(join(base, 'trust.json'), 'utf8')) as object;
    const file = join(base, 'odd-trust.json');
    writeFileSync(file, JSON.stringify({ ...good, 'x\u001b\\y': 1 }));
    const line = `handoff-ledger: TRUST_INVALID: trust file "${file}": trust store is malformed: (root): unknown field "x\\u001b\\\\y"\n`;
    const verify = await cli(['verify', join(base, 'bundle'), '--trust', file]);
    expect(verify).toMatchObject({ code: 2, stderr: line });
    // audit-ui printed its AuditError through printable: `"x\\u001b\\\\y"`.
    const ui = await cli(['audit-ui', '--trust', file]);
    expect(ui).toMatchObject({ code: 2, stderr: line });
  });
});

describe('a refusal quotes the paths and key ids it names, once', () => {
  // Named raw, a path holding the six characters `\u001b` printed as it is and read like a quoted ESC; one holding a
  // real ESC or U+202E had the whole message escaped (`\x1b`), the backslashes of its other quotes doubled. Quoted,
  // the two print differently, each the very words --json gives.
  async function refused(argv: string[]) {
    const human = await cli(argv);
    const json = await cli([...argv, '--json']);
    const { error } = JSON.parse(json.stdout) as { error: { code: string; message: string } };
    expect(human.stderr).toBe(`handoff-ledger: ${error.code}: ${error.message}\n`);
    expect(human.stderr + json.stdout + json.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    return { code: human.code, error };
  }

  it('a trust file that cannot be read: the path quoted, the failure named by its errno code', async () => {
    const literal = await refused(['verify', join(base, 'bundle'), '--trust', join(base, 'no\\u001b[2Jtrust')]);
    const real = await refused(['verify', join(base, 'bundle'), '--trust', join(base, 'no\u001b[2J\u202etrust')]);
    expect(literal.code).toBe(2);
    expect(literal.error).toEqual({
      code: 'TRUST_INVALID',
      message: `cannot read trust file "${base}/no\\\\u001b[2Jtrust": ENOENT (no such file or directory)`,
    });
    expect(real.error).toEqual({
      code: 'TRUST_INVALID',
      message: `cannot read trust file "${base}/no\\u001b[2J\\u202etrust": ENOENT (no such file or directory)`,
    });
  });

  it('keys revoke: a key id it does not know is quoted', async () => {
    const literal = await refused(['keys', 'revoke', 'k\\u001b"x', ...store]);
    const real = await refused(['keys', 'revoke', 'k\u001b\u202e"x', ...store]);
    expect(literal.code).toBe(1);
    expect(literal.error).toEqual({ code: 'KEY_INVALID', message: 'no trusted key "k\\\\u001b\\"x"' });
    expect(real.error).toEqual({ code: 'KEY_INVALID', message: 'no trusted key "k\\u001b\\u202e\\"x"' });
  });

  it('a root with no store: the root quoted', async () => {
    const literal = await refused(['grants', '--root', join(base, 'none\\u001b'), '--host', 'host-a']);
    const real = await refused(['grants', '--root', join(base, 'none\u001b\u202e'), '--host', 'host-a']);
    const tail = ' (no trust.json); `init` makes one (in the library, an open without createHostKey: false)';
    expect(literal.error.message).toBe(`no store at "${base}/none\\\\u001b"${tail}`);
    expect(real.error.message).toBe(`no store at "${base}/none\\u001b\\u202e"${tail}`);
  });

  it('trust files that list one key id with two public keys: the files and the key id quoted', async () => {
    // A key id is any printable ASCII: a backslash and a quote included, so one can read like an escape.
    const keyId = 'k\\u001b"x';
    const entry = (publicKey: string) => ({ host: 'host-a', keyId, publicKey, notBefore: '2026-01-01T00:00:00.000Z' });
    const a = join(base, 'a\\u001b.json');
    const b = join(base, 'b\u001b\u202e.json');
    writeFileSync(a, JSON.stringify({ version: 1, keys: [entry(generateJwk().x)] }));
    writeFileSync(b, JSON.stringify({ version: 1, keys: [entry(generateJwk().x)] }));
    const r = await refused(['verify', join(base, 'bundle'), '--trust', a, '--trust', b]);
    expect(r.error).toEqual({
      code: 'TRUST_INVALID',
      message: `trust files "${base}/a\\\\u001b.json", "${base}/b\\u001b\\u202e.json": key "k\\\\u001b\\"x" of host host-a is listed with two public keys`,
    });
  });

  it('a root that pins another log and holds none: the pin and the log quoted', async () => {
    const shown: string[] = [];
    for (const name of ['pinned\\u001b', 'pinned\u001b\u202e']) {
      const at = join(base, name);
      const ledger = await openLedger({ root: at, host: 'host-a', origin: 'example.com/pinned' });
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r' }, sampleSummary(1));
      await ledger.close();
      rmSync(join(at, 'manifests-v1'), { recursive: true });
      const r = await refused(['keys', 'list', '--root', at, '--host', 'host-a', '--origin', 'example.com/other']);
      expect(r.error.code).toBe('FORK');
      shown.push(r.error.message);
    }
    expect(shown[0]).toMatch(
      /^this root pins another log \("[^"]*\/pinned\\\\u001b\/checkpoints\/[0-9a-f]{64}\.pin"\) /,
    );
    expect(shown[0]).toContain(`and holds no embedded log ("${base}/pinned\\\\u001b/manifests-v1"), so`);
    expect(shown[1]).toMatch(
      /^this root pins another log \("[^"]*\/pinned\\u001b\\u202e\/checkpoints\/[0-9a-f]{64}\.pin"\) /,
    );
    expect(shown[1]).toContain(`and holds no embedded log ("${base}/pinned\\u001b\\u202e/manifests-v1"), so`);
  });

  it("a host key file open to group or others: the key file's path quoted", async () => {
    const shown: string[] = [];
    for (const name of ['keyed\\u001b', 'keyed\u001b\u202e']) {
      const at = join(base, name);
      await (await openLedger({ root: at, host: 'host-a' })).close();
      chmodSync(hostKeyPath(at, 'host-a'), 0o640);
      const r = await refused(['grants', '--root', at, '--host', 'host-a']);
      expect(r.error.code).toBe('KEY_FILE_UNSAFE');
      shown.push(r.error.message);
    }
    const tail = (root: string) =>
      `${root}/keys/${hostKeyPath('', 'host-a').split('/').pop()}" is accessible by group or others (mode 640); run chmod 600 on it`;
    expect(shown).toEqual([
      `key file "${tail(`${base}/keyed\\\\u001b`)}`,
      `key file "${tail(`${base}/keyed\\u001b\\u202e`)}`,
    ]);
  });

  it('export --since a file that is not there: the path quoted, the failure by its errno code', async () => {
    const literal = await refused(['export', ...store, '--out', join(base, 'out1'), '--since', join(base, 'n\\u001b')]);
    const real = await refused([
      'export',
      ...store,
      '--out',
      join(base, 'out2'),
      '--since',
      join(base, 'n\u001b\u202e'),
    ]);
    expect(literal.error).toEqual({
      code: 'USAGE',
      message: `--since "${base}/n\\\\u001b": ENOENT (no such file or directory)`,
    });
    expect(real.error).toEqual({
      code: 'USAGE',
      message: `--since "${base}/n\\u001b\\u202e": ENOENT (no such file or directory)`,
    });
  });

  // Each name twice: with the six characters `\u001b` (quoted: `\\u001b`) and with a real ESC and U+202E (quoted as
  // `\u001b\u202e`), each named by `base` + `/` + the name.
  const names = [
    { raw: 'n\\u001b', shown: 'n\\\\u001b' },
    { raw: 'n\u001b\u202e', shown: 'n\\u001b\\u202e' },
  ];

  it('IO_FAILED (publish FILE a directory, keys export --out in a missing directory): the errno by its code, the path quoted', async () => {
    for (const [i, { raw, shown }] of names.entries()) {
      const dir = join(base, `io${i}${raw}`);
      mkdirSync(dir);
      const read = await refused(['publish', ...store, '--principal', 'alice', '--session', 's1', '--run', 'r9', dir]);
      expect(read).toEqual({
        code: 2,
        error: {
          code: 'IO_FAILED',
          message: `cannot read summary file "${base}/io${i}${shown}": EISDIR (illegal operation on a directory)`,
        },
      });
      const out = join(base, `gone${i}${raw}`, 'trust.json');
      const written = await refused(['keys', 'export', ...store, '--out', out]);
      expect(written.error).toEqual({
        code: 'IO_FAILED',
        message: `ENOENT (no such file or directory), write "${base}/gone${i}${shown}/trust.json"`,
      });
    }
  });

  it('verify: a bundle directory that is none, or is not there: the directory quoted', async () => {
    for (const [i, { raw, shown }] of names.entries()) {
      const dir = join(base, `nb${i}${raw}`);
      mkdirSync(dir);
      const none = await refused(['verify', dir, '--trust', join(base, 'trust.json')]);
      expect(none).toEqual({
        code: 2,
        error: { code: 'BUNDLE_INVALID', message: `"${base}/nb${i}${shown}" has no bundle.json; not a bundle` },
      });
      const missing = await refused(['verify', join(base, `nt${i}${raw}`), '--trust', join(base, 'trust.json')]);
      expect(missing.error).toEqual({
        code: 'BUNDLE_IO',
        message: `cannot read "${base}/nt${i}${shown}": ENOENT (no such file or directory)`,
      });
    }
  });

  it('export / keys export --out: a file already there, or a path inside the store root, quoted', async () => {
    for (const [i, { raw, shown }] of names.entries()) {
      const file = join(base, `taken${i}${raw}`);
      writeFileSync(file, 'notes');
      const taken = await refused(['export', ...store, '--out', file]);
      expect(taken.error).toEqual({
        code: 'BUNDLE_EXISTS',
        message: `"${base}/taken${i}${shown}" is a regular file, not a new directory: export writes the bundle as a directory it makes there; export never overwrites`,
      });
      const inside = await refused(['export', ...store, '--out', join(root, `x${raw}`)]);
      expect(inside.error).toEqual({
        code: 'USAGE',
        message: `--out "${root}/x${shown}" is inside the store root "${root}", whose files the store manages (its keys, its log, staging files an open clears): export the bundle outside it`,
      });
      const keys = await refused(['keys', 'export', ...store, '--out', join(root, `x${raw}`)]);
      expect(keys.error).toEqual({
        code: 'USAGE',
        message: `--out "${root}/x${shown}" is inside the store root "${root}", whose files the store writes itself: keys export --out writes the copy you hand out, elsewhere`,
      });
    }
  });

  it('init --root under a file, witness keygen --out a file already there: the path quoted', async () => {
    for (const [i, { raw, shown }] of names.entries()) {
      const file = join(base, `file${i}${raw}`);
      writeFileSync(file, 'notes');
      const init = await refused(['init', '--root', join(file, 'store'), '--host', 'host-a']);
      expect(init.error).toEqual({
        code: 'UNSAFE_ROOT',
        message: `"${base}/file${i}${shown}/store" is not a directory (a part of its path is a file)`,
      });
      const keygen = await refused(['witness', 'keygen', '--name', 'witness.example/w1', '--out', file]);
      expect(keygen.error).toEqual({
        code: 'USAGE',
        message: `"${base}/file${i}${shown}" exists: a witness key is never replaced`,
      });
    }
  });
});

describe('a success line names the path it made, wrote or serves quoted, once', () => {
  // Printed escaped but bare (`exported … to /b/n\x1b\u{202e}`), a path ran into the words around it and one holding
  // the six characters `\u001b` read like one holding ESC. Quoted as a refusal quotes it, the two print apart, and the
  // line is escaped once (printableLines doubled the backslashes of a quote, and of a shell word's '\'').
  const names = [
    { raw: 'n\\u001b', shown: 'n\\\\u001b' },
    { raw: "n\u001b\u202e 'q", shown: "n\\u001b\\u202e 'q" },
  ];

  it('init, export, keys export --out and verify: the root, the bundle and the trust file quoted', async () => {
    for (const [i, { raw, shown }] of names.entries()) {
      const okRoot = join(base, `ok-root${i}${raw}`);
      const okStore = ['--root', okRoot, '--host', 'host-a'];
      const init = await cli(['init', ...okStore]);
      expect(init.code, init.stderr).toBe(0);
      expect(init.stdout.split('\n')[0]).toBe(`store ready at "${base}/ok-root${i}${shown}"`);
      const ledger = await openLedger({ root: okRoot, host: 'host-a' });
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r' }, sampleSummary(1));
      await ledger.close();

      const bundle = join(base, `ok-bundle${i}${raw}`);
      const exported = await cli(['export', ...okStore, '--out', bundle]);
      expect(exported.code, exported.stderr).toBe(0);
      // The root cannot be given as a word to paste (a backslash, ESC): a placeholder, the root named quoted.
      expect(exported.stdout).toBe(
        `exported 1 manifest in 1 chain to "${base}/ok-bundle${i}${shown}"\n` +
          `auditors also need this host's public keys: handoff-ledger keys export --root ROOT --host host-a (ROOT is "${base}/ok-root${i}${shown}")\n`,
      );

      const trust = join(base, `ok-trust${i}${raw}.json`);
      const keys = await cli(['keys', 'export', ...okStore, '--out', trust]);
      expect(keys.code, keys.stderr).toBe(0);
      expect(keys.stdout).toBe(
        `wrote 1 trusted key and 1 checkpoint key to "${base}/ok-trust${i}${shown}.json"; give this file to auditors out of band\n`,
      );

      const verified = await cli(['verify', bundle, '--trust', trust]);
      expect(verified.code, verified.stderr).toBe(0);
      expect(verified.stdout.split('\n')[0]).toMatch(
        new RegExp(`^bundle ${escapeRegExp(`"${base}/ok-bundle${i}${shown}"`)}: its unsigned header claims: `),
      );
      for (const out of [init.stdout, exported.stdout, keys.stdout, verified.stdout])
        expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    }
  });

  it('export: the keys export command it suggests, pasted into a shell, names the root given, a quote and a space in it', async () => {
    const okRoot = join(base, "it's a store");
    const okStore = ['--root', okRoot, '--host', 'host-a'];
    expect((await cli(['init', ...okStore])).code).toBe(0);
    const exported = await cli(['export', ...okStore, '--out', join(base, 'pasted-bundle')]);
    expect(exported.code, exported.stderr).toBe(0);
    const line = exported.stdout.split('\n')[1]!;
    const command = line.split("auditors also need this host's public keys: handoff-ledger keys export ")[1]!;
    expect(command).toBe(`--root '${base}/it'\\''s a store' --host host-a`);
    // Each argument the shell reads from it, one a line: those given (printableLines printed `'\\''`, another word).
    const echoed = spawnSync('/bin/sh', ['-c', `printf '%s\\n' ${command}`], { encoding: 'utf8' });
    expect(echoed.stdout).toBe(`--root\n${okRoot}\n--host\nhost-a\n`);
  });
});

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
