/**
 * `handoff-ledger audit-ui`: the page on 127.0.0.1 with a bundle (and trust file, earlier checkpoint, witness
 * keys and quorum) preloaded, read-only, nothing else reachable; refused combinations refused as `verify`
 * refuses them; and the preloaded page verifying in a real browser exactly as the CLI does.
 */
import { generateJwk } from '../../src/keys/local-signer.js';
import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import {
  appendFileSync,
  chmodSync,
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { describeCoverage, describeFinding, describeVerdict } from '../../manifests/audit/report-text.js';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { allowedHostsFor, startAuditServer, type AuditServer } from '../../src/ops/audit-server.js';
import { run as auditUi, serve } from '../../src/cli/audit-ui.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { TAMPER_CASES, writeCase } from '../support/tamper-cases.js';
import { tempDir } from '../support/tmp.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { cliVerify, writeCheckpointFiles, writeWitnessFiles } from '../support/checkpoint-bundle.js';
import { codesAt, expectSameAsCli, PAGE_URL, pageFindings, picked } from '../support/page-checks.js';
import { keyIdOf } from '../../manifests/format/trust.js';
import { printable, quoted } from '../../manifests/encoding/printable.js';

beforeAll(() => {
  ensurePageBuilt();
}, 120_000);

/** A raw HTTP request, so the Host header and method are the test's own. */
function get(url: string, o: { method?: string; host?: string; path?: string } = {}) {
  const u = new URL(url);
  return new Promise<{ status: number; body: string; type?: string; headers: Record<string, unknown> }>(
    (done, fail) => {
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
          res.on('end', () =>
            done({ status: res.statusCode!, body, type: res.headers['content-type'], headers: res.headers }),
          );
        },
      );
      req.on('error', fail);
      req.end();
    },
  );
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
    // The trust file by its name, for the page to say which it was given.
    expect(page.body).toContain(
      '&#34;trust&#34;:{&#34;url&#34;:&#34;/trust.json&#34;,&#34;names&#34;:[&#34;trust.json&#34;]}',
    );
    expect(page.body).toContain('Content-Security-Policy');
    // No other site may frame it (a meta CSP cannot say frame-ancestors: the header does).
    expect(page.headers).toMatchObject({
      'x-frame-options': 'DENY',
      'content-security-policy': "frame-ancestors 'none'",
    });
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
      // Served only when audit-ui was given them.
      '/since.note',
      '/witness-keys.txt',
    ]) {
      expect((await get(server.url, { path })).status, path).toBe(404);
    }
  });

  it('is read-only and answers only to its own host name', async () => {
    expect((await get(server.url, { method: 'POST' })).status).toBe(405);
    expect((await get(server.url, { method: 'DELETE', path: '/bundle/manifests.jsonl' })).status).toBe(405);
    expect((await get(server.url, { host: 'attacker.example' })).status).toBe(421);
    // Its own name without the port is another server's (the browser's default port): refused but on port 80.
    expect((await get(server.url, { host: '127.0.0.1' })).status).toBe(421);
  });

  it('answers on port 80 to the Host a browser sends there (no port: the scheme’s default)', () => {
    expect([...allowedHostsFor(80)].sort()).toEqual(['127.0.0.1', '127.0.0.1:80', 'localhost', 'localhost:80']);
    expect([...allowedHostsFor(8123)].sort()).toEqual(['127.0.0.1:8123', 'localhost:8123']);
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
    // Quoted once (`quoted`), as verify names it: it was put in raw and the whole line escaped (`\x1b`).
    expect(c.stderr()).toContain('evil\\u001b[2J\\u202ebundle" has no bundle.json; not a bundle');
  });

  it('refuses a bad port and extra arguments as usage errors', async () => {
    await expect(serve(['--port', 'x'], captureIo().io)).rejects.toThrow(/--port/);
    await expect(serve(['a', 'b'], captureIo().io)).rejects.toThrow(/usage/);
  });

  it('refuses a port that is not plain decimal 0-65535 (blank, hex, exponent, sign)', async () => {
    for (const port of [' ', '0x50', '1e3', '+80', '-1', '80.0', '65536'])
      await expect(serve([`--port=${port}`], captureIo().io), JSON.stringify(port)).rejects.toThrow(
        `--port must be a whole number from 0 to 65535, not ${JSON.stringify(port)}`,
      );
    // An empty value, as of every option.
    await expect(serve(['--port='], captureIo().io)).rejects.toThrow('--port must not be empty');
  });

  it('reports a port in use as USAGE "cannot listen", exit 2, in the words witness serve uses', async () => {
    const taken = createServer();
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
    const { port } = taken.address() as AddressInfo;
    try {
      const c = captureIo();
      expect(await auditUi(['--port', String(port)], c.io)).toBe(2);
      expect(c.stderr()).toBe(`handoff-ledger: USAGE: cannot listen on "127.0.0.1:${port}": EADDRINUSE\n`);
    } finally {
      await new Promise((done) => taken.close(done));
    }
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
        expect(c.stdout()).toContain(`audit-ui: ${server.url} (bundle ${JSON.stringify(dir)}, read-only)`);
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

describe('audit-ui as a process', () => {
  const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
  const HOLD = fileURLToPath(new URL('../support/hold-server-close.mjs', import.meta.url));

  /** `audit-ui ARGS` as a child (the compiled CLI), resolved once it says where it listens. */
  async function startAuditUi(args: string[], o: { nodeArgs?: string[]; env?: NodeJS.ProcessEnv } = {}) {
    const child = spawn(process.execPath, [...(o.nodeArgs ?? []), CLI, 'audit-ui', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: o.env ?? process.env,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.on('close', (code, signal) => r({ code, signal })),
    );
    const url = await new Promise<string>((resolve, reject) => {
      const look = () => {
        const m = /^audit-ui: (http:\/\/[^ ;]+)/.exec(stdout);
        if (m) resolve(m[1]!);
      };
      child.stdout.on('data', look);
      void exited.then((e) => reject(new Error(`audit-ui ended (${JSON.stringify(e)}) before listening: ${stderr}`)));
    });
    const until = async (text: string) => {
      while (!stderr.includes(text) && child.exitCode === null && child.signalCode === null)
        await new Promise((r) => setTimeout(r, 5));
    };
    return { child, url, exited, stderr: () => stderr, until };
  }

  it('--open without a browser opener on PATH says "could not open a browser", naming the URL, and still serves', async () => {
    expect(statSync(CLI).isFile(), 'dist/ is built by `npm test` (pretest)').toBe(true);
    const ui = await startAuditUi(['--open'], { env: { ...process.env, PATH: tempDir() } });
    try {
      await ui.until('could not open a browser');
      // The opener quoted, its failure by its errno code (not the spawn's raw message), what --open runs, the address.
      expect(ui.stderr()).toBe(
        `handoff-ledger: could not open a browser: "xdg-open" did not start: ENOENT (no such file or directory) (--open runs "xdg-open" from PATH, which xdg-utils installs); open ${ui.url} in a browser yourself\n`,
      );
      const res = await get(ui.url);
      expect(res.status).toBe(200);
      expect(res.type).toBe('text/html; charset=utf-8');
    } finally {
      ui.child.kill('SIGTERM');
    }
    expect(await ui.exited).toEqual({ code: 0, signal: null });
  });

  it('--open with an opener that fails (xdg-open with no browser: status 3) says so, naming the URL, and still serves', async () => {
    const bin = tempDir();
    // An opener that prints what a terminal acts on and fails: its words are not shown, its status is.
    writeFileSync(join(bin, 'xdg-open'), "#!/bin/sh\nprintf 'xdg-open: no method \\033[2J' >&2\nexit 3\n", {
      mode: 0o755,
    });
    const ui = await startAuditUi(['--open'], { env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` } });
    try {
      await ui.until('could not open a browser');
      expect(ui.stderr()).toBe(
        `handoff-ledger: could not open a browser: "xdg-open" exited with status 3; open ${ui.url} in a browser yourself\n`,
      );
      expect((await get(ui.url)).status).toBe(200);
    } finally {
      ui.child.kill('SIGTERM');
    }
    expect(await ui.exited).toEqual({ code: 0, signal: null });
  });

  it('stops cleanly (exit 0) on a signal sent as soon as it printed its address, however late it runs on', async () => {
    // The preload stalls the child right after it printed its address: the signal lands before the code after the
    // write runs, and found no listener (death by SIGINT) while the listener was added after the address was printed.
    const STALL = fileURLToPath(new URL('../support/stall-after-listening.mjs', import.meta.url));
    const ui = await startAuditUi([], { nodeArgs: ['--import', STALL] });
    ui.child.kill('SIGINT');
    expect(await ui.exited, ui.stderr()).toEqual({ code: 0, signal: null });
  }, 60_000);

  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
    ['SIGINT', 'SIGINT'],
  ] as const)(
    'a second signal ends an audit-ui whose stopping hangs at once: %s then %s (a SIGTERM after SIGINT waited for it)',
    async (first, second) => {
      // The preload holds the server's close for 20 s after the first signal, as a connection that lingers would.
      const ui = await startAuditUi([], { nodeArgs: ['--import', HOLD] });
      ui.child.kill(first);
      await ui.until('holding server close');
      // Ended by the second signal itself (no exit code): a stopping that waited out the held close (20 s) would exit
      // with one, so no bound on the clock is needed (10 s was one a loaded machine could pass).
      ui.child.kill(second);
      expect(await ui.exited, ui.stderr()).toEqual({ code: null, signal: second });
    },
    60_000,
  );
});

describe('audit-ui with an earlier checkpoint and witness keys', () => {
  let root: string;
  let files: Awaited<ReturnType<typeof writeCheckpointFiles>>;
  let w: Awaited<ReturnType<typeof writeWitnessFiles>>;
  beforeAll(async () => {
    // Not tempDir(): these files serve the whole block.
    root = mkdtempSync(join(tmpdir(), 'hl-audit-ui-witness-'));
    chmodSync(root, 0o700);
    files = await writeCheckpointFiles(root);
    w = await writeWitnessFiles(root, files);
  }, 120_000);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('refuses the combinations verify refuses, with its words and exit 2', { timeout: 60_000 }, async () => {
    const huge = join(root, 'huge.note');
    writeFileSync(huge, 'x'.repeat(64 * 1024 + 1));
    const bad = join(root, 'bad.txt');
    writeFileSync(bad, 'not a key\n');
    const absent = join(root, 'absent.txt');
    for (const args of [
      ['--quorum', '2'],
      ['--witness-keys', w.keys],
      ['--witness-keys', w.keys, '--quorum', '0'],
      ['--witness-keys', w.keys, '--quorum', '3'],
      ['--witness-keys', bad, '--quorum', '1'],
      ['--witness-keys', absent, '--quorum', '1'],
      ['--since', huge],
      ['--since', absent],
    ]) {
      const verify = await cliVerify(w.cosigned, files.trust, undefined, args);
      expect(verify.code, args.join(' ')).toBe(2);
      expect(verify.stderr).toMatch(/^handoff-ledger: USAGE: --(quorum|witness-keys|since)/);
      const c = captureIo();
      expect(await auditUi([w.cosigned, ...args], c.io), args.join(' ')).toBe(2);
      expect(c.stderr()).toBe(verify.stderr);
      expect(c.stdout()).toBe('');
    }
  });

  it('serves the earlier checkpoint and witness keys it was given at fixed paths, and announces them', async () => {
    const c = captureIo();
    const server = await serve([w.cosigned, '--since', files.earlier, '--witness-keys', w.keys, '--quorum', '2'], c.io);
    try {
      const page = await get(server.url);
      expect(page.body).toContain(
        '&#34;since&#34;:{&#34;url&#34;:&#34;/since.note&#34;,&#34;name&#34;:&#34;earlier.note&#34;}',
      );
      expect(page.body).toContain(
        '&#34;witnessKeys&#34;:{&#34;url&#34;:&#34;/witness-keys.txt&#34;,&#34;name&#34;:&#34;witnesses.txt&#34;,&#34;quorum&#34;:2}',
      );
      expect(await get(`${server.url}since.note`)).toMatchObject({
        status: 200,
        body: readFileSync(files.earlier, 'utf8'),
      });
      expect(await get(`${server.url}witness-keys.txt`)).toMatchObject({
        status: 200,
        body: readFileSync(w.keys, 'utf8'),
      });
      expect((await get(`${server.url}witness-keys.txt`, { method: 'PUT' })).status).toBe(405);
      // Nothing else of the folders these files are in.
      for (const path of ['/earlier.note', '/witnesses.txt', '/trust.json', '/bundle/../witnesses.txt'])
        expect((await get(server.url, { path })).status, path).toBe(404);
    } finally {
      await server.close();
    }
  });

  // Starts its own browser: sized for a loaded 2-core CI machine (the waits bound time only).
  it(
    'preloads them: the page verifies step 9 and 9d on its own, as verify --since --witness-keys --quorum does',
    { timeout: 180_000 },
    async () => {
      let close = async () => {};
      const servers: AuditServer[] = [];
      try {
        let browser: BrowserContext;
        ({ browser, close } = await launchChromium());
        for (const [dir, codes] of [
          [w.cosigned, []],
          [w.one, ['WITNESS_QUORUM_MISSING']],
        ] as const) {
          const args = ['--since', files.earlier, '--witness-keys', w.keys, '--quorum', '2'];
          const expected = await cliVerify(dir, files.trust, undefined, args);
          expect(expected.report!.findings.map((f) => f.code)).toEqual(codes);
          const server = await serve([dir, '--trust', files.trust, ...args], captureIo().io);
          servers.push(server);
          const page = await browser.newPage();
          const seen = watchPage(page);
          await page.goto(server.url);
          await expectSameAsCli(page, expected.report!);
          expect(await picked(page)).toContain(
            'earlier checkpoint "earlier.note"; witness keys "witnesses.txt"; quorum 2',
          );
          expect(await page.inputValue('#quorum-input')).toBe('2');
          expect(await page.textContent('#checkpoint-info')).toContain(
            `earlier checkpoint "earlier.note": extended by this bundle's checkpoint`,
          );
          expect(await page.textContent('#witness-info')).toMatch(
            codes.length === 0 ? /^✓ witness quorum met/ : /^✗ witness quorum not met .*: WITNESS_QUORUM_MISSING\n/,
          );
          expect(seen.requests).toEqual(
            expect.arrayContaining([`${server.url}since.note`, `${server.url}witness-keys.txt`]),
          );
          expect(seen.requests.filter((u) => !u.startsWith(server.url) && !u.startsWith('blob:'))).toEqual([]);
          expect(seen.errors).toEqual([]);
          await page.close();
        }
      } finally {
        await close();
        for (const s of servers) await s.close();
      }
    },
  );
});

describe('audit-ui and symlinks out of the bundle', () => {
  it('serves no blob through a blobs/ or blobs/blake3/ directory that is a symlink, as verify reads none', async () => {
    const { dir, trustPath } = await blobCase();
    const hex = readdirSync(join(dir, 'blobs/blake3'))[0]!;
    const outside = join(tempDir(), 'elsewhere');
    cpSync(join(dir, 'blobs'), outside, { recursive: true });
    for (const link of ['blobs', 'blobs/blake3']) {
      const bundle = join(tempDir(), 'bundle');
      cpSync(dir, bundle, { recursive: true });
      rmSync(join(bundle, link), { recursive: true });
      symlinkSync(link === 'blobs' ? outside : join(outside, 'blake3'), join(bundle, link));
      const verify = await cliVerify(bundle, trustPath);
      expect(
        verify.report!.findings.map((x) => x.code),
        link,
      ).toContain('BLOB_MISSING');
      const server = await startAuditServer({ page: auditorPagePath()!, bundle, hasBlobs: true, trust: trustPath });
      try {
        expect((await get(`${server.url}bundle/blobs/blake3/${hex}`)).status, link).toBe(404);
      } finally {
        await server.close();
      }
    }
    // The same blob in a real directory is served.
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: true, trust: trustPath });
    try {
      expect((await get(`${server.url}bundle/blobs/blake3/${hex}`)).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});

/** A served page's outcome once it has one: the verdict, the coverage line, the findings, or the error shown. */
async function pageOutcome(page: import('playwright-core').Page) {
  await page.waitForSelector('body[data-state="ok"], body[data-state="failed"], body[data-state="error"]', {
    timeout: 90_000,
  });
  const state = await page.getAttribute('body', 'data-state');
  if (state === 'error') return { state, error: await page.textContent('#error') };
  return {
    state,
    verdict: await page.textContent('#verdict'),
    coverage: await page.textContent('#coverage'),
    findings: await page.$$eval('#findings li', (lis) => lis.map((li) => `${li.dataset.code}@${li.dataset.line}`)),
  };
}

const PAGE_HINTS = { requireBlobs: '"Require blobs"', scope: 'the Principal / Session fields' };

/** A bundle without blobs (its header counts none) and its trust file. */
async function blobFreeCase() {
  const root = tempDir();
  return writeCase(
    TAMPER_CASES.find((c) => c.name === 'clean')!,
    join(root, 'bundle'),
    join(root, 'trust.json'),
  ).then((p) => {
    rmSync(join(p.dir, 'blobs'), { recursive: true });
    const header = JSON.parse(readFileSync(join(p.dir, 'bundle.json'), 'utf8'));
    delete header.counts.blobs;
    writeFileSync(join(p.dir, 'bundle.json'), JSON.stringify(header));
    return p;
  });
}

describe('audit-ui and the page agree with verify on what the bundle is now', () => {
  let browser: BrowserContext;
  let close = async () => {};
  beforeAll(async () => {
    ({ browser, close } = await launchChromium());
  }, 60_000);
  afterAll(() => close());

  it(
    'says what it checked and what not, and takes --require-blobs, --principal and --session as verify does',
    { timeout: 180_000 },
    async () => {
      const { dir, trustPath } = await blobFreeCase();
      for (const args of [[], ['--require-blobs', '--session', 's1'], ['--principal', 'bob']]) {
        const cli = await cliVerify(dir, trustPath, undefined, args);
        const server = await serve([dir, '--trust', trustPath, ...args], captureIo().io);
        const page = await browser.newPage();
        try {
          await page.goto(server.url);
          const got = await pageOutcome(page);
          const report = cli.report!;
          expect(got, args.join(' ')).toEqual({
            state: report.ok ? 'ok' : 'failed',
            verdict: `${report.ok ? '✓' : '✗'} ${describeVerdict(report)}`,
            coverage: describeCoverage(report, PAGE_HINTS),
            findings: report.findings.map((f) => `${f.code}@${f.line}`),
          });
          expect(await page.isChecked('#require-blobs-input')).toBe(args.includes('--require-blobs'));
          expect(await page.inputValue('#session-input')).toBe(args.includes('--session') ? 's1' : '');
          expect(await page.inputValue('#principal-input')).toBe(args.includes('--principal') ? 'bob' : '');
          if (args.length === 0) {
            // An id verify would refuse as USAGE is refused by the page with its words, and no verdict stands.
            await page.fill('#principal-input', 'not an id');
            expect(await page.isHidden('#result')).toBe(true);
            await page.click('#verify');
            expect(await pageOutcome(page)).toEqual({
              state: 'error',
              error:
                'USAGE: the principal "not an id" is not a valid id (1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric)',
            });
          }
        } finally {
          await page.close();
          await server.close();
        }
      }
      // Without them the page says what was left out, as verify's second line does.
      expect(describeCoverage((await cliVerify(dir, trustPath)).report!, PAGE_HINTS)).toMatch(
        /NOT blobs \(the bundle carries none; "Require blobs" makes that a finding\); no scope .*; NOT completeness/,
      );
    },
  );

  it(
    "takes --expect and ?expect= as verify does: a header's filters the auditor did not confirm fail the page too",
    { timeout: 180_000 },
    async () => {
      const files = await writeCheckpointFiles(tempDir());
      const dir = files.sessionBundle;
      for (const [args, query, chosen] of [
        [[], '', ''],
        [['--expect', 'filtered'], '', 'filtered'],
        [['--session', 's1'], '', ''],
        [[], '?expect=full', 'full'],
        [['--expect', 'filtered'], '?expect=full', 'full'],
      ] as const) {
        const what = `${args.join(' ')} ${query}`;
        const asked = query ? ['--expect', 'full', ...args.filter((a) => a !== '--expect' && a !== 'filtered')] : args;
        const cli = await cliVerify(dir, files.trust, undefined, [...asked]);
        const server = await serve([dir, '--trust', files.trust, ...args], captureIo().io);
        const page = await browser.newPage();
        try {
          await page.goto(`${server.url}${query}`);
          const report = cli.report!;
          expect(await pageOutcome(page), what).toEqual({
            state: report.ok ? 'ok' : 'failed',
            verdict: `${report.ok ? '✓' : '✗'} ${describeVerdict(report)}`,
            coverage: describeCoverage(report, PAGE_HINTS),
            findings: report.findings.map((f) => `${f.code}@${f.line}`),
          });
          expect(await page.inputValue('#expect-input'), what).toBe(chosen);
        } finally {
          await page.close();
          await server.close();
        }
      }
      // The header alone: SCOPE_UNCONFIRMED, as verify says it; expecting a filtered bundle confirms it.
      expect((await cliVerify(dir, files.trust)).report!.findings.map((f) => f.code)).toEqual(['SCOPE_UNCONFIRMED']);
      const page = await browser.newPage();
      const server = await serve([dir, '--trust', files.trust], captureIo().io);
      try {
        await page.goto(server.url);
        expect((await pageOutcome(page)).findings).toEqual(['SCOPE_UNCONFIRMED@undefined']);
        await page.selectOption('#expect-input', 'filtered');
        expect(await page.isHidden('#result')).toBe(true);
        await page.click('#verify');
        expect(await pageOutcome(page)).toMatchObject({
          state: 'ok',
          verdict: '✓ verdict: OK — 3 manifests in 1 chain verified (filtered bundle: session s1, scope from header)',
        });
        // An expectation verify would refuse as USAGE is refused by the page with its words.
        await page.goto(`${server.url}?expect=whole`);
        expect(await pageOutcome(page)).toEqual({
          state: 'error',
          error: "USAGE: the page's Expect (?expect=) must be full or filtered",
        });
      } finally {
        await page.close();
        await server.close();
      }
    },
  );

  it(
    'a tree file that is a symlink or a directory stops the page as it stops verify (BUNDLE_IO, BUNDLE_INVALID)',
    { timeout: 180_000 },
    async () => {
      for (const [what, plant, code] of [
        ['symlink', (d: string) => symlinkSync(join(d, 'bundle.json'), join(d, 'checkpoint.note')), 'BUNDLE_IO'],
        ['directory', (d: string) => mkdirSync(join(d, 'checkpoint.note')), 'BUNDLE_INVALID'],
      ] as const) {
        const { dir, trustPath } = await blobCase();
        plant(dir);
        const cli = await cliVerify(dir, trustPath);
        expect(cli.code, what).toBe(2);
        expect(cli.stderr, what).toMatch(new RegExp(`^handoff-ledger: ${code}: `));
        const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, trust: trustPath });
        const page = await browser.newPage();
        try {
          await page.goto(server.url);
          const got = await pageOutcome(page);
          expect(got.state, what).toBe('error');
          expect(got.error, what).toMatch(new RegExp(`^${code}: .*checkpoint\\.note`));
          // Both say what stands there: a link (never ELOOP's "too many symbolic links", nor a bare HTTP 403).
          if (what === 'symlink') {
            // The CLI names the bundle's path quoted, the page the file's name in the bundle.
            const link = /checkpoint\.note"? is a symbolic link: a bundle's files are read only as regular files/;
            expect(cli.stderr).toMatch(/checkpoint\.note" is a symbolic link: /);
            expect(cli.stderr).toMatch(link);
            expect(got.error).toMatch(link);
            // The page names the file it could not read by its URL, quoted as it quotes a side file's name.
            expect(got.error).toMatch(
              /^BUNDLE_IO: cannot read "http:\/\/127\.0\.0\.1:[0-9]+\/[^"]*checkpoint\.note": HTTP 403: /,
            );
          }
        } finally {
          await page.close();
          await server.close();
        }
      }
    },
  );

  it('a folder picked with a directory where checkpoint.note belongs is refused, as verify refuses it', async () => {
    const { dir, trustPath } = await blobCase();
    mkdirSync(join(dir, 'checkpoint.note'));
    writeFileSync(join(dir, 'checkpoint.note', 'inside'), 'x');
    expect((await cliVerify(dir, trustPath)).stderr).toMatch(/^handoff-ledger: BUNDLE_INVALID: .*not a regular file/);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE_URL);
      await page.setInputFiles('#bundle-input', dir);
      await page.waitForSelector('#error:not([hidden])');
      expect(await page.textContent('#error')).toMatch(
        /^BUNDLE_INVALID: checkpoint\.note in "bundle" is a directory, not a regular file$/,
      );
    } finally {
      await page.close();
    }
  });

  it(
    'blobs put in after audit-ui started are checked at the next load of the page, as verify run then checks them',
    {
      timeout: 180_000,
    },
    async () => {
      const { dir, trustPath } = await blobFreeCase();
      const server = await serve([dir, '--trust', trustPath], captureIo().io);
      const page = await browser.newPage();
      try {
        await page.goto(server.url);
        expect((await pageOutcome(page)).state).toBe('ok');
        // The same bundle's blobs, one of them with a bit flipped, moved in while the server runs.
        const tampered = await blobCase();
        cpSync(join(tampered.dir, 'blobs'), join(dir, 'blobs'), { recursive: true });
        const cli = (await cliVerify(dir, trustPath)).report!;
        expect(cli.findings.map((f) => f.code)).toContain('BLOB_DIGEST');
        await page.reload();
        expect(await pageOutcome(page)).toMatchObject({
          state: 'failed',
          findings: cli.findings.map((f) => `${f.code}@${f.line}`),
        });
      } finally {
        await page.close();
        await server.close();
      }
    },
  );

  it(
    'takes --max-bundle-bytes as verify does; the page holds manifests.jsonl to the bound it is given',
    {
      timeout: 180_000,
    },
    async () => {
      const { dir, trustPath } = await blobCase();
      const size = statSync(join(dir, 'manifests.jsonl')).size;
      const small = String(size - 1);
      const verify = await cliVerify(dir, trustPath, undefined, ['--max-bundle-bytes', small]);
      expect(verify.code).toBe(2);
      const c = captureIo();
      expect(await auditUi([dir, '--trust', trustPath, '--max-bundle-bytes', small], c.io)).toBe(2);
      expect(c.stderr()).toBe(verify.stderr);
      for (const bad of ['0', '-1', '1e9', 'x'])
        await expect(
          serve([dir, '--trust', trustPath, `--max-bundle-bytes=${bad}`], captureIo().io),
          bad,
        ).rejects.toThrow(
          `--max-bundle-bytes must be a whole number of bytes from 1 to ${Number.MAX_SAFE_INTEGER}, not ${JSON.stringify(bad)}`,
        );
      // A bound above 4 GiB is taken (a bundle that large needs it), and announced to the page.
      const server = await serve([dir, '--trust', trustPath, '--max-bundle-bytes', '6000000000'], captureIo().io);
      const page = await browser.newPage();
      try {
        expect((await get(server.url)).body).toContain('&#34;maxBundleBytes&#34;:6000000000');
        await page.goto(server.url);
        expect((await pageOutcome(page)).state).toBe('failed');
        // The page's own bound (?max-bundle-bytes=): below the file's size, refused before a line is verified.
        await page.goto(`${server.url}?max-bundle-bytes=${small}`);
        expect(await pageOutcome(page)).toEqual({
          state: 'error',
          error: `BUNDLE_INVALID: manifests.jsonl is ${size} bytes, over the bound of ${small} (raise it with the page's ?max-bundle-bytes= or audit-ui --max-bundle-bytes)`,
        });
      } finally {
        await page.close();
        await server.close();
      }
    },
  );

  it(
    'a symlinked blob, or a blobs/ or blobs/blake3/ that is a link, is BLOB_MISSING saying so, in the page as from verify; its 404 says so too',
    { timeout: 180_000 },
    async () => {
      const cases = [
        ['blob file', 'file'],
        ['blobs', 'blobs'],
        ['blobs/blake3', 'blobs/blake3'],
        // A header that counts no blobs: the link where blobs/ stands says the bundle carries them, as a directory.
        ['blobs, uncounted', 'blobs'],
      ] as const;
      for (const [what, link] of cases) {
        const root = tempDir();
        const { dir, trustPath } = await writeCase(
          TAMPER_CASES.find((c) => c.name === 'clean')!,
          join(root, 'bundle'),
          join(root, 'trust.json'),
        );
        const hexes = readdirSync(join(dir, 'blobs/blake3')).sort();
        const hex = hexes[0]!;
        const outside = join(root, 'elsewhere');
        cpSync(join(dir, 'blobs'), outside, { recursive: true });
        if (link === 'file') {
          rmSync(join(dir, 'blobs/blake3', hex));
          symlinkSync(join(outside, 'blake3', hex), join(dir, 'blobs/blake3', hex));
        } else {
          rmSync(join(dir, link), { recursive: true });
          symlinkSync(link === 'blobs' ? outside : join(outside, 'blake3'), join(dir, link));
        }
        if (what === 'blobs, uncounted') {
          const header = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
          delete header.counts.blobs;
          writeFileSync(join(dir, 'bundle.json'), JSON.stringify(header));
        }
        const report = (await cliVerify(dir, trustPath)).report!;
        const missing = report.findings.filter((f) => f.code === 'BLOB_MISSING');
        // One finding for a linked directory (no line), one per manifest of a linked blob file.
        expect(
          missing.map((f) => f.line),
          what,
        ).toEqual(link === 'file' ? [expect.any(Number)] : [undefined]);
        const said =
          link === 'file'
            ? `blobs/blake3/${hex} is a symbolic link: a bundle's files are read only as regular files in the bundle, never through a link (copy the file itself into the bundle, or export it again)`
            : `${link} is a symbolic link: a bundle's files are read only as regular files in the bundle, never through a link (copy the directory itself into the bundle, or export it again)`;
        expect(missing[0]!.message, what).toContain(said);
        const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, trust: trustPath });
        const page = await browser.newPage();
        try {
          // The blob's 404 in verify's words, and the link's place for the page's reader.
          for (const h of link === 'file' ? [hex] : hexes) {
            const answer = await get(`${server.url}bundle/blobs/blake3/${h}`);
            expect(answer.status, what).toBe(404);
            expect(answer.body, what).toBe(`${said}\n`);
            expect(answer.headers['x-handoff-ledger-link'], what).toBe(link);
          }
          await page.goto(server.url);
          expect(await pageOutcome(page), what).toMatchObject({
            state: 'failed',
            verdict: `✗ ${describeVerdict(report)}`,
            findings: report.findings.map((f) => `${f.code}@${f.line}`),
          });
          // Each finding word for word the CLI's line (a verified manifest's "show manifest" button aside).
          const texts = await page.$$eval('#findings li', (lis) =>
            lis.map((li) =>
              [...li.childNodes]
                .filter((n) => n.nodeName !== 'BUTTON')
                .map((n) => n.textContent)
                .join(''),
            ),
          );
          expect(texts, what).toEqual(report.findings.map((f) => printable(describeFinding(f)).trimStart()));
        } finally {
          await page.close();
          await server.close();
        }
      }
    },
  );
});

