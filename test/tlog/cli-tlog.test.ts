import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { openNote, parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { checkpointVerifiers, parseTrustStore } from '../../manifests/format/trust.js';
import { decodeBase64, encodeBase64 } from '../../manifests/encoding/base64.js';
import { leafHash, verifyConsistency, verifyInclusion } from '../../manifests/tlog/merkle.js';
import { sampleSummary, tempDir } from '../support/tmp.js';

const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

function cli(args: string[], env: Record<string, string>, input = '') {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    input,
    encoding: 'utf8',
    env: { ...process.env, HANDOFF_LEDGER_HOST: 'cli-host', ...env },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

const b64 = (s: string) => decodeBase64(s)!;

describe('handoff-ledger checkpoint, prove, keys vkey', () => {
  it('prints a checkpoint note, proofs as JSON and the verifier key, all checkable with the trust file alone', () => {
    const env = { HANDOFF_LEDGER_ROOT: join(tempDir(), 'store'), HANDOFF_LEDGER_ORIGIN: 'example.com/cli-log' };
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const s = ['--principal', 'alice', '--session', `s${i % 2}`, '--run', 'r1', '--json'];
      const r = cli(['publish', ...s], env, JSON.stringify(sampleSummary(i)));
      expect(r.code, r.stderr).toBe(0);
      ids.push(JSON.parse(r.stdout).id);
    }
    const cp = cli(['checkpoint'], env);
    expect(cp.code, cp.stderr).toBe(0);
    const trustFile = join(tempDir(), 'trust.json');
    expect(cli(['keys', 'export', '--out', trustFile], env).code).toBe(0);
    const trust = parseTrustStore(readFileSync(trustFile, 'utf8'));
    const vkey = cli(['keys', 'vkey'], env).stdout.trim();
    expect(trust.checkpointKeys!.map((k) => k.vkey)).toEqual([vkey]);
    const checkpoint = parseCheckpoint(openNote(cp.stdout, checkpointVerifiers(trust)).text);
    expect(openNote(cp.stdout, [parseVerifierKey(vkey)]).sigs[0]!.name).toBe('example.com/cli-log');
    expect(checkpoint.size).toBe(5);

    const inc = cli(['prove', 'inclusion', ids[3]!], env);
    expect(inc.code, inc.stderr).toBe(0);
    const p = JSON.parse(inc.stdout);
    expect(p).toMatchObject({ leafIndex: 3, treeSize: 5, root: encodeBase64(checkpoint.root) });
    expect(verifyInclusion(3, 5, leafHash(b64(p.leaf)), p.proof.map(b64), checkpoint.root).ok).toBe(true);

    const atThree = JSON.parse(cli(['prove', 'inclusion', ids[1]!, '--size', '3'], env).stdout);
    const cons = JSON.parse(cli(['prove', 'consistency', '3'], env).stdout);
    expect(cons).toMatchObject({ oldSize: 3, treeSize: 5, oldRoot: atThree.root, root: p.root });
    expect(verifyConsistency(3, 5, cons.proof.map(b64), b64(cons.oldRoot), b64(cons.root)).ok).toBe(true);

    // --size: a proof between two earlier trees, the roots those sizes' inclusion proofs name.
    const atTwo = JSON.parse(cli(['prove', 'inclusion', ids[1]!, '--size', '2'], env).stdout);
    const atFour = JSON.parse(cli(['prove', 'inclusion', ids[3]!, '--size', '4'], env).stdout);
    const between = cli(['prove', 'consistency', '2', '--size', '4'], env);
    expect(between.code, between.stderr).toBe(0);
    const c24 = JSON.parse(between.stdout);
    expect(c24).toMatchObject({ oldSize: 2, treeSize: 4, oldRoot: atTwo.root, root: atFour.root });
    expect(c24.root).not.toBe(p.root);
    expect(verifyConsistency(2, 4, c24.proof.map(b64), b64(c24.oldRoot), b64(c24.root)).ok).toBe(true);
    expect(JSON.parse(cli(['prove', 'consistency', '4', '--size', '4'], env).stdout)).toMatchObject({
      oldSize: 4,
      treeSize: 4,
      oldRoot: atFour.root,
      root: atFour.root,
      proof: [],
    });
    // An old size past --size, or a --size past the log: INVALID_ARGUMENT, exit 1; a --size that is no size: exit 2.
    for (const args of [
      ['4', '--size', '3'],
      ['2', '--size', '6'],
    ]) {
      const r = cli(['prove', 'consistency', ...args], env);
      expect([r.code, r.stdout], args.join(' ')).toEqual([1, '']);
      expect(r.stderr, args.join(' ')).toMatch(/^handoff-ledger: INVALID_ARGUMENT: /);
    }
    const notASize = cli(['prove', 'consistency', '2', '--size', '0x4'], env);
    expect([notASize.code, notASize.stderr]).toEqual([
      2,
      `handoff-ledger: USAGE: --size must be a whole number of entries from 0 to ${Number.MAX_SAFE_INTEGER}, not "0x4"\n`,
    ]);
  });

  it('exits 2 on usage errors and 1 with the code for a malformed id or a proof that cannot exist', () => {
    const env = { HANDOFF_LEDGER_ROOT: join(tempDir(), 'store') };
    expect(cli(['init'], env).code).toBe(0);
    // A malformed manifest id is the ledger's INVALID_ID, as every malformed id of a command on a store (publish's,
    // export's filters), judged before the store is opened (none here: not KEY_INVALID); escaped like all data.
    for (const [id, shown] of [
      ['not-an-id', '"not-an-id"'],
      [`BLAKE3:${'A'.repeat(64)}`, `"BLAKE3:${'A'.repeat(64)}"`],
      ['blake3:\u001b[31m', '"blake3:\\u001b[31m"'],
    ])
      for (const root of [env.HANDOFF_LEDGER_ROOT, join(tempDir(), 'no-store')]) {
        const r = cli(['prove', 'inclusion', id!, '--root', root], env);
        expect(r, id).toMatchObject({
          code: 1,
          stdout: '',
          stderr: `handoff-ledger: INVALID_ID: a manifest id is blake3:<64 lowercase hex>, not ${shown}\n`,
        });
      }
    const json = cli(['prove', 'inclusion', 'not-an-id', '--json'], env);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'INVALID_ID' } });
    expect(cli(['prove', 'inclusion', 'not-an-id', '--size', 'x'], env).code).toBe(2);
    expect(cli(['prove', 'consistency', '-1'], env).code).toBe(2);
    expect(cli(['prove', 'sideways', '1'], env).code).toBe(2);
    const missing = cli(['prove', 'inclusion', `blake3:${'a'.repeat(64)}`], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('NOT_FOUND');
    const tooBig = cli(['prove', 'consistency', '4'], env);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toContain('INVALID_ARGUMENT');
  });
});

