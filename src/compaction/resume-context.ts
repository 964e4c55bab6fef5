/**
 * Renders a verified handoff as the message the model sees when a session continues. The model gets
 * its context from the Harness, so resuming needs no file access at all.
 */
import type { Resumed } from '../ledger/ledger.js';
import type { ModelMessage } from './model.js';

/** First line of every rendered handoff; lets a Harness recognize the message in its context. */
export const HANDOFF_CONTEXT_HEADER = '[handoff] This session continues from an earlier context that was compacted.';

function list(title: string, items: readonly string[] | undefined, numbered = false): string[] {
  if (!items || items.length === 0) return [];
  return ['', `${title}:`, ...items.map((item, i) => `${numbered ? `${i + 1}.` : '-'} ${item}`)];
}

/**
 * The handoff as one context message, sections in a fixed order so the rendering is deterministic:
 * the message `compact` returns equals the one rendered after a restart from `Ledger.resume`.
 * The summary is the model's own earlier writing, labelled as such, not a user instruction.
 * @throws never (the summary was validated before it was published and again on resume)
 * @example
 * const resumed = await ledger.resume({ principal, session });
 * const messages = resumed ? [resumeContext(resumed), ...newTurns] : newTurns;
 */
export function resumeContext(resumed: Pick<Resumed, 'summary' | 'id' | 'seq'>): ModelMessage {
  const { summary } = resumed;
  const lines = [
    HANDOFF_CONTEXT_HEADER,
    `Verified compaction #${resumed.seq} (${resumed.id}). The summary below was written by you at that time.`,
    '',
    `Task: ${summary.task}`,
    '',
    `State: ${summary.state}`,
    ...list('Next steps', summary.nextSteps, true),
    ...list('Decisions', summary.decisions),
    ...list('Open questions', summary.openQuestions),
    ...list(
      'Files',
      summary.files?.map((f) => (f.note ? `${f.path}: ${f.note}` : f.path)),
    ),
  ];
  if (summary.notes !== undefined && summary.notes.trim() !== '') lines.push('', 'Notes:', summary.notes);
  return { role: 'user', content: lines.join('\n') };
}
