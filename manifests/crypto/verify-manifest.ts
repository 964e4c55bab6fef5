/**
 * Verifying one signed manifest, as a checklist of steps each with its own code (sigstore style).
 * Isomorphic: the ledger's resume, fsck and the offline auditor all call this.
 */
import { nobleVerifier } from './ed25519.js';
import { parseEnvelope } from './envelope.js';
import { ManifestError } from '../errors.js';
import { readOptionFields, type NamesEveryField } from '../../store/errors.js';
import { manifestId, manifestSchema, type Manifest } from '../format/manifest.js';
import { canonicalManifestText } from '../format/manifest-text.js';
import { isManifestTimestamp, KEY_ID_PATTERN } from '../format/manifest-core.js';
import { isValidId } from '../format/id-pattern.js';
import { describeZodError } from '../format/zod-issue.js';
import {
  verifyCanonicalEnvelope,
  verifyKeyAndSignature,
  type VerifiedManifest,
  type VerifyManifestOptions,
} from './verify-canonical.js';

export type { VerifiedManifest, VerifyManifestOptions } from './verify-canonical.js';

const decoder = new TextDecoder('utf-8', { fatal: true });
/** The fields the key lookup needs, read before the signature is checked; everything else waits. */
function readSignedFields(payload: Uint8Array): {
  value: Record<string, unknown>;
  text: string;
  host: string;
  keyId: string;
  createdAt: string;
} {
  let value: unknown;
  let text: string;
  try {
    text = decoder.decode(payload);
    value = JSON.parse(text);
  } catch (err) {
    throw new ManifestError('MANIFEST_INVALID', 'manifest payload is not UTF-8 JSON', { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ManifestError('MANIFEST_INVALID', 'manifest payload is not a JSON object');
  }
  // Checked as the schema checks them before the key lookup, which names them in its findings: what an auditor reads
  // there is an id, a keyId and a UTC time, never bundle text of any length or a time read in the auditor's zone.
  const { host, keyId, createdAt } = value as Record<string, unknown>;
  if (!isValidId(host)) throw new ManifestError('MANIFEST_INVALID', 'manifest schema: host: missing or not an id');
  if (typeof keyId !== 'string' || !KEY_ID_PATTERN.test(keyId))
    throw new ManifestError(
      'MANIFEST_INVALID',
      'manifest schema: keyId: missing or not 1-256 printable ASCII characters',
    );
  if (!isManifestTimestamp(createdAt))
    throw new ManifestError(
      'MANIFEST_INVALID',
      'manifest schema: createdAt: missing or not an ISO-8601 UTC time with milliseconds',
    );
  return { value: value as Record<string, unknown>, text, host, keyId, createdAt };
}

function verifySchema(value: unknown): Manifest {
  const result = manifestSchema.safeParse(value);
  if (!result.success) {
    throw new ManifestError(
      'MANIFEST_INVALID',
      `manifest schema: ${describeZodError(result.error, { escaped: true, schema: manifestSchema })}`,
    );
  }
  return result.data as Manifest;
}

/**
 * The payload must be the canonical (RFC 8785) encoding of the manifest it carries, as every writer makes
 * it: one byte string per manifest, so no JSON parser can read a signed manifest differently from this
 * one (duplicate keys, escapes, number forms, whitespace). Compared as text: `text` is the payload's
 * UTF-8 decoding, which differs from the bytes only by a byte order mark it drops, and the length check
 * catches that (a schema-valid manifest is ASCII, so its text is as long as its bytes; anything else is
 * refused, never accepted).
 */
function verifyCanonical(payload: Uint8Array, text: string, manifest: Manifest): void {
  const canonical = canonicalManifestText(manifest);
  if (canonical.length !== payload.length || canonical !== text) {
    throw new ManifestError(
      'MANIFEST_INVALID',
      'manifest payload is not the canonical (RFC 8785) encoding of its manifest',
    );
  }
}

/**
 * Verifies one envelope: strict parse → payload type → trusted key for host and time → signature →
 * manifest schema and canonical form. Returns the manifest and its id.
 * @throws ManifestError `ENVELOPE_INVALID`, `PAYLOAD_TYPE`, `MANIFEST_INVALID`, `KEY_UNTRUSTED`,
 *   `KEY_EXPIRED`, `KEY_REVOKED`, `SIGNATURE_INVALID`
 */
export function verifyManifestEnvelope(input: string | unknown, options: VerifyManifestOptions): VerifiedManifest {
  return verifyEnvelopeWith(input, readVerifyOptions(options));
}

/** Every field of VerifyManifestOptions: `verifyManifestEnvelope` reads these once and refuses any other name. */
const VERIFY_FIELDS = ['trust', 'verifier'] as const satisfies ReadonlyArray<keyof VerifyManifestOptions>;
const everyVerifyField: NamesEveryField<VerifyManifestOptions, typeof VERIFY_FIELDS> = true;
void everyVerifyField;

/**
 * A caller's options of `verifyManifestEnvelope`, each field read once: a name it does not know (`Trust`, `verifer`:
 * the default backend used in its place), a field that throws as it is read, or no `trust` object is
 * `INVALID_ARGUMENT`, before the envelope is looked at.
 * @throws ManifestError `INVALID_ARGUMENT`
 */
function readVerifyOptions(given: unknown): VerifyManifestOptions {
  const options = readOptionFields(given, VERIFY_FIELDS, 'verifyManifestEnvelope options', ManifestError);
  if (typeof options.trust !== 'object' || options.trust === null)
    throw new ManifestError('INVALID_ARGUMENT', 'verifyManifestEnvelope needs options naming a trust store: { trust }');
  return options as VerifyManifestOptions;
}

/**
 * `verifyManifestEnvelope` with options this library made (the chain checker's and the line verifier's, which carry
 * more fields, per manifest): not read again.
 * @internal
 */
export function verifyEnvelopeWith(input: string | unknown, options: VerifyManifestOptions): VerifiedManifest {
  const parsed = parseEnvelope(input);
  const verifier = options.verifier ?? nobleVerifier;
  // Fast path (payload type first): for a canonical payload schema and canonical form hold already, so only the key
  // and the signature remain to check, on the same host, keyId and createdAt the slow path reads.
  const fast = verifyCanonicalEnvelope(parsed, options.trust, verifier);
  if (fast !== undefined) return fast;
  const fields = readSignedFields(parsed.payload);
  verifyKeyAndSignature(parsed, fields, options.trust, verifier);
  const manifest = verifySchema(fields.value);
  verifyCanonical(parsed.payload, fields.text, manifest);
  return { id: manifestId(parsed.payload), manifest, envelope: parsed.envelope, payload: parsed.payload };
}
