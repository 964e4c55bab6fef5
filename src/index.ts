/**
 * handoff-ledger: durable, signed, verifiable storage for agent context-compaction summaries.
 * `import { openLedger } from 'handoff-ledger'`. Lower layers: `handoff-ledger/store`,
 * `handoff-ledger/manifests`; the isomorphic offline verifier: `handoff-ledger/audit`.
 */
// The ledger
export { openLedger, defaultRoot } from './ledger/open.js';
export type { OpenLedgerOptions } from './ledger/options.js';
export type { WitnessEndpoint, WitnessingOptions } from './ledger/witnessing.js';
export {
  Ledger,
  type HistoryEntry,
  type PublishOptions,
  type Receipt,
  type RecoveryReport,
  type Resumed,
} from './ledger/ledger.js';
export type { PublishScope, Scope } from './ledger/scope.js';
export type { Action, Authorizer } from './ledger/grants.js';
export {
  openPostgresBackends,
  type OpenPostgresBackendsOptions,
  type PostgresBackendOptions,
} from './ledger/postgres.js';

// Checkpoints and proofs
export type { SignedCheckpoint } from './ledger/checkpoints.js';
export type { ConsistencyProof, InclusionProof } from './ledger/proofs.js';

// Errors: one base, one class per layer; the `code` is the contract.
export {
  HandoffLedgerError,
  isHandoffLedgerError,
  LedgerError,
  type CheckpointEvidence,
  type HandoffLedgerErrorCode,
  type LedgerErrorCode,
} from './errors.js';
export { StoreError, type StoreErrorCode } from '../store/errors.js';
export { ManifestError, type ManifestErrorCode } from '../manifests/errors.js';
export { AuditError, type AuditErrorCode } from '../manifests/audit/errors.js';

// Summaries
export {
  DEFAULT_MAX_SUMMARY_BYTES,
  summaryJsonSchema,
  summarySchema,
  validateSummary,
  type Summary,
  type JsonSchemaObject,
  type ValidatedSummary,
} from './summary/summary.js';
export {
  normalizeStrictSummary,
  SUMMARY_SCHEMA_FORMS,
  summarySchemaFor,
  type SummarySchemaForm,
} from './summary/schema-forms.js';

// Keys
export { generateJwk, loadKeyFile, LocalSigner, type PrivateJwk } from './keys/local-signer.js';
export type { Envelope, Signer } from '../manifests/crypto/envelope.js';
export type { Covers, Manifest } from '../manifests/format/manifest.js';
export type { TrustedCheckpointKey, TrustedKey, TrustStore } from '../manifests/format/trust.js';
export type { Digest } from '../store/hash/digest.js';

// Operations
export {
  fsck,
  FSCK_STORE_CODES,
  gc,
  parseDuration,
  type FsckFinding,
  type FsckFindingCode,
  type FsckOptions,
  type FsckReport,
  type GcOptions,
  type GcReport,
} from './ops/maintenance.js';
export { exportBundle, type ExportOptions, type ExportResult, type ExportSource } from './ops/export.js';

// Auditing on Node (the verifier itself is `handoff-ledger/audit`)
export { openBundleDir, type OpenBundleOptions } from './ops/bundle-dir.js';
export { createWorkerLineVerifier, type WorkerLineVerifierOptions } from '../manifests/audit/verify-workers.node.js';
export { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
export { auditBundle } from './ops/audit.js';
export type { SignatureVerifier } from '../manifests/crypto/ed25519.js';

// Harness integration
export type {
  ModelAdapter,
  ModelFinishReason,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelResponseFormat,
  ModelToolCall,
  ModelToolDefinition,
} from './compaction/model.js';
export { DEFAULT_COMPACTION_RATIO, shouldCompact, type ShouldCompactOptions } from './compaction/should-compact.js';
export {
  compactionRequest,
  DEFAULT_COMPACTION_INSTRUCTIONS,
  extractSummary,
  handoffResponseFormat,
  NOT_RUN_RESULT,
  SUBMIT_HANDOFF,
  submitHandoffTool,
  type CompactionMode,
  type CompactionRequestOptions,
} from './compaction/tool.js';
export {
  HANDOFF_CONTEXT_FOOTER,
  HANDOFF_CONTEXT_HEADER,
  resumeContext,
  type ResumedHandoff,
} from './compaction/resume-context.js';
export { compact, type CompactOptions, type CompactResult, type PublishingLedger } from './compaction/compact.js';

// Telemetry (OpenTelemetry API; a no-op unless the application registers an SDK)
export {
  LedgerTelemetry,
  type IdentifierPolicy,
  type Operation as TelemetryOperation,
  type TelemetryOptions,
} from './telemetry/telemetry.js';
