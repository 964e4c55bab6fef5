export * from './hash/digest.js';
export * from './errors.js';
export * from './blob-store.js';
export { loadHashBackend, type HashBackendName } from './hash/backends.node.js';
export { loadWasmBlake3 } from './hash/wasm.js';
export { FsBlobStore, type FsBlobStoreOptions, type RecoveryReport } from './fs/blob-store.js';
export { nodeFsOps, type FsOps } from './fs/ops.js';
