/**
 * Renders a verified handoff as the message the model sees when a session continues. The model gets
 * its context from the Harness, so resuming needs no file access at all.
 */
import type { Resumed } from '../ledger/ledger.js';
import type { ModelMessage } from './model.js';
import { LedgerError } from '../errors.js';
import { isDigest } from '../../store/hash/digest.js';
import { readSummaryValue, summarySchema, type Summary } from '../summary/summary.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';
import { indented, quoted } from './framing.js';

/** First line of every rendered handoff; lets a Harness recognize the message in its context. */
export const HANDOFF_CONTEXT_HEADER = '[handoff] This session continues from an earlier context that was compacted.';

/** Last line of every rendered handoff: nothing of the summary follows it. */
export const HANDOFF_CONTEXT_FOOTER = '[/handoff] End of the handoff.';

function list(title: string, items: readonly string[] | undefined, numbered = false): string[] {
  if (!items || items.length === 0) return [];
  return ['', `${title}:`, ...items.map((item, i) => `${numbered ? `${i + 1}.` : '-'} ${indented(item)}`)];
}

/**
 * The summary as the schema says it is, so that rendering it cannot fail: a summary without its task, or with
 * `nextSteps` that are not a list, was a TypeError. Rendered from the parsed copy, so a getter is read once.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function renderable(summary: unknown): Summary {
  const parsed = readSummaryValue(
    summary,
    (err) =>
      new LedgerError('INVALID_ARGUMENT', 'resumeContext: reading the summary failed (a getter or proxy threw)', {
        cause: err,
      }),
  );
  if (!parsed.success)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `resumeContext: not a handoff summary (${describeZodError(parsed.error, { escaped: true, schema: summarySchema })})`,
    );
  return parsed.data;
}

/**
 * The handoff as one context message, sections in a fixed order so the rendering is deterministic:
 * the message `compact` returns equals the one rendered after a restart from `Ledger.resume`.
 * The summary is the model's own earlier writing, labelled as such, not a user instruction. It is framed
 * closed: between `HANDOFF_CONTEXT_HEADER` and `HANDOFF_CONTEXT_FOOTER`, every line of its text indented (a file
 * path quoted as a JSON string that parses back to it), so no stored text can pose as a section, a verification
 * line or the end.
 * @throws LedgerError `INVALID_ARGUMENT` when given no resumed handoff (`resume` returned `undefined`: there is none
 *   to render), one without its summary, a manifest id (`blake3:` and 64 hex digits: the verification line is framed
 *   closed too) and a seq (a non-negative integer), or a summary the summary schema refuses (a field missing or of
 *   another type: a summary built or changed by hand), or one whose fields throw as they are read (a getter, a
 *   revoked proxy); nothing else (what `resume` and `compact` return passes)
 * @example
 * const resumed = await ledger.resume({ principal, session });
 * const messages = resumed ? [resumeContext(resumed), ...newTurns] : newTurns;
 */
export function resumeContext(given: Pick<Resumed, 'summary' | 'id' | 'seq'>): ModelMessage {
  // Its three fields read once, as checked (a getter or a revoked proxy that throws: INVALID_ARGUMENT, not its error).
  let resumed: Pick<Resumed, 'summary' | 'id' | 'seq'> | undefined;
  if (typeof given === 'object' && given !== null) {
    try {
      resumed = { summary: given.summary, id: given.id, seq: given.seq };
    } catch (err) {
      throw new LedgerError(
        'INVALID_ARGUMENT',
        'resumeContext: reading what resume returned failed (a getter or proxy threw)',
        {
          cause: err,
        },
      );
    }
  }
  if (
    resumed === undefined ||
    typeof resumed.summary !== 'object' ||
    resumed.summary === null ||
    !isDigest(resumed.id) ||
    !Number.isSafeInteger(resumed.seq) ||
    resumed.seq < 0
  )
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `resumeContext needs what resume returned (${given === undefined ? 'undefined: there is no handoff to render' : 'not a resumed handoff'})`,
    );
  const summary = renderable(resumed.summary);
  const lines = [
    HANDOFF_CONTEXT_HEADER,
    `Verified compaction #${resumed.seq} (${resumed.id}). The summary below was written by you at that time.`,
    '',
    `Task: ${indented(summary.task)}`,
    '',
    `State: ${indented(summary.state)}`,
    ...list('Next steps', summary.nextSteps, true),
    ...list('Decisions', summary.decisions),
    ...list('Open questions', summary.openQuestions),
    ...list(
      'Files',
      summary.files?.map((f) => (f.note ? `${quoted(f.path)}: ${f.note}` : quoted(f.path))),
    ),
  ];
  if (summary.notes !== undefined && summary.notes.trim() !== '') lines.push('', `Notes: ${indented(summary.notes)}`);
  lines.push('', HANDOFF_CONTEXT_FOOTER);
  return { role: 'user', content: lines.join('\n') };
}
