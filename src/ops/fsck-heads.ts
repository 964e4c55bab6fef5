/**
 * fsck of the session-heads index (manifests/tlog/session-heads.ts): rebuilds its root from the chains' heads and
 * compares it with the root the log commits in checkpoints, then walks every session's path through the stored
 * nodes: each must end at that session's head and lead to the same root. A damaged node anywhere on a path shows,
 * even where the cached root still looks right.
 */
import { throwIfCancelled } from '../errors.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import { isTreeDamage } from '../../manifests/errors.js';
import { equalBytes } from '../../manifests/tlog/merkle.js';
import {
  buildSessionHeads,
  headValue,
  proveSessionHead,
  rootFromSessionHeadProof,
  type SessionHead,
} from '../../manifests/tlog/session-heads.js';
import type { FsckFinding } from './maintenance.js';

const MAX_REPORTED = 100;

/** Each chain's session and head, as the session-heads index keys and stores them. */
export type ChainHeads = Array<{ session: string; head: SessionHead }>;

/**
 * `heads`: every chain head, as fsck's chain walk collected them; undefined when that walk did not finish,
 * and the heads are read here.
 */
export async function fsckSessionHeads(
  log: ManifestLog,
  heads: ChainHeads | undefined,
  signal?: AbortSignal,
): Promise<FsckFinding[]> {
  const read = log.sessionHeadNodes?.bind(log);
  if (!read) return [];
  let committed: Uint8Array | undefined;
  try {
    committed = (await log.treeHead()).sessionHeads;
  } catch (err) {
    // The tree head, which carries the index's root, cannot be read (a node on the tree's right edge missing or
    // malformed, a damaged root record): named, and the index is held to its root once the head can be read again.
    if (isTreeDamage(err)) return [{ code: err.code, message: err.message }];
    throw err;
  }
  if (!committed) {
    // A log with an index commits no root only when its root record could not be read at open (appends are then
    // refused TREE_DAMAGED): read it again, so its damage is reported as such (RECORD_CORRUPT, thrown to fsck).
    await read([{ depth: 0, prefix: new Uint8Array(32) }]);
    return [
      {
        code: 'SESSION_HEADS_ROOT',
        message: 'the log commits no session-heads root: its index could not be read when the store was opened',
      },
    ];
  }
  const findings: FsckFinding[] = [];
  if (!heads) {
    heads = [];
    for await (const h of log.heads()) heads.push({ session: h.session, head: { seq: h.seq, id: h.id } });
  }
  const built = buildSessionHeads(heads);
  if (!equalBytes(built.root, committed))
    findings.push({
      code: 'SESSION_HEADS_ROOT',
      message: "the session-heads root the log commits in checkpoints is not the index of the chains' heads",
    });
  // Every stored node must be one of the index's: a record on no session's path (damage) is in no proof, but a later
  // append that passes by it could fold it into a signed root.
  const stored = await log.sessionHeadNodeCount?.();
  if (stored !== undefined && stored !== built.nodes.length)
    findings.push({
      code: 'SESSION_HEADS_ROOT',
      message: `session-heads index: ${stored} nodes are stored where the index of the chains' heads has ${built.nodes.length} (a record on no session's path, or one missing)`,
    });
  let reported = 0;
  for (const { session, head } of heads) {
    throwIfCancelled(signal);
    const { proof, value } = await proveSessionHead(read, session);
    const r = rootFromSessionHeadProof(session, value, proof);
    const problem =
      value === undefined
        ? 'the stored index has no leaf for the session'
        : !equalBytes(value, headValue(head))
          ? "the stored leaf is not the session's head"
          : !r.ok || !equalBytes(r.root, committed)
            ? "the stored nodes on the session's path do not lead to the committed root"
            : undefined;
    if (problem && reported++ < MAX_REPORTED)
      findings.push({ code: 'SESSION_HEADS_ROOT', session, message: `session-heads index: ${problem}` });
  }
  return findings;
}
