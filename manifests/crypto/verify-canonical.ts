/**
 * The verifiers' fast path for one envelope (./verify-manifest.ts runs it first): payload type, then, for a payload
 * that is the canonical text of a schema-valid manifest (what every writer makes), the trusted key and the
 * signature. Without zod: the auditor's worker threads verify an honest bundle with this alone. Isomorphic.
 */
import type { Digest } from '../../store/hash/digest.js';
import type { SignatureVerifier } from './ed25519.js';
import { pae, type Envelope, type ParsedEnvelope } from './envelope.js';
import { ManifestError } from '../errors.js';
import { shownValue } from '../../store/errors.js';
import { MANIFEST_PAYLOAD_TYPE, manifestId } from '../format/manifest-core.js';
import type { Manifest } from '../format/manifest.js';
import { readCanonicalManifest } from '../format/manifest-read.js';
import { findTrustedKey } from '../format/trust-lookup.js';
import type { TrustStore } from '../format/trust.js';

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
  verifier?: SignatureVerifier | undefined;
}

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
      `payload type ${shownValue(parsed.envelope.payloadType, 100)} is not ${MANIFEST_PAYLOAD_TYPE}`,
    );
  }
}

/**
 * The trusted key for the manifest's host, keyId and time, then a strict signature by it over PAE(type, payload).
 * @throws ManifestError `KEY_UNTRUSTED`, `KEY_EXPIRED`, `KEY_REVOKED`, `SIGNATURE_INVALID`
 */
export function verifyKeyAndSignature(
  parsed: ParsedEnvelope,
  fields: { host: string; keyId: string; createdAt: string },
  trust: TrustStore,
  verifier: SignatureVerifier,
): void {
  const lookup = findTrustedKey(trust, fields.host, fields.keyId, fields.createdAt);
  if (!lookup.ok) throw new ManifestError(lookup.code, lookup.message);
  const message = parsed.message ?? pae(parsed.envelope.payloadType, parsed.payload);
  // DSSE lets a verifier filter signatures by their keyid hint (protocol.md): a signature whose keyid
  // names another key is skipped, one without a keyid (or with an empty one: parseEnvelope reads it as none) is
  // tried; any one that verifies under the trusted key the manifest names suffices.
  const ok = parsed.signatures.some(
    (s) => (s.keyid === undefined || s.keyid === fields.keyId) && verifier.verify(s.sig, message, lookup.publicKey),
  );
  if (!ok) throw new ManifestError('SIGNATURE_INVALID', `no valid signature by ${fields.keyId} on this manifest`);
}

/**
 * Steps 2-5 for an envelope whose payload is in canonical form: payload type, trusted key for host and time, strict
 * signature; schema and canonical form hold already. `undefined` when the payload is not the canonical text of a
 * schema-valid manifest: the caller runs the schema path, which decides what is wrong (or that it is valid after all).
 * @throws ManifestError `PAYLOAD_TYPE`, `KEY_UNTRUSTED`, `KEY_EXPIRED`, `KEY_REVOKED`, `SIGNATURE_INVALID`
 */
export function verifyCanonicalEnvelope(
  parsed: ParsedEnvelope,
  trust: TrustStore,
  verifier: SignatureVerifier,
): VerifiedManifest | undefined {
  verifyPayloadType(parsed);
  const canonical = readCanonicalPayload(parsed.payload);
  if (canonical === undefined) return undefined;
  verifyKeyAndSignature(parsed, canonical, trust, verifier);
  return { id: manifestId(parsed.payload), manifest: canonical, envelope: parsed.envelope, payload: parsed.payload };
}
