/**
 * gc's `signal` (GcOptions): a signal that is not an AbortSignal is INVALID_ARGUMENT before anything is read; an abort
 * ends gc CANCELLED between blobs, each blob removed whole or kept, the message counting those removed; a delete
 * waiting behind a hung call on the same blob (the filesystem store's per-blob queue, a PostgreSQL row lock, LevelDB's
 * held appends) ends at the abort with the blob kept. The CLI's gc on SIGINT / SIGTERM exits 130 / 143.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import pgLib from 'pg';
import { FsBlobStore } from '../store/fs/blob-store.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { nodeFsOps, type FsOps } from '../store/fs/ops.js';
import { digestHex, type Digest } from '../store/hash/digest.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import type { LevelManifestLog } from '../manifests/log/level/log.js';
import { fsck, gc } from '../src/ops/maintenance.js';
import { gc as gcCli } from '../src/cli/maintenance.js';
import { captureIo } from './support/capture-io.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from './support/settled.js';

const HOUR = 3_600_000;
const who = { principal: 'alice', session: 's1', run: 'r1' };

/**
 * File operations whose first `lstat` of the path given to `hangAt` (the judgement of a blob's file: a stalled disk)
 * hangs until `release`; `hanging` resolves once it does.
 */
function hangingLstat() {
  let at: string | undefined;
  let entered!: () => void;
  const hanging = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const fs: FsOps = {
    ...nodeFsOps,
    lstat: (async (p: string, o?: unknown) => {
      if (p === at) {
        at = undefined;
        entered();
        await gate;
      }
      return nodeFsOps.lstat(p, o as never);
    }) as FsOps['lstat'],
  };
  return { fs, hanging, release: () => release(), hangAt: (path: string) => void (at = path) };
}

const rejection = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => undefined,
    (err: unknown) => err,
  );

/** `n` blobs no manifest names, beside one published summary. */
async function orphans(ledger: Ledger, n: number): Promise<Digest[]> {
  await ledger.publish(who, sampleSummary('kept'));
  const out: Digest[] = [];
  for (let i = 0; i < n; i++)
    out.push((await ledger.blobs.put(new TextEncoder().encode(`an orphan, ${i}`.repeat(40)))).digest);
  return out;
}

async function present(ledger: Ledger, digests: Digest[]): Promise<Digest[]> {
  const out: Digest[] = [];
  for (const d of digests) if (await ledger.blobs.has(d)) out.push(d);
  return out;
}

/** Calls `onCall` as each delete of the ledger's blobs begins, and `onDone` as each resolves. */
function watchDeletes(ledger: Ledger, hooks: { onCall?: () => void; onDone?: (removed: boolean) => void }): void {
  const blobs = ledger.blobs as { delete: Ledger['blobs']['delete'] };
  const original = blobs.delete.bind(ledger.blobs);
  blobs.delete = async (digest, options) => {
    hooks.onCall?.();
    const removed = await original(digest, options);
    hooks.onDone?.(removed);
    return removed;
  };
}

