/**
 * A witness's durable state: per log, the latest checkpoint it cosigned (size, root, and the cosigned note
 * it serves to monitors), one file per log under `<dir>/logs/<sha256(origin) hex>.json`, written atomically
 * and fsynced before any cosignature leaves the process. One process owns a state directory (`witness.lock`
 * names it): two witnesses sharing one view could each accept a different extension of it.
 *
 * Why a crash can never make the witness cosign two inconsistent trees: a cosignature is returned only
 * after its tree is durable here, and every later tree must extend the durable one (add-checkpoint's old
 * size must equal the stored size). A crash after the write but before the answer leaves the new tree
 * stored and uncosigned by anyone; the log learns the size from a 409 and resubmits.
 *
 * A state is one witness's: `<dir>/witness.json` names the verifier key it was written with, and a witness of another
 * key is refused it (`WITNESS_KEY_MISMATCH`), since a witness handed another's view cosigns what that view accepts. A
 * witness given a new, empty state trusts each log's first checkpoint afresh: what it cosigned before is forgotten, so
 * a key that cosigned before must be given its own state back (the CLI says which it found: `binding`).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { decodeBase64, encodeBase64 } from '../../manifests/encoding/base64.js';
import type { WitnessedTree } from '../../manifests/witness/add-checkpoint.js';
import { HASH_SIZE } from '../../manifests/tlog/merkle.js';
import { removeAtomicStagingLeftovers, writeFileAtomic } from '../../store/fs/atomic-file.js';
import { ensurePrivateDir } from '../../store/fs/safe-dir.js';
import { nodeFsOps } from '../../store/fs/ops.js';
import { quoted, shownValue, StoreError } from '../../store/errors.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { LedgerError } from '../errors.js';
import { takeFileLock, type HeldFileLock } from '../ledger/file-lock.js';

export interface StoredLog extends WitnessedTree {
  /** The checkpoint with the log's signatures and this witness's cosignature (served to monitors). */
  note: string;
  /**
   * The time of the latest cosignature of this log (POSIX seconds): the next is never older, whatever the clock says.
   * Absent from the records of earlier versions (the server reads the time off its line in `note` then).
   */
  timestamp?: number;
}

/** The hex SHA-256 of an origin: the monitoring URL path segment of C2SP tlog-witness, and the file name. */
export const originHash = (origin: string): string => createHash('sha256').update(origin, 'utf8').digest('hex');

/**
 * How the state met the witness's key at open: `created` a new state (it trusts every log afresh), `adopted` a state of
 * an earlier version that named no key (bound to this one now), `same` a state of this key; `unbound` when no key was
 * given to `open`.
 */
export type StateBinding = 'created' | 'adopted' | 'same' | 'unbound';

export class WitnessState {
  private readonly cache = new Map<string, StoredLog | null>();
  /** The read of a log's file in flight, shared by every `get` that finds the log uncached meanwhile. */
  private readonly loading = new Map<string, Promise<StoredLog | undefined>>();
  /** The `put`s under way: `close()` releases the lock only once they have settled. */
  private readonly writing = new Set<Promise<void>>();
  private closed = false;

  private constructor(
    private readonly dir: string,
    private readonly lock: HeldFileLock,
    /** How the state met the witness's key (see StateBinding). */
    readonly binding: StateBinding,
  ) {}

