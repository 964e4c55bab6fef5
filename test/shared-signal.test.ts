/**
 * One AbortSignal handed to many calls at once (a Harness's run signal): the library keeps one `abort` listener on it
 * (store/abort.ts), so Node never warns of a listener leak on the caller's signal, and every waiting call still ends at
 * the abort. Also: a publish waiting for a key rotation to finish (the signing lock's exclusive side) ends at the abort.
 * Both backends.
 */
import { getEventListeners } from 'node:events';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { onAbort } from '../store/abort.js';
import { Keyring } from '../src/keys/keyring.js';
import { withFileLock } from '../src/ledger/file-lock.js';
import { SharedExclusiveLock } from '../src/ledger/locks.js';
import { openLedger, type OpenLedgerOptions } from '../src/ledger/open.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { ENDS_AT_SIGNAL_MS, firstCall, settledWithin } from './support/settled.js';

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

/** Node's warnings while `fn` runs (a MaxListenersExceededWarning is emitted as a process warning). */
async function warningsDuring(fn: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const onWarning = (w: Error) => seen.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  try {
    await fn();
    await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
  } finally {
    process.off('warning', onWarning);
  }
  return seen;
}

describe('onAbort', () => {
  it('keeps one listener on the signal for any number of subscriptions, and calls each once at the abort', () => {
    const ac = new AbortController();
    const calls: number[] = [];
    const unsubscribe = Array.from({ length: 50 }, (_, i) => onAbort(ac.signal, () => calls.push(i)));
    expect(listeners(ac.signal)).toBe(1);
    unsubscribe[7]!();
    unsubscribe[7]!(); // a second run changes nothing
    ac.abort();
    expect(calls).toEqual(Array.from({ length: 50 }, (_, i) => i).filter((i) => i !== 7));
    expect(listeners(ac.signal)).toBe(0);
    ac.signal.dispatchEvent(new Event('abort')); // once: never again
    expect(calls).toHaveLength(49);
    for (const u of unsubscribe) u(); // after the abort: harmless
  });

  it('skips a subscription another one ended during the abort, as EventTarget skips a listener removed mid-dispatch', () => {
    const ac = new AbortController();
    const calls: string[] = [];
    const ends: { b?: () => void } = {};
    onAbort(ac.signal, () => {
      calls.push('a');
      ends.b!();
    });
    ends.b = onAbort(ac.signal, () => calls.push('b'));
    onAbort(ac.signal, () => calls.push('c'));
    ac.abort();
    expect(calls).toEqual(['a', 'c']);
  });

  it('takes its listener off the signal when the last subscription ends, and puts one back for the next', () => {
    const ac = new AbortController();
    const a = onAbort(ac.signal, () => {});
    const b = onAbort(ac.signal, () => {});
    a();
    expect(listeners(ac.signal)).toBe(1);
    b();
    expect(listeners(ac.signal)).toBe(0);
    let called = 0;
    onAbort(ac.signal, () => called++);
    onAbort(ac.signal, () => called++);
    expect(listeners(ac.signal)).toBe(1);
    ac.abort();
    expect(called).toBe(2);
  });
});

describe('SharedExclusiveLock', () => {
  it('ends a shared wait behind an exclusive holder at the abort; the exclusive holder and later shared ones go on', async () => {
    const lock = new SharedExclusiveLock();
    let release!: () => void;
    const inExclusive = new Promise<void>((entered) => {
      void lock.exclusive(() => {
        entered();
        return new Promise<void>((r) => (release = r));
      });
    });
    await inExclusive;
    const ac = new AbortController();
    let ran = false;
    const waiting = lock.shared(async () => void (ran = true), ac.signal).catch((e: unknown) => e);
    const patient = lock.shared(async () => 'ran');
    ac.abort(new Error('user pressed stop'));
    expect(await waiting).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
    expect(ran).toBe(false);
    release();
    expect(await patient).toBe('ran');
  });
});

/** A call of the signing lock's shared side, seen as it is made: the lock, its answer, and whether its `fn` ran. */
interface SharedCall {
  lock: SharedExclusiveLock;
  answer: Promise<unknown>;
  ran: () => boolean;
}

/**
 * Resolves at the first call of `SharedExclusiveLock#shared` from now on (the call going on unchanged) with that call,
 * once the call has gone as far as it goes at once (into its wait, when an exclusive holder is in); `restore()` puts
 * the method back.
 */
function firstSharedCall(): { call: Promise<SharedCall>; restore: () => void } {
  const proto = SharedExclusiveLock.prototype as unknown as {
    shared: (fn: () => Promise<unknown>, signal?: AbortSignal) => Promise<unknown>;
  };
  const original = proto.shared;
  let seen!: (call: SharedCall) => void;
  const call = new Promise<SharedCall>((resolve) => (seen = resolve));
  let first = true;
  proto.shared = function (this: SharedExclusiveLock, fn, signal) {
    if (!first) return original.call(this, fn, signal);
    first = false;
    let ran = false;
    const answer = original.call(
      this,
      () => {
        ran = true;
        return fn();
      },
      signal,
    );
    seen({ lock: this, answer, ran: () => ran });
    return answer;
  };
  return { call, restore: () => void (proto.shared = original) };
}

