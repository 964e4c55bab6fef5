/**
 * The C2SP tlog-witness `add-checkpoint` call (github.com/C2SP/C2SP tlog-witness.md), without I/O: the
 * request body (`old <size>` line, at most 63 base64 consistency-proof lines, a blank line, the signed
 * checkpoint) and the witness's decision against its stored view of the log. The HTTP server
 * (src/witness/server.ts) and the ledger's submitter (src/ledger/witnessing.ts) both use it, so the two
 * sides cannot disagree about the format. Isomorphic.
 */
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';
import { openNote, MAX_NOTE_BYTES, type NoteVerifierKey, type OpenedNote } from '../crypto/note.js';
import { parseCheckpoint, type Checkpoint } from '../format/checkpoint.js';
import { EMPTY_ROOT, equalBytes, HASH_SIZE, verifyConsistency } from '../tlog/merkle.js';

/** The spec's bound on proof lines (a proof of a 2^63-leaf tree needs fewer). */
export const MAX_PROOF_LINES = 63;
/** The `Content-Type` of a 409 answer's body (the witness's size for the log). */
export const TLOG_SIZE_CONTENT_TYPE = 'text/x.tlog.size';

export interface AddCheckpointRequest {
  oldSize: number;
  proof: Uint8Array[];
  /** The signed checkpoint note, exactly as sent. */
  note: string;
}

/** What a witness keeps per log: the latest checkpoint it cosigned. */
export interface WitnessedTree {
  size: number;
  root: Uint8Array;
}

export type AddCheckpointDecision =
  | { status: 200; checkpoint: Checkpoint; text: string; logSignatures: string[] }
  | { status: 400 | 403 | 404 | 422; reason: string }
  | { status: 409; reason: string; size: number };

const SIZE = /^(0|[1-9][0-9]{0,15})$/;

/** The request body. @throws TypeError for a bad size, proof or note */
export function formatAddCheckpoint(request: AddCheckpointRequest): string {
  if (!Number.isSafeInteger(request.oldSize) || request.oldSize < 0) throw new TypeError('old size: a tree size');
  if (request.proof.length > MAX_PROOF_LINES) throw new TypeError(`at most ${MAX_PROOF_LINES} proof hashes`);
  if (request.proof.some((h) => h.length !== HASH_SIZE)) throw new TypeError('proof hashes are 32 bytes');
  return `old ${request.oldSize}\n${request.proof.map((h) => `${encodeBase64(h)}\n`).join('')}\n${request.note}`;
}

/** Parses a request body. @throws ManifestError `INVALID_ARGUMENT` (the witness answers 400) */
export function parseAddCheckpoint(body: string): AddCheckpointRequest {
  const bad = (why: string) => new ManifestError('INVALID_ARGUMENT', `malformed add-checkpoint request: ${why}`);
  if (typeof body !== 'string' || body.length > MAX_NOTE_BYTES) throw bad('not text, or too long');
  let at = 0;
  const nextLine = (): string => {
    const nl = body.indexOf('\n', at);
    if (nl < 0) throw bad('a line does not end with a newline');
    const line = body.slice(at, nl);
    at = nl + 1;
    return line;
  };
  const first = nextLine();
  if (!first.startsWith('old ') || !SIZE.test(first.slice(4))) throw bad('the first line must be "old <size>"');
  const oldSize = Number(first.slice(4));
  const proof: Uint8Array[] = [];
  for (let line = nextLine(); line !== ''; line = nextLine()) {
    if (proof.length === MAX_PROOF_LINES) throw bad(`more than ${MAX_PROOF_LINES} proof lines`);
    const hash = decodeBase64(line);
    if (!hash || hash.length !== HASH_SIZE) throw bad('a proof line is not base64 of 32 bytes');
    proof.push(hash);
  }
  return { oldSize, proof, note: body.slice(at) };
}

/** The origin line of a note, read before any signature is checked (it selects the log's keys). */
export function originOf(note: string): string | undefined {
  const nl = note.indexOf('\n');
  return nl > 0 ? note.slice(0, nl) : undefined;
}

/**
 * The witness's decision, in the spec's order: unknown origin 404; no valid signature by the log's keys
 * 403 (a bad one by a known key too); malformed 400; old size above the checkpoint's 400; old size other
 * than the stored one 409 (with the stored size), and so is another root at the stored size (the spec: "If the
 * old size matches the checkpoint size, the witness MUST check that the root hashes are also identical. If they
 * don't match, the witness MUST respond with a 409"); a non-empty-tree root for size 0, a proof from 0, or a
 * failed proof 422. The same size and root with other extension lines passes every check, so it is cosigned
 * (the spec's 200 is a MUST; a cosignature makes no statement on extension lines: C2SP tlog-cosignature).
 * Only a 200 may be cosigned, and only after the caller has stored the new tree.
 * @param logKeys the log's verifier keys, or undefined when the origin is not served
 */
export function decideAddCheckpoint(
  request: AddCheckpointRequest,
  logKeys: NoteVerifierKey[] | undefined,
  stored: WitnessedTree | undefined,
): AddCheckpointDecision {
  if (!logKeys || logKeys.length === 0) return { status: 404, reason: 'unknown log origin' };
  let opened: OpenedNote;
  let checkpoint: Checkpoint;
  try {
    opened = openNote(request.note, logKeys);
    checkpoint = parseCheckpoint(opened.text);
  } catch (err) {
    if (!(err instanceof ManifestError)) throw err;
    const status = err.code === 'NOTE_UNVERIFIED' || err.code === 'NOTE_SIGNATURE_INVALID' ? 403 : 400;
    return { status, reason: err.message };
  }
  const old = request.oldSize;
  if (old > checkpoint.size) return { status: 400, reason: `old size ${old} is above the checkpoint size` };
  const have = stored ?? { size: 0, root: EMPTY_ROOT };
  if (old !== have.size) return { status: 409, reason: `the witness holds size ${have.size}`, size: have.size };
  if (checkpoint.size === 0 && !equalBytes(checkpoint.root, EMPTY_ROOT))
    return { status: 422, reason: 'a tree of size 0 has the empty root' };
  if (old === 0) {
    if (request.proof.length > 0) return { status: 422, reason: 'no proof is due from size 0' };
  } else if (old === checkpoint.size) {
    if (!equalBytes(have.root, checkpoint.root))
      return { status: 409, reason: `another root at the cosigned size ${old}`, size: have.size };
    if (request.proof.length > 0) return { status: 422, reason: 'no proof is due between equal sizes' };
  } else {
    const r = verifyConsistency(old, checkpoint.size, request.proof, have.root, checkpoint.root);
    if (!r.ok) return { status: 422, reason: `the consistency proof fails: ${r.reason}` };
  }
  // The log's verified signatures only: lines by others (other witnesses) are not this witness's to vouch for.
  const logSignatures = opened.sigs.map((sig) => `\u2014 ${sig.name} ${sig.base64}\n`);
  return { status: 200, checkpoint, text: opened.text, logSignatures };
}
