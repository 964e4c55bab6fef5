// One "host" for test/pg-multihost.test.ts: a separate Node process with its own key, publishing into
// shared sessions through one PostgreSQL database until told to stop, then resuming every session.
// Protocol: config as JSON in argv[2]; one JSON object per stdout line; commands on stdin lines.
import { createInterface } from 'node:readline';
import { openLedger } from '../../dist/src/index.js';
import { openPostgresBackends } from '../../dist/src/ledger/pg-backend.js';
import { config, say } from './child-host.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { blobs, log } = await openPostgresBackends({ connectionString: config.connectionString, schema: config.schema });
const ledger = await openLedger({
  root: config.root,
  host: config.host,
  trust: config.trust,
  blobs,
  log,
  onNotice: () => {},
});

let stopping = false;
const commands = [];
let wake = () => {};
const input = createInterface({ input: process.stdin });
input.on('line', (line) => {
  if (line === 'stop') stopping = true;
  commands.push(line);
  wake();
});
const nextCommand = async () => {
  while (commands.length === 0) await new Promise((r) => (wake = r));
  return commands.shift();
};

/** Publishes until stopped; a lost race (another writer moved the head) is retried, storage failures are reported. */
async function publisher(worker) {
  for (let i = 0; !stopping; i++) {
    const session = config.sessions[(worker + i) % config.sessions.length];
    const marker = `${config.host}/${worker}/${i}`;
    const summary = {
      task: `publish ${marker}`,
      state: `written by ${config.host}`,
      nextSteps: [`continue after ${marker}`],
    };
    for (let attempt = 0; ; attempt++) {
      try {
        // Even workers publish optimistically (expectedPrev from their own head read), so a race they lose
        // surfaces as CHAIN_CONFLICT; odd workers leave the re-read and re-sign to the ledger.
        const expectedPrev = worker % 2 === 0 ? ((await ledger.log.head(session))?.id ?? null) : undefined;
        const r = await ledger.publish({ principal: 'alice', session, run: `run-${worker}` }, summary, {
          expectedPrev,
        });
        say({
          type: 'ack',
          host: config.host,
          marker,
          session,
          seq: r.seq,
          id: r.id,
          digest: r.digest,
          lostRaces: attempt,
        });
        break;
      } catch (err) {
        const code = err?.code ?? String(err);
        if (code === 'CHAIN_CONFLICT' && attempt < 100) {
          await sleep(Math.random() * 5);
          continue;
        }
        say({ type: 'fail', host: config.host, marker, session, code, error: `${err?.name}: ${err?.message}` });
        await sleep(50);
        break;
      }
    }
  }
}

await Promise.all(Array.from({ length: config.workers }, (_, w) => publisher(w)));
say({ type: 'stopped', host: config.host });

while ((await nextCommand()) !== 'resume');
for (const session of config.sessions) {
  const r = await ledger.resume({ principal: 'alice', session });
  say({ type: 'resumed', host: config.host, session, seq: r?.seq, id: r?.id, task: r?.summary?.task });
}
await ledger.close();
input.close(); // an open stdin would keep this process alive
say({ type: 'closed', host: config.host });
