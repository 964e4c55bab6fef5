/**
 * fsck checks the log's signing-key records (LevelDB `k!<keyId>`, PostgreSQL `signing_keys`) on both backends:
 * each parses (a corrupt one is RECORD_CORRUPT naming it, and fsck goes on), no manifest is recorded at or after
 * the window end the record holds, the closed window is where trust.json ends the key, and a key's newest stored
 * manifest is no newer than its record says.
 */
import { mkdirSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pgLib from 'pg';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import type { OpenLedgerOptions } from '../src/ledger/options.js';
import { fsck } from '../src/ops/maintenance.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import type { SigningKeyRecord } from '../manifests/log/log.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { generateJwk } from '../src/keys/local-signer.js';
import type { TrustedKey } from '../manifests/format/trust.js';

/** The keyring's read of the keys (private): a rotation or revocation makes it under the trust lock. */
type Reloads = { reloadKeys(options: object, underLock: boolean): Promise<void> };

const scope = { principal: 'alice', session: 's', run: 'r' };

/** How a test changes one key record behind the ledger's back, on one backend. */
interface RecordTamper {
  put(keyId: string, fields: Omit<SigningKeyRecord, 'keyId'>): Promise<void>;
  corrupt(keyId: string): Promise<void>;
  remove(keyId: string): Promise<void>;
}

interface Backend {
  name: string;
  store(): { options: OpenLedgerOptions; tamper: RecordTamper };
}

/** Two manifests under the first key, a rotation, one under the second: the old and new keys and their records. */
async function rotatedStore(options: OpenLedgerOptions) {
  let now = Date.parse('2026-11-30T10:00:00.000Z');
  const clock = () => new Date((now += 1000));
  const ledger = await openLedger({ ...options, clock });
  await ledger.publish(scope, sampleSummary(0));
  await ledger.publish(scope, sampleSummary(1));
  const old = ledger.keyId;
  await ledger.rotateKey();
  await ledger.publish(scope, sampleSummary(2));
  const current = ledger.keyId;
  const oldRecord = (await ledger.log.signingKeys.get(old))!;
  const currentRecord = (await ledger.log.signingKeys.get(current))!;
  expect((await fsck(ledger)).findings).toEqual([]);
  await ledger.close();
  return { old, current, oldRecord, currentRecord, reopen: () => openLedger({ ...options, clock }) };
}

const later = (t: string, ms: number) => new Date(Date.parse(t) + ms).toISOString();

function keyRecordSuite(backend: Backend): void {
  describe(`fsck of signing-key records: ${backend.name}`, () => {
    it('reports a corrupt record as RECORD_CORRUPT naming it, and goes on checking the rest', async () => {
      const { options, tamper } = backend.store();
      const s = await rotatedStore(options);
      await tamper.corrupt(s.old);
      // The current key's record is behind too: checked though the other record is corrupt.
      await tamper.put(s.current, { lastSignedAt: later(s.currentRecord.lastSignedAt!, -1) });
      const ledger = await s.reopen();
      const report = await fsck(ledger);
      await ledger.close();
      expect(report.findings.map((f) => f.code).sort()).toEqual(['KEY_RECORD_BEHIND', 'RECORD_CORRUPT']);
      expect(report.findings.find((f) => f.code === 'RECORD_CORRUPT')!.message).toContain(s.old);
      expect(report.manifests).toBe(3);
      expect(report.ok).toBe(false);
    });

    it("opens for fsck (diagnose) a store whose current key's record is corrupt: fsck names it, every publish is refused with it and leaves it as it is", async () => {
      const { options, tamper } = backend.store();
      const s = await rotatedStore(options);
      await tamper.corrupt(s.current);
      await expect(s.reopen()).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
      const ledger = await openLedger({ ...options, diagnose: true });
      try {
        const report = await fsck(ledger);
        expect(report.findings).toEqual([
          expect.objectContaining({ code: 'RECORD_CORRUPT', message: expect.stringContaining(s.current) }),
        ]);
        // The record may hold the window a rotation closed: nothing is signed over it.
        await expect(ledger.publish(scope, sampleSummary(3))).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
        expect((await ledger.resume(scope))?.seq).toBe(2);
        expect((await fsck(ledger)).findings).toEqual(report.findings);
      } finally {
        await ledger.close();
      }
    });

    it('reports a record whose newest signed createdAt is at or after the window end it records', async () => {
      const { options, tamper } = backend.store();
      const s = await rotatedStore(options);
      await tamper.put(s.old, { lastSignedAt: s.oldRecord.closedAt!, closedAt: s.oldRecord.closedAt! });
      const ledger = await s.reopen();
      const report = await fsck(ledger);
      await ledger.close();
      expect(report.findings.map((f) => f.code)).toEqual(['KEY_SIGNED_AFTER_CLOSE']);
    });

    it('reports a window the log closed elsewhere than trust.json ends it, or closed for a current key', async () => {
      const { options, tamper } = backend.store();
      const s = await rotatedStore(options);
      await tamper.put(s.old, { ...s.oldRecord, closedAt: later(s.oldRecord.closedAt!, 5000) });
      await tamper.put(s.current, { ...s.currentRecord, closedAt: later(s.currentRecord.lastSignedAt!, 5000) });
      const ledger = await s.reopen();
      const report = await fsck(ledger);
      await ledger.close();
      expect(report.findings.map((f) => f.code)).toEqual(['KEY_WINDOW_MISMATCH', 'KEY_WINDOW_MISMATCH']);
      expect(report.findings.map((f) => f.message).join('\n')).toContain(s.current);
    });

    it('reports a record behind the newest manifest its key signed', async () => {
      const { options, tamper } = backend.store();
      const s = await rotatedStore(options);
      await tamper.put(s.old, { ...s.oldRecord, lastSignedAt: later(s.oldRecord.lastSignedAt!, -1000) });
      const ledger = await s.reopen();
      const report = await fsck(ledger);
      await ledger.close();
      expect(report.findings.map((f) => f.code)).toEqual(['KEY_RECORD_BEHIND']);
      expect(report.findings[0]!.message).toContain(s.oldRecord.lastSignedAt!);
    });

    it('does not judge a key without any record (stores written by 0.1.0 kept none)', async () => {
      const { options, tamper } = backend.store();
      const s = await rotatedStore(options);
      await tamper.remove(s.old);
      await tamper.remove(s.current);
      const ledger = await s.reopen();
      expect((await fsck(ledger)).findings).toEqual([]);
      await ledger.close();
    });

    it('a rotation that stopped after the log closed the window: run again, it ends the key where the log did', async () => {
      const { options } = backend.store();
      let now = Date.parse('2026-11-30T10:00:00.000Z');
      const notices: string[] = [];
      const opts = { ...options, clock: () => new Date((now += 1000)), onNotice: (m: string) => notices.push(m) };
      let ledger = await openLedger(opts);
      await ledger.publish(scope, sampleSummary(0));
      const old = ledger.keyId;
      // Once the rotation has closed the window in the log, its new key file cannot be written (EISDIR).
      // (The read the rotation makes under the trust lock: reloadKeys with underLock.)
      const keyring = (ledger as unknown as { keyring: Reloads & { keyPath: string } }).keyring;
      const reload = keyring.reloadKeys.bind(keyring);
      keyring.reloadKeys = async (o, underLock) => {
        await reload(o, underLock);
        mkdirSync(`${keyring.keyPath}.next`);
        keyring.reloadKeys = reload;
      };
      await expect(ledger.rotateKey()).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
      rmdirSync(`${keyring.keyPath}.next`);
      const closedAt = (await ledger.log.signingKeys.get(old))!.closedAt!;
      await expect(ledger.publish(scope, sampleSummary(1))).rejects.toMatchObject({ code: 'KEY_EXPIRED' });
      // checkPublish takes the keys again, as publish does, and refuses as it does.
      await expect(ledger.checkPublish(scope)).rejects.toMatchObject({ code: 'KEY_EXPIRED' });
      await ledger.close();
      ledger = await openLedger(opts);
      expect(notices.join('\n')).toContain(`the log closed the window of key "${old}" at ${closedAt}`);
      // Which command stopped, the notice cannot tell: it names both (a revocation is run again with `keys revoke`).
      expect(notices.join('\n')).toContain(`until the command that stopped is run again (\`keys revoke ${old}\``);
      await ledger.rotateKey();
      expect(ledger.trustStore().keys.find((k) => k.keyId === old)?.notAfter).toBe(closedAt);
      expect((await ledger.log.signingKeys.get(old))?.closedAt).toBe(closedAt);
      expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(1);
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] }); // before: KEY_WINDOW_MISMATCH
      await ledger.close();
    });

    it('a revocation that stopped after the log closed the window: run again, it revokes from where the log closed', async () => {
      const { options } = backend.store();
      const s = await rotatedStore(options);
      const ledger = await s.reopen();
      const trustPath = join(options.root!, 'trust.json');
      // Once the revocation has closed the window in the log, trust.json cannot be replaced (a directory stands there).
      const keyring = (ledger as unknown as { keyring: Reloads }).keyring;
      const reload = keyring.reloadKeys.bind(keyring);
      keyring.reloadKeys = async (o, underLock) => {
        await reload(o, underLock);
        renameSync(trustPath, `${trustPath}.aside`);
        mkdirSync(join(trustPath, 'occupied'), { recursive: true });
        keyring.reloadKeys = reload;
      };
      const first = later(s.oldRecord.closedAt!, -500);
      await expect(ledger.revokeKey(s.old, first)).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
      rmSync(trustPath, { recursive: true });
      renameSync(`${trustPath}.aside`, trustPath);
      expect(await ledger.revokeKey(s.old, later(s.oldRecord.closedAt!, -200))).toBe(first);
      expect(ledger.trustStore().keys.find((k) => k.keyId === s.old)?.revokedAt).toBe(first);
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] }); // before: KEY_WINDOW_MISMATCH
      await ledger.close();
    });

    it("does not report another host's key revoked into the past in the trust its keys were given in (a shared log, each host its own root)", async () => {
      const { options, tamper } = backend.store();
      await rotatedStore(options);
      // Host B's key: B's root revoked it from before the last manifest it signed (the runbook's revocation of a
      // compromised key), which closed its window in the shared log there. This root's trust.json does not list it.
      const jwk = generateJwk();
      const closedAt = '2026-11-30T10:00:02.000Z';
      await tamper.put(jwk.kid!, { lastSignedAt: later(closedAt, 3000), closedAt });
      const listed = { host: 'host-b', keyId: jwk.kid!, publicKey: jwk.x, notBefore: '2026-11-30T09:00:00.000Z' };
      const judged = async (key: TrustedKey) => {
        const ledger = await openLedger({ ...options, trust: { version: 1, keys: [key] } });
        try {
          return (await fsck(ledger)).findings.map((f) => f.code);
        } finally {
          await ledger.close();
        }
      };
      expect(await judged({ ...listed, revokedAt: closedAt })).toEqual([]);
      // Given a trust file that does not revoke it there (one from before the revocation): still a finding.
      expect(await judged(listed)).toEqual(['KEY_SIGNED_AFTER_CLOSE']);
      expect(await judged({ ...listed, revokedAt: later(closedAt, 1) })).toEqual(['KEY_SIGNED_AFTER_CLOSE']);
    });

    it('is clean after a rotation and a revocation dated before the rotation', async () => {
      const { options } = backend.store();
      const s = await rotatedStore(options);
      const ledger = await s.reopen();
      await ledger.revokeKey(s.old, later(s.oldRecord.closedAt!, -500));
      expect((await fsck(ledger)).findings).toEqual([]);
      await ledger.close();
    });
  });
}

