// One line of JSON on a test child's stdout, written synchronously: it is there even if a SIGKILL comes right after.
// stdout is a pipe; when it is momentarily full (EAGAIN) the rest is written again rather than an acknowledgement lost.
import { writeSync } from 'node:fs';

export function say(msg) {
  const bytes = Buffer.from(`${JSON.stringify(msg)}\n`);
  for (let off = 0; off < bytes.length;) {
    try {
      off += writeSync(1, bytes, off);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
    }
  }
}
