/// <reference lib="dom" />
/**
 * The auditor's page in a real browser (headless Chromium), opened from file:// as an auditor would
 * open a downloaded copy: for a clean bundle, every tamper case and a hostile bundle, the page's
 * verdict and findings equal the CLI's; nothing from a bundle runs; no request leaves the page.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { describeVerdict } from '../../manifests/audit/report-text.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { HOSTILE_CASE, HOSTILE_MARKUP, TAMPER_CASES, writeCase, type TamperCase } from '../support/tamper-cases.js';
import { tempDir } from '../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGE = pathToFileURL(join(ROOT, 'dist/web/index.html')).href;
const ARTIFACTS = join(ROOT, 'test/artifacts');

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;

beforeAll(async () => {
  execFileSync(process.execPath, [join(ROOT, 'web/build.mjs')], { stdio: 'pipe' });
  ({ browser, close: closeBrowser } = await launchChromium());
}, 120_000);

afterAll(async () => closeBrowser?.());

async function cliReport(dir: string, trust: string): Promise<BundleAuditReport> {
  const c = captureIo();
  await verifyCli([dir, '--trust', trust, '--json', '--workers', '0'], c.io);
  return JSON.parse(c.stdout()) as BundleAuditReport;
}

const codesAt = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

/** Opens the page, picks the folder and the trust file, verifies, and waits for the verdict. */
async function verifyInPage(page: Page, dir: string, trust: string): Promise<void> {
  await page.goto(PAGE);
  await page.setInputFiles('#bundle-input', dir);
  await page.setInputFiles('#trust-input', trust);
  await page.click('#verify');
  await page.waitForSelector('body[data-state="ok"], body[data-state="failed"], body[data-state="error"]', {
    timeout: 60_000,
  });
}

async function pageFindings(page: Page): Promise<string[]> {
  return page.$$eval('#findings li', (lis) => lis.map((li) => `${li.dataset.code}@${li.dataset.line ?? '-'}`));
}

async function casePaths(c: TamperCase): Promise<{ dir: string; trustPath: string }> {
  const root = tempDir();
  return writeCase(c, join(root, c.name), join(root, 'trust.json'));
}

function onlyLocal(requests: string[]): string[] {
  return requests.filter((u) => !(u === PAGE || u.startsWith('blob:') || u.startsWith('data:')));
}

describe('the auditor page', () => {
  it.each(TAMPER_CASES.map((c) => [c.name, c] as const))(
    'reports %s exactly as the CLI does, without a network request',
    async (_name, c) => {
      const { dir, trustPath } = await casePaths(c);
      const cli = await cliReport(dir, trustPath);
      expect(codesAt(cli)).toEqual(c.expected);
      const page = await browser.newPage();
      const seen = watchPage(page);
      try {
        await verifyInPage(page, dir, trustPath);
        expect(await pageFindings(page)).toEqual(c.expected);
        expect(await page.textContent('#verdict')).toBe(`${cli.ok ? '✓' : '✗'} ${describeVerdict(cli)}`);
        expect(await page.getAttribute('body', 'data-state')).toBe(cli.ok ? 'ok' : 'failed');
        expect(onlyLocal(seen.requests)).toEqual([]);
        expect(seen.errors).toEqual([]);
      } finally {
        await page.close();
      }
    },
  );

  it('shows a hostile bundle as text: no script from it runs, no markup from it is parsed', async () => {
    const { dir, trustPath } = await casePaths(HOSTILE_CASE);
    const cli = await cliReport(dir, trustPath);
    expect(codesAt(cli)).toEqual(HOSTILE_CASE.expected);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await verifyInPage(page, dir, trustPath);
      expect(await pageFindings(page)).toEqual(HOSTILE_CASE.expected);
      const dom = await page.evaluate(() => ({
        pwned: (window as unknown as { __pwned?: number }).__pwned,
        scripts: document.scripts.length,
        images: document.images.length,
        text: document.getElementById('findings')!.textContent,
      }));
      expect(dom.pwned).toBeUndefined();
      expect(dom).toMatchObject({ scripts: 1, images: 0 });
      // The markup is there, as characters on the page.
      expect(dom.text).toContain(HOSTILE_MARKUP);
      expect(onlyLocal(seen.requests)).toEqual([]);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
