/**
 * errorText (store/errors.ts): the one rendering of an error with its causes, behind a layer's STORAGE_FAILED message
 * (storageFailure) and the witnessing notices. It names the reason a cause holds, falls back to a cause's code where
 * its message is empty (the AggregateError of a name whose every address refused), bounds each part, and never throws.
 */
import { describe, expect, it } from 'vitest';
import { errorText, storageFailure, StoreError } from '../store/errors.js';

const refusedEverywhere = () =>
  Object.assign(new AggregateError([new Error('connect ECONNREFUSED ::1:9')], ''), { code: 'ECONNREFUSED' });

describe('errorText', () => {
  it('joins the messages of the causes that add to it, with ": ", four deep', () => {
    const io = new Error('IO error: /s/LOCK: Permission denied');
    expect(errorText(new Error('Database failed to open', { cause: io }))).toBe(
      'Database failed to open: IO error: /s/LOCK: Permission denied',
    );
    // A cause that repeats what is said already adds nothing.
    expect(errorText(new Error('open failed: EACCES', { cause: new Error('EACCES') }))).toBe('open failed: EACCES');
    let deep: Error = new Error('e5');
    for (let i = 4; i >= 1; i--) deep = new Error(`e${i}`, { cause: deep });
    expect(errorText(deep)).toBe('e1: e2: e3: e4');
  });

  it("names a cause without a message by its code (fetch's AggregateError of a refused name)", () => {
    const err = new TypeError('fetch failed', { cause: refusedEverywhere() });
    expect(errorText(err)).toBe('fetch failed: ECONNREFUSED');
    // storageFailure's message said "… failed: fetch failed", the reason left out.
    expect(storageFailure(StoreError, 'reading x', err).message).toBe('reading x failed: fetch failed: ECONNREFUSED');
  });

  it('cuts each part at max characters, so a quoted megabyte stays out of the message', () => {
    const huge = new Error('outer', { cause: new Error(`bad bytes: ${'\u001b[2J'.repeat(300_000)}`) });
    const text = storageFailure(StoreError, 'reading x', huge).message;
    expect(text.length).toBeLessThan(1100);
    expect(text.endsWith('…')).toBe(true);
    expect(errorText(huge, 20)).toBe(`outer: ${`bad bytes: ${'\u001b[2J'.repeat(3)}`.slice(0, 20)}…`);
  });

  it('never throws: a message getter that throws, a value that cannot be made text, a thrown primitive', () => {
    const trap = Object.defineProperty(new Error(), 'message', {
      get() {
        throw new Error('getter');
      },
    });
    expect(() => storageFailure(StoreError, 'x', trap)).not.toThrow();
    expect(storageFailure(StoreError, 'x', trap).message).toBe('x failed: Error');
    const noText = {
      toString() {
        throw new Error('no text');
      },
    };
    expect(errorText(noText)).toBe('an object');
    expect(errorText('plain words')).toBe('plain words');
    expect(errorText(7)).toBe('7');
    expect(errorText(Symbol('s'))).toBe('Symbol(s)');
    expect(errorText(null)).toBe('null');
    expect(errorText(undefined)).toBe('undefined');
    expect(errorText({ message: 'shaped like one' })).toBe('shaped like one');
  });
});
