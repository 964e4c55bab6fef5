// A process of one host for test/key-rotation-race.test.ts: it shares the store root (key file, trust.json) and
// a PostgreSQL store with another such process, and both rotate the host key at once.
// Plain ESM over the built package (dist/, built by `npm test`'s pretest), like test/support/rotation-publisher.mjs.
// Protocol: config as JSON in argv[2]; {"type":"ready"} once open, then it waits for a "go" line on stdin and
// rotates `rotations` times, publishing one manifest after each rotation ({"type":"ack",keyId}); then {"type":"done"}.
import { createInterface } from 'node:readline';
import { openLedger } from '../../dist/src/index.js';

const config = JSON.parse(process.argv[2]);
const say = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const ledger = await openLedger({
  root: config.root,
  host: config.host,
  postgres: { connectionString: config.connectionString, schema: config.schema },
  onNotice: () => {},
});
try {
  const lines = createInterface({ input: process.stdin });
  const go = new Promise((resolve) => lines.once('line', resolve));
  say({ type: 'ready' });
  await go;
  lines.close();
  for (let i = 0; i < config.rotations; i++) {
    const rotated = await ledger.rotateKey();
    const r = await ledger.publish(
      { principal: 'alice', session: config.session, run: 'r' },
      { task: `after rotation ${i}`, state: `rotated to ${rotated}`, nextSteps: [`continue ${i}`] },
    );
    say({ type: 'ack', i, rotated, seq: r.seq, keyId: r.envelope.signatures[0].keyid });
  }
  say({ type: 'done' });
} catch (err) {
  say({ type: 'fail', code: err.code, error: String(err.message) });
} finally {
  await ledger.close();
}
