// What the child processes of the multi-process PostgreSQL tests share (key-rotator.mjs, rotation-publisher.mjs,
// pg-host.mjs, race-publisher.mjs, session-racer.mjs): their config (JSON in argv[2]), one JSON object per stdout
// line, and a run of one host's ledger that reports a failure as {"type":"fail",code,error} and always closes it.
// Plain ESM over the built package (dist/, built by `npm test`'s pretest).
import { createInterface } from 'node:readline';
import { openLedger } from '../../dist/src/index.js';

export const config = JSON.parse(process.argv[2]);
export const say = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

/** Says {"type":"ready"}, then waits for one line on stdin (the test's start signal) and gives it. */
export async function readyThenGo() {
  const lines = createInterface({ input: process.stdin });
  const go = new Promise((resolve) => lines.once('line', resolve));
  say({ type: 'ready' });
  const line = await go;
  lines.close();
  return line;
}

/** Opens `config.host`'s ledger (its root, the shared PostgreSQL schema), runs `body`, reports a failure, closes. */
export async function runHost(body) {
  const ledger = await openLedger({
    root: config.root,
    host: config.host,
    postgres: { connectionString: config.connectionString, schema: config.schema },
    onNotice: () => {},
  });
  try {
    await body(ledger);
  } catch (err) {
    say({ type: 'fail', code: err.code, error: String(err.message) });
  } finally {
    await ledger.close();
  }
}
