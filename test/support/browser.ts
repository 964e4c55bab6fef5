/**
 * Headless Chromium for the auditor's page tests: Debian's `chromium` package (installed by .ci/run),
 * driven by playwright-core, with a fresh profile and every background network feature off, so any
 * request the tests see is one the page made.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.HANDOFF_LEDGER_CHROMIUM || '/usr/bin/chromium';

/**
 * `HANDOFF_LEDGER_PAGE_READ_DELAY_MS=N` delays the files the page reads on its own thread (`Blob.arrayBuffer`: the
 * trust files, earlier checkpoint and witness keys picked, dropped or served), as a loaded machine may: the first
 * read of a page by N ms, the second by 2N, and so on, so a file chosen after another is read after it too. A test
 * that reads what the page says of them, or clicks Verify once the trust file is read but before a file chosen after
 * it is, fails under it: each must wait for the page's settled state. The worker's reads of the bundle are not delayed.
 */
const READ_DELAY_MS = Number(process.env.HANDOFF_LEDGER_PAGE_READ_DELAY_MS ?? 0);

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
  if (READ_DELAY_MS > 0)
    await browser.addInitScript((ms: number) => {
      const read = Blob.prototype.arrayBuffer;
      let reads = 0;
      Blob.prototype.arrayBuffer = function (this: Blob) {
        const delay = ms * ++reads;
        return new Promise<void>((done) => setTimeout(done, delay)).then(() => read.call(this));
      };
    }, READ_DELAY_MS);
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
