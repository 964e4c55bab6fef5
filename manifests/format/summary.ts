/**
 * The structured handoff summary (v1): its schema and the content rules beyond the schema. Isomorphic,
 * so the offline auditor (CLI and browser page) checks summary blobs with exactly the rules publish and
 * resume apply (src/summary/summary.ts turns a problem into a LedgerError).
 */
import { z } from 'zod';
import { shownBytes } from '../../store/errors.js';
import { fileBytes } from '../encoding/file-bytes.js';
import { ManifestError } from '../errors.js';

/**
 * Rules the validator enforces beyond types, as JSON Schema patterns, so that every schema form tells
 * the model what will be refused. Non-blank is only metadata here: the validator reports a blank task or
 * state as `SUMMARY_EMPTY` (content rules), not as a schema error.
 */
export const NON_BLANK_PATTERN = '\\S';

/**
 * A project-relative path: no leading slash or drive, no `..` segment, no backslash, no NUL. The
 * pattern is what JSON Schema carries (`source`, as zod emits it).
 */
export const RELATIVE_PATH = /^(?!\/)(?![A-Za-z]:)(?!(?:[\s\S]*\/)?\.\.(?:\/|$))[^\\\0]+$/;

/** The most UTF-16 code units one text field may hold: a size bound (`SUMMARY_TOO_LARGE` at publish). */
export const MAX_TEXT_UNITS = 64 * 1024 * 1024;

const text = z.string().max(MAX_TEXT_UNITS);
const line = z.string().max(64 * 1024);
const nonBlankText = (description: string) => text.meta({ description, pattern: NON_BLANK_PATTERN });

const relativePath = z
  .string()
  .min(1)
  .max(4096)
  .regex(RELATIVE_PATH, 'must be a project-relative path without ".." segments')
  .describe('A project-relative path');

export const summarySchema = z.strictObject({
  /** What the user asked for, in one or two sentences. */
  task: nonBlankText('The task the user is working on, as they would state it'),
  /** Where the work stands now. */
  state: nonBlankText('Where the work stands: what is done, what is in progress'),
  /** What to do next, in order. */
  nextSteps: z.array(line).max(1000).describe('The next steps, in order'),
  decisions: z.array(line).max(1000).optional().describe('Decisions made and why'),
  openQuestions: z.array(line).max(1000).optional().describe('Questions still open for the user'),
  files: z
    .array(z.strictObject({ path: relativePath, note: line.optional().describe('Why the file matters') }))
    .max(10_000)
    .optional()
    .describe('Project files that matter for the next steps (project-relative paths)'),
  notes: text.optional().describe('Anything else the next context needs'),
  /** Set by a model that could not finish its summary; such a summary is refused. */
  incomplete: z.boolean().optional().describe('true if the summary could not be completed'),
});

export type Summary = z.infer<typeof summarySchema>;

export type SummaryProblemCode = 'SUMMARY_INVALID' | 'SUMMARY_EMPTY' | 'SUMMARY_INCOMPLETE';
export interface SummaryProblem {
  code: SummaryProblemCode;
  message: string;
}

function isBlank(s: string | undefined): boolean {
  return s === undefined || s.trim().length === 0;
}

/**
 * Calls `visit` with every string in a value, depth first, until it returns true (then returns true). A plain
 * recursion: a generator's delegation made an iterator result per string per level, a few KiB of garbage a publish.
 */
export function someSummaryString(value: unknown, visit: (s: string) => boolean): boolean {
  if (typeof value === 'string') return visit(value);
  if (Array.isArray(value)) {
    for (const v of value) if (someSummaryString(v, visit)) return true;
  } else if (value && typeof value === 'object') {
    for (const v of Object.values(value)) if (someSummaryString(v, visit)) return true;
  }
  return false;
}

/** The rules beyond the schema; undefined when the summary satisfies them. */
export function summaryContentProblem(summary: Summary): SummaryProblem | undefined {
  if (summary.incomplete === true)
    return { code: 'SUMMARY_INCOMPLETE', message: 'the summary is marked incomplete; it is not published' };
  if (isBlank(summary.task) && isBlank(summary.state) && summary.nextSteps.every(isBlank))
    return { code: 'SUMMARY_EMPTY', message: 'the summary has no task, state or next steps' };
  if (isBlank(summary.task) || isBlank(summary.state))
    return { code: 'SUMMARY_EMPTY', message: 'the summary needs a non-blank task and state' };
  if (someSummaryString(summary, (s) => !s.isWellFormed()))
    return { code: 'SUMMARY_INVALID', message: 'the summary contains a lone surrogate (not valid UTF-8)' };
  return undefined;
}

/** A parsed stored summary against the schema and the content rules. */
export function parseStoredSummary(value: unknown): { summary: Summary } | { problem: SummaryProblem } {
  const parsed = summarySchema.safeParse(value);
  if (!parsed.success)
    return { problem: { code: 'SUMMARY_INVALID', message: 'stored summary does not match the summary schema' } };
  const problem = summaryContentProblem(parsed.data);
  return problem ? { problem } : { summary: parsed.data };
}

// A byte order mark is kept, so JSON.parse refuses it as the streamed decoder does: one verdict on the same bytes.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The auditor's summary check (audit step 7): stored bytes, already digest-verified, as `CODE: message`
 * when they are not a summary publish would have accepted, else undefined. The bytes in any form a file's are taken
 * (a Uint8Array, an ArrayBuffer, another view); anything else from a JavaScript caller (the summary's text, its parsed
 * object) is refused, not judged: it was `not UTF-8 JSON`, text that is JSON included.
 * @throws ManifestError `INVALID_ARGUMENT` for an argument that is no bytes
 */
export function storedSummaryProblem(bytes: Uint8Array): string | undefined {
  const stored = fileBytes(bytes);
  if (stored === undefined)
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `storedSummaryProblem: the stored summary must be its bytes (a Uint8Array), not ${shownBytes(bytes)}`,
    );
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(stored));
  } catch {
    return 'SUMMARY_INVALID: stored summary is not UTF-8 JSON';
  }
  const parsed = parseStoredSummary(value);
  return 'problem' in parsed ? `${parsed.problem.code}: ${parsed.problem.message}` : undefined;
}
