/**
 * What the offline auditor reports: typed findings with line numbers, grouped by chain.
 * Isomorphic. `FINDING_CODES` is the closed list of codes, each with the step that produces it;
 * docs/AUDIT.md documents every one of them (a test holds the two together).
 */
import type { Digest } from '../../store/hash/digest.js';

export const FINDING_CODES = {
  // Step 1, line parse: every line of manifests.jsonl is hostile until proven otherwise.
  LINE_TOO_LONG: 'line is longer than the bound (64 KiB); it is skipped without being parsed',
  LINE_NOT_JSON: 'line is empty, not UTF-8, or not JSON',
  LINE_TRUNCATED: 'last line has no terminating newline (a cut-off file)',
  ENVELOPE_INVALID: 'JSON but not a strict DSSE envelope (fields, types, canonical base64)',
  // Step 2-5, one envelope: payload type, key, signature, schema (manifests/crypto/verify-manifest.ts).
  PAYLOAD_TYPE: 'envelope carries another payload type than the v1 manifest',
  KEY_UNTRUSTED: "manifest's keyId is not in the trust file for the manifest's host",
  KEY_EXPIRED: 'key was not yet or no longer valid (notBefore/notAfter) at the manifest createdAt',
  KEY_REVOKED: 'key was revoked at or before the manifest createdAt',
  SIGNATURE_INVALID: 'no strict Ed25519 signature by the trusted key over PAE(payloadType, payload)',
  MANIFEST_INVALID: 'signed payload is not a strict v1 manifest (unknown field, bad id, seq/prev rule, …)',
  // Step 6, chains: per session, over the verified manifests only.
  OUT_OF_SCOPE: "chain outside the bundle's declared scope (session/principal filter)",
  DUPLICATE: 'same manifest (same id) appears again',
  FORK: 'two different manifests at one seq of a chain (evidence: both envelopes)',
  OUT_OF_ORDER: 'manifest appears after a higher seq of its chain (global log order violated)',
  SEQ_NOT_ZERO: 'chain does not start at seq 0',
  SEQ_GAP: 'seq numbers of a chain are not contiguous',
  PREV_MISMATCH: 'prev is not the id of the manifest at seq - 1',
  SESSION_MISMATCH: 'prev links to a manifest of another session (one session per chain)',
  TIME_REVERSED: 'createdAt is earlier than the createdAt of the manifest it links to',
  // Step 7, blobs (only when the bundle carries blobs).
  BLOB_MISSING: 'summary blob named by a manifest is absent from the bundle',
  BLOB_SIZE: 'summary blob size differs from the size the manifest signs',
  BLOB_DIGEST: 'summary blob bytes do not hash (BLAKE3) to the digest the manifest signs',
  SUMMARY_INVALID: 'summary blob is intact but not a valid summary',
  // Step 8, bundle header (unsigned, so only a consistency check).
  COUNT_MISMATCH: "header's manifest, chain or blob count differs from what the bundle holds",
  SCOPE_UNCONFIRMED:
    "header's filters were not confirmed by the auditor (no --expect filtered, not named as the scope)",
  SCOPE_UNEXPECTED: "header's filters contradict the auditor's --expect (full: it declares filters; filtered: none)",
  // Step 9, the signed checkpoint the bundle was cut at (manifests/audit/verify-tree.ts).
  CHECKPOINT_MISSING: 'no checkpoint.note although checkpoint keys are pinned (or --since was given)',
  CHECKPOINT_INVALID: 'checkpoint.note is not a well-formed C2SP signed note with a tlog-checkpoint body',
  CHECKPOINT_UNTRUSTED: 'checkpoint is not signed by a pinned checkpoint key named after its origin',
  CHECKPOINT_SIGNATURE_INVALID: 'a pinned checkpoint key signature on checkpoint.note does not verify',
  TREE_SIZE_MISMATCH: 'full bundle: the number of lines differs from the checkpoint size (removed or added manifests)',
  TREE_ROOT_MISMATCH: 'full bundle: the lines do not hash to the checkpoint root (changed, replaced or reordered)',
  INCLUSION_PROOF_MISSING: 'filtered bundle: a line has no well-formed inclusion proof in proofs.jsonl',
  INCLUSION_PROOF_INVALID: 'filtered bundle: a line is not in the checkpoint tree at the index its proof gives',
  CONSISTENCY_MISSING: 'verify --since on a filtered bundle: no consistency proof from the earlier size',
  CONSISTENCY_INVALID: "the checkpoint does not extend the auditor's earlier one (rollback, fork, other log)",
  // Step 9d, witnesses (only with pinned witness keys): manifests/audit/verify-witnesses.ts.
  WITNESS_QUORUM_MISSING: 'the checkpoint has fewer valid cosignatures by pinned witnesses than the quorum',
  WITNESS_COSIGNATURE_INVALID: 'a cosignature line by a pinned witness (name and key hash) does not verify',
  // Step 10, completeness against the checkpoint's session-heads index: manifests/audit/verify-heads.ts.
  SESSION_HEAD_MISSING: 'filtered bundle: heads.jsonl has no proof of an exported (or asked-for) session head',
  SESSION_HEAD_INVALID: "a session-head proof does not verify against the checkpoint's session-heads root",
  SESSION_TAIL_MISSING: "a chain ends before the session's proven head at the checkpoint (newest manifests left out)",
  SESSION_HEAD_MISMATCH: "a chain's last manifest is not the proven head, or a full bundle's heads have another root",
} as const;

