/**
 * The lock file of processes sharing a root (src/ledger/file-lock.ts: trust.json, a shared pin): one holder at a
 * time while stale locks are broken by several processes at once, a live holder never taken over for its age, a lock
 * never seen half-written, a pid judged only in its own machine and pid namespace, nothing followed through a
 * symlink. test/key-rotation-race.test.ts has the basic cases (a dead holder, an old lock, LOCKED, one after another).
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import fsp from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { withFileLock } from '../src/ledger/file-lock.js';
import { tempDir } from './support/tmp.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid!;

/** This process's boot id and pid namespace as the lock records them ('' where the system has none). */
function machine(): { boot: string; pidns: string } {
  const read = (f: () => string) => {
    try {
      return f().trim();
    } catch {
      return '';
    }
  };
  return {
    boot: read(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')),
    pidns: read(() => spawnSync('readlink', ['/proc/self/ns/pid']).stdout.toString()),
  };
}

/** A lock as a holder that died right after taking it leaves it: whole, linked into place only where none stands. */
function plantDeadLock(lockPath: string, nonce: string): boolean {
  const temp = `${lockPath}.planted-${nonce}`;
  writeFileSync(temp, JSON.stringify({ pid: deadPid(), host: hostname(), nonce, ...machine() }));
  try {
    linkSync(temp, lockPath);
    return true;
  } catch {
    return false;
  } finally {
    unlinkSync(temp);
  }
}

/**
 * Every call of these node:fs/promises functions, and every FileHandle.writeFile, waits a random 0–2 ms first
 * (interleavings a quiet disk hides: a lock created and not yet written, a lock judged and then replaced).
 */
const jittered = ['link', 'lstat', 'open', 'unlink', 'readdir', 'rename', 'readFile', 'stat'] as const;
const originals = Object.fromEntries(jittered.map((name) => [name, fsp[name]]));
type HandleProto = { writeFile: (...args: unknown[]) => Promise<void> };
let handleProto: HandleProto | undefined;
let handleWriteFile: HandleProto['writeFile'] | undefined;
async function jitter(): Promise<void> {
  for (const name of jittered) {
    const real = originals[name] as (...args: unknown[]) => Promise<unknown>;
    (fsp as unknown as Record<string, unknown>)[name] = async (...args: unknown[]) => {
      await sleep(Math.floor(Math.random() * 3));
      return real(...args);
    };
  }
  syncBuiltinESMExports();
  const probe = await fsp.open(process.execPath, 'r');
  handleProto = Object.getPrototypeOf(probe) as HandleProto;
  await probe.close();
  handleWriteFile = handleProto.writeFile;
  const realWrite = handleWriteFile;
  handleProto.writeFile = async function (this: unknown, ...args: unknown[]) {
    await sleep(Math.floor(Math.random() * 3));
    return realWrite.apply(this, args);
  };
}
afterEach(() => {
  Object.assign(fsp, originals);
  syncBuiltinESMExports();
  if (handleProto && handleWriteFile) handleProto.writeFile = handleWriteFile;
});

describe('the lock file of processes sharing a root', () => {
  it('has one holder at a time while several break the stale locks of holders that died (jittered I/O)', async () => {
    await jitter();
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    let inside = 0;
    let most = 0;
    let runs = 0;
    let planted = 0;
    const contender = async () => {
      for (let i = 0; i < 12; i++) {
        await withFileLock(
          path,
          'trust.json',
          async () => {
            inside++;
            most = Math.max(most, inside);
            await sleep(Math.floor(Math.random() * 3));
            inside--;
            runs++;
          },
          { waitMs: 20_000 },
        );
        // Now and then a holder dies right after taking the lock: the others must break it, one of them at a time.
        if (Math.random() < 0.4 && plantDeadLock(lockPath, `dead-${planted}`)) planted++;
      }
    };
    await Promise.all(Array.from({ length: 6 }, contender));
    expect(runs).toBe(72);
    expect(planted).toBeGreaterThan(5);
    expect(most).toBe(1);
    // Every dead lock was broken or is the last one planted; no turn or temporary file is left.
    const left = readdirSync(root).filter((n) => n !== 'trust.json.lock');
    expect(left).toEqual([]);
  }, 60_000);

  it('does not take a lock from a holder that runs longer than the stale age: it touches its lock', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const order: string[] = [];
    const long = withFileLock(
      path,
      'trust.json',
      async () => {
        order.push('long in');
        await sleep(1_000);
        order.push('long out');
      },
      { staleMs: 300 },
    );
    await sleep(50);
    await withFileLock(path, 'trust.json', async () => order.push('second in'), { staleMs: 300, waitMs: 5_000 });
    await long;
    expect(order).toEqual(['long in', 'long out', 'second in']);
  });

  it('judges a pid only in its own machine and pid namespace: a lock of another namespace waits for its age', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    const { boot } = machine();
    // Same host name, another pid namespace (a container sharing the root): its pid says nothing here.
    writeFileSync(lockPath, JSON.stringify({ pid: deadPid(), host: hostname(), nonce: 'ns', boot, pidns: 'pid:[1]' }));
    await expect(withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 300 })).rejects.toMatchObject({
      code: 'LOCKED',
    });
    expect(JSON.parse(readFileSync(lockPath, 'utf8')).nonce).toBe('ns');
    // The same lock from this machine and namespace, its pid gone: broken at once.
    writeFileSync(lockPath, JSON.stringify({ pid: deadPid(), host: hostname(), nonce: 'here', ...machine() }));
    expect(await withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 300 })).toBe('ran');
    expect(existsSync(lockPath)).toBe(false);
  });

  it('never opens a lock through a symlink (a FIFO would hang the reader): judged by its age, then removed', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    const fifo = join(root, 'fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    symlinkSync(fifo, lockPath);
    await expect(withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 300 })).rejects.toMatchObject({
      code: 'LOCKED',
    });
    const old = new Date(Date.now() - 10 * 60_000);
    spawnSync('touch', ['-h', '-d', old.toISOString(), lockPath]);
    expect(await withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 2_000, staleMs: 60_000 })).toBe('ran');
    expect(existsSync(lockPath)).toBe(false);
    expect(existsSync(fifo)).toBe(true); // the symlink was removed, not what it named
  });

  it('reads an empty lock (a crash of a version that wrote it in place) as an unknown owner: waits, then its age', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    writeFileSync(lockPath, '');
    await expect(withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 300 })).rejects.toMatchObject({
      code: 'LOCKED',
    });
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(lockPath, old, old);
    // A temporary lock file of a process that died before linking it goes with the stale lock.
    const leftover = `${lockPath}.0123.4567.tmp`;
    writeFileSync(leftover, '{}');
    utimesSync(leftover, old, old);
    expect(await withFileLock(path, 'trust.json', async () => 'ran', { staleMs: 60_000 })).toBe('ran');
    expect(readdirSync(root)).toEqual([]);
  });

  it('fails with STORAGE_FAILED, leaving nothing, when the lock cannot be written', async () => {
    const root = tempDir();
    const path = join(root, 'gone', 'trust.json'); // its directory does not exist
    let ran = false;
    await expect(withFileLock(path, 'trust.json', async () => (ran = true))).rejects.toMatchObject({
      code: 'STORAGE_FAILED',
      message: expect.stringContaining('trust.json: taking its lock'),
    });
    expect(ran).toBe(false);
    expect(readdirSync(root)).toEqual([]);
  });
});

