/**
 * One trust store, not merged (verify --trust a, the auditor's page with one file, verifyChain/verifyBundle given a
 * store), lists one public key revoked everywhere once any of its listings revokes it, as a merge does: a file written
 * by an older version listing the key under two key ids, one revoked, does not trust the other.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run as verifyCli } from '../src/cli/verify.js';
import { readTrustFiles as readCliTrustFiles } from '../src/cli/trust-file.js';
import { readTrust, readTrustFiles as readPageTrustFiles } from '../web/worker/line-pool.js';
import { verifyBundle, verifyChain } from '../manifests/audit/verify-chain.js';
import { at, ChainBuilder, makeKey, readerOf, writeBundleDir, type TestKey } from './support/bundle-builder.js';
import { captureIo } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';
import { writeFile } from 'node:fs/promises';

const REVOKED_AT = at(2);

function underKeyId(key: TestKey, keyId: string): TestKey {
  return { ...key, keyId, signer: { ...key.signer, keyId }, trusted: { ...key.trusted, keyId } };
}

/** Four manifests signed under the alias; one store lists the key under its own id, revoked, and the alias, current. */
async function scenario() {
  const key = makeKey('host-a', 11);
  const alias = underKeyId(key, 'ed25519:alias');
  const chain = new ChainBuilder(alias, { principal: 'alice', session: 'session-1' });
  for (let i = 0; i < 4; i++) await chain.next();
  const lines = chain.built.map((m) => m.line);
  const store = { version: 1 as const, keys: [{ ...key.trusted, revokedAt: REVOKED_AT }, alias.trusted] };
  return { lines, store, text: `${JSON.stringify(store, null, 2)}\n` };
}

const revokedLines = (findings: Array<{ code: string; line?: number | undefined }>) =>
  findings.filter((f) => f.code === 'KEY_REVOKED').map((f) => f.line);

const aliasRevokedAt = (trust: { keys: Array<{ keyId: string; revokedAt?: string }> }) =>
  trust.keys.find((k) => k.keyId === 'ed25519:alias')?.revokedAt;

describe('one trust store listing a public key under two key ids, one revoked', () => {
  it('verifyChain and verifyBundle refuse what the key signs under the other id from the revocation', async () => {
    const { lines, store } = await scenario();
    const chain = await verifyChain(lines, { trust: store });
    expect(chain.ok).toBe(false);
    expect(revokedLines(chain.findings)).toEqual([3, 4]);
    const bundle = await verifyBundle(readerOf(lines), { trust: store });
    expect(bundle.ok).toBe(false);
    expect(revokedLines(bundle.findings)).toEqual([3, 4]);
    // The caller's store is left as it was.
    expect(aliasRevokedAt(store)).toBeUndefined();
  });

  it('verify --trust a (one file) reports KEY_REVOKED; readTrustFiles gives the store revoked, the file its own text', async () => {
    const { lines, text } = await scenario();
    const dir = tempDir();
    await writeBundleDir(join(dir, 'bundle'), lines);
    await writeFile(join(dir, 'one.json'), text);
    const read = await readCliTrustFiles([join(dir, 'one.json')]);
    expect(read.text).toBe(text);
    expect(aliasRevokedAt(read.trust)).toBe(REVOKED_AT);
    const c = captureIo();
    expect(await verifyCli([join(dir, 'bundle'), '--trust', join(dir, 'one.json'), '--json'], c.io)).toBe(1);
    const report = JSON.parse(c.stdout()) as { ok: boolean; findings: Array<{ code: string; line?: number }> };
    expect(report.ok).toBe(false);
    expect(revokedLines(report.findings)).toEqual([3, 4]);
  });

  it("the auditor's page with one file: its text as picked, the store (and its pool workers') revoked", async () => {
    const { lines, text } = await scenario();
    const { trust, text: shown } = readPageTrustFiles([{ name: 'one.json', text }]);
    expect(shown).toBe(text);
    expect(aliasRevokedAt(trust)).toBe(REVOKED_AT);
    // The pool's workers parse the text they are given.
    expect(aliasRevokedAt(readTrust(shown))).toBe(REVOKED_AT);
    expect(revokedLines((await verifyBundle(readerOf(lines), { trust })).findings)).toEqual([3, 4]);
  });
});
