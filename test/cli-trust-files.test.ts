/**
 * The auditor's trust files (`verify --trust` / `audit-ui --trust`, once per file): several hosts' exports are merged
 * into one trust store, which audit-ui serves to the page as JSON; one file is taken as it is.
 */
import { generateJwk } from '../src/keys/local-signer.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { readTrustFiles } from '../src/cli/trust-file.js';
import { parseTrustStore } from '../manifests/format/trust.js';
import { tempDir } from './support/tmp.js';

const key = (host: string, keyId: string, publicKey: string, extra: Record<string, string> = {}) => ({
  host,
  keyId,
  publicKey,
  notBefore: '2026-01-01T00:00:00.000Z',
  ...extra,
});
// Two real Ed25519 public keys (base64url); the key ids are what the files say, not derived here.
const publicKeyOf = () => generateJwk().x;
const PK_A = publicKeyOf();
const PK_B = publicKeyOf();

it('merges the files into their union (one text the page parses), the narrowest window of a key listed twice', async () => {
  const dir = tempDir();
  const a = join(dir, 'a.json');
  const b = join(dir, 'b.json');
  const aText = `${JSON.stringify({ version: 1, keys: [key('host-a', 'ed25519:aa', PK_A)] })}\n`;
  writeFileSync(a, aText);
  writeFileSync(
    b,
    JSON.stringify({
      version: 1,
      keys: [
        key('host-b', 'ed25519:bb', PK_B),
        key('host-a', 'ed25519:aa', PK_A, { revokedAt: '2026-06-01T00:00:00.000Z' }),
      ],
    }),
  );
  // One file: its own text, as before.
  expect((await readTrustFiles([a])).text).toBe(aText);
  const merged = await readTrustFiles([a, b]);
  const parsed = parseTrustStore(merged.text);
  expect(parsed).toEqual(merged.trust);
  expect(parsed.keys.map((k) => [k.host, k.keyId, k.revokedAt])).toEqual([
    ['host-a', 'ed25519:aa', '2026-06-01T00:00:00.000Z'],
    ['host-b', 'ed25519:bb', undefined],
  ]);
});

it('refuses one key id listed with two public keys, naming the files (TRUST_INVALID)', async () => {
  const dir = tempDir();
  const a = join(dir, 'a.json');
  const forged = join(dir, 'forged.json');
  writeFileSync(a, JSON.stringify({ version: 1, keys: [key('host-a', 'ed25519:aa', PK_A)] }));
  writeFileSync(forged, JSON.stringify({ version: 1, keys: [key('host-a', 'ed25519:aa', PK_B)] }));
  await expect(readTrustFiles([a, forged])).rejects.toMatchObject({
    code: 'TRUST_INVALID',
    message: expect.stringMatching(
      /^trust files ".*a\.json", ".*forged\.json": key "ed25519:aa" of host host-a is listed with two public keys/,
    ),
  });
});
