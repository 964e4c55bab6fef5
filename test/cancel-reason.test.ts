/**
 * Every `CANCELLED` a Ledger call ends with carries the signal's reason as its `cause`, wherever the abort came in: a
 * Harness tells its `AbortSignal.timeout` (a `TimeoutError`) from its user's stop by `err.cause`. A publish cancelled
 * in its blob's write had the blob store's `StoreError` as its cause instead (the reason one level further down).
 */
import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { compact, exportBundle, fsck, gc, openLedger, type ModelAdapter } from '../src/index.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { digestHex } from '../store/hash/digest.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const alice = { principal: 'alice', session: 's1', run: 'r1' };
const MiB = 1024 * 1024;

describe("a cancelled call's cause is the signal's reason", () => {
  it('openLedger given an aborted signal names itself, as openPostgresBackends does', async () => {
    const reason = new Error('stop');
    const err = await openLedger({
      host: 'h',
      root: tempDir(),
      signal: AbortSignal.abort(reason),
      onNotice: () => {},
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED', message: 'openLedger cancelled' });
    expect((err as Error).cause).toBe(reason);
  });

  it('a publish cancelled between two block writes of its blob', async () => {
    const root = tempDir();
    const ac = new AbortController();
    const reason = new DOMException('the run timed out', 'TimeoutError');
    let writes = 0;
    const fs: FsOps = {
      ...nodeFsOps,
      write: async (h, data, position) => {
        if (++writes === 3) ac.abort(reason);
        return nodeFsOps.write(h, data, position);
      },
    };
    const ledger = await openLedger({ host: 'h', root, fs, maxSummaryBytes: 64 * MiB, onNotice: () => {} });
    try {
      writes = -1_000_000; // the open's own writes are not counted
      const first = await ledger.publish(alice, sampleSummary('first'));
      writes = 0;
      const summary = { ...sampleSummary('cancelled'), state: 'x'.repeat(6 * MiB) };
      const err = await ledger.publish(alice, summary, { signal: ac.signal }).catch((e: unknown) => e);
      expect(writes).toBeGreaterThanOrEqual(3);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      expect((await ledger.resume(alice))?.id).toBe(first.id);
      expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it('publish, resume, history, fsck, gc and export given an aborted signal', async () => {
    const root = tempDir();
    const ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    try {
      await ledger.publish(alice, sampleSummary('first'));
      const reason = new Error('stop');
      const signal = AbortSignal.abort(reason);
      const model: ModelAdapter = async () => ({ finishReason: 'stop', text: JSON.stringify(sampleSummary('m')) });
      const transcript = [{ role: 'user' as const, content: 'hi' }];
      // Each names the call it ended ("operation cancelled" named none of them): the message starts with its name.
      const calls: Array<[string, () => Promise<unknown>]> = [
        ['publish', () => ledger.publish(alice, sampleSummary('second'), { signal })],
        ['checkPublish', () => ledger.checkPublish(alice, { signal })],
        ['resume', () => ledger.resume(alice, { signal })],
        ['history', () => ledger.history(alice, { signal })],
        ['fsck', () => fsck(ledger, { signal })],
        ['gc', () => gc(ledger, { graceMs: 0, signal })],
        ['export', () => exportBundle(ledger, { out: join(root, 'bundle'), signal })],
        ['compaction', () => compact({ ledger, scope: alice, model, transcript, signal })],
      ];
      for (const [name, call] of calls) {
        const err = await call().catch((e: unknown) => e);
        expect(err, name).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
        expect((err as Error).cause, name).toBe(reason);
        expect((err as Error).message, name).toMatch(new RegExp(`^${name} cancelled`));
      }
      expect((await ledger.history(alice)).length).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it("resume, export and fsck aborted mid-call, while the store's read of a blob waits on the disk, name the call", async () => {
    // The first open of `at` (the summary's blob file) waits until `release`: a stalled disk, the call inside it.
    let at: string | undefined;
    let entered = () => {};
    let gate = Promise.resolve();
    const fs: FsOps = {
      ...nodeFsOps,
      open: async (path, flags, mode) => {
        if (path === at) {
          at = undefined;
          entered();
          await gate;
        }
        return nodeFsOps.open(path, flags, mode);
      },
    };
    const root = tempDir();
    const ledger = await openLedger({ host: 'h', root, fs, inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const hex = digestHex((await ledger.publish(alice, sampleSummary('first'))).digest);
      const blob = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const calls: Array<[string, (signal: AbortSignal) => Promise<unknown>]> = [
        ['resume', (signal) => ledger.resume(alice, { signal })],
        ['export', (signal) => exportBundle(ledger, { out: join(tempDir(), 'bundle'), withBlobs: true, signal })],
        ['fsck', (signal) => fsck(ledger, { signal })],
      ];
      for (const [name, call] of calls) {
        const abort = new AbortController();
        const reason = new Error('stop');
        let release = () => {};
        gate = new Promise((r) => (release = r));
        const inside = new Promise<void>((r) => (entered = r));
        at = blob;
        const ended = call(abort.signal).catch((e: unknown) => e);
        await inside;
        abort.abort(reason);
        release();
        const err = await ended;
        expect(err, name).toMatchObject({ code: 'CANCELLED' });
        expect((err as Error).cause, name).toBe(reason);
        expect((err as Error).message, name).toMatch(new RegExp(`^${name} cancelled`));
      }
    } finally {
      await ledger.close();
    }
  });
});
