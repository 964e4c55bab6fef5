/**
 * `handoff-ledger/manifests`: the manifest layer — the v1 manifest format, RFC 8785 canonical JSON,
 * DSSE envelopes, Ed25519, trust stores, one-manifest verification, and the manifest log (the contract,
 * the LevelDB and PostgreSQL logs). A Node entry point; the offline verifier is `handoff-ledger/audit`.
 */
export { ManifestError, type ManifestErrorCode } from './errors.js';
export { ID_PATTERN, isValidId } from './format/ids.js';
export {
  encodeManifest,
  manifestId,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Covers,
  type Manifest,
} from './format/manifest.js';
export {
  checkpointVerifiers,
  emptyTrustStore,
  findTrustedKey,
  keyIdOf,
  mergeTrust,
  parseTrustStore,
  trustDigest,
  type KeyLookup,
  type TrustedCheckpointKey,
  type TrustedKey,
  type TrustStore,
} from './format/trust.js';
export { canonicalize, canonicalBytes } from './encoding/canonical.js';
export {
  pae,
  parseEnvelope,
  serializeEnvelope,
  signEnvelope,
  type Envelope,
  type EnvelopeSignature,
  type ParsedEnvelope,
  type Signer,
} from './crypto/envelope.js';
export { nobleVerifier, type SignatureVerifier } from './crypto/ed25519.js';
export { nodeVerifier } from './crypto/ed25519.node.js';
export { verifyManifestEnvelope, type VerifiedManifest, type VerifyManifestOptions } from './crypto/verify-manifest.js';
export type {
  AppendOptions,
  AppendRequest,
  ChainHead,
  GrantRecord,
  GrantState,
  GrantTable,
  HeadHold,
  HeadWindow,
  IdPositionRecord,
  InlineBlob,
  InlineBlobTable,
  InlineDeleteOptions,
  LogEntry,
  LogTreeHead,
  ManifestLog,
  SigningKeyRecord,
  SigningKeyTable,
} from './log/log.js';
export { AbstractManifestLog } from './log/abstract-log.js';
export type { CutBackFacts, HeadProblem, HeadProblemCode } from './chain/head-rules.js';
export { LevelManifestLog, type BatchOp, type LevelManifestLogOptions } from './log/level/log.js';
export { PgManifestLog, type PgManifestLogOptions } from './log/pg/log.js';
export {
  encodeVerifierKey,
  noteKeyHash,
  openNote,
  parseVerifierKey,
  signNote,
  type NoteSignature,
  type NoteSigner,
  type NoteVerifierKey,
  type OpenedNote,
} from './crypto/note.js';
export { formatCheckpoint, parseCheckpoint, type Checkpoint } from './format/checkpoint.js';
export type { NodeId, TreeHead } from './tlog/tree.js';
export type { HeadsNode, NodePath } from './tlog/session-heads.js';