describe('audit-ui answering for a bundle file that is not one', () => {
  it('answers as verify reads it: a symlinked manifests.jsonl or tree file is 403 (BUNDLE_IO), saying it is a link', async () => {
    const { dir, trustPath } = await blobCase();
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, trust: trustPath });
    try {
      cpSync(join(dir, 'manifests.jsonl'), join(dir, 'elsewhere.jsonl'));
      rmSync(join(dir, 'manifests.jsonl'));
      symlinkSync(join(dir, 'elsewhere.jsonl'), join(dir, 'manifests.jsonl'));
      symlinkSync(join(dir, 'bundle.json'), join(dir, 'proofs.jsonl'));
      expect(await cliVerify(dir, trustPath)).toMatchObject({
        code: 2,
        stderr: expect.stringMatching(/BUNDLE_IO: .*manifests\.jsonl" is a symbolic link: /),
      });
      const manifests = await get(`${server.url}bundle/manifests.jsonl`);
      expect(manifests.status).toBe(403);
      expect(manifests.body).toMatch(/^manifests\.jsonl is a symbolic link: /);
      const proofs = await get(`${server.url}bundle/proofs.jsonl`);
      expect(proofs.status).toBe(403);
      expect(proofs.body).toMatch(/^proofs\.jsonl is a symbolic link: /);
    } finally {
      await server.close();
    }
  });
});

