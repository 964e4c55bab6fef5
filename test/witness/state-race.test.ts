/**
 * The witness's state against a monitor's read that is delivered late: a GET of a log not yet cached (a restarted
 * witness) reads its file outside the per-log lock, and an add-checkpoint may store a larger tree meanwhile. The read's
 * older tree must not replace the stored one in memory, or the next add-checkpoint from the older size is cosigned.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WitnessState } from '../../src/witness/state.js';
import { tempDir } from '../support/tmp.js';
import { HandLog } from './support.js';

/** While set, the next readFile of a witness state file is answered only once `hold` settles (its bytes read at once). */
const delay: { hold?: Promise<void>; reads: number } = { reads: 0 };

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const readFile = (async (...args: Parameters<typeof real.readFile>) => {
    // Read now, answered (bytes or error) later.
    const result = await real.readFile(...args).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    if (String(args[0]).includes('/logs/')) {
      delay.reads++;
      const hold = delay.hold;
      delay.hold = undefined;
      if (hold) await hold;
    }
    if ('error' in result) throw result.error;
    return result.value;
  }) as typeof real.readFile;
  return { ...real, default: { ...real, readFile }, readFile };
});

afterEach(() => {
  delay.hold = undefined;
  delay.reads = 0;
});

const log = new HandLog('witness-race.example/log', 7);
const leaves = HandLog.leaves('r', 20);
const fork = [...leaves.slice(0, 8), ...HandLog.leaves('f', 12).slice(8)];
const tree = (of: Uint8Array[], n: number) => ({ size: n, root: log.root(of.slice(0, n)), note: `note ${n}` });

describe('witness state: a read delivered late', () => {
  it.each([
    ['a stored tree', 8],
    ['no stored tree (never cosigned)', 0],
  ])('does not put %s back over one stored while it was read', async (_, held) => {
    const dir = join(tempDir(), 'state');
    let state = await WitnessState.open(dir);
    if (held > 0) await state.put(log.origin, 0, tree(leaves, held));
    await state.close();

    state = await WitnessState.open(dir); // restarted: nothing cached
    try {
      let release!: () => void;
      delay.hold = new Promise<void>((r) => (release = r));
      const monitor = state.get(log.origin); // the GET's read: its bytes (size `held`) are delivered late
      const stored = state.put(log.origin, held, tree(leaves, 20));
      // The put either waits for that same read or reads again and stores; the late bytes come after either.
      await Promise.race([stored, new Promise((r) => setTimeout(r, 500))]);
      release();
      await stored;
      expect((await monitor)?.size).toBeOneOf([held === 0 ? undefined : held, 20]);
      expect((await state.get(log.origin))?.size).toBe(20);
      // A fork of the first `held` leaves, submitted from the older size, is refused.
      await expect(state.put(log.origin, held, tree(fork, 12))).rejects.toMatchObject({ code: 'CHAIN_CONFLICT' });
    } finally {
      await state.close();
    }
    state = await WitnessState.open(dir);
    try {
      expect(await state.get(log.origin)).toMatchObject({ size: 20, note: 'note 20' });
    } finally {
      await state.close();
    }
  });

  it('reads a log’s file once for the calls that find it uncached together', async () => {
    const dir = join(tempDir(), 'state');
    let state = await WitnessState.open(dir);
    await state.put(log.origin, 0, tree(leaves, 5));
    await state.close();
    state = await WitnessState.open(dir);
    try {
      delay.reads = 0;
      const got = await Promise.all([state.get(log.origin), state.get(log.origin), state.get(log.origin)]);
      expect(got.map((g) => g?.size)).toEqual([5, 5, 5]);
      expect(delay.reads).toBe(1);
    } finally {
      await state.close();
    }
  });
});
