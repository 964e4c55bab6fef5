/**
 * What the page has a screen reader say, and how often: the live regions. The counter of lines verified changes
 * with every progress message (up to 20 a second) and must not be live; a polite status before it on its line says
 * the start, each quarter of the bundle read and the end. The settings on the line saying what is chosen change at
 * every key typed in the quorum, principal and session fields and must not be live; a polite status before them on
 * that line says the chosen files when they change (those audit-ui serves once, when all are in).
 * Checked on the DOM (which element is live, and every change of each live region), not on timing: the worker's
 * progress messages are multiplied by the test, so a small bundle gives 200 of them whatever the machine's speed.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';
import { buildBundle, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { liveness, PAGE_URL as PAGE, picked } from '../support/page-checks.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let root: string;
let bundle: string;
let trust: string;

const UPDATE_WAIT = { timeout: 10_000 };

beforeAll(async () => {
  ensurePageBuilt();
  root = mkdtempSync(join(tmpdir(), 'hl-page-live-'));
  chmodSync(root, 0o700);
  const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
  bundle = join(root, 'bundle');
  await writeBundleDir(bundle, b.lines);
  trust = join(root, 'trust.json');
  await writeTrustFile(trust, b.trust);
  ({ browser, close: closeBrowser } = await launchChromium());
}, 120_000);

afterAll(async () => {
  await closeBrowser?.();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** Records from now on every text element `id` is given: its changes, as a screen reader is told of them. */
const record = (page: Page, id: string) =>
  page.evaluate((id: string) => {
    const g = globalThis as any;
    const seen: string[] = ((g.__changes ??= {})[id] = []);
    new g.MutationObserver((records: any[]) => {
      // Each text as given (a record's added text node), not the text when the batch of records is read.
      for (const r of records)
        seen.push(r.type === 'characterData' ? r.target.data : (r.addedNodes[0]?.textContent ?? ''));
    }).observe(g.document.getElementById(id), { childList: true, characterData: true, subtree: true });
  }, id);
const changes = (page: Page, id: string) =>
  page.evaluate((id: string) => (globalThis as any).__changes[id] as string[], id);

describe("the page's live regions", { timeout: 180_000 }, () => {
  it('a run says its start, each quarter read and its end, not each of its 200 progress messages', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    // The page's worker, once it says where it verifies, is followed by 200 progress messages (as a large bundle
    // gives at 20 a second), before anything else it posts: the verdict comes after them.
    await page.addInitScript(() => {
      const g = globalThis as any;
      const Real = g.Worker;
      g.Worker = class extends Real {
        set onmessage(handler: (e: unknown) => void) {
          super.onmessage = (e: { data?: { type?: string } }) => {
            handler(e);
            if (e.data?.type !== 'pool') return;
            for (let i = 1; i <= 200; i++)
              handler(
                new g.MessageEvent('message', { data: { type: 'progress', lines: i, bytes: i, totalBytes: 200 } }),
              );
          };
        }
        get onmessage() {
          return super.onmessage;
        }
      };
    });
    try {
      await page.goto(PAGE);
      expect(await liveness(page, 'progress-count')).toBe('off');
      expect(await liveness(page, 'progress-status')).toBe('polite');
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await record(page, 'progress-text');
      await record(page, 'progress-status');
      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: 90_000 });
      // The counter was rewritten at each message; the status spoke five times.
      expect((await changes(page, 'progress-text')).length).toBeGreaterThanOrEqual(200);
      const said = await changes(page, 'progress-status');
      expect(said.slice(0, -1)).toEqual([
        'verifying the bundle',
        '25% of the bundle read',
        '50% of the bundle read',
        '75% of the bundle read',
      ]);
      expect(said.at(-1)).toMatch(/^verified in [0-9.]+ s \(signatures: /);
      expect(said.at(-1)).toBe(await page.textContent('#progress-text'));
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('what is chosen is said when a file is chosen, not again at each key typed in the quorum, principal or session', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      expect(await liveness(page, 'picked-settings')).toBe('off');
      expect(await liveness(page, 'picked-status')).toBe('polite');
      await record(page, 'picked-status');
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      const afterPicks = await changes(page, 'picked-status');
      expect(afterPicks.at(-1)).toMatch(
        /^bundle "bundle": [^;]+; trust file "trust\.json"; no earlier checkpoint chosen \(optional\); no witness keys chosen \(optional\)$/,
      );
      expect(afterPicks).toHaveLength(2);
      await page.type('#quorum-input', '12');
      await page.type('#principal-input', 'alice');
      await page.type('#session-input', 's1');
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('; principal "alice"; session "s1"');
      expect(await picked(page)).toContain('; quorum 12;');
      // Nine keys typed: #picked changed at each, the status not once.
      expect(await changes(page, 'picked-status')).toEqual(afterPicks);
    } finally {
      await page.close();
    }
  });
  it('the files audit-ui serves are said once, when they are all in, not as each arrives', async () => {
    const server = await startAuditServer({ page: auditorPagePath()!, bundle, hasBlobs: false, trust });
    const page = await browser.newPage();
    try {
      // Every text the status is given from the page's start: the document watched before the page's own script runs.
      await page.addInitScript(() => {
        const g = globalThis as any;
        const seen: string[] = (g.__said = []);
        const shown: string[] = (g.__shown = []);
        new g.MutationObserver((records: any[]) => {
          for (const r of records) {
            const status = g.document.getElementById('picked-status');
            if (status && status.contains(r.target) && r.target !== status.parentNode) seen.push(status.textContent);
            // The line beside the bundle's picker (aria-hidden: the status says its words).
            const line = g.document.getElementById('bundle-chosen');
            if (line && line.contains(r.target) && r.target !== line.parentNode) shown.push(line.textContent);
          }
        }).observe(g.document, { childList: true, characterData: true, subtree: true });
      });
      await page.goto(server.url);
      await page.waitForSelector('body[data-state="ok"]', { timeout: 90_000 });
      // Not "no trust file chosen" while the trust file was on its way: what audit-ui was started with, once.
      expect(await page.evaluate(() => (globalThis as any).__said as string[])).toEqual([
        expect.stringMatching(
          /^bundle "bundle", served by handoff-ledger audit-ui; trust file "trust\.json", served by audit-ui; no earlier checkpoint chosen \(optional\); no witness keys chosen \(optional\)$/,
        ),
      ]);
      // The picker lines are written with the status, once: never words on screen the status does not say.
      expect(await page.evaluate(() => (globalThis as any).__shown as string[])).toEqual([
        'bundle "bundle", served by handoff-ledger audit-ui',
      ]);
    } finally {
      await page.close();
      await server.close();
    }
  });
});
