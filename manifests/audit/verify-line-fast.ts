/**
 * Steps 1-5 for one line whose manifest is in canonical form (what every writer makes), without zod: the auditor's
 * worker threads (./verify-workers.node.ts) verify an honest bundle with this alone and load ./verify-line.ts, and
 * with it the schemas, only for a line this does not accept. Isomorphic.
 */
import { MAX_ENVELOPE_BYTES, parseEnvelope } from '../crypto/envelope.js';
import type { SignatureVerifier } from '../crypto/ed25519.js';
import { verifyCanonicalEnvelope, type VerifiedManifest } from '../crypto/verify-canonical.js';
import type { Digest } from '../../store/hash/digest.js';
import type { TrustStore } from '../format/trust.js';
import type { LineOutcome, VerifiedLine } from './verify-line.js';

/** What the chain steps keep of a verified manifest on line `line`. */
export function verifiedLineOf(line: number, { id, manifest: m }: VerifiedManifest): VerifiedLine {
  return {
    line,
    id,
    host: m.host,
    principal: m.principal,
    session: m.session,
    seq: m.seq,
    prev: m.prev,
    createdAt: m.createdAt,
    summary: { digest: m.summary.digest as Digest, size: m.summary.size },
  };
}

/**
 * The outcome of a line that passes every per-line step on the fast path; `undefined` for any other line (too long,
 * empty, not JSON, not an envelope, a payload not in canonical form, an untrusted key, a bad signature, ...):
 * `verifyLineText` then decides it, with the finding it always gives. So an accepted line's outcome is exactly
 * `verifyLineText`'s, which runs the same fast path first.
 */
export function verifyCanonicalLine(
  line: number,
  text: string,
  ctx: { trust: TrustStore; verifier: SignatureVerifier },
): LineOutcome | undefined {
  if (text.length === 0 || text.length > MAX_ENVELOPE_BYTES) return undefined;
  try {
    const verified = verifyCanonicalEnvelope(parseEnvelope(JSON.parse(text)), ctx.trust, ctx.verifier);
    return verified && { ok: true, entry: verifiedLineOf(line, verified) };
  } catch {
    return undefined;
  }
}
