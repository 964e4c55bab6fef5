/** Whether `p` settles (either way) within `ms`: a wait that must end at its signal, or stay queued. */
export const settledWithin = <T>(p: Promise<T>, ms: number): Promise<'settled' | 'pending'> =>
  Promise.race([
    p.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms)),
  ]);
