/**
 * An option given in the scope is refused, not left out: a plain-JavaScript Harness that wrote
 * `ledger.publish({ ...scope, expectedPrev }, summary)` published without the compare-and-swap guard it meant (the
 * ledger read only the ids from the scope). Each call that takes a scope refuses a scope field named like one of its
 * own options (INVALID_ARGUMENT, saying where the option goes), unless it is undefined or the very value given in the
 * options; any other field a scope carries is still taken.
 */
import { describe, expect, it } from 'vitest';
import { compact, isHandoffLedgerError, openLedger, type ModelAdapter } from '../src/index.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's1', run: 'r1' };
/** The scope with more fields, as a plain-JavaScript caller passes it (the types would not let one write it). */
const scopeWith = (extra: object): typeof scope => ({ ...scope, ...extra });

async function refusal(call: () => unknown): Promise<Error> {
  try {
    await call();
  } catch (err) {
    expect(isHandoffLedgerError(err), String(err)).toBe(true);
    return err as Error;
  }
  throw new Error('no error');
}

const open = () => openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });

describe('a scope that carries an option of its call', () => {
  it('publish({ ...scope, expectedPrev }) is refused, naming where expectedPrev goes, and publishes nothing', async () => {
    const ledger = await open();
    try {
      const first = await ledger.publish(scope, sampleSummary(1));
      // Built on an empty chain (null): the head moved since, so the guard, had it been read, refuses it.
      const err = await refusal(() => ledger.publish(scopeWith({ expectedPrev: null }), sampleSummary(2)));
      expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(err.message).toBe(
        'publish: the scope carries expectedPrev, and publish reads only the ids from a scope: give expectedPrev in ' +
          "publish's options (its third argument: publish(scope, summary, { expectedPrev }))",
      );
      expect((await ledger.resume(scope))?.id).toBe(first.id);
      // The guard where it goes is read.
      await expect(ledger.publish(scope, sampleSummary(2), { expectedPrev: null })).rejects.toMatchObject({
        code: 'CHAIN_CONFLICT',
      });
      expect((await ledger.history(scope)).length).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it('publish and checkPublish refuse covers and signal in the scope too; compact names its own options', async () => {
    const ledger = await open();
    const covers = { transcriptThrough: 3 };
    const signal = new AbortController().signal;
    let asked = 0;
    const model: ModelAdapter = async () => {
      asked++;
      throw new Error('not to be asked');
    };
    try {
      for (const [name, value] of [
        ['expectedPrev', null],
        ['covers', covers],
        ['signal', signal],
      ] as const) {
        const carrying = { ...scope, [name]: value };
        const published = await refusal(() => ledger.publish(carrying, sampleSummary()));
        expect(published, name).toMatchObject({ code: 'INVALID_ARGUMENT' });
        expect(published.message).toContain(`publish(scope, summary, { ${name} })`);
        const checked = await refusal(() => ledger.checkPublish(carrying));
        expect(checked, name).toMatchObject({ code: 'INVALID_ARGUMENT' });
        expect(checked.message).toContain(`checkPublish(scope, { ${name} })`);
        const compacted = await refusal(() =>
          compact({ ledger, scope: carrying, model, transcript: [{ role: 'user', content: 'hi' }] }),
        );
        expect(compacted, name).toMatchObject({ code: 'INVALID_ARGUMENT' });
        expect(compacted.message).toContain(
          `compact's options, beside the scope (compact({ ledger, scope, ${name}, … }))`,
        );
      }
      // Other than the value given where it goes: refused as well (which one was meant?).
      const other = await refusal(() =>
        ledger.publish(scopeWith({ expectedPrev: null }), sampleSummary(), {
          expectedPrev: `blake3:${'0'.repeat(64)}`,
        }),
      );
      expect(other.message).toContain('the scope carries expectedPrev other than the one in its options');
      expect(asked).toBe(0);
      expect(await ledger.resume(scope)).toBeUndefined();
    } finally {
      await ledger.close();
    }
  });

  it('resume and history refuse a signal in the scope (it could not stop them)', async () => {
    const ledger = await open();
    const controller = new AbortController();
    try {
      for (const call of ['resume', 'history'] as const) {
        const err = await refusal(() => ledger[call](scopeWith({ signal: controller.signal })));
        expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
        expect(err.message).toContain(`${call}(scope, { signal })`);
      }
    } finally {
      await ledger.close();
    }
  });

  it('takes a field that is undefined or the very value of the option, and any other field (run, a context)', async () => {
    const ledger = await open();
    const signal = new AbortController().signal;
    try {
      const context = { ...scope, harness: { turn: 3 }, model: 'some-model', expectedPrev: undefined, signal };
      const receipt = await ledger.publish(context, sampleSummary(1), { expectedPrev: null, signal });
      await ledger.checkPublish(context, { expectedPrev: receipt.id, signal });
      expect((await ledger.resume(context, { signal }))?.id).toBe(receipt.id);
      expect(await ledger.history(scopeWith({ signal: undefined }))).toHaveLength(1);
      const covers = { transcriptThrough: 1 };
      const second = await ledger.publish(scopeWith({ covers }), sampleSummary(2), {
        covers,
        expectedPrev: receipt.id,
      });
      expect(second.seq).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it('reads an option field of the scope once, refuses one that throws as read, and asks nothing it does not have', async () => {
    const ledger = await open();
    try {
      let reads = 0;
      const counted = {
        ...scope,
        get expectedPrev() {
          reads++;
          return null;
        },
      };
      expect(await refusal(() => ledger.publish(counted, sampleSummary()))).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(reads).toBe(1);
      const failure = new Error('getter');
      const throwing = Object.defineProperty({ ...scope }, 'signal', {
        enumerable: true,
        get() {
          throw failure;
        },
      });
      const err = await refusal(() => ledger.resume(throwing));
      expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'scope: reading its signal failed' });
      expect(err.cause).toBe(failure);
      // A strict context (a proxy that throws for any name it does not hold) is not asked for the options' names.
      const strict = new Proxy(
        { ...scope },
        {
          get(target, name) {
            if (!(name in target)) throw new Error(`no ${String(name)}`);
            return Reflect.get(target, name);
          },
        },
      );
      const receipt = await ledger.publish(strict, sampleSummary());
      expect((await ledger.resume(strict))?.id).toBe(receipt.id);
    } finally {
      await ledger.close();
    }
  });
});
