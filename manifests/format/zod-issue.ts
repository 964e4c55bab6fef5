/** How every layer reports a value its zod schema refused: the first issue, as `path: message`. */
import type { z } from 'zod';
import { TERMINAL_ACTING } from '../../store/errors.js';

/** The longest path segment and message a report quotes: a hostile input's key can be megabytes long. */
export const MAX_SEGMENT_CHARS = 100;
export const MAX_MESSAGE_CHARS = 500;

/** Every character a terminal acts on (TERMINAL_ACTING: C0 such as ESC, DEL, C1, bidi overrides, separators…). */
const ACTING = new RegExp(`[${TERMINAL_ACTING}]`, 'gu');
const escaped = (c: string): string =>
  [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

/**
 * The text clipped, and with nothing a terminal acts on left raw (as a `\uXXXX` escape): zod quotes an unknown key as
 * it is, without escaping anything (`"${key}"`), and a key is the input's (a model's summary, a bundle, a trust file),
 * so an ESC sequence or a right-to-left override of it reached the message raw.
 */
const clip = (text: string, max: number): string =>
  (text.length > max ? `${text.slice(0, max)}…` : text).replace(ACTING, escaped);

/**
 * The first issue as `path: message`, each path segment and the message clipped (`…`) and escaped: zod quotes an
 * unknown key whole, and a bundle's or trust file's keys are the auditor's input, so a finding would otherwise repeat a
 * key of any size (an 80 MB report from 2,000 findings of 40 KiB keys).
 */
export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return '(root): invalid';
  const path = issue.path.map((segment) => clip(String(segment), MAX_SEGMENT_CHARS)).join('.');
  return `${issue.path.length > 0 ? path : '(root)'}: ${clip(issue.message, MAX_MESSAGE_CHARS)}`;
}
