/**
 * Hosts sharing a PostgreSQL store, through the CLI: each trusts the others' keys with HANDOFF_LEDGER_TRUST (a trust
 * file: their `keys export`), as the library's `trust` option does. Without it, a host reading a session another host
 * published in is KEY_UNTRUSTED; a trust file that cannot be read or parsed is TRUST_INVALID (exit 2) before the
 * store is opened.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, expect, it } from 'vitest';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

describePostgres(
  'HANDOFF_LEDGER_TRUST: the other hosts of a shared PostgreSQL store',
  (pg) => {
    const cli = (args: string[], env: Record<string, string> = {}, input = '') => {
      const r = spawnSync(process.execPath, [CLI, ...args], {
        input,
        encoding: 'utf8',
        env: { ...process.env, HANDOFF_LEDGER_POSTGRES: pg.connectionString, HANDOFF_LEDGER_TRUST: '', ...env },
        timeout: 60_000,
      });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };

    it('lets a host read and check what another host published; refuses a trust file it cannot use', () => {
      const base = tempDir();
      const [rootA, rootB] = [join(base, 'a'), join(base, 'b')];
      const a = ['--root', rootA, '--host', 'host-a'];
      const b = ['--root', rootB, '--host', 'host-b'];
      const scope = ['--principal', 'alice', '--session', 's1'];
      const summary = JSON.stringify(sampleSummary('shared'));
      expect(cli(['init', ...a]).code).toBe(0);
      expect(cli(['init', ...b]).code).toBe(0);
      const published = cli(['publish', ...a, ...scope, '--run', 'r1'], {}, summary);
      expect(published.code, published.stderr).toBe(0);
      // host-b's own trust.json does not list host-a's key.
      const untrusted = cli(['history', ...b, ...scope]);
      expect(untrusted.code, untrusted.stderr).toBe(1);
      // Where, and what to do (it said only `key "…" of host "host-a" is not trusted`); resume says so too.
      const todo = `: trust its host's keys (the \`trust\` option, HANDOFF_LEDGER_TRUST: that host's \`keys export\`)\n`;
      expect(untrusted.stderr).toMatch(
        /^handoff-ledger: KEY_UNTRUSTED: session s1 seq 0: key "[^"]+" of host "host-a" is not trusted: /,
      );
      expect(untrusted.stderr.endsWith(todo), untrusted.stderr).toBe(true);
      const unresumed = cli(['resume', ...b, ...scope]);
      expect(unresumed.code, unresumed.stderr).toBe(1);
      expect(unresumed.stderr).toMatch(
        /^handoff-ledger: KEY_UNTRUSTED: session s1 seq 0: key "[^"]+" of host "host-a" is not trusted: /,
      );
      expect(unresumed.stderr.endsWith(todo), unresumed.stderr).toBe(true);
      // host-a's keys, exported, trusted by host-b.
      const keysOfA = join(base, 'host-a.trust.json');
      const wrote = cli(['keys', 'export', ...a, '--out', keysOfA]);
      expect(wrote.code, wrote.stderr).toBe(0);
      // On a shared store the auditors need every host's keys, as export's hint says.
      expect(wrote.stdout).toMatch(
        /; give this file to auditors out of band, with every other host's keys export \(verify takes one --trust per file\)\n$/,
      );
      const trusted = { HANDOFF_LEDGER_TRUST: keysOfA };
      const history = cli(['history', ...b, ...scope, '--json'], trusted);
      expect(history.code, history.stderr).toBe(0);
      expect(JSON.parse(history.stdout)).toHaveLength(1);
      const resumed = cli(['resume', ...b, ...scope, '--json'], trusted);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(JSON.parse(resumed.stdout).summary.task).toBe(sampleSummary('shared').task);
      // Without host-a's keys, fsck on host-b finds its manifests untrusted and says what to do, once.
      const untrustedFsck = cli(['fsck', ...b]);
      expect(untrustedFsck.code, untrustedFsck.stdout + untrustedFsck.stderr).toBe(1);
      expect(untrustedFsck.stdout).toMatch(/^KEY_UNTRUSTED\ts1\t0\t/m);
      expect(
        untrustedFsck.stdout.split('\n').filter((l) => l.includes('(HANDOFF_LEDGER_TRUST)')),
        untrustedFsck.stdout,
      ).toEqual([
        "hint: a key of another host (KEY_UNTRUSTED) is trusted once that host's keys export is given (HANDOFF_LEDGER_TRUST)",
      ]);
      const fsck = cli(['fsck', ...b], trusted);
      expect(fsck.code, fsck.stdout + fsck.stderr).toBe(0);
      // host-b publishes on: host-a, trusting host-b's keys, reads both.
      expect(cli(['publish', ...b, ...scope, '--run', 'r2'], trusted, summary).code).toBe(0);
      const keysOfB = join(base, 'host-b.trust.json');
      expect(cli(['keys', 'export', ...b, '--out', keysOfB]).code).toBe(0);
      expect(
        JSON.parse(cli(['history', ...a, ...scope, '--json'], { HANDOFF_LEDGER_TRUST: keysOfB }).stdout),
      ).toHaveLength(2);
      // keys export and keys list give this store's own keys only, whatever HANDOFF_LEDGER_TRUST names (the old code
      // exported host-a's keys back from host-b), and a broken file there is not in their way.
      const exported = cli(['keys', 'export', ...b], { HANDOFF_LEDGER_TRUST: keysOfA });
      expect(exported.code, exported.stderr).toBe(0);
      expect(new Set(JSON.parse(exported.stdout).keys.map((k: { host: string }) => k.host))).toEqual(
        new Set(['host-b']),
      );
      const listed = cli(['keys', 'list', ...b], { HANDOFF_LEDGER_TRUST: join(base, 'missing.json') });
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).not.toContain('host-a');
      // A trust file that cannot be used: TRUST_INVALID, exit 2, before the store is opened (no store made).
      const bad = join(base, 'bad.json');
      writeFileSync(bad, '{"version":1,"keys":"none"}');
      mkdirSync(join(base, 'dir'));
      for (const path of [bad, join(base, 'missing.json'), join(base, 'dir')]) {
        const fresh = join(base, `never-${path.length}`);
        const r = cli(['history', '--root', fresh, '--host', 'host-b', ...scope], { HANDOFF_LEDGER_TRUST: path });
        expect(r.code, path).toBe(2);
        expect(r.stderr).toMatch(/^handoff-ledger: TRUST_INVALID: HANDOFF_LEDGER_TRUST: (cannot read )?trust file /);
        expect(existsSync(fresh)).toBe(false);
      }
    });

    it("an auditor verifies a shared store's bundle with each host's trust file: --trust once per file, merged", () => {
      const base = tempDir();
      const [rootA, rootB] = [join(base, 'a'), join(base, 'b')];
      const a = ['--root', rootA, '--host', 'host-a'];
      const b = ['--root', rootB, '--host', 'host-b'];
      const scope = ['--principal', 'alice', '--session', 's2'];
      const summary = JSON.stringify(sampleSummary('audited'));
      expect(cli(['init', ...a]).code).toBe(0);
      expect(cli(['init', ...b]).code).toBe(0);
      const keysOfA = join(base, 'host-a.trust.json');
      const keysOfB = join(base, 'host-b.trust.json');
      expect(cli(['keys', 'export', ...a, '--out', keysOfA]).code).toBe(0);
      expect(cli(['keys', 'export', ...b, '--out', keysOfB]).code).toBe(0);
      expect(cli(['publish', ...a, ...scope, '--run', 'r1'], { HANDOFF_LEDGER_TRUST: keysOfB }, summary).code).toBe(0);
      expect(cli(['publish', ...b, ...scope, '--run', 'r2'], { HANDOFF_LEDGER_TRUST: keysOfA }, summary).code).toBe(0);
      const bundle = join(base, 'bundle');
      // By session: the database is this file's, and the test before this one left another session in it.
      const exported = cli(['export', ...a, '--session', 's2', '--out', bundle], { HANDOFF_LEDGER_TRUST: keysOfB });
      expect(exported.code, exported.stderr).toBe(0);
      // Its hint asks for every host's keys, not this host's alone (which it said: an auditor given only those gets
      // KEY_UNTRUSTED for the other hosts' manifests, below), and shows this host's own command.
      expect(exported.stdout.split('\n')[1]).toMatch(
        /^auditors also need every host's public keys \(each host's own keys export: verify takes one --trust per file\); this host's: handoff-ledger keys export --root .+ --host host-a$/,
      );
      // One host's file alone: the other host's manifest is not trusted.
      const one = cli(['verify', bundle, '--session', 's2', '--trust', keysOfA]);
      expect(one.code, one.stdout + one.stderr).toBe(1);
      expect(one.stdout).toContain('KEY_UNTRUSTED');
      // Both, each as its host exported it: one auditor's trust (it was `--trust given more than once`, USAGE).
      const both = cli(['verify', bundle, '--session', 's2', '--trust', keysOfA, '--trust', keysOfB]);
      expect(both.code, both.stdout + both.stderr).toBe(0);
      expect(both.stdout).toMatch(/verdict: OK — 2 manifests in 1 chain verified/);
      // The same file twice changes nothing; a key id listed with another public key in a second file is refused.
      expect(
        cli(['verify', bundle, '--session', 's2', '--trust', keysOfA, '--trust', keysOfB, '--trust', keysOfA]).code,
      ).toBe(0);
      const forged = JSON.parse(readFileSync(keysOfB, 'utf8')) as { keys: Array<{ host: string; publicKey: string }> };
      const ofA = JSON.parse(readFileSync(keysOfA, 'utf8')) as typeof forged;
      const conflicting = join(base, 'conflicting.json');
      writeFileSync(
        conflicting,
        JSON.stringify({ ...ofA, keys: ofA.keys.map((k) => ({ ...k, publicKey: forged.keys[0]!.publicKey })) }),
      );
      const refused = cli(['verify', bundle, '--session', 's2', '--trust', keysOfA, '--trust', conflicting]);
      expect(refused.code, refused.stdout + refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(/^handoff-ledger: TRUST_INVALID: trust files .* is listed with two public keys/);
    });
  },
  'hl_cli_trust',
);
