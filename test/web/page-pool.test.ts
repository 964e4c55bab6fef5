/**
 * The page's pool of line-verifying workers in Chromium: a bundle of many batches with findings spread
 * across them is reported exactly as `verify` reports it (in one thread and on worker threads) whether
 * the page verifies on a pool, in one worker by choice (`?workers=0`, or a bundle below the pool's floor),
 * or in one worker because the pool could not be had (its workers fail to load; the browser starts no
 * workers from a worker), and the progress line says which. `?workers=` and `?batch=` are checked as
 * `verify --workers` is.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { at, buildBundle, ChainBuilder, jsonl, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { describeVerdict } from '../../manifests/audit/report-text.js';
import { codesAt, PAGE_URL, pageFindings } from '../support/page-checks.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { flipSignatureBit } from '../support/tamper-cases.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let bundle: { root: string; dir: string; trustPath: string; lines: number };
/** The CLI's report in one thread, and on two worker threads (they must agree before the page is held to them). */
let cli: BundleAuditReport;

const TEST_MS = 180_000;
const DONE = 'body[data-state="ok"], body[data-state="failed"], body[data-state="error"]';

async function cliReport(dir: string, trust: string, workers: string): Promise<BundleAuditReport> {
  const c = captureIo();
  await verifyCli([dir, '--trust', trust, '--json', '--workers', workers], c.io);
  return JSON.parse(c.stdout()) as BundleAuditReport;
}

/**
 * 1,200 manifests of twelve sessions with, in different batches: broken signatures, a line that is not
 * an envelope, one that is not JSON, an empty line, a duplicate far from its first line, a fork, and a last line without its newline.
 */
async function manyBatches(): Promise<typeof bundle> {
  const b = await buildBundle({
    chains: Array.from({ length: 12 }, (_, i) => ({ session: `s${i}`, principal: `p${i % 3}`, count: 100 })),
  });
  const lines = b.lines.map((l, i) => ([2, 450, 1111].includes(i) ? flipSignatureBit(l) : l));
  lines.splice(300, 0, '{"payloadType": "not a manifest"}', 'not JSON', '');
  lines.splice(900, 0, b.lines[4]!);
  const forked = b.chains.get('s7')!;
  const twin = await new ChainBuilder(b.key, { principal: 'p1', session: 's7', run: 'run-2' }).next({
    seq: 60,
    prev: forked.built[59]!.id,
    createdAt: at(60),
  });
  lines.splice(1000, 0, twin.line);
  // Shared by every test of this file (tempDir's folders go after each test).
  const root = mkdtempSync(join(tmpdir(), 'hl-page-pool-'));
  const dir = join(root, 'many-batches');
  await writeBundleDir(dir, lines, { text: jsonl(lines).slice(0, -1) });
  await writeTrustFile(join(root, 'trust.json'), b.trust);
  return { root, dir, trustPath: join(root, 'trust.json'), lines: lines.length };
}

beforeAll(async () => {
  ensurePageBuilt();
  ({ browser, close: closeBrowser } = await launchChromium());
  bundle = await manyBatches();
  cli = await cliReport(bundle.dir, bundle.trustPath, '0');
  expect(await cliReport(bundle.dir, bundle.trustPath, '2')).toEqual(cli);
  expect(new Set(codesAt(cli).map((c) => c.split('@')[0]))).toEqual(
    new Set(
      ['SIGNATURE_INVALID', 'ENVELOPE_INVALID', 'LINE_NOT_JSON', 'DUPLICATE', 'FORK', 'LINE_TRUNCATED'].concat(
        // The chains the broken signatures leave behind (s2 from seq 0, two others from their middle).
        ['SEQ_NOT_ZERO', 'SEQ_GAP'],
      ),
    ),
  );
}, TEST_MS);

afterAll(async () => {
  await closeBrowser?.();
  if (bundle) rmSync(bundle.root, { recursive: true, force: true });
});

/** Opens the page (with `query`), picks the bundle and trust file, verifies, and waits for the outcome. */
async function verifyInPage(page: Page, query: string): Promise<void> {
  await page.goto(`${PAGE_URL}${query}`);
  await page.setInputFiles('#bundle-input', bundle.dir);
  await page.setInputFiles('#trust-input', bundle.trustPath);
  await page.click('#verify');
  await page.waitForSelector(DONE, { timeout: 90_000 });
}

const progressText = (page: Page) => page.textContent('#progress-text');

