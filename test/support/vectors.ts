import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

/** The official vectors live beside the checkout (`../shared/vectors`); CI always has them. */
export const VECTORS_DIR = process.env.HANDOFF_LEDGER_VECTORS ?? fileURLToPath(new URL('../../../shared/vectors', import.meta.url));

/**
 * Reads a vector file, or returns `undefined` when the shared folder is absent (a standalone checkout).
 * Under CI=true a missing folder is a failure, asserted by the caller.
 */
export function readVector<T>(relative: string): T | undefined {
  const path = join(VECTORS_DIR, relative);
  if (!existsSync(path)) return undefined;
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}
