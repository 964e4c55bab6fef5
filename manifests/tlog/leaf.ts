/**
 * The tree's leaves: leaf i is the exact signed payload bytes of the manifest at global position i (what
 * the DSSE signature covers, and what the manifest id hashes), taken from the envelope exactly as stored. The
 * payload is decoded as the signature check decodes it (`decodeBase64Either`: padded base64 in either DSSE alphabet),
 * so a line that verifies has its leaf. Isomorphic.
 */
import { decodeBase64Either } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';

/** JSON's whitespace, then `{`: a text that can parse to an object, the only kind with a payload. */
const OBJECT_START = /^[ \t\n\r]*\{/;

/**
 * `leafOfEnvelope` for a line of a hostile bundle, as the auditor takes every line's leaf: `undefined` for a text with
 * no canonical base64 payload, built without an error where none is needed. A text that cannot parse to an object
 * (an empty line, `x`) is not parsed at all, and no error is made for one without a payload: a bundle of a million
 * such lines costs the tree no more than it costs the line checks, checkpoint or none.
 */
export function leafOfLine(text: string): Uint8Array | undefined {
  if (!OBJECT_START.test(text)) return undefined;
  let payload: unknown;
  try {
    payload = (JSON.parse(text) as { payload?: unknown } | null)?.payload;
  } catch {
    return undefined;
  }
  return typeof payload === 'string' ? decodeBase64Either(payload) : undefined;
}

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
