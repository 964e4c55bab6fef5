/**
 * README, "Operating it", Backups: a store restored from before a key rotation (an embedded root, or a PostgreSQL
 * dump), run with the current keys/ and trust.json. trust.json ends the rotated-out key's window; the restored log has
 * not closed it (fsck: KEY_WINDOW_MISMATCH). `keys close KEYID` (`closeKeyWindow`) closes it in the log where
 * trust.json ends it and changes nothing else: no key is revoked, so a bundle exported before the rotation, whose
 * checkpoint the rotated-out checkpoint key signed, still verifies (`keys revoke --at` would revoke that key too).
 */
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { exportBundle } from '../src/ops/export.js';
import { openBundleDir } from '../src/ops/bundle-dir.js';
import { auditBundle } from '../src/ops/audit.js';
import type { TrustStore } from '../manifests/format/trust.js';
import { captureIo } from './support/capture-io.js';
import { describePostgres, pgClientToolOut, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

async function cli(argv: string[]) {
  const c = captureIo({ env: {} });
  const code = await main(argv, c.io);
  return { code, stdout: c.stdout(), stderr: c.stderr() };
}

async function verifies(bundle: string, trust: TrustStore): Promise<{ ok: boolean; findings: unknown[] }> {
  const report = await auditBundle(await openBundleDir(bundle), { trust });
  return { ok: report.ok, findings: report.findings };
}

/**
 * The operator's steps after a restore from before a rotation: fsck names the key, `keys close` closes it in the log,
 * fsck is clean, the store resumes and publishes, and bundles exported before and after verify.
 */
async function remedy(o: {
  open: () => Promise<Ledger>;
  storeArgs: string[];
  old: string;
  before: { bundle: string };
}): Promise<void> {
  let ledger = await o.open();
  const trust = await ledger.storeTrust();
  const end = trust.keys.find((k) => k.keyId === o.old)!.notAfter!;
  expect((await fsck(ledger)).findings).toEqual([
    {
      code: 'KEY_WINDOW_MISMATCH',
      message: `key "${o.old}": trust.json ends its window at ${end}, the log has not closed it (a store restored from before its rotation or revocation? \`keys close ${o.old}\` closes it in the log where trust.json ends it)`,
    },
  ]);
  // The key trust.json holds current, and one it does not list, are refused; nothing is closed.
  await expect(ledger.closeKeyWindow(ledger.keyId)).rejects.toMatchObject({
    code: 'INVALID_ARGUMENT',
    message: expect.stringContaining(`trust.json holds key "${ledger.keyId}" current`) as unknown,
  });
  await expect(ledger.closeKeyWindow('ed25519:00000000000000000000000000000000')).rejects.toMatchObject({
    code: 'KEY_INVALID',
  });
  expect(await ledger.log.signingKeys.get(ledger.keyId)).toBeUndefined();
  await ledger.close();

  expect(await cli(['keys', 'close', ...o.storeArgs])).toMatchObject({
    code: 2,
    stderr: expect.stringContaining('keys close needs a KEYID') as unknown,
  });
  expect(await cli(['keys', 'close', o.old, '--at', '2026-11-30T12:00:00.000Z', ...o.storeArgs])).toMatchObject({
    code: 2,
    stderr: expect.stringContaining('--at is for keys revoke') as unknown,
  });
  const closed = await cli(['keys', 'close', o.old, ...o.storeArgs]);
  expect(closed).toEqual({
    code: 0,
    stdout: `closed ${o.old} in the log at ${end}, where trust.json ends it; trust.json is unchanged\n`,
    stderr: '',
  });
  expect(await cli(['keys', 'close', o.old, ...o.storeArgs])).toEqual({
    code: 0,
    stdout: `already closed ${o.old} in the log at ${end}, where trust.json ends it; nothing changed\n`,
    stderr: '',
  });
  ledger = await o.open();
  expect(await ledger.storeTrust()).toEqual(trust); // nothing revoked, no window moved
  expect((await ledger.log.signingKeys.get(o.old))?.closedAt).toBe(end);
  expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
  // Run again: the same end, and it says nothing changed (it printed "closed … in the log" again, as if it had).
  expect(await ledger.closeKeyWindow(o.old)).toEqual({ at: end, changed: false });
  expect((await ledger.resume(scope))?.seq).toBe(0);
  expect((await ledger.publish(scope, sampleSummary('after the restore'))).seq).toBe(1);
  expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
  const after = join(tempDir(), 'bundle');
  await exportBundle(ledger, { out: after });
  await ledger.close();
  expect(await verifies(after, trust)).toEqual({ ok: true, findings: [] });
  // The bundle exported before the rotation: its checkpoint is the rotated-out checkpoint key's, not revoked.
  expect(await verifies(o.before.bundle, trust)).toEqual({ ok: true, findings: [] });
}

describe('an embedded root restored from before a key rotation, run with the current keys/ and trust.json', () => {
  it('fsck reports KEY_WINDOW_MISMATCH; `keys close` closes the window in the log, and nothing else', async () => {
    const root = tempDir();
    const open = () => openLedger({ root, host: 'h1', onNotice: () => {} });
    let ledger = await open();
    await ledger.publish(scope, sampleSummary(1));
    const old = ledger.keyId;
    const bundle = join(tempDir(), 'bundle');
    await exportBundle(ledger, { out: bundle });
    await ledger.close();
    const backup = join(tempDir(), 'root');
    cpSync(root, backup, { recursive: true });
    ledger = await open();
    await ledger.rotateKey();
    await ledger.publish(scope, sampleSummary(2));
    await ledger.close();
    // The restore: the root from the backup, keys/ and trust.json from the newest key backup (the current ones).
    const keys = join(tempDir(), 'keys');
    cpSync(join(root, 'keys'), join(keys, 'keys'), { recursive: true });
    cpSync(join(root, 'trust.json'), join(keys, 'trust.json'));
    rmSync(root, { recursive: true });
    cpSync(backup, root, { recursive: true });
    rmSync(join(root, 'keys'), { recursive: true });
    cpSync(join(keys, 'keys'), join(root, 'keys'), { recursive: true });
    cpSync(join(keys, 'trust.json'), join(root, 'trust.json'));
    await remedy({ open, storeArgs: ['--root', root, '--host', 'h1'], old, before: { bundle } });
  });

  it('closes a window the log closed later than trust.json ends it (a revocation dated before the rotation)', async () => {
    const root = tempDir();
    const open = () => openLedger({ root, host: 'h1', onNotice: () => {} });
    let ledger = await open();
    await ledger.publish(scope, sampleSummary(1));
    const old = ledger.keyId;
    const signedAt = (await ledger.resume(scope))!.manifest.createdAt;
    await ledger.rotateKey();
    await ledger.close();
    const backup = join(tempDir(), 'root');
    cpSync(root, backup, { recursive: true });
    ledger = await open();
    const revokedAt = new Date(Date.parse(signedAt) + 1).toISOString();
    await ledger.revokeKey(old, revokedAt);
    await ledger.close();
    const trust = join(tempDir(), 'trust.json');
    cpSync(join(root, 'trust.json'), trust);
    rmSync(root, { recursive: true });
    cpSync(backup, root, { recursive: true });
    cpSync(trust, join(root, 'trust.json'));
    ledger = await open();
    expect((await fsck(ledger)).findings).toMatchObject([
      { code: 'KEY_WINDOW_MISMATCH', message: expect.stringContaining(`\`keys close ${old}\``) as unknown },
    ]);
    expect(await ledger.closeKeyWindow(old)).toEqual({ at: revokedAt, changed: true });
    expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
    await ledger.close();
  });

  it('refuses a window the log closed before trust.json ends it: the revocation is run again', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const open = () => openLedger({ root, host: 'h1', clock: () => new Date(now), onNotice: () => {} });
    const ledger = await open();
    await ledger.publish(scope, sampleSummary(1));
    const old = ledger.keyId;
    now += 60_000;
    await ledger.rotateKey();
    const trust = await ledger.storeTrust();
    const end = trust.keys.find((k) => k.keyId === old)!.notAfter!;
    // A revocation that stopped after closing the window in the log, before trust.json.
    await ledger.log.signingKeys.close(old, () => '2026-11-30T10:00:30.000Z');
    await expect(ledger.closeKeyWindow(old)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: `the log closed the window of key "${old}" at 2026-11-30T10:00:30.000Z, before trust.json ends it (${end}): a revocation that stopped after closing it in the log, or a trust.json from before a revocation; run it again (\`keys revoke ${old}\`), which ends the key in trust.json where the log closed it; nothing was changed`,
    });
    expect((await ledger.log.signingKeys.get(old))?.closedAt).toBe('2026-11-30T10:00:30.000Z');
    expect(await ledger.storeTrust()).toEqual(trust);
    await ledger.close();
  });
});