describe('gc with a signal (embedded store)', () => {
  it('a signal that is not an AbortSignal: INVALID_ARGUMENT before anything is read, nothing removed', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', onNotice: () => {} });
    const blobs = await orphans(ledger, 2);
    for (const signal of [{ aborted: true }, 'stop', {}, 1])
      expect(
        await rejection(gc(ledger, { graceMs: 0, now: Date.now() + HOUR, signal: signal as never })),
        String(signal),
      ).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('AbortSignal') });
    expect(await present(ledger, blobs)).toEqual(blobs);
    await ledger.close();
    // Before anything is read: a closed ledger is never reached.
    expect(await rejection(gc(ledger, { graceMs: 0, signal: 'stop' as never }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('an aborted signal: CANCELLED, nothing removed (a dry run too)', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', onNotice: () => {} });
    try {
      const blobs = await orphans(ledger, 3);
      const abort = new AbortController();
      abort.abort();
      for (const dryRun of [false, true])
        expect(
          await rejection(gc(ledger, { graceMs: HOUR, now: Date.now() + 2 * HOUR, dryRun, signal: abort.signal })),
        ).toMatchObject({ code: 'CANCELLED', message: 'gc cancelled: no blob was removed' });
      expect(await present(ledger, blobs)).toEqual(blobs);
      // The signal unused: the same call collects them.
      const report = await gc(ledger, {
        graceMs: HOUR,
        now: Date.now() + 2 * HOUR,
        signal: new AbortController().signal,
      });
      expect(report.removed.sort()).toEqual([...blobs].sort());
    } finally {
      await ledger.close();
    }
  });

  it('an abort as the first blob is removed: that one stays removed, whole; the others stay; the message says so', async () => {
    const abort = new AbortController();
    const fs: FsOps = {
      ...nodeFsOps,
      // The unlink of the file gc holds aside: the blob's removal, which then completes (its directory's fsync).
      unlink: async (p) => {
        await nodeFsOps.unlink(p);
        if (p.includes(`${sep}gc-aside${sep}`)) abort.abort();
      },
    };
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a', fs, inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const blobs = await orphans(ledger, 3);
      expect(
        await rejection(gc(ledger, { graceMs: HOUR, now: Date.now() + 2 * HOUR, signal: abort.signal })),
      ).toMatchObject({
        code: 'CANCELLED',
        message: 'gc cancelled: 1 unreferenced blob removed before it (each whole), the others stay',
      });
      expect(await present(ledger, blobs)).toHaveLength(2);
      expect(await readdir(join(root, 'gc-aside'))).toEqual([]);
      expect((await fsck(ledger)).findings).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it("gc's delete waiting behind a hung delete of the same blob ends at the abort; the blob is kept", async () => {
    const root = tempDir();
    const { fs, hangAt, hanging, release } = hangingLstat();
    const ledger = await openLedger({ root, host: 'host-a', fs, inlineSummaryBytes: 0, onNotice: () => {} });
    try {
      const [orphan] = await orphans(ledger, 1);
      const hex = digestHex(orphan!);
      hangAt(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex));
      const hung = ledger.blobs.delete(orphan!, { storedBeforeMs: 1 }); // keeps it once it goes on
      await hanging;
      let gcDeleting!: () => void;
      const deleting = new Promise<void>((r) => (gcDeleting = r));
      watchDeletes(ledger, { onCall: gcDeleting });
      const abort = new AbortController();
      const run = gc(ledger, { graceMs: HOUR, now: Date.now() + 2 * HOUR, signal: abort.signal });
      await deleting;
      await new Promise((r) => setTimeout(r, 50));
      const reason = new Error('the operator stopped gc');
      abort.abort(reason);
      expect(await settledWithin(run, ENDS_AT_SIGNAL_MS)).toBe('settled');
      const refused = await rejection(run);
      expect(refused).toMatchObject({ code: 'CANCELLED', message: 'gc cancelled: no blob was removed' });
      // Its cause is the signal's reason, as at every other point gc answers the signal (not the store's error).
      expect((refused as Error).cause).toBe(reason);
      release();
      expect(await hung).toBe(false);
      expect(await present(ledger, [orphan!])).toEqual([orphan]);
    } finally {
      release();
      await ledger.close();
    }
  });

  it('an inline delete waiting for the appends to be held ends at the abort (LevelDB); the blob is kept', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', onNotice: () => {} });
    try {
      const { digest } = await ledger.publish(who, sampleSummary('inline'));
      const log = ledger.log as LevelManifestLog;
      let release!: () => void;
      const holder = log.withAppendsHeld(() => new Promise<void>((r) => (release = r)));
      const abort = new AbortController();
      const waiting = ledger.log.inlineBlobs!.delete(digest as Digest, {
        storedBeforeMs: Date.now() + HOUR,
        signal: abort.signal,
      });
      await new Promise((r) => setTimeout(r, 20));
      abort.abort();
      expect(await settledWithin(waiting, ENDS_AT_SIGNAL_MS)).toBe('settled');
      expect(await rejection(waiting)).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
      release();
      await holder;
      expect(await ledger.log.inlineBlobs!.stat(digest as Digest)).toBeDefined();
      expect((await ledger.resume(who))?.manifest.summary.digest).toBe(digest);
    } finally {
      await ledger.close();
    }
  });
});

describe("the filesystem store's conditional delete behind a hung one of the same blob", () => {
  it('ends at its signal (CANCELLED); the next still waits for the hung one', async () => {
    const root = tempDir();
    const { fs, hangAt, hanging, release } = hangingLstat();
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    try {
      const { digest } = await store.put(new TextEncoder().encode('judged once at a time '.repeat(30)));
      const hex = digestHex(digest);
      hangAt(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex));
      const late = Date.now() + HOUR;
      const first = store.delete(digest, { storedBeforeMs: late });
      await hanging;
      const abort = new AbortController();
      const second = store.delete(digest, { storedBeforeMs: late, signal: abort.signal });
      await new Promise((r) => setTimeout(r, 20));
      abort.abort();
      expect(await settledWithin(second, ENDS_AT_SIGNAL_MS)).toBe('settled');
      expect(await rejection(second)).toMatchObject({ name: 'StoreError', code: 'CANCELLED' });
      // The queue's order stands: a third waits for the hung first one, not for the cancelled second.
      const third = store.delete(digest, { storedBeforeMs: late });
      expect(await settledWithin(third, 300)).toBe('pending');
      release();
      expect(await first).toBe(true);
      expect(await third).toBe(false);
      expect(await store.has(digest)).toBe(false);
      // A signal that is none is refused by the store's front too.
      expect(await rejection(store.delete(digest, { signal: 'stop' as never }))).toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    } finally {
      release();
      await store.close();
    }
  });
});

