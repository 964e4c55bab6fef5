/**
 * The rules a chain head obeys, in one place: the log's recovery check at open (`checkHeads`), resume's
 * reading of a head, and fsck all apply them. Isomorphic.
 */
import type { Digest } from '../../store/hash/digest.js';
import type { ChainHead, HeadWindow } from '../log/log.js';

/**
 * `HEAD_MISMATCH`: the head names no stored entry with its id. `ROLLBACK`: the chain was cut back: the head
 * is below the highest seq already verified or published (the watermark), or entries lie beyond it.
 * `RECORD_CORRUPT`: a stored record the check needed cannot be parsed (reported, never a reason to refuse
 * opening: fsck needs the store open).
 */
export type HeadProblemCode = 'HEAD_MISMATCH' | 'ROLLBACK' | 'RECORD_CORRUPT';

export interface HeadProblem {
  session: string;
  code: HeadProblemCode;
  problem: string;
}

/** What the rules look at for one session, as read from a log. */
export interface HeadFacts {
  session: string;
  head: ChainHead | undefined;
  /** The stored entry at the head's seq, or at least its id (undefined: none, or no head). */
  entryAtHead: { id: Digest } | undefined;
  /**
   * True when an entry is stored at the seq after the head; with no head, when the session has any entry at all
   * (the `ROLLBACK` rule, `cutBackProblems`: with the head, the watermark and entry 0 removed, seq 1… still tell).
   */
  entryBeyondHead: boolean;
  /** Highest seq verified or published for the session (undefined: none recorded). */
  watermark: number | undefined;
}

/** What the `ROLLBACK` rule looks at (`cutBackProblems`): the head's seq, entries beyond it, the watermark. */
export interface CutBackFacts {
  head: { seq: number } | undefined;
  entryBeyondHead: boolean;
  watermark: number | undefined;
  /**
   * The session-heads index commits another head than `head`, or none (HeadWindow.index `ROLLBACK`, a head record set
   * back or removed under the index), if so: the embedded log's appends refuse with it, PostgreSQL's in their index
   * update (`SessionHeadsUpdate.set`'s `previous`, the same problem), and both logs' `sessionAppendRefusal` (checkPublish,
   * before the model) with it.
   */
  indexProblem?: string | undefined;
  /**
   * The session's path in the session-heads index is not whole (HeadWindow.index `TREE_DAMAGED`: it does not hash to the
   * stored root; `RECORD_CORRUPT`: a node on it or beside it cannot be read), if so, with the message the append's index
   * update refuses it with (`problem`). Not the `ROLLBACK` rule's (`cutBackProblems` leaves it out): both logs' appends
   * meet it in their index update, and `sessionAppendRefusal` (checkPublish, before the model) refuses with it after
   * that rule.
   */
  indexDamage?: { code: 'TREE_DAMAGED' | 'RECORD_CORRUPT'; problem: string } | undefined;
}

/**
 * The facts' `indexProblem` and `indexDamage` from a head's judgement by the session-heads index (HeadWindow.index):
 * `ROLLBACK` is the one, a path not whole the other, with the append's words for it.
 */
export function indexFacts(index: HeadWindow['index']): Pick<CutBackFacts, 'indexProblem' | 'indexDamage'> {
  if (index === undefined) return { indexProblem: undefined, indexDamage: undefined };
  if (index.code === 'ROLLBACK') return { indexProblem: index.problem, indexDamage: undefined };
  return { indexProblem: undefined, indexDamage: { code: index.code, problem: index.appendProblem ?? index.problem } };
}

/**
 * The `ROLLBACK` rule alone: each way the chain was cut back, most decisive first (empty: it was not). Both logs'
 * appends refuse with the first (ManifestLog.append, `sessionAppendRefusal`), as a reader does with `headProblems`.
 */
export function cutBackProblems(f: CutBackFacts): string[] {
  const out: string[] = [];
  const headSeq = f.head?.seq ?? -1;
  if (f.watermark !== undefined && headSeq < f.watermark)
    out.push(`head is at seq ${f.head?.seq ?? 'none'}, but seq ${f.watermark} was already verified`);
  if (f.entryBeyondHead)
    out.push(f.head ? `entries exist beyond head seq ${headSeq}` : 'entries exist, but no head names them');
  if (f.indexProblem !== undefined) out.push(f.indexProblem);
  return out;
}

/** The problems of one session's head, most decisive first (a reader refuses with the first). */
export function headProblems(f: HeadFacts): HeadProblem[] {
  const out: HeadProblem[] = [];
  const at = (code: HeadProblemCode, problem: string) => out.push({ session: f.session, code, problem });
  for (const problem of cutBackProblems(f)) at('ROLLBACK', problem);
  if (f.head && f.entryAtHead?.id !== f.head.id) at('HEAD_MISMATCH', `head seq ${f.head.seq} has no matching entry`);
  return out;
}
