/**
 * Errors of the ledger layer. Errors from the layers below (`StoreError`, `ManifestError`, `AuditError`) pass
 * through with their own codes; all extend `HandoffLedgerError`, which `isHandoffLedgerError` recognizes.
 */
import {
  HandoffLedgerError,
  isHandoffLedgerError as isAnyLayerError,
  OPERATION_CANCELLED,
  refuseNonSignal,
  throwIfAborted,
  type StoreError,
  type StoreErrorCode,
} from '../store/errors.js';
import { onAbort } from '../store/abort.js';
import type { ManifestError, ManifestErrorCode } from '../manifests/errors.js';
import type { AuditError, AuditErrorCode } from '../manifests/audit/errors.js';

export { HandoffLedgerError } from '../store/errors.js';

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
  | 'FORK'
  | 'NOT_FOUND'
  | 'UNAUTHORIZED'
  | 'REVOKED'
  | 'KEY_FILE_UNSAFE'
  | 'KEY_INVALID'
  | 'SIGNER_FAILED'
  | 'CANCELLED'
  | 'CLOSED'
  | 'MODEL_FAILED'
  | 'MODEL_REFUSED'
  | 'LOCKED'
  | 'RECORD_CORRUPT'
  | 'FORMAT_UNSUPPORTED'
  | 'WITNESS_KEY_MISMATCH';

/** Both sides of a detected rollback or fork: the checkpoint this ledger had pinned and the log's current one. */
export interface CheckpointEvidence {
  /** The signed note this ledger had pinned (signed or verified before). */
  pinned: string;
  /** The log's current tree as a checkpoint body (unsigned: this ledger never signs a tree it refused). */
  current: string;
  /** Why the two cannot both be true. */
  reason: string;
}

export class LedgerError extends HandoffLedgerError<LedgerErrorCode> {
  override readonly name = 'LedgerError';
  /** Present on `ROLLBACK` / `FORK` detected by checkpoints. */
  readonly evidence?: CheckpointEvidence | undefined;
  constructor(
    code: LedgerErrorCode,
    message: string,
    options?: { cause?: unknown; evidence?: CheckpointEvidence | undefined },
  ) {
    super(code, message, options);
    if (options?.evidence) this.evidence = options.evidence;
  }
}

/** Every code an error of the library carries: the four layers' codes (README, Error codes). */
export type HandoffLedgerErrorCode = LedgerErrorCode | StoreErrorCode | ManifestErrorCode | AuditErrorCode;

/**
 * Whether `err` is an error of this library (`instanceof HandoffLedgerError`), typed as what it then is: one of the
 * four layers' classes, so `err.code` is their codes' union and a misspelt code (`'CHAIN_CONFLICTS'`) does not
 * compile. (`handoff-ledger/store`'s, of the lowest layer, knows only the base and gives `code` as a string.)
 */
export function isHandoffLedgerError(err: unknown): err is LedgerError | StoreError | ManifestError | AuditError {
  return isAnyLayerError(err);
}

/**
 * `throwIfAborted` of the ledger layer: a cancelled ledger operation is a `LedgerError` `CANCELLED`. A `signal` that is
 * not an AbortSignal is `INVALID_ARGUMENT` (`checkSignal`): the stores it would reach refuse it, and the wait that
 * listens to one without `addEventListener` would fail later with a plain TypeError.
 */
export function throwIfCancelled(signal: AbortSignal | undefined): void {
  checkSignal(signal);
  throwIfAborted(signal, LedgerError);
}

/**
 * `p`, or `CANCELLED` as soon as `signal` aborts, whichever comes first: for the reads a publish makes before its
 * append (the head, authorization, the checkpoint check), which a busy PostgreSQL pool can hold until a connection
 * frees. What `p` does goes on and is dropped; it must be a read, or safe to finish unobserved.
 */
export function untilCancelled<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  const cancelled = () => new LedgerError('CANCELLED', OPERATION_CANCELLED, { cause: signal.reason });
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(cancelled());
  }
  return new Promise<T>((resolve, reject) => {
    const unsubscribe = onAbort(signal, () => {
      p.catch(() => {});
      reject(cancelled());
    });
    p.then(
      (value) => {
        unsubscribe();
        resolve(value);
      },
      (err: unknown) => {
        unsubscribe();
        reject(err);
      },
    );
  });
}

/**
 * @throws LedgerError `INVALID_ARGUMENT` unless `signal` is undefined or an AbortSignal: the stores' and logs' test
 *   (`refuseNonSignal`), so an object shaped like one (`aborted`, `addEventListener`) is refused here, before the
 *   operation starts, rather than by a store halfway through it
 */
export function checkSignal(signal: unknown): void {
  refuseNonSignal(signal, LedgerError);
}
