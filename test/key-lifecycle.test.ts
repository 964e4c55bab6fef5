/**
 * Key and trust operations an operator runs on a live store: rotation, revocation, the trust file's own
 * integrity, and who may own what the store trusts.
 */
import { describe, expect, it } from 'vitest';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LocalSigner, generateJwk, writeKeyFile } from '../src/keys/local-signer.js';
import { join } from 'node:path';
import { type Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { codedSigner, hostKeyPath, Keyring } from '../src/keys/keyring.js';
import { withFileLock } from '../src/ledger/file-lock.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { checkpointVerifiers, mergeTrust, parseTrustStore, type TrustedKey } from '../manifests/format/trust.js';
import { openNote } from '../manifests/crypto/note.js';
import { findTrustedKey } from '../manifests/format/trust-lookup.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { isTerminalSafe, printable, shellWord } from '../manifests/encoding/printable.js';
import type { Signer } from '../manifests/crypto/envelope.js';
import { digestOf } from '../store/hash/digest.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
/** The built package: what a child process running as another user imports (`npm run build`). */
const BUILT = fileURLToPath(new URL('../dist/src/index.js', import.meta.url));
/** Files this process cannot read or directories it cannot write take another user than root (root may do all). */
const asRootWithBuild = process.getuid?.() === 0 && existsSync(BUILT);
const NOBODY = 65534;

/** Runs an ES module body as user `nobody` with `openLedger` in scope; returns what it printed (JSON). */
function runAsNobody(cwd: string, body: string): unknown {
  const script = `const { openLedger } = await import(${JSON.stringify(pathToFileURL(BUILT).href)});\n${body}`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    uid: NOBODY,
    gid: NOBODY,
    cwd,
    encoding: 'utf8',
  });
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout);
}

function open(root = tempDir(), extra: Partial<Parameters<typeof openLedger>[0]> = {}): Promise<Ledger> {
  return openLedger({ root, host: 'host-a', ...extra });
}

