/**
 * fsck of the records that give a manifest id's global position (`ManifestLog.positionOf`, what an inclusion proof by
 * id reads: LevelDB `i!<id>`, PostgreSQL the `id` column of `entries`). Each must name the position of the manifest
 * with that id (the BLAKE3 of the leaf's payload, whatever the entry's stored id says), the manifest of every leaf must
 * have one, and none may name an id the log does not hold. The tree's walk (fsck-tree.ts) hands over every leaf's id
 * as it reads the entries (32 bytes a position: no other copy of the log is kept); the records are then read in one
 * pass of their own (`ManifestLog.idPositions`) and held against them.
 */
import { throwIfCancelled } from '../errors.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { digestBytesOf, formatDigest, isDigest, type Digest } from '../../store/hash/digest.js';
import { shownValue } from '../../store/errors.js';
import type { FsckFinding } from './maintenance.js';

const MAX_REPORTED = 100;
const ID_BYTES = 32;

/** The manifest id of every leaf, in global order, as the tree's walk reads them. */
export class LeafIds {
  private bytes = new Uint8Array(ID_BYTES * 1024);
  /** Leaves added: the ids of positions 0 … size − 1. */
  size = 0;
  /** Set once the walk reached the end of the log: only then is a leaf without a record told from one not read. */
  complete = false;

  /** Adds the next position's leaf (the manifest's signed payload bytes). */
  add(leaf: Uint8Array): void {
    if ((this.size + 1) * ID_BYTES > this.bytes.length) {
      const grown = new Uint8Array(this.bytes.length * 2);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    this.bytes.set(digestBytesOf(leaf), this.size * ID_BYTES);
    this.size++;
  }

  /** The id of the manifest at `position`, or undefined beyond the leaves. */
  at(position: number): Digest | undefined {
    if (!Number.isSafeInteger(position) || position < 0 || position >= this.size) return undefined;
    return formatDigest(this.bytes.subarray(position * ID_BYTES, (position + 1) * ID_BYTES));
  }
}

/** An id read from a record, as a message names it: a digest as it is, anything else quoted as data (`shownValue`). */
const named = (id: string) => (isDigest(id) ? id : shownValue(id));

/**
 * Holds every id → position record to the leaves' ids (`ids`, complete: else nothing is judged, the walk having
 * stopped at a finding of its own). Reports (at most 100) a record that cannot be parsed (`RECORD_CORRUPT`, naming
 * it), and `ID_POSITION_MISMATCH` for a record naming another position than its manifest's, a leaf no record names,
 * and a record of an id no leaf has.
 */
export async function fsckIdPositions(log: ManifestLog, ids: LeafIds, signal?: AbortSignal): Promise<FsckFinding[]> {
  const list = log.idPositions?.bind(log);
  if (!list || !ids.complete) return [];
  const findings: FsckFinding[] = [];
  const report = (finding: FsckFinding) => {
    if (findings.length < MAX_REPORTED) findings.push(finding);
  };
  // Per position: 1 once the record of its manifest's id names it.
  const found = new Uint8Array(ids.size);
  // Records that cannot be parsed, by id (named once: their leaves are not reported again as having none).
  const unreadable = new Set<string>();
  // Records that name a position not holding their id (the log's damage only: empty on a sound store).
  const astray = new Map<string, number>();
  for await (const record of list()) {
    throwIfCancelled(signal);
    if ('corrupt' in record) {
      if (record.corrupt.code !== 'RECORD_CORRUPT') throw record.corrupt;
      unreadable.add(record.id);
      report({ code: 'RECORD_CORRUPT', message: record.corrupt.message });
    } else if (ids.at(record.position) === record.id) found[record.position] = 1;
    else astray.set(record.id, record.position);
  }
  for (let position = 0; position < ids.size; position++) {
    if (found[position]) continue;
    const id = ids.at(position)!;
    if (unreadable.has(id)) continue;
    const elsewhere = astray.get(id);
    astray.delete(id);
    report({
      code: 'ID_POSITION_MISMATCH',
      message:
        elsewhere === undefined
          ? `manifest ${id} at global position ${position}: no position record names it there (an inclusion proof by its id cannot reach its leaf)`
          : `the position record of manifest ${id} names global position ${elsewhere}; the manifest is at ${position}`,
    });
  }
  for (const [id, position] of astray) {
    const there = ids.at(position);
    report({
      code: 'ID_POSITION_MISMATCH',
      message: `a position record names manifest ${named(id)} at global position ${position}, ${there ? `which holds manifest ${there}` : `beyond the log's ${ids.size} entries`}; the log holds no manifest with that id`,
    });
  }
  return findings;
}
