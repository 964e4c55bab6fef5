/**
 * The parts of the v1 manifest format (./manifest.ts) that need no schema library: its payload and summary media
 * types and its id. The verifiers' fast path (manifests/crypto/verify-canonical.ts) and the auditor's worker
 * threads load this, not zod. Isomorphic.
 */
import { digestOf, type Digest } from '../../store/hash/digest.js';

export const MANIFEST_PAYLOAD_TYPE = 'application/vnd.handoff-ledger.manifest.v1+json';
export const SUMMARY_MEDIA_TYPE = 'application/vnd.handoff-ledger.summary.v1+json';

/** Manifest id: BLAKE3 of the exact payload bytes. Chains link by this id, never by signature bytes. */
export function manifestId(payload: Uint8Array): Digest {
  return digestOf(payload);
}
