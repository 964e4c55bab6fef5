/**
 * What the auditor chose is what the page verifies, however the browser's reads of the chosen files end: two picks of
 * one kind whose reads end out of order (a large file, a slow disk), a bundle folder picked while a dropped one is
 * still being walked; a verdict left on screen once another file is chosen; a chosen file that cannot be read any
 * more, or one audit-ui serves whose request fails; a verification worker that cannot start or fails. The reads are
 * held and released by the test (window.holdRead / releaseRead, window.holdDrops / releaseDrops), so each order is
 * the one asked for, not one a loaded machine happens to give.
 */
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';
import { buildBundle, makeKey, trustOf, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { dropFiles, expectSameAsCli, PAGE_URL as PAGE, picked } from '../support/page-checks.js';
import { flipSignatureBit } from '../support/tamper-cases.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let root: string;
/** A clean bundle and a tampered copy of it; its trust file (two names, same keys) and another store's. */
let good: string;
let tampered: string;
let trust: string;
let trustCopy: string;
let otherTrust: string;

const UPDATE_WAIT = { timeout: 10_000 };
const VERDICT_WAIT_MS = 90_000;

beforeAll(async () => {
  ensurePageBuilt();
  root = mkdtempSync(join(tmpdir(), 'hl-page-picks-'));
  chmodSync(root, 0o700);
  const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
  good = join(root, 'good-bundle');
  await writeBundleDir(good, b.lines);
  tampered = join(root, 'tampered-bundle');
  await writeBundleDir(
    tampered,
    b.lines.map((l, i) => (i === 1 ? flipSignatureBit(l) : l)),
  );
  trust = join(root, 'trust.json');
  await writeTrustFile(trust, b.trust);
  trustCopy = join(root, 'trust-copy.json');
  await writeTrustFile(trustCopy, b.trust);
  otherTrust = join(root, 'other-trust.json');
  await writeTrustFile(otherTrust, trustOf(makeKey('host-a', 2).trusted));
  ({ browser, close: closeBrowser } = await launchChromium());
}, 120_000);

afterAll(async () => {
  await closeBrowser?.();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function cliReport(dir: string, trustPath: string): Promise<BundleAuditReport> {
  const c = captureIo();
  await verifyCli([dir, '--trust', trustPath, '--json', '--workers', '0'], c.io);
  return JSON.parse(c.stdout()) as BundleAuditReport;
}

/**
 * A page whose reads of chosen files the test holds: `holdRead(name)` holds the page's reads of a file of that name
 * until `releaseRead(name)`; `holdDrops()` holds every file of a dropped folder until `releaseDrops()`.
 */
async function heldPage(): Promise<Page> {
  const page = await browser.newPage();
  await page.addInitScript(() => {
    const w = globalThis as unknown as Record<string, unknown>;
    const held = new Set<string>();
    const waiting = new Map<string, Array<() => void>>();
    const read = Blob.prototype.arrayBuffer;
    w.holdRead = (name: string) => held.add(name);
    w.releaseRead = (name: string) => {
      held.delete(name);
      for (const go of waiting.get(name) ?? []) go();
      waiting.delete(name);
    };
    Blob.prototype.arrayBuffer = function (this: Blob) {
      const name = this instanceof File ? this.name : undefined;
      if (name === undefined || !held.has(name)) return read.call(this);
      return new Promise<void>((go) => waiting.set(name, [...(waiting.get(name) ?? []), go])).then(() =>
        read.call(this),
      );
    };
    let holdingDrops = false;
    let dropWaiting: Array<() => void> = [];
    w.holdDrops = () => (holdingDrops = true);
    w.releaseDrops = () => {
      holdingDrops = false;
      for (const go of dropWaiting) go();
      dropWaiting = [];
    };
    const handle = (globalThis as unknown as { FileSystemFileHandle?: { prototype: { getFile(): Promise<File> } } })
      .FileSystemFileHandle;
    if (handle) {
      const getFile = handle.prototype.getFile;
      handle.prototype.getFile = function (this: unknown) {
        if (!holdingDrops) return getFile.call(this);
        return new Promise<void>((go) => dropWaiting.push(go)).then(() => getFile.call(this));
      };
    }
  });
  return page;
}

const call = (page: Page, fn: string, arg?: string) =>
  page.evaluate(([f, a]) => (globalThis as unknown as Record<string, (x?: string) => void>)[f!]!(a), [fn, arg]);

/** What the page shows of a verdict: the body's state and whether the result is on screen. */
const shownState = (page: Page) =>
  page.evaluate(() => ({
    state: (globalThis as any).document.body.dataset.state as string | undefined,
    result: !(globalThis as any).document.getElementById('result').hidden as boolean,
  }));

describe('the last choice of a kind is the one verified, whichever read ends last', { timeout: 180_000 }, () => {
  it('of two trust files picked one after the other, the second is taken even when the first is read last', async () => {
    const expected = await cliReport(good, otherTrust);
    expect(expected.ok).toBe(false);
    const page = await heldPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await call(page, 'holdRead', 'trust.json');
      await page.setInputFiles('#trust-input', trust);
      await page.setInputFiles('#trust-input', otherTrust);
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('; trust file "other-trust.json";');
      // The first pick's read ends now, after the second's: the auditor's last pick stays chosen.
      await call(page, 'releaseRead', 'trust.json');
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      expect(await picked(page)).toContain('; trust file "other-trust.json";');
      await page.click('#verify');
      await expectSameAsCli(page, expected);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('a bundle folder picked while a dropped one is still being read is the one verified', async () => {
    const expected = await cliReport(good, trust);
    expect(expected.ok).toBe(true);
    const page = await heldPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('; trust file "trust.json";');
      await call(page, 'holdDrops');
      await dropFiles(page, [tampered]);
      await page.setInputFiles('#bundle-input', good);
      await expect.poll(() => picked(page), UPDATE_WAIT).toMatch(/^bundle "good-bundle":/);
      // Verify waits for the drop being read: pressed now, its run would be stopped when the drop lands.
      expect(await page.isDisabled('#verify')).toBe(true);
      await call(page, 'releaseDrops');
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      expect(await picked(page)).toMatch(/^bundle "good-bundle":/);
      await page.click('#verify');
      await expectSameAsCli(page, expected);
    } finally {
      await page.close();
    }
  });
});

describe('Verify waits only for reads whose files may still be taken', { timeout: 180_000 }, () => {
  it('a trust file superseded while it is read holds nothing up, and its read ending later takes nothing down', async () => {
    const expected = await cliReport(good, otherTrust);
    const page = await heldPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await call(page, 'holdRead', 'trust.json');
      await page.setInputFiles('#trust-input', trust);
      expect(await page.isDisabled('#verify')).toBe(true);
      await page.setInputFiles('#trust-input', otherTrust);
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('; trust file "other-trust.json";');
      // trust.json is still being read, but will not be taken: Verify does not wait for it.
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await expectSameAsCli(page, expected);
      await call(page, 'releaseRead', 'trust.json');
      // Its read ends after the verdict: the verdict on the file chosen last stays, and so does that file.
      await page.waitForTimeout(500);
      expect(await shownState(page)).toEqual({ state: 'failed', result: true });
      expect(await picked(page)).toContain('; trust file "other-trust.json";');
      expect(await page.isEnabled('#verify')).toBe(true);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe('a verdict is shown only for what is chosen now', { timeout: 180_000 }, () => {
  it('takes the verdict down as soon as another trust file is chosen, while it is still being read', async () => {
    const page = await heldPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      await call(page, 'holdRead', 'other-trust.json');
      await page.setInputFiles('#trust-input', otherTrust);
      // The file just chosen is still being read: the ✓ on the one chosen before is not left beside it.
      await expect.poll(() => shownState(page), UPDATE_WAIT).toEqual({ state: undefined, result: false });
      expect(await page.isDisabled('#verify')).toBe(true);
      await call(page, 'releaseRead', 'other-trust.json');
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('; trust file "other-trust.json";');
      await page.click('#verify');
      await expectSameAsCli(page, await cliReport(good, otherTrust));
    } finally {
      await page.close();
    }
  });

  it('takes the verdict down at a drop, while its folder is still being walked', async () => {
    const page = await heldPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      await call(page, 'holdDrops');
      await dropFiles(page, [tampered]);
      // The dropped folder is still being walked: the ✓ on the bundle chosen before is not left beside it.
      await expect.poll(() => shownState(page), UPDATE_WAIT).toEqual({ state: undefined, result: false });
      expect(await page.isDisabled('#verify')).toBe(true);
      expect(await picked(page)).toMatch(/^bundle "good-bundle":/);
      await call(page, 'releaseDrops');
      await expect.poll(() => picked(page), UPDATE_WAIT).toMatch(/^bundle "tampered-bundle":/);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      // The tampered bundle's verdict (its findings' lines are drawn: each carries a "show manifest" button).
      await page.waitForSelector('body[data-state="failed"]', { timeout: VERDICT_WAIT_MS });
      const expected = await cliReport(tampered, trust);
      expect(await page.$$eval('#findings li', (lis) => lis.map((li) => li.dataset.code))).toEqual(
        expected.findings.map((x) => x.code),
      );
    } finally {
      await page.close();
    }
  });

  it('a drop that carries no file (text dragged from another page) leaves the verdict alone', async () => {
    const page = await heldPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      await page.locator('#drop').scrollIntoViewIfNeeded();
      const box = (await page.locator('#drop').boundingBox())!;
      const cdp = await page.context().newCDPSession(page);
      try {
        const at = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
        const data = { items: [{ mimeType: 'text/plain', data: 'a note' }], dragOperationsMask: 1 };
        for (const type of ['dragEnter', 'dragOver', 'drop'] as const)
          await cdp.send('Input.dispatchDragEvent', { type, ...at, data });
      } finally {
        await cdp.detach();
      }
      await page.waitForTimeout(500);
      expect(await shownState(page)).toEqual({ state: 'ok', result: true });
      expect(await page.isEnabled('#verify')).toBe(true);
    } finally {
      await page.close();
    }
  });
});

describe('the same file picked again', { timeout: 180_000 }, () => {
  it('is read again: a trust file edited since it was picked gives the verdict on its new keys', async () => {
    const edited = join(root, 'edited-trust.json');
    copyFileSync(otherTrust, edited);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await page.setInputFiles('#trust-input', edited);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="failed"]', { timeout: VERDICT_WAIT_MS });
      // The auditor fixes the file (the bundle's keys now) and picks it again: the browser gives the same name.
      copyFileSync(trust, edited);
      await page.setInputFiles('#trust-input', edited);
      await expect.poll(() => shownState(page), UPDATE_WAIT).toEqual({ state: undefined, result: false });
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await expectSameAsCli(page, await cliReport(good, edited));
      // The bundle folder too: picked again, it is taken again (and the verdict on it goes down).
      await page.setInputFiles('#bundle-input', good);
      await expect.poll(() => shownState(page), UPDATE_WAIT).toEqual({ state: undefined, result: false });
    } finally {
      await page.close();
    }
  });
});

describe('what the page cannot read or run is said, with a code', { timeout: 180_000 }, () => {
  it('a chosen trust file that cannot be read any more: TRUST_INVALID as verify says it, and the one chosen before stays', async () => {
    const gone = join(root, 'gone.json');
    copyFileSync(trust, gone);
    const page = await heldPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await page.setInputFiles('#trust-input', trustCopy);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await call(page, 'holdRead', 'gone.json');
      await page.setInputFiles('#trust-input', gone);
      // Removed after it was chosen, before the page read it (a file deleted or replaced meanwhile).
      rmSync(gone);
      await call(page, 'releaseRead', 'gone.json');
      await expect
        .poll(() => page.textContent('#error'), UPDATE_WAIT)
        .toMatch(/^TRUST_INVALID: cannot read trust file "gone\.json": \S/);
      expect(await page.isVisible('#error')).toBe(true);
      expect(await picked(page)).toContain('; trust file "trust-copy.json";');
      expect(await page.isEnabled('#verify')).toBe(true);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('a trust file audit-ui serves whose request fails: TRUST_INVALID naming the file, no run without it', async () => {
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: good, hasBlobs: false, trust });
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      // The connection drops (audit-ui stopped, a proxy in the way) when the page asks for the trust file.
      await page.route('**/trust.json', (route) => route.abort('connectionreset'));
      await page.goto(server.url);
      await expect
        .poll(() => page.textContent('#error'), UPDATE_WAIT)
        .toMatch(/^TRUST_INVALID: cannot read trust file "trust\.json": \S/);
      expect(await page.isVisible('#error')).toBe(true);
      expect(await picked(page)).toContain('no trust file chosen');
      expect(await page.isDisabled('#verify')).toBe(true);
      expect(seen.errors.filter((e) => !/ERR_CONNECTION_RESET/.test(e))).toEqual([]);
    } finally {
      await page.close();
      await server.close();
    }
  });

  it('a trust file audit-ui answers with an HTTP error: TRUST_INVALID naming the file, as for one it cannot read', async () => {
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: good, hasBlobs: false, trust });
    const page = await browser.newPage();
    try {
      // An answer other than the file (a proxy in the way, a server that lost it).
      await page.route('**/trust.json', (route) => route.fulfill({ status: 503, body: 'unavailable' }));
      await page.goto(server.url);
      await expect
        .poll(() => page.textContent('#error'), UPDATE_WAIT)
        .toBe('TRUST_INVALID: cannot read trust file "trust.json": HTTP 503');
      expect(await picked(page)).toContain('no trust file chosen');
      expect(await page.isDisabled('#verify')).toBe(true);
    } finally {
      await page.close();
      await server.close();
    }
  });

  it('a verification worker that cannot be started: WORKER_FAILED, not "verifying" for ever', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    // As a browser refuses it (a policy against workers, a blob: worker refused).
    await page.addInitScript(() => {
      (globalThis as unknown as { Worker: unknown }).Worker = function () {
        throw new DOMException("Failed to construct 'Worker': refused by this test", 'SecurityError');
      };
    });
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', good);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="error"]', UPDATE_WAIT);
      expect(await page.textContent('#error')).toBe(
        "WORKER_FAILED: Failed to construct 'Worker': refused by this test",
      );
      expect(await page.isHidden('#progress')).toBe(true);
      expect(await page.isHidden('#result')).toBe(true);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  for (const { event, said } of [
    { event: 'error', said: 'Uncaught Error: failed in this test' },
    { event: 'messageerror', said: 'a message from the verification worker could not be read' },
  ])
    it(`a worker that fails while verifying (${event}): WORKER_FAILED, and nothing it posts after is shown as a verdict`, async () => {
      const page = await browser.newPage();
      // The first worker the page starts raises the event as it starts (an uncaught error in its script, a message
      // that cannot be deserialized), and goes on verifying.
      await page.addInitScript((type: string) => {
        const g = globalThis as any;
        const Real = g.Worker;
        let started = 0;
        g.Worker = class extends Real {
          constructor(...args: unknown[]) {
            super(...args);
            if (started++ > 0) return;
            const e =
              type === 'error'
                ? new g.ErrorEvent('error', { message: 'Uncaught Error: failed in this test', cancelable: true })
                : new g.MessageEvent('messageerror');
            setTimeout(() => this.dispatchEvent(e), 0);
          }
        };
      }, event);
      try {
        await page.goto(PAGE);
        // Every state the body takes, from here on.
        await page.evaluate(() => {
          const d = (globalThis as any).document;
          const states: string[] = ((globalThis as any).__states = []);
          new (globalThis as any).MutationObserver(() => states.push(d.body.dataset.state ?? '')).observe(d.body, {
            attributes: true,
            attributeFilter: ['data-state'],
          });
        });
        await page.setInputFiles('#bundle-input', good);
        await page.setInputFiles('#trust-input', trust);
        await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
        await page.click('#verify');
        await page.waitForSelector('body[data-state="error"]', UPDATE_WAIT);
        expect(await page.textContent('#error')).toBe(`WORKER_FAILED: ${said}`);
        // Long enough for the worker, had it been left running, to post its verdict on this small bundle.
        await page.waitForTimeout(3_000);
        expect(await page.evaluate(() => (globalThis as any).__states as string[])).toEqual(['verifying', 'error']);
        expect(await page.isHidden('#result')).toBe(true);
        expect(await page.textContent('#progress-text')).toBe('');
        // Verify again: a worker that does not fail gives the verdict.
        await page.click('#verify');
        await expectSameAsCli(page, await cliReport(good, trust));
        expect(await page.isHidden('#error')).toBe(true);
      } finally {
        await page.close();
      }
    });
});
