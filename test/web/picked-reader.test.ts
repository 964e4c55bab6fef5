/**
 * The page's reading of a picked or dropped folder (web/sources.ts `bundleFromFiles`, web/worker/bundle-source.ts
 * `kind: 'files'`), in Node with the folder's files as Blobs: a directory where a tree file belongs is refused as
 * `verify` refuses it, and when: checkpoint.note (every check reads it) when the folder is chosen, the others when a
 * check reads them, so a full bundle with a directory at heads.jsonl or proofs.jsonl gets verify's verdict, OK.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BundleReader } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/index.js';
import { parseTrustStore } from '../../manifests/format/trust.js';
import { storedSummaryProblem } from '../../manifests/format/summary.js';
import { treeFileDirs } from '../support/tree-file-dirs.js';

// Imported by names the root project's type check does not follow (web/tsconfig.json checks these modules, which use
// the DOM's types), as test/web/served-reader.test.ts does.
const SOURCES: string = '../../web/sources.js';
const BUNDLE_SOURCE: string = '../../web/worker/bundle-source.js';
type Source = { kind: 'files' };
const { bundleFromFiles } = (await import(SOURCES)) as {
  bundleFromFiles(
    files: Array<{ path: string; file: Blob }>,
    directories?: readonly string[],
    folder?: string,
  ): { source: Source } | string;
};
const { readerFor } = (await import(BUNDLE_SOURCE)) as { readerFor(source: Source): BundleReader };

/** The folder `dir` as a drop gives it: its files under `bundle/`, and its directories. */
function dropped(dir: string): { files: Array<{ path: string; file: Blob }>; directories: string[] } {
  const files: Array<{ path: string; file: Blob }> = [];
  const directories: string[] = [];
  const walk = (at: string, path: string) => {
    for (const e of readdirSync(at, { withFileTypes: true })) {
      if (e.isDirectory()) {
        directories.push(`${path}/${e.name}`);
        walk(join(at, e.name), `${path}/${e.name}`);
      } else files.push({ path: `${path}/${e.name}`, file: new Blob([readFileSync(join(at, e.name))]) });
    }
  };
  walk(dir, 'bundle');
  return { files, directories };
}

describe('a picked or dropped folder with a directory where a tree file belongs, as verify reads it', () => {
  it('is verified as verify verifies it: a full bundle reads no heads.jsonl or proofs.jsonl; checkpoint.note is refused at once', async () => {
    const { full, filtered, trustText, verify: cli } = await treeFileDirs();
    const trust = parseTrustStore(trustText);
    const page = async (dir: string, scope?: { session: string }) => {
      const { files, directories } = dropped(dir);
      const picked = bundleFromFiles(files, directories, 'bundle');
      if (typeof picked === 'string') return picked;
      try {
        const report = await verifyBundle(readerFor(picked.source), {
          trust,
          checkSummary: storedSummaryProblem,
          ...(scope ? { scope } : {}),
        });
        return report.ok ? 'OK' : 'FAILED';
      } catch (err) {
        return `${(err as { code: string }).code}: ${(err as Error).message}`;
      }
    };

    // A directory at the full bundle's heads.jsonl and proofs.jsonl, and in place of the filtered one's heads.jsonl.
    expect((await cli(full)).code).toBe(0);
    expect(await page(full)).toBe('OK');

    expect((await cli(filtered, '--session', 's')).stderr).toMatch(/BUNDLE_INVALID: ".*heads\.jsonl" is not a regular/);
    expect(await page(filtered, { session: 's' })).toBe(
      'BUNDLE_INVALID: heads.jsonl is a directory, not a regular file',
    );

    rmSync(join(full, 'checkpoint.note'));
    mkdirSync(join(full, 'checkpoint.note'));
    expect((await cli(full)).stderr).toMatch(/BUNDLE_INVALID: ".*checkpoint\.note" is not a regular file/);
    expect(await page(full)).toBe('BUNDLE_INVALID: checkpoint.note in "bundle" is a directory, not a regular file');
  });
});

describe("the folder's name in the page's refusals", () => {
  it('is quoted as the CLI quotes a path: a bidi override escaped inside the quotes, a backslash escaped once', () => {
    const name = 'a\\b\u202egpj';
    const file = new Blob(['{}']);
    // No manifests.jsonl: no bundle, named so.
    expect(bundleFromFiles([{ path: `${name}/bundle.json`, file }], [], name)).toBe(
      'BUNDLE_INVALID: the folder "a\\\\b\\u202egpj" has no manifests.jsonl; it is not a bundle',
    );
    // checkpoint.note as a directory: refused when the folder is chosen, named so too.
    expect(bundleFromFiles([{ path: `${name}/manifests.jsonl`, file }], [`${name}/checkpoint.note`], name)).toBe(
      'BUNDLE_INVALID: checkpoint.note in "a\\\\b\\u202egpj" is a directory, not a regular file',
    );
  });
});
