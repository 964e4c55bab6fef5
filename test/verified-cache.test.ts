import { describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { VerifiedManifestCache } from '../manifests/crypto/verified-cache.js';
import type { SignatureVerifier } from '../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { decodeBase64, decodeBase64Url, encodeBase64 } from '../manifests/encoding/base64.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { generateJwk, LocalSigner } from '../src/keys/local-signer.js';
import { openLedger } from '../src/ledger/open.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const alice = { principal: 'alice', session: 'sess-1', run: 'run-1' };

function counting(): SignatureVerifier & { calls: number } {
  const v = {
    name: 'counting',
    calls: 0,
    verify(sig: Uint8Array, msg: Uint8Array, key: Uint8Array) {
      v.calls++;
      return nodeVerifier.verify(sig, msg, key);
    },
  };
  return v;
}

/** Two signed entries of one session, and the ledger's trust store. */
async function signedEntries() {
  const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
  await ledger.publish(alice, sampleSummary('one'));
  await ledger.publish(alice, sampleSummary('two'));
  const envelopes = [(await ledger.log.entry('sess-1', 0))!.envelope, (await ledger.log.entry('sess-1', 1))!.envelope];
  const trust = ledger.trustStore();
  await ledger.close();
  return { envelopes, trust };
}

describe('VerifiedManifestCache', () => {
  it('answers an envelope it verified before without checking its signature again', async () => {
    const { envelopes, trust } = await signedEntries();
    const verifier = counting();
    const cache = new VerifiedManifestCache();
    const first = cache.verify(envelopes[0]!, { trust, verifier });
    const again = cache.verify(envelopes[0]!, { trust, verifier });
    expect(verifier.calls).toBe(1);
    expect(again).toEqual(first);
  });

  it('verifies again under another trust store, and refuses a key that store revoked', async () => {
    const { envelopes, trust } = await signedEntries();
    const verifier = counting();
    const cache = new VerifiedManifestCache();
    cache.verify(envelopes[0]!, { trust, verifier });
    const revoked = structuredClone(trust);
    revoked.keys[0]!.revokedAt = '2000-01-01T00:00:00.000Z';
    expect(() => cache.verify(envelopes[0]!, { trust: revoked, verifier })).toThrow(
      expect.objectContaining({ code: 'KEY_REVOKED' }),
    );
    cache.verify(envelopes[0]!, { trust: structuredClone(trust), verifier });
    expect(verifier.calls).toBe(2);
  });

  it('hands out copies: a caller that edits its manifest does not change the next answer', async () => {
    const { envelopes, trust } = await signedEntries();
    const cache = new VerifiedManifestCache();
    const got = cache.verify(envelopes[1]!, { trust, verifier: nodeVerifier });
    got.manifest.session = 'edited';
    got.manifest.summary.size = -1;
    got.envelope.signatures[0]!.sig = 'edited';
    got.payload[0] = 0;
    const next = cache.verify(envelopes[1]!, { trust, verifier: nodeVerifier });
    expect(next.manifest.session).toBe('sess-1');
    expect(next.manifest.summary.size).toBeGreaterThan(0);
    expect(next.envelope.signatures[0]!.sig).not.toBe('edited');
    expect(next.payload[0]).toBe(0x7b); // '{'
  });

  it('keeps no refusal: a bad envelope is checked (and refused) every time', async () => {
    const { envelopes, trust } = await signedEntries();
    const env = JSON.parse(envelopes[0]!);
    const sig = decodeBase64(env.signatures[0].sig)!;
    sig[0]! ^= 1;
    env.signatures[0].sig = encodeBase64(sig);
    const bad = JSON.stringify(env);
    const verifier = counting();
    const cache = new VerifiedManifestCache();
    for (let i = 0; i < 2; i++)
      expect(() => cache.verify(bad, { trust, verifier })).toThrow(
        expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
      );
    expect(verifier.calls).toBe(2);
    expect(cache.size).toBe(0);
  });

  it('takes a signature this process made as valid under the key it names, and checks all the rest', async () => {
    const { envelopes, trust } = await signedEntries();
    const sig = JSON.parse(envelopes[0]!).signatures[0].sig as string;
    const key = decodeBase64Url(trust.keys[0]!.publicKey)!;
    const plain = new VerifiedManifestCache().verify(envelopes[0]!, { trust, verifier: nodeVerifier });
    const verifier = counting();
    const cache = new VerifiedManifestCache();
    cache.rememberSigned(envelopes[0]!, sig, key);
    expect(cache.size).toBe(0); // nothing is verified until asked
    expect(cache.verify(envelopes[0]!, { trust, verifier })).toEqual(plain);
    expect(verifier.calls).toBe(0);
    // The rest of the verification still runs: under a store that revoked the key, the same text is refused.
    const other = new VerifiedManifestCache();
    other.rememberSigned(envelopes[0]!, sig, key);
    const revoked = structuredClone(trust);
    revoked.keys[0]!.revokedAt = '2000-01-01T00:00:00.000Z';
    expect(() => other.verify(envelopes[0]!, { trust: revoked, verifier })).toThrow(
      expect.objectContaining({ code: 'KEY_REVOKED' }),
    );
    expect(verifier.calls).toBe(0);
  });

  it('checks the signature as ever for another key, another signature or another text than the one remembered', async () => {
    const { envelopes, trust } = await signedEntries();
    const sig = JSON.parse(envelopes[0]!).signatures[0].sig as string;
    const key = decodeBase64Url(trust.keys[0]!.publicKey)!;
    const verifier = counting();
    // A key trust.json does not list for it: the trusted key is checked with the curve (and the signature is valid).
    const otherKey = new VerifiedManifestCache();
    otherKey.rememberSigned(
      envelopes[0]!,
      sig,
      key.map((b, i) => (i === 0 ? b ^ 1 : b)),
    );
    otherKey.verify(envelopes[0]!, { trust, verifier });
    expect(verifier.calls).toBe(1);
    // Another signature than the one in the text.
    const otherSig = new VerifiedManifestCache();
    otherSig.rememberSigned(envelopes[0]!, JSON.parse(envelopes[1]!).signatures[0].sig, key);
    otherSig.verify(envelopes[0]!, { trust, verifier });
    expect(verifier.calls).toBe(2);
    // Another payload under the remembered signature (a forged manifest with this process's signature copied onto
    // it): that text was not remembered, and its signature is checked (and refused).
    const forged = JSON.parse(envelopes[0]!);
    const manifest = JSON.parse(new TextDecoder().decode(decodeBase64(forged.payload)!));
    manifest.run = 'run-forged';
    forged.payload = encodeBase64(new TextEncoder().encode(JSON.stringify(manifest)));
    const copied = new VerifiedManifestCache();
    copied.rememberSigned(envelopes[0]!, sig, key);
    expect(() => copied.verify(JSON.stringify(forged), { trust, verifier })).toThrow(
      expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
    );
    expect(verifier.calls).toBe(3);
    // A stored text that is not the remembered one (one byte of its signature flipped) is refused.
    const env = JSON.parse(envelopes[0]!);
    const bad = decodeBase64(env.signatures[0].sig)!;
    bad[0]! ^= 1;
    env.signatures[0].sig = encodeBase64(bad);
    const cache = new VerifiedManifestCache();
    cache.rememberSigned(envelopes[0]!, sig, key);
    expect(() => cache.verify(JSON.stringify(env), { trust, verifier })).toThrow(
      expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
    );
    expect(verifier.calls).toBe(4);
  });

  it('drops the least recently used envelope beyond its capacity', async () => {
    const { envelopes, trust } = await signedEntries();
    const verifier = counting();
    const cache = new VerifiedManifestCache(1);
    cache.verify(envelopes[0]!, { trust, verifier });
    cache.verify(envelopes[1]!, { trust, verifier });
    cache.verify(envelopes[0]!, { trust, verifier });
    expect(verifier.calls).toBe(3);
    expect(cache.size).toBe(1);
  });
});

/** Rewrites session sess-1's first stored entry: another run in its payload, its signature kept (a forgery). */
async function forgeFirstEntry(ledger: Awaited<ReturnType<typeof openLedger>>): Promise<void> {
  const db = (ledger.log as LevelManifestLog).raw;
  const key = 'e!sess-1!000000000000';
  const entry = JSON.parse((await db.get(key))!);
  const env = JSON.parse(entry.envelope);
  const manifest = JSON.parse(new TextDecoder().decode(decodeBase64(env.payload)!));
  manifest.run = 'run-forged';
  env.payload = encodeBase64(new TextEncoder().encode(JSON.stringify(manifest)));
  entry.envelope = JSON.stringify(env);
  await db.put(key, JSON.stringify(entry));
}

describe('resume with remembered verdicts', () => {
  it('checks no signature again when the head and the entry before it are unchanged', async () => {
    const root = tempDir();
    const writer = await openLedger({ root, host: 'host-a' });
    await writer.publish(alice, sampleSummary('one'));
    await writer.publish(alice, sampleSummary('two'));
    await writer.close();
    const verifier = counting();
    const ledger = await openLedger({ root, host: 'host-a' });
    Object.defineProperty(ledger, 'verifier', { value: verifier });
    await ledger.resume(alice);
    const after = verifier.calls;
    expect(after).toBe(2);
    await ledger.resume(alice);
    expect(verifier.calls).toBe(after);
    await ledger.close();
  });

  it("checks no signature of its own making: a resume after this ledger's publishes verifies all else", async () => {
    const verifier = counting();
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    Object.defineProperty(ledger, 'verifier', { value: verifier });
    await ledger.publish(alice, sampleSummary('one'));
    await ledger.publish(alice, sampleSummary('two'));
    const resumed = await ledger.resume(alice);
    expect(resumed?.seq).toBe(1);
    expect(resumed?.summary.task).toContain('(two)');
    expect(verifier.calls).toBe(0);
    await ledger.close();
  });

  it("an injected signer's signature is verified once, at the publish, and not again by the resume after it", async () => {
    const verifier = counting();
    const signer = new LocalSigner(generateJwk());
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', signer });
    Object.defineProperty(ledger, 'verifier', { value: verifier });
    await ledger.publish(alice, sampleSummary('one'));
    expect(verifier.calls).toBe(1);
    expect((await ledger.resume(alice))?.seq).toBe(0);
    expect(verifier.calls).toBe(1);
    await ledger.close();
  });

  it('verifies a head of its own whose stored bytes changed after the publish (SIGNATURE_INVALID)', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    await ledger.publish(alice, sampleSummary());
    await forgeFirstEntry(ledger);
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
    await ledger.close();
  });

  it('verifies its own head with the curve once trust.json lists another public key for its keyId (SIGNATURE_INVALID)', async () => {
    const root = tempDir();
    const verifier = counting();
    const ledger = await openLedger({ root, host: 'host-a' });
    Object.defineProperty(ledger, 'verifier', { value: verifier });
    await ledger.publish(alice, sampleSummary('one'));
    const path = join(root, 'trust.json');
    const trust = JSON.parse(readFileSync(path, 'utf8'));
    const listed = trust.keys.find((k: { keyId: string }) => k.keyId === ledger.keyId);
    listed.publicKey = generateJwk().x;
    writeFileSync(path, JSON.stringify(trust, null, 2) + '\n', { mode: 0o600 });
    // Read again as a read of a shared root does when loading the keys refuses (the key file no longer listed).
    const inside = ledger as unknown as { keyring: { reloadTrust(): Promise<void> }; trustCache: unknown };
    await inside.keyring.reloadTrust();
    inside.trustCache = undefined;
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
    expect(verifier.calls).toBe(1);
    await ledger.close();
  });

  it('still resumes its own head after a rotation of its key (the old key signed it within its window)', async () => {
    const verifier = counting();
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    Object.defineProperty(ledger, 'verifier', { value: verifier });
    await ledger.publish(alice, sampleSummary('one'));
    const oldKey = ledger.keyId;
    await ledger.rotateKey();
    expect(ledger.keyId).not.toBe(oldKey);
    const resumed = await ledger.resume(alice);
    expect(resumed?.manifest.keyId).toBe(oldKey);
    expect(verifier.calls).toBe(0);
    await ledger.close();
  });

  it('refuses a head of its own signed by a key revoked since the publish (KEY_REVOKED)', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    await ledger.publish(alice, sampleSummary());
    await ledger.revokeKey(ledger.keyId, '2000-01-01T00:00:00.000Z');
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await ledger.close();
  });

  it('verifies a stored entry again when its bytes changed since the last resume (SIGNATURE_INVALID)', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    await ledger.publish(alice, sampleSummary());
    await ledger.resume(alice);
    await forgeFirstEntry(ledger);
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
    await ledger.close();
  });

  it('refuses a head signed by a key revoked since the last resume (KEY_REVOKED)', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    await ledger.publish(alice, sampleSummary());
    await ledger.resume(alice);
    await ledger.revokeKey(ledger.keyId, '2000-01-01T00:00:00.000Z');
    await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await ledger.close();
  });
});

