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
