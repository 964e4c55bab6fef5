/**
 * Every option a command's parser accepts is named in its help (`help <command>`, `<command> --help`). The options
 * are taken from the parser itself: `parse` is wrapped to record what each command hands it, so an option added to
 * a command without its help line fails here. And every command line the documents show uses options its command
 * accepts.
 */
import { describe, expect, it, vi } from 'vitest';
import type { ParseArgsConfig } from 'node:util';
import { commandHelp, commands } from '../src/cli/commands.js';
import { main } from '../src/cli/main.js';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { captureIo } from './support/capture-io.js';
import { cosignWaitMs } from '../src/ledger/witnessing.js';
import { witnessingFromEnv } from '../src/cli/io.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { usage as verifyUsage } from '../src/cli/verify.js';
import { usage as exportUsage } from '../src/cli/export.js';
import { usage as auditUiUsage } from '../src/cli/audit-ui.js';
import { usage as witnessUsage } from '../src/cli/witness.js';

const seen: Array<NonNullable<ParseArgsConfig['options']>> = [];

vi.mock('../src/cli/io.js', async (importOriginal) => {
  const io = await importOriginal<typeof import('../src/cli/io.js')>();
  return {
    ...io,
    parse: ((argv, options, allowPositionals) => {
      seen.push(options);
      return io.parse(argv, options, allowPositionals);
    }) satisfies typeof io.parse,
  };
});

/** The argv prefixes that reach each parser: a command, or a command and its subcommand. */
const parsers: Record<string, string[][]> = {
  keys: [['keys', 'list']],
  witness: [
    ['witness', 'keygen'],
    ['witness', 'serve'],
  ],
  prove: [['prove', 'inclusion']],
};

describe('command help names every option the parser accepts', () => {
  it.each(Object.keys(commands))('%s', async (name) => {
    const accepted = new Set<string>();
    for (const prefix of parsers[name] ?? [[name]]) {
      seen.length = 0;
      const c = captureIo();
      // An unknown option: the parser runs, records its options and refuses the line before anything is opened.
      expect(await main([...prefix, '--not-an-option'], c.io), c.stderr()).toBe(2);
      expect(seen.length, `${prefix.join(' ')} parses its options`).toBeGreaterThan(0);
      for (const options of seen) for (const option of Object.keys(options)) accepted.add(option);
    }
    const help = commandHelp(commands[name]!);
    const named = new Set([...help.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!));
    expect([...accepted].filter((o) => !named.has(o))).toEqual([]);
  });
});

describe('the synopsis names every option the parser accepts', () => {
  // witness printed --max-body-bytes and --request-timeout-ms among its options but not in the synopsis, which a usage
  // error of witness prints alone; publish, grant and revoke took --json and the store options (--root, --host,
  // --postgres, --origin) without naming them there.
  it.each(Object.keys(commands))('%s', async (name) => {
    const accepted = new Set<string>();
    for (const prefix of parsers[name] ?? [[name]]) {
      seen.length = 0;
      expect(await main([...prefix, '--not-an-option'], captureIo().io)).toBe(2);
      for (const options of seen) for (const option of Object.keys(options)) accepted.add(option);
    }
    const synopsis = new Set([...commands[name]!.synopsis.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!));
    expect([...accepted].filter((o) => o !== 'help' && !synopsis.has(o))).toEqual([]);
  });
});

