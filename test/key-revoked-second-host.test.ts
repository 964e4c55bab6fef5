/**
 * A key trust.json lists revoked for one host is never listed anew, current, for another. One key may be listed for
 * several hosts (a key file or signer used under two host ids), and a revocation ends every listing it finds; a
 * listing made after it, for a host id the key was not listed under yet, took the key from its open on as current,
 * with no revocation: the root's trust.json (and every `keys export` of it) trusted what the revoked key signs for that
 * host, though the log refuses its appends. It is listed revoked where its other listings are, so it signs nothing new
 * (`KEY_REVOKED`, as any revoked host key: rotate), and what it would sign for that host does not verify. So is the
 * same public key under another key id (an injected signer names its key as it likes; a manifest names the key id it
 * was signed under, and is looked up by it).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeVerifierKey } from '../manifests/crypto/note.js';
import { checkpointVerifiers, findTrustedKey } from '../manifests/format/trust.js';
import { digestOf } from '../store/hash/digest.js';
import { generateJwk, LocalSigner, writeKeyFile } from '../src/keys/local-signer.js';
import { openLedger } from '../src/ledger/open.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

/** Where a host's checkpoint key file lies under `root` (the keyring names it by the host's hash). */
const checkpointKeyFile = (root: string, host: string): string =>
  join(root, 'keys', `checkpoint-${digestOf(new TextEncoder().encode(host)).slice(7)}.jwk`);

describe('a key revoked for one host, opened under another host id', () => {
  it('is listed revoked for that host too: nothing it signs there is trusted, and publish refuses', async () => {
    const root = tempDir();
    const dir = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    const keyFile = join(dir, 'k.jwk');
    await writeKeyFile(keyFile, generateJwk());
    const notices: string[] = [];
    const onNotice = (m: string) => notices.push(m);

    let ledger = await openLedger({ root, host: 'b', keyFile, clock, onNotice });
    const keyId = ledger.keyId;
    now += 1_000;
    await ledger.publish(scope, sampleSummary(1));
    now += 1_000;
    const revokedAt = await ledger.revokeKey(keyId);
    await ledger.close();

    // The same key file under host id "a" (a copy, a signer or key file given to the wrong host), after the revocation.
    now += 60_000;
    ledger = await openLedger({ root, host: 'a', keyFile, clock, onNotice });
    try {
      const listings = ledger.trustStore().keys.filter((k) => k.keyId === keyId);
      expect(listings.map((k) => k.host).sort()).toEqual(['a', 'b']);
      for (const k of listings) expect(k.revokedAt, k.host).toBe(revokedAt);
      // What the key signs for host "a" from now on is not trusted.
      const later = new Date(now + 1_000).toISOString();
      expect(findTrustedKey(ledger.trustStore(), 'a', keyId, later)).toMatchObject({ ok: false, code: 'KEY_REVOKED' });
      await expect(ledger.publish({ ...scope, session: 's2' }, sampleSummary(2))).rejects.toMatchObject({
        code: 'KEY_REVOKED',
      });
    } finally {
      await ledger.close();
    }
  });
});

describe('a key revoked under one key id, opened through a signer that names it by another', () => {
  it('is listed revoked under that key id too: nothing it signs under it is trusted, and publish refuses', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    const notices: string[] = [];
    const onNotice = (m: string) => notices.push(m);
    // One private key, held by an injected signer (a KMS, an HSM): the signer says which key id it signs under.
    const key = new LocalSigner(generateJwk());
    const signerNamed = (keyId: string) => ({ keyId, publicKey: key.publicKey, sign: (m: Uint8Array) => key.sign(m) });

    let ledger = await openLedger({ root, host: 'a', signer: signerNamed('kms:v1'), clock, onNotice });
    now += 1_000;
    await ledger.publish(scope, sampleSummary(1));
    now += 1_000;
    const revokedAt = await ledger.revokeKey('kms:v1');
    await ledger.close();

    // The same key, after the revocation, under a key id of its own (the signer's naming changed, or a copy of it).
    now += 60_000;
    ledger = await openLedger({ root, host: 'a', signer: signerNamed('kms:v1-again'), clock, onNotice });
    try {
      const listing = ledger.trustStore().keys.find((k) => k.keyId === 'kms:v1-again');
      expect(listing?.revokedAt).toBe(revokedAt);
      // What the revoked key signs under its new key id is not trusted.
      const later = new Date(now + 1_000).toISOString();
      expect(findTrustedKey(ledger.trustStore(), 'a', 'kms:v1-again', later)).toMatchObject({
        ok: false,
        code: 'KEY_REVOKED',
      });
      await expect(ledger.publish({ ...scope, session: 's2' }, sampleSummary(2))).rejects.toMatchObject({
        code: 'KEY_REVOKED',
      });
      expect(notices.some((m) => m.includes('"kms:v1-again"') && m.includes('under another key id'))).toBe(true);
    } finally {
      await ledger.close();
    }
  });
});

