// Preloaded (`node --import`) into a `publish` child by test/cli-stop-signals.test.ts: the embedded log's append waits
// until the process has received SIGINT or SIGTERM, with HOLD_APPEND=before before it begins (the publish not committed
// yet), with HOLD_APPEND=after once it has committed; `append held` is written to stderr when it waits. Its own listeners
// run before the CLI's (registered first): when the append goes on, the CLI has heard the signal.
import { LevelManifestLog } from '../../dist/manifests/log/level/log.js';

const when = process.env.HOLD_APPEND;
let signalled = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  const listener = () => {
    signalled = true;
    // Nobody else listens (a publish that handles no signals): die of it, as the process would without this file.
    if (process.listenerCount(signal) === 1) {
      process.removeListener(signal, listener);
      process.kill(process.pid, signal);
    }
  };
  process.on(signal, listener);
}

const held = async () => {
  process.stderr.write('append held\n');
  while (!signalled) await new Promise((resolve) => setTimeout(resolve, 5));
};
const append = LevelManifestLog.prototype.append;
LevelManifestLog.prototype.append = async function (...args) {
  if (when === 'before') await held();
  const entry = await append.apply(this, args);
  if (when === 'after') await held();
  return entry;
};
