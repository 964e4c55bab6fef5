/**
 * Verifying one signed manifest, as a checklist of steps each with its own code (sigstore style).
 * Isomorphic: the ledger's resume, fsck and the offline auditor all call this.
 */
import type { Digest } from '../../store/hash/digest.js';
import { nobleVerifier, type SignatureVerifier } from './ed25519.js';
import { pae, parseEnvelope, type Envelope, type ParsedEnvelope } from './envelope.js';
import { ManifestError } from '../errors.js';
import { MANIFEST_PAYLOAD_TYPE, manifestId, manifestSchema, type Manifest } from '../format/manifest.js';
import { canonicalManifestText } from '../format/manifest-text.js';
import { readCanonicalManifest } from '../format/manifest-read.js';
import { findTrustedKey, type TrustStore } from '../format/trust.js';
import { describeZodError } from '../format/zod-issue.js';

export interface VerifiedManifest {
  id: Digest;
  manifest: Manifest;
  envelope: Envelope;
  /** The exact payload bytes that were verified. */
  payload: Uint8Array;
}

export interface VerifyManifestOptions {
  trust: TrustStore;
  /** Signature backend; defaults to the portable noble verifier. */
  verifier?: SignatureVerifier;
}

const decoder = new TextDecoder('utf-8', { fatal: true });
// The fast path keeps a byte order mark (so such a payload never matches) and maps invalid UTF-8 to U+FFFD.
const asciiDecoder = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * The manifest, when the payload is the canonical text of a schema-valid one (what every writer makes):
 * then JSON.parse, the schema and the canonical check would all pass and give this manifest
 * (manifests/format/manifest-read.ts). Such a payload is ASCII, so its text is exactly as long as its bytes.
 */
function readCanonicalPayload(payload: Uint8Array): Manifest | undefined {
  const text = asciiDecoder.decode(payload);
  return text.length === payload.length ? readCanonicalManifest(text) : undefined;
}

function verifyPayloadType(parsed: ParsedEnvelope): void {
  if (parsed.envelope.payloadType !== MANIFEST_PAYLOAD_TYPE) {
    throw new ManifestError(
      'PAYLOAD_TYPE',
      `payload type ${JSON.stringify(parsed.envelope.payloadType.slice(0, 100))} is not ${MANIFEST_PAYLOAD_TYPE}`,
    );
  }
}

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
  const { host, keyId, createdAt } = value as Record<string, unknown>;
  if (
    typeof host !== 'string' ||
    typeof keyId !== 'string' ||
    typeof createdAt !== 'string' ||
    Number.isNaN(Date.parse(createdAt))
  ) {
    throw new ManifestError('MANIFEST_INVALID', 'manifest lacks a host, keyId or createdAt');
  }
  return { value: value as Record<string, unknown>, text, host, keyId, createdAt };
}

function verifyKeyAndSignature(
  parsed: ParsedEnvelope,
  fields: { host: string; keyId: string; createdAt: string },
  options: VerifyManifestOptions,
): void {
  const lookup = findTrustedKey(options.trust, fields.host, fields.keyId, fields.createdAt);
  if (!lookup.ok) throw new ManifestError(lookup.code, lookup.message);
  const verifier = options.verifier ?? nobleVerifier;
  const message = parsed.message ?? pae(parsed.envelope.payloadType, parsed.payload);
  // DSSE lets a verifier filter signatures by their keyid hint (protocol.md): a signature whose keyid
  // names another key is skipped, one without a keyid is tried; any one that verifies under the trusted
  // key the manifest names suffices.
  const ok = parsed.signatures.some(
    (s) => (s.keyid === undefined || s.keyid === fields.keyId) && verifier.verify(s.sig, message, lookup.publicKey),
  );
  if (!ok) throw new ManifestError('SIGNATURE_INVALID', `no valid signature by ${fields.keyId} on this manifest`);
}

function verifySchema(value: unknown): Manifest {
  const result = manifestSchema.safeParse(value);
  if (!result.success) {
    throw new ManifestError('MANIFEST_INVALID', `manifest schema: ${describeZodError(result.error)}`);
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
  const parsed = parseEnvelope(input);
  verifyPayloadType(parsed);
  const canonical = readCanonicalPayload(parsed.payload);
  if (canonical !== undefined) {
    // Fast path: schema and canonical form hold already, so only the key and the signature remain to check,
    // on the same host, keyId and createdAt the slow path reads.
    verifyKeyAndSignature(parsed, canonical, options);
    return { id: manifestId(parsed.payload), manifest: canonical, envelope: parsed.envelope, payload: parsed.payload };
  }
  const fields = readSignedFields(parsed.payload);
  verifyKeyAndSignature(parsed, fields, options);
  const manifest = verifySchema(fields.value);
  verifyCanonical(parsed.payload, fields.text, manifest);
  return { id: manifestId(parsed.payload), manifest, envelope: parsed.envelope, payload: parsed.payload };
}
