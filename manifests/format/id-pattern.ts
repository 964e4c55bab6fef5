/**
 * Scope ids (`host`, `principal`, `session`, `run`): 1–128 characters of `[A-Za-z0-9._:@-]`, starting
 * alphanumeric. ASCII only, so look-alike letters cannot alias; ids never become path components. Without zod,
 * so code that only checks ids (the command line's dispatch, the auditor) does not load it; `idSchema`
 * (./ids.ts) is the same pattern as a schema.
 */
import { quoted, typeName } from '../../store/errors.js';

export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export function isValidId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value);
}

/**
 * The one wording of an invalid id, wherever it is refused (the ledger's scope, a grant, an export's filter, the
 * auditor's scope): `principal "x y" is not a valid id (…the rule…)`. `name` is how the caller names the id
 * (`principal`, `--principal`, `the principal`); the value is shown quoted (its first 80 characters, a JSON string with
 * nothing a terminal acts on left raw, as `shownValue` quotes one) or, for one that is no string, by its type (`null`
 * as `null`, not its typeof `object`).
 */
export function invalidIdMessage(name: string, value: unknown): string {
  const shown = typeof value === 'string' ? quoted(value.slice(0, 80)) : typeName(value);
  return `${name} ${shown} is not a valid id (1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric)`;
}
