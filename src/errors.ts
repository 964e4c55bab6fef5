/**
 * Errors of the ledger layer. The `code` is the contract (semver applies to codes, not messages).
 * Errors from the layers below (`StoreError`, `ManifestError`) pass through with their own codes;
 * every class has `code` and `cause`, and `isHandoffLedgerError` recognizes all three.
 */
import { StoreError } from '../store/errors.js';
import { ManifestError } from '../manifests/errors.js';

export type LedgerErrorCode =
  | 'INVALID_ID'
  | 'INVALID_ARGUMENT'
  | 'SUMMARY_EMPTY'
  | 'SUMMARY_TOO_LARGE'
  | 'SUMMARY_INVALID'
  | 'SUMMARY_INCOMPLETE'
  | 'SCOPE_MISMATCH'
  | 'CHAIN_BROKEN'
  | 'CHAIN_CONFLICT'
  | 'ROLLBACK'
  | 'UNAUTHORIZED'
  | 'REVOKED'
  | 'LOCKED'
  | 'KEY_FILE_UNSAFE'
  | 'KEY_INVALID'
  | 'STORAGE_FAILED'
  | 'CANCELLED'
  | 'CLOSED'
  | 'MODEL_FAILED';

export class LedgerError extends Error {
  override readonly name = 'LedgerError';
  readonly code: LedgerErrorCode;
  constructor(code: LedgerErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export type HandoffLedgerError = LedgerError | StoreError | ManifestError;

export function isHandoffLedgerError(err: unknown): err is HandoffLedgerError {
  return err instanceof LedgerError || err instanceof StoreError || err instanceof ManifestError;
}

export function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new LedgerError('CANCELLED', 'operation cancelled', { cause: signal.reason });
}
