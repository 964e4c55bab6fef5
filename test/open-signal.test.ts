/**
 * `openLedger({ signal })`: an open that hangs (an injected signer that never answers its test signature, a PostgreSQL
 * server that accepts and never answers) ends at the caller's abort with `CANCELLED`, the signal's reason as the
 * cause, and leaves nothing open: the embedded log's lock is released and PostgreSQL's pool ended, so a later open
 * of the same store works. A signal aborted before the call makes nothing; one that is no AbortSignal is refused.
 */
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import pgLib from 'pg';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { openLedger, type OpenLedgerOptions } from '../src/ledger/open.js';
import { takeFileLock } from '../src/ledger/file-lock.js';
import { CheckpointPinFile } from '../src/ledger/checkpoint-pin.js';
import { Keyring } from '../src/keys/keyring.js';
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import { PgBlobStore } from '../store/pg/blob-store.js';
import { openPostgresBackends, storedPostgresOrigin } from '../src/ledger/pg-backend.js';
import { openPostgresBackends as openPublicPostgresBackends } from '../src/ledger/postgres.js';
import { loadHashBackend } from '../store/hash/backends.node.js';
import { digestHex, digestOf } from '../store/hash/digest.js';
import {
  activityCount,
  describePostgres,
  settledCount,
  sqlOn,
  waitingForLock,
  type PostgresHandle,
} from './support/postgres.js';
import { ENDS_AT_SIGNAL_MS, firstCall, settledWithin, watchedSignal } from './support/settled.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's1', run: 'r1' };

/** A signer whose `sign` never settles while `hang` is set; `asked` resolves at the first call that hangs. */
function hangingSigner() {
  const own = new LocalSigner(generateJwk());
  let asked!: () => void;
  const state = {
    hang: true,
    asked: new Promise<void>((resolve) => (asked = resolve)),
    signer: {
      keyId: own.keyId,
      publicKey: own.publicKey,
      sign: (m: Uint8Array): Promise<Uint8Array> | Uint8Array => {
        if (!state.hang) return own.sign(m);
        asked();
        return new Promise<Uint8Array>(() => {});
      },
    },
  };
  return state;
}

/**
 * Makes the next `Keyring.open` wait 10 min for the trust lock (its default is 30 s, then LOCKED) and resolves
 * `waiting` once that wait has begun (its first sleep between tries listens to the open's signal).
 */
function keyringWaitWatched(): { waiting: Promise<void>; restore: () => void } {
  const open = Keyring.open.bind(Keyring);
  let begun!: () => void;
  const waiting = new Promise<void>((resolve) => (begun = resolve));
  const spy = vi.spyOn(Keyring, 'open').mockImplementationOnce(async (options, signal) => {
    const trustLock = { ...options.trustLock, waitMs: 600_000 };
    if (!signal) return open({ ...options, trustLock }, signal);
    const watched = watchedSignal(signal);
    void watched.listened.then(begun);
    return open({ ...options, trustLock }, watched.signal);
  });
  return { waiting, restore: () => spy.mockRestore() };
}

