/**
 * A manifest valid when it was published stays valid, whoever rotates or revokes and whenever: the newest
 * createdAt each key signed lives in the log, so a restart with a clock that stepped back, or a rotation from
 * another process, cannot end a key's window at or before a manifest it signed; and an append is ordered with
 * rotations and revocations made by other processes.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { fsck } from '../src/ops/maintenance.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
const CHILD = fileURLToPath(new URL('./support/rotation-publisher.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/src/index.js', import.meta.url));

describe('rotateKey after a restart', () => {
  it('ends the old window after a manifest signed before the restart, though the clock stepped back since', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    let ledger = await openLedger({ root, host: 'host-a', clock });
    now += 10_000;
    await ledger.publish(scope, sampleSummary(1));
    await ledger.close();
    now -= 5_000;
    ledger = await openLedger({ root, host: 'host-a', clock });
    await ledger.rotateKey();
    const old = ledger.trustStore().keys[0]!;
    expect(Date.parse(old.notAfter!)).toBeGreaterThan(Date.parse('2026-11-30T10:00:10.000Z'));
    expect((await ledger.resume(scope))?.seq).toBe(0);
    await ledger.publish(scope, sampleSummary(2));
    expect((await ledger.history(scope)).length).toBe(2);
    expect((await fsck(ledger)).ok).toBe(true);
    await ledger.close();
  });

  it('never dates a manifest before the last one its key signed in an earlier run, when the clock stepped back', async () => {
    const root = tempDir();
    let now = Date.parse('2026-11-30T10:00:00.000Z');
    const clock = () => new Date(now);
    let ledger = await openLedger({ root, host: 'host-a', clock });
    now += 10_000;
    await ledger.publish(scope, sampleSummary(1));
    await ledger.close();
    now -= 5_000;
    ledger = await openLedger({ root, host: 'host-a', clock });
    await ledger.publish(scope, sampleSummary(2));
    expect((await ledger.history(scope)).map((h) => h.manifest.createdAt)).toEqual([
      '2026-11-30T10:00:10.000Z',
      '2026-11-30T10:00:10.000Z',
    ]);
    const report = await fsck(ledger);
    expect(report.ok, JSON.stringify(report)).toBe(true);
    await ledger.close();
  });
});

interface ChildMsg {
  type: 'ack' | 'done' | 'fail';
  i?: number;
  keyId?: string;
  code?: string;
  error?: string;
}

/** Runs the publisher child; `onAck` sees each acknowledgement as it arrives. */
function runPublisher(config: object, onAck: (msg: ChildMsg, acks: number) => Promise<void> | void) {
  const child = spawn(process.execPath, [CHILD, JSON.stringify(config)]);
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const messages: ChildMsg[] = [];
  let chain = Promise.resolve();
  createInterface({ input: child.stdout }).on('line', (line) => {
    const msg = JSON.parse(line) as ChildMsg;
    messages.push(msg);
    if (msg.type === 'ack') chain = chain.then(() => onAck(msg, messages.filter((m) => m.type === 'ack').length));
  });
  return new Promise<ChildMsg[]>((resolve, reject) =>
    child.on('close', (code) => {
      void chain.then(() =>
        code === 0 ? resolve(messages) : reject(new Error(`publisher exited ${code}: ${stderr}`)),
      );
    }),
  );
}

