/**
 * Tools of the hostile-input suites: nasty strings and values for fast-check, text mutators, and the
 * judge every input goes through — an input may only yield a typed error (a library error class with
 * a code) or a result that passes its correctness check. Anything else (a raw exception, a wrong
 * result, a run slower than the hang bound) is counted and fails the property.
 */
import fc from 'fast-check';
import { counter } from './figures.js';
import { InvariantViolation, isTypedError, Tally } from './store-support.js';

/** A run this slow counts as a hang (inputs here are at most a few hundred KB). */
export const HANG_MS = 5_000;

/** Characters that have broken parsers, paths and serializers before. */
const NASTY = [
  '\0',
  '\ud800',
  '\udfff',
  '\udbff\udfff',
  '"',
  '\\',
  '\n',
  '\r',
  '\u2028',
  '\ufeff',
  '\u202e',
  '/',
  '..',
  '%2e',
  '$',
  '{',
  '}',
  '[',
  ']',
  ':',
  '@',
  '.',
  '-',
  '_',
  'a',
  'Z',
  '9',
  'é',
  'а',
  '𝄞',
  ' ',
  '\t',
  '\x7f',
  '\x1b',
];

/** Strings biased towards the characters parsers and path joiners mishandle. */
export const hostileString = (maxLength = 40): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ unit: fc.constantFrom(...NASTY), maxLength }),
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)), maxLength: 4 }),
    fc.constantFrom(
      '__proto__',
      'constructor',
      'prototype',
      'toString',
      'hasOwnProperty',
      '',
      ' ',
      '.',
      '..',
      '../x',
      'CON',
      'a'.repeat(129),
    ),
  );

/** Ids: valid ones, near misses, and hostile strings. */
export const idLike: fc.Arbitrary<string> = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,12}$/),
  fc.stringMatching(/^[A-Za-z0-9._:@-]{0,130}$/),
  hostileString(),
);

/** Any JS value, including prototype-keyed and null-prototype objects. */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({
    withNullPrototype: true,
    withObjectString: true,
    withBoxedValues: true,
    withSparseArray: true,
    maxDepth: 4,
  }),
  fc.jsonValue({ maxDepth: 4 }),
  fc.dictionary(hostileString(12), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }),
  fc.constantFrom(
    1e308,
    -0,
    Number.MAX_SAFE_INTEGER + 2,
    NaN,
    Infinity,
    -1,
    0.5,
    2 ** 64,
    '',
    null,
    undefined,
    true,
    [],
    {},
  ),
);

/** Mutations of a text: replace, insert, delete, truncate, duplicate a slice. */
export const textMutation = (text: string): fc.Arbitrary<string> => {
  const at = fc.nat(Math.max(0, text.length));
  return fc.oneof(
    fc.tuple(at, hostileString(3)).map(([i, s]) => text.slice(0, i) + s + text.slice(i + 1)),
    fc.tuple(at, hostileString(6)).map(([i, s]) => text.slice(0, i) + s + text.slice(i)),
    fc.tuple(at, fc.nat(40)).map(([i, n]) => text.slice(0, i) + text.slice(i + n)),
    at.map((i) => text.slice(0, i)),
    fc.tuple(at, at).map(([i, j]) => text.slice(0, Math.max(i, j)) + text.slice(Math.min(i, j))),
    fc
      .tuple(at, fc.integer({ min: 0, max: 0xffff }))
      .map(([i, c]) => text.slice(0, i) + String.fromCharCode(c) + text.slice(i + 1)),
  );
};

/** Byte mutations: flip, insert invalid UTF-8 or NUL, delete, truncate. */
export const bytesMutation = (bytes: Uint8Array): fc.Arbitrary<Uint8Array> => {
  const at = fc.nat(Math.max(0, bytes.length));
  const splice = (i: number, del: number, ins: number[]) =>
    Uint8Array.from([...bytes.subarray(0, i), ...ins, ...bytes.subarray(i + del)]);
  return fc.oneof(
    fc.tuple(at, fc.integer({ min: 1, max: 255 })).map(([i, x]) => splice(i, 1, [(bytes[i] ?? 0) ^ x])),
    fc
      .tuple(
        at,
        fc.constantFrom<number[]>(
          [0xff],
          [0xc0, 0x80],
          [0xed, 0xa0, 0x80],
          [0xe2, 0x82],
          [0],
          [0x0a],
          [0xef, 0xbb, 0xbf],
        ),
      )
      .map(([i, ins]) => splice(i, 0, ins)),
    fc.tuple(at, fc.nat(30)).map(([i, n]) => splice(i, n, [])),
    at.map((i) => bytes.slice(0, i)),
  );
};

/** Judges every input of the hostile suites and keeps their figures. */
export class Judge {
  readonly tally = new Tally();
  readonly inputs = counter();
  readonly typed = counter();
  correct = 0;
  untyped = 0;
  slowestMs = 0;

  /**
   * Runs `fn` on one input of `target`. A typed error is an acceptable answer (`expectCodes`, when
   * given, narrows which codes); a result must pass `check`.
   */
  async judge<T>(
    target: string,
    fn: () => T | Promise<T>,
    check: (result: T) => void | Promise<void>,
    expectCodes?: readonly string[],
  ): Promise<void> {
    this.inputs.add(target);
    const t0 = performance.now();
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      this.time(target, t0);
      if (err instanceof InvariantViolation) throw err;
      if (!isTypedError(err)) {
        this.untyped++;
        this.tally.wrongAnswers++;
        throw new InvariantViolation(
          `${target}: untyped ${(err as Error)?.name ?? typeof err}: ${(err as Error)?.message ?? String(err)}`,
        );
      }
      this.typed.add(`${err.name} ${err.code}`);
      this.tally.right(
        !expectCodes || expectCodes.includes(err.code),
        `${target}: unexpected code ${err.code} (${err.message})`,
      );
      return;
    }
    this.time(target, t0);
    await check(result);
    this.correct++;
  }

  private time(target: string, t0: number): void {
    const ms = performance.now() - t0;
    this.slowestMs = Math.max(this.slowestMs, ms);
    if (ms > HANG_MS) {
      this.tally.wrongAnswers++;
      throw new InvariantViolation(`${target}: took ${ms.toFixed(0)} ms (hang bound ${HANG_MS} ms)`);
    }
  }

  details(): Record<string, number | string> {
    return {
      'correct results': this.correct,
      'typed refusals': Object.values(this.typed.counts).reduce((a, b) => a + b, 0),
      'untyped exceptions': this.untyped,
      'slowest input, ms': Math.round(this.slowestMs),
      'checks made': this.tally.checks,
      ...Object.fromEntries(
        Object.entries(this.typed.counts)
          .sort()
          .map(([k, v]) => [`refused: ${k}`, v]),
      ),
    };
  }
}