export type FindingCode = keyof typeof FINDING_CODES;

/** The step-9 and 10 codes (the signed checkpoint): their own tamper matrix is test/audit/tamper-tree.test.ts. */
export const CHECKPOINT_FINDING_CODES: readonly FindingCode[] = [
  'CHECKPOINT_MISSING',
  'CHECKPOINT_INVALID',
  'CHECKPOINT_UNTRUSTED',
  'CHECKPOINT_SIGNATURE_INVALID',
  'TREE_SIZE_MISMATCH',
  'TREE_ROOT_MISMATCH',
  'INCLUSION_PROOF_MISSING',
  'INCLUSION_PROOF_INVALID',
  'CONSISTENCY_MISSING',
  'CONSISTENCY_INVALID',
  'WITNESS_QUORUM_MISSING',
  'WITNESS_COSIGNATURE_INVALID',
  'SESSION_HEAD_MISSING',
  'SESSION_HEAD_INVALID',
  'SESSION_TAIL_MISSING',
  'SESSION_HEAD_MISMATCH',
];

export interface FindingEvidence {
  /** Other lines involved (the first occurrence of a duplicate, the other side of a fork). */
  lines?: number[] | undefined;
  ids?: Digest[] | undefined;
  /** Exact envelope texts (both sides of a fork). */
  envelopes?: string[] | undefined;
  expected?: string | number | null | undefined;
  actual?: string | number | null | undefined;
}

export interface Finding {
  code: FindingCode;
  /** 1-based line of manifests.jsonl; absent for bundle-level findings. */
  line?: number | undefined;
  /** The session of the chain, only when it comes from a verified manifest. */
  chain?: string | undefined;
  seq?: number | undefined;
  message: string;
  evidence?: FindingEvidence | undefined;
}

export interface ChainSummary {
  session: string;
  /** Verified manifests in this chain (duplicates not counted). */
  entries: number;
  /** Id and seq of the highest-seq manifest. */
  head: Digest;
  headSeq: number;
  principals: string[];
  hosts: string[];
}

export interface AuditCounts {
  lines: number;
  /** Lines that passed every per-line step (parse, type, key, signature, schema). */
  manifests: number;
  chains: number;
  findings: number;
  byCode: Partial<Record<FindingCode, number>>;
  /** Distinct summary blobs checked (0 when the bundle carries none). */
  blobsChecked: number;
}

export interface AuditReport {
  ok: boolean;
  findings: Finding[];
  chains: ChainSummary[];
  counts: AuditCounts;
  /** True when more findings occurred than `maxFindings`; `counts` still counts all of them. */
  findingsTruncated: boolean;
}

/** Collects findings with a bound, so a hostile bundle of a billion bad lines cannot exhaust memory. */
export class FindingSink {
  readonly findings: Finding[] = [];
  readonly byCode: Partial<Record<FindingCode, number>> = {};
  total = 0;
  constructor(private readonly max: number) {}

  add(finding: Finding): void {
    this.total++;
    this.byCode[finding.code] = (this.byCode[finding.code] ?? 0) + 1;
    if (this.findings.length < this.max) this.findings.push(finding);
  }

  /** Counts per code, in step order (the order of FINDING_CODES). */
  counts(): Partial<Record<FindingCode, number>> {
    const out: Partial<Record<FindingCode, number>> = {};
    for (const code of Object.keys(FINDING_CODES) as FindingCode[])
      if (this.byCode[code] !== undefined) out[code] = this.byCode[code];
    return out;
  }

  get truncated(): boolean {
    return this.total > this.findings.length;
  }
}