describe('a checkpoint key revoked for one host, found in the key file of another', () => {
  it('is replaced by a new key, not listed anew for that host', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    const onNotice = () => {};
    const checkpointFile = (host: string) => checkpointKeyFile(root, host);

    // Host "b" revokes its host key and rotates: the checkpoint key it rotates out is revoked with it.
    let ledger = await openLedger({ root, host: 'b', clock, onNotice });
    const revokedVkey = ledger.checkpointVerifierKey;
    const copy = readFileSync(checkpointFile('b'));
    now += 1_000;
    await ledger.revokeKey(ledger.keyId);
    now += 1_000;
    await ledger.rotateKey();
    expect(ledger.trustStore().checkpointKeys!.find((k) => k.vkey === revokedVkey)?.revokedAt).toBeDefined();
    await ledger.close();

    // Its old checkpoint key file lands where host "a" keeps its own (a keys/ directory restored from the wrong host).
    writeFileSync(checkpointFile('a'), copy, { mode: 0o600 });
    now += 60_000;
    ledger = await openLedger({ root, host: 'a', clock, onNotice });
    try {
      expect(ledger.checkpointVerifierKey).not.toBe(revokedVkey);
      const listings = ledger.trustStore().checkpointKeys!.filter((k) => k.vkey === revokedVkey);
      expect(listings.map((k) => k.host)).toEqual(['b']);
      // No checkpoint the revoked key signs verifies under this root's trust.
      expect(checkpointVerifiers(ledger.trustStore()).map((k) => encodeVerifierKey(k.name, k.publicKey))).not.toContain(
        revokedVkey,
      );
    } finally {
      await ledger.close();
    }
  });
});

describe('a checkpoint key another host listed before its revocation (its file copied there earlier)', () => {
  it("is replaced at that host's next load, and its listing there revoked from the same time", async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    const onNotice = () => {};
    const checkpointFile = (host: string) => checkpointKeyFile(root, host);
    let ledger = await openLedger({ root, host: 'b', clock, onNotice });
    const copied = ledger.checkpointVerifierKey;
    await ledger.close();
    // Host "a" gets host "b"'s checkpoint key file before its first open, and lists it as its own.
    writeFileSync(checkpointFile('a'), readFileSync(checkpointFile('b')), { mode: 0o600 });
    now += 1_000;
    ledger = await openLedger({ root, host: 'a', clock, onNotice });
    expect(ledger.checkpointVerifierKey).toBe(copied);
    await ledger.close();

    // Host "b" revokes its host key and rotates: the checkpoint key rotated out with it is revoked, for "b".
    now += 1_000;
    ledger = await openLedger({ root, host: 'b', clock, onNotice });
    const revokedAt = await ledger.revokeKey(ledger.keyId);
    now += 1_000;
    await ledger.rotateKey();
    await ledger.close();

    now += 60_000;
    ledger = await openLedger({ root, host: 'a', clock, onNotice });
    try {
      expect(ledger.checkpointVerifierKey).not.toBe(copied);
      const listings = ledger.trustStore().checkpointKeys!.filter((k) => k.vkey === copied);
      expect(listings.map((k) => [k.host, k.revokedAt])).toEqual([
        ['b', revokedAt],
        ['a', revokedAt],
      ]);
      expect(checkpointVerifiers(ledger.trustStore()).map((k) => encodeVerifierKey(k.name, k.publicKey))).not.toContain(
        copied,
      );
      // The store goes on: its next checkpoint is signed by the new key.
      expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
    } finally {
      await ledger.close();
    }
  });
});

