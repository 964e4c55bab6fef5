/**
 * Scope ids (`host`, `principal`, `session`, `run`): 1–128 characters of `[A-Za-z0-9._:@-]`, starting
 * alphanumeric. ASCII only, so look-alike letters cannot alias; ids never become path components. Without zod,
 * so code that only checks ids (the command line's dispatch, the auditor) does not load it; `idSchema`
 * (./ids.ts) is the same pattern as a schema.
 */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export function isValidId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value);
}