describePostgres('a PostgreSQL dump restored from before a key rotation (README, Backups)', (pg) => {
  const tool = (name: string, args: string[]) => pgClientToolOut(pg, name, args);

  it('fsck reports KEY_WINDOW_MISMATCH; `keys close` closes the window in the log, and nothing else', async () => {
    const root = tempDir();
    const open = () =>
      openLedger({ root, host: 'h1', postgres: { connectionString: pg.connectionString }, onNotice: () => {} });
    let ledger = await open();
    await ledger.publish(scope, sampleSummary(1));
    const old = ledger.keyId;
    const bundle = join(tempDir(), 'bundle');
    await exportBundle(ledger, { out: bundle });
    await ledger.close();
    const savedPins = join(tempDir(), 'checkpoints');
    cpSync(join(root, 'checkpoints'), savedPins, { recursive: true });
    const dump = join(tempDir(), 'dump.sql');
    writeFileSync(dump, tool('pg_dump', ['--schema', 'handoff_ledger']));
    ledger = await open();
    await ledger.rotateKey();
    await ledger.publish(scope, sampleSummary(2));
    await ledger.close();
    // The restore, as README says: the schema dropped, the dump loaded, the pins from the same backup put back; the
    // root's keys/ and trust.json are the current ones.
    await sqlOn(pg.connectionString, 'DROP SCHEMA handoff_ledger CASCADE');
    tool('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-f', dump]);
    rmSync(join(root, 'checkpoints'), { recursive: true });
    cpSync(savedPins, join(root, 'checkpoints'), { recursive: true });
    await remedy({
      open,
      storeArgs: ['--root', root, '--host', 'h1', '--postgres', pg.connectionString],
      old,
      before: { bundle },
    });
  });
});
