/**
 * One key listed for two hosts of a root (trust.json lists each (host, keyId) once, so this is legal: a key file or
 * signer used under two host ids; the keyring lists it for the second host beside the first, docs/DESIGN.md "Keys and
 * trust"). Each listing has its own window, as a manifest's key is looked up for the manifest's host. The log keeps
 * one window per key id. The keyring judges a key's window in trust.json for the host it asks about, never by
 * whichever listing comes first in the file: the other host's listing, ended by that host's rotation, is not this
 * host's.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { generateJwk, writeKeyFile } from '../src/keys/local-signer.js';
import { fsck } from '../src/ops/maintenance.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

/**
 * A root whose trust.json lists one key K first for host "b", then for host "a", and where "b" rotated K out at
 * `bEnd` (its listing ends there, the log closed K there); "a"'s listing of K is still current. `aKeyFile` holds K.
 */
async function sharedKeyRotatedByB() {
  const root = tempDir();
  const dir = tempDir();
  let now = Date.parse('2026-11-30T10:00:00.000Z');
  const clock = () => new Date(now);
  const jwk = generateJwk();
  const bKeyFile = join(dir, 'b.jwk');
  const aKeyFile = join(dir, 'a.jwk');
  await writeKeyFile(bKeyFile, jwk);
  await writeKeyFile(aKeyFile, jwk);
  const notices: string[] = [];
  const onNotice = (m: string) => notices.push(m);
  let ledger = await openLedger({ root, host: 'b', keyFile: bKeyFile, clock, onNotice });
  const keyId = ledger.keyId;
  now += 1_000;
  await ledger.publish(scope, sampleSummary(1));
  await ledger.close();
  now += 1_000;
  ledger = await openLedger({ root, host: 'a', keyFile: aKeyFile, clock, onNotice });
  await ledger.close();
  now += 1_000;
  ledger = await openLedger({ root, host: 'b', keyFile: bKeyFile, clock, onNotice });
  await ledger.rotateKey();
  const listings = ledger.trustStore().keys.filter((k) => k.keyId === keyId);
  await ledger.close();
  expect(listings.map((k) => k.host)).toEqual(['b', 'a']);
  expect(listings[1]!.notAfter).toBeUndefined();
  const bEnd = listings[0]!.notAfter!;
  expect(bEnd).toBeDefined();
  now += 60_000;
  notices.length = 0;
  return { root, clock, onNotice, notices, keyId, aKeyFile, bKeyFile, bEnd, advance: (ms: number) => (now += ms) };
}

/** Opens the root of `sharedKeyRotatedByB` as host "a", with its key file, clock and notices. */
const openAsA = (s: Awaited<ReturnType<typeof sharedKeyRotatedByB>>) =>
  openLedger({ root: s.root, host: 'a', keyFile: s.aKeyFile, clock: s.clock, onNotice: s.onNotice });

