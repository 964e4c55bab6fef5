/**
 * The tree's leaves: leaf i is the exact signed payload bytes of the manifest at global position i (what
 * the DSSE signature covers, and what the manifest id hashes), taken from the envelope exactly as stored. The
 * payload is decoded as the signature check decodes it (`decodeBase64Either`: padded base64 in either DSSE alphabet),
 * so a line that verifies has its leaf. Isomorphic.
 */
import { decodeBase64Either } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';

/** @throws ManifestError `ENVELOPE_INVALID` when the text has no canonical base64 `payload` (either alphabet) */
export function leafOfEnvelope(envelope: string): Uint8Array {
  let payload: unknown;
  try {
    payload = (JSON.parse(envelope) as { payload?: unknown } | null)?.payload;
  } catch (err) {
    throw new ManifestError('ENVELOPE_INVALID', 'the envelope is not JSON', { cause: err });
  }
  const bytes = typeof payload === 'string' ? decodeBase64Either(payload) : undefined;
  if (!bytes) throw new ManifestError('ENVELOPE_INVALID', 'the envelope has no canonical base64 payload');
  return bytes;
}
