/**
 * A manifest valid when it was published stays valid, whoever rotates or revokes and whenever: the newest
 * createdAt each key signed lives in the log, so a restart with a clock that stepped back, or a rotation from
 * another process, cannot end a key's window at or before a manifest it signed; and an append is ordered with
 * rotations and revocations made by other processes. A publish that loads the keys again after a closed window ends
 * at its signal's abort while that load waits for the trust lock.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { hostKeyPath, Keyring } from '../src/keys/keyring.js';
import { generateJwk, writeKeyFile } from '../src/keys/local-signer.js';
import type { TrustStore } from '../manifests/format/trust.js';
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

describe('revokeKey of a key id trust.json does not list', () => {
  // README, error codes: KEY_INVALID, nothing changed (the log's window records included).
  it('is KEY_INVALID and changes nothing', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      const before = readFileSync(join(root, 'trust.json'), 'utf8');
      await expect(ledger.revokeKey('ed25519:00000000000000000000000000000000')).rejects.toMatchObject({
        code: 'KEY_INVALID',
      });
      expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(before);
      expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
    } finally {
      await ledger.close();
    }
  });
});

describe('a publish whose key window closed, loading the keys again while another holds the trust lock', () => {
  // After a closed window (another process rotated or revoked) publish loads the keys again; a load that must write
  // (a rotation's staged key file to settle) waits for the trust lock. The publish's signal ends that wait
  // (CANCELLED, nothing published), as it ends its other lock waits: it went on waiting out the lock's 30 s (LOCKED).
  it('ends at the abort of its signal: CANCELLED', async () => {
    const root = tempDir();
    const origin = 'handoff-ledger.test/windows';
    await (await openLedger({ root, host: 'host-a', origin })).close();
    const listed = (JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as TrustStore).keys[0]!;
    // Further trust that ends the host key's window where it opens: every signature it would make is KEY_EXPIRED.
    const trust = { version: 1 as const, keys: [{ ...listed, notAfter: listed.notBefore }] };
    const ledger = await openLedger({ root, host: 'host-a', origin, trust, onNotice: () => {} });
    // Another holder of the trust lock (a rotation under way elsewhere), held until the end of the test.
    const other = await Keyring.open({ root, host: 'host-a', origin, clock: () => new Date() });
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const lockHeld = other.exclusive(async () => {
      held();
      await released;
    });
    const original = Keyring.prototype.reload;
    const reloads = vi.spyOn(Keyring.prototype, 'reload');
    try {
      await holding;
      // A key file a rotation staged: settling it needs the trust lock.
      await writeKeyFile(`${hostKeyPath(root, 'host-a')}.next`, generateJwk());
      let reloading!: () => void;
      const reached = new Promise<void>((r) => (reloading = r));
      // The publish's load of the keys, once its commit met the closed window: the abort comes while it waits.
      reloads.mockImplementation(function (this: Keyring, ...args: Parameters<Keyring['reload']>) {
        reloading();
        return original.apply(this, args);
      });
      const controller = new AbortController();
      const publishing = ledger.publish(scope, sampleSummary(1), { signal: controller.signal }).catch((e) => e);
      await reached;
      controller.abort();
      const outcome = (await publishing) as { code?: string };
      expect(outcome.code).toBe('CANCELLED');
      expect(await ledger.log.head('s')).toBeUndefined();
    } finally {
      reloads.mockRestore();
      release();
      await lockHeld;
      await ledger.close();
    }
  }, 60_000);
});

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
