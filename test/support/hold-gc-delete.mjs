// Preloaded (`node --import`) into a `gc` child by test/gc-cancel.test.ts. Through a blob store of its own on the root
// HL_HOLD_ROOT (the built one, dist/: the module the CLI loads, so its per-blob queue is the CLI's), it starts a
// conditional delete of the blob HL_HOLD_DIGEST whose judgement hangs until the process receives SIGINT or SIGTERM,
// as a call on a stalled disk would: gc's delete of that blob then waits behind it in the queue. Its `storedBeforeMs`
// of 0 keeps the blob once it goes on. It prints `held` on stderr once the hold has begun, gc has called its own delete
// of the blob (which waits behind the held one) and the CLI listens for the signals too (its handlers come after this
// file's), so the test's signal always finds gc at that delete.
import { join } from 'node:path';
import { FsBlobStore } from '../../dist/store/fs/blob-store.js';
import { loadHashBackend } from '../../dist/store/hash/backends.node.js';
import { nodeFsOps } from '../../dist/store/fs/ops.js';

let release;
const gate = new Promise((resolve) => (release = resolve));
for (const signal of ['SIGINT', 'SIGTERM']) {
  const listener = () => {
    setTimeout(release, 50); // after the CLI's own handler has aborted gc's wait
    // Nobody else listens (a gc that handles no signals): die of it, as the process would without this file.
    if (process.listenerCount(signal) === 1) {
      process.removeListener(signal, listener);
      process.kill(process.pid, signal);
    }
  };
  process.on(signal, listener);
}

// The listeners there now (this file's, and any the environment preloads): the CLI's are those added after them.
const before = { SIGINT: process.listenerCount('SIGINT'), SIGTERM: process.listenerCount('SIGTERM') };

const root = process.env.HL_HOLD_ROOT;
const digest = process.env.HL_HOLD_DIGEST;
const hex = digest.slice('blake3:'.length);
const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
let entered;
const holding = new Promise((resolve) => (entered = resolve));
const fs = {
  ...nodeFsOps,
  lstat: async (path, options) => {
    if (path === file) {
      entered();
      // A hung file system call keeps the process alive (its request is pending in libuv); a promise does not, and
      // the process would end with gc waiting.
      const alive = setInterval(() => {}, 1000);
      await gate;
      clearInterval(alive);
    }
    return nodeFsOps.lstat(path, options);
  },
};
const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
void store.delete(digest, { storedBeforeMs: 0 }).catch(() => {});
await holding;
// gc's own delete of the blob, called once its open has ended (the CLI listens for the signals from before the open
// on: a signal before this call would end the open instead).
let gcDeletes = false;
const ownDelete = FsBlobStore.prototype.delete;
FsBlobStore.prototype.delete = function (d, options) {
  if (d === digest) gcDeletes = true;
  return ownDelete.call(this, d, options);
};
const ready = setInterval(() => {
  if (
    gcDeletes &&
    process.listenerCount('SIGINT') > before.SIGINT &&
    process.listenerCount('SIGTERM') > before.SIGTERM
  ) {
    clearInterval(ready);
    process.stderr.write('held\n');
  }
}, 5);
