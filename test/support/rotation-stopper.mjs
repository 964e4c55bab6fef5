// A process of one host for test/rotation-kill.test.ts, sharing a store root (key files, trust.json) and a PostgreSQL
// schema with the test's other processes. It rotates the host key and can stop for ever at one step of the rotation,
// to be SIGKILLed there: {"type":"closed"} once the log has closed the old key's window (trust.json not written yet),
// {"type":"trust-written"} once trust.json lists the new keys (their files still staged at <file>.next). Or it
// publishes on request.
// Protocol: config as JSON in argv[2] ({ root, host, connectionString, schema }); {"type":"ready",keyId} once open;
// then one JSON command per stdin line:
//   {"op":"rotate","stop"?:"closed"|"trust-written"}   {"type":"rotated",keyId}
//   {"op":"publish","session","marker"}                  {"type":"ack",seq,id,keyId} or {"type":"fail",code,error}
// Lines are written synchronously: one on stdout is there even if a SIGKILL comes right after.
import { createInterface } from 'node:readline';
import { openLedger } from '../../dist/src/index.js';
import { say } from './say.mjs';

const config = JSON.parse(process.argv[2]);

const never = () => new Promise(() => {});
let stopAt;

const ledger = await openLedger({
  root: config.root,
  host: config.host,
  postgres: { connectionString: config.connectionString, schema: config.schema },
  onNotice: () => {},
});
// The steps of a rotation (Ledger.rotateKey): the window closed in the log, then trust.json written by the keyring.
const keys = ledger.log.signingKeys;
const close = keys.close.bind(keys);
keys.close = async (...args) => {
  const closedAt = await close(...args);
  say({ type: 'closed', closedAt });
  if (stopAt === 'closed') await never();
  return closedAt;
};
const keyring = ledger.keyring;
const save = keyring.save.bind(keyring);
keyring.save = async (...args) => {
  await save(...args);
  say({ type: 'trust-written' });
  if (stopAt === 'trust-written') await never();
};
say({ type: 'ready', keyId: ledger.keyId });

const input = createInterface({ input: process.stdin });
for await (const line of input) {
  const cmd = JSON.parse(line);
  try {
    if (cmd.op === 'rotate') {
      stopAt = cmd.stop;
      say({ type: 'rotated', keyId: await ledger.rotateKey() });
    } else if (cmd.op === 'publish') {
      const r = await ledger.publish(
        { principal: 'alice', session: cmd.session, run: `run-${process.pid}` },
        { task: cmd.marker, state: 'published by a process of the shared root', nextSteps: ['go on'] },
      );
      say({ type: 'ack', seq: r.seq, id: r.id, keyId: r.envelope.signatures[0].keyid });
    }
  } catch (err) {
    say({ type: 'fail', code: err?.code, error: `${err?.name}: ${err?.message}` });
  }
}
await ledger.close();
