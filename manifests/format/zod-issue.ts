/** How every layer reports a value its zod schema refused: the first issue, as `path: message`. */
import type { z } from 'zod';
import { TERMINAL_ACTING } from '../../store/errors.js';

/** The longest path segment and message a report quotes: a hostile input's key can be megabytes long. */
export const MAX_SEGMENT_CHARS = 100;
export const MAX_MESSAGE_CHARS = 500;

/** Every character a terminal acts on (TERMINAL_ACTING: C0 such as ESC, DEL, C1, bidi overrides, separators…). */
const ACTING = new RegExp(`[${TERMINAL_ACTING}]`, 'gu');
const escapedChar = (c: string): string =>
  [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

/**
 * The text clipped; with `escaped`, nothing a terminal acts on left raw either (as a `\uXXXX` escape): zod quotes an
 * unknown key as it is, without escaping anything (`"${key}"`).
 */
const clip = (text: string, max: number, escaped: boolean): string => {
  const clipped = text.length > max ? `${text.slice(0, max)}…` : text;
  return escaped ? clipped.replace(ACTING, escapedChar) : clipped;
};

/**
 * The first issue as `path: message`, each path segment and the message clipped (`…`): zod quotes an unknown key
 * whole, and a bundle's or trust file's keys are the auditor's input, so a finding would otherwise repeat a key of any
 * size (an 80 MB report from 2,000 findings of 40 KiB keys).
 *
 * `escaped`: what a terminal acts on in a key or segment it quotes (ESC, C1 controls, bidirectional overrides) as
 * `\uXXXX`, as `shownValue` quotes a caller's value in a refusal: for the library's own refusals (a summary's key a
 * model wrote, a key file's). Without it the text is as zod gives it, for the auditor's findings and refusals, which
 * the CLI and the page print through `printable` (`\x1b`, `\u{202e}`: escaped once, never twice).
 */
export function describeZodError(error: z.ZodError, { escaped = false }: { escaped?: boolean } = {}): string {
  const issue = error.issues[0];
  if (!issue) return '(root): invalid';
  const path = issue.path.map((segment) => clip(String(segment), MAX_SEGMENT_CHARS, escaped)).join('.');
  return `${issue.path.length > 0 ? path : '(root)'}: ${clip(issue.message, MAX_MESSAGE_CHARS, escaped)}`;
}
