/**
 * An errno error as a refusal that names its path quoted names the failure: by its code and what the system says of
 * it (`ENOENT (no such file or directory)`), not by its message, which embeds the path raw (`ENOENT: no such file or
 * directory, open '/a\u001b'`): a path holding the six characters `\u001b` would read there like a quoted ESC, and
 * a real control character would have the whole message escaped again, its quotes' backslashes doubled.
 */
import { getSystemErrorMap } from 'node:util';
import { errorText, escapedText, isErrnoError } from '../errors.js';

/** `CODE (description)` of an errno error; any other error's text, with what a terminal acts on escaped. */
export function errnoText(err: unknown): string {
  if (!isErrnoError(err)) return escapedText(errorText(err));
  const errno = (err as { errno?: unknown }).errno;
  const described = typeof errno === 'number' ? getSystemErrorMap().get(errno)?.[1] : undefined;
  return described === undefined ? err.code : `${err.code} (${described})`;
}
