/**
 * The optional peer SDKs' ranges in package.json hold at their lower ends: the adapter suite (test/adapters) runs
 * again, in a child vitest (test/adapters/lowest.config.ts), against openai, @anthropic-ai/sdk, @google/genai and ai
 * at the least version each range admits, installed from the npm registry (or npm's cache) into a directory of its
 * own, and passes; a check in that run makes sure those copies, not the repository's, are the ones loaded. The
 * adapters and their tests also type-check against those SDKs' declarations.
 */
import { execFile, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = resolve(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};
const SDKS = ['openai', '@anthropic-ai/sdk', '@google/genai', 'ai'];

/** The least version a caret range `^x.y.z` admits. */
function lowest(range: string): string {
  const m = /^\^(\d+\.\d+\.\d+)$/.exec(range);
  if (!m) throw new Error(`peer range ${range}: expected ^x.y.z`);
  return m[1]!;
}

describe('the adapters at the lowest versions of their peer SDK ranges', { timeout: 600_000 }, () => {
  const versions = Object.fromEntries(SDKS.map((name) => [name, lowest(pkg.peerDependencies[name]!)]));
  // Kept for the whole describe (the support's tempDir is removed after each test).
  const dir = mkdtempSync(join(tmpdir(), 'hl-lowest-peers-'));
  const modules = join(dir, 'node_modules');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeAll(async () => {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'lowest-peers', private: true, type: 'module' }));
    const specs = Object.entries(versions).map(([name, version]) => `${name}@${version}`);
    await promisify(execFile)(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', '--no-package-lock', ...specs],
      { cwd: dir, maxBuffer: 16 * 1024 * 1024 },
    );
  }, 600_000);

  it('every SDK is an optional peer with a caret range', () => {
    for (const name of SDKS) expect(pkg.peerDependenciesMeta[name]?.optional, name).toBe(true);
  });

  it('passes the adapter suite', async () => {
    const child = spawn(
      process.execPath,
      [join(repo, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--config', 'test/adapters/lowest.config.ts'],
      {
        cwd: repo,
        env: { ...process.env, HL_LOWEST_PEERS: modules, HL_LOWEST_VERSIONS: JSON.stringify(versions), NO_COLOR: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((done) => child.on('close', done));
    // The child's summary, e.g. "Tests  129 passed (129)": every test passed, the version check among them.
    const summary = /Tests\s+(.*)\((\d+)\)/.exec(out);
    const failures = out
      .split('\n')
      .filter((line) => /FAIL|✗|×|AssertionError|Error:/.test(line))
      .slice(0, 20)
      .join('\n');
    expect(code, `the child vitest exited ${code}:\n${failures}`).toBe(0);
    expect(summary?.[1]?.trim(), out.slice(-2000)).toBe(`${summary?.[2]} passed`);
    expect(Number(summary![2])).toBeGreaterThan(100);
    // The check that the lowest copies are the ones loaded ran among them (not dropped from the child's files).
    expect(out).toMatch(/✓ test\/adapters\/peer-versions\.check\.ts \(3 tests\)/);
  });

  it('type-checks the adapters and their tests against those SDKs', async () => {
    // The repository's sources seen from beside the lowest copies (symlinks, resolved where they stand), every other
    // package linked from the repository's node_modules.
    for (const tree of ['src', 'store', 'manifests', 'test']) symlinkSync(join(repo, tree), join(dir, tree));
    const repoModules = join(repo, 'node_modules');
    for (const entry of readdirSync(repoModules)) {
      const names = entry.startsWith('@') ? readdirSync(join(repoModules, entry)).map((n) => `${entry}/${n}`) : [entry];
      for (const name of names) {
        if (name.startsWith('.') || existsSync(join(modules, name))) continue;
        mkdirSync(dirname(join(modules, name)), { recursive: true });
        symlinkSync(join(repoModules, name), join(modules, name));
      }
    }
    const adapters = ['openai', 'anthropic', 'gemini', 'ai-sdk'];
    const compilerOptions = {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      lib: ['ES2024'],
      types: ['node'],
      strict: true,
      noUncheckedIndexedAccess: true,
      esModuleInterop: true,
      noEmit: true,
      skipLibCheck: true, // the SDKs' own declarations are theirs to check; ours are checked against them here
      preserveSymlinks: true,
    };
    const files = adapters.flatMap((a) => [`src/adapters/${a}.ts`, `test/adapters/${a}.test.ts`]);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }));
    const result = await promisify(execFile)(
      process.execPath,
      [join(repoModules, 'typescript', 'bin', 'tsc'), '-p', dir, '--listFiles'],
      {
        cwd: dir,
        maxBuffer: 64 * 1024 * 1024,
      },
    ).catch((err: { stdout?: string; stderr?: string }) => err);
    const listed = `${result.stdout ?? ''}`.split('\n');
    const errors = listed.filter((line) => /error TS/.test(line));
    expect(errors, `${result.stderr ?? ''}`).toEqual([]);
    // Each SDK's declarations came from the lowest copy, none from the repository's.
    for (const name of SDKS) {
      expect(
        listed.some((f) => f.startsWith(join(modules, name) + '/')),
        name,
      ).toBe(true);
      expect(
        listed.some((f) => f.startsWith(join(repoModules, name) + '/')),
        name,
      ).toBe(false);
    }
  });
});
