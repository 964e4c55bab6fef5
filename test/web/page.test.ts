/**
 * The auditor's page in a real browser (headless Chromium), opened from file:// as an auditor would
 * open a downloaded copy: for a clean bundle, every tamper case and a hostile bundle, the page's
 * verdict and findings equal the CLI's, with the lines spread over a pool of workers; nothing from a
 * bundle runs; no request leaves the page.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { describeVerdict } from '../../manifests/audit/report-text.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import {
  at,
  buildBundle,
  ChainBuilder,
  signPayload,
  writeBundleDir,
  writeTrustFile,
} from '../support/bundle-builder.js';
import {
  flipSignatureBit,
  HOSTILE_CASE,
  HOSTILE_FIELD,
  HOSTILE_MARKUP,
  TAMPER_CASES,
  writeCase,
  type TamperCase,
} from '../support/tamper-cases.js';
import { tempDir } from '../support/tmp.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { activeId, chooseByKeyboard, expectSameAsCli, picked, tabTo } from '../support/page-checks.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGE = pathToFileURL(join(ROOT, 'dist/web/index.html')).href;
/**
 * The page on a pool of three workers in batches of two lines: a nine-line tamper case is spread over every
 * worker, so the comparison with the CLI covers the pool's ordering, not one batch in one worker.
 */
const POOLED = `${PAGE}?workers=3&batch=2`;
const ARTIFACTS = join(ROOT, 'test/artifacts');

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;

beforeAll(async () => {
  ensurePageBuilt();
  ({ browser, close: closeBrowser } = await launchChromium());
}, 120_000);

afterAll(async () => closeBrowser?.());

async function cliReport(dir: string, trust: string): Promise<BundleAuditReport> {
  const c = captureIo();
  await verifyCli([dir, '--trust', trust, '--json', '--workers', '0'], c.io);
  return JSON.parse(c.stdout()) as BundleAuditReport;
}

/**
 * Waits sized for a loaded 2-core CI machine: how long a verdict may take, how long a page update after
 * an input may take to show, and how long a test may run. They bound waiting only; what is checked is
 * unchanged.
 */
const VERDICT_WAIT_MS = 90_000;
const UPDATE_WAIT = { timeout: 10_000 };
const TEST_MS = 180_000;

const codesAt = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

