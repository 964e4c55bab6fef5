/**
 * A fault plan over the two seams the store already has: the blob store's `FsOps` and the LevelDB
 * log's `writeBatch`. It counts every call per operation and can make the Nth call of one operation
 * fail with a Node-style errno error — so a test can first count the calls a publish makes and then
 * fail each of them in turn. Nothing above the seams is replaced: the ledger, blob store and log under
 * test are the real ones.
 */
import { constants } from 'node:os';
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
          return real(...args);
        }
        this.inFlight++;
        try {
          if (this.ioDelayMs > 0) await new Promise((r) => setTimeout(r, this.ioDelayMs));
          return await real(...args);
        } finally {
          this.inFlight--;
        }
      };
    }
    this.fs = wrapped as unknown as FsOps;
    this.writeBatch = async (db, ops) => {
      this.hit('batch');
      await writeSyncedBatch(db, ops);
    };
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
