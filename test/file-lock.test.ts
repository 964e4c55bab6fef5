/**
 * The lock file of processes sharing a root (src/ledger/file-lock.ts: trust.json, a shared pin): one holder at a
 * time while stale locks are broken by several processes at once, a live holder never taken over for its age, a lock
 * never seen half-written, a pid judged only in its own machine and pid namespace, nothing followed through a
 * symlink. test/key-rotation-race.test.ts has the basic cases (a dead holder, an old lock, LOCKED, one after another).
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
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
import { takeFileLock, withFileLock } from '../src/ledger/file-lock.js';
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
          // The test judges exclusion, not waiting: on a loaded machine every hold and break is slower, and a waiter
          // polling at up to 500 ms can lose to the other five for a while (a CI run at load 10 waited over 20 s).
          { waitMs: 50_000 },
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
  }, 90_000);

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

/** Holds the first `open` of a path containing `marker` until `go()`; `reached` resolves when it is held. */
function holdOpen(marker: string) {
  let reached!: () => void;
  let go!: () => void;
  const at = new Promise<void>((resolve) => (reached = resolve));
  const gate = new Promise<void>((resolve) => (go = resolve));
  let held = false;
  const real = originals.open as (...args: unknown[]) => Promise<unknown>;
  (fsp as unknown as Record<string, unknown>).open = async (path: unknown, ...rest: unknown[]) => {
    if (!held && String(path).includes(marker)) {
      held = true;
      reached();
      await gate;
    }
    return real(path, ...rest);
  };
  syncBuiltinESMExports();
  return { at, go };
}

const oldTime = () => new Date(Date.now() - 10 * 60_000);

