/**
 * The adapters are optional: each SDK is an optional peer dependency, reachable only through its
 * subpath, and loaded only by a Harness that uses it (types only, or a dynamic import on first call).
 */
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, { types: string; default: string }>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

const ADAPTERS: Record<string, string> = {
  openai: 'openai',
  anthropic: '@anthropic-ai/sdk',
  gemini: '@google/genai',
  'ai-sdk': 'ai',
};

function emitted(name: string): string {
  const source = readFileSync(new URL(`../../src/adapters/${name}.ts`, import.meta.url), 'utf8');
  return ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.NodeNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
  }).outputText;
}

describe.each(Object.entries(ADAPTERS))('handoff-ledger/adapters/%s', (name, sdk) => {
  it('is a subpath export of the built module and its types', () => {
    expect(pkg.exports[`./adapters/${name}`]).toEqual({
      types: `./dist/src/adapters/${name}.d.ts`,
      default: `./dist/src/adapters/${name}.js`,
    });
  });

  // The suite runs against the version pinned here (in the range) and against the range's lowest version
  // (test/adapter-peer-ranges.test.ts).
  it(`has ${sdk} as an optional peer dependency with a caret range, pinned exactly in that range for the tests`, () => {
    expect(pkg.peerDependencies[sdk]).toMatch(/^\^\d+\.\d+\.\d+$/);
    expect(pkg.peerDependenciesMeta[sdk]).toEqual({ optional: true });
    expect(pkg.dependencies[sdk]).toBeUndefined();
    expect(pkg.devDependencies[sdk]).toMatch(/^\d+\.\d+\.\d+$/);
    const [low, pinned] = [pkg.peerDependencies[sdk]!.slice(1), pkg.devDependencies[sdk]!].map((v) =>
      v.split('.').map(Number),
    );
    expect(pinned![0], 'same major').toBe(low![0]);
    const atLeast = pinned![1]! > low![1]! || (pinned![1] === low![1] && pinned![2]! >= low![2]!);
    expect(atLeast, `${pkg.devDependencies[sdk]} in ${pkg.peerDependencies[sdk]}`).toBe(true);
  });

  it(`does not import ${sdk} when the module loads`, () => {
    const js = emitted(name);
    const staticImports = [...js.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    expect(staticImports.filter((s) => s === sdk || s!.startsWith(`${sdk}/`))).toEqual([]);
    expect(staticImports.every((s) => s!.startsWith('.'))).toBe(true);
  });
});

it('the main entry point imports no adapter', () => {
  const index = readFileSync(new URL('../../src/index.ts', import.meta.url), 'utf8');
  expect(index).not.toMatch(/adapters\//);
});
