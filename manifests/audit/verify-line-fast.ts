/**
 * Steps 1-5 for one line whose manifest is in canonical form (what every writer makes), without zod: the auditor's
 * worker threads (./verify-workers.node.ts) verify an honest bundle with this alone and load ./verify-line.ts, and
 * with it the schemas, only for a line this does not accept. Isomorphic.
 */
import { MAX_ENVELOPE_BYTES, parseEnvelope, type ParsedEnvelope } from '../crypto/envelope.js';
import type { SignatureVerifier } from '../crypto/ed25519.js';
import { verifyCanonicalEnvelope, type VerifiedManifest } from '../crypto/verify-canonical.js';
import { ManifestError } from '../errors.js';
import { errorText } from '../../store/errors.js';
import type { Digest } from '../../store/hash/digest.js';
import type { FindingCode } from './findings.js';
import type { TrustStore } from '../format/trust.js';
import type { LineOutcome, VerifiedLine } from './verify-line.js';

/** The codes of a manifest's own checks that are findings of the same name. */
const MANIFEST_CODES = new Set<string>([
  'ENVELOPE_INVALID',
  'PAYLOAD_TYPE',
  'MANIFEST_INVALID',
  'KEY_UNTRUSTED',
  'KEY_EXPIRED',
  'KEY_REVOKED',
  'SIGNATURE_INVALID',
]);

export function lineFinding(code: FindingCode, line: number, message: string): LineOutcome {
  return { ok: false, finding: { code, line, message } };
}

/** The finding for a manifest that failed a check of steps 2-5 (anything else thrown is reported, never rethrown). */
export function manifestFinding(line: number, err: unknown): LineOutcome {
  if (err instanceof ManifestError && MANIFEST_CODES.has(err.code)) {
    return lineFinding(err.code as FindingCode, line, err.message);
  }
  // Hostile input must never crash the auditor; an unexpected failure is reported against its line.
  return lineFinding('MANIFEST_INVALID', line, `unverifiable: ${errorText(err)}`);
}

/** What the chain steps keep of a verified manifest on line `line`. */
export function verifiedLineOf(line: number, { id, manifest: m }: VerifiedManifest): VerifiedLine {
  return {
    line,
    id,
    host: m.host,
    keyId: m.keyId,
    principal: m.principal,
    session: m.session,
    seq: m.seq,
    prev: m.prev,
    createdAt: m.createdAt,
    summary: { digest: m.summary.digest as Digest, size: m.summary.size },
  };
}

/**
 * A line's outcome on the fast path: its entry when it passes every per-line step there, or the finding of the
 * payload type, key or signature check that failed (the checks `verifyLineText` runs first, on the same parsed
 * envelope, with the same findings). `undefined` for any other line (too long, empty, not JSON, not an envelope, a
 * payload not in canonical form): `verifyLineText` then decides it. So every outcome given is `verifyLineText`'s,
 * and a bundle of bad signatures is not checked twice.
 */
export function verifyCanonicalLine(
  line: number,
  text: string,
  ctx: { trust: TrustStore; verifier: SignatureVerifier },
): LineOutcome | undefined {
  if (text.length === 0 || text.length > MAX_ENVELOPE_BYTES) return undefined;
  let parsed: ParsedEnvelope;
  try {
    parsed = parseEnvelope(JSON.parse(text));
  } catch {
    return undefined;
  }
  try {
    const verified = verifyCanonicalEnvelope(parsed, ctx.trust, ctx.verifier);
    return verified && { ok: true, entry: verifiedLineOf(line, verified) };
  } catch (err) {
    return manifestFinding(line, err);
  }
}
