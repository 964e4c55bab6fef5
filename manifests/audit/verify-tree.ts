/**
 * Step 9 of the offline audit: the bundle against the log's signed checkpoint (C2SP tlog-checkpoint).
 *
 *   9a  the checkpoint is signed by a pinned checkpoint key named after its origin   CHECKPOINT_*
 *   9b  full bundle: its lines are exactly the tree's leaves (size, then root)       TREE_SIZE_MISMATCH, TREE_ROOT_MISMATCH
 *       filtered bundle: each line has an inclusion proof into the checkpoint        INCLUSION_PROOF_*
 *   9c  `since`: the checkpoint extends the auditor's earlier one                     CONSISTENCY_*
 *   9d  pinned witnesses: a quorum of valid cosignatures (verify-witnesses.ts)        WITNESS_*
 *
 * Leaves are the exact base64-decoded payloads of the lines, so a removed, added, reordered or changed
 * manifest anywhere (the tail included) changes the root. Isomorphic.
 */
import { auditUsage } from './errors.js';
import { counted, quoted } from '../encoding/printable.js';
import {
  BUNDLE_CHECKPOINT_FILE,
  BUNDLE_CONSISTENCY_FILE,
  BUNDLE_PROOFS_FILE,
  textLines,
  type BundleReader,
} from './bundle.js';
import type { FindingSink } from './findings.js';
import type { RawLine } from './verify-line.js';
import { openNote, type OpenedNote } from '../crypto/note.js';
import type { SignatureVerifier } from '../crypto/ed25519.js';
import { ManifestError } from '../errors.js';
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { parseCheckpoint, type Checkpoint } from '../format/checkpoint.js';
import {
  byHostThenKeyId,
  checkpointRevocationKey,
  checkpointVerifiers,
  revokedCheckpointListings,
  type TrustedCheckpointKey,
  type TrustStore,
} from '../format/trust.js';
import { parseVerifierKey, type NoteVerifierKey } from '../crypto/note.js';
import { equalBytes, leafHash, verifyConsistency, verifyInclusion } from '../tlog/merkle.js';
import { leafOfLine } from '../tlog/leaf.js';
import { appendLeafHashes, rootOf, type TreeNode } from '../tlog/tree.js';
import { verifyWitnesses, type WitnessPolicy, type WitnessSummary } from './verify-witnesses.js';
import { escapedText, shownValue } from '../../store/errors.js';

export interface TreeCheckOptions {
  trust: TrustStore;
  verifier?: SignatureVerifier | undefined;
  /** The auditor's earlier checkpoint (a signed note): the bundle's checkpoint must extend it. */
  since?: string | undefined;
  /** Pinned witnesses: the checkpoint counts only with a quorum of their cosignatures (step 9d). */
  witnesses?: WitnessPolicy | undefined;
}

/** What the report says about the checkpoint the bundle was verified against. */
export interface CheckpointSummary {
  origin: string;
  size: number;
  root: string;
  signedBy: string[];
  /** Step 9d, when witnesses are pinned: the quorum and which pinned witnesses cosigned, and when. */
  witnesses?: WitnessSummary | undefined;
  /** The signed extension lines (the session-heads root among them, step 10). */
  extensions: string[];
}

/**
 * The lines' leaf hashes, as step 9 needs them, in memory that does not grow with a hostile bundle's bytes where
 * it need not: a full bundle's leaves are folded into the tree's frontier as they stream past (log n hashes, and
 * the root at the auditor's `since` size taken on the way); a filtered bundle's are kept for their inclusion
 * proofs, packed (32 bytes a line). `startTreeCheck` makes one only for a checkpoint that verifies.
 */
/** A line of a filtered bundle past as many lines with a payload as the checkpoint has leaves. */
const EXCESS = Symbol('excess');

