/**
 * The one reading of a number an operator writes, shared by the CLI (`wholeNumber`, src/cli/io.ts) and the auditor's
 * settings that the page reads too (`--max-bundle-bytes`, `--quorum`, `?workers=`): isomorphic, so the page bundle
 * takes it without src/cli. ASCII decimal digits only (no sign, blank, fraction, exponent or hex; a leading zero is
 * decimal, `05` is 5), a safe integer within the caller's range; anything else is refused in one wording.
 */
import { shownValue } from '../../store/errors.js';

export interface WholeNumberRange {
  /** As the operator wrote it: `--port`, `HANDOFF_LEDGER_WITNESS_TIMEOUT_MS`, `the page's ?workers=`. */
  name: string;
  min: number;
  max: number;
  /** What it counts (`bytes`, `milliseconds`), for the message. */
  unit?: string;
  /** A word taken beside the numbers (`auto`), named first in the message; the caller reads it before. */
  or?: string;
}

/** The refusal's words: `NAME must be [OR or ]a whole number [of UNIT] from MIN to MAX, not "TEXT"`. */
export function wholeNumberMessage(text: string, range: WholeNumberRange): string {
  const { name, min, max, unit, or } = range;
  return `${name} must be ${or === undefined ? '' : `${or} or `}a whole number${unit === undefined ? '' : ` of ${unit}`} from ${min} to ${max}, not ${shownValue(text)}`;
}

/**
 * `text` as a whole number within `range`.
 * @param refuse the caller's usage error (the CLI's `UsageError`, the auditor's `USAGE`), given `wholeNumberMessage`
 */
export function readWholeNumber(text: string, range: WholeNumberRange, refuse: (message: string) => Error): number {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < range.min || n > range.max)
    throw refuse(wholeNumberMessage(text, range));
  return n;
}
