/**
 * Files operators and auditors write by hand (a trust file, a witness's logs file) refuse an unknown field as a
 * summary does: the field (escaped) and the known one it is a slip of, with each refusal's code as before. A key
 * file's refusal names fields, never a value: no part of the private key is printed.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeBase64Url } from '../manifests/encoding/base64.js';
import { encodeVerifierKey } from '../manifests/crypto/note.js';
import { keyIdOf, parseTrustStore } from '../manifests/format/trust.js';
import { readTrustFile } from '../src/cli/trust-file.js';
import { generateJwk, loadKeyFile } from '../src/keys/local-signer.js';
import { loadWitnessKeyFile } from '../src/witness/key.js';
import { parseWitnessLogs } from '../src/witness/logs.js';
import { tempDir } from './support/tmp.js';
import { refusal } from './support/settled.js';

const publicKey = decodeBase64Url(generateJwk().x)!;
const trustedKey = {
  host: 'h1',
  keyId: keyIdOf(publicKey),
  publicKey: Buffer.from(publicKey).toString('base64url'),
  notBefore: '2026-01-01T00:00:00.000Z',
};

describe('a hand-written file names the known field an unknown one is close to', () => {
  it('a trust store (trust.json, --trust, HANDOFF_LEDGER_TRUST): TRUST_INVALID naming the near field', async () => {
    const misspelt = { version: 1, keys: [{ ...trustedKey, notafter: '2027-01-01T00:00:00.000Z' }] };
    const err = await refusal(() => parseTrustStore(JSON.stringify(misspelt)));
    expect(err).toMatchObject({ code: 'TRUST_INVALID' });
    expect(err.message).toBe(`trust store is malformed: keys.0: unknown field "notafter" (did you mean 'notAfter'?)`);
    const top = await refusal(() => parseTrustStore({ version: 1, keys: [], checkpointkeys: [] }));
    expect(top.message).toBe(
      `trust store is malformed: (root): unknown field "checkpointkeys" (did you mean 'checkpointKeys'?)`,
    );
    // Near nothing: named, no hint; a control character in it escaped.
    const far = await refusal(() => parseTrustStore({ version: 1, keys: [], '\u001b[2Jcomment': 'x' }));
    expect(far).toMatchObject({ code: 'TRUST_INVALID' });
    expect(far.message).toBe('trust store is malformed: (root): unknown field "\\u001b[2Jcomment"');

    // Read as the CLI reads `--trust` and HANDOFF_LEDGER_TRUST: the same words, after the file's path.
    const path = join(tempDir(), 'trust.json');
    writeFileSync(path, JSON.stringify(misspelt));
    const file = await refusal(() => readTrustFile(path));
    expect(file).toMatchObject({ code: 'TRUST_INVALID' });
    expect(file.message).toBe(
      `trust file "${path}": trust store is malformed: keys.0: unknown field "notafter" (did you mean 'notAfter'?)`,
    );
  });

  it("a witness's logs file: INVALID_ARGUMENT naming the near field", async () => {
    const origin = 'example.com/log';
    const keys = [encodeVerifierKey(origin, publicKey)];
    const nested = await refusal(() => parseWitnessLogs(JSON.stringify({ logs: [{ origin, keys, orign: origin }] })));
    expect(nested).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(nested.message).toBe(`the logs file: logs.0: unknown field "orign" (did you mean 'origin'?)`);
    const far = await refusal(() => parseWitnessLogs(JSON.stringify({ logs: [], witness: 'w1' })));
    expect(far).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(far.message).toBe('the logs file: (root): unknown field "witness"');
  });

  it("a key file's refusal prints no part of its private key", async () => {
    const dir = tempDir();
    const { kty, crv, x, d } = generateJwk();
    const secretParts = (message: string) =>
      Array.from({ length: d.length - 5 }, (_, i) => d.slice(i, i + 6)).filter((part) => message.includes(part));
    const cases: Record<string, unknown>[] = [
      { kty, crv, x, D: d }, // the secret under a misspelt name
      { kty, crv, x, d: `${d}A` }, // not 32 bytes
      { kty, crv, x, d: [d] }, // not a string
      { kty, crv: 'X25519', x, d }, // another curve
      { kty, crv, x: d, d }, // the secret as the public half
    ];
    for (const [i, jwk] of cases.entries()) {
      const host = join(dir, `host-${i}.key`);
      writeFileSync(host, JSON.stringify(jwk));
      chmodSync(host, 0o600);
      const hostErr = await refusal(() => loadKeyFile(host));
      expect(hostErr.code, JSON.stringify(Object.keys(jwk))).toBe('KEY_INVALID');
      expect(secretParts(hostErr.message), hostErr.message).toEqual([]);

      const witness = join(dir, `witness-${i}.key`);
      writeFileSync(witness, JSON.stringify({ name: 'witness.example/w1', ...jwk }));
      chmodSync(witness, 0o600);
      const witnessErr = await refusal(() => loadWitnessKeyFile(witness));
      expect(witnessErr.code).toBe('KEY_INVALID');
      expect(secretParts(witnessErr.message), witnessErr.message).toEqual([]);
    }
  });
});
