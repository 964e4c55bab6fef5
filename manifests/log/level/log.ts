/**
 * The embedded manifest log on LevelDB (`level`). One process owns a store (LevelDB's lock); a second
 * opener gets `LOCKED`. Keys encode ids unambiguously: ids never contain `!`, which sorts below every id
 * character, so `e!<session>!` prefixes cannot overlap.
 *
 *   e!<session>!<seq:12 hex>   entry (JSON)          h!<session>        head (JSON)
 *   p!<position:16 hex>        key of the entry      g!<principal>!<session>  grant (JSON)
 *   w!<session>                highest verified seq (rollback watermark)
 *
 * Group commit: appends that arrive while a batch is being made durable wait and share the next one,
 * so concurrent publishes on different chains pay one fsync between them.
 */
import { Level } from 'level';
import { storageFailure, throwIfAborted } from '../../../store/errors.js';
import type { Digest } from '../../../store/hash/digest.js';
import { ManifestError } from '../../errors.js';
import {
  parseEntryRecord,
  parseGrantRecord,
  parseHeadRecord,
  parsePositionRecord,
  parseWatermarkRecord,
} from './records.js';
import type {
  AppendOptions,
  AppendRequest,
  ChainHead,
  GrantRecord,
  GrantTable,
  LogEntry,
  ManifestLog,
} from '../log.js';

export type BatchOp = { type: 'put'; key: string; value: string } | { type: 'del'; key: string };

export interface LevelManifestLogOptions {
  /**
   * Writes one atomic batch durably. The default is LevelDB `batch(ops, { sync: true })`; the
   * fault-injection tests wrap it to make the commit fail.
   */
  writeBatch?: (db: Level<string, string>, ops: BatchOp[]) => Promise<void>;
}

const seqKey = (seq: number) => seq.toString(16).padStart(12, '0');
const posKey = (pos: number) => `p!${pos.toString(16).padStart(16, '0')}`;
const entryKey = (session: string, seq: number) => `e!${session}!${seqKey(seq)}`;

interface Pending {
  request: AppendRequest;
  owner: string;
  resolve: (entry: LogEntry) => void;
  reject: (err: unknown) => void;
}

function storageFailed(what: string, err: unknown): Error {
  return storageFailure(ManifestError, `manifest log: ${what}`, err);
}

export class LevelManifestLog implements ManifestLog {
  readonly grants: GrantTable;
  // This process owns the database, so caches of what it wrote are exact.
  private readonly watermarkCache = new Map<string, number>();
  private readonly headCache = new Map<string, ChainHead | null>();
  private readonly queue: Pending[] = [];
  private readonly pendingSessions = new Set<string>();
  private flushing = false;
  private nextPosition = 0;

  private constructor(
    private readonly db: Level<string, string>,
    private readonly writeBatch: (db: Level<string, string>, ops: BatchOp[]) => Promise<void>,
  ) {
    this.grants = new LevelGrantTable(db);
  }

