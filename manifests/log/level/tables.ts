/**
 * The embedded log's tables beside its chains (./log.ts lists every record): inline blobs (`b!`, `t!`), signing
 * keys (`k!`) and grants (`g!`). This process owns the database (LevelDB's lock), so their caches are exact; the
 * signing keys and revocations are ordered with the append queue through `AppendQueue`.
 */
import type { Level } from 'level';
import { storageFailure } from '../../../store/errors.js';
import { digestHex, type Digest } from '../../../store/hash/digest.js';
import { ManifestError } from '../../errors.js';
import {
  parseGrantRecord,
  parseInlineKey,
  parseInlineMetaRecord,
  parseSigningKeyRecord,
  signingKeyRecord,
} from './records.js';
import type {
  GrantRecord,
  GrantTable,
  InlineBlobTable,
  InlineDeleteOptions,
  SigningKeyRecord,
  SigningKeyTable,
} from '../log.js';

export type BatchOp =
  | { type: 'put'; key: string; value: string }
  | { type: 'put'; key: string; value: Uint8Array; valueEncoding: 'view' }
  | { type: 'del'; key: string };

/** What the tables need of the log's append queue. */
export interface AppendQueue {
  /** Resolves once no append is queued or being written. */
  idle(): Promise<void>;
  /** The newest createdAt of `keyId` among the appends queued or being written, not yet committed. */
  queuedSignedAt(keyId: string): string | undefined;
}

/** A storage error of the LevelDB log or its tables: `STORAGE_FAILED` naming what failed (own errors pass as they are). */
export function storageFailed(what: string, err: unknown): Error {
  return storageFailure(ManifestError, `manifest log: ${what}`, err);
}

/** One plain read of a record: a storage error is `STORAGE_FAILED` naming the read (as every PostgreSQL read). */
export async function readRecord(db: Level<string, string>, key: string, what: string): Promise<string | undefined> {
  try {
    return await db.get(key);
  } catch (err) {
    throw storageFailed(what, err);
  }
}

/**
 * The items of a range read (`open` makes the iterator), a storage error `STORAGE_FAILED` naming the read; an error of
 * the handoff-ledger's own (a damaged record's `RECORD_CORRUPT`) passes as it is.
 */
export async function* readRange<T>(what: string, open: () => AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* open();
  } catch (err) {
    throw storageFailed(what, err);
  }
}

const AS_VIEW = { valueEncoding: 'view' } as const;

/**
 * Writes `ops` as one atomic LevelDB batch, durably (`sync: true`). Built with the chained batch: level's
 * array form clones and re-validates every operation and cost a small publish ~4× more main-thread time
 * (benchmarks/README.md, "Many sessions"). Same atomicity: one LevelDB WriteBatch.
 */
export async function writeSyncedBatch(db: Level<string, string>, ops: readonly BatchOp[]): Promise<void> {
  const batch = db.batch();
  try {
    for (const op of ops) {
      if (op.type === 'del') batch.del(op.key);
      else if (typeof op.value === 'string') batch.put(op.key, op.value);
      else batch.put<string, Uint8Array>(op.key, op.value, AS_VIEW);
    }
  } catch (err) {
    await batch.close();
    throw err;
  }
  await batch.write({ sync: true });
}

export function inlineBlobOps(digest: Digest, bytes: Uint8Array): BatchOp[] {
  const hex = digestHex(digest);
  const meta = JSON.stringify({ size: bytes.length, storedAtMs: Date.now() });
  return [
    { type: 'put', key: `b!${hex}`, value: bytes, valueEncoding: 'view' },
    { type: 'put', key: `t!${hex}`, value: meta },
  ];
}

/** Inline blobs up to this size are read synchronously (LevelInlineBlobs.get). */
export const SYNC_READ_MAX_BYTES = 1024 * 1024;

/** Inline blobs: bytes under `b!`, their size and storage time under `t!` (so listing and gc read no bytes). */
export class LevelInlineBlobs implements InlineBlobTable {
  constructor(
    private readonly db: Level<string, string>,
    private readonly withAppendsHeld: <T>(fn: () => Promise<T>, signal?: AbortSignal) => Promise<T>,
  ) {}

  async get(digest: Digest): Promise<Uint8Array | undefined> {
    const hex = digestHex(digest);
    try {
      // A small blob (the ledger's threshold is 64 KiB by default) is copied out synchronously: a thread-pool round
      // trip costs more than the copy (benchmarks/README.md, "Resume's fixed cost"). A large one (a threshold raised
      // far) is read off the event loop, as are the bytes of a blob whose size record is unreadable.
      if (this.syncReadable(hex)) return this.db.getSync<string, Uint8Array>(`b!${hex}`, { valueEncoding: 'view' });
      return await this.db.get<string, Uint8Array>(`b!${hex}`, { valueEncoding: 'view' });
    } catch (err) {
      throw storageFailed('inline blob read', err);
    }
  }

