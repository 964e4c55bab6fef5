/**
 * The raw writes the benchmarks hold publish to (benchmarks/suites/raw.ts) write exactly the given bytes, the
 * flush-behind one in 1 MiB positioned writes, several in flight, with fsyncs behind, an odd tail included.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { randomFillSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { rawDurableWrite, rawDurableWriteFlushBehind } from '../benchmarks/suites/raw.js';
import { tempDir } from './support/tmp.js';

const MiB = 1024 * 1024;

/** The writes and syncs of every FileHandle, in the order they start, with the writes in flight at each start. */
async function watchHandles(dir: string) {
  const probe = await fsp.open(join(dir, 'probe'), 'w');
  const proto = Object.getPrototypeOf(probe) as { write: () => Promise<unknown>; sync: () => Promise<void> };
  await probe.close();
  const events: Array<{ op: 'write' | 'sync'; position?: number; writesInFlight: number }> = [];
  let writing = 0;
  const write = proto.write;
  const sync = proto.sync;
  vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
    events.push({ op: 'write', position: args[3] as number, writesInFlight: writing });
    writing++;
    try {
      return await (write as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    } finally {
      writing--;
    }
  });
  vi.spyOn(proto, 'sync').mockImplementation(async function (this: unknown) {
    events.push({ op: 'sync', writesInFlight: writing });
    return sync.apply(this);
  });
  return events;
}

afterEach(() => vi.restoreAllMocks());

describe('benchmarks/suites/raw.ts', () => {
  it('flush-behind writes 1 MiB blocks at their offsets, several in flight, and starts an fsync before the last write', async () => {
    const dir = tempDir('hl-bench-raw-');
    const events = await watchHandles(dir);
    await rawDurableWriteFlushBehind(dir, 'f', randomFillSync(new Uint8Array(17 * MiB + 3)));
    const writes = events.filter((e) => e.op === 'write');
    expect(writes.map((e) => e.position)).toEqual(Array.from({ length: 18 }, (_, i) => i * MiB));
    expect(Math.max(...writes.map((e) => e.writesInFlight))).toBeGreaterThan(0);
    const lastWrite = events.lastIndexOf(writes.at(-1)!);
    expect(
      events.slice(0, lastWrite).some((e) => e.op === 'sync'),
      'an fsync behind the writes',
    ).toBe(true);
    // The final fsync of the file and the directory's after the last write.
    expect(events.slice(lastWrite).filter((e) => e.op === 'sync').length).toBeGreaterThanOrEqual(2);
  });

  it('the plain write writes once and syncs only after it', async () => {
    const dir = tempDir('hl-bench-raw-');
    const events = await watchHandles(dir);
    await rawDurableWrite(dir, 'f', randomFillSync(new Uint8Array(17 * MiB + 3)));
    expect(events.map((e) => e.op)).toEqual(['write', 'sync', 'sync']);
  });

  for (const [name, write] of [
    ['plain', rawDurableWrite],
    ['flush-behind', rawDurableWriteFlushBehind],
  ] as const) {
    it(`${name}: the file holds the bytes (17 MiB and 3 bytes, one byte, none); no staging file is left`, async () => {
      const dir = tempDir('hl-bench-raw-');
      for (const size of [17 * MiB + 3, 1, 0]) {
        const bytes = randomFillSync(new Uint8Array(size));
        await write(dir, `f${size}`, bytes);
        expect(Buffer.compare(readFileSync(join(dir, `f${size}`)), bytes), `${size} bytes`).toBe(0);
        expect(existsSync(join(dir, `f${size}.tmp`))).toBe(false);
      }
    });
    it(`${name}: a name already staged is refused (EEXIST), not overwritten`, async () => {
      const dir = tempDir('hl-bench-raw-');
      writeFileSync(join(dir, 'c.tmp'), 'kept');
      await expect(write(dir, 'c', new Uint8Array(2 * MiB))).rejects.toMatchObject({ code: 'EEXIST' });
      expect(readFileSync(join(dir, 'c.tmp'), 'utf8')).toBe('kept');
    });
  }
});
