/**
 * Checks and gestures shared by the auditor page's browser tests: the page's result equals the CLI's,
 * and files dropped on the page as a file manager drops them.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { describeFinding, describeVerdict } from '../../manifests/audit/report-text.js';
import { printableOnce } from '../../manifests/encoding/printable.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';

/** The built page, opened from disk as an auditor opens a downloaded copy. */
export const PAGE_URL = pathToFileURL(join(resolve(import.meta.dirname, '../..'), 'dist/web/index.html')).href;
const DONE = 'body[data-state="ok"], body[data-state="failed"], body[data-state="error"]';

export const codesAt = (r: BundleAuditReport) => r.findings.map((x) => `${x.code}@${x.line ?? '-'}`);
export const pageFindings = (page: Page) =>
  page.$$eval('#findings li', (lis) => lis.map((li) => `${li.dataset.code}@${li.dataset.line ?? '-'}`));
/** The report the page exports (its "Export report (JSON)" button). */
export async function exportedReport(page: Page): Promise<BundleAuditReport & { bundle: string }> {
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 60_000 }),
    page.click('#export-json'),
  ]);
  return JSON.parse(readFileSync(await download.path(), 'utf8')) as BundleAuditReport & { bundle: string };
}

/** What the page says it has been given. */
export const picked = (page: Page) => page.textContent('#picked');

/** Waits for the verdict (sized for a loaded CI machine); then findings with their wording, verdict and state equal the CLI's. */
export async function expectSameAsCli(page: Page, report: BundleAuditReport): Promise<void> {
  await page.waitForSelector(DONE, { timeout: 90_000 });
  expect(await pageFindings(page)).toEqual(codesAt(report));
  const texts = await page.$$eval('#findings li', (lis) => lis.map((li) => li.textContent));
  // The CLI's line for each finding (escaped once as it prints it: a line break in a message as `\x0a`), indent aside.
  expect(texts).toEqual(report.findings.map((x) => printableOnce(describeFinding(x)).trimStart()));
  expect(await page.textContent('#verdict')).toBe(`${report.ok ? '✓' : '✗'} ${describeVerdict(report)}`);
  expect(await page.getAttribute('body', 'data-state')).toBe(report.ok ? 'ok' : 'failed');
}

/**
 * Drags files and folders from disk onto the drop zone, as a file manager does: Chromium's DevTools
 * protocol (Input.dispatchDragEvent) makes a real drop, so the page's own handler reads real entries.
 */
export async function dropFiles(page: Page, files: string[]): Promise<void> {
  // Where the drop zone is now: a verdict shown has the page scrolled to it, and a drag lands where it is pointed.
  await page.locator('#drop').scrollIntoViewIfNeeded();
  const box = (await page.locator('#drop').boundingBox())!;
  const cdp = await page.context().newCDPSession(page);
  try {
    const at = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
    const data = { items: [], files, dragOperationsMask: 1 };
    for (const type of ['dragEnter', 'dragOver', 'drop'] as const)
      await cdp.send('Input.dispatchDragEvent', { type, ...at, data });
  } finally {
    await cdp.detach();
  }
}

/** How a screen reader takes changes to element `id`: the politeness of the live region it is in, or 'off'. */
export const liveness = (page: Page, id: string) =>
  page.evaluate((id: string) => {
    for (let e = (globalThis as any).document.getElementById(id); e; e = e.parentElement) {
      const live = e.getAttribute('aria-live');
      if (live) return live as string;
      const role = e.getAttribute('role');
      if (role === 'status' || role === 'log') return 'polite';
      if (role === 'alert') return 'assertive';
    }
    return 'off';
  }, id);

/** The id of the focused element. */
export const activeId = (page: Page) =>
  page.evaluate(() => ((globalThis as any).document.activeElement?.id ?? '') as string);

export async function tabTo(page: Page, id: string): Promise<void> {
  for (let i = 0; i < 30 && (await activeId(page)) !== id; i++) await page.keyboard.press('Tab');
  expect(await activeId(page)).toBe(id);
}

/**
 * Tab to a picker's button (`ROLE-choose`: the file inputs are hidden behind them) and open its chooser with the
 * keyboard (Space, then Enter: both activate a button).
 * A key press that lands while a loaded machine is still settling focus can be dropped by the browser, so each
 * key gets a bounded wait and the pair is tried up to three times; the chooser must come from the keyboard.
 */
export async function chooseByKeyboard(page: Page, id: string, files: string): Promise<void> {
  await page.bringToFront();
  for (let attempt = 0; ; attempt++) {
    for (const key of ['Space', 'Enter']) {
      await tabTo(page, id);
      const chooser = page.waitForEvent('filechooser', { timeout: 5_000 }).catch(() => undefined);
      await page.keyboard.press(key);
      const opened = await chooser;
      if (opened) return opened.setFiles(files);
    }
    if (attempt === 2) throw new Error(`no file chooser opened from the keyboard on #${id}`);
  }
}