describe('a key trust.json lists under one key id, opened through a signer that names it by another', () => {
  const start = Date.parse('2026-11-30T10:00:00.000Z');
  const signerOf = (key: LocalSigner, keyId: string) => ({
    keyId,
    publicKey: key.publicKey,
    sign: (m: Uint8Array) => key.sign(m),
  });

  it('current there: refused KEY_INVALID, nothing listed, so a revocation of the listed id leaves nothing trusting the key', async () => {
    const root = tempDir();
    let now = start;
    const clock = () => new Date(now);
    const key = new LocalSigner(generateJwk());
    let ledger = await openLedger({ root, host: 'a', signer: signerOf(key, 'kms:v1'), clock, onNotice: () => {} });
    await ledger.publish(scope, sampleSummary(1));
    await ledger.close();
    const trustBefore = readFileSync(join(root, 'trust.json'), 'utf8');

    now += 60_000;
    const refused = openLedger({ root, host: 'a', signer: signerOf(key, 'kms:v2'), clock, onNotice: () => {} });
    await expect(refused).rejects.toMatchObject({ code: 'KEY_INVALID' });
    await expect(refused).rejects.toThrow(
      /lists the signer's public key as key "kms:v1" of host "a".*give the signer the key id "kms:v1"/,
    );
    expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(trustBefore);

    // The key stolen: revoking the id it is listed under ends its trust, whatever id a thief's manifest names.
    ledger = await openLedger({ root, host: 'a', signer: signerOf(key, 'kms:v1'), clock, onNotice: () => {} });
    try {
      now += 1_000;
      await ledger.revokeKey('kms:v1');
      const later = new Date(now + 1_000).toISOString();
      for (const keyId of ['kms:v1', 'kms:v2'])
        expect(findTrustedKey(ledger.trustStore(), 'a', keyId, later).ok, keyId).toBe(false);
    } finally {
      await ledger.close();
    }
  });

  it('listed for another host, or rotated out: refused too (a rotation is not undone under a new key id)', async () => {
    const root = tempDir();
    const dir = tempDir();
    let now = start;
    const clock = () => new Date(now);
    const keyFile = join(dir, 'k.jwk');
    const jwk = generateJwk();
    await writeKeyFile(keyFile, jwk);
    const old = new LocalSigner(jwk);
    let ledger = await openLedger({ root, host: 'b', keyFile, clock, onNotice: () => {} });
    await ledger.close();
    for (const host of ['a', 'b'])
      await expect(
        openLedger({ root, host, signer: signerOf(old, 'kms:b-old'), clock, onNotice: () => {} }),
        host,
      ).rejects.toMatchObject({ code: 'KEY_INVALID' });

    ledger = await openLedger({ root, host: 'b', keyFile, clock, onNotice: () => {} });
    now += 1_000;
    await ledger.rotateKey();
    await ledger.close();
    now += 60_000;
    await expect(
      openLedger({ root, host: 'b', signer: signerOf(old, 'kms:b-old'), clock, onNotice: () => {} }),
    ).rejects.toMatchObject({ code: 'KEY_INVALID' });
    const listed = JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as { keys: Array<{ keyId: string }> };
    expect(listed.keys.map((k) => k.keyId)).not.toContain('kms:b-old');
  });

  it("this host's checkpoint key as the signer: refused, a checkpoint key signs no manifest", async () => {
    const root = tempDir();
    const clock = () => new Date(start);
    let ledger = await openLedger({ root, host: 'a', clock, onNotice: () => {} });
    await ledger.close();
    const checkpointFile = checkpointKeyFile(root, 'a');
    const checkpoint = new LocalSigner(JSON.parse(readFileSync(checkpointFile, 'utf8')));
    const opened = openLedger({
      root,
      host: 'a',
      signer: signerOf(checkpoint, checkpoint.keyId),
      clock,
      onNotice: () => {},
    });
    await expect(opened).rejects.toMatchObject({ code: 'KEY_INVALID' });
    await expect(opened).rejects.toThrow(/a checkpoint key signs no manifest/);
    ledger = await openLedger({ root, host: 'a', clock, onNotice: () => {} });
    await ledger.close();
  });
});
