import { LedgerError } from '../errors.js';
import { readOptionFields, shownValue } from '../../store/errors.js';

/** Compact when the context is 70% full: room remains for the compaction request and its answer. */
export const DEFAULT_COMPACTION_RATIO = 0.7;

export interface ShouldCompactOptions {
  /** Tokens the current context uses (as the provider or the Harness counts them). */
  usedTokens: number;
  /** The model's context window, in tokens. */
  contextWindow: number;
  /** Fraction of the window at which to compact, in (0, 1]; default 0.7. */
  ratio?: number | undefined;
}

/**
 * Whether the Harness should compact now: `usedTokens >= ratio × contextWindow`.
 * @throws LedgerError `INVALID_ARGUMENT` (no options object, negative or non-finite counts, a window ≤ 0, a ratio outside (0, 1])
 * @example
 * shouldCompact({ usedTokens: 140_000, contextWindow: 200_000 }); // true
 */
export function shouldCompact(options: ShouldCompactOptions): boolean {
  if (typeof options !== 'object' || options === null)
    throw new LedgerError('INVALID_ARGUMENT', 'shouldCompact needs { usedTokens, contextWindow }');
  // Each field read once (a getter that throws, or a name it does not know — a misspelt ratio would be the default —:
  // INVALID_ARGUMENT naming it).
  const {
    usedTokens,
    contextWindow,
    ratio = DEFAULT_COMPACTION_RATIO,
  } = readOptionFields(
    options,
    ['usedTokens', 'contextWindow', 'ratio'],
    'shouldCompact options',
    LedgerError,
  ) as ShouldCompactOptions;
  if (!Number.isFinite(usedTokens) || usedTokens < 0) {
    throw new LedgerError('INVALID_ARGUMENT', `usedTokens must be a finite number ≥ 0, got ${shownValue(usedTokens)}`);
  }
  if (!Number.isFinite(contextWindow) || contextWindow <= 0) {
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `contextWindow must be a finite number > 0, got ${shownValue(contextWindow)}`,
    );
  }
  if (!Number.isFinite(ratio) || ratio <= 0 || ratio > 1) {
    throw new LedgerError('INVALID_ARGUMENT', `ratio must be in (0, 1], got ${shownValue(ratio)}`);
  }
  // Divided, not multiplied: `0.55 * 100` is 55.00000000000001 and 55 tokens would never reach it, while 55 / 100
  // rounds to the same double as the ratio written 0.55 (and a tiny product cannot underflow to 0).
  return usedTokens / contextWindow >= ratio;
}