export class LeafTap {
  /** Lines seen (the bundle's line count, once the stream ended). */
  count = 0;
  /** fold: the tree's frontier over the lines so far (the tree code the ledger appends with). */
  private frontier: TreeNode[] = [];
  /** A line without a decodable payload: no root can be computed from here on. */
  private broken = false;
  private snapshot: Uint8Array | undefined;
  /** keep: the leaves of the lines that have one, in order, 32 bytes each; and a bit a line saying which do. */
  private packed: Uint8Array | undefined;
  private leaves = 0;
  private present: Uint8Array | undefined;
  /** keep: the first line whose leaf was not kept, the checkpoint's leaves being all kept already. */
  private excessFrom = Infinity;

  constructor(
    private readonly mode: 'fold' | 'keep',
    private readonly snapshotAt: number | undefined,
    /**
     * keep: the most leaves kept, the checkpoint's size. A filtered bundle's lines each need a leaf index of their
     * own below it, so lines past that many are refused, not kept (a hostile bundle of tiny lines would otherwise
     * grow the packed leaves past what a typed array holds).
     */
    private readonly keepAtMost = Infinity,
  ) {
    if (mode === 'keep') {
      this.packed = new Uint8Array(32 * 1024);
      this.present = new Uint8Array(1024 / 8);
    }
  }

  /** Passes the runs on, taking each line's leaf hash (undefined: a line with no decodable payload). */
  async *tap(runs: AsyncIterable<RawLine[]>): AsyncGenerator<RawLine[]> {
    for await (const run of runs) {
      for (const raw of run) {
        const leaf = raw.text === undefined ? undefined : leafOfLine(raw.text);
        const hash = leaf && leafHash(leaf);
        while (this.count < raw.line - 1) this.add(undefined); // lines are numbered from 1, in order
        this.add(hash);
      }
      yield run;
    }
  }

  private add(hash: Uint8Array | undefined): void {
    const i = this.count++;
    if (this.mode === 'keep') {
      if (i >> 3 >= this.present!.length) this.present = grown(this.present!);
      if (!hash) return;
      if (this.leaves >= this.keepAtMost) {
        this.excessFrom = Math.min(this.excessFrom, i);
        return;
      }
      if ((this.leaves + 1) * 32 > this.packed!.length) this.packed = grown(this.packed!);
      this.packed!.set(hash, this.leaves++ * 32);
      this.present![i >> 3]! |= 1 << (i & 7);
      return;
    }
    if (!hash) this.broken = true;
    else if (!this.broken) this.frontier = appendLeafHashes(this.frontier, i, [hash]).frontier;
    if (this.count === this.snapshotAt) this.snapshot = this.root();
  }

  /** The root of every line so far (a full bundle), or undefined when a line had no payload. */
  root(): Uint8Array | undefined {
    return this.broken ? undefined : rootOf(this.frontier);
  }

  /** The root of the first `size` lines, taken on the way: only at the size the tap was made for. */
  rootAt(size: number): Uint8Array | undefined {
    return size === this.snapshotAt ? this.snapshot : undefined;
  }

  /**
   * Each line's leaf hash in order (a filtered bundle), undefined for a line that had no payload, `EXCESS` from the
   * first line past the checkpoint's leaves on.
   */
  *lines(): Generator<Uint8Array | undefined | typeof EXCESS> {
    let at = 0;
    for (let i = 0; i < this.count; i++) {
      if (i >= this.excessFrom) yield EXCESS;
      else if (this.mode !== 'keep' || (this.present![i >> 3]! & (1 << (i & 7))) === 0) yield undefined;
      else yield this.packed!.subarray(at * 32, ++at * 32);
    }
  }
}

type Opened = { ok: true; checkpoint: Checkpoint; note: OpenedNote } | { ok: false; code: string; message: string };
/** A checkpoint note whose signature verified. */
export type OpenedCheckpoint = Extract<Opened, { ok: true }>;