/** Opens the page, picks the folder and the trust file, verifies, and waits for the verdict. */
async function verifyInPage(page: Page, dir: string, trust: string, url = PAGE): Promise<void> {
  await page.goto(url);
  await page.setInputFiles('#bundle-input', dir);
  await page.setInputFiles('#trust-input', trust);
  await page.click('#verify');
  await page.waitForSelector('body[data-state="ok"], body[data-state="failed"], body[data-state="error"]', {
    timeout: VERDICT_WAIT_MS,
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
  return requests.filter((u) => !(u === PAGE || u === POOLED || u.startsWith('blob:') || u.startsWith('data:')));
}

const onThreeWorkers = /^verified in [0-9.]+ s \(signatures: \w+, on 3 workers\)$/;

describe('the auditor page', { timeout: TEST_MS }, () => {
  it('is one self-contained file under a Content-Security-Policy without network access', () => {
    const html = readFileSync(join(ROOT, 'dist/web/index.html'), 'utf8');
    expect(html).toMatch(/<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-/);
  });

  it('stays within its budget of 300 KiB gzipped, WebAssembly included', () => {
    const gzipped = gzipSync(readFileSync(join(ROOT, 'dist/web/index.html')), { level: 9 }).length;
    console.log(`auditor page: ${(gzipped / 1024).toFixed(1)} KiB gzipped`);
    expect(gzipped).toBeLessThanOrEqual(300 * 1024);
  });

  it('is as large as the README says it is, within 5 KiB (the auditor is told what to expect)', () => {
    const gzipped = gzipSync(readFileSync(join(ROOT, 'dist/web/index.html')), { level: 9 }).length / 1024;
    const said = /# → dist\/web\/index\.html \(one file, ~(\d+) KiB gzipped\)/.exec(
      readFileSync(join(ROOT, 'README.md'), 'utf8'),
    );
    expect(said).not.toBeNull();
    expect(Math.abs(Number(said![1]) - gzipped)).toBeLessThanOrEqual(5);
  });

  it.each(TAMPER_CASES.map((c) => [c.name, c] as const))(
    'reports %s exactly as the CLI does, without a network request',
    async (_name, c) => {
      const { dir, trustPath } = await casePaths(c);
      const cli = await cliReport(dir, trustPath);
      expect(codesAt(cli)).toEqual(c.expected);
      const page = await browser.newPage();
      const seen = watchPage(page);
      try {
        await verifyInPage(page, dir, trustPath, POOLED);
        expect(await page.textContent('#progress-text')).toMatch(onThreeWorkers);
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
      await verifyInPage(page, dir, trustPath, POOLED);
      expect(await page.textContent('#progress-text')).toMatch(onThreeWorkers);
      expect(await pageFindings(page)).toEqual(HOSTILE_CASE.expected);
      const dom = await page.evaluate(() => ({
        pwned: (globalThis as { __pwned?: number }).__pwned,
        scripts: (globalThis as any).document.scripts.length,
        images: (globalThis as any).document.images.length,
        text: (globalThis as any).document.getElementById('findings').textContent as string,
      }));
      expect(dom.pwned).toBeUndefined();
      expect(dom).toMatchObject({ scripts: 1, images: 0 });
      // The markup is there, as characters on the page: the finding names the field quoted (its `"` as `\"`), with
      // the control and bidi characters as \uXXXX, the very line the CLI prints.
      const field =
        '"<img src=x onerror=\\"window.__pwned=1\\"><script>window.__pwned=1</script>\\u001b]0;title\\u0007\\u202e"';
      const line = `MANIFEST_INVALID (line 10): manifest schema: (root): unknown field ${field}`;
      expect(HOSTILE_FIELD.startsWith(HOSTILE_MARKUP)).toBe(true);
      expect(cli.findings[0]!.message).toBe(`manifest schema: (root): unknown field ${field}`);
      expect(await page.$$eval('#findings li', (lis) => lis[0]!.textContent)).toBe(line);
      const human = captureIo();
      await verifyCli([dir, '--trust', trustPath, '--workers', '0'], human.io);
      expect(human.stdout().split('\n')).toContain(`  ${line}`);
      expect(dom.text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/);
      expect(onlyLocal(seen.requests)).toEqual([]);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('shows a line break from a bundle as the CLI prints it, never as a line of its own', async () => {
    // A finding that quotes the bundle (a signed manifest's unknown field, named as a JSON string: the line break as
    // `\n`) and a folder name (shown bare: `\x0a`), each writing a finding and a verdict of its own on the lines
    // after it.
    const forged = `\n  SESSION_HEAD_INVALID: (none; the lines below are the auditor's notes)\n\nverdict: OK — all heads proven`;
    const c: TamperCase = {
      name: `forged${forged}`,
      expected: ['MANIFEST_INVALID@10'],
      make: async (b) => {
        const s1 = b.chains.get('s1')!.built;
        const manifest = { ...s1[4]!.manifest, seq: 5, prev: s1[4]!.id, createdAt: at(5), [`note${forged}`]: 1 };
        return { lines: [...b.lines, (await signPayload(manifest, b.key)).line] };
      },
    };
    const { dir, trustPath } = await casePaths(c);
    const cli = await cliReport(dir, trustPath);
    expect(codesAt(cli)).toEqual(c.expected);
    // The field quoted, its line breaks as `\n`: in --json's message as in the line the CLI prints.
    const quotedField = `unknown field "note\\n  SESSION_HEAD_INVALID: (none; the lines below are the auditor's notes)\\n\\nverdict: OK`;
    expect(cli.findings[0]!.message).toContain(quotedField);
    expect(cli.findings[0]!.message).not.toMatch(/[\n\r\u2028\u2029]/);
    // What the CLI prints: the finding on one line.
    const human = captureIo();
    await verifyCli([dir, '--trust', trustPath, '--workers', '0'], human.io);
    const cliLines = human.stdout().split('\n');
    const cliFinding = cliLines.find((l) => l.startsWith('  MANIFEST_INVALID'))!;
    expect(cliFinding).toBe(`  MANIFEST_INVALID (line 10): ${cli.findings[0]!.message}`);
    expect(cliFinding).toContain(quotedField);
    expect(cliLines.filter((l) => l.startsWith('verdict: '))).toEqual([describeVerdict(cli)]);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await verifyInPage(page, dir, trustPath);
      await expectSameAsCli(page, cli);
      expect(await page.$$eval('#findings li', (lis) => lis.map((li) => li.textContent))).toEqual([
        cliFinding.trimStart(),
      ]);
      // The folder's name too: the CLI's first line names the folder (by its path), quoted the same way (`quoted`).
      const name = `forged\\n  SESSION_HEAD_INVALID: (none; the lines below are the auditor's notes)\\n\\nverdict: OK — all heads proven`;
      const info = (await page.textContent('#bundle-info'))!;
      // What the unsigned header says is labelled as its claim, never printed as fact.
      const claim = `bundle "${name}": its unsigned header claims: exported by host `;
      expect(info.slice(0, claim.length)).toBe(claim);
      expect(cliLines[0]).toContain(`/${name}": its unsigned header claims: exported by host `);
      // Nothing the page shows holds a line break from the bundle: only its own, between lines it puts together.
      const texts = await page.$$eval('#findings li, #bundle-info, #picked, #verdict, #coverage, #chains td', (els) =>
        els.map((e) => e.textContent),
      );
      expect(texts.length).toBeGreaterThan(5);
      for (const text of texts) expect(text).not.toMatch(/[\n\r\u2028\u2029]/);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('shows a line break in an error from a bundle as the CLI prints it (an unknown field quoted: `\\n`)', async () => {
    const { dir, trustPath } = await casePaths(TAMPER_CASES[0]!);
    const header = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify({ ...header, 'x\nverdict: OK': 1 }));
    const c = captureIo();
    expect(await verifyCli([dir, '--trust', trustPath], c.io)).toBe(2);
    const cliLine = c
      .stderr()
      .replace(/^handoff-ledger: /, '')
      .replace(/\n$/, '');
    expect(cliLine).toBe('BUNDLE_INVALID: bundle.json: (root): unknown field "x\\nverdict: OK"');
    const page = await browser.newPage();
    try {
      await verifyInPage(page, dir, trustPath);
      expect(await page.getAttribute('body', 'data-state')).toBe('error');
      expect(await page.textContent('#error')).toBe(cliLine);
    } finally {
      await page.close();
    }
  });

  it("words a bundle.json that is not JSON as the CLI does, never with the engine's JSON.parse message", async () => {
    const { dir, trustPath } = await casePaths(TAMPER_CASES[0]!);
    // Cut inside its JSON: V8's words for it ("Unexpected end of JSON input", "… at position N") differ between
    // Node and Chromium; the project's own sentence is the same in both.
    writeFileSync(join(dir, 'bundle.json'), readFileSync(join(dir, 'bundle.json'), 'utf8').slice(0, 40));
    const c = captureIo();
    expect(await verifyCli([dir, '--trust', trustPath], c.io)).toBe(2);
    expect(c.stderr()).toBe('handoff-ledger: BUNDLE_INVALID: bundle.json is not JSON\n');
    const badTrust = join(dir, '..', 'bad-trust.json');
    writeFileSync(badTrust, '{"keys": [');
    const page = await browser.newPage();
    try {
      await verifyInPage(page, dir, trustPath);
      expect(await page.getAttribute('body', 'data-state')).toBe('error');
      expect(await page.textContent('#error')).toBe('BUNDLE_INVALID: bundle.json is not JSON');
      // A trust file that is not JSON likewise: verify's words (its path aside), not JSON.parse's.
      await verifyInPage(page, dir, badTrust);
      expect(await page.textContent('#error')).toBe(
        'TRUST_INVALID: trust file "bad-trust.json": trust store is not valid JSON',
      );
    } finally {
      await page.close();
    }
    const cliTrust = captureIo();
    expect(await verifyCli([dir, '--trust', badTrust], cliTrust.io)).toBe(2);
    expect(cliTrust.stderr()).toBe(
      `handoff-ledger: TRUST_INVALID: trust file "${badTrust}": trust store is not valid JSON\n`,
    );
  });
});

/**
 * A bundle worth looking at: eight sessions of three principals, with a gap, a fork, a missing blob
 * and a broken signature among 240 manifests.
 */
async function pictureBundle(): Promise<{ dir: string; trustPath: string }> {
  const names = ['api-gateway', 'billing-refactor', 'docs-sweep', 'flaky-tests', 'infra-upgrade', 'ledger-audit'];
  const b = await buildBundle({
    chains: [...names, 'release-notes', 'search-index'].map((session, i) => ({
      session,
      principal: ['alice', 'bob', 'carol'][i % 3]!,
      count: 30,
    })),
  });
  const lineOf = (session: string, seq: number) => b.chains.get(session)!.built[seq]!.line;
  const blobs = new Map(b.blobs);
  blobs.delete(b.chains.get('billing-refactor')!.built[5]!.manifest.summary.digest);
  const forked = b.chains.get('infra-upgrade')!;
  const twin = await new ChainBuilder(b.key, { principal: 'bob', session: 'infra-upgrade', run: 'run-2' }).next({
    seq: 20,
    prev: forked.built[19]!.id,
    createdAt: at(20),
  });
  const lines = b.lines
    .filter((l) => l !== lineOf('docs-sweep', 10))
    .map((l) => (l === lineOf('release-notes', 15) ? flipSignatureBit(l) : l));
  lines.push(twin.line);
  blobs.set(twin.manifest.summary.digest, twin.blob);
  const root = tempDir();
  await writeBundleDir(join(root, 'picture'), lines, { blobs });
  await writeTrustFile(join(root, 'trust.json'), b.trust);
  return { dir: join(root, 'picture'), trustPath: join(root, 'trust.json') };
}

describe('the auditor page, by keyboard and by eye', { timeout: TEST_MS }, () => {
  it('names every button with the words it shows, so it can be called by them (label in name)', async () => {
    const { dir, trustPath } = await pictureBundle();
    const page = await browser.newPage();
    try {
      await verifyInPage(page, dir, trustPath);
      const buttons = await page.$$eval('button', (bs) =>
        bs.map((b) => ({ text: b.textContent!.trim(), label: b.getAttribute('aria-label') })),
      );
      // The findings' "show manifest" buttons among them, each naming its line.
      expect(buttons.filter((b) => b.text === 'show manifest').length).toBeGreaterThan(0);
      expect(buttons.filter((b) => b.label !== null && !b.label.includes(b.text))).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('is usable with the keyboard alone: choose files, verify, walk the history, follow a finding', async () => {
    const { dir, trustPath } = await pictureBundle();
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await chooseByKeyboard(page, 'bundle-choose', dir);
      await chooseByKeyboard(page, 'trust-choose', trustPath);
      // The page reads the trust file asynchronously; Verify is unavailable (aria-disabled: a press says why) until it has.
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('; trust file "trust.json";');
      await tabTo(page, 'verify');
      await page.keyboard.press('Enter');
      await page.waitForSelector('body[data-state="failed"]', { timeout: VERDICT_WAIT_MS });
      await expect.poll(() => activeId(page), UPDATE_WAIT).toBe('verdict');
      // The verdict says it in words, not only in colour.
      expect(await page.textContent('#verdict')).toMatch(/^✗ verdict: FAILED — /);

      await tabTo(page, 'history');
      const details = () => page.textContent('#details');
      await expect.poll(details, UPDATE_WAIT).toMatch(/sessionapi-gateway.*seq0/s);
      await page.keyboard.press('ArrowRight');
      await expect.poll(details, UPDATE_WAIT).toMatch(/sessionapi-gateway.*seq1/s);
      await page.keyboard.press('End');
      await expect.poll(details, UPDATE_WAIT).toMatch(/seq29/);
      await page.keyboard.press('ArrowDown');
      await expect.poll(details, UPDATE_WAIT).toMatch(/sessionbilling-refactor.*seq29/s);

      await tabTo(page, 'export-json');
      const show = page.locator('#findings li[data-code="BLOB_MISSING"] button');
      await show.focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => activeId(page), UPDATE_WAIT).toBe('history');
      await expect.poll(details, UPDATE_WAIT).toMatch(/stateblob missing \(BLOB_MISSING\)sessionbilling-refactorseq5/);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('draws forks and gaps, tells states apart by shape as well as colour, and keeps a screenshot', async () => {
    const { dir, trustPath } = await pictureBundle();
    const page = await browser.newPage();
    try {
      await page.setViewportSize({ width: 1100, height: 900 });
      await verifyInPage(page, dir, trustPath);
      const legend = await page.textContent('#legend');
      for (const words of ['filled square', 'triangle', 'hollow circle', 'fork', 'gap'])
        expect(legend).toContain(words);
      expect(await pageFindings(page)).toEqual([
        'BLOB_MISSING@42',
        'SEQ_GAP@90',
        'SIGNATURE_INVALID@126',
        'SEQ_GAP@134',
        'FORK@240',
      ]);
      // Hovering a mark shows its fields: api-gateway is the first row; seq 3 is the fourth cell after the labels.
      await page.locator('#history').scrollIntoViewIfNeeded();
      const box = (await page.locator('#history').boundingBox())!;
      await page.mouse.move(box.x + 190 + 3 * 14 + 7, box.y + 14);
      await expect.poll(() => page.textContent('#details'), UPDATE_WAIT).toMatch(/sessionapi-gatewayseq3line/);
      // Seq 20 of the forked session shows the twin as a second mark at the same seq.
      await page.locator('#findings li[data-code="FORK"] button').click();
      await expect
        .poll(() => page.textContent('#details'), UPDATE_WAIT)
        .toMatch(/seq20 \(fork: another manifest has this seq\)/);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.locator('#history').screenshot({ path: join(ARTIFACTS, 'history.png') });
      await page.evaluate(() => (globalThis as any).scrollTo(0, 0));
      await page.screenshot({ path: join(ARTIFACTS, 'auditor-page.png'), fullPage: true });
      expect(readFileSync(join(ARTIFACTS, 'history.png')).length).toBeGreaterThan(5000);
    } finally {
      await page.close();
    }
  });

  it('prints the report without the controls', async () => {
    const { dir, trustPath } = await pictureBundle();
    const page = await browser.newPage();
    try {
      await verifyInPage(page, dir, trustPath);
      await page.emulateMedia({ media: 'print' });
      for (const hidden of ['#inputs', '.actions', '#filters'])
        expect(await page.isVisible(hidden), hidden).toBe(false);
      for (const shown of ['#verdict', '#history', '#findings', '#chains'])
        expect(await page.isVisible(shown), shown).toBe(true);
      const pdf = await page.pdf();
      expect(pdf.subarray(0, 5).toString()).toBe('%PDF-');
    } finally {
      await page.close();
    }
  });

  it("filters by principal, session and time, and exports the CLI's JSON report", async () => {
    const { dir, trustPath } = await pictureBundle();
    const cli = await cliReport(dir, trustPath);
    const page = await browser.newPage();
    try {
      await verifyInPage(page, dir, trustPath);
      const all = await pageFindings(page);
      expect(all).toEqual(codesAt(cli));
      await page.selectOption('#filter-principal', 'bob');
      await expect.poll(() => pageFindings(page), UPDATE_WAIT).toEqual(['BLOB_MISSING@42', 'FORK@240']);
      expect(all.length).toBeGreaterThan(2);
      await page.fill('#filter-session', 'billing');
      await expect
        .poll(async () => (await pageFindings(page)).map((f) => f.split('@')[0]), UPDATE_WAIT)
        .toEqual(['BLOB_MISSING']);
      await page.selectOption('#filter-principal', '');
      await page.fill('#filter-session', '');
      // createdAt is T0 + seq seconds: a window after seq 21 leaves out the fork and the missing blob.
      const local = (iso: string) => {
        const d = new Date(iso);
        return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
      };
      await page.fill('#filter-from', local(at(21)));
      await expect
        .poll(async () => (await pageFindings(page)).filter((f) => /^(FORK|BLOB_MISSING)@/.test(f)), UPDATE_WAIT)
        .toEqual([]);
      const [download] = await Promise.all([
        page.waitForEvent('download', { timeout: 60_000 }),
        page.click('#export-json'),
      ]);
      const exported = JSON.parse(readFileSync(await download.path(), 'utf8'));
      expect(exported).toEqual({ ...cli, bundle: 'picture' });
      expect(download.suggestedFilename()).toBe('picture.audit.json');
    } finally {
      await page.close();
    }
  });
  it('holds the history to a time bound past the year 9999 (the input takes years to 275760) without an error', async () => {
    const { dir, trustPath } = await pictureBundle();
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await verifyInPage(page, dir, trustPath);
      const all = await pageFindings(page);
      expect(all.length).toBeGreaterThan(2);
      const onMarks = all.filter((f) => !f.endsWith('@-'));
      // Date reads no year of five digits: toISOString threw a RangeError at every change of the filters. Every
      // manifest is signed with a four-digit year, so a From past 9999 leaves none in the picture, a To holds back none.
      await page.fill('#filter-from', '10000-01-01T00:00:00');
      await expect
        .poll(async () => (await pageFindings(page)).filter((f) => !f.endsWith('@-')), UPDATE_WAIT)
        .toEqual([]);
      expect(await page.getAttribute('#history', 'data-marks')).toBe('0');
      await page.fill('#filter-from', '');
      await expect.poll(() => pageFindings(page), UPDATE_WAIT).toEqual(all);
      await page.fill('#filter-to', '275760-09-12T23:59:59');
      await page.fill('#filter-session', 'billing');
      await page.fill('#filter-session', '');
      await expect.poll(() => pageFindings(page), UPDATE_WAIT).toEqual(all);
      expect(onMarks.length).toBeGreaterThan(0);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

/** The page's verdict and findings (codes and lines) equal the CLI's report. */
async function expectVerdictOf(page: Page, cli: BundleAuditReport): Promise<void> {
  await page.waitForSelector('body[data-state="ok"], body[data-state="failed"], body[data-state="error"]', {
    timeout: VERDICT_WAIT_MS,
  });
  expect(await pageFindings(page)).toEqual(codesAt(cli));
  expect(await page.textContent('#verdict')).toBe(`${cli.ok ? '✓' : '✗'} ${describeVerdict(cli)}`);
  expect(await page.getAttribute('body', 'data-state')).toBe(cli.ok ? 'ok' : 'failed');
}

/** The exported JSON report: what the page hands the auditor as the verdict of the bundle it names. */
async function exportedReport(page: Page): Promise<BundleAuditReport & { bundle: string }> {
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 60_000 }),
    page.click('#export-json'),
  ]);
  return JSON.parse(readFileSync(await download.path(), 'utf8')) as BundleAuditReport & { bundle: string };
}

/** What the page shows of a verdict: the body's state and whether the result is on screen. */
const shownState = (page: Page) =>
  page.evaluate(() => ({
    state: (globalThis as any).document.body.dataset.state as string | undefined,
    result: !(globalThis as any).document.getElementById('result').hidden as boolean,
  }));

describe('the verdict on screen is the verdict of what is chosen', { timeout: TEST_MS }, () => {
  async function goodAndTampered() {
    const root = tempDir();
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const trustPath = join(root, 'trust.json');
    await writeTrustFile(trustPath, b.trust);
    const good = join(root, 'good-bundle');
    await writeBundleDir(good, b.lines);
    const tampered = join(root, 'tampered-bundle');
    await writeBundleDir(
      tampered,
      b.lines.map((l, i) => (i === 1 ? flipSignatureBit(l) : l)),
    );
    return { root, b, trustPath, good, tampered };
  }

  it('takes the verdict down when another bundle, trust file or quorum is chosen, and exports the bundle it verified', async () => {
    const { trustPath, good, tampered } = await goodAndTampered();
    const page = await browser.newPage();
    try {
      await verifyInPage(page, good, trustPath);
      expect(await shownState(page)).toEqual({ state: 'ok', result: true });
      expect(await exportedReport(page)).toMatchObject({ bundle: 'good-bundle', ok: true });

      await page.setInputFiles('#bundle-input', tampered);
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('tampered-bundle');
      expect(await shownState(page)).toEqual({ state: undefined, result: false });

      await page.click('#verify');
      await page.waitForSelector('body[data-state="failed"]', { timeout: VERDICT_WAIT_MS });
      const exported = await exportedReport(page);
      expect(exported).toMatchObject({ bundle: 'tampered-bundle', ok: false });
      expect(exported).toEqual({ ...(await cliReport(tampered, trustPath)), bundle: 'tampered-bundle' });

      // A side file or the quorum changed after the verdict takes it down as well.
      const sameTrust = join(tempDir(), 'same-trust.json');
      copyFileSync(trustPath, sameTrust);
      await page.setInputFiles('#trust-input', sameTrust);
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('trust file "same-trust.json"');
      expect(await shownState(page)).toEqual({ state: undefined, result: false });
      await page.click('#verify');
      await page.waitForSelector('body[data-state="failed"]', { timeout: VERDICT_WAIT_MS });
      await page.fill('#quorum-input', '1');
      expect(await shownState(page)).toEqual({ state: undefined, result: false });
    } finally {
      await page.close();
    }
  });

  it('stops a verification under way when another bundle is chosen: its verdict never shows', async () => {
    const { root, b, trustPath, tampered } = await goodAndTampered();
    const big = await buildBundle({ chains: [{ session: 's1', count: 4000 }], key: b.key });
    const bigGood = join(root, 'big-good-bundle');
    await writeBundleDir(bigGood, big.lines);
    const page = await browser.newPage();
    try {
      await page.goto(`${PAGE}?workers=0`);
      // Every state the body takes, from here on.
      await page.evaluate(() => {
        const d = (globalThis as any).document;
        const states: string[] = ((globalThis as any).__states = []);
        new (globalThis as any).MutationObserver(() => states.push(d.body.dataset.state ?? '')).observe(d.body, {
          attributes: true,
          attributeFilter: ['data-state'],
        });
      });
      await page.setInputFiles('#bundle-input', bigGood);
      await page.setInputFiles('#trust-input', trustPath);
      await page.click('#verify');
      await page.setInputFiles('#bundle-input', tampered);
      await expect.poll(() => picked(page), UPDATE_WAIT).toContain('tampered-bundle');
      expect(await shownState(page)).toEqual({ state: undefined, result: false });
      expect(await page.isHidden('#progress')).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="failed"]', { timeout: VERDICT_WAIT_MS });
      expect(await exportedReport(page)).toMatchObject({ bundle: 'tampered-bundle', ok: false });
      expect(await page.evaluate(() => (globalThis as any).__states as string[])).not.toContain('ok');
    } finally {
      await page.close();
    }
  });
});

describe("the page's verdict on an incomplete folder is verify's", { timeout: TEST_MS }, () => {
  it('checks every blob when bundle.json counts blobs and the folder has none: BLOB_MISSING per blob, as the CLI', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const root = tempDir();
    const dir = join(root, 'blobs-gone');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    rmSync(join(dir, 'blobs'), { recursive: true });
    const trustPath = join(root, 'trust.json');
    await writeTrustFile(trustPath, b.trust);
    const cli = await cliReport(dir, trustPath);
    // The header still counts the 3 blobs the bundle no longer holds (COUNT_MISMATCH).
    expect(codesAt(cli)).toEqual(['BLOB_MISSING@1', 'BLOB_MISSING@2', 'BLOB_MISSING@3', 'COUNT_MISMATCH@-']);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', dir);
      await page.setInputFiles('#trust-input', trustPath);
      await page.click('#verify');
      await expectVerdictOf(page, cli);
    } finally {
      await page.close();
    }
  });

  it('ignores files a bundle does not consist of and blobs no manifest names, as the CLI does: OK', async () => {
    const { dir, trustPath } = await casePaths(TAMPER_CASES.find((c) => c.name === 'clean')!);
    // Each would be a finding if read: a blob no manifest names whose bytes do not hash to its name, an upper-case
    // name, another hash's directory, a backup of manifests.jsonl that is no JSON, notes.
    writeFileSync(join(dir, 'blobs/blake3', 'a'.repeat(64)), 'not the blob it is named after');
    writeFileSync(join(dir, 'blobs/blake3', 'D'.repeat(64)), 'an upper-case name');
    mkdirSync(join(dir, 'blobs/sha256'));
    writeFileSync(join(dir, 'blobs/sha256', 'e'.repeat(64)), 'another hash');
    writeFileSync(join(dir, 'manifests.jsonl.bak'), 'not JSON\n');
    writeFileSync(join(dir, 'README.txt'), 'notes');
    const cli = await cliReport(dir, trustPath);
    expect(cli.ok).toBe(true);
    expect(cli.findings).toEqual([]);
    const page = await browser.newPage();
    try {
      await verifyInPage(page, dir, trustPath);
      await expectVerdictOf(page, cli);
      expect((await exportedReport(page)).counts.blobsChecked).toBe(cli.counts.blobsChecked);
    } finally {
      await page.close();
    }
  });

  it('refuses a folder without bundle.json with BUNDLE_INVALID, as the CLI does', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const root = tempDir();
    const trustPath = join(root, 'trust.json');
    await writeTrustFile(trustPath, b.trust);
    const gone = join(root, 'no-header');
    await writeBundleDir(gone, b.lines);
    rmSync(join(gone, 'bundle.json'));
    // A directory in its place: the folder picker gives the files in it, never the directory.
    const dirInPlace = join(root, 'header-is-a-dir');
    await writeBundleDir(dirInPlace, b.lines);
    rmSync(join(dirInPlace, 'bundle.json'));
    mkdirSync(join(dirInPlace, 'bundle.json'));
    writeFileSync(join(dirInPlace, 'bundle.json', 'x'), '{}');
    for (const dir of [gone, dirInPlace]) {
      const c = captureIo();
      expect(await verifyCli([dir, '--trust', trustPath, '--json'], c.io)).toBe(2);
      expect(c.stderr()).toMatch(/^handoff-ledger: BUNDLE_INVALID: /);
      const page = await browser.newPage();
      try {
        await verifyInPage(page, dir, trustPath);
        expect(await page.getAttribute('body', 'data-state'), dir).toBe('error');
        expect(await page.textContent('#error'), dir).toMatch(/^BUNDLE_INVALID: /);
        expect(await page.isHidden('#result')).toBe(true);
      } finally {
        await page.close();
      }
    }
  });

  it('refuses a folder without manifests.jsonl with BUNDLE_INVALID when it is chosen, as the CLI does', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const root = tempDir();
    const trustPath = join(root, 'trust.json');
    await writeTrustFile(trustPath, b.trust);
    const dir = join(root, 'no-manifests');
    await writeBundleDir(dir, b.lines);
    rmSync(join(dir, 'manifests.jsonl'));
    const c = captureIo();
    expect(await verifyCli([dir, '--trust', trustPath, '--json'], c.io)).toBe(2);
    expect(c.stderr()).toMatch(/^handoff-ledger: BUNDLE_INVALID: /);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', dir);
      await expect
        .poll(() => page.textContent('#error'))
        .toBe('BUNDLE_INVALID: the folder "no-manifests" has no manifests.jsonl; it is not a bundle');
      expect(await page.isVisible('#error')).toBe(true);
      expect(await picked(page)).toMatch(/^no bundle chosen;/);
    } finally {
      await page.close();
    }
  });
});
