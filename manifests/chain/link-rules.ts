/**
 * The rules between a manifest and the one before it in its chain (DESIGN.md, "Core contracts"): seq
 * starts at 0 and has no gaps, `prev` is the id of the manifest at seq - 1, time does not run backwards.
 * One implementation for the offline auditor (audit/chain-rules.ts), fsck and the ledger's history and
 * resume (./checker.ts). The codes are the auditor's finding codes. Isomorphic.
 */
import type { Digest } from '../../store/hash/digest.js';

/** What the link rules read of a (verified) manifest. */
export interface ChainLink {
  seq: number;
  id: Digest;
  prev: Digest | null;
  /** Fixed-width ISO-8601 UTC (schema-checked), so string order is time order; absent when unknown. */
  createdAt?: string;
}

export type LinkRuleCode = 'SEQ_NOT_ZERO' | 'SEQ_GAP' | 'PREV_MISMATCH' | 'TIME_REVERSED';

export interface LinkViolation {
  code: LinkRuleCode;
  message: string;
  expected: string | number | null;
  actual: string | number | null;
}

/**
 * Checks `e` against `parent`, the manifest before it (undefined: `e` is the first one read, which must
 * be at `startsAt`, 0 for a whole chain). Returns the first rule broken, in the order seq, prev, time.
 */
export function checkLink(parent: ChainLink | undefined, e: ChainLink, startsAt = 0): LinkViolation | undefined {
  if (!parent) {
    if (e.seq === startsAt) return undefined;
    return startsAt === 0
      ? { code: 'SEQ_NOT_ZERO', message: `chain starts at seq ${e.seq}, not 0`, expected: 0, actual: e.seq }
      : { code: 'SEQ_GAP', message: `expected seq ${startsAt}, found seq ${e.seq}`, expected: startsAt, actual: e.seq };
  }
  const expected = parent.seq + 1;
  if (e.seq !== expected) {
    const message =
      e.seq > expected
        ? `seq ${expected === e.seq - 1 ? expected : `${expected}..${e.seq - 1}`} missing before seq ${e.seq}`
        : `seq ${e.seq} follows seq ${parent.seq}`;
    return { code: 'SEQ_GAP', message, expected, actual: e.seq };
  }
  if (e.prev !== parent.id) {
    return {
      code: 'PREV_MISMATCH',
      message: `prev ${e.prev} is not the id of a manifest at seq ${e.seq - 1}`,
      expected: parent.id,
      actual: e.prev,
    };
  }
  if (parent.createdAt !== undefined && e.createdAt !== undefined && e.createdAt < parent.createdAt) {
    return {
      code: 'TIME_REVERSED',
      message: `createdAt ${e.createdAt} is before ${parent.createdAt} of seq ${e.seq - 1}`,
      expected: parent.createdAt,
      actual: e.createdAt,
    };
  }
  return undefined;
}
