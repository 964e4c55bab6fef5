/**
 * store/bounded-body.ts, the bounded reader of a body the auditor's page (what audit-ui serves) and the witness client
 * (a witness's answers) share: no further than its bound, the rest cancelled unread; a break thrown, or what came
 * before it.
 */
import { describe, expect, it } from 'vitest';
import { joinChunks, readBodyUpTo } from '../store/bounded-body.js';

/** A body of `sizes` chunks (each filled with its index), each made only when read; with `breakAt`, it errors there. */
function body(sizes: number[], breakAt?: number) {
  let made = 0;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (made === breakAt) return controller.error(new TypeError('terminated'));
        if (made === sizes.length) return controller.close();
        controller.enqueue(new Uint8Array(sizes[made]!).fill(made));
        made++;
      },
      cancel() {
        cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, made: () => made, cancelled: () => cancelled };
}

describe('readBodyUpTo', () => {
  it('reads a body within its bound whole', async () => {
    const b = body([3, 4]);
    expect(await readBodyUpTo(b.stream, 10)).toEqual({ bytes: Uint8Array.from([0, 0, 0, 1, 1, 1, 1]), seen: 7 });
  });

  it('stops at the chunk that reaches the bound, gives the first bytes up to it, and cancels the rest unread', async () => {
    const b = body([3, 4, 5, 6]);
    const read = await readBodyUpTo(b.stream, 5);
    expect(read).toEqual({ bytes: Uint8Array.from([0, 0, 0, 1, 1]), seen: 7 });
    expect(b.made()).toBe(2);
    expect(b.cancelled()).toBe(true);
  });

  it('throws a break, or with untilBreak gives what came before it', async () => {
    await expect(readBodyUpTo(body([2, 2, 2], 2).stream, 100)).rejects.toThrow('terminated');
    expect(await readBodyUpTo(body([2, 2, 2], 2).stream, 100, { untilBreak: true })).toEqual({
      bytes: Uint8Array.from([0, 0, 1, 1]),
      seen: 4,
    });
  });

  it('gives no bytes for no body', async () => {
    expect(await readBodyUpTo(null, 10)).toEqual({ bytes: new Uint8Array(0), seen: 0 });
  });
});

describe('joinChunks', () => {
  it('joins chunks end to end, up to the length asked, and gives a lone chunk of that length as it is', () => {
    const a = Uint8Array.from([1, 2]);
    expect(joinChunks([a, Uint8Array.from([3, 4, 5])], 4)).toEqual(Uint8Array.from([1, 2, 3, 4]));
    expect(joinChunks([a], 2)).toBe(a);
    expect(joinChunks([], 0)).toEqual(new Uint8Array(0));
  });
});
