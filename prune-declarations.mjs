// The last step of `npm run build`: removes from dist/ the declaration files (.d.ts) that no entry point's types in
// package.json `exports` reach. tsc writes one for every module, but `exports` lets no user import a module by its
// path: a declaration that no entry point's declarations import (those of the CLI, of the fsck steps, of the
// filesystem store's helpers, …) is dead weight in the package. The JavaScript stays; only declarations go.
// test/package checks that the package ships every declaration an entry point reaches, and no other.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = dirname(fileURLToPath(import.meta.url));
const LAYERS = ['store', 'manifests', 'src'];

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
/**
 * Every declaration file `exports` names as types: the `types` of each entry, at its top or nested under conditions
 * (`import` / `require`, each with its own `types`; an `exports` without subpaths), and every target under a `types`.
 */
function typesOf(target, underTypes = false) {
  if (typeof target === 'string') return underTypes ? [target] : [];
  if (target === null || typeof target !== 'object') return [];
  return Object.entries(target).flatMap(([key, value]) => typesOf(value, underTypes || key === 'types'));
}
const roots = [...new Set(typesOf(pkg.exports).map((types) => resolve(ROOT, types)))];
// None found would remove every declaration: an `exports` this script does not read is refused instead.
if (roots.length === 0) throw new Error('prune-declarations: package.json exports names no types');
const program = ts.createProgram(roots, {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  types: [],
  noEmit: true,
});
const reached = new Set(program.getSourceFiles().map((f) => resolve(f.fileName)));
const missing = roots.filter((r) => !reached.has(r));
if (missing.length > 0) throw new Error(`prune-declarations: entry point types not built: ${missing.join(', ')}`);

for (const layer of LAYERS) {
  const dir = join(ROOT, 'dist', layer);
  for (const path of readdirSync(dir, { recursive: true })) {
    const file = join(dir, path);
    if (file.endsWith('.d.ts') && !reached.has(file)) rmSync(file);
  }
}
