/**
 * A refusal that names a value by its type reads as English: `undefined` and `null` as themselves, any other type with
 * its article (`a string`, `an object`). Messages built as `a ${typeof x}` or `not ${typeof x}` read `a undefined`,
 * `a object`, `not object`, `not string`.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { checkBooleanOption, StoreError, typeWithArticle } from '../store/errors.js';
import { FsBlobStore } from '../store/index.js';
import { canonicalize } from '../manifests/encoding/canonical.js';
import { compactionRequest } from '../src/compaction/tool.js';
import { fsck, parseDuration } from '../src/ops/maintenance.js';
import { parseManifestId } from '../src/ledger/proofs.js';
import { exportBundle, openLedger } from '../src/index.js';
import { anthropicAdapter } from '../src/adapters/anthropic.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const refusal = async (f: () => unknown): Promise<Error> => {
  try {
    await f();
  } catch (err) {
    return err as Error;
  }
  throw new Error('not refused');
};

describe('a type named in a refusal', () => {
  it('typeWithArticle: undefined and null as themselves, every other type with its article', () => {
    expect([undefined, null, {}, [], 'x', 1, 1n, true, Symbol('s'), () => 1].map(typeWithArticle)).toEqual([
      'undefined',
      'null',
      'an object',
      'an object',
      'a string',
      'a number',
      'a bigint',
      'a boolean',
      'a symbol',
      'a function',
    ]);
  });

  it("FsBlobStore.open's refusal of a hash left out says undefined, not a undefined", async () => {
    const err = await refusal(() => FsBlobStore.open(join(tempDir(), 'store'), {} as never));
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(err.message).toBe(
      'FsBlobStore.open: hash must be a BLAKE3 backend ({ name, create() }, as loadHashBackend gives), not undefined',
    );
  });

  it('the JCS canonicalizer names what it cannot canonicalize', () => {
    expect(() => canonicalize(undefined)).toThrow(new TypeError('JCS: cannot canonicalize undefined'));
    expect(() => canonicalize([1, undefined])).toThrow(new TypeError('JCS: cannot canonicalize undefined'));
    expect(() => canonicalize({ a: 1n })).toThrow(new TypeError('JCS: cannot canonicalize a bigint'));
  });

  it('a yes/no option, a duration, a transcript, a manifest id, a Ledger: an object, undefined, a string', async () => {
    expect(() => checkBooleanOption({}, 'dryRun', StoreError)).toThrow(
      'dryRun must be true or false (or undefined: the default), not an object',
    );
    expect(() => parseDuration(undefined as never)).toThrow(
      'not a duration: undefined (use text such as 30m, 24h, 7d)',
    );
    expect(() => parseDuration({} as never)).toThrow('not a duration: an object (use text such as 30m, 24h, 7d)');
    expect(() => compactionRequest({ messages: {} as never })).toThrow(
      'the transcript must be a list of messages, not an object',
    );
    expect(() => compactionRequest({ messages: 'hello' as never })).toThrow(
      'the transcript must be a list of messages, not a string',
    );
    expect(() => parseManifestId(null)).toThrow('a manifest id is blake3:<64 lowercase hex>, not null');
    expect(() => parseManifestId(7)).toThrow('a manifest id is blake3:<64 lowercase hex>, not a number');
    expect((await refusal(() => fsck({} as never))).message).toBe(
      'fsck needs a Ledger (from openLedger), not an object',
    );
    expect((await refusal(() => exportBundle('ledger' as never, { out: tempDir() } as never))).message).toBe(
      'exportBundle needs a Ledger or an ExportSource { host, log, blobs }, not a string',
    );
  });

  it("a consistency proof's old size given as text is shown as the sizes are, quoted", async () => {
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      await ledger.publish({ principal: 'p', session: 's', run: 'r1' }, sampleSummary());
      const err = await refusal(() => ledger.consistencyProof('1' as never));
      expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(err.message).toBe('old size: a tree size from 1 to 1, not "1"');
    } finally {
      await ledger.close();
    }
  });

  it('an adapter given no options object names what it was given: a number, undefined', () => {
    expect(() => anthropicAdapter(1 as never)).toThrow('anthropicAdapter needs an options object, not a number');
    expect(() => anthropicAdapter(undefined as never)).toThrow(
      'anthropicAdapter needs an options object, not undefined',
    );
  });
});
