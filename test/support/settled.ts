/** Whether `p` settles (either way) within `ms`: a wait that must end at its signal, or stay queued. */
export const settledWithin = <T>(p: Promise<T>, ms: number): Promise<'settled' | 'pending'> =>
  Promise.race([
    p.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms)),
  ]);

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
