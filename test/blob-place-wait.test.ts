/**
 * Puts of the same bytes are placed one at a time per root and digest in a process (FsBlobStore's `placing` queue).
 * A put waiting for its turn behind one whose file system call hangs (a stalled disk, a network mount) ends when its
 * signal aborts (CANCELLED, its staging file removed), and the queue still holds the next put back until the hung one
 * has settled.
 */
import { describe, expect, it } from 'vitest';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { tempDir } from './support/tmp.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from './support/settled.js';

describe('a put waiting behind a hung put of the same bytes', () => {
  it('ends at its signal (CANCELLED); the next put still waits for the hung one, then both are placed', async () => {
    const root = tempDir();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let links = 0;
    let linkEntered!: () => void;
    const firstLinking = new Promise<void>((r) => (linkEntered = r));
    let closes = 0;
    let secondWritten!: () => void;
    const secondReady = new Promise<void>((r) => (secondWritten = r));
    const fs: FsOps = {
      ...nodeFsOps,
      link: async (a, b) => {
        if (links++ === 0) {
          linkEntered();
          await gate; // the first put's link hangs until released
        }
        return nodeFsOps.link(a, b);
      },
      close: async (h) => {
        await nodeFsOps.close(h);
        if (++closes === 2) secondWritten(); // the second put's staging file is written: it goes to the queue next
      },
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    const bytes = new TextEncoder().encode('a summary placed once '.repeat(50));
    const first = store.put(bytes);
    // The second put starts once the first holds the queue: started together, either may reach it first (hashing runs
    // on a thread), and the one whose link hangs must be the one the other waits behind.
    await firstLinking;
    const abort = new AbortController();
    const second = store.put(bytes, { signal: abort.signal });
    await secondReady;
    await new Promise((r) => setTimeout(r, 20));
    abort.abort();
    expect(await settledWithin(second, ENDS_AT_SIGNAL_MS)).toBe('settled');
    await expect(second).rejects.toMatchObject({ code: 'CANCELLED' });
    // The queue's order stands: a third put of the bytes waits for the hung first one, not for the cancelled second.
    const third = store.put(bytes);
    expect(await settledWithin(third, 300)).toBe('pending');
    expect(links).toBe(1);
    release();
    const [a, c] = await Promise.all([first, third]);
    expect(c.digest).toBe(a.digest);
    expect(new Uint8Array(await store.get(a.digest))).toEqual(bytes);
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
    await store.close();
  });
});
