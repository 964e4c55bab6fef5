// Preloaded (`node --import`) into an `export` child by test/audit/export.test.ts: the first fsync of a blob copy in
// the export's staging directory waits until the process has received SIGINT or SIGTERM, so the signal always
// arrives mid-export, with manifests.jsonl and a blob copy staged, whatever the machine's speed. Its own listeners
// run before the CLI's (registered first), so when the fsync goes on, the CLI has already cancelled the export.
// Linux only: a handle's path is read from /proc/self/fd.
import { readlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';

let signalled = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  const listener = () => {
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
    while (!signalled) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return sync.call(this);
};
