import { z } from 'zod';

/**
 * Scope ids (`host`, `principal`, `session`, `run`): 1–128 characters of `[A-Za-z0-9._:@-]`, starting
 * alphanumeric. ASCII only, so look-alike letters cannot alias; ids never become path components.
 */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export const idSchema = z.string().regex(ID_PATTERN, 'must be 1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric');

export function isValidId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value);
}
