/**
 * README, "CLI": with `--json` (given before any `--`) a refusal, a usage error and an I/O error are printed as
 * `{"error":{"code","message"}}` on stdout too. Each command's refusal is run as the built CLI runs it (dist), with
 * and without `--json`: the same exit code, the same code and words on stderr, and with --json that object on stdout.
 * The servers `audit-ui` and `witness serve` take no --json: it is their refusal (USAGE, exit 2), as JSON, before
 * they read a file or listen on a port.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commands } from '../src/cli/commands.js';
import { tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

function cli(args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    input: '',
    encoding: 'utf8',
    // Nothing from the environment of the run: the lines below say all.
    env: { PATH: process.env.PATH ?? '' },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A port something already listens on: an unusable `--port` / `--listen`. */
let busy: Server;
let busyPort: number;
beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
  busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  busyPort = (busy.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => busy.close(() => resolve())));

/** Per command, refusals of each kind it has: a usage error, a refusal (exit 1), a file it cannot read. */
const refusals: Record<string, (dir: string) => string[][]> = {
  init: (d) => [
    ['init', '--root', join(d, 's'), '--host', 'not a host'],
    ['init', '--root', ''],
  ],
  publish: (d) => [
    ['publish', '--root', join(d, 's'), '--principal', 'a', '--session', 's', '--run', 'r', join(d, 'missing.json')],
    ['publish', '--root', join(d, 's'), '--principal', 'a', '--session', 's'],
  ],
  resume: (d) => [['resume', '--root', join(d, 's'), '--host', 'h', '--principal', 'a', '--session', 's']],
  history: (d) => [['history', '--root', join(d, 's'), '--principal', 'a']],
  grant: (d) => [['grant', '--root', join(d, 's'), '--principal', 'a', '--session', '*']],
  revoke: (d) => [['revoke', '--root', join(d, 's'), '--principal', 'a']],
  grants: (d) => [['grants', '--root', join(d, 's'), '--host', 'h']],
  keys: (d) => [
    ['keys', 'bogus'],
    ['keys', 'revoke', '--root', join(d, 's')],
  ],
  export: (d) => [['export', '--root', join(d, 's'), '--host', 'h', '--out', d]],
  verify: (d) => [['verify', join(d, 'missing'), '--trust', join(d, 'missing.json')], ['verify']],
  fsck: (d) => [['fsck', '--root', join(d, 's'), '--host', 'h']],
  checkpoint: (d) => [['checkpoint', '--root', join(d, 's'), '--witness', 'not a url']],
  prove: (d) => [['prove', 'consistency', '1', '2', '--root', join(d, 's')]],
  gc: (d) => [['gc', '--root', join(d, 's'), '--grace', 'soon']],
  witness: (d) => [
    ['witness', 'keygen', '--name', 'not a name', '--out', join(d, 'w.key')],
    ['witness', 'keygen', '--name', 'witness.example/w', '--out', join(d, 'missing', 'w.key')],
  ],
  demo: (d) => [['demo', '--root', join(d, 'demo'), '--bogus']],
  // Not a command of the table: `help`'s own refusal.
  help: () => [['help', 'bogus'], ['bogus']],
};

describe('a refusal with --json', () => {
  it('is listed for every command but the servers', () => {
    expect(Object.keys(refusals).sort()).toEqual(
      [...Object.keys(commands).filter((c) => c !== 'audit-ui'), 'help'].sort(),
    );
  });

  for (const [name, lines] of Object.entries(refusals))
    it(`${name}: the same refusal and exit code as without it, and the error object on stdout`, () => {
      const dir = tempDir();
      writeFileSync(join(dir, 'summary.json'), '{}');
      for (const line of lines(dir)) {
        const shown = line.join(' ');
        const plain = cli(line);
        expect(plain.code, `${shown}: ${plain.stderr}`).not.toBe(0);
        expect(plain.stdout, shown).toBe('');
        const first = /^handoff-ledger: ([A-Z_]+): (.*)$/m.exec(plain.stderr);
        expect(first, `${shown}: ${plain.stderr}`).not.toBeNull();
        const json = cli([...line, '--json']);
        expect(json.code, `${shown} --json: ${json.stderr}`).toBe(plain.code);
        expect(json.stderr, shown).toBe(plain.stderr);
        expect(JSON.parse(json.stdout), shown).toEqual({ error: { code: first![1], message: first![2] } });
      }
    }, 120_000);
});

describe('the servers with --json', () => {
  const unknownJson = (stdout: string) => JSON.parse(stdout) as { error: { code: string; message: string } };

  it('audit-ui: --json is refused as USAGE, as JSON, exit 2, before it reads the bundle or listens', () => {
    const dir = tempDir();
    for (const line of [
      ['audit-ui', '--json'],
      ['audit-ui', '--port', String(busyPort), '--json'],
      ['audit-ui', '--json', join(dir, 'missing-bundle')],
      ['audit-ui', '--port', '65536', '--json'],
    ]) {
      const r = cli(line);
      expect(r.code, `${line.join(' ')}: ${r.stderr}`).toBe(2);
      const { error } = unknownJson(r.stdout);
      expect(error.code).toBe('USAGE');
      expect(error.message.startsWith('unknown option "--json"')).toBe(true);
      expect(r.stderr.split('\n')[0]).toBe(`handoff-ledger: USAGE: ${error.message}`);
    }
    // Without it, the port in use is the refusal (USAGE, exit 2), on stderr only.
    const plain = cli(['audit-ui', '--port', String(busyPort)]);
    expect(plain).toMatchObject({ code: 2, stdout: '' });
  }, 120_000);

  it('witness serve: --json is refused as USAGE, as JSON, exit 2, before it reads its files or listens', () => {
    const dir = tempDir();
    const state = join(dir, 'state');
    const files = ['--key', join(dir, 'missing.key'), '--logs', join(dir, 'missing-logs.json'), '--state', state];
    for (const line of [
      ['witness', 'serve', '--json'],
      ['witness', 'serve', '--listen', `127.0.0.1:${busyPort}`, ...files, '--json'],
      ['witness', 'serve', '--json', '--listen', '127.0.0.1:0', ...files],
      ['witness', 'serve', '--listen', 'nowhere', ...files, '--json'],
    ]) {
      const r = cli(line);
      expect(r.code, `${line.join(' ')}: ${r.stderr}`).toBe(2);
      expect(unknownJson(r.stdout)).toEqual({ error: { code: 'USAGE', message: 'unknown option "--json"' } });
      expect(r.stderr.split('\n')[0]).toBe('handoff-ledger: USAGE: unknown option "--json"');
      expect(existsSync(state)).toBe(false);
    }
  }, 120_000);
});