function sharedSignalSuite(name: string, options: () => OpenLedgerOptions): void {
  describe(`one signal shared by many calls: ${name}`, () => {
    it('publishes and resumes of many sessions and of one chain leave no listener and raise no warning', async () => {
      const ledger = await openLedger(options());
      const ac = new AbortController();
      const scope = (i: number) => ({ principal: 'alice', session: `s-${i}`, run: 'r' });
      const warnings = await warningsDuring(async () => {
        // Twenty sessions at once (each append queued in one batch), then twenty publishes of one chain (each waits
        // for the chain's lock), then twenty resumes: each waiting call is subscribed to the signal meanwhile.
        const published = await Promise.all(
          Array.from({ length: 20 }, (_, i) => ledger.publish(scope(i), sampleSummary(`m${i}`), { signal: ac.signal })),
        );
        expect(published.map((r) => r.seq)).toEqual(Array(20).fill(0));
        const chain = await Promise.all(
          Array.from({ length: 20 }, (_, i) => ledger.publish(scope(0), sampleSummary(`c${i}`), { signal: ac.signal })),
        );
        expect(chain.map((r) => r.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
        const resumed = await Promise.all(
          Array.from({ length: 20 }, (_, i) => ledger.resume(scope(i), { signal: ac.signal })),
        );
        expect(resumed.every((r) => r !== undefined)).toBe(true);
      });
      expect(warnings.filter((w) => w.includes('MaxListenersExceededWarning'))).toEqual([]);
      expect(listeners(ac.signal)).toBe(0);
      await ledger.close();
    });

    it('a publish waiting for a key rotation ends at the abort (CANCELLED, nothing appended); the rotation completes', async () => {
      const opts = options();
      const root = opts.root!;
      const ledger = await openLedger(opts);
      const alice = { principal: 'alice', session: 'rot', run: 'r' };
      await ledger.publish(alice, sampleSummary('first'));
      // Another process of the root holds the trust lock: this ledger's rotation takes the signing lock's exclusive
      // side, then waits for the trust lock, and a publish started meanwhile waits for the rotation.
      let letGo!: () => void;
      let held!: () => void;
      const lockHeld = new Promise<void>((r) => (held = r));
      const other = withFileLock(join(root, 'trust.json'), 'trust.json', async () => {
        held();
        await new Promise<void>((r) => (letGo = r));
      });
      await lockHeld;
      const trustLock = firstCall(Keyring.prototype, 'exclusive');
      const rotation = ledger.rotateKey();
      await trustLock.called; // in, holding the signing lock
      trustLock.restore();
      const signingLock = firstSharedCall();
      const ac = new AbortController();
      let waiting: Promise<unknown>;
      let call: SharedCall;
      try {
        waiting = ledger.publish(alice, sampleSummary('second'), { signal: ac.signal }).catch((e: unknown) => e);
        call = await signingLock.call; // this ledger's signing lock, the publish waiting in it for the rotation
      } finally {
        signingLock.restore();
      }
      expect(call.lock).toBe((ledger as unknown as { signing: SharedExclusiveLock }).signing);
      expect(call.ran()).toBe(false);
      ac.abort(new Error('user pressed stop'));
      // The rotation holds the lock's exclusive side until the trust lock is let go, below: the publish's wait can end
      // only at the abort, and does, at the lock itself (the shared call refused, its commit never run).
      expect(await settledWithin(call.answer, ENDS_AT_SIGNAL_MS)).toBe('settled');
      expect(await call.answer.catch((e: unknown) => e)).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect(call.ran()).toBe(false);
      expect(await waiting).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      letGo();
      await other;
      const newKey = await rotation;
      expect(newKey).not.toBe(undefined);
      expect((await ledger.history(alice)).map((h) => h.manifest.seq)).toEqual([0]);
      expect((await ledger.publish(alice, sampleSummary('third'))).seq).toBe(1);
      expect(ledger.keyId).toBe(newKey);
      await ledger.close();
    });
  });
}

sharedSignalSuite('embedded store', () => ({ root: tempDir(), host: 'host-a' }));

let schemas = 0;
describePostgres('one signal shared by many calls (PostgreSQL)', (pg) => {
  sharedSignalSuite('PostgreSQL', () => ({
    root: tempDir(),
    host: 'host-a',
    postgres: { connectionString: pg.connectionString, schema: `shared_signal_${++schemas}` },
    onNotice: () => {},
  }));
});
