/**
 * The dispatcher both pools of line verifiers share (manifests/audit/line-dispatch.ts), with fake ports
 * whose replies the test sends by hand: which worker gets each batch, that each batch gets its own
 * results whatever order the workers answer in, and that the first failure rejects every pending batch.
 * The pools over it are tested in test/audit/workers.test.ts (threads) and test/web/line-pool.test.ts (page).
 */
import { describe, expect, it } from 'vitest';
import { startLineDispatcher, type LinePort, type PoolEvent } from '../../manifests/audit/line-dispatch.js';
import type { LineOutcome } from '../../manifests/audit/verify-line.js';

type Request = { start: true } | { id: number; lines: number[] };
type Reply = PoolEvent<string>;

interface Fake extends LinePort<Request, Reply> {
  posted: Request[];
  terminated: boolean;
  reply(r: Reply): void;
  die(why: string): void;
}

function fake(): Fake {
  let onReply: (r: Reply) => void = () => {};
  let onFail: (why: string) => void = () => {};
  const f: Fake = {
    posted: [],
    terminated: false,
    post: (m) => void f.posted.push(m),
    listen(r, fail) {
      onReply = r;
      onFail = fail;
    },
    terminate: () => {
      f.terminated = true;
    },
    reply: (r) => onReply(r),
    die: (why) => onFail(why),
  };
  return f;
}

const protocol = {
  start: { start: true } as Request,
  batch: (id: number, lines: Array<{ line: number; text: string }>): Request => ({
    id,
    lines: lines.map((l) => l.line),
  }),
  read: (r: Reply) => r,
};

const outcome = (line: number): LineOutcome => ({ ok: false, finding: { code: 'LINE_NOT_JSON', line, message: 'x' } });

/** A dispatcher over `n` fakes that answered their start message. */
async function started(n: number) {
  const fakes = Array.from({ length: n }, fake);
  const pending = startLineDispatcher({ size: n, spawn: (i) => fakes[i]!, protocol });
  fakes.forEach((f, i) => {
    expect(f.posted).toEqual([{ start: true }]);
    f.posted.length = 0;
    f.reply({ ready: `w${i}` });
  });
  return { fakes, ...(await pending) };
}