/** Changes `k!` records of a closed embedded store. */
async function levelTamper(root: string, change: (db: LevelManifestLog['raw']) => Promise<void>) {
  const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
  try {
    await change(log.raw);
  } finally {
    await log.close();
  }
}

keyRecordSuite({
  name: 'embedded (LevelDB)',
  store() {
    const root = tempDir();
    return {
      options: { root, host: 'host-a' },
      tamper: {
        put: (keyId, fields) => levelTamper(root, (db) => db.put(`k!${keyId}`, JSON.stringify({ keyId, ...fields }))),
        corrupt: (keyId) => levelTamper(root, (db) => db.put(`k!${keyId}`, '{"keyId": 7')),
        remove: (keyId) => levelTamper(root, (db) => db.del(`k!${keyId}`)),
      },
    };
  },
});

let schemas = 0;
describePostgres('fsck of signing-key records (PostgreSQL)', (pg) => {
  const query = async (sql: string, params: unknown[]) => {
    const client = new pgLib.Client({ connectionString: pg.connectionString });
    await client.connect();
    try {
      await client.query(sql, params);
    } finally {
      await client.end();
    }
  };
  keyRecordSuite({
    name: 'PostgreSQL',
    store() {
      const schema = `fsck_keys_${++schemas}`;
      const table = `"${schema}".signing_keys`;
      return {
        options: {
          root: tempDir(),
          host: 'host-a',
          postgres: { connectionString: pg.connectionString, schema },
          onNotice: () => {},
        },
        tamper: {
          put: (keyId, f) =>
            query(
              `INSERT INTO ${table} (key_id, last_signed_at, closed_at) VALUES ($1, $2, $3)
               ON CONFLICT (key_id) DO UPDATE SET last_signed_at = $2, closed_at = $3`,
              [keyId, f.lastSignedAt ?? null, f.closedAt ?? null],
            ),
          corrupt: (keyId) => query(`UPDATE ${table} SET last_signed_at = 'yesterday' WHERE key_id = $1`, [keyId]),
          remove: (keyId) => query(`DELETE FROM ${table} WHERE key_id = $1`, [keyId]),
        },
      };
    },
  });
});
