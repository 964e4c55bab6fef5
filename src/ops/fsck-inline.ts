/**
 * fsck of the log's inline blob records: every one listed must have readable size-and-time metadata (LevelDB
 * `t!<hex>`; gc judges by it). A blob a manifest names is re-hashed by the chain walk; this also reaches the
 * records no manifest names and the metadata the chain walk never reads.
 */
import { throwIfCancelled } from '../errors.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { ManifestError } from '../../manifests/errors.js';
import type { FsckFinding } from './maintenance.js';
import type { BlobStat, BlobStore } from '../../store/blob-store.js';
import { StoreError } from '../../store/errors.js';

export async function fsckInlineBlobs(log: ManifestLog, signal?: AbortSignal): Promise<FsckFinding[]> {
  const findings: FsckFinding[] = [];
  const corrupt = (err: unknown) => {
    if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
    findings.push({ code: 'RECORD_CORRUPT', message: err.message });
  };
  if (!log.inlineBlobs) return findings;
  try {
    for await (const digest of log.inlineBlobs.list()) {
      throwIfCancelled(signal);
      try {
        await log.inlineBlobs.stat(digest);
      } catch (err) {
        corrupt(err);
      }
    }
  } catch (err) {
    // A key that names no digest ends the listing (the iterator cannot skip it): reported, the rest is not reached.
    corrupt(err);
  }
  return findings;
}

/**
 * fsck of the blob store's own records of storage time (gc judges age by them): every blob listed must have one that
 * is a time. A PostgreSQL row's `stored_at` set to `infinity` would keep its blob for ever, `-infinity` let gc take it
 * whatever the grace (gc refuses both), reported here as a damaged record.
 */
export async function fsckBlobTimes(
  blobs: BlobStore,
  reported: ReadonlySet<string>,
  signal?: AbortSignal,
): Promise<FsckFinding[]> {
  const findings: FsckFinding[] = [];
  try {
    await walkBlobTimes(blobs, reported, findings, signal);
  } catch (err) {
    // The listing itself failed (a shard directory it cannot read): said, and fsck goes on with its other passes.
    if (!(err instanceof StoreError)) throw err;
    findings.push({ code: 'BLOB_UNREADABLE', message: `the blob store's listing stopped: ${err.message}` });
  }
  return findings;
}

async function walkBlobTimes(
  blobs: BlobStore,
  reported: ReadonlySet<string>,
  findings: FsckFinding[],
  signal?: AbortSignal,
): Promise<void> {
  for await (const digest of blobs.list()) {
    throwIfCancelled(signal);
    let st: BlobStat | undefined;
    try {
      st = await blobs.stat(digest);
    } catch (err) {
      // Its path unsafe, its directory unreadable: a blob the walk cannot look at is a finding, and the walk goes on.
      // One a manifest names was judged by the chain walk already (`reported`), with its session and seq.
      if (!(err instanceof StoreError)) throw err;
      if (!reported.has(digest)) findings.push({ code: 'BLOB_UNREADABLE', message: `blob ${digest}: ${err.message}` });
      continue;
    }
    if (st && !Number.isFinite(st.storedAtMs))
      findings.push({
        code: 'RECORD_CORRUPT',
        message: `blob ${digest}: its storage time is not a time (${st.storedAtMs}); gc cannot judge its age`,
      });
  }
}
