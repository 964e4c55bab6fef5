/**
 * A byte limit the stores refuse (`byteLimitProblem`: the blob store's `maxBlobBytes`, a read's `maxBytes`, the
 * PostgreSQL backend's `maxBlobBytes` checked before anything connects) is named as every refused value is
 * (`shownValue`): a string quoted, so `'100'` does not read as the number 100, and an object by its type, so one whose
 * `toString` throws gets the coded refusal and not that error.
 */
import { describe, expect, it } from 'vitest';
import { byteLimitProblem } from '../store/blob-store.js';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { StoreError } from '../store/errors.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { LedgerError } from '../src/errors.js';
import { refuseUnusableOptions } from '../src/ledger/pg-backend.js';
import { tempDir } from './support/tmp.js';

const hostile = {
  toString(): string {
    throw new Error('toString called');
  },
};
const cases = [
  ['100', '"100"'],
  [hostile, 'an object'],
  [Symbol('s'), 'a symbol'],
  [1.5, '1.5'],
] as const;

describe('byteLimitProblem', () => {
  it.each(cases.map(([value, shown]) => ({ value, shown })))('names the value as $shown', ({ value, shown }) => {
    expect(byteLimitProblem(value, 'maxBlobBytes')).toBe(`maxBlobBytes must be a non-negative integer, got ${shown}`);
  });

  it("is the blob store's refusal of maxBlobBytes (StoreError) and the PostgreSQL backend's (LedgerError)", async () => {
    const hash = await loadHashBackend('auto', () => {});
    for (const [value, shown] of cases) {
      const message = `maxBlobBytes must be a non-negative integer, got ${shown}`;
      const opened = FsBlobStore.open(tempDir(), { hash, maxBlobBytes: value as never }).then(
        () => undefined,
        (e: unknown) => e,
      );
      await expect(opened).resolves.toBeInstanceOf(StoreError);
      await expect(opened).resolves.toMatchObject({ code: 'INVALID_ARGUMENT', message });
      let refused: unknown;
      try {
        refuseUnusableOptions({ connectionString: 'postgresql://u@h/db', maxBlobBytes: value as never });
      } catch (e) {
        refused = e;
      }
      expect(refused).toBeInstanceOf(LedgerError);
      expect(refused).toMatchObject({ code: 'INVALID_ARGUMENT', message });
    }
  });
});
