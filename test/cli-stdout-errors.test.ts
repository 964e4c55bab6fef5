/**
 * A stdout that fails (a full disk, a reader that closed early) after the command did its work: real processes,
 * since only a real stdout reports the failure as an asynchronous 'error' event. Needs `npm run build`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { sampleSummary, tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

/**
 * Publishes one summary with stdout on /dev/full and stderr as `stderr` ('pipe' or /dev/full too); returns how the
 * publish ended and how many manifests the session then has.
 */
function publishIntoFullDisk(stderr: 'pipe' | 'full'): { status: number | null; stderr: string; manifests: number } {
  const dir = tempDir();
  const scope = ['--root', join(dir, 'store'), '--host', 'h1', '--principal', 'alice', '--session', 's1'];
  const file = join(dir, 's.json');
  writeFileSync(file, JSON.stringify(sampleSummary('full disk')));
  const full = openSync('/dev/full', 'w');
  let r;
  try {
    r = spawnSync(process.execPath, [CLI, 'publish', ...scope, '--run', 'r1', file], {
      stdio: ['ignore', full, stderr === 'full' ? full : 'pipe'],
      encoding: 'utf8',
      timeout: 60_000,
    });
  } finally {
    closeSync(full);
  }
  const h = spawnSync(process.execPath, [CLI, 'history', ...scope, '--json'], { encoding: 'utf8', timeout: 60_000 });
  expect(h.status, h.stderr).toBe(0);
  return { status: r.status, stderr: r.stderr ?? '', manifests: (JSON.parse(h.stdout) as unknown[]).length };
}

describe('a failed write to stdout', () => {
  it.skipIf(!existsSync('/dev/full'))(
    'publish into /dev/full: exit 2 with "cannot write output", no crash dump, and the manifest is published once',
    () => {
      const r = publishIntoFullDisk('pipe');
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toBe('handoff-ledger: cannot write output: ENOSPC (the operation itself completed)\n');
      expect(r.stderr).not.toContain("Unhandled 'error' event");
      expect(r.manifests).toBe(1);
    },
    120_000,
  );

  it("resume of a large summary into a reader that closes early: no crash dump, the command's exit code", async () => {
    const dir = tempDir();
    const scope = ['--root', join(dir, 'store'), '--host', 'h1', '--principal', 'alice', '--session', 's1'];
    const file = join(dir, 'big.json');
    writeFileSync(file, JSON.stringify({ ...sampleSummary('big'), state: 'x'.repeat(900_000) }));
    const pub = spawnSync(process.execPath, [CLI, 'publish', ...scope, '--run', 'r1', file], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(pub.status, pub.stderr).toBe(0);
    for (const extra of [[], ['--json']]) {
      const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [CLI, 'resume', ...scope, ...extra], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        // The reader takes a few bytes and goes away, as `| head -c 10` does.
        child.stdout.once('data', () => child.stdout.destroy());
        child.on('close', (code) => resolve({ code, stderr }));
      });
      expect(r.stderr).not.toContain("Unhandled 'error' event");
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    }
  }, 120_000);

  it.skipIf(!existsSync('/dev/full'))(
    'publish with stdout and stderr both on /dev/full: exit 2 (never 1), the manifest published once',
    () => {
      const r = publishIntoFullDisk('full');
      expect(r.status).toBe(2);
      expect(r.manifests).toBe(1);
    },
    120_000,
  );
});

describe('a failed write to stderr', () => {
  it('loses the message, never the exit code: a usage error with its reader gone still exits 2', async () => {
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'verify', '/nonexistent-bundle'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stderr.destroy(); // the reader went away before the command said anything
      child.on('close', (c) => resolve(c));
    });
    expect(code).toBe(2);
  }, 60_000);
});