describe('breaking a stale lock, step by step', () => {
  it('leaves a lock taken after it was judged stale: the breaker removes only the very lock it judged', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    writeFileSync(lockPath, JSON.stringify({ pid: 1, host: 'elsewhere', nonce: 'stale' }));
    utimesSync(lockPath, oldTime(), oldTime());
    // B judges the lock stale and stops before taking the breakers' turn.
    const turn = holdOpen('.lock.break');
    const b = withFileLock(path, 'trust.json', async () => 'B in', { staleMs: 60_000, waitMs: 300 });
    await turn.at;
    // Meanwhile another breaker removed it and a live holder took the lock.
    unlinkSync(lockPath);
    const holder = await takeFileLock(path, 'trust.json');
    turn.go();
    await expect(b).rejects.toMatchObject({ code: 'LOCKED' });
    expect(JSON.parse(readFileSync(lockPath, 'utf8')).pid).toBe(process.pid);
    await holder.release();
    expect(existsSync(lockPath)).toBe(false);
  });

  it('leaves a lock touched after it was judged stale (its holder was paused, and runs again)', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    writeFileSync(lockPath, JSON.stringify({ pid: 1, host: 'elsewhere', nonce: 'paused' }));
    utimesSync(lockPath, oldTime(), oldTime());
    const turn = holdOpen('.lock.break');
    const b = withFileLock(path, 'trust.json', async () => 'B in', { staleMs: 60_000, waitMs: 300 });
    await turn.at;
    const now = new Date();
    utimesSync(lockPath, now, now); // the holder's touch
    turn.go();
    await expect(b).rejects.toMatchObject({ code: 'LOCKED' });
    expect(JSON.parse(readFileSync(lockPath, 'utf8')).nonce).toBe('paused');
  });

  it('holds a lock whose link was made although it was answered EEXIST (NFS: a retransmitted LINK whose reply was lost)', async () => {
    // open(2), O_EXCL: on NFS a link that succeeded can be reported failed; the staging file's link count tells. The
    // process took its own lock for another's and waited on it (LOCKED), leaving a lock no process on this host breaks
    // while it runs.
    const real = originals.link as (a: string, b: string) => Promise<void>;
    (fsp as unknown as Record<string, unknown>).link = async (from: string, to: string) => {
      await real(from, to);
      throw Object.assign(new Error(`EEXIST: file already exists, link '${from}' -> '${to}'`), { code: 'EEXIST' });
    };
    syncBuiltinESMExports();
    const root = tempDir();
    const path = join(root, 'trust.json');
    await expect(withFileLock(path, 'trust.json', async () => 'in', { waitMs: 300 })).resolves.toBe('in');
    expect(readdirSync(root)).toEqual([]); // released, and no staging file left
  });

  it('on a filesystem without hard links, never removes a new lock that got the judged one’s inode', async () => {
    (fsp as unknown as Record<string, unknown>).link = async () => {
      throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
    };
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    writeFileSync(lockPath, ''); // a creator that crashed before writing its owner
    utimesSync(lockPath, oldTime(), oldTime());
    const turn = holdOpen('.lock.break'); // also syncs the link above into the module
    const b = withFileLock(path, 'trust.json', async () => 'B in', { staleMs: 60_000, waitMs: 300 });
    await turn.at;
    // Another breaker removed it; a new holder created its lock in place (empty a moment, maybe the same inode).
    unlinkSync(lockPath);
    writeFileSync(lockPath, '', { flag: 'wx' });
    turn.go();
    await expect(b).rejects.toMatchObject({ code: 'LOCKED' });
    expect(existsSync(lockPath)).toBe(true);
  });

  it('clears the turn of a breaker that died at once, and refuses (not spins) when the turn cannot be cleared', async () => {
    const root = tempDir();
    const path = join(root, 'witness');
    const lockPath = `${path}.lock`;
    const dead = () => JSON.stringify({ pid: deadPid(), host: hostname(), nonce: 'dead', ...machine() });
    writeFileSync(lockPath, dead());
    writeFileSync(`${lockPath}.break`, dead());
    // waitMs 0: a turn not cleared at the first try would be LOCKED at once; taken, it was cleared (no bound on the
    // clock, which a loaded machine can pass).
    const lock = await takeFileLock(path, 'the witness state directory', { waitMs: 0 });
    await lock.release();
    expect(readdirSync(root)).toEqual([]);
    // A turn that is not a file cannot be cleared: the wait ends in LOCKED, naming it.
    writeFileSync(lockPath, dead());
    mkdirSync(`${lockPath}.break`);
    utimesSync(`${lockPath}.break`, oldTime(), oldTime());
    await expect(takeFileLock(path, 'the witness state directory', { waitMs: 200 })).rejects.toMatchObject({
      code: 'LOCKED',
      message: expect.stringContaining('witness.lock.break" is taken'),
    });
  });

  it("never takes a lock of this machine from a holder that runs, whatever its age; a reused pid's lock is broken", async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    const start = readFileSync(`/proc/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]!;
    const here = { pid: process.pid, host: hostname(), ...machine() };
    writeFileSync(lockPath, JSON.stringify({ ...here, nonce: 'live', start }));
    utimesSync(lockPath, oldTime(), oldTime());
    await expect(
      withFileLock(path, 'trust.json', async () => 'ran', { staleMs: 1_000, waitMs: 300 }),
    ).rejects.toMatchObject({ code: 'LOCKED' });
    // The same pid with another start time: the process that wrote it is gone.
    writeFileSync(lockPath, JSON.stringify({ ...here, nonce: 'reused', start: String(Number(start) + 1) }));
    expect(await withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 300 })).toBe('ran');
  });

  it('breaks the lock of a holder that exited and was never reaped (a zombie: its pid still answers)', async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    // sh starts a child that exits at once, then becomes a process that never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const pid = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d) => resolve(String(d)))));
      const stat = () => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      for (let i = 0; i < 100 && stat()[0] !== 'Z'; i++) await sleep(20);
      expect(stat()[0]).toBe('Z');
      const start = stat()[19]!;
      writeFileSync(lockPath, JSON.stringify({ pid, host: hostname(), nonce: 'zombie', start, ...machine() }));
      expect(await withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 300 })).toBe('ran');
    } finally {
      parent.kill();
    }
  });

  it('refuses a stale age that is not a positive number (INVALID_ARGUMENT), holding nothing', async () => {
    const root = tempDir();
    for (const staleMs of [0, -1, Number.NaN])
      await expect(takeFileLock(join(root, 'x'), 'x', { staleMs })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(readdirSync(root)).toEqual([]);
    // Infinity means never by age: the touch still runs at Node's longest timer, not every millisecond.
    const lock = await takeFileLock(join(root, 'x'), 'x', { staleMs: Number.POSITIVE_INFINITY });
    await lock.release();
  });

  it("releases only its own lock: one taken over meanwhile stays its new holder's", async () => {
    const root = tempDir();
    const path = join(root, 'trust.json');
    const lockPath = `${path}.lock`;
    const first = await takeFileLock(path, 'trust.json');
    unlinkSync(lockPath); // taken over: broken by another process...
    const second = await takeFileLock(path, 'trust.json'); // ...which holds it now
    await first.release();
    expect(existsSync(lockPath)).toBe(true);
    await second.release();
    expect(existsSync(lockPath)).toBe(false);
  });
});
