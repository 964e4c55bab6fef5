/**
 * A fault plan over the two seams the store already has: the blob store's `FsOps` and the LevelDB
 * log's `writeBatch`. It counts every call per operation and can make the Nth call of one operation
 * fail with a Node-style errno error — so a test can first count the calls a publish makes and then
 * fail each of them in turn. Nothing above the seams is replaced: the ledger, blob store and log under
 * test are the real ones.
 *
 * It also keeps a model of what a power cut would keep (`DurabilityModel`), from the calls that went through the
 * seam and succeeded: a kill of the process keeps the page cache, so only this model sees a missing or misordered
 * fsync. Each `link` of a file whose data is not yet durable, and each commit (`batch`) while a path in
 * `mustBeDurable` is not durable (data and every directory entry down to it), is recorded in `violations`.
 */
import { constants } from 'node:os';
import { constants as fsConstants, existsSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { FileHandle } from 'node:fs/promises';
import type { Level } from 'level';
import { nodeFsOps, type FsOps } from '../../store/fs/ops.js';
import type { BatchOp } from '../../manifests/log/level/log.js';
import { writeSyncedBatch } from '../../manifests/log/level/tables.js';

export type Errno = 'EIO' | 'ENOSPC' | 'EACCES' | 'EROFS';
export const ERRNOS: readonly Errno[] = ['EIO', 'ENOSPC', 'EACCES', 'EROFS'];

/** Every FsOps method plus `batch`, the LevelDB commit. */
export type FaultOp = keyof FsOps | 'batch';

/** An error shaped like the ones node:fs rejects with (`code`, negative `errno`, `syscall`). */
export function errnoError(code: Errno, syscall: string): NodeJS.ErrnoException {
  const errno = constants.errno[code];
  return Object.assign(new Error(`${code}: injected fault, ${syscall}`), { code, errno: -errno, syscall });
}

/** One file's data as the model sees it: writes begun, and writes done since the last fsync that covered them. */
interface ModelFile {
  inFlight: Set<number>;
  unsynced: Set<number>;
}

/**
 * What a power cut would keep of the files and directory entries made through the seam: a file's data is durable once
 * an fsync that began after its last write ended has succeeded; a directory entry (made by `mkdir`, `link`, `rename`,
 * `unlink`, `open` with `O_CREAT`) once an fsync of its directory that began after it has succeeded. What the model
 * never saw made (files and directories made before, or without the seam) counts as durable.
 */
export class DurabilityModel {
  private readonly files = new Map<string, ModelFile>(); // by path (a link adds a name for the same file)
  private readonly handles = new Map<FileHandle, ModelFile>();
  /** Per directory, its entries changed and not yet covered by an fsync of it, each with the change's number. */
  private readonly pending = new Map<string, Map<string, number>>();
  private changes = 0;
  private writes = 0;

  private touch(path: string): void {
    const dir = dirname(path);
    let entries = this.pending.get(dir);
    if (!entries) this.pending.set(dir, (entries = new Map()));
    entries.set(basename(path), ++this.changes);
  }

  opened(path: string, flags: number, handle: FileHandle): void {
    if ((flags & fsConstants.O_CREAT) !== 0) {
      const file: ModelFile = { inFlight: new Set(), unsynced: new Set() };
      this.files.set(path, file);
      this.touch(path);
    }
    const file = this.files.get(path);
    if (file) this.handles.set(handle, file);
  }

  /** A write begins; the function returned ends it (done or failed: either way its bytes may be partly there). */
  write(handle: FileHandle): () => void {
    const file = this.handles.get(handle);
    const id = ++this.writes;
    file?.inFlight.add(id);
    return () => {
      file?.inFlight.delete(id);
      file?.unsynced.add(id);
    };
  }

  /** An fsync begins; the function returned records its success (it covers the writes ended before it began). */
  fsync(handle: FileHandle): () => void {
    const file = this.handles.get(handle);
    const covered = [...(file?.unsynced ?? [])];
    return () => covered.forEach((id) => file?.unsynced.delete(id));
  }

  /** A directory fsync begins; the function returned records its success. */
  fsyncDir(dir: string): () => void {
    const upTo = this.changes;
    return () => {
      const entries = this.pending.get(dir);
      for (const [name, change] of entries ?? []) if (change <= upTo) entries!.delete(name);
    };
  }

  made(path: string): void {
    this.touch(path);
  }

  linked(from: string, to: string): void {
    const file = this.files.get(from);
    if (file) this.files.set(to, file);
    else this.files.delete(to);
    this.touch(to);
  }

  renamed(from: string, to: string): void {
    this.linked(from, to);
    this.unlinked(from);
  }

  unlinked(path: string): void {
    this.files.delete(path);
    this.touch(path);
  }

  /** Why a power cut now might lose the data at `path` (none: it would survive). */
  dataProblem(path: string): string | undefined {
    const file = this.files.get(path);
    if (!file) return undefined;
    if (file.inFlight.size > 0) return `${path}: a write to it is still in flight`;
    if (file.unsynced.size > 0) return `${path}: its data was never fsynced`;
    return undefined;
  }

  /** Why a power cut now might lose `path` (its data, or an entry of a directory on the way to it). */
  problem(path: string): string | undefined {
    const data = this.dataProblem(path);
    if (data) return data;
    for (let p = path; dirname(p) !== p; p = dirname(p)) {
      if (this.pending.get(dirname(p))?.has(basename(p)))
        return `${path}: its entry ${basename(p)} in ${dirname(p)} was never fsynced`;
    }
    return undefined;
  }
}

export class FaultPlan {
  /** Calls per operation since the last `resetCounts`. */
  calls: Partial<Record<FaultOp, number>> = {};
  /** Each call since the last `resetCounts`, in order, with its path argument when it has one. */
  trace: Array<{ op: FaultOp; path?: string }> = [];
  /** Faults actually thrown, per operation. */
  readonly injected: Partial<Record<FaultOp, number>> = {};
  /** Writes and fsyncs started and not yet settled. */
  inFlight = 0;
  /** Each write and fsync waits this long first (a slow disk: what is in flight stays in flight a while). */
  ioDelayMs = 0;
  /** Calls of `close`, `unlink`, `rename` or `link` made while a write or fsync was still in flight (none may be). */
  raced: string[] = [];
  /** What a power cut would keep, from the calls made through the seam. */
  readonly model = new DurabilityModel();
  /** Paths that must be durable whenever the log commits a batch (the blob the manifest names). */
  mustBeDurable: string[] = [];
  /** Each durability order broken: a name linked to data not durable, a commit before its blob is durable. */
  violations: string[] = [];
  private fault: { op: FaultOp; nth: number; code: Errno; seen: number; fired: boolean } | undefined;
  private lastFault: { fired: boolean } | undefined;

  readonly fs: FsOps;
  readonly writeBatch: (db: Level<string, string>, ops: BatchOp[]) => Promise<void>;

  constructor(base: FsOps = nodeFsOps) {
    const wrapped: Record<string, unknown> = {};
    for (const op of Object.keys(base) as Array<keyof FsOps>) {
      const real = base[op] as (...args: unknown[]) => Promise<unknown>;
      const io = op === 'write' || op === 'fsync';
      wrapped[op] = async (...args: unknown[]) => {
        this.hit(op, typeof args[0] === 'string' ? args[0] : undefined);
        if (!io) {
          if (this.inFlight > 0 && ['close', 'unlink', 'rename', 'link'].includes(op)) this.raced.push(op);
          if (op === 'link') {
            const problem = this.model.dataProblem(args[0] as string);
            if (problem) this.violations.push(`link to ${String(args[1])} before its data is durable: ${problem}`);
          }
          const synced = op === 'fsyncDir' ? this.model.fsyncDir(args[0] as string) : undefined;
          const result = await real(...args);
          this.modelled(op, args, result);
          synced?.();
          return result;
        }
        this.inFlight++;
        const handle = args[0] as FileHandle;
        const ended = op === 'write' ? this.model.write(handle) : undefined;
        const synced = op === 'fsync' ? this.model.fsync(handle) : undefined;
        try {
          if (this.ioDelayMs > 0) await new Promise((r) => setTimeout(r, this.ioDelayMs));
          const result = await real(...args);
          synced?.();
          return result;
        } finally {
          ended?.();
          this.inFlight--;
        }
      };
    }
    this.fs = wrapped as unknown as FsOps;
    this.writeBatch = async (db, ops) => {
      this.hit('batch');
      for (const path of this.mustBeDurable) {
        const problem = existsSync(path) ? this.model.problem(path) : `${path} is not there`;
        if (problem) this.violations.push(`commit before its blob is durable: ${problem}`);
      }
      await writeSyncedBatch(db, ops);
    };
  }

  /** What a call that succeeded changed, for the model. */
  private modelled(op: keyof FsOps, args: unknown[], result: unknown): void {
    const [a, b] = args as [string, string];
    if (op === 'open') this.model.opened(a, args[1] as number, result as FileHandle);
    else if (op === 'mkdir') this.model.made(a);
    else if (op === 'link') this.model.linked(a, b);
    else if (op === 'rename') this.model.renamed(a, b);
    else if (op === 'unlink') this.model.unlinked(a);
  }

  private hit(op: FaultOp, path?: string): void {
    this.calls[op] = (this.calls[op] ?? 0) + 1;
    this.trace.push(path === undefined ? { op } : { op, path });
    const f = this.fault;
    if (f && !f.fired && f.op === op && ++f.seen === f.nth) {
      f.fired = true;
      this.injected[op] = (this.injected[op] ?? 0) + 1;
      throw errnoError(f.code, op);
    }
  }

  resetCounts(): void {
    this.calls = {};
    this.trace = [];
  }

  /** Makes the `nth` call (1-based, counted from now) of `op` fail with `code`. */
  arm(op: FaultOp, nth: number, code: Errno): void {
    this.fault = { op, nth, code, seen: 0, fired: false };
    this.lastFault = this.fault;
  }

  /** True when the fault armed last has been thrown (still readable after `disarm`). */
  get fired(): boolean {
    return this.lastFault?.fired ?? false;
  }

  disarm(): void {
    this.fault = undefined;
  }
}
