/**
 * Two FsBlobStores opened on one root in one process (two opens of the /store entry point: supported, their puts and
 * gc judgements are queued per root and digest across stores). The second open's recovery clears what interrupted
 * writes left in `tmp/`, and must not take the staging file of a put still in flight through the first store: that put
 * would fail at its link (ENOENT) for no fault of its own.
 */
import { describe, expect, it } from 'vitest';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { tempDir } from './support/tmp.js';

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
});