describe('audit-ui serving a file that grows', () => {
  it('sends the bytes its Content-Length names and no more', { timeout: 60_000 }, async () => {
    const { dir, trustPath } = await blobCase();
    const path = join(dir, 'manifests.jsonl');
    const before = Buffer.alloc(16 * 2 ** 20, 0x61);
    writeFileSync(path, before);
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, trust: trustPath });
    try {
      const u = new URL(server.url);
      // A raw socket: an HTTP client stops at Content-Length, this counts every byte the server sends.
      const got = await new Promise<{ length: number; received: number }>((done, fail) => {
        const socket = connect(Number(u.port), u.hostname, () => {
          socket.write(`GET /bundle/manifests.jsonl HTTP/1.1\r\nHost: ${u.host}\r\nConnection: close\r\n\r\n`);
        });
        const chunks: Buffer[] = [];
        let grown = false;
        socket.on('data', (c: Buffer) => {
          chunks.push(c);
          if (!grown) {
            grown = true;
            // The file grows by 8 MiB while the response is under way.
            appendFileSync(path, Buffer.alloc(8 * 2 ** 20, 0x62));
          }
        });
        socket.on('error', fail);
        socket.on('close', () => {
          const all = Buffer.concat(chunks);
          const end = all.indexOf('\r\n\r\n');
          const length = Number(/content-length: (\d+)/i.exec(all.subarray(0, end).toString('latin1'))?.[1]);
          done({ length, received: all.length - end - 4 });
        });
      });
      expect(got).toEqual({ length: before.length, received: before.length });
    } finally {
      await server.close();
    }
  });
});

