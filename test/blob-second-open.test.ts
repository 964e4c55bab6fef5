/**
 * Two FsBlobStores opened on one root in one process (two opens of the /store entry point: supported, their puts and
 * gc judgements are queued per root and digest across stores). The second open's recovery clears what interrupted
 * writes left in `tmp/` and puts back what an interrupted gc left in `gc-aside/`. It must not take the staging file of
 * a put still in flight through the first store (that put would fail at its link, ENOENT, for no fault of its own), nor
 * put back a blob a gc of the first store holds aside while it judges it (that gc would find it gone and keep an old
 * blob; or remove it first, and the open fail at its link). An open to diagnose names neither as a leftover.
 */
import { describe, expect, it } from 'vitest';
import { readdir, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex } from '../store/hash/digest.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { tempDir } from './support/tmp.js';

const HOUR = 3_600_000;

describe('a second open of a root in one process', () => {
  it("keeps the staging file of a put in flight through the first store (and still clears a crashed write's)", async () => {
    const root = tempDir();
    const hash = await loadHashBackend('auto');
    const { store: first } = await FsBlobStore.open(root, { hash });
    const enc = new TextEncoder();
    const pieces = [enc.encode('the first piece of a streamed put, '), enc.encode('and the piece after the pause')];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let paused!: () => void;
    const atPause = new Promise<void>((r) => (paused = r));
    async function* source() {
      yield pieces[0]!;
      paused();
      await gate; // the source pauses: its put's staging file is open in tmp/
      yield pieces[1]!;
    }
    const putting = first.put(source()).then(
      (info) => ({ info, err: undefined }),
      (err: unknown) => ({ info: undefined, err }),
    );
    let second: FsBlobStore | undefined;
    let diagnosing: FsBlobStore | undefined;
    try {
      await atPause;
      const inFlight = await readdir(join(root, 'tmp'));
      expect(inFlight).toHaveLength(1);
      // What a crashed write of an earlier process left: a leftover, which the second open still removes.
      const crashed = `${'ab'.repeat(16)}.tmp`;
      await writeFile(join(root, 'tmp', crashed), 'half a blob', { mode: 0o600 });
      // An open to diagnose names the crashed write's file only, not the one in flight.
      const diagnosed = await FsBlobStore.open(root, { hash, leaveLeftovers: true });
      diagnosing = diagnosed.store;
      expect(diagnosed.recovery.leftInPlace?.staging).toEqual([join(root, 'tmp', crashed)]);
      const opened = await FsBlobStore.open(root, { hash });
      second = opened.store;
      expect(opened.recovery.stagingRemoved).toBe(1);
      expect(await readdir(join(root, 'tmp'))).toEqual(inFlight);
      release();
      const { info, err } = await putting;
      expect(err).toBeUndefined();
      const whole = new Uint8Array(Buffer.concat(pieces));
      expect(info?.size).toBe(whole.length);
      expect(new Uint8Array(await second.get(info!.digest))).toEqual(whole);
      expect(await readdir(join(root, 'tmp'))).toEqual([]);
    } finally {
      release();
      await putting;
      await first.close();
      await second?.close();
      await diagnosing?.close();
    }
  });

  it('leaves a blob a gc of the first store holds aside to that gc, which removes it as judged (an open to diagnose names it no leftover)', async () => {
    const root = tempDir();
    const hash = await loadHashBackend('auto');
    let asidePath = '';
    let atAside: (() => void) | undefined;
    let go!: () => void;
    const released = new Promise<void>((r) => (go = r));
    // The first store's gc judges the blob it holds aside (its lstat there) and waits meanwhile.
    const gcFs: FsOps = {
      ...nodeFsOps,
      lstat: (async (p: string, o?: unknown) => {
        if (p === asidePath && atAside) {
          atAside();
          atAside = undefined;
          await released;
        }
        return nodeFsOps.lstat(p, o as never);
      }) as FsOps['lstat'],
    };
    // The second open goes on until it has dealt with gc-aside/ (put the blob back) or, in the blob's turn, waits for
    // that gc: then the gc goes on (the gate is passed after a while).
    let restoredByOpen!: () => void;
    const openRestored = new Promise<void>((r) => (restoredByOpen = r));
    const openFs: FsOps = {
      ...nodeFsOps,
      unlink: async (p) => {
        await nodeFsOps.unlink(p);
        if (p === asidePath) restoredByOpen();
      },
    };
    const { store: first } = await FsBlobStore.open(root, { hash, fs: gcFs });
    let second: FsBlobStore | undefined;
    try {
      const { digest } = await first.put(new TextEncoder().encode('an orphan two hours old'));
      const hex = digestHex(digest);
      const file = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
      const old = new Date(Date.now() - 2 * HOUR);
      await utimes(file, old, old);
      asidePath = join(root, 'gc-aside', hex);
      const reached = new Promise<void>((r) => (atAside = r));
      const deleting = first.delete(digest, { storedBeforeMs: Date.now() - HOUR });
      await reached;
      // An open to diagnose names what an interrupted gc left (another blob's name), not the blob this gc holds.
      const crashed = join(root, 'gc-aside', 'cd'.repeat(32));
      await writeFile(crashed, 'a blob a crashed gc held aside', { mode: 0o600 });
      const diagnosed = await FsBlobStore.open(root, { hash, leaveLeftovers: true });
      await diagnosed.store.close();
      expect(diagnosed.recovery.leftInPlace?.aside).toEqual([crashed]);
      await unlink(crashed);
      const opening = FsBlobStore.open(root, { hash, fs: openFs });
      opening.catch(() => {});
      await Promise.race([openRestored, opening, new Promise((r) => setTimeout(r, 500))]);
      go();
      expect(await deleting).toBe(true);
      const opened = await opening;
      second = opened.store;
      expect(await second.has(digest)).toBe(false);
      expect(await readdir(join(root, 'gc-aside'))).toEqual([]);
    } finally {
      go();
      await first.close();
      await second?.close();
    }
  });
});
