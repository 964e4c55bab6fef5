export * from './errors.js';
export * from './format/ids.js';
export * from './encoding/canonical.js';
export * from './encoding/base64.js';
export * from './format/manifest.js';
export * from './crypto/envelope.js';
export * from './format/trust.js';
export * from './crypto/ed25519.js';
export * from './crypto/verify-manifest.js';
export * from './log/log.js';
export * from './audit/errors.js';
export * from './audit/findings.js';
export * from './audit/bundle.js';
export * from './audit/verify-chain.js';
export {
  splitLines,
  splitText,
  inlineLineVerifier,
  MAX_LINE_BYTES,
  type LineVerifier,
  type LineOutcome,
  type VerifiedLine,
  type RawLine,
} from './audit/verify-line.js';
export type { SummaryCheck, BlobCheckOptions } from './audit/verify-blobs.js';
export type { AuditScope, ChainEntry } from './audit/chain-rules.js';
