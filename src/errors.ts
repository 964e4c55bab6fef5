/**
 * Errors of the ledger layer. Errors from the layers below (`StoreError`, `ManifestError`, `AuditError`) pass
 * through with their own codes; all extend `HandoffLedgerError`, which `isHandoffLedgerError` recognizes.
 */
import { HandoffLedgerError, throwIfAborted } from '../store/errors.js';

export { HandoffLedgerError, isHandoffLedgerError } from '../store/errors.js';

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
  | 'KEY_FILE_UNSAFE'
  | 'KEY_INVALID'
  | 'CANCELLED'
  | 'CLOSED'
  | 'MODEL_FAILED'
  | 'MODEL_REFUSED';

export class LedgerError extends HandoffLedgerError<LedgerErrorCode> {
  override readonly name = 'LedgerError';
}

/** `throwIfAborted` of the ledger layer: a cancelled ledger operation is a `LedgerError` `CANCELLED`. */
export function throwIfCancelled(signal: AbortSignal | undefined): void {
  throwIfAborted(signal, LedgerError);
}
