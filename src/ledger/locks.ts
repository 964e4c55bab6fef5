/** Per-key serialization inside one process: each chain's publishes run one after another. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((r) => (release = r));
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
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

  async shared<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusiveHeld) await this.exclusiveHeld;
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
