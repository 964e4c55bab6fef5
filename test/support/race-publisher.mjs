// One of several processes of one host for test/expected-prev-race.test.ts: they share the store root (key file,
// trust.json, pin) and a PostgreSQL store, and publish into one session at the same moment.
// Protocol: config as JSON in argv[2] ({ root, host, connectionString, schema, principal, session }); {"type":"ready"}
// once open, then it waits for one line on stdin, the expectedPrev to publish with ("null": an empty chain), publishes
// once and says {"type":"ack",id,seq} or {"type":"fail",code,error}.
import { config, readyThenGo, runHost, say } from './child-host.mjs';

await runHost(async (ledger) => {
  const prev = await readyThenGo();
  const r = await ledger.publish(
    { principal: config.principal, session: config.session, run: `run-${process.pid}` },
    { task: `publish by ${process.pid}`, state: `as ${config.principal}`, nextSteps: ['continue'] },
    { expectedPrev: prev === 'null' ? null : prev },
  );
  say({ type: 'ack', id: r.id, seq: r.seq });
});