/**
 * The auditor's earlier checkpoint, opened under the pinned checkpoint keys before any of the bundle is read: one that
 * does not verify is the auditor's mistake, said at once (not after every line was checked). `name` is the option as
 * the caller gave it (`since` to the library, `--since` on the command line and the auditor's page).
 * @throws AuditError `USAGE` when it does not verify
 */
export function openSince(text: string, options: TreeCheckOptions, name: string): OpenedCheckpoint {
  const opened = openCheckpoint(text, options);
  // Its reason may quote the note's origin line, the auditor's file's text: what a terminal acts on escaped.
  if (!opened.ok) throw auditUsage(`${name}: the earlier checkpoint does not verify: ${escapedText(opened.message)}`);
  return opened;
}

/**
 * Step 9 as far as it goes before the lines stream: the bundle's checkpoint read and opened once, the auditor's
 * `since` opened, and a `LeafTap` for the lines when the checkpoint verifies (else no leaf is needed: step 9
 * reports the checkpoint). A full bundle's root is taken at `since`'s size on the way.
 */
export interface TreeStart {
  text: string | undefined;
  opened: Opened | undefined;
  since: OpenedCheckpoint | undefined;
  leaves: LeafTap | undefined;
}

export async function startTreeCheck(
  reader: BundleReader,
  filtered: boolean,
  options: TreeCheckOptions,
  /** The auditor's earlier checkpoint (`openSince`), when one was given. */
  since: OpenedCheckpoint | undefined,
): Promise<TreeStart> {
  const text = await reader.treeFile?.(BUNDLE_CHECKPOINT_FILE);
  const opened = text === undefined ? undefined : openCheckpoint(text, options);
  const leaves = opened?.ok
    ? new LeafTap(filtered ? 'keep' : 'fold', since?.checkpoint.size, opened.checkpoint.size)
    : undefined;
  return { text, opened, since, leaves };
}

/** A buffer twice as long holding `bytes` at its start. */
function grown(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes.length * 2);
  out.set(bytes);
  return out;
}

function openCheckpoint(text: string, options: TreeCheckOptions): Opened {
  try {
    const note = openNote(text, checkpointVerifiers(options.trust), options.verifier);
    const checkpoint = parseCheckpoint(note.text);
    // The key must be the log's own: a pinned key of another log does not vouch for this origin.
    if (!note.sigs.some((s) => s.name === checkpoint.origin))
      return {
        ok: false,
        code: 'CHECKPOINT_UNTRUSTED',
        message: `no pinned key named ${quoted(checkpoint.origin)} signed it`,
      };
    return { ok: true, checkpoint, note };
  } catch (err) {
    if (!(err instanceof ManifestError)) throw err;
    if (err.code === 'NOTE_UNVERIFIED') {
      // Signed by a key the trust file pins and revokes: say so, not that the file lacks the key (an auditor would ask
      // for a newer trust file, which revokes it too, rather than for a bundle signed since the revocation).
      const revoked = revokedSigner(text, options);
      if (revoked)
        return {
          ok: false,
          code: 'CHECKPOINT_UNTRUSTED',
          message: `signed by checkpoint key ${quoted(revoked.keyId)} of host ${quoted(revoked.host)}, which the trust file revokes (at ${shownValue(revoked.revokedAt)}): a revoked checkpoint key's checkpoints are refused whenever they were signed (checkpoints carry no time); a bundle exported since the revocation is signed by the host's current key`,
        };
      // Say which keys were tried: none pinned (a trust file without checkpointKeys), or not the one that signed (a
      // trust file from before the host's last key rotation lacks its new checkpoint key).
      const pinned = options.trust.checkpointKeys?.length ?? 0;
      return {
        ok: false,
        code: 'CHECKPOINT_UNTRUSTED',
        message:
          pinned === 0
            ? 'the trust file pins no checkpoint key (checkpointKeys: `keys export` writes them)'
            : `no signature by ${pinned === 1 ? 'the checkpoint key' : `any of the ${pinned} checkpoint keys`} the trust file pins (one exported before the host's last key rotation lacks the new key)`,
      };
    }
    const code = err.code === 'NOTE_SIGNATURE_INVALID' ? 'CHECKPOINT_SIGNATURE_INVALID' : 'CHECKPOINT_INVALID';
    return { ok: false, code, message: err.message };
  }
}

