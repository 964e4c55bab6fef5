/**
 * The parts of the v1 manifest format (./manifest.ts) that need no schema library: its payload and summary media
 * types, the forms of its keyId and time, and its id. The verifiers' fast path (manifests/crypto/verify-canonical.ts)
 * and the auditor's worker threads load this, not zod. Isomorphic.
 */
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { checkBytesArgument } from '../../store/errors.js';
import { ManifestError } from '../errors.js';

export const MANIFEST_PAYLOAD_TYPE = 'application/vnd.handoff-ledger.manifest.v1+json';
export const SUMMARY_MEDIA_TYPE = 'application/vnd.handoff-ledger.summary.v1+json';

/** A manifest's keyId: 1–256 printable ASCII characters (no space). */
export const KEY_ID_PATTERN = /^[\x21-\x7e]{1,256}$/;

const TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A manifest's time: ISO-8601 UTC with milliseconds, a real date (`Date` writes it back unchanged). */
export function isManifestTimestamp(value: unknown): value is string {
  if (typeof value !== 'string' || !TIMESTAMP_PATTERN.test(value)) return false;
  // The pattern admits month 13 or minute 60, which do not parse: `toISOString` of such a Date throws.
  const ms = Date.parse(value);
  return !Number.isNaN(ms) && new Date(ms).toISOString() === value;
}

/**
 * Manifest id: BLAKE3 of the exact payload bytes. Chains link by this id, never by signature bytes.
 * @throws ManifestError `INVALID_ARGUMENT` for a payload that is no Uint8Array
 */
export function manifestId(payload: Uint8Array): Digest {
  checkBytesArgument(payload, 'manifestId: the payload', ManifestError);
  return digestOf(payload);
}
