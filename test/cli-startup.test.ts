/**
 * What the compiled command line loads before it does anything: `--version` and `--help` load none of the
 * store, LevelDB, zod or the telemetry API, and `verify` (an auditor's machine has no store) loads no LevelDB. The
 * modules are recorded by a module `resolve` hook in the child process and the files `require` resolves there (so the
 * CommonJS `classic-level` that `level` requires is seen too), so the test fails when a value import
 * (say of `openLedger` in src/cli/io.ts) pulls the whole library back into every command's start.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { exportBundle } from '../src/ops/export.js';
import { sampleSummary } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const base = mkdtempSync(join(tmpdir(), 'hl-startup-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

// Registers a resolve hook that appends every resolved URL to $HL_LOADED_LOG (the hooks run on their own thread).
const hooks = `data:text/javascript,${encodeURIComponent(`
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.HL_LOADED_LOG, r.url + '\\n');
  return r;
}`)}`;
// And, in the main thread, every file `require` resolves (the optional @opentelemetry/api is loaded with `require`).
const register = `data:text/javascript,${encodeURIComponent(`
import Module, { register } from 'node:module';
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
register(${JSON.stringify(hooks)});
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const file = resolveFilename.apply(this, args);
  if (file.startsWith('/')) appendFileSync(process.env.HL_LOADED_LOG, pathToFileURL(file).href + '\\n');
  return file;
};`)}`;

let run = 0;
/** Runs the CLI with `args`; returns the module URLs it loaded. */
function loaded(args: string[]): string[] {
  const log = join(base, `loaded-${run++}.txt`);
  try {
    execFileSync(process.execPath, ['--import', register, CLI, ...args], {
      env: { ...process.env, HL_LOADED_LOG: log, HANDOFF_LEDGER_ROOT: join(base, 'no-store') },
      stdio: 'pipe',
    });
  } catch (err) {
    throw new Error(`handoff-ledger ${args.join(' ')} failed: ${(err as { stderr?: Buffer }).stderr?.toString()}`);
  }
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

const from = (urls: string[], pkg: string) => urls.filter((u) => u.includes(`/node_modules/${pkg}/`));

describe('command line start', () => {
  const bundle = join(base, 'bundle');
  const trust = join(base, 'trust.json');

  beforeAll(async () => {
    const root = join(base, 'store');
    const ledger = await openLedger({ root, host: 'startup-host' });
    try {
      await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary('startup'));
      await exportBundle(ledger, { out: bundle });
    } finally {
      await ledger.close();
    }
    execFileSync(process.execPath, [CLI, 'keys', 'export', '--out', trust, '--root', root, '--host', 'startup-host']);
  });

  it('--version and --help load no store, LevelDB, zod or telemetry', () => {
    for (const args of [['--version'], ['--help'], ['verify', '--help']]) {
      const urls = loaded(args);
      expect(urls.some((u) => u === pathToFileURL(CLI).href)).toBe(true); // the hook saw the CLI itself
      for (const pkg of ['zod', 'level', '@opentelemetry/api']) expect(from(urls, pkg), `${args} ${pkg}`).toEqual([]);
      expect(urls.filter((u) => u.includes('/dist/src/ledger/'))).toEqual([]);
    }
  });

  it('verify checks a bundle without loading the store or LevelDB', () => {
    const urls = loaded(['verify', bundle, '--trust', trust]);
    expect(from(urls, 'zod').length).toBeGreaterThan(0); // it does parse the trust file and the bundle header
    expect(from(urls, 'level')).toEqual([]);
    expect(urls.filter((u) => u.includes('/dist/src/ledger/open.js'))).toEqual([]);
  });

  it('a command that opens the store loads it when it runs', () => {
    const urls = loaded(['checkpoint', '--root', join(base, 'store'), '--host', 'startup-host']);
    // The positive control of the absences above: the hook sees these packages when they are loaded.
    for (const pkg of ['level', '@opentelemetry/api', 'zod']) expect(from(urls, pkg).length, pkg).toBeGreaterThan(0);
    expect(urls.some((u) => u.includes('/dist/src/ledger/open.js'))).toBe(true);
  });
});
