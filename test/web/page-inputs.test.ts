/**
 * What the auditor gives the page besides picking a bundle: an earlier checkpoint (the page's `verify
 * --since`), and all of it by drag and drop. Bundles come from a real ledger with checkpoints; the CLI's
 * report on the same files is the expected result. Drops are real drops: Chromium's DevTools protocol
 * drags the files from disk onto the drop zone, so the page's own drop handler reads them.
 */
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { describeFinding, describeVerdict } from '../../manifests/audit/report-text.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { exportBundle } from '../../src/ops/export.js';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { writeTrustFile } from '../support/bundle-builder.js';
import { sampleSummary } from '../support/tmp.js';
import { ensurePageBuilt } from '../support/page-build.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGE = pathToFileURL(join(ROOT, 'dist/web/index.html')).href;
const ORIGIN = 'example.com/audited';
const DONE = 'body[data-state="ok"], body[data-state="failed"], body[data-state="error"]';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let base: string;
/** A full bundle cut at a checkpoint of size 5, its trust file, and earlier checkpoints as files. */
const f = { bundle: '', trust: '', earlier: '', forked: '', foreign: '', huge: '', stray: '' };

const publish = (l: Ledger, session: string, marker: number) =>
  l.publish({ principal: 'alice', session, run: 'r' }, sampleSummary(marker));

beforeAll(async () => {
  ensurePageBuilt();
  // Not tempDir(): that is emptied after each test, and these files serve the whole file.
  base = mkdtempSync(join(tmpdir(), 'hl-page-inputs-'));
  chmodSync(base, 0o700);
  const at = (name: string) => join(base, name);
  const ledger = await openLedger({ root: at('store'), host: 'h1', origin: ORIGIN });
  try {
    await publish(ledger, 's1', 0);
    await publish(ledger, 's2', 0);
    f.earlier = at('earlier.note');
    writeFileSync(f.earlier, (await ledger.checkpoint()).note);
    await publish(ledger, 's1', 1);
    await publish(ledger, 's2', 1);
    await publish(ledger, 's1', 2);
    f.bundle = at('audit-2026-11');
    await exportBundle(ledger, { out: f.bundle, withBlobs: true });
    f.trust = at('trust.json');
    await writeTrustFile(f.trust, ledger.trustStore());
  } finally {
    await ledger.close();
  }
  // Same keys and origin, another history: a log shown to an earlier auditor and then rewritten.
  mkdirSync(at('fork'), { mode: 0o700 });
  cpSync(join(at('store'), 'keys'), join(at('fork'), 'keys'), { recursive: true });
  cpSync(join(at('store'), 'trust.json'), join(at('fork'), 'trust.json'));
  const fork = await openLedger({ root: at('fork'), host: 'h1', origin: ORIGIN });
  try {
    await publish(fork, 'other', 0);
    await publish(fork, 'other', 1);
    f.forked = at('forked.note');
    writeFileSync(f.forked, (await fork.checkpoint()).note);
  } finally {
    await fork.close();
  }
  // Another log's checkpoint: signed by a key the trust file does not pin.
  const other = await openLedger({ root: at('other'), host: 'h2', origin: 'example.org/other' });
  try {
    await publish(other, 'x', 0);
    f.foreign = at('foreign.note');
    writeFileSync(f.foreign, (await other.checkpoint()).note);
  } finally {
    await other.close();
  }
  f.huge = at('huge.note');
  writeFileSync(f.huge, 'x'.repeat(64 * 1024 + 1));
  f.stray = at('notes.txt');
  writeFileSync(f.stray, 'not for the page');
  ({ browser, close: closeBrowser } = await launchChromium());
}, 180_000);

afterAll(async () => {
  await closeBrowser?.();
  if (base) rmSync(base, { recursive: true, force: true });
});

async function cli(since?: string): Promise<{ code: number; report?: BundleAuditReport; stderr: string }> {
  const c = captureIo();
  const args = [f.bundle, '--trust', f.trust, '--json', '--workers', '0', ...(since ? ['--since', since] : [])];
  const code = await verifyCli(args, c.io);
  const out = JSON.parse(c.stdout()) as BundleAuditReport | { error: unknown };
  return { code, stderr: c.stderr(), ...('error' in out ? {} : { report: out }) };
}

const codesAt = (r: BundleAuditReport) => r.findings.map((x) => `${x.code}@${x.line ?? '-'}`);
const pageFindings = (page: Page) =>
  page.$$eval('#findings li', (lis) => lis.map((li) => `${li.dataset.code}@${li.dataset.line ?? '-'}`));

