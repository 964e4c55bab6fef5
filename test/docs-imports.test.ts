/**
 * Every import the documentation shows (`import { … } from 'handoff-ledger…'` in README.md and docs/)
 * names an entry point of package.json and names that entry point exports, so a copied example runs.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
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

describe("the README's PostgreSQL example", () => {
  // It passed `trust: otherHostsTrust` and never said what that is; the value is a `keys export` file's JSON, which
  // openLedger checks itself: no parse function (the main entry exports none) is needed.
  it('builds the trust value it passes from a keys export file, which openLedger takes as it is', async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const example = readme.slice(readme.indexOf('## Many processes and hosts: PostgreSQL'));
    expect(example).toMatch(/const otherHostsTrust = JSON\.parse\(readFileSync\('[^']+', 'utf8'\)\);\n/);
    const { openLedger } = await import('../src/index.js');
    const { tempDir } = await import('./support/tmp.js');
    const other = await openLedger({ root: tempDir(), host: 'harness-us-1' });
    const exported = JSON.stringify(other.trustStore(), null, 2); // what keys export writes
    await other.close();
    const ledger = await openLedger({ root: tempDir(), host: 'harness-eu-1', trust: JSON.parse(exported) });
    await ledger.close();
    await expect(
      openLedger({ root: tempDir(), host: 'harness-eu-1', trust: { ...JSON.parse(exported), version: 2 } }),
    ).rejects.toMatchObject({ code: 'TRUST_INVALID' });
  });

  // Each host's keys export lists its own keys; the trust option and HANDOFF_LEDGER_TRUST take one store. With two
  // other hosts a library user had no way to merge their files as verify --trust merges them: mergeTrust was internal.
  it("merges several other hosts' keys export files with mergeTrust from the entry point it names", async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Many processes and hosts: PostgreSQL')).split('\n## ')[0]!;
    const said = /import \{ mergeTrust, parseTrustStore \} from\s+'(handoff-ledger[^']*)'/.exec(section);
    expect(said, 'the section says where mergeTrust is imported from').not.toBeNull();
    expect(section.replace(/\s+/g, ' ')).toContain(
      "mergeTrust(...files.map((f) => parseTrustStore(readFileSync(f, 'utf8'))))",
    );
    const { mergeTrust, parseTrustStore } = (await import(
      pathToFileURL(sourceOf(said![1]!)!).href
    )) as typeof import('../manifests/index.js');
    const { openLedger } = await import('../src/index.js');
    const { tempDir } = await import('./support/tmp.js');
    const files: string[] = [];
    const dir = tempDir();
    for (const host of ['harness-us-1', 'harness-ap-1']) {
      const other = await openLedger({ root: tempDir(), host });
      files.push(join(dir, `${host}.json`));
      writeFileSync(files.at(-1)!, JSON.stringify(await other.storeTrust(), null, 2)); // what keys export writes
      await other.close();
    }
    const trust = mergeTrust(...files.map((f) => parseTrustStore(readFileSync(f, 'utf8'))));
    expect(trust.keys.map((k) => k.host).sort()).toEqual(['harness-ap-1', 'harness-us-1']);
    const ledger = await openLedger({ root: tempDir(), host: 'harness-eu-1', trust });
    expect(
      ledger
        .trustStore()
        .keys.map((k) => k.host)
        .sort(),
    ).toEqual(['harness-ap-1', 'harness-eu-1', 'harness-us-1']);
    await ledger.close();
  });
});

describe("the README's table for a Harness that calls the SDK itself", () => {
  // It named anthropicSubmitHandoffTool beside summarySchemaFor (the main entry's) without saying that only
  // handoff-ledger/adapters/anthropic exports it: an import from 'handoff-ledger' found nothing.
  it("names the entry point of each name it gives that the main entry does not export, in the name's row", async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme
      .slice(readme.indexOf('A Harness that calls the SDK itself'))
      .split('\n\n')
      .slice(0, 2)
      .join('\n');
    const rows = section.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| ---'));
    expect(rows.length).toBeGreaterThanOrEqual(4);
    const byEntry = new Map<string, Set<string>>();
    for (const specifier of Object.keys(pkg.exports).filter((e) => !e.endsWith('.json'))) {
      const name = specifier === '.' ? 'handoff-ledger' : `handoff-ledger/${specifier.slice(2)}`;
      byEntry.set(name, new Set(Object.keys((await import(pathToFileURL(sourceOf(name)!).href)) as object)));
    }
    const unplaced: string[] = [];
    for (const row of rows)
      for (const [, name] of row.matchAll(/`([A-Za-z_$][\w$]*)[`(]/g)) {
        const from = [...byEntry].filter(([, names]) => names.has(name!)).map(([entry]) => entry);
        if (from.length === 0 || from.includes('handoff-ledger')) continue;
        if (!from.some((entry) => row.includes(`\`${entry}\``))) unplaced.push(`${name} (${from.join(', ')})`);
      }
    expect(unplaced).toEqual([]);
  });
});
