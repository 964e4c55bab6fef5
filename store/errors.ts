/**
 * Errors of the blob-store layer. The `code` is the contract; messages are for people.
 */
export type StoreErrorCode =
  | 'INVALID_DIGEST'
  | 'BLOB_NOT_FOUND'
  | 'BLOB_INTEGRITY'
  | 'BLOB_TOO_LARGE'
  | 'UNSAFE_ROOT'
  | 'UNSAFE_PATH'
  | 'STORAGE_FAILED'
  | 'CANCELLED';

export class StoreError extends Error {
  override readonly name = 'StoreError';
  readonly code: StoreErrorCode;
  constructor(code: StoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** Throws `CANCELLED` if the signal is aborted; used at every await point of a write. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new StoreError('CANCELLED', 'operation cancelled', { cause: signal.reason });
  }
}