  /**
   * Opens (creating) a state directory and takes its lock, `witness.lock` (src/ledger/file-lock.ts: written whole,
   * touched while the witness runs; one left by a killed witness of this host is taken over once its process is
   * gone, one of another host sharing the directory after a minute untouched). Two witnesses on one directory could cosign two views of a log that are not consistent.
   * With `vkey` (the witness's verifier key) the state is bound to that key: one written for another key is refused,
   * and one that names none is bound to it (`witness.json`, written durably before any cosignature).
   * @throws LedgerError `LOCKED` (another witness serves it), `WITNESS_KEY_MISMATCH` (a state of another witness key),
   *   `RECORD_CORRUPT` (a damaged `witness.json`), StoreError `UNSAFE_PATH`, `STORAGE_FAILED`
   */
  static async open(dir: string, vkey?: string): Promise<WitnessState> {
    await ensurePrivateDir(dir, 'UNSAFE_PATH');
    await ensurePrivateDir(join(dir, 'logs'), 'UNSAFE_PATH');
    // The directories' own entries durable before the first cosignature leaves: a crash must not bring the
    // witness back with no state, where it would cosign any tree again (old size 0).
    // (The parent is not ours and may not be readable: its flush is best effort.)
    await nodeFsOps.fsyncDir(dirname(dir)).catch(() => {});
    for (const d of [dir, join(dir, 'logs')])
      await nodeFsOps.fsyncDir(d).catch((err: unknown) => {
        throw new StoreError('STORAGE_FAILED', `cannot flush the witness state directory ${d}`, { cause: err });
      });
    const lock = await takeFileLock(join(dir, 'witness'), `the witness state directory ${quoted(dir)}`, {
      waitMs: 0,
      staleMs: 60_000,
    });
    // Staging files a crash left (a state write's in logs/, which only the lock's holder writes; a lock's in the
    // directory, where another process may be making one this moment: only old ones there).
    await removeAtomicStagingLeftovers([join(dir, 'logs')], Infinity).catch(() => 0);
    await removeAtomicStagingLeftovers([dir], Date.now() - 60_000).catch(() => 0);
    let binding: StateBinding = 'unbound';
    try {
      if (vkey !== undefined) binding = await bind(dir, vkey);
    } catch (err) {
      await lock.release().catch(() => {});
      throw err;
    }
    return new WitnessState(dir, lock, binding);
  }

  private pathOf(origin: string): string {
    return join(this.dir, 'logs', `${originHash(origin)}.json`);
  }

  /**
   * The stored tree of a log, or undefined when it never cosigned one. Calls that find it uncached share one read of
   * the file, and a read never replaces what a `put` or `serve` cached while it ran: a monitor's GET whose read was
   * still on its way when an add-checkpoint stored a larger tree must not put the older one back (the next
   * add-checkpoint from that older size would be cosigned: two inconsistent trees).
   * @throws LedgerError `RECORD_CORRUPT`
   */
  async get(origin: string): Promise<StoredLog | undefined> {
    if (this.cache.has(origin)) return this.cache.get(origin) ?? undefined;
    let load = this.loading.get(origin);
    if (load === undefined) {
      load = this.read(origin).finally(() => this.loading.delete(origin));
      this.loading.set(origin, load);
    }
    const stored = await load;
    if (!this.cache.has(origin)) this.cache.set(origin, stored ?? null);
    return this.cache.get(origin) ?? undefined;
  }

