/**
 * handoff-ledger: durable, signed, verifiable storage for agent context-compaction summaries.
 * `import { openLedger } from 'handoff-ledger'`; lower layers: 'handoff-ledger/store', 'handoff-ledger/manifests'.
 */
export { openLedger, defaultRoot, type OpenLedgerOptions } from './open.js';
export { Ledger } from './ledger.js';
export type { PublishOptions, Receipt, Resumed, HistoryEntry, RecoveryReport } from './ledger.js';
export type { Scope, PublishScope } from './scope.js';
export { LedgerError, isHandoffLedgerError, type LedgerErrorCode, type HandoffLedgerError } from './errors.js';
export { StoreError, type StoreErrorCode } from '../store/errors.js';
export { ManifestError, type ManifestErrorCode } from '../manifests/errors.js';
export { summarySchema, summaryJsonSchema, validateSummary, DEFAULT_MAX_SUMMARY_BYTES, type Summary } from './summary.js';
export type { Authorizer, Action } from './grants.js';
export { LocalSigner, generateJwk, loadKeyFile, type PrivateJwk } from './keys.js';
export type { Signer, Envelope } from '../manifests/envelope.js';
export type { Manifest } from '../manifests/manifest.js';
export type { TrustStore, TrustedKey } from '../manifests/trust.js';
export type { Digest } from '../store/digest.js';
export { fsck, gc, parseDuration, type FsckReport, type FsckFinding, type GcReport } from './maintenance.js';
export * from './compaction/index.js';
export { exportBundle, type ExportOptions, type ExportResult, type ExportSource } from './export.js';
export { openBundleDir } from './bundle-dir.js';
export { createWorkerLineVerifier } from '../manifests/verify-workers.js';