/**
 * The trust entry that revokes the key of a valid signature on a note no unrevoked pinned key signed (the earliest
 * revocation when several entries do), or undefined when no revoked key signed it. A listing that is no verifier key
 * (a store built by hand, not parsed) is passed over.
 */
export function revokedSigner(
  text: string,
  options: Pick<TreeCheckOptions, 'trust' | 'verifier'>,
): TrustedCheckpointKey | undefined {
  const revoked: Array<{ entry: TrustedCheckpointKey; key: NoteVerifierKey }> = [];
  for (const entry of options.trust.checkpointKeys ?? []) {
    if (entry.revokedAt === undefined) continue;
    try {
      revoked.push({ entry, key: parseVerifierKey(entry.vkey) });
    } catch {
      // not a key: it signed nothing
    }
  }
  if (revoked.length === 0) return undefined;
  let note: OpenedNote;
  try {
    note = openNote(
      text,
      revoked.map((r) => r.key),
      options.verifier,
    );
  } catch {
    return undefined;
  }
  const signers = revoked
    .filter((r) => note.sigs.some((s) => s.name === r.key.name && s.keyHash === r.key.keyHash))
    .map((r) => r.entry);
  return signers.sort((a, b) => Date.parse(a.revokedAt!) - Date.parse(b.revokedAt!))[0];
}

const hashes = (v: unknown): Uint8Array[] | undefined => {
  if (!Array.isArray(v) || v.length > 128) return undefined;
  const out = v.map((s) => (typeof s === 'string' ? decodeBase64(s) : undefined));
  return out.every((h) => h?.length === 32) ? (out as Uint8Array[]) : undefined;
};

/**
 * The trust entries (host, key id) whose keys made the verified signatures of an opened checkpoint note, by host then
 * key id, one count a signature (the report's `checked.signers.checkpoints`). A signature verified under the first
 * unrevoked checkpoint key with its name and key hash (as `openNote` looks keys up); every unrevoked entry listing that
 * same verifier key is named, so the answer does not depend on the order of the trust files merged.
 */
export function checkpointSigners(
  note: OpenedNote,
  trust: TrustStore,
): Array<{ host: string; keyId: string; count: number }> {
  const revoked = revokedCheckpointListings(trust);
  const listed = (trust.checkpointKeys ?? [])
    .filter((k) => !revoked.has(checkpointRevocationKey(k)))
    .map((entry) => ({ entry, key: parseVerifierKey(entry.vkey) }));
  const counts = new Map<string, { host: string; keyId: string; count: number }>();
  for (const sig of note.sigs) {
    const used = listed.find((l) => l.key.name === sig.name && l.key.keyHash === sig.keyHash);
    if (!used) continue;
    for (const { entry } of listed) {
      if (entry.vkey !== used.entry.vkey) continue;
      const name = `${entry.host}\u0000${entry.keyId}`;
      const known = counts.get(name);
      if (known) known.count++;
      else counts.set(name, { host: entry.host, keyId: entry.keyId, count: 1 });
    }
  }
  return [...counts.values()].sort(byHostThenKeyId);
}

/**
 * Runs step 9. Returns the checkpoint summary, or `undefined` when the bundle has no checkpoint and none
 * was demanded (no pinned checkpoint key, no `since`).
 */
