/**
 * Messages between the page and its verification worker. Files travel as Blobs (structured clone
 * passes a reference, not the bytes); a served bundle travels as its URL prefix, and the worker
 * streams it itself.
 */
import type { BundleTreeFile } from '../manifests/audit/bundle.js';
import type { BundleAuditReport } from '../manifests/audit/verify-chain.js';
import type { VerifiedLine } from '../manifests/audit/verify-line.js';

export type BundleSource =
  | {
      kind: 'files';
      header?: Blob;
      manifests: Blob;
      /** Present iff the folder has a blobs/ directory: 64-hex file name → file. */
      blobs?: Record<string, Blob>;
      /** checkpoint.note, proofs.jsonl, consistency.json, heads.jsonl: those the folder has. */
      tree: Partial<Record<BundleTreeFile, Blob>>;
      /**
       * Tree files' names at which the folder holds a directory: each refused (BUNDLE_INVALID) when a check reads it,
       * as `verify` refuses one, and not before (a full bundle reads no proofs.jsonl or heads.jsonl).
       */
      notFiles?: BundleTreeFile[];
    }
  | {
      kind: 'url';
      base: string;
      hasBlobs: boolean;
      /** The tree files the server announced (it has no others). */
      tree: BundleTreeFile[];
    };

export interface VerifyRequest {
  type: 'verify';
  source: BundleSource;
  /**
   * The trust files as chosen (name and text), one or more: several (a shared store's hosts, each with its own
   * `keys export`) are merged as `verify --trust a.json --trust b.json` merges them.
   */
  trust: Array<{ name: string; text: string }>;
  /** The auditor's earlier checkpoint (signed note text), as `verify --since`. */
  since?: string;
  /** Pinned witness keys (file name and text) and the quorum as typed, as `verify --witness-keys --quorum`. */
  witnessKeys?: { name: string; text: string };
  quorum?: string;
  /**
   * The worker's own bundled source: it starts its pool of line verifiers from it (web/worker/line-pool.ts;
   * workers come only from blob: URLs). Absent: it verifies every line itself.
   */
  poolSource?: Blob;
  /** The page's `?workers=` as given (`auto` or 0-256, as `verify --workers`); absent: auto. */
  workers?: string;
  /** The page's `?batch=` as given: lines per batch handed to the pool (default 1,000, as `verify`). */
  batch?: string;
  /** "Require blobs" (`verify --require-blobs`): a bundle without the summaries fails, a finding per manifest. */
  requireBlobs?: boolean;
  /**
   * What the auditor expects the bundle to be, as chosen or given in the page's address (`?expect=`), as `verify
   * --expect`: `full` or `filtered`; the worker refuses anything else.
   */
  expect?: string;
  /** The auditor's scope as typed (`verify --principal` / `--session`); the worker checks each is an id. */
  principal?: string;
  session?: string;
  /**
   * The bound on manifests.jsonl as given (`?max-bundle-bytes=` or `audit-ui --max-bundle-bytes`, as `verify
   * --max-bundle-bytes`): a larger one is refused before a line of it is read. Absent: 4 GiB, `verify`'s default.
   */
  maxBundleBytes?: string;
}

/** How the lines are being verified: on a pool of `workers`, or in the one worker (0), and why not on a pool. */
export interface PoolState {
  workers: number;
  /** Set when a pool was wanted but could not be had. */
  fallback?: string;
}

/** A verified manifest as the history picture needs it (VerifiedLine without the kept text or its signing key). */
export type ManifestMark = Omit<VerifiedLine, 'keyId'>;

export type WorkerMessage =
  | ({ type: 'pool' } & PoolState)
  | { type: 'progress'; lines: number; bytes: number; totalBytes?: number }
  /** The verified manifests of one batch (`ManifestMark[]` as JSON), in file order; all are posted before `done`. */
  | { type: 'marks'; json: string }
  | { type: 'done'; report: BundleAuditReport; verifier: string; ms: number }
  | { type: 'error'; code: string; message: string };
