/**
 * An append request for a manifest log's own tests: link `seq` of `session`'s chain, its id the digest of
 * `<session>/<seq>` (so `prev` is the id of the link before it) and its envelope `{"payload":"<base64 of the same>"}`.
 * No signature: a log judges the chain, not the envelope's signature (the ledger signs).
 */
import { digestOf } from '../../store/hash/digest.js';
import type { AppendRequest } from '../../manifests/log/log.js';

/** The id of link `seq` of `session` (`chainLink`'s). */
export function chainLinkId(session: string, seq: number) {
  return digestOf(new TextEncoder().encode(`${session}/${seq}`));
}

export function chainLink(session: string, seq: number, principal = 'p'): AppendRequest {
  return {
    session,
    principal,
    seq,
    prev: seq === 0 ? null : chainLinkId(session, seq - 1),
    id: chainLinkId(session, seq),
    envelope: JSON.stringify({ payload: Buffer.from(`${session}/${seq}`).toString('base64') }),
  };
}
