/** trust.json's lock across the processes sharing a store root (src/ledger/file-lock.ts). */
import { withFileLock, type FileLockOptions } from '../ledger/file-lock.js';

export type TrustLockOptions = FileLockOptions;

/**
 * Runs `fn` holding the lock of `trustPath` (`<trustPath>.lock`).
 * @throws LedgerError `LOCKED` when another live process holds it for longer than `waitMs`
 */
export function withTrustLock<T>(trustPath: string, fn: () => Promise<T>, options: TrustLockOptions = {}): Promise<T> {
  return withFileLock(trustPath, 'trust.json', fn, options);
}
