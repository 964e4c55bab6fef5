/**
 * The checkout's root and the source module behind each entry point of package.json `exports`, for tests that run or
 * type-check the documents' examples against the source (docs-examples, docs-types): ./dist/src/x.js → src/x.ts.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { default: string }>;
};

/** The source module behind an entry point (`handoff-ledger`, `handoff-ledger/audit`, …). */
export function sourceOf(specifier: string): string {
  const entry = pkg.exports[specifier === 'handoff-ledger' ? '.' : `.${specifier.slice('handoff-ledger'.length)}`];
  if (typeof entry !== 'object') throw new Error(`${specifier} is not an entry point of package.json`);
  return join(ROOT, entry.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
}
