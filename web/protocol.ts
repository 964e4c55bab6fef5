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
  trustText: string;
  /** The auditor's earlier checkpoint (signed note text), as `verify --since`. */
  since?: string;
  /** Pinned witness keys (file name and text) and the quorum as typed, as `verify --witness-keys --quorum`. */
  witnessKeys?: { name: string; text: string };
  quorum?: string;
}

/** A verified manifest as the history picture needs it (VerifiedLine without the kept text). */
export type ManifestMark = VerifiedLine;

export type WorkerMessage =
  | { type: 'progress'; lines: number; bytes: number; totalBytes?: number }
  | { type: 'done'; report: BundleAuditReport; manifests: ManifestMark[]; verifier: string; ms: number }
  | { type: 'error'; code: string; message: string };
