/**
 * A thrown value that is no Error, one whose `toString` throws, or an Error with a megabyte message, as the audit's
 * coded refusals name it: through `errorText` (store/errors.ts), bounded and never throwing. `String(err)`, `${err}`
 * or `(err as Error).message` of such a value threw a TypeError (or the value's own error) in place of the coded
 * refusal, read "undefined", or copied the megabyte into the message. The page's modules (web/worker/) that run in
 * Node are checked here too; web/app.ts and web/worker/verify.worker.ts need a page (see the report of the change).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuditError } from '../../manifests/audit/errors.js';
import { readWitnessPolicy } from '../../manifests/audit/verify-witnesses.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { servePoolWorker, type PoolReply, type PoolRequest } from '../../web/worker/line-pool.js';
import type { BundleReader } from '../../manifests/audit/bundle.js';
import { tempDir } from '../support/tmp.js';

// web/worker/bundle-source.ts uses the DOM's fetch options (`cache`), which Node's types lack: imported by a name the
// root project's type check does not follow (web/tsconfig.json checks that module).
const BUNDLE_SOURCE: string = '../../web/worker/bundle-source.js';
const { readerFor } = (await import(BUNDLE_SOURCE)) as {
  readerFor(source: { kind: 'files'; header?: Blob; manifests: Blob; tree: object }): BundleReader;
};

/** What `realpath` of node:fs/promises rejects with, when set (openBundleDir's first step). */
let realpathRejects: { value: unknown } | undefined;
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>();
  return {
    ...fs,
    realpath: (...args: Parameters<typeof fs.realpath>) =>
      realpathRejects ? Promise.reject(realpathRejects.value) : fs.realpath(...args),
  };
});
afterEach(() => {
  realpathRejects = undefined;
});

/** A value whose `toString` (so `${value}` and `String(value)`) throws. */
const hostile = () => ({
  toString(): string {
    throw new TypeError('toString says no');
  },
});
const megabyte = () => new Error(`EIO ${'x'.repeat(1024 * 1024)}`);
const BOUND = 5000;

const THROWN: Array<[string, () => unknown, string]> = [
  ['an object whose toString throws', hostile, 'an object'],
  ['a string', () => 'disk gone', 'disk gone'],
  ['undefined', () => undefined, 'undefined'],
  ['an Error with a megabyte message', megabyte, 'EIO xxx'],
];

async function refusal(p: Promise<unknown>): Promise<AuditError> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AuditError);
  return err as AuditError;
}

describe.each(THROWN)('a thrown value that is %s', (_, value, says) => {
  it('is BUNDLE_IO from openBundleDir (src/ops/bundle-dir.ts ioError), bounded', async () => {
    realpathRejects = { value: value() };
    const err = await refusal(openBundleDir(tempDir()));
    expect(err.code).toBe('BUNDLE_IO');
    expect(err.message).toContain(`: ${says}`);
    expect(err.message.length).toBeLessThan(BOUND);
  });

  it('is USAGE from readWitnessPolicy when keys.read() rejects with it, naming it, bounded', async () => {
    const err = await refusal(readWitnessPolicy({ name: 'w.txt', read: () => Promise.reject(value()) }, '1'));
    expect(err.code).toBe('USAGE');
    expect(err.message).toMatch(/^--witness-keys "w\.txt": /);
    expect(err.message).toContain(says);
    expect(err.message.length).toBeLessThan(BOUND);
  });

  it("is BUNDLE_IO from the page's file reader (web/worker/bundle-source.ts ioError), bounded", async () => {
    const unreadable = { size: 10, arrayBuffer: () => Promise.reject(value()) } as unknown as Blob;
    const reader = readerFor({ kind: 'files', header: unreadable, manifests: new Blob([]), tree: {} });
    const err = await refusal(reader.header());
    expect(err.code).toBe('BUNDLE_IO');
    expect(err.message).toContain(`: ${says}`);
    expect(err.message.length).toBeLessThan(BOUND);
  });

  it("is the pool worker's pool-failed message (web/worker/line-pool.ts), bounded", async () => {
    const replies: PoolReply[] = [];
    const serve = servePoolWorker((r) => replies.push(r));
    const thrown = value();
    const request = {
      type: 'pool-start',
      get trustText(): string {
        throw thrown;
      },
    } as unknown as PoolRequest;
    serve(request);
    await vi.waitFor(() => expect(replies).toHaveLength(1));
    const reply = replies[0]!;
    expect(reply.type).toBe('pool-failed');
    const message = (reply as { message: string }).message;
    expect(message).toContain(says);
    expect(message.length).toBeLessThan(BOUND);
  });
});