describe('startLineDispatcher', () => {
  it('hands each batch to the least-loaded worker, two in flight per worker, and resolves each with its own results', async () => {
    const { fakes, verifier, ready } = await started(3);
    expect(ready).toEqual(['w0', 'w1', 'w2']);
    expect(verifier.concurrency).toBe(6);
    const done = Array.from({ length: 6 }, (_, i) => verifier.verifyLines([{ line: i + 1, text: 'x' }]));
    const settled = Promise.allSettled(done);
    expect(fakes.map((f) => f.posted.map((m) => (m as { id: number }).id))).toEqual([
      [0, 3],
      [1, 4],
      [2, 5],
    ]);
    // Answers in reverse order: each batch still gets its own outcomes.
    for (const id of [5, 4, 3, 2, 1, 0]) fakes[id % 3]!.reply({ id, results: [outcome(id + 1)] });
    const results = await settled;
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value[0] : r))).toEqual(
      Array.from({ length: 6 }, (_, i) => outcome(i + 1)),
    );
    // Worker 1 answered its batches; the next one goes there, not to a loaded one.
    fakes[0]!.posted.length = 0;
    fakes[1]!.posted.length = 0;
    fakes[2]!.posted.length = 0;
    const next = verifier.verifyLines([{ line: 7, text: 'x' }]);
    const other = verifier.verifyLines([{ line: 8, text: 'x' }]);
    expect(fakes.map((f) => f.posted.length)).toEqual([1, 1, 0]);
    fakes[0]!.reply({ id: 6, results: [] });
    fakes[1]!.reply({ id: 7, results: [] });
    await expect(Promise.all([next, other])).resolves.toEqual([[], []]);
    await verifier.close();
    expect(fakes.every((f) => f.terminated)).toBe(true);
  });

  it('rejects every pending batch, and every later one, with the first failure', async () => {
    const { fakes, verifier } = await started(2);
    const done = Promise.allSettled([0, 1, 2, 3].map((i) => verifier.verifyLines([{ line: i + 1, text: 'x' }])));
    fakes[1]!.reply({ id: 1, failed: 'out of memory' });
    fakes[0]!.die('crashed: later');
    const results = await done;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({
      code: 'WORKER_FAILED',
      message: 'verification worker 2 failed: out of memory',
    });
    for (const i of [0, 2, 3]) {
      expect((results[i] as PromiseRejectedResult).reason).toMatchObject({
        code: 'WORKER_FAILED',
        message: 'verification worker 1 crashed: later',
      });
    }
    await expect(verifier.verifyLines([{ line: 9, text: 'x' }])).rejects.toMatchObject({
      message: 'verification worker 1 crashed: later',
    });
    await verifier.close();
  });

  it('fails to start with WORKER_FAILED, terminating what it started, when a worker cannot start', async () => {
    const fakes = [fake(), fake()];
    const pending = startLineDispatcher({ size: 2, spawn: (i) => fakes[i]!, protocol });
    const outcome = pending.then(
      () => 'started',
      (err: unknown) => err,
    );
    fakes[0]!.reply({ ready: 'w0' });
    fakes[1]!.reply({ startFailed: 'no trust file' });
    expect(await outcome).toMatchObject({
      code: 'WORKER_FAILED',
      message: 'verification worker 2 did not start: no trust file',
    });
    expect(fakes.map((f) => f.terminated)).toEqual([true, true]);
  });

  it('fails to start when a spawn throws, and after startMs when a worker never answers', async () => {
    const first = fake();
    await expect(
      startLineDispatcher({
        size: 2,
        spawn: (i) => {
          if (i === 1) throw new Error('no Worker here');
          return first;
        },
        protocol,
      }),
    ).rejects.toMatchObject({ code: 'WORKER_FAILED', message: 'verification worker 2 did not start: no Worker here' });
    expect(first.terminated).toBe(true);
    const silent = fake();
    await expect(startLineDispatcher({ size: 1, spawn: () => silent, protocol, startMs: 20 })).rejects.toMatchObject({
      code: 'WORKER_FAILED',
      message: 'the verification workers did not start within 20 ms',
    });
    expect(silent.terminated).toBe(true);
  });

  it('verifies a batch in the calling thread only when every worker has two, and once between replies', async () => {
    const inlined: number[] = [];
    const inline = {
      concurrency: 1,
      verifyLines: async (batch: Array<{ line: number; text: string }>) => {
        inlined.push(batch[0]!.line);
        return batch.map((l) => outcome(l.line));
      },
      close: async () => {},
    };
    const w = fake();
    const pending = startLineDispatcher({ size: 1, spawn: () => w, protocol, inline });
    w.reply({ ready: 'w0' });
    const { verifier } = await pending;
    expect(verifier.concurrency).toBe(3);
    const batches = [1, 2, 3, 4].map((line) => verifier.verifyLines([{ line, text: 'x' }]));
    const settled = Promise.allSettled(batches);
    // Lines 1 and 2 fill the worker; 3 is verified here; 4 goes to the worker, whose reply has not come yet.
    expect(inlined).toEqual([3]);
    expect(w.posted.slice(1).map((m) => (m as { lines: number[] }).lines)).toEqual([[1], [2], [4]]);
    w.reply({ id: 0, results: [outcome(1)] });
    // A reply came and the worker still has two: the calling thread takes line 5, the worker line 6.
    const later = Promise.allSettled([5, 6].map((line) => verifier.verifyLines([{ line, text: 'x' }])));
    expect(inlined).toEqual([3, 5]);
    expect(w.posted.slice(1).map((m) => (m as { id: number; lines: number[] }).lines)).toEqual([[1], [2], [4], [6]]);
    w.reply({ id: 1, results: [outcome(2)] });
    w.reply({ id: 2, results: [outcome(4)] });
    w.reply({ id: 3, results: [outcome(6)] });
    const results = [...(await settled), ...(await later)];
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : r))).toEqual(
      [1, 2, 3, 4, 5, 6].map((l) => [outcome(l)]),
    );
    await verifier.close();
  });

  it('rejects batches after close', async () => {
    const { verifier } = await started(1);
    await verifier.close();
    await expect(verifier.verifyLines([{ line: 1, text: 'x' }])).rejects.toMatchObject({
      code: 'WORKER_FAILED',
      message: 'the pool of verification workers is closed',
    });
  });
});
