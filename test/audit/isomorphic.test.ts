/**
 * DESIGN.md "Isomorphic core": the auditor's verifier must run in a browser, so nothing it imports,
 * directly or through other modules of this repository, may come from `node:` or a Node builtin.
 * The import graph is read from source text, so type-only and dynamic imports count too.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const VERIFIER_ENTRIES = [
  'manifests/verify-chain.ts',
  'manifests/verify-line.ts',
  'manifests/verify-chain-rules.ts',
  'manifests/verify-blobs.ts',
  'manifests/bundle.ts',
  'manifests/audit-errors.ts',
  'manifests/audit-findings.ts',
];
const ALLOWED_PACKAGES = [/^zod(\/|$)/, /^@noble\//, /^hash-wasm$/];
const SPECIFIER = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;

function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(SPECIFIER)].map((m) => (m[1] ?? m[2] ?? m[3])!);
}

/** Every repository module reachable from `entries`, and every external specifier they import. */
function importGraph(entries: string[]): { modules: Set<string>; external: Map<string, string> } {
  const modules = new Set<string>();
  const external = new Map<string, string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (modules.has(file)) continue;
    modules.add(file);
    for (const spec of importsOf(file)) {
      if (spec.startsWith('.')) queue.push(relative(ROOT, resolve(ROOT, dirname(file), spec.replace(/\.js$/, '.ts'))));
      else external.set(spec, file);
    }
  }
  return { modules, external };
}

const isNodeBuiltin = (spec: string) => spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0]!);

describe('the offline verifier', () => {
  it('imports nothing from node: or a Node builtin, through its whole import graph', () => {
    const { modules, external } = importGraph(VERIFIER_ENTRIES);
    expect(modules.size).toBeGreaterThan(VERIFIER_ENTRIES.length); // it did follow imports into other modules
    const offenders = [...external].filter(([spec]) => isNodeBuiltin(spec)).map(([spec, file]) => `${file} imports ${spec}`);
    expect(offenders).toEqual([]);
  });

  it('imports only portable packages', () => {
    const { external } = importGraph(VERIFIER_ENTRIES);
    const unknown = [...external.keys()].filter((spec) => !ALLOWED_PACKAGES.some((re) => re.test(spec)));
    expect(unknown).toEqual([]);
  });

  it('would notice a node: import (the scan itself works)', () => {
    const { external } = importGraph(['manifests/ed25519-node.ts', 'manifests/verify-workers.ts']);
    expect([...external.keys()].filter(isNodeBuiltin)).toEqual(expect.arrayContaining(['node:crypto', 'node:worker_threads']));
  });
});