describePostgres('key windows shared by processes (PostgreSQL)', (pg) => {
  const sharedStore = (schema: string) => ({ connectionString: pg.connectionString, schema });

  it('a publisher in another process of the same host signs with the new key once a rotation closed the old one: every manifest verifies', async () => {
    expect(existsSync(BUILT), 'dist/ is built by `npm test` (pretest)').toBe(true);
    const root = tempDir();
    const schema = 'rotation_race';
    const rotator = await openLedger({ root, host: 'host-a', postgres: sharedStore(schema), onNotice: () => {} });
    const rotatedAt: number[] = [];
    const messages = await runPublisher(
      { root, host: 'host-a', connectionString: pg.connectionString, schema, publishes: 40, pauseMs: 5 },
      async (_msg, acks) => {
        // Rotate four times (after acks 5, 15, 25, 35) while the other process keeps publishing.
        if (acks % 10 === 5) {
          await rotator.rotateKey();
          rotatedAt.push(acks);
        }
      },
    );
    expect(messages.filter((m) => m.type === 'fail')).toEqual([]);
    expect(rotatedAt).toEqual([5, 15, 25, 35]);
    const acks = messages.filter((m) => m.type === 'ack');
    expect(acks.length).toBe(40);
    // The publisher moved on to the newer keys (it did not keep signing with the rotated-out one).
    expect(new Set(acks.map((m) => m.keyId)).size).toBeGreaterThan(1);
    await rotator.close();
    const auditor = await openLedger({ root, host: 'host-a', postgres: sharedStore(schema), onNotice: () => {} });
    for (const session of ['child-0', 'child-1', 'child-2'])
      expect((await auditor.history({ ...scope, session })).length).toBeGreaterThan(10);
    const report = await fsck(auditor);
    expect(report.ok, JSON.stringify(report.findings)).toBe(true);
    await auditor.close();
  }, 60_000);

  it('checkPublish after another process rotated the host key takes its keys, as publish does, and passes', async () => {
    const root = tempDir();
    const store = { root, host: 'host-a', postgres: sharedStore('check_publish_rotated'), onNotice: () => {} };
    const a = await openLedger(store);
    const b = await openLedger(store);
    try {
      await a.publish(scope, sampleSummary(1));
      const old = a.keyId;
      await b.rotateKey();
      // a still holds the rotated-out key, whose window the log has closed: compact's check must not refuse it.
      await a.checkPublish(scope);
      expect(a.keyId).not.toBe(old);
      expect((await a.publish(scope, sampleSummary(2))).seq).toBe(1);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('keys revoke in one process: another process of the host publishes no manifest dated at or after the revocation', async () => {
    const root = tempDir();
    const schema = 'key_revoke_race';
    const store = { root, host: 'host-a', postgres: sharedStore(schema), onNotice: () => {} };
    const publisher = await openLedger(store);
    const operator = await openLedger(store);
    await publisher.publish(scope, sampleSummary(1));
    // The publisher still holds the key and the trust list it loaded; the operator revokes that key from now.
    await operator.revokeKey(operator.keyId);
    await expect(publisher.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_REVOKED' });
    await publisher.close();
    expect((await operator.history(scope)).length).toBe(1);
    expect((await fsck(operator)).ok).toBe(true);
    await operator.close();
  });

  it('revoke(principal, "*") in one process: a publish of another process already past its commit-point check does not commit after it', async () => {
    const schema = 'revoke_race';
    let atCommit!: () => void;
    const reachedCommit = new Promise<void>((r) => (atCommit = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let calls = 0;
    // Two ledgers on one database share nothing but it: as two processes would.
    const publisher: Ledger = await openLedger({
      root: tempDir(),
      host: 'host-a',
      postgres: sharedStore(schema),
      onNotice: () => {},
      authorizer: async () => {
        if (++calls === 2) {
          atCommit();
          await gate;
        }
        return true;
      },
    });
    const operator = await openLedger({
      root: tempDir(),
      host: 'host-b',
      postgres: sharedStore(schema),
      onNotice: () => {},
    });
    const publishing = publisher.publish(scope, sampleSummary(1)).then(
      () => 'committed',
      (err: { code?: string }) => err.code,
    );
    await reachedCommit;
    await operator.revoke('alice', '*');
    release();
    expect(await publishing).toBe('REVOKED');
    expect(await operator.log.head(scope.session)).toBeUndefined();
    await publisher.close();
    await operator.close();
  });
});
