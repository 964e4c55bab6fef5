/**
 * An open that finds its key's window closed in the log but not in trust.json says why, without hedging: it judges
 * again under the trust lock, which a rotation or revocation holds from its step in the log until trust.json is
 * written. Another process's rotation under way is waited for (the open then signs with the new key and says
 * nothing); one that stopped is named as stopped; another host's listing of a shared key is named as that host's.
 * It said "a rotation or revocation stopped, unless another process's is under way", and then opened on the old key.
 */
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { Keyring } from '../src/keys/keyring.js';
import { takeFileLock } from '../src/ledger/file-lock.js';
import { openLedger } from '../src/ledger/open.js';
import type { OpenLedgerOptions } from '../src/ledger/options.js';
import { openPostgresBackends } from '../src/ledger/pg-backend.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
const CLOSED_WINDOW = /the log closed the window of key/;

describePostgres("an open racing another process's key rotation", (pg) => {
  it('waits for the rotation under way and opens on the new key, with no notice', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: 'open_rotation_race' };
    const a = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
    let backends: Awaited<ReturnType<typeof openPostgresBackends>> | undefined;
    try {
      await a.publish(scope, sampleSummary(1));
      const old = a.keyId;
      // A's rotation stops after its step in the log (the window closed, trust.json not yet written) until B's open
      // has read that record: the moment the two disagree for another process.
      let letRotationOn!: () => void;
      const rotationHeld = new Promise<void>((r) => (letRotationOn = r));
      let windowClosed!: () => void;
      const closedInLog = new Promise<void>((r) => (windowClosed = r));
      const closeInLog = a.log.signingKeys.close.bind(a.log.signingKeys);
      a.log.signingKeys.close = async (...args) => {
        const at = await closeInLog(...args);
        windowClosed();
        await rotationHeld;
        return at;
      };
      const rotating = a.rotateKey();
      await closedInLog;
      backends = await openPostgresBackends(postgres);
      const readRecord = backends.log.signingKeys.get.bind(backends.log.signingKeys);
      backends.log.signingKeys.get = async (keyId) => {
        const record = await readRecord(keyId);
        if (keyId === old) letRotationOn();
        return record;
      };
      const notices: string[] = [];
      const other = await openLedger({ root, host: 'h', ...backends, onNotice: (m) => notices.push(m) });
      try {
        const rotated = await rotating;
        expect(notices.filter((m) => CLOSED_WINDOW.test(m))).toEqual([]);
        // It opened on the key the rotation made, and signs with it.
        expect(other.keyId).toBe(rotated);
        expect((await other.publish(scope, sampleSummary(2))).seq).toBe(1);
      } finally {
        await other.close();
      }
    } finally {
      await a.close();
      // An injected log and blob store outlive the ledgers given them.
      await backends?.log.close();
      await backends?.blobs.close();
    }
  }, 60_000);
});

