/**
 * The auditor's refusals of its caller's options are made in one place, `auditUsage` (manifests/audit/errors.ts): no
 * module spells `new AuditError('USAGE', …)` or keeps its own helper doing the same.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readWitnessPolicy } from '../../manifests/audit/verify-witnesses.js';

const sources = (dir: string): string[] =>
  readdirSync(new URL(`../../${dir}/`, import.meta.url), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `${dir}/${f}`);

describe('auditUsage', () => {
  it('is the only maker of AuditError USAGE in the library, the command line and the page', () => {
    const spelled = ['manifests', 'src', 'store', 'web']
      .flatMap(sources)
      .filter((f) => f !== 'manifests/audit/errors.ts')
      .filter((f) => /new AuditError\(\s*'USAGE'/.test(readFileSync(new URL(`../../${f}`, import.meta.url), 'utf8')));
    expect(spelled).toEqual([]);
  });

  it("gives readWitnessPolicy's refusals: USAGE, a cause only where there is one", async () => {
    const err = await readWitnessPolicy(undefined, '2').then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err).toMatchObject({ name: 'AuditError', code: 'USAGE' });
    expect(Object.hasOwn(err!, 'cause')).toBe(false);
    const cause = new Error('unreadable');
    const read = await readWitnessPolicy({ name: 'w.txt', read: () => Promise.reject(cause) }, '1').then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(read).toMatchObject({ name: 'AuditError', code: 'USAGE', message: '--witness-keys "w.txt": unreadable' });
    expect(read!.cause).toBe(cause);
  });
});