describe('rotateKey', () => {
  it('keeps a manifest signed in the same millisecond as the rotation valid, and the session publishable', async () => {
    const ledger = await open(tempDir(), { clock: () => new Date('2026-11-30T10:00:00.000Z') });
    await ledger.publish(scope, sampleSummary('before'));
    await ledger.rotateKey();
    expect((await ledger.resume(scope))?.seq).toBe(0);
    await ledger.publish(scope, sampleSummary('after'));
    expect((await ledger.history(scope)).length).toBe(2);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('never dates a manifest before the current key window when the clock steps back after a rotation', async () => {
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const ledger = await open(tempDir(), { clock: () => new Date(now) });
    await ledger.publish(scope, sampleSummary(1));
    await ledger.rotateKey();
    now -= 60_000;
    const receipt = await ledger.publish(scope, sampleSummary(2));
    expect((await ledger.history(scope)).map((h) => h.manifest.createdAt)).toEqual([
      '2026-11-30T10:00:00.000Z',
      '2026-11-30T10:00:00.001Z',
    ]);
    expect((await ledger.resume(scope))?.id).toBe(receipt.id);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('waits for publishes in flight, so a publish-then-rotate loop on the real clock leaves every session verifiable', async () => {
    const ledger = await open();
    const sessions = Array.from({ length: 40 }, (_, i) => ({ ...scope, session: `s${i}` }));
    for (const s of sessions) {
      const publishing = Promise.all([ledger.publish(s, sampleSummary('a')), ledger.publish(s, sampleSummary('b'))]);
      await Promise.all([publishing, ledger.rotateKey()]);
    }
    for (const s of sessions) {
      expect((await ledger.history(s)).length).toBe(2);
      await ledger.publish(s, sampleSummary('c'));
    }
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('checkPublish during a rotation of this process waits for it, neither refusing KEY_EXPIRED nor taking back its keys', async () => {
    const ledger = await open();
    try {
      await ledger.publish(scope, sampleSummary('before'));
      const log = ledger.log;
      const close = log.signingKeys.close.bind(log.signingKeys);
      let checked: Promise<unknown> | undefined;
      // checkPublish (compact, before its model call) comes in while the rotation has closed the old key's window in
      // the log and not yet written its new keys.
      log.signingKeys.close = async (...args: Parameters<typeof close>) => {
        const at = await close(...args);
        checked = ledger.checkPublish(scope).then(
          () => 'passed',
          (err: unknown) => err,
        );
        await new Promise((r) => setTimeout(r, 100));
        return at;
      };
      const rotated = await ledger.rotateKey();
      log.signingKeys.close = close;
      expect(await checked).toBe('passed');
      expect(ledger.keyId).toBe(rotated);
      expect((await ledger.publish(scope, sampleSummary('after'))).seq).toBe(1);
    } finally {
      await ledger.close();
    }
  });
});

describe('the manifest a ledger signs', () => {
  it('is refused (INVALID_ARGUMENT, nothing appended) when the schema would refuse it: a clock past year 9999', async () => {
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const ledger = await open(tempDir(), { clock: () => new Date(now) });
    try {
      await ledger.publish(scope, sampleSummary('kept'));
      now = Date.parse('+010000-01-01T00:00:00.000Z');
      await expect(ledger.publish(scope, sampleSummary('refused'))).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/refusing to sign an invalid manifest: .*createdAt/),
      });
      expect((await ledger.history(scope)).length).toBe(1);
      now = Date.parse('2026-11-30T10:00:01.000Z');
      expect((await ledger.publish(scope, sampleSummary('after'))).seq).toBe(1);
      expect((await fsck(ledger)).ok).toBe(true);
    } finally {
      await ledger.close();
    }
  });
});

describe('a revoked host key', () => {
  it('signs nothing new even when the clock steps back before its revocation', async () => {
    const root = tempDir();
    let now = Date.parse('2026-12-02T10:00:00.000Z');
    const ledger = await open(root, { clock: () => new Date(now) });
    await ledger.publish(scope, sampleSummary(1));
    now += 60_000;
    await ledger.revokeKey(ledger.keyId);
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    // checkPublish (what compact asks before the model) refuses as publish does.
    await expect(ledger.checkPublish(scope)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    now -= 30_000; // still after the last manifest the key signed, before its revocation
    await expect(ledger.checkPublish(scope)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await expect(ledger.publish(scope, sampleSummary(3))).rejects.toMatchObject({
      code: 'KEY_REVOKED',
      message: expect.stringMatching(/is revoked \(from 2026-12-02T10:01:00\.000Z\) and signs no new manifest/),
    });
    expect((await ledger.history(scope)).length).toBe(1);
    await ledger.close();
  });

  it('refuses a publish before its summary is stored: no blob file is left for gc', async () => {
    const root = tempDir();
    const ledger = await open(root, { inlineSummaryBytes: 0 });
    const blobFiles = () =>
      readdirSync(join(root, 'blobs-v1', 'blake3'), { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
        .length;
    try {
      await ledger.publish(scope, sampleSummary(1));
      expect(blobFiles()).toBe(1);
      await ledger.revokeKey(ledger.keyId);
      await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
      await expect(ledger.publish({ ...scope, session: 'another' }, sampleSummary(3))).rejects.toMatchObject({
        code: 'KEY_REVOKED',
      });
      expect(blobFiles()).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it('still opens the store for reading, exporting and rotating; only signing refuses', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    let ledger = await open(root, { clock });
    await ledger.publish(scope, sampleSummary(1));
    now += 60_000;
    await ledger.revokeKey(ledger.keyId);
    await ledger.close();
    ledger = await open(root, { clock });
    expect((await ledger.resume(scope))?.seq).toBe(0);
    expect((await ledger.history(scope)).length).toBe(1);
    expect(ledger.trustStore().keys[0]?.revokedAt).toBe('2026-11-30T10:01:00.000Z');
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await ledger.rotateKey();
    now += 1;
    await ledger.checkPublish(scope);
    expect((await ledger.publish(scope, sampleSummary(3))).seq).toBe(1);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('takes its checkpoint key with it: revoked after a rotation, or at the rotation that follows the revocation', async () => {
    const checkpointKeys = (l: Ledger) => l.trustStore().checkpointKeys!;
    // The runbook: rotate, then revoke the old host key. The old checkpoint key (same keys/ directory) is revoked.
    const root = tempDir();
    let ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    const oldKey = ledger.keyId;
    const oldCheckpointKey = checkpointKeys(ledger)[0]!.keyId;
    await ledger.rotateKey();
    await ledger.revokeKey(oldKey, '2000-01-01T00:00:00.000Z');
    expect(checkpointKeys(ledger).map((k) => [k.keyId === oldCheckpointKey, k.revokedAt])).toEqual([
      [true, '2000-01-01T00:00:00.000Z'],
      [false, undefined],
    ]);
    // No publish since: the checkpoint handed out (and exported) is signed again, by a key the trust file vouches for.
    const vouched = (l: Ledger) => async () =>
      openNote((await l.checkpoint()).note, checkpointVerifiers(l.trustStore())).sigs.length;
    expect(await vouched(ledger)()).toBe(1);
    await ledger.close();
    ledger = await open(root); // its pin, signed by the revoked checkpoint key, is read back and signed again
    expect(await vouched(ledger)()).toBe(1);
    // Session s's head (seq 0) is signed by oldKey, revoked from before it: resume refuses it, and so publish does.
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    expect((await ledger.publish({ ...scope, session: 's2' }, sampleSummary(2))).seq).toBe(0);
    expect((await fsck(ledger)).findings.map((f) => f.code)).toEqual(['KEY_REVOKED']); // seq 0, signed by oldKey
    await ledger.close();

    // The other order: revoke the host key in use, then rotate as KEY_REVOKED says. The rotation revokes both.
    const second = await open(tempDir());
    await second.publish(scope, sampleSummary(1));
    const current = checkpointKeys(second)[0]!.keyId;
    await expect(second.revokeKey(current)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: /keys rotate/ });
    await second.revokeKey(second.keyId);
    expect(checkpointKeys(second)[0]?.revokedAt).toBeUndefined(); // still the key every checkpoint is signed with
    await second.rotateKey();
    expect(checkpointKeys(second).map((k) => [k.keyId === current, k.revokedAt !== undefined])).toEqual([
      [true, true],
      [false, false],
    ]);
    expect(await vouched(second)()).toBe(1);
    expect((await second.publish({ ...scope, session: 's2' }, sampleSummary(2))).seq).toBe(0);
    await second.close();
  });

  it('takes the checkpoint key that lay beside a lost host key with it at the next rotation, once the lost key is revoked', async () => {
    // The runbook for a lost host key file: an open makes the host a new key (listed beside the lost one), and
    // `keys revoke` ends the lost one. The checkpoint key made with the lost key is still the one this store signs
    // with, so the revocation leaves it to the next rotation, which replaces it and revokes it with the lost key.
    const root = tempDir();
    let ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    const lost = ledger.keyId;
    const beside = ledger.trustStore().checkpointKeys![0]!.keyId;
    await ledger.close();
    unlinkSync(hostKeyPath(root, 'host-a'));
    ledger = await open(root);
    expect(ledger.keyId).not.toBe(lost);
    const revokedAt = await ledger.revokeKey(lost);
    const checkpointKeys = () => ledger.trustStore().checkpointKeys!.map((k) => [k.keyId === beside, k.revokedAt]);
    expect(checkpointKeys()).toEqual([[true, undefined]]); // still the key every checkpoint is signed with
    await ledger.rotateKey();
    expect(checkpointKeys()).toEqual([
      [true, revokedAt],
      [false, undefined],
    ]);
    // The checkpoint is signed again by the new checkpoint key, which the trust file vouches for.
    expect(openNote((await ledger.checkpoint()).note, checkpointVerifiers(ledger.trustStore())).sigs).toHaveLength(1);
    // The lost key's window ended at that rotation: the next one revokes no checkpoint key. Left open, it overlapped
    // every later checkpoint key, and each rotation revoked the one it rotated out, so a bundle exported in between
    // (its checkpoint signed by that key) failed every auditor's verify with the new trust file (CHECKPOINT_UNTRUSTED).
    const lostKey = () => ledger.trustStore().keys.find((k) => k.keyId === lost)!;
    expect(lostKey()).toMatchObject({ revokedAt, notAfter: ledger.trustStore().checkpointKeys![1]!.notBefore });
    const { note } = await ledger.checkpoint();
    await ledger.rotateKey();
    expect(checkpointKeys()).toEqual([
      [true, revokedAt],
      [false, undefined],
      [false, undefined],
    ]);
    expect(openNote(note, checkpointVerifiers(ledger.trustStore())).sigs).toHaveLength(1);
    expect((await fsck(ledger)).findings).toEqual([]);
    await ledger.close();
    // A host key revoked whose window ended before the current checkpoint key's began takes none with it.
    const other = await open(tempDir());
    const first = other.keyId;
    await other.rotateKey();
    await other.revokeKey(first);
    const current = other.trustStore().checkpointKeys!.at(-1)!.keyId;
    await other.rotateKey();
    expect(other.trustStore().checkpointKeys!.find((k) => k.keyId === current)?.revokedAt).toBeUndefined();
    await other.close();
  });

  it('refuses the same with an injected signer or a key file of the caller, once that key signed in this store', async () => {
    const jwk = generateJwk();
    const keyFile = join(tempDir(), 'host.jwk');
    writeFileSync(keyFile, JSON.stringify(jwk), { mode: 0o600 });
    for (const extra of [{ signer: new LocalSigner(jwk) }, { keyFile }]) {
      const root = tempDir();
      const ledger = await open(root, extra);
      await ledger.publish(scope, sampleSummary(1));
      await ledger.close();
      unlinkSync(join(root, 'trust.json'));
      await expect(open(root, extra)).rejects.toMatchObject({ code: 'KEY_INVALID', message: /trust\.json is missing/ });
    }
    // A key that never signed here is listed from now, as on a first open.
    const fresh = await open(tempDir(), { signer: new LocalSigner(generateJwk()) });
    await fresh.close();
  });

  it('lists a host key that signed nothing when trust.json is missing (a first open stopped between the two writes)', async () => {
    const root = tempDir();
    mkdirSync(join(root, 'keys'), { mode: 0o700 });
    const keyPath = join(root, 'keys', `${digestOf(new TextEncoder().encode('host-a')).slice(7)}.jwk`);
    writeFileSync(keyPath, JSON.stringify(generateJwk()), { mode: 0o600 });
    const ledger = await openLedger({ root, host: 'host-a' });
    expect(ledger.trustStore().keys.map((k) => k.keyId)).toEqual([ledger.keyId]);
    await ledger.publish(scope, sampleSummary(1));
    await ledger.close();
    // Opened once, nothing signed, trust.json gone: the same.
    const other = tempDir();
    await (await openLedger({ root: other, host: 'host-a' })).close();
    unlinkSync(join(other, 'trust.json'));
    const again = await openLedger({ root: other, host: 'host-a' });
    expect((await again.publish(scope, sampleSummary(2))).seq).toBe(0);
    await again.close();
  });

  it('still refuses when this host’s key signed nothing but the store holds what other keys signed', async () => {
    // A second host of the root that has not published yet, and a host that rotated and has not published since.
    const shared = tempDir();
    const h1 = await openLedger({ root: shared, host: 'host-1' });
    await h1.publish(scope, sampleSummary(1));
    await h1.close();
    await (await openLedger({ root: shared, host: 'host-2' })).close();
    unlinkSync(join(shared, 'trust.json'));
    await expect(openLedger({ root: shared, host: 'host-2' })).rejects.toMatchObject({
      code: 'KEY_INVALID',
      message: /trust\.json is missing/,
    });
    const rotated = tempDir();
    const ledger = await openLedger({ root: rotated, host: 'host-1' });
    await ledger.publish(scope, sampleSummary(1));
    await ledger.rotateKey();
    await ledger.close();
    unlinkSync(join(rotated, 'trust.json'));
    await expect(openLedger({ root: rotated, host: 'host-1' })).rejects.toMatchObject({ code: 'KEY_INVALID' });
  });

  it('refuses to open when trust.json is gone but the host key is not, instead of re-trusting the key from now', async () => {
    const root = tempDir();
    const ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    await ledger.close();
    unlinkSync(join(root, 'trust.json'));
    await expect(open(root)).rejects.toMatchObject({ code: 'KEY_INVALID', message: /trust\.json is missing/ });
  });
});

describe('a revoked checkpoint key in place', () => {
  const keyFiles = (root: string) =>
    Object.fromEntries(readdirSync(join(root, 'keys')).map((f) => [f, readFileSync(join(root, 'keys', f))]));
  const vouched = async (l: Ledger) =>
    openNote((await l.checkpoint()).note, checkpointVerifiers(l.trustStore())).sigs.length;

  it('does not stop the store from opening and rotating: a revoke-then-rotate whose key files were not written', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    await ledger.revokeKey(ledger.keyId);
    const before = keyFiles(root);
    await ledger.rotateKey();
    await ledger.close();
    // What a rotation that wrote trust.json before its key files left when it stopped in between: the old key files,
    // the host key ended and revoked, its checkpoint key revoked.
    for (const [f, bytes] of Object.entries(before)) writeFileSync(join(root, 'keys', f), bytes, { mode: 0o600 });
    ledger = await open(root);
    expect((await ledger.resume(scope))?.seq).toBe(0);
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await ledger.rotateKey();
    expect((await ledger.publish(scope, sampleSummary(3))).seq).toBe(1);
    expect(await vouched(ledger)).toBe(1);
    await ledger.close();
  });

  it('of a host whose key another host of the root revoked: that host opens, rotates and signs again', async () => {
    const root = tempDir();
    const b = await openLedger({ root, host: 'host-b' });
    await b.publish({ ...scope, session: 'sb' }, sampleSummary(1));
    const bKey = b.keyId;
    await b.close();
    const a = await openLedger({ root, host: 'host-a' });
    await a.revokeKey(bKey);
    expect(a.trustStore().checkpointKeys!.map((k) => [k.host, k.revokedAt !== undefined])).toEqual([
      ['host-b', true],
      ['host-a', false],
    ]);
    await a.close();
    const again = await openLedger({ root, host: 'host-b' });
    expect((await again.resume({ ...scope, session: 'sb' }))?.seq).toBe(0);
    await expect(again.publish({ ...scope, session: 'sb' }, sampleSummary(2))).rejects.toMatchObject({
      code: 'KEY_REVOKED',
    });
    await again.rotateKey();
    expect((await again.publish({ ...scope, session: 'sb' }, sampleSummary(3))).seq).toBe(1);
    expect(await vouched(again)).toBe(1);
    // Every checkpoint key of host-b listed before the rotation is revoked: only the new one vouches.
    expect(again.trustStore().checkpointKeys!.filter((k) => k.host === 'host-b' && !k.revokedAt).length).toBe(1);
    await again.close();
  });

  it('signs no checkpoint once trust.json lists it revoked: the publish returns its receipt and says so', async () => {
    const root = tempDir();
    const notices: string[] = [];
    const ledger = await open(root, { onNotice: (m) => notices.push(m) });
    await ledger.publish(scope, sampleSummary(1));
    // Another process revoked this key while this one runs: it has read trust.json again, not yet the key files.
    const path = join(root, 'trust.json');
    const t = JSON.parse(readFileSync(path, 'utf8')) as { checkpointKeys: Array<Record<string, string>> };
    t.checkpointKeys = t.checkpointKeys.map((k) => ({ ...k, revokedAt: '2026-01-01T00:00:00.000Z' }));
    writeFileSync(`${path}.x`, JSON.stringify(t), { mode: 0o600 });
    renameSync(`${path}.x`, path);
    await (ledger as unknown as { keyring: { reloadTrust(): Promise<void> } }).keyring.reloadTrust();
    expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(1);
    expect(notices).toEqual([expect.stringMatching(/no checkpoint holding it is pinned yet \(.*revoked.*keys rotate/)]);
    await expect(ledger.checkpoint()).rejects.toMatchObject({ code: 'KEY_REVOKED', message: /rotate the keys/ });
    await ledger.rotateKey();
    expect(await vouched(ledger)).toBe(1);
    expect((await ledger.publish(scope, sampleSummary(3))).seq).toBe(2);
    await ledger.close();
  });
});

describe('a rotation that stopped', () => {
  const jwkFiles = (root: string) => readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.jwk'));

  it('after writing trust.json is finished at the next open: the new key files are moved into place', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    const before = Object.fromEntries(jwkFiles(root).map((f) => [f, readFileSync(join(root, 'keys', f))]));
    await ledger.revokeKey(ledger.keyId);
    const rotated = await ledger.rotateKey();
    await ledger.close();
    // Stopped between trust.json and moving the staged files into place.
    for (const [f, bytes] of Object.entries(before)) {
      renameSync(join(root, 'keys', f), join(root, 'keys', `${f}.next`));
      writeFileSync(join(root, 'keys', f), bytes, { mode: 0o600 });
    }
    ledger = await open(root);
    expect(ledger.keyId).toBe(rotated);
    expect(readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.next'))).toEqual([]);
    expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(1);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('before writing trust.json leaves the old keys in use, and its staged files are removed', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    const key = ledger.keyId;
    await ledger.close();
    for (const f of jwkFiles(root))
      writeFileSync(join(root, 'keys', `${f}.next`), JSON.stringify(generateJwk()), { mode: 0o600 });
    ledger = await open(root);
    expect(ledger.keyId).toBe(key);
    expect(readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.next'))).toEqual([]);
    expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(1);
    await ledger.close();
  });
});

describe('a trust.json restored from before the last rotation', () => {
  /** A store whose key was rotated after seq 0 and which then signed with the new key; trust.json before and after. */
  async function rotatedStore() {
    const root = tempDir();
    const ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    const before = readFileSync(join(root, 'trust.json'));
    await ledger.rotateKey();
    await ledger.publish({ ...scope, session: 's2' }, sampleSummary(2)); // signed by the new key
    const origin = (await ledger.checkpoint()).checkpoint.origin;
    const after = readFileSync(join(root, 'trust.json'));
    await ledger.close();
    return { root, before, after, origin };
  }

  it('is refused (KEY_INVALID) instead of listing the current key from now, which expired all it signed', async () => {
    const { root, before: backup, after: current } = await rotatedStore();
    writeFileSync(join(root, 'trust.json'), backup, { mode: 0o600 });
    await expect(open(root)).rejects.toMatchObject({
      code: 'KEY_INVALID',
      message: /does not list key .* which signed manifests of this store.*restore the current trust\.json/,
    });
    expect(readFileSync(join(root, 'trust.json'))).toEqual(backup); // nothing listed from now
    writeFileSync(join(root, 'trust.json'), current, { mode: 0o600 });
    const ledger = await open(root);
    expect((await ledger.resume({ ...scope, session: 's2' }))?.seq).toBe(0);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('is refused (KEY_INVALID) also before the new key signed anything: the log closed the key it holds current', async () => {
    // A backup restored right after a rotation: the new key has no record in the log yet, but the old one's window
    // is closed there. Listing the new key from now would leave the old one current in trust.json (fsck:
    // KEY_WINDOW_MISMATCH), its window open to every auditor given `keys export`.
    const root = tempDir();
    let ledger = await open(root);
    await ledger.publish(scope, sampleSummary(1));
    const backup = readFileSync(join(root, 'trust.json'));
    const old = ledger.keyId;
    await ledger.rotateKey();
    await ledger.close();
    const current = readFileSync(join(root, 'trust.json'));
    writeFileSync(join(root, 'trust.json'), backup, { mode: 0o600 });
    await expect(open(root)).rejects.toMatchObject({
      code: 'KEY_INVALID',
      message: expect.stringContaining(
        `lists key "${old}" of host "host-a" as current, which the log closed at`,
      ) as unknown,
    });
    await expect(open(root)).rejects.toThrow(/a trust\.json from before its last rotation; restore the current one/);
    expect(readFileSync(join(root, 'trust.json'))).toEqual(backup); // nothing listed from now
    // An open that lists no key (createHostKey: false: the CLI's resume, history, fsck…) says the same, not that the
    // key file was copied from another store (whose advice, to move it aside and make a new key, would lose it).
    const refused = await open(root, { createHostKey: false }).then(
      () => 'opened',
      (err: Error) => err.message,
    );
    expect(refused).toContain(`lists key "${old}" of host "host-a" as current, which the log closed at`);
    expect(refused).toContain('a trust.json from before its last rotation; restore the current one');
    expect(refused).not.toContain('copied from another store');
    writeFileSync(join(root, 'trust.json'), current, { mode: 0o600 });
    ledger = await open(root);
    await ledger.publish(scope, sampleSummary(2));
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('is judged only under the trust lock: a trust.json read while another process rotates is read again', async () => {
    // Another process of the root (PostgreSQL) rotates under the trust lock; this process reads trust.json from
    // before the rotation and the rotated key file. Without the lock the pair looks like a restored backup.
    const { root, before, after, origin } = await rotatedStore();
    writeFileSync(join(root, 'trust.json'), before, { mode: 0o600 });
    // The rotating process: holds the lock until this process has judged the stale pair unlocked (the code before the
    // fix asked the log whether the key signed before) or, at the latest, 2 s; then its trust.json lands.
    let judged!: () => void;
    const judgedUnlocked = new Promise<void>((resolve) => (judged = resolve));
    let locked!: () => void;
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    const rotating = withFileLock(join(root, 'trust.json'), 'trust.json', async () => {
      locked();
      await Promise.race([judgedUnlocked, new Promise((resolve) => setTimeout(resolve, 2000))]);
      writeFileSync(join(root, 'trust.json'), after, { mode: 0o600 });
    });
    await lockTaken;
    const opened = Keyring.open({
      root,
      host: 'host-a',
      origin,
      clock: () => new Date(),
      storeSignedNothing: async () => false,
      signedBefore: async () => {
        judged();
        return true;
      },
    });
    await rotating;
    const keyring = await opened;
    expect(keyring.trustStore().keys.map((k) => k.keyId)).toContain(keyring.signer.keyId);
    expect(readFileSync(join(root, 'trust.json'))).toEqual(after);
  });
});

describe('the trust.json a process wrote itself', () => {
  type Stamped = { keyring: { changedOnDisk(): Promise<boolean>; generation: number } };
  it('is not a change its next read reloads the keys for: at the open that made it, and after a revocation', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a' });
    const keyring = (ledger as unknown as Stamped).keyring;
    expect(existsSync(join(root, 'trust.json'))).toBe(true);
    expect(await keyring.changedOnDisk()).toBe(false);
    await ledger.publish(scope, sampleSummary('one'));
    await ledger.revokeKey(ledger.keyId, '2999-01-01T00:00:00.000Z');
    expect(await keyring.changedOnDisk()).toBe(false);
    // A write by anyone else is a change, as before.
    writeFileSync(join(root, 'trust.json'), readFileSync(join(root, 'trust.json')), { mode: 0o600 });
    expect(await keyring.changedOnDisk()).toBe(true);
    await ledger.close();
  });
});

describe('an injected signer', () => {
  it('is refused (KEY_INVALID) when its signatures do not verify under its publicKey, at open and at a reload', async () => {
    const advertised = new LocalSigner(generateJwk());
    let actual = new LocalSigner(generateJwk());
    const signer = {
      keyId: advertised.keyId,
      publicKey: advertised.publicKey,
      sign: (m: Uint8Array) => actual.sign(m),
    };
    const root = tempDir();
    await expect(open(root, { signer })).rejects.toMatchObject({
      code: 'KEY_INVALID',
      message: /do not verify under its publicKey/,
    });
    // The KMS key version moves on under a running process: the next load of the keys refuses it.
    actual = advertised;
    const ledger = await open(root, { signer });
    expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
    actual = new LocalSigner(generateJwk());
    const keyring = (ledger as unknown as { keyring: { reload(): Promise<void> } }).keyring;
    await expect(keyring.reload()).rejects.toMatchObject({ code: 'KEY_INVALID' });
    await ledger.close();
  });

  it('that throws is SIGNER_FAILED with its error as the cause, at open and when a rotation loads the keys again', async () => {
    const own = new LocalSigner(generateJwk());
    const kms = new Error('KMS unreachable');
    let failing = true;
    const signer = {
      keyId: own.keyId,
      publicKey: own.publicKey,
      sign: (m: Uint8Array) => {
        if (failing) throw kms;
        return own.sign(m);
      },
    };
    const root = tempDir();
    const err = await open(root, { signer }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'LedgerError', code: 'SIGNER_FAILED', message: /KMS unreachable/ });
    expect((err as Error).cause).toBe(kms);
    failing = false;
    const ledger = await open(root, { signer });
    failing = true;
    // Revoking a key loads the keys again under the trust lock, which signs the test message first.
    await expect(ledger.revokeKey('ed25519:none')).rejects.toMatchObject({ code: 'SIGNER_FAILED', cause: kms });
    await ledger.close();
  });

  it("that throws is named in SIGNER_FAILED's message as errorText names an error: its message and its causes' (a KMS client's reason), each part cut at 200, never a throw of its own", async () => {
    const message = async (thrown: unknown) => {
      const signer = codedSigner({
        keyId: 'ed25519:kms',
        publicKey: new Uint8Array(32),
        sign: () => {
          throw thrown;
        },
      });
      const err = await Promise.resolve(signer.sign(new Uint8Array(1))).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'SIGNER_FAILED', cause: thrown });
      return (err as Error).message;
    };
    const said = (what: string) =>
      `the injected signer of key "ed25519:kms" failed (${what}): nothing was signed with it; its error is the cause`;
    // The reason a KMS client's error holds in its cause (a name whose every address refused: an AggregateError with
    // no message, its code ECONNREFUSED) was left out: "Error: KMS request failed".
    const refused = Object.assign(new AggregateError([new Error('connect ECONNREFUSED ::1:443')], ''), {
      code: 'ECONNREFUSED',
    });
    expect(await message(new Error('KMS request failed', { cause: refused }))).toBe(
      said('KMS request failed: ECONNREFUSED'),
    );
    expect(await message(new Error('KMS unreachable'))).toBe(said('KMS unreachable'));
    expect(await message('quota exceeded')).toBe(said('quota exceeded'));
    expect(await message(new Error('x'.repeat(100_000), { cause: new Error('y'.repeat(100_000)) }))).toBe(
      said(`${'x'.repeat(200)}…: ${'y'.repeat(200)}…`),
    );
    const trap = Object.defineProperty(new Error(), 'message', {
      get() {
        throw new Error('getter');
      },
    });
    expect(await message(trap)).toBe(said('Error'));
    // As every message: what a terminal acts on is escaped where it is printed (the CLI's printable).
    expect(isTerminalSafe(printable(await message(new Error('\u001b[2Jgone'))))).toBe(true);
  });

  it('whose keyId or publicKey getter throws once openLedger has checked it is KEY_INVALID with its error as the cause, not an uncoded throw', async () => {
    const own = new LocalSigner(generateJwk());
    // openLedger reads each field once to check it; the keyring reads the caller's object again (codedSigner).
    const throwingAfterCheck = (name: 'keyId' | 'publicKey', thrown: unknown) => {
      let reads = 0;
      const value = name === 'keyId' ? own.keyId : own.publicKey;
      return Object.defineProperty(
        { keyId: own.keyId, publicKey: own.publicKey, sign: (m: Uint8Array) => own.sign(m) },
        name,
        {
          get() {
            if (reads++ === 0) return value;
            throw thrown;
          },
        },
      ) as Signer;
    };
    const kms = new Error('KMS request failed', { cause: new Error('connect ECONNREFUSED ::1:443') });
    const keyIdErr = await open(tempDir(), { signer: throwingAfterCheck('keyId', kms) }).catch((e: unknown) => e);
    expect(keyIdErr).toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID', cause: kms });
    expect((keyIdErr as Error).message).toBe(
      "reading the injected signer's keyId failed (KMS request failed: connect ECONNREFUSED ::1:443): the keys are not loaded with it; its error is the cause",
    );
    const publicKeyErr = await open(tempDir(), { signer: throwingAfterCheck('publicKey', 'quota exceeded') }).catch(
      (e: unknown) => e,
    );
    expect(publicKeyErr).toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID', cause: 'quota exceeded' });
    expect((publicKeyErr as Error).message).toBe(
      `reading the injected signer's publicKey of key ${JSON.stringify(own.keyId)} failed (quota exceeded): the keys are not loaded with it; its error is the cause`,
    );
    // Directly, whatever is thrown (a message getter that throws too): named, never a throw of its own.
    const trap = Object.defineProperty(new Error(), 'message', {
      get() {
        throw new Error('getter');
      },
    });
    const err = (() => {
      try {
        codedSigner(
          Object.defineProperty({}, 'keyId', {
            get() {
              throw trap;
            },
          }) as Signer,
        );
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID', cause: trap });
    expect((err as Error).message).toContain('failed (Error)');
  });

  it('whose keyId getter starts throwing while the ledger runs is KEY_INVALID when the keys are loaded again, its error the cause', async () => {
    const own = new LocalSigner(generateJwk());
    let failing = false;
    const kms = new Error('KMS unreachable');
    const signer = {
      get keyId() {
        if (failing) throw kms;
        return own.keyId;
      },
      publicKey: own.publicKey,
      sign: (m: Uint8Array) => own.sign(m),
    };
    const ledger = await open(tempDir(), { signer });
    expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
    failing = true;
    // A reload of the keys (a rotation elsewhere, seen by a read of a shared root, which tolerates KEY_INVALID and
    // SIGNER_FAILED only and then goes on under trust.json alone).
    const keyring = (ledger as unknown as { keyring: { reload(): Promise<void> } }).keyring;
    await expect(keyring.reload()).rejects.toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID', cause: kms });
    failing = false;
    await ledger.close();
  });

  it('whose key moves on while the ledger runs publishes nothing it cannot verify (KEY_INVALID); the head stays resumable', async () => {
    const listed = new LocalSigner(generateJwk());
    let actual = listed;
    // A KMS alias: the same keyId and publicKey, and signatures of whatever key version it points at now.
    const signer = { keyId: listed.keyId, publicKey: listed.publicKey, sign: (m: Uint8Array) => actual.sign(m) };
    const ledger = await open(tempDir(), { signer });
    expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
    actual = new LocalSigner(generateJwk()); // 64-byte signatures still, under another key
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'KEY_INVALID',
      message: /does not verify under the public key trust\.json lists.*nothing was published/,
    });
    expect((await ledger.resume(scope))?.seq).toBe(0);
    expect((await ledger.history(scope)).map((e) => e.manifest.seq)).toEqual([0]);
    actual = listed;
    expect((await ledger.publish(scope, sampleSummary(3))).seq).toBe(1);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });
});

describe('a rotation that cannot write its key files', () => {
  it('is STORAGE_FAILED and leaves trust.json as it was; rotating again once it can write works', async () => {
    const root = tempDir();
    const keyFile = join(tempDir(), 'host.jwk');
    writeFileSync(keyFile, JSON.stringify(generateJwk()), { mode: 0o600 });
    const ledger = await open(root, { keyFile });
    await ledger.publish(scope, sampleSummary(1));
    const trust = readFileSync(join(root, 'trust.json'));
    // Where the new key is staged, once the rotation has read the keys again: its write fails (EISDIR), past the
    // checks made before anything changes (a disk that fills up, an I/O error).
    type Reloads = { reloadKeys(options: object, underLock: boolean): Promise<void> };
    const keyring = (ledger as unknown as { keyring: Reloads }).keyring;
    const reload = keyring.reloadKeys.bind(keyring);
    keyring.reloadKeys = async (options, underLock) => {
      await reload(options, underLock);
      mkdirSync(`${keyFile}.next`);
      keyring.reloadKeys = reload;
    };
    await expect(ledger.rotateKey()).rejects.toMatchObject({
      name: 'StoreError',
      code: 'STORAGE_FAILED',
      message: /stopped before trust\.json was written.*rotate again/,
    });
    expect(readFileSync(join(root, 'trust.json'))).toEqual(trust);
    rmdirSync(`${keyFile}.next`);
    const rotated = await ledger.rotateKey();
    expect(JSON.parse(readFileSync(keyFile, 'utf8'))).toMatchObject({ kid: rotated });
    expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(1);
    expect((await ledger.history(scope)).length).toBe(2);
    await ledger.close();
  });

  it.runIf(asRootWithBuild)(
    "of the caller's, in a directory it cannot write: refused before anything changed, and publishing goes on",
    () => {
      const base = tempDir();
      chmodSync(base, 0o755);
      const [root, keys] = [join(base, 'root'), join(base, 'keys')];
      mkdirSync(root, { mode: 0o700 });
      mkdirSync(keys, { mode: 0o755 }); // root's: the other user cannot write in it
      const keyFile = join(keys, 'host.jwk');
      writeFileSync(keyFile, JSON.stringify(generateJwk()), { mode: 0o600 });
      chownSync(root, NOBODY, NOBODY);
      chownSync(keyFile, NOBODY, NOBODY);
      const out = runAsNobody(
        base,
        `const [root, keyFile] = ${JSON.stringify([root, keyFile])};
        const scope = { principal: 'p', session: 's', run: 'r' };
        const summary = { task: 't', state: 's', nextSteps: ['n'] };
        const out = [];
        let l = await openLedger({ root, host: 'h', keyFile, onNotice() {} });
        await l.publish(scope, summary);
        await l.rotateKey().then(() => out.push('rotated'), (e) => out.push(e.name + ' ' + e.code));
        await l.publish(scope, summary).then((r) => out.push(r.seq), (e) => out.push(e.code));
        out.push(l.trustStore().keys.length);
        await l.close();
        l = await openLedger({ root, host: 'h', keyFile, onNotice() {} });
        await l.publish(scope, summary).then((r) => out.push(r.seq), (e) => out.push(e.code));
        await l.close();
        console.log(JSON.stringify(out));`,
      );
      expect(out).toEqual(['StoreError STORAGE_FAILED', 1, 1, 2]);
    },
  );
});

describe('key files and trust.json that cannot be read', () => {
  it('a keyFile that does not exist is KEY_INVALID ("no such key file"), not a raw ENOENT', async () => {
    const keyFile = join(tempDir(), 'nope.jwk');
    await expect(open(tempDir(), { keyFile })).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'KEY_INVALID',
      message: `no such key file "${keyFile}"`,
    });
  });

  it('a keyFile that does not exist, or is no key, is refused before anything is written: no root, no store in an empty one', async () => {
    const base = tempDir();
    const bad = join(base, 'bad.jwk');
    writeFileSync(bad, '{"kty":"OKP"}', { mode: 0o600 });
    for (const keyFile of [join(base, 'nope.jwk'), bad]) {
      const root = join(tempDir(), 'root');
      await expect(open(root, { keyFile })).rejects.toMatchObject({ code: 'KEY_INVALID' });
      expect(existsSync(root)).toBe(false);
      const empty = tempDir();
      await expect(open(empty, { keyFile })).rejects.toMatchObject({ code: 'KEY_INVALID' });
      expect(readdirSync(empty)).toEqual([]);
    }
  });

  it('a keyFile missing while a rotation that stopped after trust.json staged its new key beside it: the open moves it into place', async () => {
    const root = tempDir();
    const keyFile = join(tempDir(), 'host.jwk');
    writeFileSync(keyFile, JSON.stringify(generateJwk()), { mode: 0o600 });
    let ledger = await open(root, { keyFile });
    await ledger.publish(scope, sampleSummary(1));
    const rotated = await ledger.rotateKey();
    await ledger.close();
    // A rotation stopped between writing trust.json and moving its staged file: the new key waits at <keyFile>.next,
    // and here nothing is at keyFile (the old key file removed by hand). The open installs the staged key.
    renameSync(keyFile, `${keyFile}.next`);
    ledger = await open(root, { keyFile });
    try {
      expect(ledger.keyId).toBe(rotated);
      expect(existsSync(keyFile)).toBe(true);
      expect(existsSync(`${keyFile}.next`)).toBe(false);
      expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(1);
    } finally {
      await ledger.close();
    }
    // A staged key trust.json does not list is removed, and the missing key file is then refused as ever.
    unlinkSync(keyFile);
    writeFileSync(`${keyFile}.next`, JSON.stringify(generateJwk()), { mode: 0o600 });
    await expect(open(root, { keyFile })).rejects.toMatchObject({ code: 'KEY_INVALID', message: /no such key file/ });
    expect(existsSync(`${keyFile}.next`)).toBe(false);
  });

  it("a key file whose public x is another key's is KEY_INVALID: a keyFile before anything is written, the host key in keys/ at an open", async () => {
    const mine = generateJwk();
    const other = generateJwk();
    const mismatched = { ...mine, x: other.x };
    expect(() => new LocalSigner(mismatched)).toThrow(
      expect.objectContaining({ code: 'KEY_INVALID', message: 'the JWK public key does not match its private key' }),
    );
    const keyFile = join(tempDir(), 'host.jwk');
    writeFileSync(keyFile, JSON.stringify(mismatched), { mode: 0o600 });
    const root = join(tempDir(), 'root');
    await expect(open(root, { keyFile })).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'KEY_INVALID',
      message: 'the JWK public key does not match its private key',
    });
    expect(existsSync(root)).toBe(false);
    // The store's own host key file, its x replaced by another key's: refused, never signed with.
    const store = tempDir();
    await (await open(store)).close();
    const hostKey = join(
      store,
      'keys',
      readdirSync(join(store, 'keys')).find((f) => !f.startsWith('checkpoint-'))!,
    );
    const jwk = JSON.parse(readFileSync(hostKey, 'utf8')) as { x: string };
    writeFileSync(hostKey, JSON.stringify({ ...jwk, x: other.x }), { mode: 0o600 });
    await expect(open(store)).rejects.toMatchObject({
      code: 'KEY_INVALID',
      message: 'the JWK public key does not match its private key',
    });
  });

  it('a trust.json that lists the key id this store signs with under another public key is KEY_INVALID', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const keyId = ledger.keyId;
    await ledger.publish(scope, sampleSummary(1));
    await ledger.close();
    const path = join(root, 'trust.json');
    const trust = JSON.parse(readFileSync(path, 'utf8')) as { keys: Array<{ keyId: string; publicKey: string }> };
    const listed = trust.keys.find((k) => k.keyId === keyId)!;
    listed.publicKey = generateJwk().x;
    writeFileSync(path, JSON.stringify(trust), { mode: 0o600 });
    await expect(open(root)).rejects.toMatchObject({
      name: 'LedgerError',
      code: 'KEY_INVALID',
      message: `trust.json lists key "${keyId}" with another public key`,
    });
    // Nothing was rewritten: trust.json still holds the other key.
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(trust);
  });

  it.runIf(asRootWithBuild)(
    'an unreadable trust.json or key file is STORAGE_FAILED, with the errno error as cause',
    () => {
      const base = tempDir();
      chmodSync(base, 0o755);
      mkdirSync(join(base, 'root'), { mode: 0o700 });
      chownSync(join(base, 'root'), NOBODY, NOBODY);
      const out = runAsNobody(
        base,
        `const { chmodSync, readdirSync } = await import('node:fs');
      const root = ${JSON.stringify(join(base, 'root'))};
      const out = [];
      const attempt = () =>
        openLedger({ root, host: 'h' }).then(
          (l) => l.close().then(() => out.push('opened')),
          (e) => out.push([e.name, e.code, e.cause?.code]),
        );
      await (await openLedger({ root, host: 'h' })).close();
      chmodSync(root + '/trust.json', 0o200);
      await attempt();
      chmodSync(root + '/trust.json', 0o600);
      const key = readdirSync(root + '/keys').find((f) => !f.startsWith('checkpoint-'));
      chmodSync(root + '/keys/' + key, 0o200);
      await attempt();
      console.log(JSON.stringify(out));`,
      );
      expect(out).toEqual([
        ['StoreError', 'STORAGE_FAILED', 'EACCES'],
        ['StoreError', 'STORAGE_FAILED', 'EACCES'],
      ]);
    },
  );
});

describe('revokeKey --at', () => {
  it('refuses a time trust.json could not hold, and leaves trust.json loadable and unchanged', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const before = readFileSync(join(root, 'trust.json'), 'utf8');
    for (const at of ['2026-11-30T10:00:30Z', 'yesterday', '2026-11-30 10:00:30.000'])
      await expect(ledger.revokeKey(ledger.keyId, at)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(before);
    await ledger.close();
    await (await open(root)).close();
  });
});

describe('a revocation only moves earlier', () => {
  it('revoking again later keeps the first revocation: what it ended stays refused', async () => {
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const root = tempDir();
    const ledger = await open(root, { clock: () => new Date(now) });
    const key = ledger.keyId;
    now += 1000;
    await ledger.publish(scope, sampleSummary('signed before the compromise was found'));
    now += 60_000;
    expect(await ledger.revokeKey(key, '2026-11-30T10:00:00.500Z')).toBe('2026-11-30T10:00:00.500Z');
    await expect(ledger.resume(scope)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    now += 60_000;
    // A plain `keys revoke` run again: "now" is later than the first time, and the first time is what it reports.
    expect(await ledger.revokeKey(key)).toBe('2026-11-30T10:00:00.500Z');
    await expect(ledger.resume(scope)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    const listed = (JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as { keys: TrustedKey[] }).keys;
    expect(listed.find((k) => k.keyId === key)?.revokedAt).toBe('2026-11-30T10:00:00.500Z');
    expect((await ledger.log.signingKeys.get(key))?.closedAt).toBe('2026-11-30T10:00:00.500Z');
    await ledger.close();
  });

  it('a rotation after a revocation leaves the window the log closed where the revocation closed it', async () => {
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const ledger = await open(tempDir(), { clock: () => new Date(now) });
    const key = ledger.keyId;
    now += 1000;
    await ledger.publish(scope, sampleSummary('before'));
    now += 60_000;
    await ledger.revokeKey(key, '2026-11-30T10:00:30.000Z');
    now += 60_000;
    await ledger.rotateKey(); // what KEY_REVOKED tells the operator to do next
    expect((await ledger.log.signingKeys.get(key))?.closedAt).toBe('2026-11-30T10:00:30.000Z');
    expect(ledger.trustStore().keys.find((k) => k.keyId !== key)?.notBefore).toBe('2026-11-30T10:02:01.000Z');
    expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] }); // before: KEY_WINDOW_MISMATCH
    await ledger.publish({ ...scope, session: 's2' }, sampleSummary('after, with the new key'));
    expect((await ledger.resume({ ...scope, session: 's2' }))?.seq).toBe(0);
    await ledger.close();
  });
});

describe('trust stores', () => {
  const key: TrustedKey = {
    host: 'host-a',
    keyId: 'ed25519:00112233445566778899aabbccddeeff',
    publicKey: Buffer.alloc(32, 7).toString('base64url'),
    notBefore: '2026-01-01T00:00:00.000Z',
  };

  it('refuses two entries for one (host, keyId): an unrevoked copy must not hide a revocation', () => {
    const store = { version: 1, keys: [key, { ...key, revokedAt: '2026-02-01T00:00:00.000Z' }] };
    expect(() => parseTrustStore(JSON.stringify(store))).toThrow(/listed twice/);
    expect(() => parseTrustStore(store)).toThrow(expect.objectContaining({ code: 'TRUST_INVALID' }));
  });

  it('merges a key listed by two sources to the most restrictive window', () => {
    const merged = mergeTrust(
      { version: 1, keys: [key] },
      { version: 1, keys: [{ ...key, notAfter: '2026-03-01T00:00:00.000Z', revokedAt: '2026-02-01T00:00:00.000Z' }] },
    );
    expect(merged.keys).toEqual([
      { ...key, notAfter: '2026-03-01T00:00:00.000Z', revokedAt: '2026-02-01T00:00:00.000Z' },
    ]);
    const vkey = 'example.com/log+01234567+AQ' + Buffer.alloc(32, 9).toString('base64').slice(2);
    const checkpointKey = { host: 'host-a', keyId: key.keyId, vkey, notBefore: '2026-01-01T00:00:00.000Z' };
    const revoked = { ...checkpointKey, revokedAt: '2026-02-01T00:00:00.000Z' };
    for (const [first, second] of [
      [checkpointKey, revoked],
      [revoked, checkpointKey],
    ] as const)
      expect(
        mergeTrust(
          { version: 1, keys: [], checkpointKeys: [first] },
          { version: 1, keys: [], checkpointKeys: [second] },
        ).checkpointKeys,
      ).toEqual([revoked]);
    const other = { ...key, publicKey: Buffer.alloc(32, 8).toString('base64url') };
    expect(() => mergeTrust({ version: 1, keys: [key] }, { version: 1, keys: [other] })).toThrow(/two public keys/);
  });
});

describe('a root other processes share (a log that is not exclusive)', () => {
  it("reads trust.json alone again before a read: another process's rotation, half done, does not fail it", async () => {
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    const shared = Object.create(level, { exclusive: { value: false } }) as LevelManifestLog;
    const root = join(base, 'root');
    const ledger = await open(root, { log: shared });
    try {
      await ledger.publish(scope, sampleSummary(1));
      // Another process between its two writes of a rotation after a revocation: trust.json already lists this
      // process's checkpoint key as revoked; the new key files are not written yet.
      const path = join(root, 'trust.json');
      const t = JSON.parse(readFileSync(path, 'utf8')) as { checkpointKeys: Array<Record<string, string>> };
      const at = new Date().toISOString();
      t.checkpointKeys = t.checkpointKeys.map((k) => ({ ...k, notAfter: at, revokedAt: at }));
      writeFileSync(`${path}.x`, JSON.stringify(t), { mode: 0o600 });
      renameSync(`${path}.x`, path);
      expect((await ledger.resume(scope))?.seq).toBe(0);
      expect(ledger.trustStore().checkpointKeys?.[0]?.revokedAt).toBe(at); // read again
    } finally {
      await ledger.close();
      await level.close();
    }
  });
});

describe('checkpoints after rotations', () => {
  const vouchedBy = (note: string, l: Ledger) => openNote(note, checkpointVerifiers(l.trustStore())).sigs.length;

  it('records the key a re-signed note was signed with, though a rotation lands while it is pinned', async () => {
    const ledger = await open();
    try {
      await ledger.publish(scope, sampleSummary(1));
      await ledger.rotateKey(); // the pinned note is now another key's: the next check signs it again
      const pin = (ledger as unknown as { checkpoints: { pin: { write: (...a: unknown[]) => Promise<void> } } })
        .checkpoints.pin;
      const write = pin.write.bind(pin);
      let entered!: () => void;
      let release!: () => void;
      const inWrite = new Promise<void>((r) => (entered = r));
      const gate = new Promise<void>((r) => (release = r));
      pin.write = async (...args: unknown[]) => {
        pin.write = write;
        entered();
        await gate;
        return write(...args);
      };
      const second = ledger.keyId;
      const resigned = ledger.checkpoint();
      await inWrite;
      await ledger.rotateKey(); // a third key while the second's note is being pinned
      release();
      await resigned;
      await ledger.revokeKey(second, '2000-01-01T00:00:00.000Z'); // takes the second checkpoint key with it
      expect(vouchedBy((await ledger.checkpoint()).note, ledger)).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  /** Two ledgers on one root sharing one log that says it is not exclusive: two processes of a host, as on PostgreSQL. */
  async function twoProcessesOfOneRoot() {
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    const shared = Object.create(level, {
      exclusive: { value: false },
      close: { value: async () => {} },
    }) as LevelManifestLog;
    const root = join(base, 'root');
    return { root, level, a: await open(root, { log: shared }), b: await open(root, { log: shared }) };
  }

  it('on a shared root, a process that only reads signs with the keys another process rotated to', async () => {
    const { level, a, b } = await twoProcessesOfOneRoot();
    try {
      await a.publish(scope, sampleSummary(1));
      const before = a.checkpointVerifierKey;
      await b.revokeKey(b.keyId);
      await b.rotateKey();
      expect((await a.resume(scope))?.seq).toBe(0);
      expect(a.checkpointVerifierKey).not.toBe(before);
      const small = await a.checkpoint();
      expect(vouchedBy(small.note, a)).toBe(1);
      // And a larger tree pinned with the new key is known as larger: A does not pin its smaller one over it.
      await b.publish({ ...scope, session: 's2' }, sampleSummary(2));
      const big = await b.checkpoint();
      type Judge = { pinsLargerTree(n: string, c: { origin: string; size: number; root: Uint8Array }): boolean };
      const guard = (a as unknown as { checkpoints: Judge }).checkpoints;
      expect(small.checkpoint.size).toBe(1);
      expect(guard.pinsLargerTree(big.note, small.checkpoint)).toBe(true);
      // Its next check starts from that pin: A's checkpoint is B's larger one.
      expect((await a.checkpoint()).note).toBe(big.note);
    } finally {
      await a.close();
      await b.close();
      await level.close();
    }
  });

  it.each(['checkpoint', 'checkLog', 'inclusionProof', 'consistencyProof', 'history', 'resume'] as const)(
    'on a shared root, %s after another process revoked and rotated signs no checkpoint with the revoked key',
    async (call) => {
      const { root, level, a, b } = await twoProcessesOfOneRoot();
      try {
        const first = await a.publish(scope, sampleSummary(1));
        // The runbook for a compromised key: revoke it, then rotate (which revokes the old checkpoint key too).
        await b.revokeKey(b.keyId);
        await b.rotateKey();
        await b.publish(scope, sampleSummary(2));
        const calls = {
          checkpoint: () => a.checkpoint(),
          checkLog: () => a.checkLog(),
          inclusionProof: () => a.inclusionProof(first.id),
          consistencyProof: () => a.consistencyProof(1),
          history: () => a.history(scope),
          resume: () => a.resume(scope),
        };
        await calls[call]();
        // What a pinned (and exported) now: a note trust.json on disk vouches for.
        const onDisk = parseTrustStore(readFileSync(join(root, 'trust.json'), 'utf8'));
        const pinned = (a as unknown as { checkpoints: { pinned?: { note: string } } }).checkpoints.pinned!.note;
        expect(openNote(pinned, checkpointVerifiers(onDisk)).sigs.length).toBe(1);
      } finally {
        await a.close();
        await b.close();
        await level.close();
      }
    },
  );
});

describe('a root that serves a new log', () => {
  it('lists a checkpoint key of its own for the new origin (the old one ended), and opens again', async () => {
    const root = tempDir();
    const first = await openLedger({ root, host: 'h', onNotice: () => {} });
    await first.publish(scope, sampleSummary(0));
    const oldVkey = first.checkpointVerifierKey;
    await first.close();
    // The log removed on purpose and its pin moved aside, as the FORK the next open reports says to.
    rmSync(join(root, 'manifests-v1'), { recursive: true });
    await expect(openLedger({ root, host: 'h', onNotice: () => {} })).rejects.toMatchObject({ code: 'FORK' });
    for (const name of readdirSync(join(root, 'checkpoints')))
      if (name.endsWith('.pin'))
        renameSync(join(root, 'checkpoints', name), join(root, 'checkpoints', `${name}.aside`));
    const second = await openLedger({ root, host: 'h', onNotice: () => {} });
    const newVkey = second.checkpointVerifierKey;
    await second.publish(scope, sampleSummary(1));
    await second.close();
    const trust = parseTrustStore(readFileSync(join(root, 'trust.json'), 'utf8'));
    const keys = trust.checkpointKeys!.filter((k) => k.host === 'h');
    expect(new Set(keys.map((k) => k.keyId)).size).toBe(2);
    expect(keys.find((k) => k.vkey === oldVkey)?.notAfter).toBeDefined();
    expect(keys.find((k) => k.vkey === newVkey)?.notAfter).toBeUndefined();
    const third = await openLedger({ root, host: 'h', onNotice: () => {} });
    try {
      expect(third.checkpointVerifierKey).toBe(newVkey);
      const { note } = await third.checkpoint();
      expect(openNote(note, checkpointVerifiers(third.trustStore())).sigs.length).toBe(1);
    } finally {
      await third.close();
    }
  });
});

describe('key files and trust files of enormous size', () => {
  it('are refused before they are read: TRUST_INVALID for trust.json, KEY_INVALID for a key file', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    const keyFile = hostKeyPath(root, 'h');
    await ledger.close();
    const trustPath = join(root, 'trust.json');
    const trustText = readFileSync(trustPath);
    truncateSync(trustPath, 600 * 1024 * 1024); // sparse: no disk used, 600 MB to a reader
    await expect(openLedger({ root, host: 'h', onNotice: () => {} })).rejects.toMatchObject({
      code: 'TRUST_INVALID',
      message: expect.stringMatching(/over 16777216/),
    });
    writeFileSync(trustPath, trustText);
    truncateSync(keyFile, 600 * 1024 * 1024);
    await expect(openLedger({ root, host: 'h', onNotice: () => {} })).rejects.toMatchObject({
      code: 'KEY_INVALID',
      message: expect.stringMatching(/not a key/),
    });
  });
});

describe('the trust option', () => {
  it('is checked like a trust file: a window time that does not parse is TRUST_INVALID, not a window left open', async () => {
    const root = tempDir();
    const first = await open(root);
    await first.publish(scope, sampleSummary('x'));
    const listed = first.trustStore().keys[0]!;
    await first.close();
    const garbled = { version: 1, keys: [{ ...listed, revokedAt: '2000-01-01 garbage' }] };
    await expect(open(root, { trust: garbled as never })).rejects.toMatchObject({ code: 'TRUST_INVALID' });
    const noDate = { version: 1, keys: [{ ...listed, notBefore: '2026-13-01T00:00:00.000Z' }] };
    await expect(open(root, { trust: noDate as never })).rejects.toMatchObject({ code: 'TRUST_INVALID' });
    const revoked = { version: 1 as const, keys: [{ ...listed, revokedAt: '2000-01-01T00:00:00.000Z' }] };
    const ledger = await open(root, { trust: revoked });
    await expect(ledger.resume(scope)).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await ledger.close();
  });

  it('a lookup refuses a bound that does not parse rather than skipping it', () => {
    const listed: TrustedKey = {
      host: 'h',
      keyId: 'ed25519:00112233445566778899aabbccddeeff',
      publicKey: Buffer.alloc(32, 7).toString('base64url'),
      notBefore: '2026-01-01T00:00:00.000Z',
    };
    const at = '2026-06-01T00:00:00.000Z';
    const lookup = (k: TrustedKey) => findTrustedKey({ version: 1, keys: [k] }, 'h', listed.keyId, at);
    expect(lookup(listed)).toMatchObject({ ok: true });
    expect(lookup({ ...listed, revokedAt: 'soon' })).toMatchObject({ ok: false, code: 'KEY_REVOKED' });
    expect(lookup({ ...listed, notAfter: 'later' })).toMatchObject({ ok: false, code: 'KEY_EXPIRED' });
    expect(lookup({ ...listed, notBefore: 'once' })).toMatchObject({ ok: false, code: 'KEY_EXPIRED' });
  });
});

describe('ownership of what the store trusts', () => {
  // Making a file another user owns takes root; as another user the refusal cannot be provoked.
  const asRoot = process.getuid?.() === 0;
  const stranger = 4321;

  it.runIf(asRoot)('refuses a store root, a key file or a trust.json owned by another user', async () => {
    const root = tempDir();
    await (await open(root)).close();
    const keyFile = join(root, 'keys', readdirKey(root));
    // The file named quoted, the sentence not (it was quoted whole for trust.json: `"…/trust.json is owned by …"`).
    for (const [path, code, named] of [
      [join(root, 'trust.json'), 'KEY_FILE_UNSAFE', `${JSON.stringify(join(root, 'trust.json'))} is owned by uid 4321`],
      [keyFile, 'KEY_FILE_UNSAFE', `key file ${JSON.stringify(keyFile)} is owned by uid 4321`],
      [join(root, 'keys'), 'UNSAFE_PATH', 'owned by uid 4321'],
      [root, 'UNSAFE_ROOT', 'owned by uid 4321'],
    ] as const) {
      chownSync(path, stranger, stranger);
      await expect(open(root), path).rejects.toMatchObject({ code, message: expect.stringContaining(named) as string });
      chownSync(path, 0, 0);
    }
    await (await open(root)).close();
  });
});

function readdirKey(root: string): string {
  return readdirSync(join(root, 'keys')).find((n) => n.endsWith('.jwk'))!;
}

describe('revoke(principal, "*")', () => {
  it('resolves only after a publish already past its authorization check has committed', async () => {
    const inner = await LevelManifestLog.open(join(tempDir(), 'log'));
    let holdAppend!: () => void;
    const held = new Promise<void>((r) => (holdAppend = r));
    let appendStarted!: () => void;
    const started = new Promise<void>((r) => (appendStarted = r));
    const events: string[] = [];
    const log = Object.assign(Object.create(inner), {
      append: async (...args: Parameters<typeof inner.append>) => {
        appendStarted();
        await held;
        await inner.append(...args);
        events.push('append');
      },
    });
    const ledger = await open(tempDir(), { log });
    const publishing = ledger.publish(scope, sampleSummary(1));
    await started;
    const revoking = ledger.revoke('alice', '*').then(() => events.push('revoke'));
    await new Promise((r) => setTimeout(r, 50));
    holdAppend();
    await Promise.all([publishing, revoking]);
    expect(events).toEqual(['append', 'revoke']);
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'REVOKED' });
    await ledger.close();
    await inner.close();
  });
});

describe('openLedger', () => {
  it('refuses postgres beside a log or blobs of the caller (one half would be a private store under root)', async () => {
    const other = await open();
    const postgres = { connectionString: 'postgres://nowhere.invalid/db' };
    for (const extra of [{ blobs: other.blobs }, { log: other.log }])
      await expect(open(tempDir(), { postgres, ...extra })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: /postgres opens both/,
      });
    await other.close();
  });

  it('with createHostKey: false refuses a host without a key (KEY_INVALID, nothing written); keyFile and signer go on', async () => {
    const root = tempDir();
    await (await open(root)).close(); // host-a has its key
    const entries = () => readdirSync(root, { recursive: true }).sort();
    const before = entries();
    await expect(open(root, { host: 'host-b', createHostKey: false })).rejects.toMatchObject({
      code: 'KEY_INVALID',
      // What a library caller does about it too, not only the CLI's flags.
      message: expect.stringMatching(
        /^host "host-b" has no signing key in .* hosts with keys here: "host-a" \(choose one with --host, the library's host option\), or `init --host host-b` \(an open without createHostKey: false\) adds this host$/,
      ),
    });
    expect(entries()).toEqual(before);
    // The keyring refuses too, for a key file gone after the open's own check.
    await expect(
      Keyring.open({ root, host: 'host-b', origin: 'o', clock: () => new Date(), createHostKey: false }),
    ).rejects.toMatchObject({ code: 'KEY_INVALID' });
    expect(entries()).toEqual(before);
    await (await open(root, { createHostKey: false })).close(); // host-a: as before
    const keyFile = join(tempDir(), 'b.jwk');
    await writeKeyFile(keyFile, generateJwk());
    const withFile = await open(root, { host: 'host-b', createHostKey: false, keyFile });
    expect(withFile.keyId).toBe(new LocalSigner(JSON.parse(readFileSync(keyFile, 'utf8'))).keyId);
    await withFile.close();
  });

  it('names the host, not the principal, when the host id is invalid', async () => {
    await expect(open(tempDir(), { host: 'bad host' })).rejects.toMatchObject({
      code: 'INVALID_ID',
      message: expect.stringMatching(/^host "bad host"/),
    });
  });
});

describe('a host key file restored from before the last rotation', () => {
  it('is refused at publish (KEY_EXPIRED) naming the current key trust.json lists, and saying to restore its file', async () => {
    const root = tempDir();
    const base = { root, host: 'prod-1', onNotice: () => {} };
    let ledger = await openLedger(base);
    await ledger.publish(scope, sampleSummary(0));
    const keyPath = join(root, 'keys', `${digestOf(new TextEncoder().encode('prod-1')).slice(7)}.jwk`);
    const backup = readFileSync(keyPath);
    const current = await ledger.rotateKey();
    await ledger.close();
    writeFileSync(keyPath, backup, { mode: 0o600 });
    ledger = await openLedger(base);
    try {
      const err = await ledger.publish(scope, sampleSummary(1)).then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(err?.code).toBe('KEY_EXPIRED');
      expect(err?.message).toContain(JSON.stringify(current));
      expect(err?.message).toContain('restored from before');
      expect(err?.message).toContain(keyPath);
    } finally {
      await ledger.close();
    }
  });
});

describe('a host key of this host that the open was not given', () => {
  it('(another key file put in place of the default one) is named as read from that file, not as made anew', async () => {
    const root = tempDir();
    const notices: string[] = [];
    const base = { root, host: 'prod-1', onNotice: (m: string) => notices.push(m) };
    let ledger = await openLedger(base);
    const key = ledger.keyId;
    await ledger.publish(scope, sampleSummary(0));
    await ledger.close();
    // The operator copies another store's (or host's) key file over this host's own.
    const keyPath = join(root, 'keys', `${digestOf(new TextEncoder().encode('prod-1')).slice(7)}.jwk`);
    rmSync(keyPath);
    await writeKeyFile(keyPath, generateJwk());
    ledger = await openLedger(base);
    const foreign = ledger.keyId;
    await ledger.close();
    expect(foreign).not.toBe(key);
    const notice = notices.find((m) => m.includes(JSON.stringify(key)));
    expect(notice).toBeDefined();
    expect(notice).not.toContain('made anew');
    expect(notice).not.toContain('no key file');
    expect(notice).toContain(`read from ${JSON.stringify(keyPath)}`);
  });

  for (const kind of ['keyFile', 'signer', 'lost default key file'] as const) {
    it(`(${kind}) stays current beside the key this open signs with, and the notice says how to end it`, async () => {
      const root = tempDir();
      const notices: string[] = [];
      const base = { root, host: 'prod-1', onNotice: (m: string) => notices.push(m) };
      let provided: { keyFile?: string; signer?: Signer } = {};
      if (kind === 'keyFile') {
        const keyFile = join(tempDir(), 'provisioned.jwk');
        await writeKeyFile(keyFile, generateJwk());
        provided = { keyFile };
      } else if (kind === 'signer') {
        // A KMS names its keys as it likes: the suggested command must quote what a shell would act on.
        const kms = new LocalSigner(generateJwk());
        provided = {
          signer: { keyId: "kms:key's-$(id)", publicKey: kms.publicKey, sign: (m: Uint8Array) => kms.sign(m) },
        };
      }
      let ledger = await openLedger({ ...base, ...provided });
      const key = ledger.keyId;
      await ledger.publish(scope, sampleSummary(0));
      await ledger.close();
      if (kind === 'lost default key file')
        rmSync(join(root, 'keys', `${digestOf(new TextEncoder().encode('prod-1')).slice(7)}.jwk`));
      // An open without the key (every CLI command of this host: it has no --key-file).
      const other = await openLedger(base);
      const made = other.keyId;
      expect(made).not.toBe(key);
      if (kind === 'signer') expect(shellWord(key)).toBe(`'kms:key'\\''s-$(id)'`);
      await other.close();
      expect(notices.filter((m) => m.includes(JSON.stringify(key)))).toEqual([
        expect.stringContaining(`if ${JSON.stringify(key)} is lost, revoke it (\`keys revoke ${shellWord(key)}\`)`),
      ]);
      if (kind !== 'lost default key file') {
        // The provisioned key still signs: nothing ended it.
        ledger = await openLedger({ ...base, ...provided });
        expect(ledger.keyId).toBe(key);
        expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(1);
      } else {
        // A key that is lost: the operator revokes it, and the store stays sound.
        ledger = await openLedger(base);
        await ledger.revokeKey(key);
        expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(1);
        expect((await fsck(ledger)).findings).toEqual([]);
      }
      const keys = ledger.trustStore().keys;
      await ledger.close();
      expect(keys.find((k) => k.keyId === made)?.notAfter).toBeUndefined();
      expect(keys.find((k) => k.keyId === key)?.notAfter).toBeUndefined();
    });
  }
});

describe('notices to a library caller', () => {
  it('reach onNotice terminal-safe and on one line, whatever the paths they name hold (a lost key file under a root named with a bidi override and a line separator)', async () => {
    const root = join(tempDir(), 'store\u202e\u2028x');
    const notices: string[] = [];
    const base = { root, host: 'prod-1', onNotice: (m: string) => notices.push(m) };
    let ledger = await openLedger(base);
    await ledger.publish(scope, sampleSummary(0));
    await ledger.close();
    rmSync(join(root, 'keys', `checkpoint-${digestOf(new TextEncoder().encode('prod-1')).slice(7)}.jwk`));
    ledger = await openLedger(base);
    await ledger.close();
    expect(notices).toHaveLength(1);
    // The path is still named, quoted as refusals quote a value (its characters as \uXXXX escapes), once.
    expect(notices[0]).toContain('store\\u202e\\u2028x/keys/');
    expect(notices[0]).toContain('the checkpoint key file of host');
    expect(isTerminalSafe(notices[0]!) && !notices[0]!.includes('\n')).toBe(true);
  });
});

describe('a lost checkpoint key file', () => {
  it('is made anew, the lost key ends, the pin it signed still verifies, and the notice says what a copy could do', async () => {
    const root = tempDir();
    const notices: string[] = [];
    const base = { root, host: 'prod-1', onNotice: (m: string) => notices.push(m) };
    let ledger = await openLedger(base);
    const hostKey = ledger.keyId;
    await ledger.publish(scope, sampleSummary(0)); // the pin is signed by the first checkpoint key
    const [lost] = ledger.trustStore().checkpointKeys!;
    await ledger.close();
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url)), ...args], {
        encoding: 'utf8',
      });
    const store = ['--root', root, '--host', 'prod-1'];
    const before = join(tempDir(), 'before'); // a bundle handed out while the lost key was current
    expect(cli(['export', ...store, '--out', before]).status).toBe(0);
    rmSync(join(root, 'keys', `checkpoint-${digestOf(new TextEncoder().encode('prod-1')).slice(7)}.jwk`));
    ledger = await openLedger(base); // reads the pin back under the old key, pins again with the new one
    const keys = ledger.trustStore().checkpointKeys!;
    expect(keys).toHaveLength(2);
    const made = keys.find((k) => k.keyId !== lost!.keyId)!;
    expect(keys.find((k) => k.keyId === lost!.keyId)).toMatchObject({ notAfter: made.notBefore });
    expect(keys.find((k) => k.keyId === lost!.keyId)?.revokedAt).toBeUndefined();
    expect(made.notAfter).toBeUndefined();
    expect(notices).toEqual([
      expect.stringContaining(
        `a new checkpoint key ${JSON.stringify(made.keyId)} is listed, and the lost one, ${JSON.stringify(lost!.keyId)}, ended now`,
      ),
    ]);
    expect(notices[0]).toContain(
      `if one may exist, revoke it (\`keys revoke ${shellWord(lost!.keyId)}\`), then export again: a bundle exported before carries a checkpoint it signed, which then verifies no more`,
    );
    expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(1);
    expect((await fsck(ledger)).findings).toEqual([]);
    await ledger.close();
    // What the notice says to do, as the operator runs it: the CLI's `keys revoke` of the lost key (no longer the
    // current one); the host key is untouched.
    const revoked = cli(['keys', 'revoke', lost!.keyId, ...store]);
    expect(revoked.status, revoked.stderr).toBe(0);
    ledger = await openLedger(base);
    expect(ledger.trustStore().checkpointKeys!.find((k) => k.keyId === lost!.keyId)?.revokedAt).toBeDefined();
    expect(ledger.keyId).toBe(hostKey);
    expect((await ledger.publish(scope, sampleSummary(2))).seq).toBe(2);
    expect((await fsck(ledger)).findings).toEqual([]);
    await ledger.close();
    const checked = cli(['fsck', ...store]);
    expect(checked.status, checked.stderr).toBe(0);
    // As the notice says: the bundle exported before carries a checkpoint the lost key signed, which the trust file
    // no longer vouches for; a bundle exported again verifies.
    const trustFile = join(tempDir(), 'trust.json');
    expect(cli(['keys', 'export', ...store, '--out', trustFile]).status).toBe(0);
    const old = cli(['verify', before, '--trust', trustFile]);
    expect(old.status).toBe(1);
    expect(old.stdout + old.stderr).toContain('CHECKPOINT_UNTRUSTED');
    const again = join(tempDir(), 'again');
    expect(cli(['export', ...store, '--out', again]).status).toBe(0);
    const fresh = cli(['verify', again, '--trust', trustFile]);
    expect(fresh.status, fresh.stdout + fresh.stderr).toBe(0);
    notices.length = 0;
    await (await openLedger(base)).close();
    expect(notices).toEqual([]); // nothing lost now
  });
});
