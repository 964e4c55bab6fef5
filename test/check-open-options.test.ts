/**
 * `checkOpenOptions` (what `publish` asks before it reads its summary) judges by the open's own steps
 * (src/ledger/open.ts `refuseBeforeMaking`): for options the open refuses before it makes anything, the check refuses
 * them with the same code and words, in the same order (two things wrong: the one the open says first), and makes
 * nothing either. Only the look on a PostgreSQL connection (a stored origin) is the open's alone.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { checkOpenOptions, openLedger, type OpenLedgerOptions } from '../src/ledger/open.js';
import { main } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';
import { sampleSummary, tempDir, treeSnapshot } from './support/tmp.js';

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => 'opened',
    (err: { code?: string; message?: string }) => `${err.code}: ${err.message}`,
  );

describe('checkOpenOptions', () => {
  it('refuses what the open refuses before it makes anything, with its code and words, in its order', async () => {
    const dir = tempDir();
    const store = join(dir, 'store');
    await (await openLedger({ root: store, host: 'h' })).close();
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const later = join(dir, 'later');
    mkdirSync(later);
    writeFileSync(join(later, 'format.json'), '{"format":"handoff-ledger-root","version":99}');
    const brokenLog = join(dir, 'broken-log');
    mkdirSync(brokenLog);
    writeFileSync(join(brokenLog, 'manifests-v1'), '');
    const fresh = join(dir, 'fresh');
    const cases: [string, OpenLedgerOptions, RegExp][] = [
      ['a root that is a file', { root: file, host: 'h' }, /^UNSAFE_ROOT: /],
      // Two things wrong: the root, which the open judges first, not the connection string.
      [
        'a file root and a bad connection string',
        { root: file, host: 'h', postgres: { connectionString: 'x' } },
        /^UNSAFE_ROOT: /,
      ],
      ['a root of a newer layout', { root: later, host: 'h' }, /^FORMAT_UNSUPPORTED: /],
      ['a root inside a store', { root: join(store, 'keys'), host: 'h' }, /^INVALID_ARGUMENT: root /],
      ['no host key to make', { root: fresh, host: 'h', createHostKey: false }, /^KEY_INVALID: /],
      ['a key file that is not there', { root: fresh, host: 'h', keyFile: join(dir, 'no.key') }, /^KEY_INVALID: /],
      [
        "a new log's origin the CLI prints escaped",
        { root: fresh, host: 'h', origin: 'example.com/a\\b' },
        /^INVALID_ARGUMENT: origin: /,
      ],
      // The embedded log's directory is a file: the look at it says so, as the open's look does.
      ['a log directory that is a file', { root: brokenLog, host: 'h', origin: 'example.com/a\\b' }, /^UNSAFE_PATH: /],
      [
        'a bad connection string',
        { root: fresh, host: 'h', postgres: { connectionString: 'x' } },
        /^INVALID_ARGUMENT: /,
      ],
      [
        'a bad connection string with an origin',
        { root: fresh, host: 'h', origin: 'example.com/a', postgres: { connectionString: 'x' } },
        /^INVALID_ARGUMENT: /,
      ],
    ];
    for (const [what, options, code] of cases) {
      const before = treeSnapshot(dir);
      const checked = await refusal(checkOpenOptions(options));
      const opened = await refusal(openLedger(options));
      expect(opened, what).toMatch(code);
      expect(checked, what).toBe(opened);
      expect(treeSnapshot(dir), what).toEqual(before);
      expect(existsSync(fresh), what).toBe(false);
    }
  });

  it('lets publish refuse a root the open refuses before it reads the summary, with no --origin too', async () => {
    const dir = tempDir();
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const later = join(dir, 'later');
    mkdirSync(later);
    writeFileSync(join(later, 'format.json'), '{"format":"handoff-ledger-root","version":99}');
    for (const [root, said] of [
      [file, 'handoff-ledger: UNSAFE_ROOT: '],
      [later, 'handoff-ledger: FORMAT_UNSUPPORTED: '],
    ] as const) {
      const c = captureIo();
      const stdin = Readable.from([JSON.stringify(sampleSummary('unread'))]);
      const args = ['--root', root, '--host', 'h', '--principal', 'alice', '--session', 's', '--run', 'r'];
      const code = await main(['publish', ...args], { ...c.io, stdin });
      expect(c.stderr().startsWith(said), c.stderr()).toBe(true);
      expect(code).not.toBe(0);
      expect(stdin.readableDidRead, `${said}: standard input was read`).toBe(false);
    }
  });
});
