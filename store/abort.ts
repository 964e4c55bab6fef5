/**
 * One `abort` listener per signal for the whole library. A Harness often hands one signal (its run's, or its
 * session's) to many calls at once; each waiting call used to add a listener of its own, and the eleventh made Node
 * print `MaxListenersExceededWarning` ("possible memory leak") on the caller's signal although every listener was
 * removed when its call settled. Here the calls subscribe to a set kept beside the signal, and the signal carries one
 * listener while any call waits on it. Raising the signal's limit (`events.setMaxListeners`) instead would change a
 * signal that is the caller's, not ours.
 */

const waiting = new WeakMap<AbortSignal, { listeners: Set<() => void>; onAbort: () => void }>();

/**
 * Calls `listener` once when `signal` aborts (never when it has already: check `signal.aborted` first, as with
 * `addEventListener`). Returns the unsubscribe, which the caller runs once it no longer waits (safe to run twice).
 * The listeners are the library's own and settle promises; one must not throw (the others would not run).
 */
export function onAbort(signal: AbortSignal, listener: () => void): () => void {
  let entry = waiting.get(signal);
  if (!entry) {
    const listeners = new Set<() => void>();
    const fire = () => {
      waiting.delete(signal);
      // Each is taken out as it is called: one that another listener unsubscribed meanwhile is skipped, as EventTarget
      // skips a listener removed during dispatch.
      for (const l of [...listeners]) if (listeners.delete(l)) l();
    };
    entry = { listeners, onAbort: fire };
    waiting.set(signal, entry);
    signal.addEventListener('abort', fire, { once: true });
  }
  // Each subscription is its own function: one listener subscribed twice runs twice, as two calls waiting would.
  const subscription = () => listener();
  entry.listeners.add(subscription);
  const held = entry;
  return () => {
    if (!held.listeners.delete(subscription) || held.listeners.size > 0) return;
    if (waiting.get(signal) === held) waiting.delete(signal);
    signal.removeEventListener('abort', held.onAbort);
  };
}

/**
 * Resolves once `p` has settled, either way (only the wait is the caller's: `p`'s outcome is another call's); rejects
 * with `cancelled()` as soon as `signal` aborts first, or at once when it already has. For a call that waits its turn
 * behind another that may hang (a stalled disk): the waiter ends at its signal, the call it waited for runs on.
 */
export function settledOrAborted(
  p: Promise<unknown>,
  signal: AbortSignal | undefined,
  cancelled: () => Error,
): Promise<void> {
  const settled = p.then(
    () => {},
    () => {},
  );
  if (!signal) return settled;
  if (signal.aborted) return Promise.reject(cancelled());
  return new Promise<void>((resolve, reject) => {
    const unsubscribe = onAbort(signal, () => reject(cancelled()));
    void settled.then(() => {
      unsubscribe();
      resolve();
    });
  });
}

/** The longest delay a Node timer keeps: a longer one fires after 1 ms (with a TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;