describe('audit-ui and clients that go away', () => {
  it(
    'closes the file of a request whose client left before its answer, as of one it answered',
    { timeout: 60_000 },
    async () => {
      const { dir, trustPath } = await blobCase();
      writeFileSync(join(dir, 'manifests.jsonl'), Buffer.alloc(8 * 2 ** 20, 0x61));
      const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, trust: trustPath });
      const open = () => readdirSync('/proc/self/fd').length;
      try {
        const u = new URL(server.url);
        const before = open();
        // Each request written and its socket closed at once: the server opens the file after the client has gone.
        await Promise.all(
          Array.from(
            { length: 100 },
            () =>
              new Promise<void>((done, fail) => {
                const socket = connect(Number(u.port), u.hostname, () => {
                  socket.write(`GET /bundle/manifests.jsonl HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`);
                  socket.destroy();
                  done();
                });
                socket.on('error', fail);
              }),
          ),
        );
        // Until the server has handled them all; a handle it left open stays open (the garbage collector closed it, late).
        const deadline = Date.now() + 5000;
        while (open() > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(open()).toBe(before);
        // And it still answers.
        expect((await get(`${server.url}bundle/bundle.json`)).status).toBe(200);
      } finally {
        await server.close();
      }
    },
  );
});

describe('audit-ui --trust', () => {
  it('reads the trust file at start as verify does: a symlinked one is served, a missing or bad one refused with exit 2', async () => {
    const { dir, trustPath } = await blobCase();
    const linked = join(tempDir(), 'linked-trust.json');
    symlinkSync(trustPath, linked);
    expect((await cliVerify(dir, linked)).code).toBe(1);
    const server = await serve([dir, '--trust', linked], captureIo().io);
    try {
      expect(await get(`${server.url}trust.json`)).toMatchObject({
        status: 200,
        body: readFileSync(trustPath, 'utf8'),
      });
    } finally {
      await server.close();
    }
    const bad = join(tempDir(), 'bad-trust.json');
    writeFileSync(bad, '{"keys":');
    for (const trust of [join(tempDir(), 'absent.json'), bad]) {
      const verify = await cliVerify(dir, trust);
      expect(verify.code, trust).toBe(2);
      expect(verify.stderr).toMatch(/^handoff-ledger: TRUST_INVALID: /);
      const c = captureIo();
      expect(await auditUi([dir, '--trust', trust], c.io), trust).toBe(2);
      expect(c.stderr()).toBe(verify.stderr);
      expect(c.stdout()).toBe('');
    }
  });
});