/** The page's result equals the CLI's: findings with their wording, verdict, and state. */
async function expectSameAsCli(page: Page, report: BundleAuditReport): Promise<void> {
  await page.waitForSelector(DONE, { timeout: 90_000 });
  expect(await pageFindings(page)).toEqual(codesAt(report));
  const texts = await page.$$eval('#findings li', (lis) => lis.map((li) => li.textContent));
  expect(texts).toEqual(report.findings.map((x) => describeFinding(x).trimStart()));
  expect(await page.textContent('#verdict')).toBe(`${report.ok ? '✓' : '✗'} ${describeVerdict(report)}`);
  expect(await page.getAttribute('body', 'data-state')).toBe(report.ok ? 'ok' : 'failed');
}

async function pick(page: Page, since: string): Promise<void> {
  await page.goto(PAGE);
  await page.setInputFiles('#bundle-input', f.bundle);
  await page.setInputFiles('#trust-input', f.trust);
  await page.setInputFiles('#since-input', since);
}

/** Drags files from disk onto the drop zone, as a file manager does (Chromium's DevTools protocol). */
async function dropFiles(page: Page, files: string[]): Promise<void> {
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

const picked = (page: Page) => page.textContent('#picked');

describe('the checkpoint a bundle was cut at (step 9)', { timeout: 180_000 }, () => {
  /** The bundle without its newest manifest, the header's count made to match: only the checkpoint tells. */
  function truncatedCopy(): string {
    const dir = join(base, `truncated-${Date.now()}`);
    cpSync(f.bundle, dir, { recursive: true });
    const lines = readFileSync(join(dir, 'manifests.jsonl'), 'utf8').split('\n').slice(0, -2);
    writeFileSync(join(dir, 'manifests.jsonl'), lines.map((l) => `${l}\n`).join(''));
    const header = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
    header.counts.manifests = lines.length;
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify(header));
    return dir;
  }

  it('is checked in a picked folder and in a bundle audit-ui serves, as the CLI checks it', async () => {
    const dir = truncatedCopy();
    const c = captureIo();
    await verifyCli([dir, '--trust', f.trust, '--json', '--workers', '0'], c.io);
    const expected = JSON.parse(c.stdout()) as BundleAuditReport;
    expect(codesAt(expected)).toEqual(['TREE_SIZE_MISMATCH@-']);
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: true, trust: f.trust });
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', dir);
      await page.setInputFiles('#trust-input', f.trust);
      await page.click('#verify');
      await expectSameAsCli(page, expected);
      expect(await page.textContent('#checkpoint-info')).toContain(`checkpoint "${ORIGIN}" size 5`);

      await page.goto(server.url);
      await expectSameAsCli(page, expected);
      expect(seen.requests).toContain(`${server.url}bundle/checkpoint.note`);
      // Announced files only: the bundle has no proofs.jsonl or consistency.json, so none is asked for.
      expect(seen.requests.filter((u) => /proofs|consistency/.test(u))).toEqual([]);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
      await server.close();
    }
  });
});

