/** How every layer reports a value its zod schema refused: the first issue, as `path: message`. */
import type { z } from 'zod';

export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return '(root): invalid';
  return `${issue.path.length > 0 ? issue.path.join('.') : '(root)'}: ${issue.message}`;
}
