/**
 * Step 7 of the offline audit, when the bundle carries blobs: each summary blob a verified manifest
 * names must be present, have the signed size, hash to the signed digest, and (through an injected
 * check, since the summary schema lives in src/) be a valid summary. Isomorphic.
 */
import { digestOf, hashBytes, type HashBackend } from '../../store/hash/digest.js';
import type { FindingCode, FindingSink } from './findings.js';
import { counted } from '../encoding/printable.js';
import { BUNDLE_BLOB_DIR, linkedBlobText, type BundleReader } from './bundle.js';
import type { ChainEntry } from './chain-rules.js';

/**
 * Validates intact summary bytes; returns a problem description, or `undefined` when the summary is valid.
 * The Node CLI passes one built on src/summary/summary.ts `decodeSummary`.
 */
export type SummaryCheck = (bytes: Uint8Array) => string | undefined | Promise<string | undefined>;

export interface BlobCheckOptions {
  /** BLAKE3 backend for blob bytes (default: the portable noble reference). */
  hash?: HashBackend | undefined;
  checkSummary?: SummaryCheck | undefined;
  /**
   * The auditor expects blobs: a bundle without them (no `blobs/`, no `counts.blobs`) gets `BLOB_MISSING` for every
   * manifest instead of a silent skip. Without it, whether blobs are checked is the unsigned bundle's choice.
   */
  requireBlobs?: boolean | undefined;
}

const SMALL_BLOB = 64 * 1024;
/** Blob reads in flight: overlaps file I/O with hashing. */
const CONCURRENCY = 16;

/**
 * `linkedDir`: the verdict is a directory's (`blobs` or `blobs/blake3` is a link), the same for every blob, and is
 * reported once for the bundle, not once per manifest.
 */
type BlobVerdict = { code: FindingCode; message: string; linkedDir?: string } | null;

async function checkBlob(
  reader: Required<Pick<BundleReader, 'readBlob'>>,
  e: ChainEntry,
  options: BlobCheckOptions,
): Promise<BlobVerdict> {
  const { digest, size } = e.summary;
  // Read at most one byte more than signed: a planted oversized blob is a finding, not a memory blow-up.
  const blob = await reader.readBlob(digest, size);
  if (!blob) return { code: 'BLOB_MISSING', message: `summary blob ${digest} is not in the bundle` };
  // A link is said to be one (as verify says of a linked tree file), not an absence: the file may well be there.
  if ('link' in blob) {
    if (blob.link === 'blobs' || blob.link === BUNDLE_BLOB_DIR)
      return { code: 'BLOB_MISSING', message: linkedBlobText(digest, blob.link), linkedDir: blob.link };
    if (blob.link === 'file')
      return { code: 'BLOB_MISSING', message: `summary blob ${digest}: ${linkedBlobText(digest, blob.link)}` };
    // Another reader's reason this verifier does not know: absent, in its own words.
    return { code: 'BLOB_MISSING', message: `summary blob ${digest} is not in the bundle` };
  }
  if (blob.size !== size || !blob.bytes || blob.bytes.length !== size) {
    return { code: 'BLOB_SIZE', message: `summary blob ${digest} is ${blob.size} bytes; the manifest signs ${size}` };
  }
  // Small blobs go through the synchronous reference hash: setting up a faster backend's hasher costs more than it saves.
  const actual = options.hash && size > SMALL_BLOB ? await hashBytes(blob.bytes, options.hash) : digestOf(blob.bytes);
  if (actual !== digest) return { code: 'BLOB_DIGEST', message: `summary blob ${digest} hashes to ${actual}` };
  if (options.checkSummary) {
    const problem = await options.checkSummary(blob.bytes);
    if (problem !== undefined) return { code: 'SUMMARY_INVALID', message: `summary blob ${digest}: ${problem}` };
  }
  return null;
}

/**
 * Checks the blob of every entry (each distinct digest and size once). Returns how many blobs were checked, and how
 * many distinct digests of them the bundle holds (present, intact or not: what its header's `counts.blobs` counts).
 */
export async function verifyBlobs(
  entries: ChainEntry[],
  reader: BundleReader,
  options: BlobCheckOptions,
  sink: FindingSink,
): Promise<{ checked: number; present: number }> {
  const readBlob = reader.readBlob ?? (options.requireBlobs ? async () => undefined : undefined);
  if (!readBlob) return { checked: 0, present: 0 };
  const key = (e: ChainEntry) => `${e.summary.digest}/${e.summary.size}`;
  const firstOf = new Map<string, ChainEntry>();
  for (const e of entries) if (!firstOf.has(key(e))) firstOf.set(key(e), e);
  const verdicts = new Map<string, BlobVerdict>();
  const queue = [...firstOf];
  const bound = { readBlob: readBlob.bind(reader) };
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, queue.length) }, async () => {
      for (let next = queue.pop(); next; next = queue.pop())
        verdicts.set(next[0], await checkBlob(bound, next[1], options));
    }),
  );
  // A linked directory: one finding for the bundle, saying how many blobs it kept from being read.
  const linkedDirs = new Map<string, { message: string; blobs: number }>();
  for (const verdict of verdicts.values()) {
    if (!verdict?.linkedDir) continue;
    const seen = linkedDirs.get(verdict.linkedDir) ?? { message: verdict.message, blobs: 0 };
    seen.blobs++;
    linkedDirs.set(verdict.linkedDir, seen);
  }
  for (const { message, blobs } of linkedDirs.values())
    sink.add({
      code: 'BLOB_MISSING',
      message: `${message}; no blob is read through it (the manifests name ${counted(blobs, 'summary blob')})`,
    });
  for (const e of entries) {
    const verdict = verdicts.get(key(e));
    if (verdict && !verdict.linkedDir)
      sink.add({ code: verdict.code, line: e.line, chain: e.session, seq: e.seq, message: verdict.message });
  }
  const present = new Set<string>();
  for (const [k, verdict] of verdicts)
    if (verdict?.code !== 'BLOB_MISSING') present.add(k.slice(0, k.lastIndexOf('/')));
  return reader.readBlob ? { checked: verdicts.size, present: present.size } : { checked: 0, present: 0 };
}
