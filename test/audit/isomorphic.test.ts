/**
 * The isomorphic core: everything under store/ and manifests/ runs in a browser, except Node-only modules,
 * which are recognisable by path: a folder named `fs`, `pg` or `level` (filesystem and database backends),
 * or a file named `*.node.ts`. The layers' own entry points (`store/index.ts`, `manifests/index.ts`) are Node
 * entry points and re-export backends; `handoff-ledger/audit` is the isomorphic entry. This test applies that rule to every module in the tree, so a new module is
 * covered without a hand-kept list: an isomorphic module may import neither `node:` (nor a Node builtin)
 * nor a Node-only module, directly or through other modules of this repository.
 * The import graph is read from source text, so type-only and dynamic imports count too.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ISOMORPHIC_LAYERS = ['store', 'manifests'];
const NODE_ONLY_FOLDERS = new Set(['fs', 'pg', 'level']);

function isNodeOnly(file: string): boolean {
  const parts = file.split(/[\\/]/);
  return file.endsWith('.node.ts') || parts.slice(0, -1).some((p) => NODE_ONLY_FOLDERS.has(p));
}

function modulesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => join(folder, f).split(sep).join('/'));
}

const NODE_ENTRY_POINTS = new Set(ISOMORPHIC_LAYERS.map((layer) => `${layer}/index.ts`));
const ISOMORPHIC = ISOMORPHIC_LAYERS.flatMap(modulesUnder).filter((f) => !isNodeOnly(f) && !NODE_ENTRY_POINTS.has(f));
const VERIFIER_ENTRIES = ['manifests/audit/verify-chain.ts', 'manifests/audit/verify-line.ts'];
const ALLOWED_PACKAGES = [/^zod(\/|$)/, /^@noble\//, /^hash-wasm$/];
const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;

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

describe('the isomorphic core', () => {
  it('finds the modules the rule calls isomorphic, the auditor among them', () => {
    expect(ISOMORPHIC).toEqual(
      expect.arrayContaining([...VERIFIER_ENTRIES, 'store/hash/digest.ts', 'manifests/crypto/ed25519.ts']),
    );
    expect(ISOMORPHIC.some(isNodeOnly)).toBe(false);
  });

  it('imports nothing from node: or a Node builtin, through its whole import graph', () => {
    const { modules, external } = importGraph(ISOMORPHIC);
    expect(modules.size).toBeGreaterThanOrEqual(ISOMORPHIC.length);
    const offenders = [...external]
      .filter(([spec]) => isNodeBuiltin(spec))
      .map(([spec, file]) => `${file} imports ${spec}`);
    expect(offenders).toEqual([]);
  });

  it('reaches no Node-only module of this repository', () => {
    const { modules } = importGraph(ISOMORPHIC);
    expect([...modules].filter(isNodeOnly)).toEqual([]);
  });

  it('imports only portable packages', () => {
    const { external } = importGraph(ISOMORPHIC);
    const unknown = [...external.keys()].filter((spec) => !ALLOWED_PACKAGES.some((re) => re.test(spec)));
    expect(unknown).toEqual([]);
  });

  it('would notice a node: import (the scan itself works)', () => {
    const { external } = importGraph(['manifests/crypto/ed25519.node.ts', 'manifests/audit/verify-workers.node.ts']);
    expect([...external.keys()].filter(isNodeBuiltin)).toEqual(
      expect.arrayContaining(['node:crypto', 'node:worker_threads']),
    );
  });

  it("lets the auditor's page (web/) reach only isomorphic modules, and no Node builtin", () => {
    const page = modulesUnder('web');
    expect(page).toEqual(expect.arrayContaining(['web/app.ts', 'web/worker/verify.worker.ts']));
    const { modules, external } = importGraph(page);
    expect([...modules].filter((m) => m.startsWith('src/') || isNodeOnly(m))).toEqual([]);
    expect([...external.keys()].filter(isNodeBuiltin)).toEqual([]);
    expect([...external.keys()].filter((spec) => !ALLOWED_PACKAGES.some((re) => re.test(spec)))).toEqual([]);
  });

  it('names Node-only modules by folder or suffix', () => {
    expect(isNodeOnly('store/fs/blob-store.ts')).toBe(true);
    expect(isNodeOnly('manifests/log/level/log.ts')).toBe(true);
    expect(isNodeOnly('store/hash/native.node.ts')).toBe(true);
    expect(isNodeOnly('manifests/audit/verify-chain.ts')).toBe(false);
  });
});
