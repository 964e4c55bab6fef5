/**
 * `verify`'s human report quotes the names it names from a bundle or the auditor's files (the checkpoint's origin, the
 * keys that signed it, a pinned witness's name, in its lines and its findings' messages) once: a JSON string with
 * what a terminal acts on as `\uXXXX`, printed as it is. Escaping the whole line again doubled every backslash of the
 * quotes (`"example.com/\\\"q…`) and showed a C1 or bidi character as `\x9b` / `\u{202e}` beside `\\u001b`; --json
 * carries the names raw (JSON is data).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as verifyCli } from '../../src/cli/verify.js';
import { captureIo } from '../support/capture-io.js';
import { cliVerify } from '../support/checkpoint-bundle.js';
import {
  COSIGNED_AT,
  HOSTILE_ORIGIN,
  HOSTILE_WITNESS_NAME,
  writeHostileNameFiles,
  type HostileNameFiles,
} from '../support/hostile-names.js';

/** What a terminal acts on, never printed raw: C0 but the newline, DEL, C1, line/paragraph separators, bidi. */
const ACTED_ON = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

let base: string;
let f: HostileNameFiles;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'hl-quoted-names-'));
  f = await writeHostileNameFiles(base);
}, 60_000);

afterAll(() => rmSync(base, { recursive: true, force: true }));

const witnessArgs = () => ['--witness-keys', f.witnessKeys, '--quorum', '1'];

async function human(dir: string): Promise<{ code: number; lines: string[]; stdout: string }> {
  const c = captureIo();
  const code = await verifyCli([dir, '--trust', f.trust, ...witnessArgs(), '--workers', '0'], c.io);
  return { code, lines: c.stdout().split('\n'), stdout: c.stdout() };
}

describe("verify's human report quotes a bundle's names escaped once", () => {
  it('the checkpoint and witnesses lines: origin, key and witness names as JSON strings, C1 and bidi as \\uXXXX', async () => {
    const json = await cliVerify(f.cosigned, f.trust, undefined, witnessArgs());
    expect(json.code, json.stderr).toBe(0);
    const cp = json.report!.checkpoint!;
    // --json: the names raw, as the bundle and the witness keys file hold them.
    expect(cp.origin).toBe(HOSTILE_ORIGIN);
    expect(cp.signedBy).toHaveLength(1);
    const keyHash = cp.signedBy[0]!.slice(HOSTILE_ORIGIN.length + 1);
    expect(cp.signedBy[0]).toBe(`${HOSTILE_ORIGIN}+${keyHash}`);
    expect(keyHash).toMatch(/^[0-9a-f]{8}$/);
    const witness = cp.witnesses!.signedBy[0]!.witness;
    const witnessHash = witness.slice(HOSTILE_WITNESS_NAME.length + 1);
    expect(witness).toBe(`${HOSTILE_WITNESS_NAME}+${witnessHash}`);

    const r = await human(f.cosigned);
    expect(r.code).toBe(0);
    expect(r.lines).toContain(
      String.raw`checkpoint "example.com/<b>\"q\\b\u009b\u202e" size 1 root ` +
        cp.root +
        String.raw`, signed by "example.com/<b>\"q\\b\u009b\u202e+` +
        `${keyHash}"`,
    );
    expect(r.lines).toContain(
      String.raw`witnesses: 1 of 1 pinned cosigned (quorum 1): "witness.example/\"w\\\u009b\u202e+` +
        `${witnessHash}" at ${new Date(COSIGNED_AT * 1000).toISOString()}`,
    );
    expect(r.stdout).not.toMatch(ACTED_ON);
  });

  it("a finding's message quoting a witness name: the CLI's line is the message --json gives, escaped once", async () => {
    const json = await cliVerify(f.pasted, f.trust, undefined, witnessArgs());
    const finding = json.report!.findings.find((x) => x.code === 'WITNESS_COSIGNATURE_INVALID')!;
    // The message quotes the name as a refusal quotes a value: what a terminal acts on as \uXXXX (JSON.stringify alone
    // left U+009B and U+202E raw in it).
    const message = String.raw`the cosignature by pinned witness "witness.example/\"w\\\u009b\u202e" does not verify: the Ed25519 signature does not verify`;
    expect(finding.message).toBe(message);
    const r = await human(f.pasted);
    expect(r.code).toBe(1);
    expect(r.lines).toContain(`  WITNESS_COSIGNATURE_INVALID: ${message}`);
    expect(r.stdout).not.toMatch(ACTED_ON);
  });
});
