/** How every layer reports a value its zod schema refused: the first issue, as `path: message`. */
import type { z } from 'zod';

/** The longest path segment and message a report quotes: a hostile input's key can be megabytes long. */
export const MAX_SEGMENT_CHARS = 100;
export const MAX_MESSAGE_CHARS = 500;

const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text);

/**
 * The first issue as `path: message`, each path segment and the message clipped (`…`): zod quotes an unknown key
 * whole, and a bundle's or trust file's keys are the auditor's input, so a finding would otherwise repeat a key of any
 * size (an 80 MB report from 2,000 findings of 40 KiB keys).
 */
export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return '(root): invalid';
  const path = issue.path.map((segment) => clip(String(segment), MAX_SEGMENT_CHARS)).join('.');
  return `${issue.path.length > 0 ? path : '(root)'}: ${clip(issue.message, MAX_MESSAGE_CHARS)}`;
}
