/**
 * `handoff-ledger/audit`: the offline verifier. Isomorphic: it imports nothing from `node:`, so the same
 * modules verify a bundle in Node and in a browser. Node helpers (reading a bundle directory, worker
 * threads, the node:crypto verifier) are exported by the main entry point.
 * @example
 * // A trust file that lists checkpoint keys (keys export writes them) expects the bundle's checkpoint.note: without
 * // it, even an intact bundle is CHECKPOINT_MISSING. Pass the other tree files the bundle holds with it.
 * const treeFiles = { 'checkpoint.note': checkpointText };
 * const report = await verifyBundle(memoryBundleReader({ manifests: text, treeFiles }), { trust: parseTrustStore(json) });
 * if (!report.ok) for (const f of report.findings) console.log(f.code, f.line, f.message);
 */
export {
  verifyBundle,
  verifyChain,
  type AuditCoverage,
  type AuditProgress,
  type BundleAuditReport,
  type BundleExpectation,
  type SignerCount,
  type SignerCoverage,
  type TrustCoverage,
  type VerifyBundleOptions,
  type VerifyChainOptions,
} from './verify-chain.js';
export {
  CHECKPOINT_FINDING_CODES,
  FINDING_CODES,
  type AuditCounts,
  type AuditReport,
  type ChainSummary,
  type Finding,
  type FindingCode,
  type FindingEvidence,
} from './findings.js';
export {
  BUNDLE_FORMAT,
  BUNDLE_VERSION,
  memoryBundleReader,
  parseBundleHeader,
  type BundleBlob,
  type BundleBlobLink,
  type MemoryBundleInput,
  type BundleTreeFile,
  type BundleHeader,
  type BundleReader,
} from './bundle.js';
export {
  inlineLineVerifier,
  MAX_LINE_BYTES,
  type LineOutcome,
  type LineVerifier,
  type LineVerifyContext,
  type VerifiedLine,
} from './verify-line.js';
export { createWebCryptoLineVerifier, type Subtle } from './verify-webcrypto.js';
export {
  describeCoverage,
  describeFinding,
  describeVerdict,
  type CoverageHints,
  type VerdictPaint,
} from './report-text.js';
export type { BlobCheckOptions, SummaryCheck } from './verify-blobs.js';
export { storedSummaryProblem } from '../format/summary.js';
export type { AuditScope } from './chain-rules.js';
export { AuditError, type AuditErrorCode } from './errors.js';
export { nobleVerifier, type SignatureVerifier } from '../crypto/ed25519.js';
export {
  checkpointVerifiers,
  mergeTrust,
  parseTrustStore,
  trustDigest,
  type TrustedCheckpointKey,
  type TrustedKey,
  type TrustStore,
} from '../format/trust.js';
export type { CheckpointSummary, TreeCheckOptions } from './verify-tree.js';
export type { CompletenessCoverage } from './verify-heads.js';
// Checkpoints and RFC 6962 proofs, checkable with nothing but a trust file.
export {
  EMPTY_ROOT,
  leafHash,
  nodeHash,
  rootFromInclusionProof,
  verifyConsistency,
  verifyInclusion,
  type ProofResult,
} from '../tlog/merkle.js';
// Completeness (step 10): a session's head, or its absence, in the checkpoint's session-heads index.
export { sessionHeadsRoot, verifySessionHead, type SessionHead, type SessionHeadProof } from '../tlog/session-heads.js';
export { openNote, parseVerifierKey, type NoteVerifierKey, type OpenedNote } from '../crypto/note.js';
export { parseCheckpoint, type Checkpoint } from '../format/checkpoint.js';
// Witness cosignatures (C2SP tlog-cosignature): the auditor's quorum check of step 9d.
export {
  checkCosignatures,
  parseCosignerKey,
  type Cosignature,
  type CosignatureCheck,
  type CosignerKey,
} from '../crypto/cosignature.js';
export {
  parseWitnessKeys,
  witnessDigest,
  type WitnessCoverage,
  type WitnessPolicy,
  type WitnessSummary,
} from './verify-witnesses.js';
