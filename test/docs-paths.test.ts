/**
 * docs/DESIGN.md, docs/ARCHITECTURE.md and docs/AUDIT.md name the repository's files and the code's names as they
 * are: every path they give (`src/…`, `store/…`, `manifests/…`, `web/…`, `test/…`, `benchmarks/…`, `docs/…`) exists,
 * a name they place in a file (`` `name` (path.ts `` , `` `name` in path.ts ``, `` (`name`, path.ts ``) is in that
 * file, a `Class.member` they name is a member of a class or interface the code declares, and a section of another
 * document they point to (`DESIGN.md, "The pin on disk"`) is a heading or a bold-led paragraph there. A file moved or a
 * function renamed leaves no stale pointer behind in the contributors' and auditors' maps.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DOCS = ['docs/DESIGN.md', 'docs/ARCHITECTURE.md', 'docs/AUDIT.md'];
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
/** A document's text with its line breaks and indentation as single spaces (a path or name may wrap). */
const flat = (file: string) => read(file).replace(/\s+/g, ' ');

/** The repository paths a text names: a top-level folder of the repository, then a path (no glob, no placeholder). */
function pathsNamed(text: string): string[] {
  const found = text.matchAll(/(?<![\w./<>-])((?:src|store|manifests|web|test|benchmarks|docs)\/[\w./*<>-]*[\w/*])/g);
  return [...new Set([...found].map((m) => m[1]!).filter((p) => !/[*<>]/.test(p)))];
}

/** The (name, file) pairs a text places together: `` `name` (file `` , `` `name` in file ``, `` (`name`, file ``. */
function namesInFiles(text: string): Array<{ name: string; file: string }> {
  const file = '((?:src|store|manifests|web)\\/[\\w./-]+\\.ts)';
  const name = '`([A-Za-z_][\\w.]*)(?:\\(\\))?`';
  const patterns = [
    new RegExp(`${name} \\(${file}[,;:)]`, 'g'),
    new RegExp(`${name} in \`?${file}`, 'g'),
    new RegExp(`\\(${name}, ${file}`, 'g'),
  ];
  return patterns.flatMap((re) => [...text.matchAll(re)].map((m) => ({ name: m[1]!, file: m[2]! })));
}

/** The documents a reference may name, by the name the documents use for them. */
const REFERABLE: Record<string, string> = {
  'DESIGN.md': 'docs/DESIGN.md',
  'ARCHITECTURE.md': 'docs/ARCHITECTURE.md',
  'AUDIT.md': 'docs/AUDIT.md',
  README: 'README.md',
  'README.md': 'README.md',
  'benchmarks/README.md': 'benchmarks/README.md',
  'SECURITY.md': 'SECURITY.md',
  'web/README.md': 'web/README.md',
};

/** The references to a section of another document a text makes: `DESIGN.md, "The pin on disk"` and the like. */
function sectionRefs(text: string): Array<{ file: string; section: string }> {
  const names = Object.keys(REFERABLE)
    .sort((a, b) => b.length - a.length)
    .map((n) => n.replace(/[.]/g, '\\.'))
    .join('|');
  const re = new RegExp(`(?:docs/)?(${names})(?:'s)?,? \\(?"([^"]+)"`, 'g');
  return [...text.matchAll(re)].map((m) => ({ file: REFERABLE[m[1]!]!, section: m[2]! }));
}

/** Whether a document has a section of that name: a heading that holds it, or a paragraph led by it in bold. */
function hasSection(text: string, section: string): boolean {
  const lines = text.split('\n');
  return lines.some((l) => /^#+ /.test(l) && l.includes(section)) || text.replace(/\s+/g, ' ').includes(`**${section}`);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** JavaScript's and the platform's own objects, which the documents name as `JSON.parse` and the like. */
const PLATFORM = new Set(['JSON', 'Buffer', 'TextEncoder', 'TextDecoder', 'Math', 'Number', 'Object', 'Promise']);

describe('the paths and names docs/ gives', () => {
  it.each(DOCS)('%s names only paths that exist', (doc) => {
    const paths = pathsNamed(flat(doc));
    expect(paths.length).toBeGreaterThan(5);
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });

  it.each(DOCS)('%s places each name it puts in a file in that file', (doc) => {
    expect(sectionRefs('as DESIGN.md, "The pin on disk" says; docs/AUDIT.md, "Witnesses"')).toEqual([
      { file: 'docs/DESIGN.md', section: 'The pin on disk' },
      { file: 'docs/AUDIT.md', section: 'Witnesses' },
    ]);
    expect(hasSection(read('docs/DESIGN.md'), 'The pin on disk')).toBe(true);
    expect(hasSection(read('docs/DESIGN.md'), 'The pin on paper')).toBe(false);
    const pairs = namesInFiles(flat(doc));
    const wrong = pairs.filter(({ name, file }) => {
      const last = name.split('.').pop()!;
      return !existsSync(join(ROOT, file)) || !new RegExp(`\\b${last}\\b`).test(read(file));
    });
    expect(wrong).toEqual([]);
  });

  it('DESIGN.md and ARCHITECTURE.md name as `Class.member` only members of a class or interface the code declares', () => {
    const sources = ['src', 'store', 'manifests', 'web'].flatMap(sourceFiles).map((f) => read(f));
    const said = DOCS.slice(0, 2).flatMap((doc) => [...read(doc).matchAll(/`([A-Z][A-Za-z0-9]*)\.([a-z_]\w*)/g)]);
    expect(said.length).toBeGreaterThan(10);
    const wrong = said
      .filter((m) => !PLATFORM.has(m[1]!) && m[1] !== m[1]!.toUpperCase())
      .filter(([, cls, member]) => {
        const declaring = sources.filter((s) => new RegExp(`\\b(?:class|interface) ${cls}\\b`).test(s));
        return !declaring.some((s) => new RegExp(`\\b${member}\\b`).test(s));
      })
      .map((m) => m[0]);
    expect(wrong).toEqual([]);
  });

  it.each(DOCS)('%s points only to sections that exist (`DESIGN.md, "The pin on disk"`)', (doc) => {
    const refs = sectionRefs(flat(doc));
    expect(refs.length).toBeGreaterThan(0);
    expect(refs.filter(({ file, section }) => !hasSection(read(file), section))).toEqual([]);
  });

  // The checks above find what they are meant to: a wrong path, a name in the wrong file, a missing section.
  it('finds a path that does not exist, a name not in its file, a section no document has', () => {
    expect(pathsNamed('see `src/ledger/no-such-file.ts` and store/fs/blob-store.ts.')).toEqual([
      'src/ledger/no-such-file.ts',
      'store/fs/blob-store.ts',
    ]);
    expect(pathsNamed('`<root>/checkpoints/<stem>.pin`, `src/cli/*.ts`, fsck-*.ts')).toEqual([]);
    const pairs = namesInFiles(
      'one (`createFileWhole`, store/fs/atomic-file.ts) and `sharedRoot` in src/ledger/open.ts',
    );
    expect(pairs.sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'createFileWhole', file: 'store/fs/atomic-file.ts' },
      { name: 'sharedRoot', file: 'src/ledger/open.ts' },
    ]);
  });
});

describe("the layers' READMEs (store/, manifests/, src/) name their files and folders as they are", () => {
  // docs/ is held to its paths above; the READMEs beside the code name files by their bare names (`checker.ts`,
  // `log/level/`), which a rename or move leaves behind just the same.
  const LAYERS = ['store', 'manifests', 'src'];
  /** Every file and folder under `dir`, as paths relative to it (folders with a trailing slash). */
  const entries = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? [`${e.name}/`, ...entries(`${dir}/${e.name}`).map((p) => `${e.name}/${p}`)] : [e.name],
    );
  /** The file and folder names a README gives in code spans: `checker.ts`, `fs/`, `log/level/`, `*.node.ts` aside. */
  const named = (text: string) =>
    [...new Set([...text.matchAll(/`([\w.-]+(?:\/[\w.-]+)*(?:\.ts|\/))`/g)].map((m) => m[1]!))].filter(
      (n) => !n.includes('*'),
    );
  const under = (layer: string, name: string) =>
    entries(layer).some((p) => p === name || p.endsWith(`/${name}`)) || existsSync(join(ROOT, name));

  it.each(LAYERS)('%s/README.md names only files and folders that are there', (layer) => {
    const names = named(read(`${layer}/README.md`));
    expect(names.length).toBeGreaterThan(5);
    expect(names.filter((n) => !under(layer, n))).toEqual([]);
  });

  it.each(LAYERS)('%s/README.md names every folder of its layer', (layer) => {
    const folders = readdirSync(join(ROOT, layer), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => `${e.name}/`);
    expect(folders.length).toBeGreaterThan(2);
    const said = named(read(`${layer}/README.md`));
    expect(folders.filter((f) => !said.includes(f))).toEqual([]);
  });

  it('finds a file or folder that is not there', () => {
    expect(named('the chain (`checker.ts`), `log/level/`, `*.node.ts` and `gone.ts`')).toEqual([
      'checker.ts',
      'log/level/',
      'gone.ts',
    ]);
    expect(under('manifests', 'checker.ts')).toBe(true);
    expect(under('manifests', 'log/level/')).toBe(true);
    expect(under('manifests', 'gone.ts')).toBe(false);
    expect(under('store', 'pg/')).toBe(true);
    expect(under('store', 'level/')).toBe(false);
  });
});