describe('the earlier-checkpoint picker', { timeout: 180_000 }, () => {
  it('shows that the bundle extends an earlier checkpoint, as verify --since does', async () => {
    const expected = await cli(f.earlier);
    expect(expected.code).toBe(0);
    expect(codesAt(expected.report!)).toEqual([]);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await pick(page, f.earlier);
      await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('earlier checkpoint earlier.note');
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      const info = await page.textContent('#checkpoint-info');
      const c = expected.report!.checkpoint!;
      expect(info).toContain(`checkpoint "${ORIGIN}" size 5 root ${c.root}, signed by "${c.signedBy[0]}"`);
      expect(info).toContain("earlier checkpoint earlier.note: extended by this bundle's checkpoint");
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('reports an earlier checkpoint the bundle does not extend with the CLI’s finding', async () => {
    const expected = await cli(f.forked);
    expect(expected.code).toBe(1);
    expect(codesAt(expected.report!)).toEqual(['CONSISTENCY_INVALID@-']);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await pick(page, f.forked);
      await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('earlier checkpoint forked.note');
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      expect(await page.textContent('#checkpoint-info')).toContain(
        'earlier checkpoint forked.note: not shown to be extended (CONSISTENCY_INVALID)',
      );
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('refuses an earlier checkpoint that does not verify with the CLI’s USAGE error, and one over 64 KiB', async () => {
    const expected = await cli(f.foreign);
    expect(expected.code).toBe(2);
    const cliLine = expected.stderr.trim().replace(/^handoff-ledger: /, '');
    expect(cliLine).toMatch(/^USAGE: --since: the earlier checkpoint does not verify: /);
    const page = await browser.newPage();
    try {
      await pick(page, f.foreign);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="error"]', { timeout: 90_000 });
      expect(await page.textContent('#error')).toBe(cliLine);
      expect(await page.isVisible('#result')).toBe(false);

      const tooLarge = await cli(f.huge);
      expect(tooLarge.stderr).toContain(`USAGE: --since ${f.huge}: over 64 KiB`);
      await page.setInputFiles('#since-input', f.huge);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 10_000 })
        .toBe('USAGE: --since huge.note: over 64 KiB');
      // The refused file replaced nothing: the one chosen before is still the one that would be used.
      expect(await picked(page)).toContain('earlier checkpoint foreign.note');
    } finally {
      await page.close();
    }
  });
});

describe('dropping files on the page', { timeout: 180_000 }, () => {
  it('takes a dropped bundle folder, trust file and earlier checkpoint, and verifies them as the CLI does', async () => {
    const expected = await cli(f.forked);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await dropFiles(page, [f.bundle, f.trust, f.forked]);
      await expect
        .poll(() => picked(page), { timeout: 30_000 })
        .toMatch(
          /^bundle audit-2026-11: \d[\d,]* bytes of manifests, \d+ blobs, cut at checkpoint\.note; trust file trust\.json; earlier checkpoint forked\.note$/,
        );
      expect(await page.isEnabled('#verify')).toBe(true);
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('reads a dropped folder through the entries API where getAsFileSystemHandle is missing', async () => {
    // Served over http: the entries API cannot read dropped folders on file:// pages in Chromium, which is
    // why the page prefers getAsFileSystemHandle; browsers without that have the entries API only.
    const server = await startAuditServer({ page: auditorPagePath()! });
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.addInitScript(() => {
        delete (globalThis as any).DataTransferItem.prototype.getAsFileSystemHandle;
      });
      await page.goto(server.url);
      expect(await page.evaluate(() => 'getAsFileSystemHandle' in (globalThis as any).DataTransferItem.prototype)).toBe(
        false,
      );
      await dropFiles(page, [f.bundle, f.trust]);
      await expect
        .poll(() => picked(page), { timeout: 30_000 })
        .toMatch(/^bundle audit-2026-11: .*; trust file trust\.json;/);
      await page.click('#verify');
      await expectSameAsCli(page, (await cli()).report!);
      expect(seen.requests.filter((u) => !u.startsWith(server.url) && !u.startsWith('blob:'))).toEqual([]);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
      await server.close();
    }
  });

  it('says what it does not take from a drop, and keeps what it took', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await dropFiles(page, [f.trust]);
      await expect.poll(() => picked(page), { timeout: 30_000 }).toContain('trust file trust.json');
      // One drop, one file the page takes and one it does not: the refusal stays on screen.
      await dropFiles(page, [f.stray, f.earlier]);
      await expect
        .poll(() => picked(page), { timeout: 30_000 })
        .toBe('no bundle chosen; trust file trust.json; earlier checkpoint earlier.note');
      expect(await page.textContent('#error')).toBe(
        '"notes.txt" is not a folder, nor a trust file (.json) or earlier checkpoint (.note): use the pickers to choose it',
      );
      expect(await page.isVisible('#error')).toBe(true);
      expect(await page.isEnabled('#verify')).toBe(false);
    } finally {
      await page.close();
    }
  });

  it('refuses a trust file over 16 MiB before reading it, with the CLI’s TRUST_INVALID', async () => {
    const big = join(base, 'big-trust.json');
    writeFileSync(big, ' '.repeat(16 * 1024 * 1024 + 1));
    const c = captureIo();
    expect(await verifyCli([f.bundle, '--trust', big, '--workers', '0'], c.io)).toBe(2);
    expect(c.stderr()).toBe(`handoff-ledger: TRUST_INVALID: trust file ${big} is over 16777216 bytes\n`);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#trust-input', big);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 30_000 })
        .toBe('TRUST_INVALID: trust file big-trust.json is over 16777216 bytes');
      expect(await picked(page)).toContain('no trust file chosen');
    } finally {
      await page.close();
    }
  });
});