  /**
   * Opens (creating if needed) the log at `path`.
   * @throws ManifestError `LOCKED` when another process has the store open; `STORAGE_FAILED` otherwise.
   */
  static async open(path: string, options: LevelManifestLogOptions = {}): Promise<LevelManifestLog> {
    const db = new Level<string, string>(path, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    try {
      await db.open();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      if (cause?.code === 'LEVEL_LOCKED') {
        throw new ManifestError(
          'LOCKED',
          `the store at ${path} is open in another process; close that process first, or use the PostgreSQL backend ` +
            '(openLedger({ postgres }) / --postgres URL) to share one store between processes',
          { cause: err },
        );
      }
      throw storageFailed('open', err);
    }
    const log = new LevelManifestLog(db, options.writeBatch ?? ((d, ops) => d.batch(ops, { sync: true })));
    for await (const key of db.keys({ gte: 'p!', lt: 'p!\xff', reverse: true, limit: 1 })) {
      log.nextPosition = parseInt(key.slice(2), 16) + 1;
    }
    return log;
  }

  async head(session: string): Promise<ChainHead | undefined> {
    const raw = await this.db.get(`h!${session}`);
    return raw === undefined ? undefined : parseHeadRecord(`h!${session}`, raw);
  }

  async entry(session: string, seq: number): Promise<LogEntry | undefined> {
    const key = entryKey(session, seq);
    const raw = await this.db.get(key);
    return raw === undefined ? undefined : parseEntryRecord(key, raw);
  }

  async *chain(session: string, options: { fromSeq?: number } = {}): AsyncIterable<LogEntry> {
    const it = this.db.iterator({ gte: entryKey(session, options.fromSeq ?? 0), lt: `e!${session}!\xff` });
    for await (const [key, raw] of it) yield parseEntryRecord(key, raw);
  }

  async *entries(options: { afterPosition?: number } = {}): AsyncIterable<LogEntry> {
    const gt = options.afterPosition === undefined ? 'p!' : posKey(options.afterPosition);
    let keys: string[] = [];
    const flush = async function* (db: Level<string, string>, ks: string[]) {
      const raws = await db.getMany(ks);
      for (let i = 0; i < ks.length; i++) if (raws[i] !== undefined) yield parseEntryRecord(ks[i]!, raws[i]!);
    };
    for await (const [key, entryRef] of this.db.iterator({ gt, lt: 'p!\xff' })) {
      keys.push(parsePositionRecord(key, entryRef));
      if (keys.length === 256) {
        yield* flush(this.db, keys);
        keys = [];
      }
    }
    yield* flush(this.db, keys);
  }

  async *heads(): AsyncIterable<ChainHead> {
    for await (const [key, raw] of this.db.iterator({ gte: 'h!', lt: 'h!\xff' })) yield parseHeadRecord(key, raw);
  }

  private async cachedHead(session: string): Promise<ChainHead | null> {
    let head = this.headCache.get(session);
    if (head === undefined) {
      head = (await this.head(session)) ?? null;
      this.headCache.set(session, head);
    }
    return head;
  }

  async append(request: AppendRequest, options: AppendOptions = {}): Promise<LogEntry> {
    throwIfAborted(options.signal, ManifestError);
    const head = await this.cachedHead(request.session);
    await this.getWatermark(request.session); // loads it, so the batch can keep the higher of the two
    const expectedSeq = head ? head.seq + 1 : 0;
    const expectedPrev: Digest | null = head ? head.id : null;
    if (this.pendingSessions.has(request.session) || request.seq !== expectedSeq || request.prev !== expectedPrev) {
      throw new ManifestError(
        'CHAIN_CONFLICT',
        `session ${request.session}: append at seq ${request.seq} does not extend the head (seq ${head?.seq ?? 'none'})`,
      );
    }
    this.pendingSessions.add(request.session);
    return new Promise<LogEntry>((resolve, reject) => {
      this.queue.push({ request, owner: head?.owner ?? request.principal, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0);
        const ops: BatchOp[] = [];
        const results: Array<{ entry: LogEntry; head: ChainHead }> = [];
        const marks: number[] = [];
        let position = this.nextPosition;
        for (const { request, owner } of batch) {
          const entry: LogEntry = {
            position: position++,
            session: request.session,
            seq: request.seq,
            id: request.id,
            principal: request.principal,
            envelope: request.envelope,
          };
          const head: ChainHead = { session: request.session, seq: request.seq, id: request.id, owner };
          const key = entryKey(request.session, request.seq);
          // Append step: entry + head + global position in one atomic, synced batch.
          ops.push({ type: 'put', key, value: JSON.stringify(entry) });
          ops.push({ type: 'put', key: `h!${request.session}`, value: JSON.stringify(head) });
          ops.push({ type: 'put', key: posKey(entry.position), value: key });
          // The rollback watermark rises with the head, in the same batch (ManifestLog.append contract).
          const mark = Math.max(this.watermarkCache.get(request.session) ?? -1, request.seq);
          ops.push({ type: 'put', key: `w!${request.session}`, value: String(mark) });
          marks.push(mark);
          results.push({ entry, head });
        }
        try {
          await this.writeBatch(this.db, ops);
        } catch (err) {
          for (const p of batch) {
            this.pendingSessions.delete(p.request.session);
            p.reject(storageFailed('durable batch write', err));
          }
          continue;
        }
        this.nextPosition = position;
        batch.forEach((p, i) => {
          this.headCache.set(p.request.session, results[i]!.head);
          this.watermarkCache.set(p.request.session, marks[i]!);
          this.pendingSessions.delete(p.request.session);
          p.resolve(results[i]!.entry);
        });
      }
    } finally {
      this.flushing = false;
    }
  }

  async getWatermark(session: string): Promise<number | undefined> {
    let mark = this.watermarkCache.get(session);
    if (mark === undefined) {
      const raw = await this.db.get(`w!${session}`);
      if (raw === undefined) return undefined;
      mark = parseWatermarkRecord(`w!${session}`, raw);
      this.watermarkCache.set(session, mark);
    }
    return mark;
  }

  async setWatermark(session: string, seq: number): Promise<void> {
    const current = await this.getWatermark(session);
    if (current === undefined || seq > current) {
      await this.db.put(`w!${session}`, String(seq));
      this.watermarkCache.set(session, seq);
    }
  }

  /** Recovery check on open: every head must point at a stored entry with the same id, and no entry may lie beyond it. */
  async checkHeads(): Promise<Array<{ session: string; problem: string }>> {
    const problems: Array<{ session: string; problem: string }> = [];
    // A corrupt record is reported here (and by fsck), never a reason to refuse opening: fsck needs the store open.
    const corrupt = (session: string, err: unknown) => {
      if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
      problems.push({ session, problem: err.message });
    };
    try {
      for await (const head of this.heads()) {
        try {
          const entry = await this.entry(head.session, head.seq);
          if (!entry || entry.id !== head.id)
            problems.push({ session: head.session, problem: `head seq ${head.seq} has no matching entry` });
          if (await this.entry(head.session, head.seq + 1))
            problems.push({ session: head.session, problem: `entries exist beyond head seq ${head.seq}` });
        } catch (err) {
          corrupt(head.session, err);
        }
      }
    } catch (err) {
      corrupt('(unknown)', err);
    }
    return problems;
  }

  /** Raw access for tests that tamper with stored records and for fsck. */
  get raw(): Level<string, string> {
    return this.db;
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}

/**
 * Grants are read twice per publish or resume. This process owns the database (LevelDB's lock), so a
 * write-through cache, absences included, is exact.
 */
class LevelGrantTable implements GrantTable {
  private readonly cache = new Map<string, GrantRecord | null>();

  constructor(private readonly db: Level<string, string>) {}

  async get(principal: string, session: string): Promise<GrantRecord | undefined> {
    const key = `g!${principal}!${session}`;
    let rec = this.cache.get(key);
    if (rec === undefined) {
      const raw = await this.db.get(key);
      rec = raw === undefined ? null : parseGrantRecord(key, raw);
      if (this.cache.size >= 100_000) this.cache.clear();
      this.cache.set(key, rec);
    }
    return rec ?? undefined;
  }

  async put(record: GrantRecord): Promise<void> {
    const key = `g!${record.principal}!${record.session}`;
    try {
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
    for await (const [key, raw] of this.db.iterator({ gte: prefix, lt: `${prefix}\xff` })) {
      const rec = parseGrantRecord(key, raw);
      if (filter.session === undefined || rec.session === filter.session) out.push(rec);
    }
    return out;
  }
}