  private async read(origin: string): Promise<StoredLog | undefined> {
    let text: string | undefined;
    try {
      text = await readFile(this.pathOf(origin), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    return text === undefined ? undefined : parseStored(text, origin);
  }

  /**
   * Compare-and-swap: replaces the stored tree of `origin` only if it still is `expected` (by size), and
   * returns once the new one is durable.
   * @throws LedgerError `CHAIN_CONFLICT` when another write came first, `CLOSED` once `close()` was called (the lock
   *   may be another witness's by then: a write of this one could put back a tree older than one it cosigned)
   */
  async put(origin: string, expectedSize: number, next: StoredLog): Promise<void> {
    if (this.closed) throw new LedgerError('CLOSED', 'the witness state is closed: it stores no more trees');
    const write = this.write(origin, expectedSize, next);
    this.writing.add(write);
    try {
      await write;
    } finally {
      this.writing.delete(write);
    }
  }

  private async write(origin: string, expectedSize: number, next: StoredLog): Promise<void> {
    const current = await this.get(origin);
    if ((current?.size ?? 0) !== expectedSize)
      throw new LedgerError(
        'CHAIN_CONFLICT',
        `the witness's view of ${shownValue(origin, 300)} changed while it was checked`,
      );
    const record = {
      origin,
      size: next.size,
      root: encodeBase64(next.root),
      note: next.note,
      ...(next.timestamp !== undefined ? { timestamp: next.timestamp } : {}),
    };
    await writeFileAtomic(this.pathOf(origin), `${JSON.stringify(record)}\n`, 0o600);
    this.cache.set(origin, next);
  }

  /**
   * Serves `next` for a log whose stored tree it equals in size and root (the caller checked), without writing it:
   * nothing about the tree changed, so after a restart the stored note (a cosignature of the same tree) is served.
   */
  serve(origin: string, next: StoredLog): void {
    this.cache.set(origin, next);
  }

  /**
   * Refuses every later `put`, waits for those under way to settle (stored or failed), then releases the lock: a
   * witness started on this directory once the lock is free must find every tree this one cosigned.
   */
  async close(): Promise<void> {
    this.closed = true;
    while (this.writing.size > 0) await Promise.allSettled([...this.writing]);
    await this.lock.release();
  }
}

/**
 * Binds the state in `dir` to the witness key `vkey` (`witness.json`: `{ "version": 1, "vkey": … }`), or checks that it
 * is bound to it. Run by the lock's holder.
 */
async function bind(dir: string, vkey: string): Promise<StateBinding> {
  const path = join(dir, 'witness.json');
  let text: string | undefined;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new StoreError('STORAGE_FAILED', `cannot read ${quoted(path)}: ${errnoText(err)}`, { cause: err });
  }
  if (text !== undefined) {
    let bound: unknown;
    try {
      const v = JSON.parse(text) as { version?: unknown; vkey?: unknown };
      if (v?.version === 1) bound = v.vkey;
    } catch {
      // damaged: below
    }
    if (typeof bound !== 'string')
      throw new LedgerError(
        'RECORD_CORRUPT',
        `the witness state's key record ${quoted(path)} is damaged: the witness refuses a state it cannot tell is its own`,
      );
    if (bound !== vkey)
      throw new LedgerError(
        'WITNESS_KEY_MISMATCH',
        `the witness state ${quoted(dir)} is the state of the witness key ${shownValue(bound, 300)}, not of ${vkey}: a witness serves its own state only (give this key its own --state)`,
      );
    return 'same';
  }
  const held = await readdir(join(dir, 'logs')).catch(() => [] as string[]);
  await writeFileAtomic(path, `${JSON.stringify({ version: 1, vkey })}\n`, 0o600);
  return held.some((n) => n.endsWith('.json')) ? 'adopted' : 'created';
}

function parseStored(text: string, origin: string): StoredLog {
  const corrupt = () => new LedgerError('RECORD_CORRUPT', `the witness state of ${shownValue(origin, 300)} is damaged`);
  let v: { origin?: unknown; size?: unknown; root?: unknown; note?: unknown; timestamp?: unknown };
  try {
    v = JSON.parse(text) as typeof v;
  } catch {
    throw corrupt();
  }
  // JSON that is no object (`null` read as one was a TypeError of `v.root`, not the damage it is).
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw corrupt();
  const root = typeof v.root === 'string' ? decodeBase64(v.root) : undefined;
  if (v.origin !== origin || typeof v.size !== 'number' || !Number.isSafeInteger(v.size) || v.size < 0) throw corrupt();
  if (!root || root.length !== HASH_SIZE || typeof v.note !== 'string') throw corrupt();
  if (v.timestamp !== undefined && !(Number.isSafeInteger(v.timestamp) && (v.timestamp as number) >= 0))
    throw corrupt();
  return {
    size: v.size,
    root,
    note: v.note,
    ...(v.timestamp !== undefined ? { timestamp: v.timestamp as number } : {}),
  };
}
