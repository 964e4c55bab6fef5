// A process that gives a root its format marker again and again (removing it between), until it is killed: the crash
// test of test/open-root-format.test.ts kills it at whatever step of the write it is in.
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';

const [root, built] = process.argv.slice(2);
const { writeRootFormat, ROOT_FORMAT_FILE } = await import(built);
process.stdout.write('ready\n');
for (;;) {
  try {
    unlinkSync(join(root, ROOT_FORMAT_FILE));
  } catch {
    // not there yet
  }
  await writeRootFormat(root);
}
