/**
 * handoff-ledger: durable, signed, verifiable storage for agent context-compaction summaries.
 * `import { openLedger } from 'handoff-ledger'`; lower layers: 'handoff-ledger/store', 'handoff-ledger/manifests'.
 */
export { openLedger, defaultRoot, type OpenLedgerOptions } from './ledger/open.js';
export { Ledger } from './ledger/ledger.js';
export type { PublishOptions, Receipt, Resumed, HistoryEntry, RecoveryReport } from './ledger/ledger.js';
export type { Scope, PublishScope } from './ledger/scope.js';
export { LedgerError, isHandoffLedgerError, type LedgerErrorCode, type HandoffLedgerError } from './errors.js';
export { StoreError, type StoreErrorCode } from '../store/errors.js';
export { ManifestError, type ManifestErrorCode } from '../manifests/errors.js';
export {
  summarySchema,
  summaryJsonSchema,
  validateSummary,
  DEFAULT_MAX_SUMMARY_BYTES,
  type Summary,
} from './summary/summary.js';
export type { Authorizer, Action } from './ledger/grants.js';
export { LocalSigner, generateJwk, loadKeyFile, type PrivateJwk } from './keys/local-signer.js';
export type { Signer, Envelope } from '../manifests/crypto/envelope.js';
export type { Manifest } from '../manifests/format/manifest.js';
export type { TrustStore, TrustedKey } from '../manifests/format/trust.js';
export type { Digest } from '../store/hash/digest.js';
export { fsck, gc, parseDuration, type FsckReport, type FsckFinding, type GcReport } from './ops/maintenance.js';
export * from './compaction/index.js';
export { exportBundle, type ExportOptions, type ExportResult, type ExportSource } from './ops/export.js';
export { openBundleDir } from './ops/bundle-dir.js';
export { createWorkerLineVerifier } from '../manifests/audit/verify-workers.node.js';