describe('--origin / HANDOFF_LEDGER_ORIGIN on an existing store', () => {
  it("naming another origin than the store's is INVALID_ARGUMENT, exit 1, for every command, and writes nothing", () => {
    const env = { HANDOFF_LEDGER_ROOT: join(tempDir(), 'store') };
    const made = cli(['init', '--origin', 'example.com/first'], env);
    expect(made.code, made.stderr).toBe(0);
    const refusal =
      "handoff-ledger: INVALID_ARGUMENT: this store's checkpoint origin is example.com/first, not example.com/other\n";
    const s = ['--principal', 'alice', '--session', 's1'];
    for (const args of [
      ['checkpoint', '--origin', 'example.com/other'],
      ['history', ...s, '--origin=example.com/other'],
    ]) {
      const r = cli(args, env);
      expect([r.code, r.stderr, r.stdout], args.join(' ')).toEqual([1, refusal, '']);
    }
    // The variable, as an exported HANDOFF_LEDGER_ORIGIN of another store would be: a publish is refused, nothing written.
    const other = { ...env, HANDOFF_LEDGER_ORIGIN: 'example.com/other' };
    for (const args of [['publish', ...s, '--run', 'r1'], ['fsck'], ['keys', 'vkey']]) {
      const r = cli(args, other, JSON.stringify(sampleSummary(1)));
      expect([r.code, r.stderr, r.stdout], args.join(' ')).toEqual([1, refusal, '']);
    }
    const json = cli(['checkpoint', '--json'], other);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      error: {
        code: 'INVALID_ARGUMENT',
        message: "this store's checkpoint origin is example.com/first, not example.com/other",
      },
    });
    // Its own name is accepted, and the store is as it was: an empty log under its first name.
    const cp = cli(['checkpoint'], { ...env, HANDOFF_LEDGER_ORIGIN: 'example.com/first' });
    expect(cp.code, cp.stderr).toBe(0);
    expect(parseCheckpoint(cp.stdout.slice(0, cp.stdout.indexOf('\n\n') + 1))).toMatchObject({
      origin: 'example.com/first',
      size: 0,
    });
  });
});

describe('the origin of a store made without --origin or HANDOFF_LEDGER_ORIGIN', () => {
  // The README's default: `handoff-ledger.local/<random>`, a name of its own per store (two stores' checkpoints never
  // share a name a witness keeps one view under), which every later opener signs under.
  it('is handoff-ledger.local/<32 random hex digits>, another per store, kept by every later opener', () => {
    const originOf = (env: Record<string, string>) => {
      const cp = cli(['checkpoint'], env);
      expect(cp.code, cp.stderr).toBe(0);
      return parseCheckpoint(cp.stdout.slice(0, cp.stdout.indexOf('\n\n') + 1)).origin;
    };
    const names = [1, 2].map((i) => {
      const env = { HANDOFF_LEDGER_ROOT: join(tempDir(), `store-${i}`), HANDOFF_LEDGER_ORIGIN: '' };
      const made = cli(['init'], env);
      expect(made.code, made.stderr).toBe(0);
      const origin = originOf(env);
      expect(origin).toMatch(/^handoff-ledger\.local\/[0-9a-f]{32}$/);
      // A later open with no name signs under the stored one; so does one that gives it.
      const published = cli(
        ['publish', '--principal', 'a', '--session', 's', '--run', 'r'],
        env,
        JSON.stringify(sampleSummary(1)),
      );
      expect(published.code, published.stderr).toBe(0);
      expect(originOf(env)).toBe(origin);
      expect(cli(['keys', 'vkey', '--origin', origin], env).stdout).toMatch(new RegExp(`^${origin}\\+[0-9a-f]{8}\\+`));
      return origin;
    });
    expect(names[0]).not.toBe(names[1]);
  });
});
