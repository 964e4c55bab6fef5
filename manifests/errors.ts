/**
 * Errors of the manifest layer. The `code` is the contract; messages are for people.
 */
export type ManifestErrorCode =
  | 'INVALID_ID'
  | 'ENVELOPE_INVALID'
  | 'PAYLOAD_TYPE'
  | 'MANIFEST_INVALID'
  | 'SIGNATURE_INVALID'
  | 'KEY_UNTRUSTED'
  | 'KEY_EXPIRED'
  | 'KEY_REVOKED'
  | 'KEY_INVALID'
  | 'TRUST_INVALID'
  | 'CHAIN_BROKEN'
  | 'CHAIN_CONFLICT'
  | 'LOCKED'
  | 'STORAGE_FAILED';

export class ManifestError extends Error {
  override readonly name = 'ManifestError';
  readonly code: ManifestErrorCode;
  constructor(code: ManifestErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
