/**
 * Headless Chromium for the auditor's page tests: Debian's `chromium` package (installed by .ci/run),
 * driven by playwright-core, with a fresh profile and every background network feature off, so any
 * request the tests see is one the page made.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.HANDOFF_LEDGER_CHROMIUM ?? '/usr/bin/chromium';

/** A browser with a fresh profile (playwright passes it as --user-data-dir), removed on close. */
export async function launchChromium(): Promise<{ browser: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'hl-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    acceptDownloads: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    browser,
    close: async () => {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Everything a page asked for, and every error it raised, while the test ran. */
export function watchPage(page: Page): { requests: string[]; errors: string[] } {
  const seen = { requests: [] as string[], errors: [] as string[] };
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('worker', (w) => w.on('console', () => {}));
  page.on('pageerror', (e) => seen.errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') seen.errors.push(m.text());
  });
  return seen;
}
