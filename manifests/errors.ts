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
  | 'ROLLBACK'
  | 'REVOKED'
  | 'LOCKED'
  | 'RECORD_CORRUPT'
  | 'FORMAT_UNSUPPORTED'
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

/**
 * An append refused because the chain it would extend was cut back: its head is below the session's watermark (a
 * seq already verified or published), or entries lie beyond its head. Appending there would sign a second manifest
 * for a seq that exists (and overwrite it, or lose the race to it), so no append is made; fsck says what is wrong.
 */
/**
 * A stored tree or index record that cannot be read (`TREE_DAMAGED`: missing or not the hash of its children;
 * `RECORD_CORRUPT`: malformed): damage for fsck to name, not a failure of the reader.
 */
export function isTreeDamage(err: unknown): err is ManifestError & { code: 'TREE_DAMAGED' | 'RECORD_CORRUPT' } {
  return err instanceof ManifestError && (err.code === 'TREE_DAMAGED' || err.code === 'RECORD_CORRUPT');
}

export function rollbackRefused(session: string, problem: string): ManifestError {
  return new ManifestError(
    'ROLLBACK',
    `session ${session}: ${problem}; the chain was cut back and nothing is appended to it (run fsck)`,
  );
}