/** The page's findings and verdict are the CLI's, and the report it exports is the CLI's `--json`, field for field. */
async function expectCliReport(page: Page): Promise<void> {
  expect(await pageFindings(page)).toEqual(codesAt(cli));
  expect(await page.textContent('#verdict')).toBe(`✗ ${describeVerdict(cli)}`);
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 60_000 }),
    page.click('#export-json'),
  ]);
  expect(JSON.parse(readFileSync(await download.path(), 'utf8'))).toEqual({ ...cli, bundle: 'many-batches' });
}

describe('the auditor page on a pool of workers', { timeout: TEST_MS }, () => {
  it("spreads a bundle's batches over the pool and reports exactly as verify does", async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      // 1,204 lines in batches of 50 over three workers: each worker verifies some eight batches.
      await verifyInPage(page, '?workers=3&batch=50');
      expect(await progressText(page)).toMatch(/^verified in [0-9.]+ s \(signatures: webcrypto, on 3 workers\)$/);
      await expectCliReport(page);
      expect(seen.requests.filter((u) => !u.startsWith(PAGE_URL) && !u.startsWith('blob:'))).toEqual([]);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('verifies in one worker when asked to (?workers=0), with the same report', async () => {
    const page = await browser.newPage();
    try {
      await verifyInPage(page, '?workers=0');
      expect(await progressText(page)).toMatch(/^verified in [0-9.]+ s \(signatures: webcrypto, in one worker\)$/);
      await expectCliReport(page);
    } finally {
      await page.close();
    }
  });

  it('left to choose, verifies a bundle below the pool floor (3 MiB, as verify) in one worker', async () => {
    expect(readFileSync(join(bundle.dir, 'manifests.jsonl')).length).toBeLessThan(3 * 1024 * 1024);
    const page = await browser.newPage();
    try {
      await verifyInPage(page, '');
      expect(await progressText(page)).toMatch(/\(signatures: webcrypto, in one worker\)$/);
      await expectCliReport(page);
    } finally {
      await page.close();
    }
  });

  it('verifies in one worker, and says why, when the pool workers fail to load', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      // The pool's workers get a script that throws at once: the page's verification worker must fall back.
      await page.addInitScript(() => {
        const proto = (globalThis as any).Worker.prototype;
        const post = proto.postMessage;
        proto.postMessage = function (this: unknown, message: any, ...rest: unknown[]) {
          if (message?.type === 'verify' && message.poolSource) {
            const broken = new Blob(['throw new Error("this pool worker refuses to start")'], {
              type: 'text/javascript',
            });
            message = { ...message, poolSource: broken };
          }
          return post.call(this, message, ...rest);
        };
      });
      await verifyInPage(page, '?workers=2');
      expect(await progressText(page)).toMatch(
        /\(signatures: webcrypto, in one worker: verification worker [12] failed: .*this pool worker refuses to start\)$/,
      );
      await expectCliReport(page);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('verifies in one worker, and says why, where a worker cannot start workers', async () => {
    const page = await browser.newPage();
    try {
      // The page's verification worker runs in a scope without a Worker constructor, as in browsers without nested workers.
      await page.addInitScript(() => {
        const create = URL.createObjectURL;
        URL.createObjectURL = (obj: Blob) =>
          obj instanceof Blob && obj.type === 'text/javascript'
            ? create(new Blob(['self.Worker = undefined;\n', obj], { type: obj.type }))
            : create(obj);
      });
      await verifyInPage(page, '?workers=4');
      expect(await progressText(page)).toMatch(
        /\(signatures: webcrypto, in one worker: this browser does not start workers from a worker\)$/,
      );
      await expectCliReport(page);
    } finally {
      await page.close();
    }
  });

  it.each([
    ['?workers=257', `USAGE: the page's ?workers= must be auto or a whole number from 0 to 256, not "257"`],
    ['?workers=two', `USAGE: the page's ?workers= must be auto or a whole number from 0 to 256, not "two"`],
    ['?batch=0', `USAGE: the page's ?batch= must be a whole number from 1 to 100000, not "0"`],
  ])('refuses %s with USAGE, as verify refuses a bad --workers', async (query, words) => {
    const page = await browser.newPage();
    try {
      await verifyInPage(page, query);
      expect(await page.getAttribute('body', 'data-state')).toBe('error');
      expect(await page.textContent('#error')).toBe(words);
    } finally {
      await page.close();
    }
  });
});
