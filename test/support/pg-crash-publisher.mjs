// A publisher on a PostgreSQL-backed ledger for test/pg-crash.test.ts, to be SIGKILLed (or to lose its server) at a
// chosen step of a publish. It opens the ledger on the shared schema with the backends wrapped, so that it says where
// a publish is: {"type":"blob-stored",digest} once the summary's blob is durable (a summary over the inline bound),
// {"type":"appending"} as the manifest's append starts, {"type":"committed"} once the append has committed (before
// the checkpoint is pinned and the publish resolves), {"type":"held"} when a retry holds the head it appends to,
// {"type":"ack",...} when the publish resolved. A command may ask
// it to stop at one of those steps: it then waits there for ever (until the parent kills it).
// Protocol: config as JSON in argv[2] ({ root, host, connectionString, schema }); {"type":"open"} once open; then one
// JSON command per stdin line:
//   {"op":"publish","session","marker","bytes","stop"?}  one publish; ack or {"type":"fail",code,error}
//   {"op":"loop","sessions":[...],"seed"}                   publishes until killed, a size from 100 B to 256 KiB each
//   {"op":"close"}                                          closes the ledger and exits
// Plain ESM over the built package (dist/, built by `npm test`'s pretest).
import { createInterface } from 'node:readline';
import { openLedger } from '../../dist/src/index.js';
import { openPostgresBackends } from '../../dist/src/ledger/pg-backend.js';
import { crashSummary } from '../reliability/crash-summary.mjs';
import { mulberry32 } from './prng.mjs';
import { say } from './say.mjs';

const config = JSON.parse(process.argv[2]);

const never = () => new Promise(() => {});
/** The step the publish under way stops at, if any. */
let stopAt;

const { blobs, log } = await openPostgresBackends({ connectionString: config.connectionString, schema: config.schema });
const put = blobs.put.bind(blobs);
blobs.put = async (...args) => {
  const info = await put(...args);
  say({ type: 'blob-stored', digest: info.digest });
  if (stopAt === 'blob-stored') await never();
  return info;
};
const append = log.append.bind(log);
log.append = async (...args) => {
  say({ type: 'appending' });
  const entry = await append(...args);
  say({ type: 'committed', seq: entry.seq, id: entry.id });
  if (stopAt === 'committed') await never();
  return entry;
};

// A retry after a lost race appends on a held head (through the hold, not log.append): {"type":"held"} says so.
const holdHead = log.holdHead.bind(log);
log.holdHead = async (...args) => {
  const hold = await holdHead(...args);
  if (hold) say({ type: 'held' });
  return hold;
};

const ledger = await openLedger({ root: config.root, host: config.host, blobs, log, onNotice: () => {} });
say({ type: 'open' });

async function publishOne(session, marker, bytes) {
  const scope = { principal: 'alice', session, run: `run-${process.pid}` };
  try {
    const r = await ledger.publish(scope, crashSummary(marker, bytes));
    say({ type: 'ack', session, marker, bytes, seq: r.seq, id: r.id, digest: r.digest });
    return true;
  } catch (err) {
    say({ type: 'fail', session, marker, code: err?.code, error: `${err?.name}: ${err?.message}` });
    return false;
  }
}

const input = createInterface({ input: process.stdin });
for await (const line of input) {
  const cmd = JSON.parse(line);
  if (cmd.op === 'publish') {
    stopAt = cmd.stop;
    await publishOne(cmd.session, cmd.marker, cmd.bytes);
    stopAt = undefined;
  } else if (cmd.op === 'loop') {
    const random = mulberry32(cmd.seed);
    // Mostly inline summaries (up to 64 KiB: the blob commits with the manifest), a third stored as blobs first.
    for (let n = 0; ; n++) {
      const session = cmd.sessions[Math.floor(random() * cmd.sessions.length)];
      const bytes = Math.floor(100 * Math.pow(2560, random()));
      if (!(await publishOne(session, `${process.pid}.${n}`, bytes))) process.exit(3);
    }
  } else if (cmd.op === 'close') break;
}
input.close();
await ledger.close();
say({ type: 'closed' });
