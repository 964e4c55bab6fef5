/**
 * HANDOFF_LEDGER_TRUST names keys the store's ledger trusts beside trust.json: what they sign, resume returns as
 * verified and history and fsck accept. A file group or others may write is refused as trust.json is (exit 2,
 * TRUST_INVALID, before the store is opened): whoever could write it could list a key of their own for a host and
 * have manifests signed with it resumed. It was read as `verify --trust` reads an auditor's file, whatever its mode.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { generateJwk } from '../src/keys/local-signer.js';
import { captureIo } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';

it('refuses a HANDOFF_LEDGER_TRUST file group or others may write, and reads it once they may not', async () => {
  const root = join(tempDir(), 'store');
  expect(await main(['init', '--root', root, '--host', 'a'], captureIo().io)).toBe(0);
  // Another host's keys, as its `keys export` gives them.
  const file = join(tempDir(), 'others.json');
  const other = generateJwk();
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      keys: [{ host: 'b', keyId: other.kid, publicKey: other.x, notBefore: '2026-01-01T00:00:00.000Z' }],
    }),
  );
  const history = async (mode: number) => {
    chmodSync(file, mode);
    const c = captureIo({ env: { HANDOFF_LEDGER_TRUST: file } });
    const code = await main(['history', '--root', root, '--host', 'a', '--principal', 'p', '--session', 's'], c.io);
    return { code, stderr: c.stderr() };
  };
  for (const mode of [0o666, 0o664, 0o646, 0o620]) {
    const refused = await history(mode);
    expect(refused.code, mode.toString(8)).toBe(2);
    expect(refused.stderr).toContain(
      `handoff-ledger: TRUST_INVALID: HANDOFF_LEDGER_TRUST: trust file ${JSON.stringify(file)} is writable by group or others (mode ${mode.toString(8)})`,
    );
  }
  for (const mode of [0o644, 0o600, 0o400]) expect((await history(mode)).code, mode.toString(8)).toBe(0);
});