  /** True when the blob is absent (its size record is written in the same batch) or at most SYNC_READ_MAX_BYTES. */
  private syncReadable(hex: string): boolean {
    const raw = this.db.getSync(`t!${hex}`);
    if (raw === undefined) return true;
    try {
      return parseInlineMetaRecord(`t!${hex}`, raw).size <= SYNC_READ_MAX_BYTES;
    } catch {
      return false; // fsck names the damaged record; the bytes are still served, re-hashed by the reader
    }
  }

  async stat(digest: Digest): Promise<{ size: number; storedAtMs: number } | undefined> {
    const key = `t!${digestHex(digest)}`;
    const raw = await readRecord(this.db, key, 'inline blob stat');
    return raw === undefined ? undefined : parseInlineMetaRecord(key, raw);
  }

  async *list(): AsyncIterable<Digest> {
    for await (const key of readRange('inline blob list', () => this.db.keys({ gte: 't!', lt: 't!\xff' })))
      yield parseInlineKey(key);
  }

  async delete(digest: Digest, options: InlineDeleteOptions = {}): Promise<boolean> {
    // Judged and deleted with appends held back: an append that rewrote `t!` (refreshing the time) before the read
    // keeps the blob, and one queued meanwhile writes the bytes again after the delete. The signal ends only the wait
    // for that hold: the judgement and its one batch run whole.
    return this.withAppendsHeld(() => this.judgeAndDelete(digest, options), options.signal);
  }

  private async judgeAndDelete(digest: Digest, options: { storedBeforeMs?: number }): Promise<boolean> {
    const hex = digestHex(digest);
    if (options.storedBeforeMs === undefined) {
      // Unconditional: a corrupt `t!` record can still be removed.
      if ((await readRecord(this.db, `t!${hex}`, 'inline blob stat')) === undefined) return false;
    } else {
      const meta = await this.stat(digest);
      if (!meta || meta.storedAtMs >= options.storedBeforeMs) return false;
    }
    try {
      await this.db.batch(
        [
          { type: 'del', key: `b!${hex}` },
          { type: 'del', key: `t!${hex}` },
        ],
        { sync: true },
      );
    } catch (err) {
      throw storageFailed('inline blob delete', err);
    }
    return true;
  }
}

/**
 * `k!<keyId>` records. This process owns the database, so the cache is exact; a window is closed only once the
 * appends queued before it are written, and an append checks the cached window before it is queued.
 */
export class LevelSigningKeys implements SigningKeyTable {
  private readonly cache = new Map<string, SigningKeyRecord | null>();
  private log!: AppendQueue;
  private closing: Promise<unknown> = Promise.resolve();

  constructor(private readonly db: Level<string, string>) {}

  attach(log: AppendQueue): void {
    this.log = log;
  }

  async get(keyId: string): Promise<SigningKeyRecord | undefined> {
    let rec = this.cache.get(keyId);
    if (rec === undefined) {
      const key = `k!${keyId}`;
      const raw = await readRecord(this.db, key, 'signing key read');
      rec = raw === undefined ? null : parseSigningKeyRecord(key, raw);
      // A window closed while this read was in flight is newer than what it read: keep it.
      if (this.cache.has(keyId)) return this.cache.get(keyId) ?? undefined;
      this.cache.set(keyId, rec);
    }
    return rec ?? undefined;
  }

  /** Synchronous, from the cache `get` filled. */
  refuseClosed(signed: { keyId: string; createdAt: string }): void {
    const rec = this.cache.get(signed.keyId);
    if (rec?.closedAt !== undefined && signed.createdAt >= rec.closedAt)
      throw new ManifestError(
        'KEY_EXPIRED',
        `key ${signed.keyId}: its window closed at ${rec.closedAt} (rotated or revoked), the entry is dated ${signed.createdAt}`,
      );
  }

  /** The `k!` puts for a batch about to be written, and how to make them visible once it is durable. */
  signedPuts(signed: Array<{ keyId: string; createdAt: string } | undefined>): {
    puts: BatchOp[];
    commit: () => void;
  } {
    const next = new Map<string, SigningKeyRecord>();
    for (const s of signed) {
      if (!s) continue;
      const rec = next.get(s.keyId) ?? this.cache.get(s.keyId) ?? { keyId: s.keyId };
      if (rec.lastSignedAt === undefined || s.createdAt > rec.lastSignedAt)
        next.set(s.keyId, signingKeyRecord(s.keyId, s.createdAt, rec.closedAt));
    }
    return {
      puts: [...next.values()].map((r) => ({ type: 'put' as const, key: `k!${r.keyId}`, value: JSON.stringify(r) })),
      // A window closed while the batch was being written (`close` chose its end seeing this batch's appends) stays
      // closed: the record built before it carries no end.
      commit: () =>
        next.forEach((r, k) => {
          const now = this.cache.get(k);
          this.cache.set(k, signingKeyRecord(k, r.lastSignedAt, now ? now.closedAt : r.closedAt));
        }),
    };
  }

