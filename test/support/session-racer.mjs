// One of two processes of one host for test/two-writers.test.ts: they share the store root (key file, trust.json,
// pin) and a PostgreSQL store, and publish `count` summaries each into one session at once, each publish with the
// expectedPrev of the head it read; one refused CHAIN_CONFLICT (the other process moved the head) is read again and
// retried, as the README says a caller does.
// Protocol: config as JSON in argv[2] ({ root, host, connectionString, schema, session, count, name });
// {"type":"ready"} once open; then it waits for one line on stdin and publishes, saying {"type":"ack",i,seq,id,prev}
// for each publish that landed, {"type":"conflict",i,expectedPrev} for each refused one, and
// {"type":"fail",code,error} for anything else, then {"type":"done"}.
import { config, readyThenGo, runHost, say } from './child-host.mjs';

await runHost(async (ledger) => {
  await readyThenGo();
  const scope = { principal: 'alice', session: config.session, run: `run-${config.name}` };
  for (let i = 0; i < config.count; i++) {
    const summary = { task: `publish ${config.name}/${i}`, state: 'racing', nextSteps: [`continue ${i}`] };
    for (;;) {
      const expectedPrev = (await ledger.log.head(config.session))?.id ?? null;
      try {
        const r = await ledger.publish(scope, summary, { expectedPrev });
        say({ type: 'ack', i, seq: r.seq, id: r.id, prev: expectedPrev });
        break;
      } catch (err) {
        if (err?.code !== 'CHAIN_CONFLICT') throw err;
        say({ type: 'conflict', i, expectedPrev });
      }
    }
  }
  say({ type: 'done' });
});