describe("a witness's state directory (witness.lock, held for the witness's lifetime)", () => {
  it('lets exactly one of two witnesses opening it at once in, and the next one after it closes (jittered I/O)', async () => {
    await jitter();
    const { WitnessState } = await import('../src/witness/state.js');
    for (let round = 0; round < 20; round++) {
      const dir = join(tempDir(), 'state');
      const opened = await Promise.allSettled([WitnessState.open(dir), WitnessState.open(dir)]);
      const won = opened.filter((o) => o.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const lost = opened.find((o) => o.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toMatchObject({ code: 'LOCKED' });
      await (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof WitnessState.open>>>).value.close();
      await (await WitnessState.open(dir)).close();
    }
  });

  it("takes over the lock of a killed witness, also in an earlier version's form (its pid alone)", async () => {
    const { WitnessState } = await import('../src/witness/state.js');
    const dir = join(tempDir(), 'state');
    await (await WitnessState.open(dir)).close();
    writeFileSync(join(dir, 'witness.lock'), `${deadPid()}\n`);
    const state = await WitnessState.open(dir);
    expect(JSON.parse(readFileSync(join(dir, 'witness.lock'), 'utf8')).pid).toBe(process.pid);
    await state.close();
    expect(existsSync(join(dir, 'witness.lock'))).toBe(false);
    // A live process's lock in that form is refused.
    writeFileSync(join(dir, 'witness.lock'), `${process.pid}\n`);
    await expect(WitnessState.open(dir)).rejects.toMatchObject({ code: 'LOCKED' });
  });
});
