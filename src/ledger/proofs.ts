/**
 * Proofs served by a ledger: RFC 6962 inclusion of a manifest and consistency between two tree sizes, in
 * the JSON shape the CLI prints (sizes, base64 roots, base64 proof hashes; for inclusion the leaf index and
 * the leaf bytes). Anyone can check them with manifests/tlog/merkle.ts or any RFC 6962 verifier.
 */
import { isDigest, type Digest } from '../../store/hash/digest.js';
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { leafOfEnvelope } from '../../manifests/tlog/leaf.js';
import { manifestId } from '../../manifests/format/manifest-core.js';
import { consistencyRanges, hashRanges, inclusionRanges, treeHeadAt } from '../../manifests/tlog/tree.js';
import { LedgerError } from '../errors.js';
import { shownValue, typeWithArticle } from '../../store/errors.js';

export interface InclusionProof {
  leafIndex: number;
  treeSize: number;
  /** base64 RFC 6962 root of the tree of `treeSize` entries. */
  root: string;
  /** base64 of the leaf: the manifest's signed payload bytes. */
  leaf: string;
  /** base64 hashes, from the leaf upwards. */
  proof: string[];
}

export interface ConsistencyProof {
  oldSize: number;
  oldRoot: string;
  treeSize: number;
  root: string;
  proof: string[];
}

/**
 * A manifest id to prove (`inclusionProof`, `prove inclusion`): `blake3:<64 lowercase hex>`. Anything else is a
 * malformed id, `INVALID_ID` as for every id, rather than an id the log does not hold (`NOT_FOUND`).
 * @throws LedgerError `INVALID_ID`
 */
export function parseManifestId(id: unknown): Digest {
  if (isDigest(id)) return id;
  const shown = typeof id === 'string' ? shownValue(id, 80) : typeWithArticle(id);
  throw new LedgerError('INVALID_ID', `a manifest id is blake3:<64 lowercase hex>, not ${shown}`);
}

/**
 * A tree size asked for (`size`; undefined: the latest), from `min` to the latest. A refusal names the range and the
 * value given (shownValue: escaped, bounded), as every refusal of a value does: `prove consistency 12` on a tree of 5
 * said only "a tree size from 1 to 5", leaving the operator to find which argument it meant.
 */
function pickSize(latest: number, size: number | undefined, min: number, what: string): number {
  if (size === undefined) return latest;
  if (!Number.isSafeInteger(size) || size < min || size > latest)
    throw new LedgerError('INVALID_ARGUMENT', `${what}: a tree size from ${min} to ${latest}, not ${shownValue(size)}`);
  return size;
}

export async function inclusionProof(
  log: ManifestLog,
  latest: number,
  id: Digest,
  size?: number,
): Promise<InclusionProof> {
  const position = await log.positionOf(id);
  const entry = position === undefined ? undefined : await log.entryAt(position);
  if (position === undefined || !entry || position >= latest)
    throw new LedgerError('NOT_FOUND', `manifest ${id} is not in the log`);
  // The id's position is a stored record like any other: the leaf it leads to must be that manifest, or the proof
  // returned would be another manifest's, under this id.
  const leaf = leafOfEnvelope(entry.envelope);
  if (manifestId(leaf) !== id)
    throw new LedgerError(
      'RECORD_CORRUPT',
      `manifest ${id}: the log's position record for it names global position ${position}, which holds another manifest; run fsck`,
    );
  const treeSize = pickSize(latest, size, position + 1, 'size');
  const read = (ids: Parameters<ManifestLog['treeNodes']>[0]) => log.treeNodes(ids);
  const [proof, head] = await Promise.all([
    hashRanges(inclusionRanges(position, treeSize), read),
    treeHeadAt(treeSize, read),
  ]);
  return {
    leafIndex: position,
    treeSize,
    root: encodeBase64(head.root),
    leaf: encodeBase64(leaf),
    proof: proof.map(encodeBase64),
  };
}

export async function consistencyProof(
  log: ManifestLog,
  latest: number,
  oldSize: number,
  size?: number,
): Promise<ConsistencyProof> {
  // RFC 6962 defines no proof from the empty tree (every tree extends it). The old size is no option: none given is
  // refused, not taken as the latest.
  if (typeof oldSize !== 'number')
    throw new LedgerError('INVALID_ARGUMENT', `old size: a tree size from 1 to ${latest}, not ${shownValue(oldSize)}`);
  const old = pickSize(latest, oldSize, 1, 'old size');
  const treeSize = pickSize(latest, size, old, 'size');
  const read = (ids: Parameters<ManifestLog['treeNodes']>[0]) => log.treeNodes(ids);
  const [proof, from, to] = await Promise.all([
    hashRanges(consistencyRanges(old, treeSize), read),
    treeHeadAt(old, read),
    treeHeadAt(treeSize, read),
  ]);
  return {
    oldSize: old,
    oldRoot: encodeBase64(from.root),
    treeSize,
    root: encodeBase64(to.root),
    proof: proof.map(encodeBase64),
  };
}
