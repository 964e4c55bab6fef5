// A child for test/reliability/maintenance-crash.test.ts, to be SIGKILLed at a random moment of its work: it opens
// the store (embedded, or PostgreSQL with the root shared) and then runs, one after the other until killed, the
// durable steps besides a publish's own: key rotations, revocations of keys rotated out, gc (no grace, so the blobs
// of publishes killed before their append go), grants and their revocation, interleaved with publishes.
// Protocol: config as JSON in argv[2] ({ root, host, seed, tag, graceMs, postgres? }; `tag` names the principal its
// grants are for, bob-<tag>); {"type":"ready"} once open; before each step
// {"type":"start",op,...}, after it {"type":"done",op,...} (a publish's receipt in it). Lines are written synchronously:
// one on stdout is there even if the SIGKILL comes right after.
import { gc, openLedger } from '../../dist/src/index.js';
import { mulberry32 } from './prng.mjs';
import { say } from './say.mjs';

const config = JSON.parse(process.argv[2]);
const random = mulberry32(config.seed);

const ledger = await openLedger({
  root: config.root,
  host: config.host,
  ...(config.postgres ? { postgres: config.postgres } : {}),
  onNotice: () => {},
});
say({ type: 'ready', keyId: ledger.keyId });

/** One summary: small ones go inline in the log's batch, large ones are blob files (or rows) stored first. */
const summaryOf = (marker, bytes) => ({ task: marker, state: 'x'.repeat(bytes), nextSteps: [`after ${marker}`] });

for (let n = 0; ; n++) {
  const r = random();
  const session = `s${Math.floor(random() * 3)}`;
  try {
    if (r < 0.45) {
      const marker = `${config.seed}.${n}`;
      const bytes = random() < 0.5 ? 200 : 80 * 1024 + Math.floor(random() * 200 * 1024);
      say({ type: 'start', op: 'publish', session, marker });
      const receipt = await ledger.publish(
        { principal: 'alice', session, run: `run-${process.pid}` },
        summaryOf(marker, bytes),
      );
      say({
        type: 'done',
        op: 'publish',
        session,
        marker,
        bytes,
        seq: receipt.seq,
        id: receipt.id,
        digest: receipt.digest,
      });
    } else if (r < 0.6) {
      say({ type: 'start', op: 'rotate', keyId: ledger.keyId });
      const keyId = await ledger.rotateKey();
      say({ type: 'done', op: 'rotate', keyId });
    } else if (r < 0.7) {
      // A key rotated out, revoked from now: after its window ended, so all it signed stays valid.
      const old = ledger
        .trustStore()
        .keys.filter((k) => k.host === config.host && k.notAfter !== undefined && k.revokedAt === undefined);
      if (old.length === 0) continue;
      const keyId = old[Math.floor(random() * old.length)].keyId;
      say({ type: 'start', op: 'revokeKey', keyId });
      const at = await ledger.revokeKey(keyId);
      say({ type: 'done', op: 'revokeKey', keyId, at });
    } else if (r < 0.85) {
      say({ type: 'start', op: 'gc' });
      const report = await gc(ledger, { graceMs: config.graceMs });
      say({ type: 'done', op: 'gc', removed: report.removed.length });
    } else {
      const state = random() < 0.5 ? 'granted' : 'revoked';
      say({ type: 'start', op: state, session });
      if (state === 'granted') await ledger.grant(`bob-${config.tag}`, session);
      else await ledger.revoke(`bob-${config.tag}`, session);
      say({ type: 'done', op: state, session });
    }
  } catch (err) {
    say({ type: 'fail', n, code: err?.code, error: `${err?.name}: ${err?.message}` });
    process.exit(3);
  }
}
