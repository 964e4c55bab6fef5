/**
 * A refused value is named as `shownValue` names it (store/errors.ts) wherever an option or argument of unknown type is
 * refused: a string quoted (`'5'` does not read as the number 5), an object or symbol by its type, so one whose
 * `toString` throws, or a bigint that `JSON.stringify` cannot take, gets the coded refusal and not a TypeError. These
 * spelt it `String(value)` (or `JSON.stringify`) before.
 */
import { describe, expect, it } from 'vitest';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex } from '../store/hash/digest.js';
import { pgOptionsProblem } from '../store/pg/db.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { createWitnessServer } from '../src/witness/server.js';
import { tempDir } from './support/tmp.js';

const hostile = {
  toString(): string {
    throw new Error('toString called');
  },
};

/** What `f` threw (or returned, resolved, rejected with): the coded error is compared by code and message. */
async function refusal(f: () => unknown): Promise<{ name?: string; code?: string; message?: string }> {
  try {
    const value: unknown = await f();
    return { message: typeof value === 'string' ? value : `no refusal: ${typeof value}` };
  } catch (err) {
    const e = err as { name?: string; code?: string; message?: string };
    return { name: e.name, code: e.code, message: e.message };
  }
}

describe('a refused value is named by shownValue', () => {
  it("the filesystem blob store's keepStagingMs", async () => {
    const hash = await loadHashBackend('auto', () => {});
    for (const [value, shown] of [
      [hostile, 'an object'],
      ['5', '"5"'],
    ] as const) {
      const r = await refusal(() => FsBlobStore.open(tempDir(), { hash, keepStagingMs: value as never }));
      expect(r).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `keepStagingMs must be a non-negative number, got ${shown}`,
      });
    }
  });

  it("PostgreSQL's maxConnections, lockTimeoutMs, idleInTransactionTimeoutMs, preparedStatements and schema", async () => {
    const base = { connectionString: 'postgresql://u@h/db' };
    expect(await refusal(() => pgOptionsProblem({ ...base, maxConnections: hostile as never }))).toEqual({
      message: 'maxConnections must be a positive integer, got an object',
    });
    expect(await refusal(() => pgOptionsProblem({ ...base, lockTimeoutMs: '5' as never }))).toEqual({
      message: 'lockTimeoutMs must be an integer number of milliseconds from 0 to 2147483647, got "5"',
    });
    expect(
      await refusal(() => pgOptionsProblem({ ...base, idleInTransactionTimeoutMs: Symbol('s') as never })),
    ).toEqual({
      message:
        'idleInTransactionTimeoutMs must be an integer number of milliseconds from 0 to 2147483647, got a symbol',
    });
    expect(await refusal(() => pgOptionsProblem({ ...base, preparedStatements: 'no' as never }))).toEqual({
      message: 'preparedStatements must be true or false, got "no"',
    });
    const schema = await refusal(() => pgOptionsProblem({ ...base, schema: 1n as never }));
    expect(schema.message).toMatch(/^schema must be a lowercase identifier matching .*, got 1$/);
  });

  it("the witness server's requestTimeoutMs", async () => {
    const r = await refusal(() =>
      createWitnessServer({
        signer: {} as never,
        logs: new Map(),
        state: new Promise<never>(() => {}),
        requestTimeoutMs: hostile as never,
      }),
    );
    expect(r).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'requestTimeoutMs must be a whole number of milliseconds from 1 to 2147483647, got an object',
    });
  });

  it("a digest, and the manifest log's counts, digests and key ids", async () => {
    expect(await refusal(() => digestHex(hostile as never))).toMatchObject({
      code: 'INVALID_DIGEST',
      message: 'not a blake3 digest: an object',
    });
    const log = await LevelManifestLog.open(tempDir());
    try {
      expect(await refusal(() => log.entry('s1', hostile as never))).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'seq must be a non-negative integer, got an object',
      });
      expect(await refusal(() => log.entry('s1', '3' as never))).toMatchObject({
        message: 'seq must be a non-negative integer, got "3"',
      });
      expect(await refusal(() => log.positionOf(hostile as never))).toMatchObject({
        code: 'INVALID_ID',
        message: 'id is not a blake3 digest: an object',
      });
      expect(await refusal(() => log.origin(hostile as never))).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^origin an object is not a valid origin/),
      });
      expect(await refusal(() => log.signingKeys.get(hostile as never))).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'keyId is not a printable key id: an object',
      });
      // A string is still shown quoted, up to 80 characters, with `…` after the quote where it was cut.
      expect((await refusal(() => log.positionOf('x'.repeat(100) as never))).message).toBe(
        `id is not a blake3 digest: "${'x'.repeat(80)}"…`,
      );
      expect((await refusal(() => log.positionOf('x'.repeat(80) as never))).message).toBe(
        `id is not a blake3 digest: "${'x'.repeat(80)}"`,
      );
    } finally {
      await log.close();
    }
  });
});