describe('the CLI: gc stopped by a signal', () => {
  const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
  const HOLD = fileURLToPath(new URL('./support/hold-gc-delete.mjs', import.meta.url));

  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)(
    'on %s while its delete waits behind a hung one exits %i, the blob kept; gc then collects it',
    async (signal, code) => {
      expect(existsSync(CLI), 'dist/ is built by `npm test` (pretest)').toBe(true);
      const root = tempDir();
      const ledger = await openLedger({ root, host: 'host-a', inlineSummaryBytes: 0, onNotice: () => {} });
      const [orphan] = await orphans(ledger, 1);
      await ledger.close();
      const args = ['--root', root, '--host', 'host-a', '--grace', '0'];
      const child = spawn(process.execPath, ['--import', HOLD, CLI, 'gc', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, HL_HOLD_ROOT: root, HL_HOLD_DIGEST: orphan },
      });
      try {
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        const exited = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
        for (let waited = 0; !stderr.includes('held\n'); waited += 5) {
          expect(
            waited < 30_000 && child.exitCode === null,
            `the CLI's gc never listened for ${signal}: ${stderr}`,
          ).toBe(true);
          await new Promise((r) => setTimeout(r, 5));
        }
        child.kill(signal);
        expect(await exited, stderr).toBe(code);
        expect(stderr).toContain(`handoff-ledger: CANCELLED: gc interrupted by ${signal}: no blob was removed`);
      } finally {
        child.kill('SIGKILL');
      }
      const again = captureIo();
      expect(await gcCli(args, again.io), again.stderr()).toBe(0);
      expect(again.stdout()).toContain('removed 1 unreferenced blob;');
    },
    60_000,
  );
});

