/**
 * How long a wait that must end at its signal is given to end (`settledWithin(p, ENDS_AT_SIGNAL_MS)`): what it is told
 * apart from is a wait that does not end until the test releases what it waits for, so this is far beyond what the
 * cleanup after an abort (a staging file removed on a slow disk, a loaded machine) can take. A few seconds were not.
 */
export const ENDS_AT_SIGNAL_MS = 30_000;

/** Whether `p` settles (either way) within `ms`: a wait that must end at its signal, or stay queued. */
export const settledWithin = <T>(p: Promise<T>, ms: number): Promise<'settled' | 'pending'> => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    new Promise<'pending'>((r) => (timer = setTimeout(() => r('pending'), ms))),
  ]).finally(() => clearTimeout(timer));
};

/**
 * Resolves at the first call of `target[method]` from now on (the call itself goes on unchanged); `restore()` puts the
 * method back. Waits for the event itself, where polling a spy (vi.waitFor gives up after 1 s) failed whenever a loaded
 * machine took longer to get there.
 */
export function firstCall<T extends object>(
  target: T,
  method: keyof T,
): { called: Promise<void>; restore: () => void } {
  const original = target[method] as (...args: unknown[]) => unknown;
  let called!: () => void;
  const once = new Promise<void>((resolve) => (called = resolve));
  target[method] = function (this: unknown, ...args: unknown[]) {
    called();
    return original.apply(this, args);
  } as T[keyof T];
  return { called: once, restore: () => void (target[method] = original as T[keyof T]) };
}

/**
 * A signal that aborts with `signal`'s reason when `signal` does, and `listened`, which resolves at the first abort
 * listener put on it: the wait that takes the signal has begun (a lock's wait between its tries, a connection's
 * wait). Given to one step of an operation (a spy passes it on instead of the operation's own signal), it tells when
 * that step reached its wait, where a sleep of a few hundred ms stood for it and a loaded machine took longer.
 */
export function watchedSignal(signal: AbortSignal): { signal: AbortSignal; listened: Promise<void> } {
  const inner = new AbortController();
  if (signal.aborted) inner.abort(signal.reason);
  else signal.addEventListener('abort', () => inner.abort(signal.reason), { once: true });
  let listened!: () => void;
  const once = new Promise<void>((resolve) => (listened = resolve));
  const add = inner.signal.addEventListener.bind(inner.signal);
  inner.signal.addEventListener = ((type: string, ...rest: unknown[]) => {
    if (type === 'abort') listened();
    return (add as (...args: unknown[]) => void)(type, ...rest);
  }) as AbortSignal['addEventListener'];
  return { signal: inner.signal, listened: once };
}

/** The error `fn` throws or rejects with; a call that succeeds fails the test (`expected a refusal`). */
export const refusal = async (fn: () => unknown): Promise<Error & { code?: string }> => {
  try {
    await fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a refusal');
};
