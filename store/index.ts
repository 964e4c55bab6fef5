/**
 * `handoff-ledger/store`: BLAKE3 digests and the blob-store layer (the contract, the filesystem and
 * PostgreSQL backends). A Node entry point; the isomorphic parts are `store/hash/` and the contract.
 */
export {
  digestOf,
  formatDigest,
  isDigest,
  digestHex,
  type Digest,
  type HashBackend,
  type Hasher,
} from './hash/digest.js';
export { loadHashBackend, type HashBackendLoaders, type HashBackendName } from './hash/backends.node.js';
export {
  HandoffLedgerError,
  isHandoffLedgerError,
  StoreError,
  type ErrorOptions,
  type StoreErrorCode,
} from './errors.js';
export {
  AbstractBlobStore,
  type BlobInfo,
  type BlobSource,
  type BlobStat,
  type BlobStore,
  type DeleteOptions,
  type GetOptions,
  type PutOptions,
  type ReadLimits,
  type WriteLimits,
} from './blob-store.js';
export { FsBlobStore, type FsBlobStoreOptions, type FsRecoveryReport } from './fs/blob-store.js';
export type { FsOps } from './fs/ops.js';
export { PgBlobStore, type PgBlobStoreOptions } from './pg/blob-store.js';
export type { PgConnectOptions, PgPoolLike } from './pg/db.js';
