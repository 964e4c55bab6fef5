// Preloaded (`node --import`) into an `export` child by test/audit/export.test.ts: the first fsync of a blob copy in
// the export's staging directory waits until the process has received SIGINT or SIGTERM, so the signal always
// arrives mid-export, with manifests.jsonl and a blob copy staged, whatever the machine's speed. Its own listeners
// run before the CLI's (registered first), so when the fsync goes on, the CLI has already cancelled the export.
// Linux only: a handle's path is read from /proc/self/fd. With HOLD_EXPORT_AFTER_SIGNAL_MS set, the fsync goes on only
// that long after the first signal (an fsync that hangs, as on a stalled disk), `export holding fsync` is written to
// stderr once the fsync is held, and `export held: SIGNAL` once the first signal came (the CLI's listeners of it,
// registered after these, have run by then).
import { readlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';

const holdAfterMs = Number(process.env.HOLD_EXPORT_AFTER_SIGNAL_MS ?? 0);
let signalled = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  const listener = () => {
    if (!signalled && holdAfterMs > 0) process.stderr.write(`export held: ${signal}\n`);
    signalled = true;
    // Nobody else listens (an export that handles no signals): die of it, as the process would without this file.
    if (process.listenerCount(signal) === 1) {
      process.removeListener(signal, listener);
      process.kill(process.pid, signal);
    }
  };
  process.on(signal, listener);
}

const probe = await open(process.execPath, 'r');
const FileHandle = Object.getPrototypeOf(probe);
await probe.close();
const sync = FileHandle.sync;
let held = false;
FileHandle.sync = async function () {
  if (!held && /\.partial\/blobs\//.test(readlinkSync(`/proc/self/fd/${this.fd}`))) {
    held = true;
    if (holdAfterMs > 0) process.stderr.write('export holding fsync\n');
    while (!signalled) await new Promise((resolve) => setTimeout(resolve, 5));
    if (holdAfterMs > 0) await new Promise((resolve) => setTimeout(resolve, holdAfterMs));
  }
  return sync.call(this);
};
