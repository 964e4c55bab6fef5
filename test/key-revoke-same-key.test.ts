/**
 * `keys revoke KEYID` (Ledger.revokeKey) revokes every listing of the key's public key, not only those under KEYID:
 * an older version could list one public key under two key ids (an injected signer names its key as it likes), and a
 * revocation of one id left the other current in trust.json (and every `keys export` of it) and its window open in the
 * log. The log keeps one window per key id: each other id's window is closed with the revocation, no later than it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findTrustedKey, type TrustStore } from '../manifests/format/trust.js';
import { generateJwk, LocalSigner } from '../src/keys/local-signer.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { main } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

/** Publishes as host a with the key named kms:v1, lists it again as an older version did, and revokes kms:v1. */
async function revokeAliasedKey(postgres?: { connectionString: string; schema: string }) {
  const root = tempDir();
  const backend = postgres ? { postgres } : {};
  let now = Date.parse('2026-11-30T10:00:00.000Z');
  const clock = () => new Date(now);
  const key = new LocalSigner(generateJwk());
  const signer = { keyId: 'kms:v1', publicKey: key.publicKey, sign: (m: Uint8Array) => key.sign(m) };
  let ledger = await openLedger({ root, host: 'a', signer, clock, onNotice: () => {}, ...backend });
  await ledger.publish(scope, sampleSummary(1));
  await ledger.close();

  // The same public key listed again, for host b under another key id, as an older version listed it.
  const trustPath = join(root, 'trust.json');
  const trust = JSON.parse(readFileSync(trustPath, 'utf8')) as TrustStore;
  const listing = trust.keys.find((k) => k.keyId === 'kms:v1')!;
  trust.keys.push({ ...listing, host: 'b', keyId: 'kms:old' });
  writeFileSync(trustPath, JSON.stringify(trust, null, 2) + '\n', { mode: 0o600 });

  // An operator's open (another host id, its own key) revokes the id it knows.
  now += 60_000;
  ledger = await openLedger({ root, host: 'ops', clock, onNotice: () => {}, ...backend });
  try {
    now += 1_000;
    const revokedAt = await ledger.revokeKey('kms:v1');
    const listings = ledger.trustStore().keys.filter((k) => k.publicKey === listing.publicKey);
    expect(listings.map((k) => [k.host, k.keyId, k.revokedAt])).toEqual([
      ['a', 'kms:v1', revokedAt],
      ['b', 'kms:old', revokedAt],
    ]);
    // As written to trust.json (what `keys export` gives), not only as the ledger merges it.
    const written = JSON.parse(readFileSync(trustPath, 'utf8')) as TrustStore;
    const later = new Date(now + 1_000).toISOString();
    expect(findTrustedKey(written, 'b', 'kms:old', later)).toMatchObject({ ok: false, code: 'KEY_REVOKED' });
    // The log closed the other id's window too: no process appends a manifest of it dated at or after that.
    expect((await ledger.log.signingKeys.get('kms:old'))?.closedAt).toBe(revokedAt);
    expect((await ledger.log.signingKeys.get('kms:v1'))?.closedAt).toBe(revokedAt);
    // trust.json and the log agree on both windows.
    expect((await fsck(ledger)).findings).toEqual([]);
  } finally {
    await ledger.close();
  }
}

describe('keys revoke of a public key trust.json lists under two key ids (written by an older version)', () => {
  it('revokes both listings from the same time and closes both windows in the log', async () => {
    await revokeAliasedKey();
  });
});

describePostgres('keys revoke of a public key listed under two key ids (PostgreSQL)', (pg) => {
  it('revokes both listings from the same time and closes both windows in the shared log', async () => {
    await revokeAliasedKey({ connectionString: pg.connectionString, schema: 'revoke_same_key' });
  });
});

describe('keys revoke names the other key ids of the public key it revoked', () => {
  /** Host a's key kms:v1 listed again for host b as kms:old (a backslash in its name: printed escaped, as an id), and an operator host's store. */
  async function aliasedStore() {
    const root = tempDir();
    const key = new LocalSigner(generateJwk());
    const signer = { keyId: 'kms:v1', publicKey: key.publicKey, sign: (m: Uint8Array) => key.sign(m) };
    const a = await openLedger({ root, host: 'a', signer, onNotice: () => {} });
    await a.publish(scope, sampleSummary(1));
    await a.close();
    const trustPath = join(root, 'trust.json');
    const trust = JSON.parse(readFileSync(trustPath, 'utf8')) as TrustStore;
    const listing = trust.keys.find((k) => k.keyId === 'kms:v1')!;
    trust.keys.push({ ...listing, host: 'b', keyId: 'kms:old\\x1b' });
    writeFileSync(trustPath, JSON.stringify(trust, null, 2) + '\n', { mode: 0o600 });
    // The operator's host, with its own key, runs the command.
    await (await openLedger({ root, host: 'ops', onNotice: () => {} })).close();
    return ['--root', root, '--host', 'ops'];
  }

  it('in --json (alsoRevoked) and in its text, the key id escaped', async () => {
    const at = '2026-12-01T00:00:00.000Z';
    const json = captureIo();
    expect(await main(['keys', 'revoke', 'kms:v1', ...(await aliasedStore()), '--at', at, '--json'], json.io)).toBe(0);
    // (Host a's checkpoint key, made beside kms:v1, is revoked with it: checkpointKeysRevoked names it, as before.)
    expect(JSON.parse(json.stdout())).toMatchObject({
      revoked: 'kms:v1',
      at,
      alsoRevoked: [{ host: 'b', keyId: 'kms:old\\x1b', revokedAt: at }],
      checkpointKeysRevoked: [{ host: 'a' }],
    });
    const text = captureIo();
    expect(await main(['keys', 'revoke', 'kms:v1', ...(await aliasedStore()), '--at', at], text.io)).toBe(0);
    expect(text.stdout().split('\n').slice(0, 2)).toEqual([
      `revoked kms:v1 from ${at}`,
      `revoked kms:old\\\\x1b of b from ${at}: the same public key, listed under another key id`,
    ]);
  });
});