describe('audit-ui with several --trust files', () => {
  // Starts its own browser: sized for a loaded 2-core CI machine (the waits bound time only).
  it(
    'names them as given (escaped) on the page, which verifies as verify --trust a --trust b does',
    { timeout: 180_000 },
    async () => {
      const { dir, trustPath } = await blobCase();
      // Another host's keys (a store two hosts share), in a file whose name carries a bidirectional override.
      const otherName = 'h9-\u202enosj.json';
      const other = join(tempDir(), otherName);
      const x = generateJwk().x;
      const key = { host: 'h9', keyId: keyIdOf(Buffer.from(x, 'base64url')), publicKey: x };
      writeFileSync(other, JSON.stringify({ version: 1, keys: [{ ...key, notBefore: '2020-01-01T00:00:00.000Z' }] }));
      const expected = await cliVerify(dir, trustPath, undefined, ['--trust', other]);
      expect(expected.report!.findings.map((f) => f.code)).toEqual(['BLOB_DIGEST']);
      const server = await serve([dir, '--trust', trustPath, '--trust', other], captureIo().io);
      let close = async () => {};
      try {
        expect((await get(server.url)).body).toContain(
          `&#34;trust&#34;:{&#34;url&#34;:&#34;/trust.json&#34;,&#34;names&#34;:[&#34;trust.json&#34;,&#34;${otherName}&#34;]}`,
        );
        let browser: BrowserContext;
        ({ browser, close } = await launchChromium());
        const page = await browser.newPage();
        const seen = watchPage(page);
        await page.goto(server.url);
        // Verdict and findings (these are drawn, so each carries a "show manifest" button: codes and lines here).
        await page.waitForSelector('body[data-state="failed"]', { timeout: 90_000 });
        expect(await page.textContent('#verdict')).toBe(`✗ ${describeVerdict(expected.report!)}`);
        expect(await pageFindings(page)).toEqual(codesAt(expected.report!));
        const line = await picked(page);
        expect(line).toContain(`; trust files "trust.json", ${quoted(otherName)}, served by audit-ui;`);
        expect(line).not.toContain('\u202e');
        expect(seen.errors).toEqual([]);
      } finally {
        await close();
        await server.close();
      }
    },
  );
});

describe('auditorPagePath', () => {
  it('names no page in an unbuilt checkout that sits under a directory named dist', async () => {
    // The module copied into <tmp>/dist/checkout/src/ops, beside the unfilled template at web/index.html.
    const ROOT = resolve(import.meta.dirname, '../..');
    const checkout = join(tempDir(), 'dist', 'checkout');
    mkdirSync(join(checkout, 'src/ops'), { recursive: true });
    mkdirSync(join(checkout, 'web'), { recursive: true });
    copyFileSync(join(ROOT, 'src/ops/auditor-page.ts'), join(checkout, 'src/ops/auditor-page.ts'));
    copyFileSync(join(ROOT, 'web/index.html'), join(checkout, 'web/index.html'));
    const copy = (await import(
      pathToFileURL(join(checkout, 'src/ops/auditor-page.ts')).href
    )) as typeof import('../../src/ops/auditor-page.js');
    expect(copy.auditorPagePath()).toBeUndefined();
    expect(await copy.readAuditorPage()).toBeUndefined();
    // The built page of this checkout is found as before.
    expect(auditorPagePath()).toBe(join(ROOT, 'dist/web/index.html'));
  });
});
