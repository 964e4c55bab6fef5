/**
 * `handoff-ledger audit-ui`: the page on 127.0.0.1 with a bundle preloaded, read-only, nothing else
 * reachable; and the preloaded page verifying in a real browser exactly as the CLI does.
 */
import { request } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { describeVerdict } from '../../manifests/audit/report-text.js';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer, type AuditServer } from '../../src/ops/audit-server.js';
import { run as auditUi, serve } from '../../src/cli/audit-ui.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { TAMPER_CASES, writeCase } from '../support/tamper-cases.js';
import { tempDir } from '../support/tmp.js';
import { ensurePageBuilt } from '../support/page-build.js';

beforeAll(() => {
  ensurePageBuilt();
}, 120_000);

/** A raw HTTP request, so the Host header and method are the test's own. */
function get(url: string, o: { method?: string; host?: string; path?: string } = {}) {
  const u = new URL(url);
  return new Promise<{ status: number; body: string; type?: string }>((done, fail) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method: o.method ?? 'GET',
        path: o.path ?? u.pathname,
        headers: { host: o.host ?? u.host },
      },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => done({ status: res.statusCode!, body, type: res.headers['content-type'] }));
      },
    );
    req.on('error', fail);
    req.end();
  });
}

async function blobCase() {
  const root = tempDir();
  return writeCase(
    TAMPER_CASES.find((c) => c.name === 'blob-bit')!,
    join(root, 'bundle'),
    join(root, 'trust.json'),
  );
}

describe('audit-ui server', () => {
  let server: AuditServer;
  let paths: { dir: string; trustPath: string };
  let root: string;
  beforeAll(async () => {
    // Not tempDir(): that one is removed after each test, and this bundle serves the whole block.
    root = mkdtempSync(join(tmpdir(), 'hl-audit-ui-'));
    paths = await writeCase(
      TAMPER_CASES.find((c) => c.name === 'blob-bit')!,
      join(root, 'bundle'),
      join(root, 'trust.json'),
    );
    server = await startAuditServer({
      page: auditorPagePath()!,
      bundle: paths.dir,
      hasBlobs: true,
      trust: paths.trustPath,
    });
  });
  afterAll(async () => {
    await server?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('listens on 127.0.0.1 and serves the page with the preload announced', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const page = await get(server.url);
    expect(page.status).toBe(200);
    expect(page.body).toContain(
      '<meta name="handoff-ledger-preload" content="{&#34;bundle&#34;:{&#34;name&#34;:&#34;bundle&#34;',
    );
    expect(page.body).toContain('Content-Security-Policy');
  });

  it("serves the bundle's files and the trust file", async () => {
    expect((await get(`${server.url}bundle/bundle.json`)).status).toBe(200);
    const jsonl = await get(`${server.url}bundle/manifests.jsonl`);
    expect(jsonl.body.split('\n')).toHaveLength(10);
    expect((await get(`${server.url}trust.json`)).status).toBe(200);
  });

  it('serves nothing else: other paths, traversal, symlinked blobs and unknown blobs are 404', async () => {
    const hex = 'a'.repeat(64);
    symlinkSync('/etc/passwd', join(paths.dir, 'blobs/blake3', hex));
    for (const path of [
      '/package.json',
      '/bundle/../package.json',
      '/bundle/%2e%2e/trust.json',
      '/bundle/',
      '/bundle/blobs/blake3/',
      `/bundle/blobs/blake3/${hex}`,
      `/bundle/blobs/blake3/${'b'.repeat(64)}`,
      '/etc/passwd',
    ]) {
      expect((await get(server.url, { path })).status, path).toBe(404);
    }
  });

  it('is read-only and answers only to its own host name', async () => {
    expect((await get(server.url, { method: 'POST' })).status).toBe(405);
    expect((await get(server.url, { method: 'DELETE', path: '/bundle/manifests.jsonl' })).status).toBe(405);
    expect((await get(server.url, { host: 'attacker.example' })).status).toBe(421);
  });
});

describe('audit-ui command', () => {
  it('refuses a folder that is not a bundle with BUNDLE_INVALID (exit 2)', async () => {
    const c = captureIo();
    expect(await auditUi([tempDir()], c.io)).toBe(2);
    expect(c.stderr()).toMatch(/^handoff-ledger: BUNDLE_INVALID: /);
  });

  it('escapes control and bidi characters of the bundle path it names in its messages', async () => {
    const hostile = join(tempDir(), 'evil\u001b[2J\u202ebundle');
    mkdirSync(hostile);
    const c = captureIo();
    expect(await auditUi([hostile], c.io)).toBe(2);
    expect(c.stderr()).toMatch(/^handoff-ledger: BUNDLE_INVALID: /);
    expect(c.stderr()).not.toMatch(/[\u001b\u202e]/);
    expect(c.stderr()).toContain('evil\\x1b[2J\\u{202e}bundle');
  });

  it('refuses a bad port and extra arguments as usage errors', async () => {
    await expect(serve(['--port', 'x'], captureIo().io)).rejects.toThrow(/--port/);
    await expect(serve(['a', 'b'], captureIo().io)).rejects.toThrow(/usage/);
  });

  // Starts its own browser: sized for a loaded 2-core CI machine (the waits bound time only).
  it(
    'preloads the bundle: the page verifies it on its own, as the CLI does, asking only its server',
    { timeout: 180_000 },
    async () => {
      const { dir, trustPath } = await blobCase();
      const c = captureIo();
      const server = await serve([dir, '--trust', trustPath], c.io);
      let browser: BrowserContext | undefined;
      let close = async () => {};
      try {
        expect(c.stdout()).toContain(`audit-ui: ${server.url} (bundle ${dir}, read-only)`);
        ({ browser, close } = await launchChromium());
        const page = await browser.newPage();
        const seen = watchPage(page);
        await page.goto(server.url);
        await page
          .waitForSelector('body[data-state="ok"], body[data-state="failed"], body[data-state="error"]', {
            timeout: 90_000,
          })
          .catch((err: unknown) => {
            throw new Error(
              `${(err as Error).message}\nrequests: ${seen.requests.join(' ')}\nerrors: ${seen.errors.join(' ')}`,
            );
          });
        const cliIo = captureIo();
        await verifyCli([dir, '--trust', trustPath, '--json', '--workers', '0'], cliIo.io);
        const cli = JSON.parse(cliIo.stdout()) as BundleAuditReport;
        expect(await page.textContent('#verdict')).toBe(`✗ ${describeVerdict(cli)}`);
        expect(
          await page.$$eval('#findings li', (lis) => lis.map((li) => `${li.dataset.code}@${li.dataset.line}`)),
        ).toEqual(['BLOB_DIGEST@4']);
        const foreign = seen.requests.filter((u) => !u.startsWith(server.url) && !u.startsWith('blob:'));
        expect(foreign).toEqual([]);
        expect(seen.requests.some((u) => u.includes('/bundle/blobs/blake3/'))).toBe(true);
        expect(seen.errors).toEqual([]);
      } finally {
        await close();
        await server.close();
      }
    },
  );
});
