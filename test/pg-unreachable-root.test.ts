/**
 * An open on PostgreSQL that cannot connect (a server that refuses, a role that does not exist) is refused
 * STORAGE_FAILED and leaves the root as it found it: a root directory it made is removed again, one that was there
 * stays. (The operator walk-through's `init --postgres` with a role that does not exist left an empty root behind.)
 */
import { describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { openLedger } from '../src/ledger/open.js';
import { main } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';
import { codedRefusal } from './support/coded-refusal.js';
import { tempDir } from './support/tmp.js';

const unreachable = 'postgresql://nobody@127.0.0.1:1/none';

describe('an open on a PostgreSQL it cannot reach', () => {
  it('is STORAGE_FAILED and leaves no root it made', async () => {
    const root = join(tempDir(), 'store');
    const refusal = await codedRefusal(() =>
      openLedger({ root, host: 'h1', postgres: { connectionString: unreachable } }),
    );
    expect(refusal.code).toBe('STORAGE_FAILED');
    expect(existsSync(root)).toBe(false);
  });

  it('keeps a root that was there, as it was', async () => {
    const root = join(tempDir(), 'store');
    mkdirSync(root, { mode: 0o700 });
    const refusal = await codedRefusal(() =>
      openLedger({ root, host: 'h1', postgres: { connectionString: unreachable } }),
    );
    expect(refusal.code).toBe('STORAGE_FAILED');
    expect(readdirSync(root)).toEqual([]);
  });

  it('init --postgres: exit 2, STORAGE_FAILED, no root left', async () => {
    const root = join(tempDir(), 'store');
    const c = captureIo({ env: {} });
    const code = await main(['init', '--root', root, '--host', 'h1', '--postgres', unreachable], {
      ...c.io,
      stdin: Readable.from([]),
    });
    expect(code, c.stderr()).toBe(2);
    expect(c.stderr()).toMatch(/^handoff-ledger: STORAGE_FAILED: /);
    expect(existsSync(root)).toBe(false);
  });
});
