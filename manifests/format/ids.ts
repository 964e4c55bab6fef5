import { z } from 'zod';
import { ID_PATTERN } from './id-pattern.js';

export { ID_PATTERN, isValidId } from './id-pattern.js';

/** A scope id (./id-pattern.ts) as a schema. */
export const idSchema = z.string().regex(ID_PATTERN, 'must be 1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric');