describe('the synopsis shows an option that may repeat as repeatable, and no other', () => {
  // verify and audit-ui take `--trust FILE` once per file (parse's `multiple`), which only the option's line said: the
  // synopsis, which a usage error prints alone, showed `--trust FILE` / `[--trust FILE]` as if given once.
  /** The options the synopsis shows as `[--name …]…`: a bracketed group (brackets nested inside) followed by `…`. */
  const shownRepeatable = (synopsis: string): string[] => {
    const out: string[] = [];
    for (const m of synopsis.matchAll(/\[--([a-z][a-z0-9-]*)/g)) {
      let depth = 0;
      let end = m.index;
      do depth += synopsis[end] === '[' ? 1 : synopsis[end] === ']' ? -1 : 0;
      while (depth > 0 && ++end < synopsis.length);
      if (synopsis[end + 1] === '…') out.push(m[1]!);
    }
    return out;
  };

  it.each(Object.keys(commands))('%s', async (name) => {
    const repeatable = new Set<string>();
    for (const prefix of parsers[name] ?? [[name]]) {
      seen.length = 0;
      expect(await main([...prefix, '--not-an-option'], captureIo().io)).toBe(2);
      for (const options of seen)
        for (const [option, config] of Object.entries(options)) if (config.multiple) repeatable.add(option);
    }
    expect(shownRepeatable(commands[name]!.synopsis).sort()).toEqual([...repeatable].sort());
  });

  it('is what verify, audit-ui and checkpoint parse with multiple', () => {
    expect(shownRepeatable(commands.verify!.synopsis)).toEqual(['trust']);
    expect(shownRepeatable(commands['audit-ui']!.synopsis)).toEqual(['trust']);
    expect(shownRepeatable(commands.checkpoint!.synopsis)).toEqual(['witness']);
  });
});

describe('command help describes each option on a line of its own', () => {
  // The synopsis names an option; the option lines say what it does. `keys` listed `--out` and `--at` (and the
  // subcommand `list`) in its synopsis only.
  it.each(Object.keys(commands))('%s', (name) => {
    const spec = commands[name]!;
    const described = new Set(spec.options.map((o) => /^(--[a-z][a-z0-9-]*|[a-z][a-z-]*)\b/.exec(o)?.[1]));
    const synopsis = [...spec.synopsis.matchAll(/(?:^|[\s([|])(--[a-z][a-z0-9-]*)/g)].map((m) => m[1]!);
    expect(synopsis.filter((o) => !described.has(o))).toEqual([]);
  });

  it('keys describes each of its subcommands', () => {
    const described = commands.keys!.options.map((o) => o.split(/\s/)[0]);
    expect(described).toEqual(expect.arrayContaining(['export', 'list', 'vkey', 'rotate', 'revoke']));
  });
});

describe('--principal in each command says whose id it is', () => {
  // The principal of grant and revoke is the one given or denied access, of publish, resume and history the one
  // acting (the owner or a grantee): never "the user the session belongs to", which only the owner is.
  const line = (name: string) => commands[name]!.options.find((o) => o.startsWith('--principal'))!;
  it.each(['publish', 'resume', 'history', 'grant', 'revoke', 'grants', 'export'])('%s', (name) => {
    expect(line(name)).not.toMatch(/belongs to/);
  });
  it('grant and revoke name the principal whose access changes', () => {
    expect(line('grant')).toMatch(/given access/);
    expect(line('revoke')).toMatch(/access is revoked/);
  });
});

describe('gc help', () => {
  // parseDuration takes a number without a unit as seconds: `--grace 24` keeps 24 seconds, not 24 hours.
  it('says which units --grace takes and what a number alone means', () => {
    const help = commandHelp(commands.gc!);
    expect(help).toMatch(/--grace DURATION .*ms, s, m, h or d/);
    expect(help).toContain('a number alone is seconds');
  });
});

describe('keys help', () => {
  // The help named a symlink, a device and a FIFO as an --out refused, not a socket, which keys refuses as well.
  it('names every kind of --out that keys export / list refuse, as access.ts names it (kindOf)', () => {
    const kinds = [
      ...(
        /function kindOf[\s\S]*?\n\}/.exec(
          readFileSync(new URL('../src/cli/access.ts', import.meta.url), 'utf8'),
        )?.[0] ?? ''
      ).matchAll(/return 'an? ([a-zA-Z ]+)';/g),
    ]
      .map((m) => m[1]!)
      .filter((k) => k !== 'not a file')
      .map((k) => (k === 'symbolic link' ? 'symlink' : k));
    expect(kinds).toEqual(['symlink', 'device', 'FIFO', 'socket']);
    const out = commandHelp(commands.keys!).split('  --out FILE')[1]!.split('\n  --')[0]!.replace(/\s+/g, ' ');
    expect(out).toContain('a symlink, device, FIFO or socket is refused (USAGE)');
  });
});

describe('demo help', () => {
  // The demo publishes into the store every command uses unless told otherwise, under a host of its own.
  it('names the store and host it uses when no --root or --host is given', () => {
    const help = commandHelp(commands.demo!);
    expect(help).toMatch(
      /--root DIR +where the demo store goes \(or HANDOFF_LEDGER_ROOT; default the store every command/,
    );
    expect(help).toContain('${XDG_STATE_HOME:-~/.local/state}/handoff-ledger');
    expect(help).toMatch(/--host ID +the demo host \(or HANDOFF_LEDGER_HOST; default demo-host/);
  });
});

describe('the defaults command help states', () => {
  // verify's --workers and --max-bundle-bytes (and audit-ui's bound) said no default: an auditor could not tell from
  // --help that verify spreads a large bundle over one thread per core unasked, nor how large a bundle it takes.
  // Each default is read from the code that applies it.
  const source = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
  const constant = (path: string, name: string) => {
    const expr = new RegExp(`const ${name} = ([^;]+);`).exec(source(path))?.[1];
    expect(expr, `${name} in ${path}`).toBeDefined();
    return expr!.split('*').reduce((a, f) => a * Number(f.trim().replace(/_/g, '')), 1);
  };
  const line = (help: string, option: string) => help.split('\n').find((l) => l.startsWith(`  ${option} `)) ?? '';
  const MiB = 1024 ** 2;

  it("verify's --workers: auto, one thread per core from the size verify.ts starts them at, at most its bound", async () => {
    const { DEFAULT_MAX_MANIFESTS_BYTES } = await import('../manifests/audit/auditor-options.js');
    const verify = source('src/cli/verify.ts');
    expect(verify).toMatch(/workers: \{ type: 'string', default: 'auto' \}/);
    const help = commandHelp(commands.verify!);
    const workers = help.split('  --workers auto|N')[1]!.split('\n  --')[0]!.replace(/\s+/g, ' ');
    expect(workers).toContain('default auto: one per core');
    expect(workers).toContain(`from ${constant('src/cli/verify.ts', 'WORKERS_FROM_BYTES') / MiB} MiB of manifests`);
    expect(workers).toContain(`at most ${constant('src/cli/verify.ts', 'MAX_WORKER_THREADS')})`);
    expect(line(help, '--max-bundle-bytes N')).toContain(`default ${DEFAULT_MAX_MANIFESTS_BYTES / 1024 ** 3} GiB`);
    expect(line(commandHelp(commands['audit-ui']!), '--max-bundle-bytes N')).toContain(
      `default ${DEFAULT_MAX_MANIFESTS_BYTES / 1024 ** 3} GiB`,
    );
  });

  it("publish's --max-bytes and witness serve's bounds: the defaults the parsers fall back to", async () => {
    const { DEFAULT_MAX_SUMMARY_BYTES } = await import('../src/summary/summary.js');
    expect(line(commandHelp(commands.publish!), '--max-bytes N')).toContain(
      `(default ${DEFAULT_MAX_SUMMARY_BYTES / MiB} MiB)`,
    );
    const witness = source('src/cli/witness.ts').replace(/\s+/g, ' ');
    const fallback = (option: string) =>
      /^([\d_ *]+),/
        .exec(witness.split(`'--${option}', `)[1] ?? '')?.[1]!
        .split('*')
        .reduce((a, f) => a * Number(f.trim().replace(/_/g, '')), 1);
    const help = commandHelp(commands.witness!);
    expect(line(help, '--max-body-bytes N')).toContain(`(default ${fallback('max-body-bytes')};`);
    expect(line(help, '--request-timeout-ms N')).toContain(`(default ${fallback('request-timeout-ms')},`);
  });
});

describe('the usage line a usage error prints', () => {
  // verify, export, audit-ui and witness print their synopsis on a usage error: the one help prints, not a copy.
  it.each([
    ['verify', verifyUsage],
    ['export', exportUsage],
    ['audit-ui', auditUiUsage],
    ['witness', witnessUsage],
  ])('%s is its help synopsis', (name, usage) => {
    expect(usage).toBe(commands[name]!.synopsis);
  });
});

describe('the exit codes a command help lists', () => {
  // Exit 2 of a command without a store (the auditor's verify and audit-ui, witness) names no store, lock or
  // storage of its own: the shared line "store locked by another process" was printed for them too.
  const exit2 = (name: string) =>
    commandHelp(commands[name]!)
      .split('Exit codes:\n')[1]!
      .split(/\n {2}70 /)[0]!
      .replace(/^[\s\S]*?\n {2}2 {3}/, '');
  it.each(['verify', 'audit-ui', 'witness'])('%s: exit 2 names no store', (name) => {
    expect(exit2(name)).not.toMatch(/store|lock/);
    expect(exit2(name)).toMatch(/^usage error/);
  });
  it.each(Object.keys(commands).filter((n) => !['verify', 'audit-ui', 'witness', 'export'].includes(n)))(
    '%s: exit 2 names the store locked by another process',
    (name) => {
      expect(exit2(name)).toBe('usage error, I/O or storage failure, store locked by another process');
    },
  );
  // export into a target that exists answers BUNDLE_EXISTS with exit 2 (cli.test.ts), which its help did not name:
  // a coded error, which the exit 1 line ("a coded refusal") seemed to cover.
  it('export: exit 2 names the store locked by another process, and an --out that exists (BUNDLE_EXISTS)', () => {
    expect(exit2('export')).toMatch(
      /^usage error, I\/O or storage failure, store locked by another process,\n {6}an --out that exists \(BUNDLE_EXISTS/,
    );
  });
  // witness serve on another key's --state exits 1 with WITNESS_KEY_MISMATCH (test/witness/state-binding.test.ts);
  // the exit 1 line listed the other codes it answers, and not that one.
  it('witness: exit 1 names WITNESS_KEY_MISMATCH, a --state of another key', () => {
    const exit1 = commandHelp(commands.witness!)
      .split('Exit codes:\n')[1]!
      .split(/\n {2}2 /)[0]!;
    expect(exit1).toMatch(/^ {2}1 {3}a coded refusal \(KEY_INVALID, /m);
    expect(exit1).toMatch(/\n {6}WITNESS_KEY_MISMATCH: a --state of another witness key\)$/);
  });
  // A second witness serve on a --state another one serves exits 2 with LOCKED (witness.lock); the exit 2 line listed
  // the other failures it answers, and not that one.
  it('witness: exit 2 names LOCKED, a --state another witness process serves', () => {
    const exit2 = commandHelp(commands.witness!)
      .split(/\n {2}2 {3}/)[1]!
      .split(/\n {2}70 /)[0]!;
    expect(exit2.replace(/\s+/g, ' ')).toMatch(/a --state another witness process serves \(LOCKED\)/);
  });
  it('every command lists 0, 1, 2 and 70, in that order', () => {
    for (const [name, spec] of Object.entries(commands)) {
      const codes = [...commandHelp(spec).matchAll(/^ {2}(\d+) /gm)].map((m) => m[1]);
      expect(codes.slice(0, 4), name).toEqual(['0', '1', '2', '70']);
    }
  });
});

describe('environment variables in command help', () => {
  // publish listed HANDOFF_LEDGER_WITNESSES and HANDOFF_LEDGER_WITNESS_TIMEOUT_MS among its options, as if they were
  // options, checkpoint named them inside --witness's lines and every command on a store HANDOFF_LEDGER_TRUST inside
  // --postgres's. A variable no option stands for is now in an Environment section of its own; an option's line names
  // only the variable it falls back to (`--root DIR ... (or HANDOFF_LEDGER_ROOT ...)`).
  const FALLBACKS = ['HANDOFF_LEDGER_ROOT', 'HANDOFF_LEDGER_HOST', 'HANDOFF_LEDGER_POSTGRES', 'HANDOFF_LEDGER_ORIGIN'];
  const section = (help: string, name: string) => help.split(`\n${name}:\n`)[1]?.split('\n\n')[0]?.split('\n') ?? [];

  it.each(Object.keys(commands))('%s: option lines name no variable but the one an option falls back to', (name) => {
    const options = section(commandHelp(commands[name]!), 'Options');
    expect(options.length).toBeGreaterThan(0);
    for (const line of options) {
      expect(line, name).not.toMatch(/^\s*HANDOFF_LEDGER_/);
      for (const [variable] of line.matchAll(/HANDOFF_LEDGER_[A-Z_]+/g))
        expect(FALLBACKS, `${name}: ${line}`).toContain(variable);
    }
  });

  /** The commands on a store: every one reads HANDOFF_LEDGER_TRUST (keys aside: its own keys only) and _HASH. */
  const onAStore = Object.keys(commands).filter((n) => commands[n]!.options.some((o) => o.startsWith('--postgres')));

  it('every command on a store lists HANDOFF_LEDGER_HASH and _POSTGRES_PREPARED, and all but keys HANDOFF_LEDGER_TRUST, in Environment', () => {
    expect(onAStore).toEqual(expect.arrayContaining(['init', 'publish', 'keys', 'export', 'checkpoint', 'gc']));
    for (const name of onAStore) {
      const environment = section(commandHelp(commands[name]!), 'Environment').join('\n');
      expect(environment, name).toMatch(/^ {2}HANDOFF_LEDGER_HASH=auto\|native\|wasm\|noble /m);
      expect(environment, name).toMatch(/^ {2}HANDOFF_LEDGER_POSTGRES_PREPARED=on\|off /m);
      if (name === 'keys') expect(environment).not.toContain('HANDOFF_LEDGER_TRUST');
      else expect(environment, name).toMatch(/^ {2}HANDOFF_LEDGER_TRUST=FILE /m);
    }
    // verify hashes blobs, the demo publishes: they take HANDOFF_LEDGER_HASH too.
    for (const name of ['verify', 'demo'])
      expect(section(commandHelp(commands[name]!), 'Environment').join('\n'), name).toContain('HANDOFF_LEDGER_HASH');
  });

  // export submits its checkpoint to the witnesses (README: checkpoint.note carries their cosignatures), and every
  // command on a store reads HANDOFF_LEDGER_WITNESSES and _WITNESS_TIMEOUT_MS (io.ts openFromArgs), but only publish
  // and checkpoint listed them: now each command on a store lists both, saying whether it submits (publish,
  // checkpoint, export) or only reads and checks them; the commands that open no store list neither.
  /** For each command on a store, arguments that take it as far as opening the store. */
  const reachOpen = (dir: string): Record<string, string[]> => ({
    init: ['init'],
    publish: ['publish', '--principal', 'a', '--session', 's', '--run', 'r', join(dir, 'summary.json')],
    resume: ['resume', '--principal', 'a', '--session', 's'],
    history: ['history', '--principal', 'a', '--session', 's'],
    grant: ['grant', '--principal', 'a', '--session', 's'],
    revoke: ['revoke', '--principal', 'a', '--session', 's'],
    grants: ['grants'],
    keys: ['keys', 'list'],
    export: ['export', '--out', join(dir, 'bundle')],
    checkpoint: ['checkpoint'],
    prove: ['prove', 'consistency', '1'],
    fsck: ['fsck'],
    gc: ['gc', '--grace', '1d'],
  });
  const SUBMITS = ['publish', 'checkpoint', 'export'];

  it('every command on a store reads the witness variables, and lists both in Environment', async () => {
    const dir = tempDir();
    const missing = join(dir, 'no-store');
    writeFileSync(join(dir, 'summary.json'), JSON.stringify(sampleSummary('env')));
    const argv = reachOpen(dir);
    expect(Object.keys(argv).sort()).toEqual([...onAStore].sort());
    for (const name of onAStore) {
      // Read as the store is opened: a timeout that is no number refuses the command before anything is made.
      const c = captureIo({ env: { HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: 'soon' } });
      expect(await main([...argv[name]!, '--root', missing], c.io), name).toBe(2);
      expect(c.stderr(), name).toBe(
        'handoff-ledger: USAGE: HANDOFF_LEDGER_WITNESS_TIMEOUT_MS must be a whole number of milliseconds from 1 to 2147483647, not "soon"\n',
      );
      expect(existsSync(missing), name).toBe(false);
      const environment = section(commandHelp(commands[name]!), 'Environment').join('\n');
      expect(environment, name).toMatch(/^ {2}HANDOFF_LEDGER_WITNESSES /m);
      expect(environment, name).toMatch(/^ {2}HANDOFF_LEDGER_WITNESS_TIMEOUT_MS=N /m);
      // Said truthfully: the ones that submit say what they submit; the others that they make no checkpoint to submit.
      if (SUBMITS.includes(name)) expect(environment, name).not.toContain('unused');
      else expect(environment, name).toContain('this command makes no checkpoint to');
    }
    for (const name of Object.keys(commands).filter((n) => !onAStore.includes(n)))
      expect(commandHelp(commands[name]!), name).not.toContain('HANDOFF_LEDGER_WITNESS');
  });

  it('every command on a store refuses a HANDOFF_LEDGER_POSTGRES_PREPARED other than on or off before it makes anything', async () => {
    const dir = tempDir();
    const missing = join(dir, 'no-store');
    writeFileSync(join(dir, 'summary.json'), JSON.stringify(sampleSummary('env')));
    const argv = reachOpen(dir);
    for (const name of onAStore)
      for (const value of ['yes', 'OFF', '0']) {
        const c = captureIo({ env: { HANDOFF_LEDGER_POSTGRES_PREPARED: value } });
        expect(await main([...argv[name]!, '--root', missing], c.io), name).toBe(2);
        expect(c.stderr(), name).toBe(
          `handoff-ledger: USAGE: HANDOFF_LEDGER_POSTGRES_PREPARED must be on or off, not "${value}"\n`,
        );
        expect(existsSync(missing), name).toBe(false);
      }
    // Empty counts as unset (on), as for every HANDOFF_LEDGER_* variable; on and off are taken.
    for (const value of ['', 'on', 'off']) {
      const c = captureIo({ env: { HANDOFF_LEDGER_POSTGRES_PREPARED: value } });
      expect(await main(['init', '--root', join(dir, `store-${value || 'empty'}`)], c.io), c.stderr()).toBe(0);
    }
  });

  it('verify and fsck, which colour their verdict, list NO_COLOR and FORCE_COLOR', () => {
    for (const name of ['verify', 'fsck']) {
      const environment = section(commandHelp(commands[name]!), 'Environment').join('\n');
      expect(environment, name).toMatch(/^ {2}NO_COLOR .*FORCE_COLOR/m);
      // It said "(any value)": an empty NO_COLOR colours (io.ts `colours`, as no-color.org and the README say).
      expect(environment, name).toMatch(/^ {2}NO_COLOR +\(non-empty\) no colour;/m);
    }
  });

  // checkpoint's help said a witness that does not answer in 5 s is left out, but the note waits for one round of
  // requests, a witness asked twice (a 409 names its size): 2 N + 1 s (cosignWaitMs), then the close may wait N more.
  it("checkpoint --help states the wait for witnesses as the pool bounds it (cosignWaitMs and the close's wait)", () => {
    const help = commandHelp(commands.checkpoint!).replace(/\n {2,}/g, ' ');
    for (const n of [1, 200, 5000]) expect(cosignWaitMs(n)).toBe(2 * n + 1000);
    expect(help).toContain(`printed within 2 × 5 s + 1 s = ${cosignWaitMs(5000) / 1000} s (2 N + 1 s)`);
    // The CLI's close waits as long as a request may take (closeWaitMs = timeoutMs: io.ts witnessingFromEnv).
    expect(witnessingFromEnv({ HANDOFF_LEDGER_WITNESSES: 'http://w', HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '7' })).toEqual(
      {
        witnesses: { witnesses: ['http://w'], timeoutMs: 7, closeWaitMs: 7 },
      },
    );
    expect(help).toContain(`more: ${(cosignWaitMs(5000) + 5000) / 1000} s (3 N + 1 s) in all`);
    expect(help).not.toMatch(/not answer in 5 s .* is left out/);
  });

  it.each(['publish', 'checkpoint'])(
    '%s lists the witness variables in Environment, between Options and Exit codes',
    (name) => {
      const help = commandHelp(commands[name]!);
      const environment = section(help, 'Environment').join('\n');
      expect(environment).toMatch(/^ {2}HANDOFF_LEDGER_WITNESSES /m);
      expect(environment).toMatch(/^ {2}HANDOFF_LEDGER_WITNESS_TIMEOUT_MS=N /m);
      expect(help.indexOf('\nOptions:\n')).toBeLessThan(help.indexOf('\nEnvironment:\n'));
      expect(help.indexOf('\nEnvironment:\n')).toBeLessThan(help.indexOf('\nExit codes:\n'));
    },
  );
});

describe("publish help lists the scope as a manifest's scope", () => {
  // --run came first among publish's options, --principal and --session after the others: now principal, session,
  // run, one after the other, as the synopsis has them (and then the store's options, as for every command).
  it('--principal, --session, --run in that order, on adjacent lines', () => {
    const starts = commands.publish!.options.map((o) => /^--[a-z-]+/.exec(o)?.[0]);
    const at = starts.indexOf('--principal');
    expect(starts.slice(at, at + 4)).toEqual(['--principal', '--session', '--run', '--root']);
    expect(commands.publish!.synopsis).toMatch(/--principal P --session S --run R /);
  });
});

describe('every command line the documents show uses options its command accepts', () => {
  // The documents' command lines are read by operators and auditors, who type them: an option renamed or removed in
  // the CLI must not live on in a shell block or an inline `handoff-ledger …` of README.md, docs/, SECURITY.md,
  // web/README.md or src/README.md. (CHANGELOG.md tells history: an option it names may be gone since.)
  const documents = ['README.md', 'SECURITY.md', 'web/README.md', 'src/README.md', 'benchmarks/README.md'].concat(
    ['ARCHITECTURE.md', 'AUDIT.md', 'DESIGN.md'].map((f) => `docs/${f}`),
  );
  const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
  /** The command lines of a document: each shell block's lines, and each inline code span that runs the command. */
  const commandLines = (text: string): string[] => {
    const blocks = [...text.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```/gm)].flatMap((m) => m[1]!.split('\n'));
    const prose = text.replace(/^```[\s\S]*?^```/gm, '');
    // Code spans are the odd pieces between backticks (per paragraph: an unpaired one ends at the blank line).
    const spans = prose
      .split(/\n\s*\n/)
      .flatMap((paragraph) => paragraph.split('`').filter((_, i) => i % 2 === 1))
      .filter((span) => /^(?:npx )?handoff-ledger /.test(span));
    return [...blocks, ...spans];
  };
  /**
   * Each invocation in `line`: the words after `handoff-ledger` up to the end of its command (comment, pipe, `;`, …).
   * A line of one invocation whose comment lists options in brackets (`# [--json] [--since OLD.note]`) lists that
   * command's: they are its words too.
   */
  const invocations = (line: string): string[][] => {
    const found = [...line.matchAll(/(?:^|[\s"'(`$])handoff-ledger((?: +[^\s;|&)#>"]+)+)/g)].map((m) =>
      m[1]!
        .trim()
        .split(/ +/)
        .map((w) => w.replace(/^[[(]+|[\]),.…]+$/g, '')),
    );
    const comment = line.split(/\s#\s/)[1];
    if (found.length === 1 && comment)
      found[0]!.push(...[...comment.matchAll(/\[(--[a-z][a-z0-9-]*)/g)].map((m) => m[1]!));
    return found;
  };
  const withSubcommand = new Set(['keys', 'witness', 'prove']);

  it('finds the command lines of the README and docs/AUDIT.md', () => {
    const found = documents.flatMap((f) => commandLines(read(f)).flatMap(invocations));
    expect(found.filter((w) => w[0] === 'verify').length).toBeGreaterThan(3);
    expect(found.filter((w) => w[0] === 'keys' && w[1] === 'export').length).toBeGreaterThan(2);
  });

  it.each(documents)('%s', async (file) => {
    const accepted = new Map<string, Set<string>>();
    const wrong: string[] = [];
    for (const words of commandLines(read(file)).flatMap(invocations)) {
      const [name, sub] = words;
      // `handoff-ledger <command>`, `--help`, `help publish`: a placeholder or the help, no command line.
      if (!name || !/^[a-z]/.test(name) || name === 'help') continue;
      if (!Object.hasOwn(commands, name)) {
        wrong.push(`${words.join(' ')}: no command ${name}`);
        continue;
      }
      const prefix = withSubcommand.has(name) && sub && /^[a-z]/.test(sub) ? [name, sub] : [name];
      const key = prefix.join(' ');
      if (!accepted.has(key)) {
        seen.length = 0;
        expect(await main([...prefix, '--not-an-option'], captureIo().io), key).toBe(2);
        accepted.set(key, new Set(seen.flatMap((o) => Object.keys(o))));
      }
      for (const w of words) {
        const option = /^--([a-z][a-z0-9-]*)/.exec(w)?.[1];
        if (option && !accepted.get(key)!.has(option)) wrong.push(`${words.join(' ')}: ${key} takes no --${option}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
