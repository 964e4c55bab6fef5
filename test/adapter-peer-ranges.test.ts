/**
 * The optional peer SDKs' ranges in package.json hold at their lower ends: the adapter suite (test/adapters) runs
 * again, in a child vitest (test/adapters/lowest.config.ts), against openai, @anthropic-ai/sdk, @google/genai and ai
 * at the least version each range admits, installed from the npm registry (or npm's cache) into a directory of its
 * own, and passes; a check in that run makes sure those copies, not the repository's, are the ones loaded.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
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
});