export async function verifyTree(
  reader: BundleReader,
  start: TreeStart,
  filtered: boolean,
  options: TreeCheckOptions,
  sink: FindingSink,
): Promise<CheckpointSummary | undefined> {
  const { text, opened, leaves } = start;
  if (text === undefined || opened === undefined) {
    // What demands one, said: a bundle from before checkpoints, verified without any of these, passes without one.
    // Any pinned checkpoint key demands one, a revoked one too: its checkpoints are refused (CHECKPOINT_UNTRUSTED), and
    // a bundle must not do better by leaving its checkpoint out than by carrying it.
    const demands = [
      ...((options.trust.checkpointKeys?.length ?? 0) > 0 ? ['the pinned checkpoint keys'] : []),
      ...(options.witnesses ? ['the pinned witness keys'] : []),
      ...(options.since !== undefined ? ['the earlier checkpoint given'] : []),
    ];
    if (demands.length > 0)
      sink.add({
        code: 'CHECKPOINT_MISSING',
        message:
          `the bundle has no ${BUNDLE_CHECKPOINT_FILE}, which ${demands.join(' and ')} ` +
          `${demands.length === 1 && options.since !== undefined ? 'requires' : 'require'}: without it, no line is ` +
          'held to a signed tree (newest manifests left out or lines replaced go unseen)',
      });
    return undefined;
  }
  // 9a
  if (!opened.ok || !leaves) {
    if (!opened.ok)
      sink.add({ code: opened.code as 'CHECKPOINT_INVALID', message: `${BUNDLE_CHECKPOINT_FILE}: ${opened.message}` });
    return undefined;
  }
  const cp = opened.checkpoint;
  const summary: CheckpointSummary = {
    origin: cp.origin,
    size: cp.size,
    root: encodeBase64(cp.root),
    signedBy: opened.note.sigs.map((s) => `${s.name}+${s.keyHash.toString(16).padStart(8, '0')}`),
    extensions: cp.extensions,
  };
  // 9d first in the report's summary, though independent of 9b/9c: who vouches that this is the one tree.
  if (options.witnesses) summary.witnesses = verifyWitnesses(text, options.witnesses, sink, options.verifier);
  // 9b
  let linesMatch = false; // a full bundle whose lines hash to the checkpoint: its prefixes are the checkpoint's
  if (!filtered) {
    if (leaves.count !== cp.size) {
      sink.add({
        code: 'TREE_SIZE_MISMATCH',
        message: `the checkpoint covers ${counted(cp.size, 'manifest')}; the bundle has ${counted(leaves.count, 'line')}`,
        evidence: { expected: cp.size, actual: leaves.count },
      });
    } else {
      const root = leaves.root();
      linesMatch = root !== undefined && equalBytes(root, cp.root);
      if (!linesMatch)
        sink.add({
          code: 'TREE_ROOT_MISMATCH',
          message: 'the lines do not hash to the checkpoint root: a manifest was changed, replaced or reordered',
          evidence: { expected: summary.root, actual: root ? encodeBase64(root) : null },
        });
    }
  } else await verifyInclusions(reader, leaves, cp, sink);
  // 9c
  if (start.since !== undefined) await verifySince(reader, leaves, cp, start.since, sink, linesMatch);
  return summary;
}

