/**
 * An errno error as a refusal that names its path quoted names the failure: by its code and what the system says of
 * it (`ENOENT (no such file or directory)`), not by its message, which embeds the path raw (`ENOENT: no such file or
 * directory, open '/a\u001b'`): a path holding the six characters `\u001b` would read there like a quoted ESC, and
 * a real control character would reach the message raw.
 */
import { getSystemErrorMap } from 'node:util';
import {
  errorText,
  escapedText,
  HandoffLedgerError,
  isErrnoError,
  quoted,
  type ErrnoError,
  type ErrorClass,
} from '../errors.js';

/** `CODE (description)` of an errno error; any other error's text, with what a terminal acts on escaped. */
export function errnoText(err: unknown): string {
  if (!isErrnoError(err)) return escapedText(errorText(err));
  const errno = (err as { errno?: unknown }).errno;
  const described = typeof errno === 'number' ? getSystemErrorMap().get(errno)?.[1] : undefined;
  return described === undefined ? err.code : `${err.code} (${described})`;
}

/**
 * An errno error as one line naming what failed and the paths it names, quoted (`quoted`): `ENOENT (no such file or
 * directory), open "/a\u001b"`, a rename's `, rename "/a" -> "/b"`; without a path, its code and the call (`EPIPE
 * (broken pipe), write`). Node's own message (`ENOENT: no such file or directory, open '/a…'`) embeds the paths raw.
 * Any other error is `errnoText`'s.
 */
export function errnoMessage(err: unknown): string {
  if (!isErrnoError(err)) return errnoText(err);
  const { syscall, path, dest } = err as ErrnoError & { dest?: unknown };
  const paths = [path, dest].filter((p): p is string => typeof p === 'string').map(quoted);
  const call = [typeof syscall === 'string' ? escapedText(syscall) : '', paths.join(' -> ')].filter(Boolean).join(' ');
  return call === '' ? errnoText(err) : `${errnoText(err)}, ${call}`;
}

/**
 * `storageFailure` of a step whose words name its path quoted (`reading "/r/format.json"`): an error of this library
 * passes through unchanged, anything else becomes `STORAGE_FAILED` (`… failed: EACCES (permission denied)`, the
 * cause kept) named by `errnoText`, not by the errno's message, which repeats the path raw.
 */
export function fileFailure(Class: ErrorClass<'STORAGE_FAILED'>, what: string, err: unknown): Error {
  if (err instanceof HandoffLedgerError) return err;
  return new Class('STORAGE_FAILED', `${what} failed: ${errnoText(err)}`, { cause: err });
}
