/**
 * The README's error table is the contract's documentation: every code of every layer's closed union is in it,
 * with the class that carries it, and the table names no code that no class can throw.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const codesOf = (path: string, type: string): string[] => {
  const union = new RegExp(`export type ${type} =([^;]+);`).exec(read(path))?.[1] ?? '';
  return [...union.matchAll(/'([A-Z_]+)'/g)].map((m) => m[1]!);
};

const LAYERS = [
  { cls: 'StoreError', codes: codesOf('store/errors.ts', 'StoreErrorCode') },
  { cls: 'ManifestError', codes: codesOf('manifests/errors.ts', 'ManifestErrorCode') },
  { cls: 'LedgerError', codes: codesOf('src/errors.ts', 'LedgerErrorCode') },
  // The command line's own codes (src/cli/io.ts), which no library class carries.
  { cls: 'CLI', codes: codesOf('src/cli/io.ts', 'CliErrorCode') },
];

/** README rows: `| \`A\` / \`B\` | LedgerError / StoreError | meaning |` → code → classes. */
function readmeTable(): Map<string, Set<string>> {
  const section = read('README.md').split('## Error codes')[1]!.split('\n## ')[0]!;
  const table = new Map<string, Set<string>>();
  for (const row of section.split('\n').filter((l) => l.startsWith('| `'))) {
    const [codes, classes] = row.split('|').slice(1, 3);
    for (const [, code] of codes!.matchAll(/`([A-Z_]+)`/g)) {
      table.set(code!, new Set(classes!.split('/').map((c) => c.trim())));
    }
  }
  return table;
}

describe('README error codes', () => {
  const table = readmeTable();

  it.each(LAYERS)('lists every $cls code with its class', ({ cls, codes }) => {
    expect(codes.length).toBeGreaterThan(cls === 'CLI' ? 1 : 3);
    expect(codes.filter((code) => !table.get(code)?.has(cls))).toEqual([]);
  });

  it('lists no code that no class declares', () => {
    const declared = new Set(LAYERS.flatMap((l) => l.codes));
    expect([...table.keys()].filter((code) => !declared.has(code))).toEqual([]);
  });
});
