/**
 * `@opentelemetry/api` is an optional peer dependency: yarn classic and `npm install --omit=peer` leave it out, and
 * npm does not install an optional peer by itself. The compiled package is laid out as an application gets it, in a
 * node_modules of its own that holds every other dependency but not the API, so Node's resolution finds no API:
 * the library and every store command of the CLI then run with telemetry off, and only a ledger asked to record
 * through a tracer or meter provider is refused, with a code and the package's name (README, Install).
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleSummary } from './support/tmp.js';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '..');

let base: string;
let app: string;
let cli: string;

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'hl-no-otel-'));
  app = join(base, 'app');
  const modules = join(app, 'node_modules');
  const pkg = join(modules, 'handoff-ledger');
  mkdirSync(join(pkg, 'dist'), { recursive: true });
  // Copies, not links: Node resolves a linked file's imports from where it really lies (the repository, which has
  // the API installed for its tests).
  cpSync(join(repo, 'package.json'), join(pkg, 'package.json'));
  for (const dir of ['src', 'store', 'manifests'])
    cpSync(join(repo, 'dist', dir), join(pkg, 'dist', dir), { recursive: true });
  // Every other installed package, linked (a package's own imports resolve from the repository's node_modules).
  for (const name of readdirSync(join(repo, 'node_modules'))) {
    if (name === '@opentelemetry' || name === '.bin' || name.startsWith('.')) continue;
    symlinkSync(join(repo, 'node_modules', name), join(modules, name));
  }
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  cli = join(pkg, 'dist', 'src', 'cli', 'main.js');
  // The layout is what it claims: from inside the package, the API cannot be found.
  const fromPackage = createRequire(join(pkg, 'dist', 'src', 'index.js'));
  expect(() => fromPackage.resolve('@opentelemetry/api')).toThrow(/Cannot find module '@opentelemetry\/api'/);
  expect(fromPackage.resolve('zod')).toContain('zod');
});

afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('without @opentelemetry/api installed', { timeout: 60_000 }, () => {
  it("runs the CLI's store commands: publish, resume, history, export and verify answer, telemetry off", async () => {
    const root = join(app, 'store');
    const summary = join(app, 'summary.json');
    writeFileSync(summary, JSON.stringify(sampleSummary('no-otel')));
    const scope = ['--root', root, '--host', 'app-host', '--principal', 'alice', '--session', 's1'];
    const cmd = async (...args: string[]) => {
      const r = await run(process.execPath, [cli, ...args], { cwd: app }).catch(
        (err: { code?: number; stderr?: string }) => err,
      );
      return r as { stdout?: string; stderr?: string; code?: number };
    };
    const published = await cmd('publish', ...scope, '--run', 'r1', '--json', summary);
    expect(published.stderr ?? '', 'publish').not.toMatch(/internal error/);
    expect(published.code, String(published.stderr)).toBeUndefined();
    expect(JSON.parse(published.stdout!)).toMatchObject({ seq: 0 });
    const resumed = await cmd('resume', ...scope, '--json');
    expect(resumed.code, String(resumed.stderr)).toBeUndefined();
    expect(JSON.parse(resumed.stdout!)).toMatchObject({ seq: 0, summary: { task: sampleSummary('no-otel').task } });
    const history = await cmd('history', ...scope, '--json');
    expect(history.code, String(history.stderr)).toBeUndefined();
    // Export (the ledger's telemetry) and verify (an audit's own).
    const store = ['--root', root, '--host', 'app-host'];
    for (const args of [
      ['export', ...store, '--out', join(app, 'bundle')],
      ['keys', 'export', ...store, '--out', join(app, 'trust.json')],
      ['verify', join(app, 'bundle'), '--trust', join(app, 'trust.json')],
    ]) {
      const r = await cmd(...args);
      expect(r.code, `${args.join(' ')}: ${String(r.stderr)}`).toBeUndefined();
    }
  });

  it('runs the library with telemetry off, and refuses only a tracer or meter provider, naming the package', async () => {
    const script = [
      `import { openLedger, LedgerTelemetry } from 'handoff-ledger';`,
      `import { existsSync } from 'node:fs';`,
      `const out = {};`,
      `const ledger = await openLedger({ root: 'lib-store', host: 'h', telemetry: { identifiers: 'plain' } });`,
      `out.seq = (await ledger.publish({ principal: 'p', session: 's', run: 'r' }, { task: 't', state: 's', nextSteps: [] })).seq;`,
      `out.resumed = (await ledger.resume({ principal: 'p', session: 's' }))?.seq;`,
      `await ledger.close();`,
      `out.run = await new LedgerTelemetry().run('publish', {}, async (span) => span.isRecording());`,
      `for (const given of [{ tracerProvider: { getTracer() {} } }, { meterProvider: { getMeter() {} } }]) {`,
      `  const root = 'refused-' + Object.keys(given)[0];`,
      `  const e = await openLedger({ root, host: 'h', telemetry: given }).then(() => undefined, (e) => e);`,
      `  const direct = (() => { try { new LedgerTelemetry(given); } catch (e) { return e.code; } })();`,
      `  out[root] = { code: e?.code, message: e?.message, direct, made: existsSync(root) };`,
      `}`,
      `console.log(JSON.stringify(out));`,
    ].join('\n');
    writeFileSync(join(app, 'lib.mjs'), script);
    const { stdout } = await run(process.execPath, ['lib.mjs'], { cwd: app });
    const out = JSON.parse(stdout) as Record<string, unknown>;
    expect(out).toMatchObject({ seq: 0, resumed: 0, run: false });
    for (const field of ['tracerProvider', 'meterProvider'])
      expect(out[`refused-${field}`], field).toEqual({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining(`telemetry ${field} needs @opentelemetry/api`),
        direct: 'INVALID_ARGUMENT',
        made: false,
      });
  });
});
