/** Exit 70: an error the CLI did not expect (a bug) is reported as an internal error, never as success or usage. */
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { runCli } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';

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

  it('returns the command exit code otherwise', async () => {
    const c = captureIo();
    expect(await runCli(['--version'], c.io)).toBe(0);
    expect(c.stdout()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
