/**
 * An unknown field of a signed manifest (MANIFEST_INVALID) or of bundle.json (BUNDLE_INVALID) is named as the library's
 * refusals name one: quoted as a JSON string with what a terminal acts on as `\uXXXX`, a backslash and a quote
 * escaped. zod's own words (`Unrecognized key: "…"`) quoted the key raw: a key literally spelled `k\x1b` and a key
 * holding ESC printed alike once the CLI escaped the second (`"k\x1b"`), and a quote inside a key closed the quote.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run as verifyCli } from '../../src/cli/verify.js';
import { at, signPayload } from '../support/bundle-builder.js';
import { captureIo } from '../support/capture-io.js';
import { TAMPER_CASES, writeCase, type TamperCase } from '../support/tamper-cases.js';
import { tempDir } from '../support/tmp.js';

async function verify(dir: string, trust: string) {
  const c = captureIo();
  const code = await verifyCli([dir, '--trust', trust, '--workers', '0'], c.io);
  return { code, stdout: c.stdout(), stderr: c.stderr() };
}

describe('an unknown field from a bundle is quoted once, never in raw quotes', () => {
  it('MANIFEST_INVALID: a key spelled `k\\x1b`, one holding ESC and one with a quote print as three names', async () => {
    const keys = ['k\\x1b', 'k\u001b', "k\" (did you mean 'v'?)"];
    const c: TamperCase = {
      name: 'unknown-fields',
      expected: [],
      make: async (b) => {
        const s1 = b.chains.get('s1')!.built;
        const lines = [...b.lines];
        for (const key of keys) {
          const manifest = { ...s1[4]!.manifest, seq: 5, prev: s1[4]!.id, createdAt: at(5), [key]: 1 };
          lines.push((await signPayload(manifest, b.key)).line);
        }
        return { lines };
      },
    };
    const root = tempDir();
    const { dir, trustPath } = await writeCase(c, join(root, 'bundle'), join(root, 'trust.json'));
    const r = await verify(dir, trustPath);
    expect(r.code).toBe(1);
    expect(r.stdout.split('\n').filter((l) => l.startsWith('  MANIFEST_INVALID'))).toEqual([
      '  MANIFEST_INVALID (line 10): manifest schema: (root): unknown field "k\\\\x1b"',
      '  MANIFEST_INVALID (line 11): manifest schema: (root): unknown field "k\\u001b"',
      '  MANIFEST_INVALID (line 12): manifest schema: (root): unknown field "k\\" (did you mean \'v\'?)"',
    ]);
  });

  it('BUNDLE_INVALID: an unknown field of bundle.json quoted so, a key spelled \\u001b apart from ESC', async () => {
    const root = tempDir();
    const { dir, trustPath } = await writeCase(TAMPER_CASES[0]!, join(root, 'bundle'), join(root, 'trust.json'));
    const header = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8')) as Record<string, unknown>;
    for (const [key, named] of [
      ['x\\u001b"', '"x\\\\u001b\\""'],
      ['x\u001b"', '"x\\u001b\\""'],
    ]) {
      writeFileSync(join(dir, 'bundle.json'), JSON.stringify({ ...header, [key!]: 1 }));
      const r = await verify(dir, trustPath);
      expect(r).toMatchObject({
        code: 2,
        stdout: '',
        stderr: `handoff-ledger: BUNDLE_INVALID: bundle.json: (root): unknown field ${named}\n`,
      });
    }
  });
});