  async *keyIds(): AsyncIterable<string> {
    for await (const key of readRange('signing key list', () => this.db.keys({ gt: 'k!', lt: 'k!\xff' })))
      yield key.slice(2);
  }

  close(keyId: string, choose: (record: SigningKeyRecord | undefined) => string): Promise<string> {
    const run = this.closing.then(async () => {
      await this.get(keyId);
      await this.log.idle();
      // Synchronous from here to the cache update: no append can be checked against the old window meanwhile.
      const stored = this.cache.get(keyId) ?? undefined;
      const queued = this.log.queuedSignedAt(keyId);
      const seen =
        queued !== undefined && (stored?.lastSignedAt === undefined || queued > stored.lastSignedAt)
          ? signingKeyRecord(keyId, queued, stored?.closedAt)
          : stored;
      const closedAt = choose(seen);
      const rec = signingKeyRecord(keyId, stored?.lastSignedAt, closedAt);
      this.cache.set(keyId, rec);
      try {
        await this.log.idle();
        const now = this.cache.get(keyId);
        await this.db.put(`k!${keyId}`, JSON.stringify(signingKeyRecord(keyId, now?.lastSignedAt, closedAt)), {
          sync: true,
        });
      } catch (err) {
        this.cache.delete(keyId);
        throw storageFailed('signing key write', err);
      }
      return closedAt;
    });
    this.closing = run.catch(() => {});
    return run;
  }
}

/**
 * Grants are read twice per publish or resume. This process owns the database (LevelDB's lock), so a
 * write-through cache, absences included, is exact.
 */
export class LevelGrantTable implements GrantTable {
  private readonly cache = new Map<string, GrantRecord | null>();
  private log!: AppendQueue;

  constructor(private readonly db: Level<string, string>) {}

  attach(log: AppendQueue): void {
    this.log = log;
  }

  /** Synchronous, from the cache `get` filled: throws `REVOKED` for a principal revoked here or everywhere. */
  refuseRevoked(principal: string, session: string): void {
    for (const s of ['*', session]) {
      if (this.cache.get(`g!${principal}!${s}`)?.state === 'revoked')
        throw new ManifestError(
          'REVOKED',
          `principal ${principal} is revoked ${s === '*' ? 'everywhere' : `for session ${session}`}`,
        );
    }
  }

  async get(principal: string, session: string): Promise<GrantRecord | undefined> {
    const key = `g!${principal}!${session}`;
    let rec = this.cache.get(key);
    if (rec === undefined) {
      const raw = await readRecord(this.db, key, 'grant read');
      rec = raw === undefined ? null : parseGrantRecord(key, raw);
      // A revocation made while this read was in flight is newer than what it read: keep it.
      if (this.cache.has(key)) return this.cache.get(key) ?? undefined;
      // Revocations stay: appends check them synchronously from this cache just before they are queued.
      if (this.cache.size >= 100_000) for (const [k, v] of this.cache) if (v?.state !== 'revoked') this.cache.delete(k);
      this.cache.set(key, rec);
    }
    return rec ?? undefined;
  }

  async put(record: GrantRecord): Promise<void> {
    const key = `g!${record.principal}!${record.session}`;
    try {
      if (record.state === 'revoked') {
        // Refuse new appends at once, and let the ones already queued finish before the revocation is done.
        this.cache.set(key, record);
        await this.log.idle();
      }
      await this.db.put(key, JSON.stringify(record), { sync: true });
      this.cache.set(key, record);
    } catch (err) {
      this.cache.delete(key);
      throw storageFailed('grant write', err);
    }
  }

  async list(filter: { principal?: string; session?: string } = {}): Promise<GrantRecord[]> {
    const prefix = filter.principal === undefined ? 'g!' : `g!${filter.principal}!`;
    const out: GrantRecord[] = [];
    for await (const [key, raw] of readRange('grant list', () =>
      this.db.iterator({ gte: prefix, lt: `${prefix}\xff` }),
    )) {
      const rec = parseGrantRecord(key, raw);
      if (filter.session === undefined || rec.session === filter.session) out.push(rec);
    }
    return out;
  }
}
