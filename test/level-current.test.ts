/**
 * The embedded log's directory without LevelDB's CURRENT file (a partial restore or copy, a hand-made mistake):
 * LevelDB would open it as a new, empty database and delete the data files it found there. The log refuses before
 * LevelDB sees the directory, whatever command opens the store (fsck included), and says how to restore CURRENT.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

const scope = { principal: 'alice', session: 's', run: 'r' };

/** Every file of the directory with its bytes (LevelDB's own LOG included: opening at all would write it). */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    out[name] = statSync(path).isFile() ? readFileSync(path).toString('base64') : 'dir';
  }
  return out;
}

/** A store with three manifests whose log directory has lost CURRENT; its files as they were then. */
async function storeWithoutCurrent(
  name = "the team's store", // a space and a quote: the restore command must quote the path
  parent = tempDir(),
): Promise<{ root: string; dir: string; before: Record<string, string> }> {
  const root = join(parent, name);
  const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
  for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
  await ledger.close();
  // Opened again: LevelDB writes the log it replays into a table file, which is what a CURRENT-less open deletes.
  await (await openLedger({ root, host: 'h', onNotice: () => {} })).close();
  const dir = join(root, 'manifests-v1');
  expect(readdirSync(dir).some((n) => n.endsWith('.ldb'))).toBe(true);
  rmSync(join(dir, 'CURRENT'));
  return { root, dir, before: snapshot(dir) };
}

describe('a manifest log directory without CURRENT', () => {
  it('is refused at open (RECORD_CORRUPT), nothing changed, and opens again once CURRENT is written back', async () => {
    const { root, dir, before } = await storeWithoutCurrent();
    const err = await openLedger({ root, host: 'h', onNotice: () => {} }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'RECORD_CORRUPT', message: expect.stringMatching(/but no CURRENT file/) });
    expect(snapshot(dir)).toEqual(before);
    // The message's own restore step, run by a shell as an operator would paste it.
    const step = /\((echo (MANIFEST-[0-9]+) > '.*')\), then run fsck/.exec((err as Error).message);
    expect(step, (err as Error).message).not.toBeNull();
    expect(spawnSync('/bin/sh', ['-c', step![1]!]).status).toBe(0);
    expect(readFileSync(join(dir, 'CURRENT'), 'utf8')).toBe(`${step![2]}\n`);
    const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    try {
      expect(await ledger.resume(scope)).toMatchObject({ seq: 2, summary: sampleSummary(2) });
      expect((await fsck(ledger)).ok).toBe(true);
    } finally {
      await ledger.close();
    }
  });

  it('is refused by a CLI fsck (and resume) without touching a file, and the restore step it prints works', async () => {
    const { root, dir, before } = await storeWithoutCurrent();
    let stderr = '';
    for (const args of [
      ['fsck', '--root', root, '--host', 'h'],
      ['resume', '--root', root, '--host', 'h', '--principal', 'alice', '--session', 's'],
    ]) {
      const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).not.toBe(0);
      expect(r.stderr).toMatch(/RECORD_CORRUPT: the manifest log .* but no CURRENT file/);
      expect(snapshot(dir)).toEqual(before);
      stderr = r.stderr;
    }
    // Pasted from the terminal as printed (the CLI escapes what it prints: the step must survive that).
    const step = /\((echo MANIFEST-[0-9]+ > .*)\), then run fsck/.exec(stderr);
    expect(step, stderr).not.toBeNull();
    expect(spawnSync('/bin/sh', ['-c', step![1]!]).status).toBe(0);
    const fsckAfter = spawnSync(process.execPath, [CLI, 'fsck', '--root', root, '--host', 'h'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(fsckAfter.status, fsckAfter.stderr).toBe(0);
  });

  // A path the step cannot give as a shell word shown as it is: a line break (printed as \x0a, the escape pasted
  // names another path; raw, it broke the message's line), a control character, a backslash. The step names the
  // directory quoted instead, and following its words restores the log.
  it.each([["the team's\nstore"], ['store\u001b[2J'], ['back\\slash']])(
    'gives no command to paste for a directory %j, and names it quoted',
    async (name) => {
      const { root, dir } = await storeWithoutCurrent(name);
      const err = (await openLedger({ root, host: 'h', onNotice: () => {} }).catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ code: 'RECORD_CORRUPT' });
      const step =
        /write the name of the newest MANIFEST file \((MANIFEST-[0-9]+), and a line break\) into a file CURRENT in the directory (".*"), then run fsck$/.exec(
          err.message,
        );
      expect(step, err.message).not.toBeNull();
      expect(err.message).not.toMatch(/echo|[\n\u001b]/);
      expect(JSON.parse(step![2]!)).toBe(dir);
      // Its words, followed: the log opens again.
      writeFileSync(join(dir, 'CURRENT'), `${step![1]}\n`);
      const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
      try {
        expect(await ledger.resume(scope)).toMatchObject({ seq: 2 });
      } finally {
        await ledger.close();
      }
    },
  );

  it('gives a relative path that begins with - as ./-…, which the pasted step writes', async () => {
    const cwd = tempDir();
    const { dir } = await storeWithoutCurrent('-store', cwd);
    const r = spawnSync(process.execPath, [CLI, 'fsck', '--root=-store', '--host', 'h'], {
      cwd,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, r.stderr).not.toBe(0);
    const step = /\((echo MANIFEST-[0-9]+ > (.*))\), then run fsck/.exec(r.stderr);
    expect(step, r.stderr).not.toBeNull();
    expect(step![2]).toBe("'./-store/manifests-v1/CURRENT'");
    expect(spawnSync('/bin/sh', ['-c', step![1]!], { cwd }).status).toBe(0);
    expect(existsSync(join(dir, 'CURRENT'))).toBe(true);
  });

  it('is opened as a new log when it holds no data yet (a creation that stopped before its first write)', async () => {
    const root = join(tempDir(), 'store');
    const dir = join(root, 'manifests-v1');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // What LevelDB leaves when it stops between writing its first MANIFEST and CURRENT: no table, an empty log.
    writeFileSync(join(dir, 'MANIFEST-000001'), '');
    writeFileSync(join(dir, '000003.log'), '');
    const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    try {
      expect((await ledger.publish(scope, sampleSummary(0))).seq).toBe(0);
    } finally {
      await ledger.close();
    }
    expect(existsSync(join(dir, 'CURRENT'))).toBe(true);
  });
});

describe('a manifest log LevelDB cannot open', () => {
  it('is STORAGE_FAILED with LevelDB’s own reason in the message (not only "Database failed to open")', async () => {
    const root = join(tempDir(), 'store');
    await (await openLedger({ root, host: 'h', onNotice: () => {} })).close();
    // CURRENT names a MANIFEST that is not there.
    writeFileSync(join(root, 'manifests-v1', 'CURRENT'), 'MANIFEST-000099\n');
    const err = await openLedger({ root, host: 'h', onNotice: () => {} }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STORAGE_FAILED' });
    expect((err as Error).message).toMatch(/^manifest log: open failed: Database failed to open: .*MANIFEST-000099/);
  });
});