async function verifyInclusions(
  reader: BundleReader,
  leaves: LeafTap,
  cp: Checkpoint,
  sink: FindingSink,
): Promise<void> {
  // Walked a line at a time beside the bundle's lines: a proofs file of more lines is read no further.
  const proofLines = textLines((await reader.treeFile?.(BUNDLE_PROOFS_FILE)) ?? '');
  let lastIndex = -1;
  let i = -1;
  for (const leaf of leaves.lines()) {
    i++;
    const line = i + 1;
    const text = proofLines.next().value;
    let entry: { leafIndex?: unknown; proof?: unknown } | undefined;
    try {
      entry = text ? (JSON.parse(text) as typeof entry) : undefined;
    } catch {
      entry = undefined;
    }
    const proof = hashes(entry?.proof);
    const index = entry?.leafIndex;
    if (!entry || !proof || typeof index !== 'number' || !Number.isSafeInteger(index)) {
      sink.add({ code: 'INCLUSION_PROOF_MISSING', line, message: `no well-formed inclusion proof for line ${line}` });
      continue;
    }
    const r =
      leaf === EXCESS
        ? {
            ok: false as const,
            reason: `the bundle has more lines with a payload than the checkpoint has leaves (${cp.size})`,
          }
        : leaf
          ? index > lastIndex
            ? verifyInclusion(index, cp.size, leaf, proof, cp.root)
            : { ok: false as const, reason: `leaf index ${index} does not follow ${lastIndex} (global order)` }
          : { ok: false as const, reason: 'the line has no payload' };
    if (!r.ok)
      sink.add({
        code: 'INCLUSION_PROOF_INVALID',
        line,
        message: `line ${line} is not in the checkpoint: ${r.reason}`,
      });
    lastIndex = Math.max(lastIndex, index);
  }
}

/**
 * Step 9c: the bundle's signed checkpoint extends the auditor's earlier one. Judged on the checkpoint itself: at the
 * same size its root must be the earlier root; else, in a full bundle whose lines hash to the checkpoint (9b), by the
 * root of the lines' first `size` leaves; else (a filtered bundle, or lines that do not match their checkpoint) by the
 * bundle's consistency proof. Lines that do not match say nothing of the signed tree.
 */
async function verifySince(
  reader: BundleReader,
  leaves: LeafTap,
  cp: Checkpoint,
  old: OpenedCheckpoint,
  sink: FindingSink,
  linesMatch: boolean,
): Promise<void> {
  const o = old.checkpoint;
  const fail = (message: string) =>
    sink.add({
      code: 'CONSISTENCY_INVALID',
      message: `the checkpoint does not extend the earlier one (size ${o.size}): ${message}`,
      evidence: { expected: encodeBase64(o.root), actual: summaryRoot(cp) },
    });
  if (o.origin !== cp.origin) return fail(`another log (${o.origin})`);
  if (o.size > cp.size) return fail(`the log shrank to ${cp.size} (rolled back)`);
  if (o.size === 0) return;
  if (o.size === cp.size) {
    if (!equalBytes(o.root, cp.root)) fail(`another root at the same size (forked)`);
    return;
  }
  if (linesMatch) {
    const root = o.size === leaves.count ? leaves.root() : leaves.rootAt(o.size);
    if (!root || !equalBytes(root, o.root)) fail(`the bundle's first ${o.size} manifests have another root`);
    return;
  }
  const text = await reader.treeFile?.(BUNDLE_CONSISTENCY_FILE);
  let c: { oldSize?: unknown; proof?: unknown } | undefined;
  try {
    c = text === undefined ? undefined : (JSON.parse(text) as typeof c);
  } catch {
    c = undefined;
  }
  const proof = hashes(c?.proof);
  if (!c || c.oldSize !== o.size || !proof) {
    // Why, in words that send the auditor the right way: a bundle exported with --since (a consistency.json there)
    // from another earlier checkpoint, or damaged, is not mended by "export it with --since" alone.
    const why =
      text === undefined
        ? ' (export it with --since)'
        : proof && typeof c?.oldSize === 'number' && Number.isSafeInteger(c.oldSize) && c.oldSize >= 0
          ? `: ${BUNDLE_CONSISTENCY_FILE} proves the log from size ${c.oldSize} (export it with --since your earlier checkpoint)`
          : `: ${BUNDLE_CONSISTENCY_FILE} is not a well-formed proof (export it again with --since)`;
    sink.add({ code: 'CONSISTENCY_MISSING', message: `no consistency proof from size ${o.size}${why}` });
    return;
  }
  const r = verifyConsistency(o.size, cp.size, proof, o.root, cp.root);
  if (!r.ok) fail(r.reason);
}

const summaryRoot = (cp: Checkpoint) => encodeBase64(cp.root);
