/**
 * The built auditor's page for the browser tests: `npm test` builds it before any test runs (pretest),
 * and a targeted run may not have, or may follow an edit. Each test file asks for it; it is rebuilt only
 * when a file it is built from is newer than the page, so four test files starting together on a loaded
 * machine do not run four bundlers at once for nothing.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
export const PAGE_FILE = join(ROOT, 'dist/web/index.html');
/** What the page bundles: its own sources and the isomorphic layers, and the locked dependency versions. */
const INPUTS = ['web', 'manifests', 'store', 'package-lock.json'];

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

function pageMtime(): number | undefined {
  try {
    return statSync(PAGE_FILE).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Builds dist/web/index.html unless it is newer than everything it is built from. */
export function ensurePageBuilt(): void {
  const built = pageMtime();
  const newest = Math.max(...INPUTS.map((p) => newestMtime(join(ROOT, p))));
  if (built !== undefined && built > newest) return;
  execFileSync(process.execPath, [join(ROOT, 'web/build.mjs')], { stdio: 'pipe' });
}
