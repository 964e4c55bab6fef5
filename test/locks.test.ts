/** The in-process chain lock (src/ledger/locks.ts): holders of one key run one after another; a waiter can cancel. */
import { describe, expect, it } from 'vitest';
import { KeyedMutex } from '../src/ledger/locks.js';

describe('KeyedMutex', () => {
  it('runs the holders of one key in order, and a waiter whose signal aborts leaves the line without breaking it', async () => {
    const mutex = new KeyedMutex();
    const order: string[] = [];
    let releaseA!: () => void;
    const a = mutex.run('k', async () => {
      order.push('a');
      await new Promise<void>((r) => (releaseA = r));
    });
    const ac = new AbortController();
    const b = mutex.run('k', async () => void order.push('b'), ac.signal).catch((e: unknown) => e);
    const c = mutex.run('k', async () => void order.push('c'));
    const other = mutex.run('other', async () => void order.push('other'));
    await other; // another key never waits
    ac.abort(new Error('stop'));
    expect(await b).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
    expect(order).toEqual(['a', 'other']); // c still waits for a
    releaseA();
    await Promise.all([a, c]);
    expect(order).toEqual(['a', 'other', 'c']);
    // The line is empty again: a new holder runs at once.
    await mutex.run('k', async () => void order.push('d'));
    expect(order.at(-1)).toBe('d');
  });

  it('refuses at once a call whose signal has already aborted, and runs nothing', async () => {
    const mutex = new KeyedMutex();
    const ac = new AbortController();
    ac.abort();
    let ran = false;
    await expect(mutex.run('k', async () => void (ran = true), ac.signal)).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(ran).toBe(false);
    await mutex.run('k', async () => void (ran = true));
    expect(ran).toBe(true);
  });
});
