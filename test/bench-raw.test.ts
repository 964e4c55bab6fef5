/**
 * The raw writes the benchmarks hold publish to (benchmarks/suites/raw.ts) write exactly the given bytes: the
 * flush-behind one in 1 MiB positioned writes, several in flight, with fsyncs behind, an odd tail included.
 */
import { describe, expect, it } from 'vitest';
import { randomFillSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rawDurableWrite, rawDurableWriteFlushBehind } from '../benchmarks/suites/raw.js';
import { tempDir } from './support/tmp.js';

const MiB = 1024 * 1024;

describe('benchmarks/suites/raw.ts', () => {
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
