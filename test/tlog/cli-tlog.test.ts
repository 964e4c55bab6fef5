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
  });

  it('exits 2 on usage errors and 1 with the code for a malformed id or a proof that cannot exist', () => {
    const env = { HANDOFF_LEDGER_ROOT: join(tempDir(), 'store') };
    expect(cli(['init'], env).code).toBe(0);
    // A malformed manifest id is the ledger's INVALID_ID, as every malformed id of a command on a store (publish's,
    // export's filters), judged before the store is opened (none here: not KEY_INVALID); escaped like all data.
    for (const [id, shown] of [
      ['not-an-id', '"not-an-id"'],
      [`BLAKE3:${'A'.repeat(64)}`, `"BLAKE3:${'A'.repeat(64)}"`],
      ['blake3:\u001b[31m', '"blake3:\\\\u001b[31m"'],
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
