/**
 * prune-declarations.mjs, the last step of `npm run build`, keeps the declaration files package.json `exports`
 * types reach and removes the others. Run here on a small package of its own (a copy of the script beside it, as the
 * script reads the package.json beside itself): an entry point's `types` is found wherever `exports` puts it, nested
 * under conditions (`import` / `require`, each with its own `types`) as well as at the entry's top.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from './support/tmp.js';
import { ROOT } from './support/entry-source.js';

/** A package at a fresh directory: `exports` as given, the declaration files as given (path → text). */
function packageWith(exports: unknown, files: Record<string, string>): string {
  const dir = tempDir('hl-prune-');
  copyFileSync(join(ROOT, 'prune-declarations.mjs'), join(dir, 'prune-declarations.mjs'));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'p', type: 'module', exports }));
  for (const layer of ['store', 'manifests', 'src']) mkdirSync(join(dir, 'dist', layer), { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

const FILES = {
  'dist/src/index.d.ts': "export type { A } from './a.js';\nexport declare const x: number;\n",
  'dist/src/a.d.ts': "import type { S } from '../store/s.js';\nexport type A = S;\n",
  'dist/store/s.d.ts': 'export type S = string;\n',
  'dist/src/cli/main.d.ts': 'export {};\n',
  'dist/manifests/unreached.d.ts': 'export type U = number;\n',
};
const REACHED = ['dist/src/index.d.ts', 'dist/src/a.d.ts', 'dist/store/s.d.ts'];
const UNREACHED = ['dist/src/cli/main.d.ts', 'dist/manifests/unreached.d.ts'];

function prune(dir: string): { kept: string[]; removed: string[] } {
  execFileSync(process.execPath, [join(dir, 'prune-declarations.mjs')], { cwd: dir, stdio: 'pipe' });
  const all = Object.keys(FILES);
  return {
    kept: all.filter((f) => existsSync(join(dir, f))),
    removed: all.filter((f) => !existsSync(join(dir, f))),
  };
}

describe('prune-declarations.mjs', { timeout: 60_000 }, () => {
  it("keeps what an entry's top-level types reach, removes the rest", () => {
    const dir = packageWith({ '.': { types: './dist/src/index.d.ts', default: './dist/src/index.js' } }, FILES);
    expect(prune(dir)).toEqual({ kept: REACHED, removed: UNREACHED });
  });

  it('keeps what types nested under conditions reach (import / require, each with its own types)', () => {
    const dir = packageWith(
      {
        '.': {
          import: { types: './dist/src/index.d.ts', default: './dist/src/index.js' },
          require: { types: './dist/src/index.d.ts', default: './dist/src/index.cjs' },
        },
        './package.json': './package.json',
      },
      FILES,
    );
    expect(prune(dir)).toEqual({ kept: REACHED, removed: UNREACHED });
  });

  it('keeps what the types of an exports without subpaths reach (conditions at its top)', () => {
    const dir = packageWith({ types: './dist/src/index.d.ts', default: './dist/src/index.js' }, FILES);
    expect(prune(dir)).toEqual({ kept: REACHED, removed: UNREACHED });
  });
});