describe('an open whose key window the log closed where trust.json does not end it', () => {
  it('names a rotation or revocation that stopped after its step in the log, and how to finish it', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    await ledger.publish(scope, sampleSummary(1));
    const keyId = ledger.keyId;
    // The rotation's first step alone, as a rotation killed right after it leaves the store.
    const at = new Date(Date.now() + 1000).toISOString();
    await ledger.log.signingKeys.close(keyId, () => at);
    await ledger.close();
    const notices: string[] = [];
    ledger = await openLedger({ root, host: 'h', onNotice: (m) => notices.push(m) });
    try {
      expect(notices.filter((m) => CLOSED_WINDOW.test(m))).toEqual([
        `the log closed the window of key "${keyId}" at ${at} but trust.json does not end it (a rotation or revocation stopped after its step in the log): publish is refused (KEY_EXPIRED) until the command that stopped is run again (\`keys revoke ${keyId}\` for a revocation, then \`keys rotate\`; \`keys rotate\` for a rotation)`,
      ]);
    } finally {
      await ledger.close();
    }
  });

  it("names a rotation or revocation under way when another process holds trust.json's lock past the open's wait", async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    await ledger.publish(scope, sampleSummary(1));
    const keyId = ledger.keyId;
    const at = new Date(Date.now() + 1000).toISOString();
    await ledger.log.signingKeys.close(keyId, () => at);
    await ledger.close();
    // Another process's rotation between its step in the log and its write of trust.json holds the trust lock: here
    // held by this process (alive, so never taken over), and the open given no wait for it (its default is 30 s).
    const held = await takeFileLock(join(root, 'trust.json'), 'trust.json');
    const open = Keyring.open.bind(Keyring);
    const spy = vi
      .spyOn(Keyring, 'open')
      .mockImplementationOnce((options, signal) => open({ ...options, trustLock: { waitMs: 0 } }, signal));
    const notices: string[] = [];
    try {
      ledger = await openLedger({ root, host: 'h', onNotice: (m) => notices.push(m) });
    } finally {
      spy.mockRestore();
      await held.release();
    }
    try {
      expect(notices.filter((m) => CLOSED_WINDOW.test(m))).toEqual([
        `the log closed the window of key "${keyId}" at ${at} but trust.json does not end it (another process has held trust.json's lock for longer than this open waits: a rotation or revocation under way): publish is refused (KEY_EXPIRED) until that process has written trust.json, or, should it have stopped, the command is run again (\`keys revoke ${keyId}\` for a revocation, then \`keys rotate\`; \`keys rotate\` for a rotation)`,
      ]);
    } finally {
      await ledger.close();
    }
  });

  it('in a diagnosing open (fsck) of an embedded store, names it stopped: no other process has the log open', async () => {
    const { keyId, at, notices } = await diagnosedAfterLogStep({});
    expect(notices).toEqual([
      `the log closed the window of key "${keyId}" at ${at} but trust.json does not end it (a rotation or revocation stopped after its step in the log): publish is refused (KEY_EXPIRED) until the command that stopped is run again (\`keys revoke ${keyId}\` for a revocation, then \`keys rotate\`; \`keys rotate\` for a rotation)`,
    ]);
  });
});

describePostgres('a diagnosing open of a shared log whose key window the log closed', (pg) => {
  it('names a rotation or revocation stopped or, as fsck takes no lock, under way in another process', async () => {
    const postgres = { connectionString: pg.connectionString, schema: 'open_rotation_diagnose' };
    const { keyId, at, notices } = await diagnosedAfterLogStep({ postgres });
    expect(notices).toEqual([
      `the log closed the window of key "${keyId}" at ${at} but trust.json does not end it (a rotation or revocation stopped after its step in the log, or, as fsck takes no lock, one is under way): publish is refused (KEY_EXPIRED) until the command that stopped is run again (\`keys revoke ${keyId}\` for a revocation, then \`keys rotate\`; \`keys rotate\` for a rotation)`,
    ]);
  });
});

/**
 * A rotation's first step alone (the key's window closed in the log, trust.json not written), then the store opened
 * to diagnose as fsck opens it: the notices of a closed window it gave.
 */
async function diagnosedAfterLogStep(backend: Partial<OpenLedgerOptions>) {
  const root = tempDir();
  let ledger = await openLedger({ root, host: 'h', ...backend, onNotice: () => {} });
  await ledger.publish(scope, sampleSummary(1));
  const keyId = ledger.keyId;
  const at = new Date(Date.now() + 1000).toISOString();
  await ledger.log.signingKeys.close(keyId, () => at);
  await ledger.close();
  const notices: string[] = [];
  ledger = await openLedger({ root, host: 'h', ...backend, diagnose: true, onNotice: (m) => notices.push(m) });
  await ledger.close();
  return { keyId, at, notices: notices.filter((m) => CLOSED_WINDOW.test(m)) };
}
