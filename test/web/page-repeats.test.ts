/**
 * The auditor page holds one history mark per distinct manifest, as `verify` keeps one entry per id: a bundle of
 * a few manifests and thousands of copies of one of them (and lines that are not manifests at all) leaves the page
 * with as many marks as distinct manifests, on a pool of workers and in one worker, while its findings are the
 * CLI's and each copy's DUPLICATE finding leads to the mark of the line its manifest first appeared on. What the
 * page holds is read from `#history`'s data-manifests (marks kept) and data-marks (marks in the picture, filtered).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { describeVerdict } from '../../manifests/audit/report-text.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { buildBundle, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { codesAt, PAGE_URL, pageFindings } from '../support/page-checks.js';
import { ensurePageBuilt } from '../support/page-build.js';

const TEST_MS = 180_000;
const DONE = 'body[data-state="ok"], body[data-state="failed"], body[data-state="error"]';
const UPDATE_WAIT = { timeout: 10_000 };
/** Copies of one valid line after the distinct manifests: far more lines than manifests, over many batches. */
const COPIES = 6_000;
/** The page lists this many findings (report-view.ts); the JSON export has them all. */
const LISTED = 2000;

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let root: string;
let dir: string;
let trustPath: string;
let cli: BundleAuditReport;

beforeAll(async () => {
  ensurePageBuilt();
  ({ browser, close: closeBrowser } = await launchChromium());
  // Five distinct manifests (alice's session s, bob's session t), then alice's first one copied COPIES times, with
  // a line that is not JSON every 1,000 lines.
  const b = await buildBundle({
    chains: [
      { session: 's', principal: 'alice', count: 3 },
      { session: 't', principal: 'bob', count: 2 },
    ],
  });
  const first = b.manifests.find((m) => m.manifest.session === 's' && m.manifest.seq === 0)!;
  const lines = [...b.lines];
  for (let i = 1; i <= COPIES; i++) lines.push(i % 1000 === 0 ? 'not JSON' : first.line);
  root = mkdtempSync(join(tmpdir(), 'hl-page-repeats-'));
  dir = join(root, 'repeats');
  trustPath = join(root, 'trust.json');
  await writeBundleDir(dir, lines);
  await writeTrustFile(trustPath, b.trust);
  const c = captureIo();
  await verifyCli([dir, '--trust', trustPath, '--json', '--workers', '0'], c.io);
  cli = JSON.parse(c.stdout()) as BundleAuditReport;
  expect(cli.counts.byCode).toEqual({ LINE_NOT_JSON: COPIES / 1000, DUPLICATE: COPIES - COPIES / 1000 });
  expect(cli.chains.map((ch) => [ch.session, ch.entries])).toEqual([
    ['s', 3],
    ['t', 2],
  ]);
}, TEST_MS);

afterAll(async () => {
  await closeBrowser?.();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** The marks the page keeps and the marks its picture holds (as filtered). */
const held = async (page: Page) => ({
  manifests: await page.getAttribute('#history', 'data-manifests'),
  marks: await page.getAttribute('#history', 'data-marks'),
});

describe('the auditor page with repeated lines', { timeout: TEST_MS }, () => {
  it.each([
    ['on a pool of workers', '?workers=2&batch=250'],
    ['in one worker', '?workers=0&batch=250'],
  ])('holds one mark per distinct manifest, not one per line (%s)', async (_, query) => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(`${PAGE_URL}${query}`);
      await page.setInputFiles('#bundle-input', dir);
      await page.setInputFiles('#trust-input', trustPath);
      await page.click('#verify');
      await page.waitForSelector(DONE, { timeout: 90_000 });
      expect(await page.textContent('#verdict')).toBe(`✗ ${describeVerdict(cli)}`);
      expect(await pageFindings(page)).toEqual(codesAt(cli).slice(0, LISTED));
      // Five distinct manifests, 6,005 lines: five marks.
      expect(await held(page)).toEqual({ manifests: '5', marks: '5' });

      // A copy's finding shows the manifest on the line it first appeared on, marked with the finding.
      const details = () => page.textContent('#details');
      await page.locator('#findings li[data-code="DUPLICATE"] button').first().click();
      await expect.poll(details, UPDATE_WAIT).toMatch(/^statefinding \(DUPLICATE\)sessionsseq0line1principalalice/);

      // Filtered to alice, the copies' findings stay listed (their manifest is alice's); to bob, none do.
      await page.selectOption('#filter-principal', 'alice');
      await expect.poll(() => held(page), UPDATE_WAIT).toEqual({ manifests: '5', marks: '3' });
      expect(await pageFindings(page)).toEqual(
        codesAt(cli)
          .filter((c) => c.startsWith('DUPLICATE@'))
          .slice(0, LISTED),
      );
      await page.selectOption('#filter-principal', 'bob');
      await expect.poll(() => held(page), UPDATE_WAIT).toEqual({ manifests: '5', marks: '2' });
      expect(await pageFindings(page)).toEqual([]);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