function signalSuite(
  name: string,
  backend: (tag: string) => Partial<OpenLedgerOptions>,
  connections?: () => Promise<number>,
) {
  describe(`${name}: openLedger's signal`, () => {
    it('ends an open whose injected signer never answers its test signature at the abort (CANCELLED), holding nothing; a later open works', async () => {
      const root = tempDir();
      const extra = backend('hung_signer');
      const kms = hangingSigner();
      const abort = new AbortController();
      const reason = new Error('the caller gave up');
      const opening = openLedger({
        ...extra,
        root,
        host: 'h1',
        signer: kms.signer,
        signal: abort.signal,
        onNotice: () => {},
      });
      await kms.asked;
      abort.abort(reason);
      const err = await opening.catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      if (connections) expect(await settledCount(connections, 0)).toBe(0);
      // The store is free: the same signer, answering now, opens it (embedded: LevelDB's lock was released).
      kms.hang = false;
      const ledger = await openLedger({ ...extra, root, host: 'h1', signer: kms.signer, onNotice: () => {} });
      try {
        expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
      } finally {
        await ledger.close();
      }
      if (connections) expect(await settledCount(connections, 0)).toBe(0);
    });

    it('ends an open waiting for the trust lock another holder has (a rotation elsewhere) at the abort, with no lock taken', async () => {
      const root = tempDir();
      const extra = backend('trust_lock');
      // A first open writes its keys and trust.json under the trust lock: held here, it waits (30 s, then LOCKED).
      const held = await takeFileLock(join(root, 'trust.json'), 'trust.json');
      // The keyring's wait for the lock is given 10 min (not 30 s, then LOCKED): an open that did not take the signal
      // would still be waiting long after the abort; and its signal says when that wait has begun (its first sleep
      // between tries listens to it), where a sleep of 200 ms stood for that.
      const keyringOpen = keyringWaitWatched();
      try {
        const abort = new AbortController();
        const reason = new Error('the caller gave up');
        const opening = openLedger({ ...extra, root, host: 'h1', signal: abort.signal, onNotice: () => {} });
        expect(await settledWithin(keyringOpen.waiting, ENDS_AT_SIGNAL_MS), 'the open never waited for the lock').toBe(
          'settled',
        );
        abort.abort(reason);
        expect(await settledWithin(opening, ENDS_AT_SIGNAL_MS), 'the wait did not end at the abort').toBe('settled');
        const err = await opening.catch((e: unknown) => e);
        expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
        expect((err as Error).cause).toBe(reason);
        expect(existsSync(join(root, 'trust.json'))).toBe(false);
        if (connections) expect(await settledCount(connections, 0)).toBe(0);
      } finally {
        keyringOpen.restore();
        await held.release();
      }
      const ledger = await openLedger({ ...extra, root, host: 'h1', onNotice: () => {} });
      try {
        expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
      } finally {
        await ledger.close();
      }
    });

    it('a signal aborted before the call: CANCELLED and nothing made; one that is no AbortSignal: INVALID_ARGUMENT', async () => {
      const parent = tempDir();
      const root = join(parent, 'store');
      const reason = new Error('already');
      const err = await openLedger({
        ...backend('aborted_before'),
        root,
        host: 'h1',
        signal: AbortSignal.abort(reason),
        onNotice: () => {},
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      expect(readdirSync(parent)).toEqual([]);
      for (const signal of [{ aborted: false }, 'abort', 1])
        await expect(
          openLedger({ ...backend('not_a_signal'), root, host: 'h1', signal: signal as never, onNotice: () => {} }),
        ).rejects.toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT', message: /^signal: / });
      expect(readdirSync(parent)).toEqual([]);
      if (connections) expect(await settledCount(connections, 0)).toBe(0);
    });

    it('a signal that does not abort changes nothing, and the ledger keeps none', async () => {
      const abort = new AbortController();
      const ledger = await openLedger({
        ...backend('not_aborted'),
        root: tempDir(),
        host: 'h1',
        signal: abort.signal,
        onNotice: () => {},
      });
      try {
        abort.abort(new Error('after the open'));
        expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
      } finally {
        await ledger.close();
      }
    });
  });
}

signalSuite('embedded', () => ({}));

describe("openLedger's signal at a root other processes pin in too", () => {
  it("ends the open's wait for the pin's lock another process holds at the abort (CANCELLED, promptly), pinning nothing; a later open pins", async () => {
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    // A log that says it is not exclusive (two processes of a host, as on PostgreSQL): the pin is written under its lock.
    const shared = Object.create(level, { exclusive: { value: false }, close: { value: async () => {} } });
    const root = join(base, 'root');
    const origin = 'example.com/pin-signal';
    const pin = join(root, 'checkpoints', `${digestHex(digestOf(new TextEncoder().encode(origin)))}.pin`);
    mkdirSync(join(root, 'checkpoints'), { recursive: true, mode: 0o700 });
    // Another process's pin in progress: the open's first pin waits for it (30 s, then LOCKED).
    const held = await takeFileLock(pin, 'the pinned checkpoint', { staleMs: 10_000 });
    // The pin's write is given a signal of its own that says when its wait for the lock has begun (its first sleep
    // between tries listens to it), where a sleep of 300 ms stood for that.
    const write = CheckpointPinFile.prototype.write;
    let begun!: () => void;
    const waiting = new Promise<void>((resolve) => (begun = resolve));
    const writeSpy = vi.spyOn(CheckpointPinFile.prototype, 'write').mockImplementation(function (
      this: CheckpointPinFile,
      note,
      supersedes,
      signal,
    ) {
      if (!signal) return write.call(this, note, supersedes, signal);
      const watched = watchedSignal(signal);
      void watched.listened.then(begun);
      return write.call(this, note, supersedes, watched.signal);
    });
    try {
      const abort = new AbortController();
      const reason = new Error('the caller gave up');
      const opening = openLedger({ root, host: 'h1', log: shared, origin, signal: abort.signal, onNotice: () => {} });
      expect(await settledWithin(waiting, ENDS_AT_SIGNAL_MS), "the open never waited for the pin's lock").toBe(
        'settled',
      );
      abort.abort(reason);
      // CANCELLED, not LOCKED: a wait that did not take the signal ends only at its 30 s bound, as LOCKED (the lock is
      // held until the open has answered).
      const err = await opening.catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      expect(existsSync(pin)).toBe(false);
      // Only the holder's lock there: the open took none, and left no staging file of a pin.
      expect(readdirSync(join(root, 'checkpoints'))).toEqual([`${pin.split('/').at(-1)}.lock`]);
    } finally {
      writeSpy.mockRestore();
      await held.release();
    }
    try {
      const ledger = await openLedger({ root, host: 'h1', log: shared, origin, onNotice: () => {} });
      try {
        expect(existsSync(pin)).toBe(true);
        expect((await ledger.publish(scope, sampleSummary(1))).seq).toBe(0);
      } finally {
        await ledger.close();
      }
    } finally {
      await level.close();
    }
  }, 60_000);
});

describe("openLedger's signal where a shared root's pin needs the keys read again", () => {
  it('ends the wait for the trust lock after a pin no key it read verifies (a rotation elsewhere) at the abort (CANCELLED, promptly); a later open reads the rotated keys', async () => {
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    // A log that says it is not exclusive (two processes of a host, as on PostgreSQL): a pin it cannot verify with the
    // keys it read, under a trust.json changed since, is judged again once the rotation holding the trust lock ends.
    const shared = Object.create(level, { exclusive: { value: false }, close: { value: async () => {} } });
    const root = join(base, 'root');
    const origin = 'example.com/retry-signal';
    const first = await openLedger({ root, host: 'h1', log: shared, origin, onNotice: () => {} });
    await first.publish(scope, sampleSummary(0));
    let held: Awaited<ReturnType<typeof takeFileLock>> | undefined;
    const open = Keyring.open.bind(Keyring);
    // The second open has read trust.json; the other process rotates and pins with its new checkpoint key now, and
    // holds the trust lock (another rotation under way) as the open goes to wait for it.
    const keyringOpen = vi.spyOn(Keyring, 'open').mockImplementationOnce(async (options, signal) => {
      const keyring = await open(options, signal);
      await first.rotateKey();
      await first.publish(scope, sampleSummary(1));
      held = await takeFileLock(join(root, 'trust.json'), 'trust.json');
      return keyring;
    });
    // The retry's wait for the trust lock is given a signal of its own that says when that wait has begun (its first
    // sleep between tries listens to it), where a sleep of 200 ms stood for that.
    let asked!: () => void;
    const waiting = new Promise<void>((resolve) => (asked = resolve));
    const exclusive = Keyring.prototype.exclusive;
    const exclusiveSpy = vi.spyOn(Keyring.prototype, 'exclusive').mockImplementation(function (
      this: Keyring,
      fn: () => Promise<unknown>,
      signal?: AbortSignal,
    ) {
      if (!held || !signal) return exclusive.call(this, fn, signal) as never;
      const watched = watchedSignal(signal);
      void watched.listened.then(asked);
      return exclusive.call(this, fn, watched.signal) as never;
    });
    try {
      const abort = new AbortController();
      const reason = new Error('the caller gave up');
      const opening = openLedger({ root, host: 'h1', log: shared, origin, signal: abort.signal, onNotice: () => {} });
      expect(await settledWithin(waiting, ENDS_AT_SIGNAL_MS), 'the retry never waited for the lock').toBe('settled');
      abort.abort(reason);
      // CANCELLED, not LOCKED: the retry's wait, had it not taken the signal, ends only at its 30 s bound, as LOCKED
      // (the lock is held until the open has answered).
      const err = await opening.catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
      expect((err as Error).cause).toBe(reason);
      expect(keyringOpen).toHaveBeenCalled();
    } finally {
      keyringOpen.mockRestore();
      exclusiveSpy.mockRestore();
      await held?.release();
    }
    try {
      const second = await openLedger({ root, host: 'h1', log: shared, origin, onNotice: () => {} });
      try {
        expect(second.keyId).toBe(first.keyId); // the rotated key
        expect((await second.resume(scope))?.seq).toBe(1);
      } finally {
        await second.close();
      }
    } finally {
      await first.close();
      await level.close();
    }
  }, 60_000);
});

describe('a PostgreSQL server on 127.0.0.1 that accepts and never answers: the abort ends the connection being made', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];
  const pools: pgLib.Pool[] = [];
  let restoreConnect: (() => void) | undefined;
  afterEach(async () => {
    restoreConnect?.();
    restoreConnect = undefined;
    for (const s of sockets.splice(0)) s.destroy();
    await Promise.all(pools.splice(0).map((p) => p.end().catch(() => {})));
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  /** The server; `accepted()` resolves at the next connection it accepts, with a promise of that socket's 'close'. */
  async function silentServer() {
    const waiting: Array<(s: { socket: Socket; closed: Promise<void> }) => void> = [];
    const backlog: Array<{ socket: Socket; closed: Promise<void> }> = [];
    server = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      // Listened for at once: a close before the test asks is not missed.
      const one = { socket, closed: new Promise<void>((resolve) => socket.once('close', () => resolve())) };
      const w = waiting.shift();
      if (w) w(one);
      else backlog.push(one);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      connectionString: `postgresql://nobody@127.0.0.1:${port}/db`,
      accepted: () =>
        backlog.length > 0
          ? Promise.resolve(backlog.shift()!)
          : new Promise<{ socket: Socket; closed: Promise<void> }>((resolve) => waiting.push(resolve)),
    };
  }

  /**
   * Lifts the pools' own connect timeout (the project's 10 s, which no option sets) to ten minutes: a connection the
   * abort does not end then closes only at the pool's 60 s wait for a connection, well past ENDS_AT_SIGNAL_MS. pg reads
   * the timeout from the client's `_connectionTimeoutMillis` as `connect()` starts; the values found there are
   * returned, so a pg that renamed it fails the test rather than let the timeout end the connection unseen.
   */
  function liftConnectTimeout(): number[] {
    const found: number[] = [];
    const proto = pgLib.Client.prototype as unknown as { connect: (...args: unknown[]) => unknown };
    const connect = proto.connect;
    proto.connect = function (this: { _connectionTimeoutMillis?: number }, ...args: unknown[]) {
      found.push(this._connectionTimeoutMillis ?? Number.NaN);
      this._connectionTimeoutMillis = 600_000;
      return connect.apply(this, args);
    };
    restoreConnect = () => void (proto.connect = connect);
    return found;
  }

  /** Whether the socket the server accepted is closed within ENDS_AT_SIGNAL_MS (its 'close' event). */
  const closedPromptly = (one: { closed: Promise<void> }) => settledWithin(one.closed, ENDS_AT_SIGNAL_MS);

  it('openLedger with postgres: CANCELLED, and the connection still being made is closed at the abort, not at its connect timeout', async () => {
    const pg = await silentServer();
    const found = liftConnectTimeout();
    const abort = new AbortController();
    const reason = new Error('the caller gave up');
    const opening = openLedger({
      root: tempDir(),
      host: 'h1',
      postgres: { connectionString: pg.connectionString },
      signal: abort.signal,
      onNotice: () => {},
    });
    const one = await pg.accepted();
    abort.abort(reason);
    const err = await opening.catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
    expect((err as Error).cause).toBe(reason);
    expect(await closedPromptly(one)).toBe('settled');
    expect(found).toEqual([10_000]);
  });

  it("openLedger given `origin` (the look at the log's stored origin): CANCELLED, and its connection still being made is closed at the abort", async () => {
    const pg = await silentServer();
    const found = liftConnectTimeout();
    const abort = new AbortController();
    const opening = openLedger({
      root: tempDir(),
      host: 'h1',
      origin: 'example.com/silent-server',
      postgres: { connectionString: pg.connectionString },
      signal: abort.signal,
      onNotice: () => {},
    });
    const one = await pg.accepted();
    abort.abort(new Error('the caller gave up'));
    expect(await opening.catch((e: unknown) => e)).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
    expect(await closedPromptly(one)).toBe('settled');
    expect(found).toEqual([10_000]);
  });

  it('openPostgresBackends and storedPostgresOrigin themselves answer CANCELLED at the abort, their pool ended with the connection it was making', async () => {
    const pg = await silentServer();
    const found = liftConnectTimeout();
    const opens: Array<(signal: AbortSignal) => Promise<unknown>> = [
      (signal: AbortSignal) => openPostgresBackends({ connectionString: pg.connectionString }, signal),
      (signal: AbortSignal) => storedPostgresOrigin({ connectionString: pg.connectionString }, signal),
    ];
    for (const open of opens) {
      const abort = new AbortController();
      const opening = open(abort.signal);
      const one = await pg.accepted();
      abort.abort(new Error('the caller gave up'));
      // Each ends its pool before it answers: before, that waited for the connection being made.
      expect(await settledWithin(opening, ENDS_AT_SIGNAL_MS)).toBe('settled');
      expect(await opening.catch((e: unknown) => e)).toMatchObject({ code: 'CANCELLED' });
      expect(await closedPromptly(one)).toBe('settled');
    }
    expect(found).toEqual([10_000, 10_000]);
  });

  it("a pool of the caller's: the connection it was making for the aborted open is closed at the abort; the pool stays usable", async () => {
    const pg = await silentServer();
    // The caller's pool bounds its connections at ten minutes: only the abort can end this one in time.
    const pool = new pgLib.Pool({ connectionString: pg.connectionString, connectionTimeoutMillis: 600_000 });
    pools.push(pool);
    const abort = new AbortController();
    const opening = PgManifestLog.open({ pool, signal: abort.signal });
    const one = await pg.accepted();
    abort.abort(new Error('the caller gave up'));
    expect(await opening.catch((e: unknown) => e)).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
    expect(await closedPromptly(one)).toBe('settled');
    expect(await settledWithin(pool.end(), ENDS_AT_SIGNAL_MS)).toBe('settled');
    pools.length = 0;
  });

  it("a pool of the caller's, all of its connections taken: the aborted open gives up its place in the queue, and no connection is made for it later", async () => {
    const pg = await silentServer();
    const pool = new pgLib.Pool({ connectionString: pg.connectionString, max: 1, connectionTimeoutMillis: 600_000 });
    pools.push(pool);
    // The pool's one connection, still being made for another caller.
    const other = pool.connect();
    const first = await pg.accepted();
    const asked = firstCall(pool, 'connect');
    const abort = new AbortController();
    const opening = PgManifestLog.open({ pool, signal: abort.signal });
    await asked.called;
    asked.restore();
    expect(pool.waitingCount).toBe(1);
    abort.abort(new Error('the caller gave up'));
    expect(await opening.catch((e: unknown) => e)).toMatchObject({ name: 'ManifestError', code: 'CANCELLED' });
    expect(pool.waitingCount).toBe(0);
    // The other caller's connection fails: the pool, its queue empty, makes no connection in its place.
    first.socket.destroy();
    await expect(other).rejects.toThrow();
    expect(pool.totalCount).toBe(0);
  });
});

describePostgres(
  'PostgreSQL',
  (pg: PostgresHandle) => {
    /** Connections to the test database other than the one asking. */
    const connections = activityCount(pg, 'datname = current_database() AND pid <> pg_backend_pid()');
    signalSuite(
      'PostgreSQL',
      (tag) => ({ postgres: { connectionString: pg.connectionString, schema: tag } }),
      connections,
    );

    describe("the PostgreSQL open's own steps, each waiting for a lock another connection holds", () => {
      /** A connection of its own that runs `statements` in a transaction and holds it until `release`. */
      async function holding(...statements: string[]) {
        const client = new pgLib.Client({ connectionString: pg.connectionString });
        await client.connect();
        await client.query('BEGIN');
        for (const text of statements) await client.query(text);
        return {
          release: async () => {
            await client.query('COMMIT');
            await client.end();
          },
        };
      }
      async function publishedStore(schema: string) {
        const root = tempDir();
        const ledger = await openLedger({
          root,
          host: 'h1',
          postgres: { connectionString: pg.connectionString, schema },
          onNotice: () => {},
        });
        try {
          await ledger.publish(scope, sampleSummary(1));
          await ledger.publish({ ...scope, session: 's2' }, sampleSummary(2));
        } finally {
          await ledger.close();
        }
        return root;
      }
      /** Opens the store while `held` holds its lock, aborts once the open waits for it, and checks what is left. */
      async function abortedWhileWaiting(
        root: string,
        schema: string,
        pattern: string,
        held: { release(): Promise<void> },
        more: Partial<OpenLedgerOptions> & { lockTimeoutMs?: number } = {},
      ) {
        const { lockTimeoutMs, ...extra } = more;
        const postgres = { connectionString: pg.connectionString, schema, lockTimeoutMs };
        try {
          const abort = new AbortController();
          const reason = new Error('the caller gave up');
          const opening = openLedger({
            ...extra,
            root,
            host: 'h1',
            postgres,
            signal: abort.signal,
            onNotice: () => {},
          });
          await waitingForLock(pg, pattern, { settles: opening });
          abort.abort(reason);
          const err = await opening.catch((e: unknown) => e);
          expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
          expect((err as Error).cause).toBe(reason);
          // The open's pool is ended while the lock is still held: only the holder's connection is left (given as long
          // as any wait that must end at its signal: the holder keeps a wait that ignored it going past that).
          expect(await settledCount(connections, 1, ENDS_AT_SIGNAL_MS)).toBe(1);
        } finally {
          await held.release();
        }
        const ledger = await openLedger({ ...extra, root, host: 'h1', postgres, onNotice: () => {} });
        try {
          expect((await ledger.publish(scope, sampleSummary(3))).seq).toBeGreaterThanOrEqual(0);
        } finally {
          await ledger.close();
        }
        expect(await settledCount(connections, 0)).toBe(0);
      }

      it('PgManifestLog.open, PgManifestLog.storedOrigin and PgBlobStore.open: an aborted signal is CANCELLED before anything connects; one that is no AbortSignal, INVALID_ARGUMENT', async () => {
        const hash = await loadHashBackend('auto');
        const conn = { connectionString: pg.connectionString, schema: 'opener_signals' };
        const reason = new Error('the caller gave up');
        const aborted = AbortSignal.abort(reason);
        await expect(PgManifestLog.open({ ...conn, signal: aborted })).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'CANCELLED',
          cause: reason,
        });
        await expect(PgBlobStore.open({ ...conn, hash, signal: aborted })).rejects.toMatchObject({
          name: 'StoreError',
          code: 'CANCELLED',
          cause: reason,
        });
        await expect(PgManifestLog.storedOrigin({ ...conn, signal: aborted })).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'CANCELLED',
          cause: reason,
        });
        await expect(PgManifestLog.open({ ...conn, signal: 'soon' as never })).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
        });
        await expect(PgManifestLog.storedOrigin({ ...conn, signal: 'soon' as never })).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
        });
        await expect(PgBlobStore.open({ ...conn, hash, signal: {} as never })).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
        });
        expect(await sqlOn(pg.connectionString, "SELECT 1 FROM pg_namespace WHERE nspname = 'opener_signals'")).toEqual(
          [],
        );
        expect(await settledCount(connections, 0)).toBe(0);
      });

      it("the public openPostgresBackends takes { signal }: aborted before the call or while its migration waits for another opener's lock, CANCELLED with its pool ended; one that is no AbortSignal, INVALID_ARGUMENT", async () => {
        const schema = 'public_open_signal';
        const options = { connectionString: pg.connectionString, schema };
        const reason = new Error('the caller gave up');
        // Aborted before the call: nothing connects, no schema is made.
        const early = await openPublicPostgresBackends(options, { signal: AbortSignal.abort(reason) }).catch(
          (e: unknown) => e,
        );
        expect(early).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
        expect((early as Error).cause).toBe(reason);
        // Options it cannot use are INVALID_ARGUMENT, aborted or not (as openLedger answers them).
        for (const unusable of [{ connectionString: '' }, { ...options, schema: 'Bad' }])
          await expect(
            openPublicPostgresBackends(unusable, { signal: AbortSignal.abort(reason) }),
          ).rejects.toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
        // A signal-like object (aborted, addEventListener) is no AbortSignal either: refused here, as a LedgerError.
        const signalLike = { aborted: false, addEventListener: () => {}, removeEventListener: () => {} };
        for (const open of [
          { signal: { aborted: false } },
          { signal: signalLike },
          { signal: 'abort' },
          { signa: undefined },
          'soon',
        ])
          await expect(openPublicPostgresBackends(options, open as never)).rejects.toMatchObject({
            name: 'LedgerError',
            code: 'INVALID_ARGUMENT',
          });
        expect(await sqlOn(pg.connectionString, 'SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).toEqual([]);
        expect(await settledCount(connections, 0)).toBe(0);
        // Aborted while the open's migration waits for the lock another opener holds (unbounded: lock_timeout 0), which
        // it cannot get until the test lets go: only the abort ends it.
        const held = await holding(`SELECT pg_advisory_xact_lock(hashtext('handoff_ledger.migrate:"${schema}"'))`);
        try {
          const abort = new AbortController();
          const opening = openPublicPostgresBackends(options, { signal: abort.signal });
          await waitingForLock(pg, '%pg_advisory_xact_lock%', { settles: opening });
          abort.abort(reason);
          expect(await settledWithin(opening, ENDS_AT_SIGNAL_MS), 'the open did not end at its abort').toBe('settled');
          const err = await opening.catch((e: unknown) => e);
          expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
          expect((err as Error).cause).toBe(reason);
          // Answered once its pool ended: only the holder's connection is left, the lock still held.
          expect(await settledCount(connections, 1)).toBe(1);
        } finally {
          await held.release();
        }
        // A signal that does not abort changes nothing: the open migrates, and its backends close the pool.
        const { blobs, log } = await openPublicPostgresBackends(options, { signal: new AbortController().signal });
        await Promise.all([blobs.close(), log.close()]);
        expect(await settledCount(connections, 0)).toBe(0);
      });

      it("ends the migration's wait for another opener's migration lock at the abort: CANCELLED, the pool ended; a later open migrates", async () => {
        const schema = 'migration_lock';
        const held = await holding(`SELECT pg_advisory_xact_lock(hashtext('handoff_ledger.migrate:"${schema}"'))`);
        await abortedWhileWaiting(tempDir(), schema, '%pg_advisory_xact_lock%', held);
      });

      it("ends the look at the log's stored origin (an open given `origin`), waiting for a lock on the log's metadata, at the abort: CANCELLED, its connection ended; a later open works", async () => {
        const schema = 'origin_look_lock';
        const origin = 'example.com/origin-look';
        const root = tempDir();
        const postgres = { connectionString: pg.connectionString, schema };
        await (await openLedger({ root, host: 'h1', postgres, origin, onNotice: () => {} })).close();
        // A migration (or an operator) holding the metadata table: the look's read of the origin waits for it. No
        // lock_timeout (0: the server's, none): a look that is not cancelled waits for as long as the lock is held.
        const held = await holding(`LOCK TABLE "${schema}".log_meta IN ACCESS EXCLUSIVE MODE`);
        await abortedWhileWaiting(root, schema, '%log_meta WHERE key = %', held, { origin, lockTimeoutMs: 0 });
      });

      it("ends the judging of the schema's versions (both components, before either migrates), waiting for a lock on the migrations table, at the abort: CANCELLED, the pool ended; a later open works", async () => {
        const schema = 'versions_look_lock';
        const root = await publishedStore(schema);
        // An operator (or a restore in one transaction) holding the migrations table: the versions' read waits for it.
        // No lock_timeout (0: the server's, none): a read that is not cancelled waits for as long as the lock is held.
        const held = await holding(`LOCK TABLE "${schema}".handoff_ledger_migrations IN ACCESS EXCLUSIVE MODE`);
        await abortedWhileWaiting(root, schema, '%SELECT component, version, name FROM%', held, { lockTimeoutMs: 0 });
      });

      it("ends the tree's backfill of a store from before the tree, waiting for the append lock, at the abort: CANCELLED, the pool ended; a later open backfills", async () => {
        const schema = 'tree_backfill_lock';
        const root = await publishedStore(schema);
        await sqlOn(pg.connectionString, `DELETE FROM "${schema}".tree_nodes`);
        const held = await holding(`SELECT 1 FROM "${schema}".log_counter FOR UPDATE`);
        await abortedWhileWaiting(root, schema, '%next_position::text AS n FROM%FOR UPDATE%', held);
        expect(
          Number(
            (
              await sqlOn<{ n: string }>(
                pg.connectionString,
                `SELECT count(*) AS n FROM "${schema}".tree_nodes WHERE level = 0`,
              )
            )[0]!.n,
          ),
        ).toBe(3);
      });

      it('ends the building of the session-heads index of a store from before it, waiting for the append lock, at the abort: CANCELLED, the pool ended; a later open builds it', async () => {
        const schema = 'heads_index_lock';
        const root = await publishedStore(schema);
        await sqlOn(pg.connectionString, `DELETE FROM "${schema}".log_meta WHERE key = 'session-heads'`);
        const held = await holding(`SELECT 1 FROM "${schema}".log_counter FOR UPDATE`);
        await abortedWhileWaiting(root, schema, 'SELECT 1 FROM %log_counter FOR UPDATE', held);
        expect(
          await sqlOn(pg.connectionString, `SELECT 1 FROM "${schema}".log_meta WHERE key = 'session-heads'`),
        ).toHaveLength(1);
      });
    });

    describe('a server that accepts and never answers', () => {
      let server: Server | undefined;
      const sockets: Socket[] = [];
      afterEach(async () => {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
        server = undefined;
      });

      it('the open ends at the abort (CANCELLED), not at the connect timeout, and nothing is left connecting', async () => {
        const dir = tempDir('hl-pg-silent-');
        let accepted!: () => void;
        const connected = new Promise<void>((resolve) => (accepted = resolve));
        server = createServer((socket) => {
          sockets.push(socket);
          accepted();
        });
        await new Promise<void>((resolve) => server!.listen(join(dir, '.s.PGSQL.5432'), resolve));
        // Connection attempts with no bound of their own (theirs is 10 s, less than a wait that must end is given):
        // an open that did not take the signal would wait on this server for as long as it stays silent.
        const connect = pgLib.Client.prototype.connect;
        const unbounded = vi.spyOn(pgLib.Client.prototype, 'connect').mockImplementation(function (
          this: pgLib.Client,
          ...args: unknown[]
        ) {
          (this as unknown as { _connectionTimeoutMillis: number })._connectionTimeoutMillis = 0;
          return (connect as (...a: unknown[]) => never).apply(this, args);
        });
        onTestFinished(() => unbounded.mockRestore());
        const root = tempDir();
        const abort = new AbortController();
        const reason = new Error('the caller gave up');
        const opening = openLedger({
          root,
          host: 'h1',
          postgres: { connectionString: `postgresql://nobody@/db?host=${dir}` },
          signal: abort.signal,
          onNotice: () => {},
        });
        await connected;
        abort.abort(reason);
        expect(await settledWithin(opening, ENDS_AT_SIGNAL_MS), 'the open did not end at the abort').toBe('settled');
        const err = await opening.catch((e: unknown) => e);
        expect(err).toMatchObject({ name: 'LedgerError', code: 'CANCELLED' });
        expect((err as Error).cause).toBe(reason);
        expect(existsSync(join(root, 'keys'))).toBe(false);
      });
    });
  },
  'open_signal_test',
);
