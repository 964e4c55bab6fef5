import { onAbort } from '../../store/abort.js';
import { throwIfCancelled } from '../errors.js';

/** Per-key serialization inside one process: each chain's publishes run one after another. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  /**
   * Runs `fn` once every earlier holder of `key` is done. A `signal` that aborts while this call waits ends the wait:
   * LedgerError `CANCELLED`, `fn` never runs, and the calls queued behind it go on in order.
   */
  async run<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((r) => (release = r));
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    const done = () => {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
    try {
      await untilAborted(previous, signal);
    } catch (err) {
      void previous.then(done); // this call's turn passes straight on when it comes
      throw err;
    }
    try {
      return await fn();
    } finally {
      done();
    }
  }
}

/** `wait`, or LedgerError `CANCELLED` as soon as `signal` aborts (at once if it has). */
function untilAborted(wait: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  throwIfCancelled(signal);
  if (!signal) return wait;
  return new Promise<void>((resolve, reject) => {
    const unsubscribe = onAbort(signal, () => {
      try {
        throwIfCancelled(signal);
      } catch (err) {
        reject(err as Error);
      }
    });
    void wait.then(() => {
      unsubscribe();
      resolve();
    });
  });
}

/**
 * Many holders of the shared side at once (publishes signing and appending), one exclusive holder that first
 * waits for every shared holder to finish and keeps new ones out (key rotation, principal-wide revocation).
 */
export class SharedExclusiveLock {
  private active = 0;
  private drained: (() => void) | undefined;
  private exclusiveHeld: Promise<void> | undefined;
  private exclusiveTail: Promise<void> = Promise.resolve();

  /**
   * Runs `fn` on the shared side, once no exclusive holder is in. A `signal` that aborts while this call waits for an
   * exclusive holder (a key rotation) ends the wait: LedgerError `CANCELLED`, and `fn` never runs.
   */
  async shared<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    while (this.exclusiveHeld) await untilAborted(this.exclusiveHeld, signal);
    this.active++;
    try {
      return await fn();
    } finally {
      if (--this.active === 0) this.drained?.();
    }
  }

  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.exclusiveTail;
    let release!: () => void;
    const current = new Promise<void>((r) => (release = r));
    this.exclusiveTail = previous.then(() => current);
    await previous;
    this.exclusiveHeld = current;
    try {
      if (this.active > 0) await new Promise<void>((r) => (this.drained = r));
      this.drained = undefined;
      return await fn();
    } finally {
      this.exclusiveHeld = undefined;
      release();
    }
  }
}