describePostgres('gc with a signal (PostgreSQL)', (pg) => {
  let schemas = 0;
  const open = async () => {
    const schema = `gc_cancel_${process.pid}_${schemas++}`;
    const ledger = await openLedger({
      root: tempDir(),
      host: 'h1',
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
    });
    return { ledger, schema };
  };

  /** A row locked by a transaction of another connection, as a put's or an append's holds it until it commits. */
  async function lockRow(table: string, digest: string): Promise<() => Promise<void>> {
    const client = new pgLib.Client({ connectionString: pg.connectionString });
    await client.connect();
    await client.query('BEGIN');
    const { rowCount } = await client.query(`SELECT 1 FROM ${table} WHERE digest = $1 FOR UPDATE`, [digest]);
    expect(rowCount).toBe(1);
    return async () => {
      await client.query('ROLLBACK');
      await client.end();
    };
  }

  it('an aborted signal: CANCELLED, nothing removed; a non-signal: INVALID_ARGUMENT', async () => {
    const { ledger } = await open();
    try {
      const blobs = await orphans(ledger, 3);
      const abort = new AbortController();
      abort.abort();
      expect(await rejection(gc(ledger, { graceMs: 0, signal: abort.signal }))).toMatchObject({
        code: 'CANCELLED',
        message: 'gc cancelled: no blob was removed',
      });
      expect(await rejection(gc(ledger, { graceMs: 0, signal: { aborted: false } as never }))).toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      expect(await present(ledger, blobs)).toEqual(blobs);
    } finally {
      await ledger.close();
    }
  });

  it('an abort as the first blob is removed: the others stay, the message counts one', async () => {
    const { ledger } = await open();
    try {
      const blobs = await orphans(ledger, 3);
      const abort = new AbortController();
      watchDeletes(ledger, { onDone: (removed) => removed && abort.abort() });
      expect(await rejection(gc(ledger, { graceMs: 0, signal: abort.signal }))).toMatchObject({
        code: 'CANCELLED',
        message: 'gc cancelled: 1 unreferenced blob removed before it (each whole), the others stay',
      });
      expect(await present(ledger, blobs)).toHaveLength(2);
      expect((await fsck(ledger)).findings).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  it("gc's delete waiting for a blob row another transaction holds (a put of the same bytes) ends at the abort", async () => {
    const { ledger, schema } = await open();
    try {
      const [orphan] = await orphans(ledger, 1);
      const unlock = await lockRow(`"${schema}".blobs`, orphan!);
      try {
        let gcDeleting!: () => void;
        const deleting = new Promise<void>((r) => (gcDeleting = r));
        watchDeletes(ledger, { onCall: gcDeleting });
        const abort = new AbortController();
        const run = gc(ledger, { graceMs: 0, signal: abort.signal });
        await deleting;
        await new Promise((r) => setTimeout(r, 300)); // the DELETE waits for the row's lock at the server
        abort.abort();
        expect(await settledWithin(run, ENDS_AT_SIGNAL_MS)).toBe('settled');
        expect(await rejection(run)).toMatchObject({ code: 'CANCELLED', message: 'gc cancelled: no blob was removed' });
      } finally {
        await unlock();
      }
      expect(await present(ledger, [orphan!])).toEqual([orphan]);
      expect((await gc(ledger, { graceMs: 0 })).removed).toEqual([orphan]);
    } finally {
      await ledger.close();
    }
  });

  it('an inline delete waiting for a row an append holds ends at the abort; the blob is kept', async () => {
    const { ledger, schema } = await open();
    try {
      const { digest } = await ledger.publish(who, sampleSummary('inline'));
      const unlock = await lockRow(`"${schema}".inline_blobs`, digest);
      try {
        const abort = new AbortController();
        const waiting = ledger.log.inlineBlobs!.delete(digest as Digest, {
          storedBeforeMs: Date.now() + HOUR,
          signal: abort.signal,
        });
        await new Promise((r) => setTimeout(r, 300));
        abort.abort();
        expect(await settledWithin(waiting, ENDS_AT_SIGNAL_MS)).toBe('settled');
        expect(await rejection(waiting)).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
      } finally {
        await unlock();
      }
      expect((await ledger.resume(who))?.manifest.summary.digest).toBe(digest);
    } finally {
      await ledger.close();
    }
  });
});
