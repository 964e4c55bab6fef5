/**
 * Every import the documentation shows (`import { … } from 'handoff-ledger…'` in README.md and docs/)
 * names an entry point of package.json and names that entry point exports, so a copied example runs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { types: string; default: string }>;
};

/** The source module behind an entry point: ./dist/src/x.js → src/x.ts. */
function sourceOf(specifier: string): string | undefined {
  const entry = pkg.exports[specifier === 'handoff-ledger' ? '.' : `.${specifier.slice('handoff-ledger'.length)}`];
  if (typeof entry !== 'object') return undefined;
  return join(ROOT, entry.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
}

const docs = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
const imports = docs.flatMap((file) =>
  [...readFileSync(join(ROOT, file), 'utf8').matchAll(/import\s*\{([^}]*)\}\s*from\s*'(handoff-ledger[^']*)'/g)].map(
    (m) => ({
      file,
      specifier: m[2]!,
      names: m[1]!
        .split(',')
        .map((n) => n.trim().replace(/^type\s+/, ''))
        .filter(Boolean),
    }),
  ),
);

describe('documented imports', () => {
  it('are found (so this test checks something)', () => {
    expect(imports.length).toBeGreaterThanOrEqual(6);
    expect(new Set(imports.map((i) => i.specifier)).size).toBeGreaterThanOrEqual(5);
  });

  it.each(imports.map((i) => [`${i.file}: ${i.specifier} { ${i.names.join(', ')} }`, i] as const))(
    '%s',
    async (_, { specifier, names }) => {
      const source = sourceOf(specifier);
      expect(source, `${specifier} is not an entry point of package.json`).toBeDefined();
      const mod = (await import(pathToFileURL(source!).href)) as Record<string, unknown>;
      for (const name of names) expect(Object.keys(mod), `${specifier} does not export ${name}`).toContain(name);
    },
  );
});
