/** Exit 70: an error the CLI did not expect (a bug) is reported as an internal error, never as success or usage. */
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { runCli } from '../src/cli/main.js';
import { join } from 'node:path';
import { captureIo } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';

describe('the CLI on an unexpected error', () => {
  it('prints "internal error" with the stack on stderr and exits 70', async () => {
    const c = captureIo();
    const broken = new Writable({
      write() {
        throw new Error('stdout went away');
      },
    });
    const code = await runCli(['--version'], { ...c.io, stdout: broken });
    expect(code).toBe(70);
    expect(c.stderr()).toMatch(/^handoff-ledger: internal error: Error: stdout went away\n {4}at /);
  });

  it('exits 70 with the stack for a bug inside a command, not 2 (usage) or 1 (refused)', async () => {
    const root = join(tempDir(), 'store');
    expect(await runCli(['init', '--root', root, '--host', 'h1'], captureIo().io)).toBe(0);
    for (const argv of [['keys', 'list'], ['grants', '--json'], ['init']]) {
      // A stream of its own per command: a stream whose write threw never finishes that write, and buffers the next.
      const bug = new Writable({
        write() {
          throw new TypeError("Cannot read properties of undefined (reading 'x')");
        },
      });
      const c = captureIo();
      const code = await runCli([...argv, '--root', root, '--host', 'h1'], { ...c.io, stdout: bug });
      expect(code, argv.join(' ')).toBe(70);
      // (grants on a store with no records says so on stderr first, as history says "no compaction yet")
      expect(c.stderr()).toMatch(
        /^(?:no grant or revocation records .*\n)?handoff-ledger: internal error: TypeError: Cannot read properties .*\n {4}at /,
      );
    }
  });

  it('keeps input and I/O errors at 2: a missing file, an unknown option', async () => {
    const c = captureIo();
    expect(await runCli(['publish', '--principal', 'a', '--session', 's', '--run', 'r', tempDir()], c.io)).toBe(2);
    expect(c.stderr()).toMatch(
      /^handoff-ledger: IO_FAILED: cannot read summary file ".*": EISDIR \(illegal operation on a directory\)\n$/,
    );
    expect(await runCli(['resume', '--bogus'], captureIo().io)).toBe(2);
  });

  it('returns the command exit code otherwise', async () => {
    const c = captureIo();
    expect(await runCli(['--version'], c.io)).toBe(0);
    expect(c.stdout()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