let schemas = 0;
const nextSchema = () => `vc${process.pid}_${schemas++}`;

describePostgres('resume with remembered verdicts, PostgreSQL', (pg) => {
  it('checks no signature of its own making, and verifies a head whose stored text changed since', async () => {
    const verifier = counting();
    const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', postgres, onNotice: () => {} });
    try {
      Object.defineProperty(ledger, 'verifier', { value: verifier });
      await ledger.publish(alice, sampleSummary('one'));
      await ledger.publish(alice, sampleSummary('two'));
      expect((await ledger.resume(alice))?.seq).toBe(1);
      expect(verifier.calls).toBe(0);
      await ledger.publish(alice, sampleSummary('three'));
      // The stored text of the new head changed under the ledger (one byte of its signature): verified, refused.
      const [row] = await sqlOn<{ envelope: string }>(
        pg.connectionString,
        `SELECT envelope FROM "${postgres.schema}".entries WHERE session = 'sess-1' AND seq = 2`,
      );
      const env = JSON.parse(row!.envelope);
      const sig = decodeBase64(env.signatures[0].sig)!;
      sig[0]! ^= 1;
      env.signatures[0].sig = encodeBase64(sig);
      await sqlOn(
        pg.connectionString,
        `UPDATE "${postgres.schema}".entries SET envelope = $1 WHERE session = 'sess-1' AND seq = 2`,
        [JSON.stringify(env)],
      );
      await expect(ledger.resume(alice)).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
      expect(verifier.calls).toBe(1);
    } finally {
      await ledger.close();
    }
  });
});
