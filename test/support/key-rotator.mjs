// A process of one host for test/key-rotation-race.test.ts: it shares the store root (key file, trust.json) and
// a PostgreSQL store with another such process, and both rotate the host key at once.
// Protocol: config as JSON in argv[2]; {"type":"ready"} once open, then it waits for a "go" line on stdin and
// rotates `rotations` times, publishing one manifest after each rotation ({"type":"ack",keyId}); then {"type":"done"}.
import { config, readyThenGo, runHost, say } from './child-host.mjs';

await runHost(async (ledger) => {
  await readyThenGo();
  for (let i = 0; i < config.rotations; i++) {
    const rotated = await ledger.rotateKey();
    const r = await ledger.publish(
      { principal: 'alice', session: config.session, run: 'r' },
      { task: `after rotation ${i}`, state: `rotated to ${rotated}`, nextSteps: [`continue ${i}`] },
    );
    say({ type: 'ack', i, rotated, seq: r.seq, keyId: r.envelope.signatures[0].keyid });
  }
  say({ type: 'done' });
});
