// A second process of one host for test/key-windows.test.ts: it shares the store root (key file, trust.json)
// and a PostgreSQL store with the test process, which rotates the host key while this one publishes.
// Protocol: config as JSON in argv[2]; one JSON line per acknowledged publish, then {"type":"done"}.
import { config, runHost, say } from './child-host.mjs';

await runHost(async (ledger) => {
  for (let i = 0; i < config.publishes; i++) {
    const session = `child-${i % 3}`;
    const r = await ledger.publish(
      { principal: 'alice', session, run: 'r' },
      { task: `publish ${i}`, state: 'from the second process', nextSteps: [`continue ${i}`] },
    );
    say({ type: 'ack', i, session, seq: r.seq, keyId: r.envelope.signatures[0].keyid });
    if (config.pauseMs) await new Promise((res) => setTimeout(res, config.pauseMs));
  }
  say({ type: 'done' });
});
