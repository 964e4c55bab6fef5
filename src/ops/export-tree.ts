/**
 * The tree files of an export bundle (manifests/audit/bundle.ts): the checkpoint it was cut at, an
 * inclusion proof per manifest of a filtered bundle, and a consistency proof from an auditor's earlier
 * checkpoint, and per exported session a proof of its head in the checkpoint's session-heads index. Proofs are
 * read from the log's stored tree at the checkpoint's size.
 */
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { consistencyRanges, hashRanges, inclusionRanges, treeHeadAt } from '../../manifests/tlog/tree.js';
import { openNote } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { auditUsage } from '../../manifests/audit/errors.js';
import { revokedSigner } from '../../manifests/audit/verify-tree.js';
import { ManifestError } from '../../manifests/errors.js';
import { shownValue } from '../../store/errors.js';
import { quoted } from '../../manifests/encoding/printable.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import type { NoteVerifierKey } from '../../manifests/crypto/note.js';
import { equalBytes } from '../../manifests/tlog/merkle.js';
import {
  proveSessionHead,
  rootFromSessionHeadProof,
  type SessionHeadProof,
} from '../../manifests/tlog/session-heads.js';

/**
 * `proofs.jsonl`: one `{ leafIndex, proof }` line per exported manifest, in bundle order. `checkCancelled` is called
 * before each proof is read (it throws once the export is cancelled): a proof per manifest is most of a large filtered
 * export's reads.
 */
export async function* inclusionProofLines(
  log: ManifestLog,
  positions: number[],
  size: number,
  checkCancelled: () => void = () => {},
): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  const read = (ids: Parameters<ManifestLog['treeNodes']>[0]) => log.treeNodes(ids);
  let buffered = '';
  for (const leafIndex of positions) {
    checkCancelled();
    const proof = await hashRanges(inclusionRanges(leafIndex, size), read);
    buffered += `${JSON.stringify({ leafIndex, proof: proof.map(encodeBase64) })}\n`;
    if (buffered.length >= 1 << 20) {
      yield encoder.encode(buffered);
      buffered = '';
    }
  }
  if (buffered) yield encoder.encode(buffered);
}

/**
 * The size of an auditor's earlier checkpoint, which must be a checkpoint of this log: of its origin, signed by one
 * of `verifiers` (the log's checkpoint keys, named after that origin: `checkpointVerifiers(trust, origin)`), no larger
 * than the cut, and with the root this log's tree has at its size (another root there is a fork: no consistency proof
 * from it can hold). `name` is the option's name in the caller's words: `since` (exportBundle), `--since` (the CLI).
 * @throws AuditError `USAGE`
 */
export async function sinceSize(
  note: string,
  verifiers: NoteVerifierKey[],
  cut: { origin?: string; size: number },
  log: ManifestLog,
  trust: TrustStore | undefined,
  name: string,
): Promise<number> {
  let old;
  try {
    old = parseCheckpoint(openNote(note, verifiers).text);
  } catch (err) {
    // Signed by this log's checkpoint key of the time, revoked since (with the host key, after a compromise): say so,
    // as verify --since does, not that the note is of another log.
    const revoked =
      err instanceof ManifestError && err.code === 'NOTE_UNVERIFIED' && trust !== undefined
        ? revokedSigner(note, { trust })
        : undefined;
    if (revoked)
      throw auditUsage(
        `${name}: the earlier checkpoint is signed by checkpoint key ${quoted(revoked.keyId)} of host ${quoted(revoked.host)}, revoked (at ${shownValue(revoked.revokedAt, Infinity)}) in the keys this store trusts: a revoked checkpoint key's checkpoints are refused whenever they were signed (checkpoints carry no time); export without ${name}, and give the auditor the new bundle's checkpoint to keep`,
        { cause: err },
      );
    throw auditUsage(`${name}: not a checkpoint of this log: ${(err as Error).message}`, { cause: err });
  }
  if (cut.origin !== undefined && old.origin !== cut.origin)
    // The note's origin is the auditor's file's text (a control or bidi character may be in it): quoted, escaped.
    throw auditUsage(`${name}: not a checkpoint of this log: its origin is another (${quoted(old.origin)})`);
  if (old.size > cut.size)
    // Both sizes are numbers (parseCheckpoint's and the log's): nothing from the file to escape.
    throw auditUsage(
      `${name}: the earlier checkpoint has ${old.size} entries, the log ${cut.size}: this store was restored from a backup taken before that checkpoint, or the checkpoint is of another, longer tree of this origin; export without ${name} (a full bundle), or give a checkpoint of this log's tree`,
    );
  const here = await treeHeadAt(old.size, (ids) => log.treeNodes(ids));
  if (!equalBytes(here.root, old.root))
    throw auditUsage(
      `${name}: the earlier checkpoint has another root at size ${old.size} than this log's tree: a fork of this log (keep both checkpoints as evidence and run fsck)`,
    );
  return old.size;
}

/** `consistency.json`: `{ oldSize, proof }` from `oldSize` to `size`. */
export async function consistencyFile(log: ManifestLog, oldSize: number, size: number): Promise<Uint8Array> {
  const proof = oldSize === 0 ? [] : await hashRanges(consistencyRanges(oldSize, size), (ids) => log.treeNodes(ids));
  return new TextEncoder().encode(`${JSON.stringify({ oldSize, proof: proof.map(encodeBase64) })}\n`);
}

/** Each candidate session's proof from the log's session-heads index, and the leaf value it found there. */
export type SessionHeadProofs = Map<string, { proof: SessionHeadProof; value: Uint8Array | undefined }>;

/**
 * Proofs for `sessions` from the log's index as it is now, or `undefined` when one of them does not lead to
 * `root` (the checkpoint's): the log moved on since the checkpoint was taken, and the caller takes a new one.
 * `checkCancelled` is called before each session's proof is read (it throws once the export is cancelled).
 */
export async function sessionHeadProofs(
  log: ManifestLog,
  sessions: Iterable<string>,
  root: Uint8Array,
  checkCancelled: () => void = () => {},
): Promise<SessionHeadProofs | undefined> {
  const read = log.sessionHeadNodes?.bind(log);
  if (!read) return new Map();
  const out: SessionHeadProofs = new Map();
  for (const session of sessions) {
    checkCancelled();
    const proven = await proveSessionHead(read, session);
    const r = rootFromSessionHeadProof(session, proven.value, proven.proof);
    if (!r.ok || !equalBytes(r.root, root)) return undefined;
    out.set(session, proven);
  }
  return out;
}

/**
 * `heads.jsonl`: per session, sorted, `{ session, head: { seq, id } | null, proof }` — the head is the last manifest
 * of the session the bundle holds (null: it holds none, and the proof shows the session absent at the checkpoint).
 */
export function sessionHeadLines(
  proofs: SessionHeadProofs,
  sessions: Iterable<string>,
  exported: ReadonlyMap<string, { seq: number; id: string }>,
): Uint8Array {
  let text = '';
  for (const session of [...new Set(sessions)].sort()) {
    const proven = proofs.get(session);
    const last = exported.get(session);
    // A session that exists but is not in the bundle (`--principal P --session S` where P never published in S) gets
    // no line: its head proves nothing about what P published.
    if (!proven || (last === undefined && proven.value !== undefined)) continue;
    const head = last === undefined ? null : { seq: last.seq, id: last.id };
    text += `${JSON.stringify({ session, head, proof: proven.proof })}\n`;
  }
  return new TextEncoder().encode(text);
}
