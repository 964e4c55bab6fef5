/**
 * Renders a verified handoff as the message the model sees when a session continues. The model gets
 * its context from the Harness, so resuming needs no file access at all.
 */
import type { Resumed } from '../ledger/ledger.js';
import type { ModelMessage } from './model.js';
import { LedgerError } from '../errors.js';
import { isDigest } from '../../store/hash/digest.js';
import { isValidId } from '../../manifests/format/id-pattern.js';
import { readSummaryValue, summarySchema, type Summary } from '../summary/summary.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';
import { indented, quoted } from './framing.js';

/** First line of every rendered handoff; lets a Harness recognize the message in its context. */
export const HANDOFF_CONTEXT_HEADER = '[handoff] This session continues from an earlier context that was compacted.';

/** Last line of every rendered handoff: nothing of the summary follows it. */
export const HANDOFF_CONTEXT_FOOTER = '[/handoff] End of the handoff.';

/** `text` as a regular expression that matches it literally. */
const literally = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/**
 * A handoff as `resumeContext` renders it, where it starts a line of a longer text: its header, its verification line,
 * and all up to its footer. The first line that starts with the footer is its end: every line of the summary's text is
 * indented, so none of the summary can end it early (nor does any other line of the rendering start so).
 */
const RENDERED_HANDOFF = new RegExp(
  `(?<=^|\\n)${literally(HANDOFF_CONTEXT_HEADER)}\\nVerified compaction #\\d+ \\(blake3:[0-9a-f]{64}\\)[^\\n]*\\n[^]*?\\n${literally(HANDOFF_CONTEXT_FOOTER)}`,
  'g',
);

/**
 * `text` (a Harness's system message) without the handoffs rendered in it: each one whole, from its header to its
 * footer, the line breaks around it dropped and what stood before and after it joined by an empty line; `''` when
 * nothing else is left. The same string when it holds none: a text that starts with `HANDOFF_CONTEXT_HEADER` but is no
 * whole rendering (no verification line after it, no footer) is no handoff of this library, and is kept as it is.
 */
export function withoutRenderedHandoffs(text: string): string {
  const pieces = text.split(RENDERED_HANDOFF);
  if (pieces.length === 1) return text;
  return pieces
    .map((piece) => piece.replace(/^[\r\n]+|[\r\n]+$/g, ''))
    .filter((piece) => piece.trim() !== '')
    .join('\n\n');
}

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
 * What `resumeContext` renders: `resume`'s answer (or `summary`, `id`, `seq` and the manifest's `principal` of it).
 * `manifest` may be left out (a handoff rendered from its id alone): the rendering then names no publisher.
 */
export type ResumedHandoff = Pick<Resumed, 'summary' | 'id' | 'seq'> & {
  manifest?: { readonly principal: string } | undefined;
};

/**
 * The verification line: the compaction's seq and id, and the principal that published it (its signed manifest's
 * `principal`, `resume`'s `manifest.principal`), quoted. The principal is named, not assumed to be the reader's own:
 * a principal granted the session may have published it, and its model wrote the summary. An id (the id pattern's
 * characters, checked) cannot break the line.
 */
function verificationLine(seq: number, id: string, principal: string | undefined): string {
  return principal === undefined
    ? `Verified compaction #${seq} (${id}). The summary below was written at that time by the model that compacted the context.`
    : `Verified compaction #${seq} (${id}), published by principal ${quoted(principal)}. The summary below was written at that time by the model working for that principal.`;
}

/**
 * The handoff as one context message, sections in a fixed order so the rendering is deterministic:
 * the message `compact` returns equals the one rendered after a restart from `Ledger.resume`.
 * The summary is a model's earlier writing, labelled as such (with the principal that published it), not a user
 * instruction. It is framed closed: between `HANDOFF_CONTEXT_HEADER` and `HANDOFF_CONTEXT_FOOTER`, every line of its text indented (a file
 * path quoted as a JSON string that parses back to it), so no stored text can pose as a section, a verification
 * line or the end.
 * @throws LedgerError `INVALID_ARGUMENT` when given no resumed handoff (`resume` returned `undefined`: there is none
 *   to render), one without its summary, a manifest id (`blake3:` and 64 hex digits: the verification line is framed
 *   closed too) and a seq (a non-negative integer), a `manifest` whose `principal` is no valid id, or a summary the summary schema refuses (a field missing or of
 *   another type: a summary built or changed by hand), or one whose fields throw as they are read (a getter, a
 *   revoked proxy); nothing else (what `resume` and `compact` return passes)
 * @example
 * const resumed = await ledger.resume({ principal, session });
 * const messages = resumed ? [resumeContext(resumed), ...newTurns] : newTurns;
 */
export function resumeContext(given: ResumedHandoff): ModelMessage {
  // Its fields read once, as checked (a getter or a revoked proxy that throws: INVALID_ARGUMENT, not its error).
  let resumed: Pick<Resumed, 'summary' | 'id' | 'seq'> | undefined;
  let principal: unknown;
  let hasManifest = false;
  if (typeof given === 'object' && given !== null) {
    try {
      resumed = { summary: given.summary, id: given.id, seq: given.seq };
      const manifest: unknown = given.manifest;
      hasManifest = manifest !== undefined;
      if (typeof manifest === 'object' && manifest !== null)
        principal = (manifest as { principal?: unknown }).principal;
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
    resumed.seq < 0 ||
    (hasManifest && !isValidId(principal))
  )
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `resumeContext needs what resume returned (${given === undefined ? 'undefined: there is no handoff to render' : 'not a resumed handoff'})`,
    );
  const summary = renderable(resumed.summary);
  const lines = [
    HANDOFF_CONTEXT_HEADER,
    verificationLine(resumed.seq, resumed.id, hasManifest ? (principal as string) : undefined),
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
