/**
 * Errors of the manifest layer (formats, signatures, trust, the manifest logs).
 */
import { HandoffLedgerError } from '../store/errors.js';

export type ManifestErrorCode =
  | 'INVALID_ID'
  | 'INVALID_ARGUMENT'
  | 'ENVELOPE_INVALID'
  | 'PAYLOAD_TYPE'
  | 'MANIFEST_INVALID'
  | 'SIGNATURE_INVALID'
  | 'KEY_UNTRUSTED'
  | 'KEY_EXPIRED'
  | 'KEY_REVOKED'
  | 'KEY_INVALID'
  | 'TRUST_INVALID'
  | 'CHAIN_CONFLICT'
  | 'REVOKED'
  | 'LOCKED'
  | 'RECORD_CORRUPT'
  | 'STORAGE_FAILED'
  | 'CANCELLED'
  | 'NOTE_MALFORMED'
  | 'NOTE_UNVERIFIED'
  | 'NOTE_SIGNATURE_INVALID'
  | 'CHECKPOINT_INVALID'
  | 'TREE_DAMAGED';

export class ManifestError extends HandoffLedgerError<ManifestErrorCode> {
  override readonly name = 'ManifestError';
}
