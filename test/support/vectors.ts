import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

/** The official vectors are part of the repository (test/vectors/, sources and licences in its README). */
export const VECTORS_DIR = fileURLToPath(new URL('../vectors', import.meta.url));

/** Reads a vector file; a missing file is an error, never a skipped check. */
export function readVector<T>(relative: string): T {
  return JSON.parse(readFileSync(join(VECTORS_DIR, relative), 'utf8')) as T;
}
