/**
 * Merged trust stores (verify --trust a --trust b, the `trust` option, HANDOFF_LEDGER_TRUST, the auditor's page) list
 * one public key revoked everywhere once any store revokes it: a store listing the key under another key id (or
 * another host, or as a checkpoint key) does not trust again what it signs after its revocation.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run as verifyCli } from '../src/cli/verify.js';
import { checkpointVerifiers, mergeTrust, parseTrustStore } from '../manifests/format/trust.js';
import { readTrustFiles as readPageTrustFiles } from '../web/worker/line-pool.js';
import { encodeVerifierKey } from '../manifests/crypto/note.js';
import { verifyBundle, verifyChain } from '../manifests/audit/verify-chain.js';
import {
  at,
  ChainBuilder,
  makeKey,
  readerOf,
  trustOf,
  writeBundleDir,
  writeTrustFile,
  type TestKey,
} from './support/bundle-builder.js';
import { captureIo } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';

const REVOKED_AT = at(2);

/** `key` named by another key id: the same public key and signature, as an injected signer may name it. */
function underKeyId(key: TestKey, keyId: string): TestKey {
  return {
    ...key,
    keyId,
    signer: { ...key.signer, keyId },
    trusted: { ...key.trusted, keyId },
  };
}

/** Four manifests of host-a signed with the key named `ed25519:alias`; the revoking store names it by its own id. */
async function scenario() {
  const key = makeKey('host-a', 7);
  const alias = underKeyId(key, 'ed25519:alias');
  const chain = new ChainBuilder(alias, { principal: 'alice', session: 'session-1' });
  for (let i = 0; i < 4; i++) await chain.next();
  const lines = chain.built.map((m) => m.line);
  // One store (an auditor's revocation notice, another host's export) revokes the key under its derived id ...
  const revoking = trustOf({ ...key.trusted, revokedAt: REVOKED_AT });
  // ... another (written by an older version) lists it under the alias, current.
  const aliasing = trustOf(alias.trusted);
  return { key, alias, lines, revoking, aliasing };
}

/** Lines (1-based) of KEY_REVOKED findings: the chain's seq 2 and 3 are lines 3 and 4. */
const revokedLines = (findings: Array<{ code: string; line?: number | undefined }>) =>
  findings.filter((f) => f.code === 'KEY_REVOKED').map((f) => f.line);

describe('mergeTrust: one public key under several key ids', () => {
  it('verifyChain and verifyBundle refuse what the key signs from its earliest revocation, in either order', async () => {
    const { lines, revoking, aliasing } = await scenario();
    for (const trust of [mergeTrust(revoking, aliasing), mergeTrust(aliasing, revoking)]) {
      expect(trust.keys.find((k) => k.keyId === 'ed25519:alias')?.revokedAt).toBe(REVOKED_AT);
      const chain = await verifyChain(lines, { trust });
      expect(chain.ok).toBe(false);
      expect(revokedLines(chain.findings)).toEqual([3, 4]);
      const bundle = await verifyBundle(readerOf(lines), { trust });
      expect(bundle.ok).toBe(false);
      expect(revokedLines(bundle.findings)).toEqual([3, 4]);
    }
    // Each store alone is as it was: the aliasing one trusts the chain, the revoking one does not know the alias.
    expect((await verifyChain(lines, { trust: aliasing })).ok).toBe(true);
  });

  it('takes the earliest revocation, and leaves each listing its own window', () => {
    const key = makeKey('host-a', 8);
    const other = { ...underKeyId(key, 'ed25519:other').trusted, host: 'host-b', notAfter: at(50) };
    const merged = mergeTrust(
      trustOf({ ...key.trusted, revokedAt: at(30) }),
      trustOf({ ...other, revokedAt: at(40) }),
      trustOf(makeKey('host-c', 9).trusted),
    );
    expect(merged.keys).toEqual([
      { ...key.trusted, revokedAt: at(30) },
      { ...other, revokedAt: at(30) },
      makeKey('host-c', 9).trusted,
    ]);
  });

  it('revokes a checkpoint key listing of the same public key (by its verifier key), under any key id or host', () => {
    const key = makeKey('host-a', 10);
    const vkey = encodeVerifierKey('example.com/log', key.publicKey);
    const checkpointStore = {
      version: 1 as const,
      keys: [],
      checkpointKeys: [{ host: 'host-b', keyId: 'ed25519:cp', vkey, notBefore: at(0) }],
    };
    expect(checkpointVerifiers(mergeTrust(checkpointStore))).toHaveLength(1);
    // A manifest-key listing revoking the public key revokes the checkpoint listing too (one key, one format: the
    // keyring never lists a key as both, but a merge of stores it did not write may).
    const merged = mergeTrust(trustOf({ ...key.trusted, revokedAt: REVOKED_AT }), checkpointStore);
    expect(merged.checkpointKeys?.[0]?.revokedAt).toBe(REVOKED_AT);
    expect(checkpointVerifiers(merged)).toEqual([]);
    // And a checkpoint listing revoking it revokes another host's listing under another key id.
    const both = mergeTrust(
      { ...checkpointStore, checkpointKeys: [{ ...checkpointStore.checkpointKeys[0]!, revokedAt: at(5) }] },
      {
        version: 1,
        keys: [],
        checkpointKeys: [{ host: 'host-c', keyId: 'ed25519:cp2', vkey, notBefore: at(0) }],
      },
    );
    expect(both.checkpointKeys?.map((k) => k.revokedAt)).toEqual([at(5), at(5)]);
    expect(checkpointVerifiers(both)).toEqual([]);
  });
});

describe('verify --trust a --trust b', () => {
  it('reports KEY_REVOKED for what the key signed after a revocation the other file lists under another key id', async () => {
    const { lines, revoking, aliasing } = await scenario();
    const dir = tempDir();
    await writeBundleDir(join(dir, 'bundle'), lines);
    await writeTrustFile(join(dir, 'revoking.json'), revoking);
    await writeTrustFile(join(dir, 'aliasing.json'), aliasing);
    const alone = captureIo();
    expect(await verifyCli([join(dir, 'bundle'), '--trust', join(dir, 'aliasing.json')], alone.io)).toBe(0);
    const c = captureIo();
    const code = await verifyCli(
      [join(dir, 'bundle'), '--trust', join(dir, 'aliasing.json'), '--trust', join(dir, 'revoking.json'), '--json'],
      c.io,
    );
    expect(code).toBe(1);
    const report = JSON.parse(c.stdout()) as { ok: boolean; findings: Array<{ code: string; line?: number }> };
    expect(report.ok).toBe(false);
    expect(revokedLines(report.findings)).toEqual([3, 4]);
  });
});

describe("the auditor's page (web/worker/line-pool.ts readTrustFiles)", () => {
  it('merges the picked files by mergeTrust: the text its workers verify under lists the alias revoked', async () => {
    const { lines, revoking, aliasing } = await scenario();
    const { trust, text } = readPageTrustFiles([
      { name: 'aliasing.json', text: JSON.stringify(aliasing) },
      { name: 'revoking.json', text: JSON.stringify(revoking) },
    ]);
    expect(parseTrustStore(text)).toEqual(trust);
    expect(trust.keys.map((k) => [k.keyId, k.revokedAt])).toEqual([
      ['ed25519:alias', REVOKED_AT],
      [revoking.keys[0]!.keyId, REVOKED_AT],
    ]);
    expect(revokedLines((await verifyBundle(readerOf(lines), { trust: parseTrustStore(text) })).findings)).toEqual([
      3, 4,
    ]);
  });
});
