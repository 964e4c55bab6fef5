/**
 * The built auditor's page as a package asset (`handoff-ledger/web`): one self-contained HTML file that
 * verifies a bundle in the browser. It needs no other file and makes no network request of its own, so a
 * host may serve it as it is, write it next to a bundle, or hand it to an auditor; `handoff-ledger audit-ui`
 * serves the same file.
 *
 * @example
 * ```ts
 * import { auditorPagePath, readAuditorPage } from 'handoff-ledger/web';
 * const html = await readAuditorPage(); // the page's HTML, or undefined in an unbuilt source checkout
 * res.setHeader('content-type', 'text/html; charset=utf-8').end(html);
 * ```
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The absolute path of dist/web/index.html, or `undefined` when the page is not built (a source checkout
 * before `npm run build:web`; the published package always carries it).
 */
export function auditorPagePath(): string | undefined {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const candidates = [join(here, '../../dist/web/index.html')];
  // From the built package (dist/src/ops) the page is dist/web; from sources (src/ops) web/index.html is
  // the unfilled template, never the page, even when the checkout itself sits under a directory named dist.
  if (/[\\/]dist[\\/]src[\\/]ops[\\/]?$/.test(here)) candidates.push(join(here, '../../web/index.html'));
  return candidates.find((p) => existsSync(p));
}

/** The page's HTML (UTF-8), or `undefined` when it is not built (see `auditorPagePath`). */
export async function readAuditorPage(): Promise<string | undefined> {
  const path = auditorPagePath();
  return path === undefined ? undefined : readFile(path, 'utf8');
}
