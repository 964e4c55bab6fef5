/**
 * A refusal quotes what the schema refused, clipped: zod names an unknown key whole, and a trust file's, bundle's or
 * manifest's keys are untrusted input of any size.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeZodError, MAX_MESSAGE_CHARS, MAX_SEGMENT_CHARS } from '../manifests/format/zod-issue.js';
import { parseTrustStore } from '../manifests/format/trust.js';

const refusal = (fn: () => unknown): Error => {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a refusal');
};

describe('describeZodError', () => {
  it('clips an unknown key of 64 KiB in the message, keeping its start', () => {
    const key = `k${'x'.repeat(64 * 1024)}`;
    const parsed = z.strictObject({ a: z.number() }).safeParse({ a: 1, [key]: 1 });
    expect(parsed.success).toBe(false);
    const text = describeZodError(parsed.error!);
    expect(text.length).toBeLessThanOrEqual('(root): '.length + MAX_MESSAGE_CHARS + 1);
    expect(text).toMatch(/^\(root\): Unrecognized key: "kxxx/);
    expect(text.endsWith('…')).toBe(true);
  });

  it('clips each long segment of the path (quoted, `…` after the quote), and keeps short names and indices as they are', () => {
    const long = 'p'.repeat(10_000);
    const parsed = z.record(z.string(), z.object({ '': z.number() })).safeParse({ [long]: { '': 'no' } });
    const text = describeZodError(parsed.error!);
    expect(text.startsWith(`"${'p'.repeat(MAX_SEGMENT_CHARS)}"…."": `)).toBe(true);
    expect(text.length).toBeLessThan(MAX_SEGMENT_CHARS + MAX_MESSAGE_CHARS + 10);
    const short = z.object({ a: z.array(z.number()) }).safeParse({ a: [1, 'two'] });
    expect(describeZodError(short.error!)).toBe('a.1: Invalid input: expected number, received string');
  });

  it('quotes a key that is no plain name, so it cannot pass for the path or the message (`: `, `.`, spaces, an index)', () => {
    const schema = z.object({ logs: z.record(z.string(), z.object({ size: z.number() })) });
    const at = (key: string) => describeZodError(schema.safeParse({ logs: { [key]: { size: 'no' } } }).error!);
    // Put in as they were, `a: b` read as the path `logs.a` and a message beginning `b.size: …`, `x.y` as two
    // segments, `0` as an array's index.
    expect(at('a: b')).toBe('logs."a: b".size: Invalid input: expected number, received string');
    expect(at('x.y')).toBe('logs."x.y".size: Invalid input: expected number, received string');
    expect(at('two words')).toBe('logs."two words".size: Invalid input: expected number, received string');
    expect(at('0')).toBe('logs."0".size: Invalid input: expected number, received string');
    expect(at('q"\\')).toBe('logs."q\\"\\\\".size: Invalid input: expected number, received string');
    expect(at('plain_name-2')).toBe('logs.plain_name-2.size: Invalid input: expected number, received string');
  });

  it('names a missing field as missing, not as a value of type undefined, and keeps the other type mismatches', () => {
    const schema = z.object({ task: z.string(), steps: z.array(z.string()), at: z.object({ n: z.number() }) });
    const missing = (value: unknown) => describeZodError(schema.safeParse(value).error!);
    expect(missing({})).toBe('task: required field missing (expected string)');
    expect(missing({ task: 't' })).toBe('steps: required field missing (expected array)');
    expect(missing({ task: 't', steps: [], at: {} })).toBe('at.n: required field missing (expected number)');
    // An undefined element of an array is an element, not a field; a value of another type says what it is.
    expect(missing({ task: 't', steps: [undefined, 's'] })).toBe(
      'steps.0: Invalid input: expected string, received undefined',
    );
    expect(missing({ task: 1 })).toBe('task: Invalid input: expected string, received number');
    expect(describeZodError(z.string().safeParse(undefined).error!)).toBe(
      '(root): Invalid input: expected string, received undefined',
    );
  });

  it('escaped: leaves nothing a terminal acts on raw in a key it quotes or a path segment (zod quotes a key as it is)', () => {
    // ESC (C0, which zod does not escape), the one-byte CSI, DEL and a right-to-left override.
    const acting = '\u001b[2J\u009b2J\u007f\u202e';
    const raw = /[\u0000-\u001f\u007f-\u009f\u202e]/;
    const unknown = z.strictObject({ a: z.number() }).safeParse({ a: 1, [`k${acting}`]: 1 });
    const text = describeZodError(unknown.error!, { escaped: true });
    expect(text).not.toMatch(raw);
    expect(text).toBe('(root): Unrecognized key: "k\\u001b[2J\\u009b2J\\u007f\\u202e"');
    const inPath = z.record(z.string(), z.number()).safeParse({ [`p${acting}\n`]: 'no' });
    const pathText = describeZodError(inPath.error!, { escaped: true });
    expect(pathText).not.toMatch(raw);
    expect(pathText.startsWith('"p\\u001b[2J\\u009b2J\\u007f\\u202e\\n": ')).toBe(true);
    // Without it, the message as zod gives it: the auditor's findings, which the CLI and the page escape once as they
    // print them. A path segment is quoted (escaped) either way.
    expect(describeZodError(unknown.error!)).toBe(`(root): Unrecognized key: "k${acting}"`);
    expect(describeZodError(inPath.error!)).toBe(pathText);
  });

  it('a trust file with many huge unknown keys is TRUST_INVALID with a message of bounded size', () => {
    const hostile: Record<string, unknown> = { version: 1, keys: [] };
    for (let i = 0; i < 50; i++) hostile[`${i}${'z'.repeat(40 * 1024)}`] = i;
    const err = refusal(() => parseTrustStore(JSON.stringify(hostile))) as Error & { code?: string };
    expect(err.code).toBe('TRUST_INVALID');
    expect(err.message.length).toBeLessThan(1_000);
    expect(err.message).toContain('trust store is malformed: (root): unknown field "0zzz');
    expect(err.message).toMatch(/"…, and 49 more unknown$/);
  });
});