describe('a key listed for two hosts, ended by one of them', () => {
  it("the other host's open says the log closed its key's window while trust.json does not end it", async () => {
    const s = await sharedKeyRotatedByB();
    const ledger = await openAsA(s);
    expect(ledger.keyId).toBe(s.keyId);
    expect(s.notices).toContainEqual(
      expect.stringContaining(
        `the log closed the window of key "${s.keyId}" at ${s.bEnd} but trust.json does not end it (host "b", which trust.json lists this key for too, rotated or revoked it there): publish is refused (KEY_EXPIRED) until this host runs \`keys rotate\``,
      ),
    );
    await expect(ledger.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_EXPIRED' });
    await ledger.close();
  });

  it("the other host's rotation ends its listing where the log closed the key, so the two agree", async () => {
    const s = await sharedKeyRotatedByB();
    const ledger = await openAsA(s);
    await ledger.rotateKey();
    const listings = ledger.trustStore().keys.filter((k) => k.keyId === s.keyId);
    expect(listings.map((k) => [k.host, k.notAfter])).toEqual([
      ['b', s.bEnd],
      ['a', s.bEnd],
    ]);
    const next = ledger.trustStore().keys.find((k) => k.host === 'a' && k.keyId === ledger.keyId)!;
    expect(next.notBefore).toBe(s.bEnd);
    expect((await ledger.log.signingKeys.get(s.keyId))?.closedAt).toBe(s.bEnd);
    expect((await fsck(ledger)).findings.filter((f) => f.code === 'KEY_WINDOW_MISMATCH')).toEqual([]);
    await ledger.publish(scope, sampleSummary(2));
    await ledger.close();
  });

  it('a revocation of the key ends every listing where the log closed it', async () => {
    const s = await sharedKeyRotatedByB();
    const ledger = await openAsA(s);
    expect(await ledger.revokeKey(s.keyId)).toBe(s.bEnd);
    const listings = ledger.trustStore().keys.filter((k) => k.keyId === s.keyId);
    expect(listings.map((k) => [k.host, k.revokedAt])).toEqual([
      ['b', s.bEnd],
      ['a', s.bEnd],
    ]);
    expect((await fsck(ledger)).findings.filter((f) => f.code === 'KEY_WINDOW_MISMATCH')).toEqual([]);
    await ledger.close();
  });

  it("fsck's KEY_WINDOW_MISMATCH names the host of each listing it judges", async () => {
    const s = await sharedKeyRotatedByB();
    let ledger = await openAsA(s);
    // Host a's listing is current while the log closed the key where b's listing ends it.
    expect((await fsck(ledger)).findings).toEqual([
      {
        code: 'KEY_WINDOW_MISMATCH',
        message: `key "${s.keyId}": trust.json's listing for host "a" ends its window nowhere (it is current), the log closed it at ${s.bEnd}`,
      },
    ]);
    // Revoked: both listings end at bEnd. A log closed later (as in a store restored from before the revocation,
    // then closed later by hand) differs from both listings alike: two findings, told apart by their host.
    await ledger.revokeKey(s.keyId);
    const record = (await ledger.log.signingKeys.get(s.keyId))!;
    await ledger.close();
    const later = new Date(Date.parse(s.bEnd) + 5_000).toISOString();
    const log = await LevelManifestLog.open(join(s.root, 'manifests-v1'));
    await log.raw.put(`k!${s.keyId}`, JSON.stringify({ ...record, closedAt: later }));
    await log.close();
    ledger = await openLedger({ root: s.root, host: 'a', keyFile: s.aKeyFile, clock: s.clock, onNotice: s.onNotice });
    const findings = (await fsck(ledger)).findings.filter((f) => f.code === 'KEY_WINDOW_MISMATCH');
    await ledger.close();
    const said = (host: string) =>
      `key "${s.keyId}": trust.json's listing for host "${host}" ends its window at ${s.bEnd}, the log closed it at ${later}`;
    expect(findings.map((f) => f.message)).toEqual([
      expect.stringContaining(said('b')),
      expect.stringContaining(said('a')),
    ]);
  });

  it('`keys close` refuses while a listing holds the key current, naming that host', async () => {
    const s = await sharedKeyRotatedByB();
    const ledger = await openAsA(s);
    await expect(ledger.closeKeyWindow(s.keyId)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(
        `trust.json holds key "${s.keyId}" current (no notAfter, no revokedAt) in its listing for host "a"`,
      ) as unknown,
    });
    await ledger.close();
  });

  it("a revocation by the host that rotated it out also revokes the other host's checkpoint keys of its window", async () => {
    const s = await sharedKeyRotatedByB();
    const before = await openAsA(s);
    const aCheckpointKeys = (before.trustStore().checkpointKeys ?? []).filter((k) => k.host === 'a');
    await before.close();
    expect(aCheckpointKeys).toHaveLength(1);
    const ledger = await openLedger({
      root: s.root,
      host: 'b',
      keyFile: s.bKeyFile,
      clock: s.clock,
      onNotice: s.onNotice,
    });
    await ledger.revokeKey(s.keyId);
    const checkpointKeys = ledger.trustStore().checkpointKeys ?? [];
    expect(checkpointKeys.find((k) => k.keyId === aCheckpointKeys[0]!.keyId)?.revokedAt).toBe(s.bEnd);
    await ledger.close();
  });
});
