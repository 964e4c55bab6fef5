/**
 * The Node auditing entry points given options their types do not allow, from JavaScript: `auditBundle` without
 * options, `createWorkerLineVerifier` without options or trust, a `threads` that is no whole number, a `verifier` of
 * another name. Each is the auditor's `USAGE`, as `verifyBundle` refuses the same, before any worker starts; they
 * were a TypeError, or workers started with no trust.
 */
import { describe, expect, it } from 'vitest';
import { auditBundle, createWorkerLineVerifier, isHandoffLedgerError } from '../../src/index.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { trustOf } from '../support/bundle-builder.js';

async function refusal(call: () => Promise<unknown>): Promise<unknown> {
  try {
    const made = await call();
    await (made as { close?: () => Promise<void> } | undefined)?.close?.();
  } catch (err) {
    return err;
  }
  return 'no error';
}

const throwing = Object.defineProperty({}, 'trust', {
  enumerable: true,
  get() {
    throw new Error('getter');
  },
});

describe('the auditing entry points refuse options that are not what their types say', () => {
  it('auditBundle without options, or with options that cannot be read: USAGE', async () => {
    const reader = memoryBundleReader({ manifests: '' });
    for (const options of [undefined, null, 5, throwing]) {
      const err = await refusal(() => auditBundle(reader, options as never));
      expect(isHandoffLedgerError(err), String(options)).toBe(true);
      expect(err, String(options)).toMatchObject({ name: 'AuditError', code: 'USAGE' });
    }
  });

  it('createWorkerLineVerifier without trust, with a threads or verifier its types do not allow: USAGE', async () => {
    const trust = trustOf();
    const bad: unknown[] = [
      undefined,
      null,
      {},
      { threads: 1 },
      throwing,
      { trust, threads: -1 },
      { trust, threads: 1.5 },
      { trust, threads: '2' },
      { trust, threads: NaN },
      { trust, verifier: 'bogus' },
      { trust, verifier: 5 },
    ];
    for (const [i, options] of bad.entries()) {
      const err = await refusal(() => createWorkerLineVerifier(options as never));
      expect(isHandoffLedgerError(err), `case ${i}`).toBe(true);
      expect(err, `case ${i}`).toMatchObject({ name: 'AuditError', code: 'USAGE' });
    }
    // What the types allow starts as ever (threads 0: one worker, as `cores - 1` on one core asks).
    for (const options of [
      { trust, threads: 0 },
      { trust, threads: 1, verifier: 'noble' as const },
    ]) {
      const pool = await createWorkerLineVerifier(options);
      await pool.close();
    }
  });
});
