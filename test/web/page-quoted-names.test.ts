/**
 * The auditor's page shows the names a report line quotes (a checkpoint origin, the key that signed it, a pinned
 * witness's name, a finding's message naming one) as `verify` prints them: quoted once, as text. It escaped each of
 * report-text's lines again (`printable`), which doubled every backslash of the quotes, as the CLI did.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { run as verifyCli } from '../../src/cli/verify.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { cliVerify } from '../support/checkpoint-bundle.js';
import { writeHostileNameFiles, type HostileNameFiles } from '../support/hostile-names.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { expectSameAsCli, PAGE_URL as PAGE, picked } from '../support/page-checks.js';
import { buildBundle, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let base: string;
let f: HostileNameFiles;

beforeAll(async () => {
  ensurePageBuilt();
  base = mkdtempSync(join(tmpdir(), 'hl-page-quoted-'));
  chmodSync(base, 0o700);
  f = await writeHostileNameFiles(base);
  ({ browser, close: closeBrowser } = await launchChromium());
}, 180_000);

afterAll(async () => {
  await closeBrowser?.();
  if (base) rmSync(base, { recursive: true, force: true });
});

/** verify's human report on `dir`, its lines. */
async function cliLines(dir: string): Promise<string[]> {
  const c = captureIo();
  await verifyCli([dir, '--trust', f.trust, '--witness-keys', f.witnessKeys, '--quorum', '1', '--workers', '0'], c.io);
  return c.stdout().split('\n');
}

async function verifyOnPage(page: Page, dir: string): Promise<void> {
  await page.goto(PAGE);
  await page.setInputFiles('#bundle-input', dir);
  await page.setInputFiles('#trust-input', f.trust);
  await page.setInputFiles('#witness-keys-input', f.witnessKeys);
  await page.getByLabel(/Witness quorum/).fill('1');
  await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('witness keys "witnesses.txt"');
  await page.click('#verify');
}

describe("the page shows a bundle's quoted names as verify prints them, escaped once", { timeout: 180_000 }, () => {
  it('the checkpoint and witnesses lines', async () => {
    const expected = await cliVerify(f.cosigned, f.trust, undefined, [
      '--witness-keys',
      f.witnessKeys,
      '--quorum',
      '1',
    ]);
    const lines = await cliLines(f.cosigned);
    const checkpoint = lines.find((l) => l.startsWith('checkpoint '))!;
    const witnesses = lines.find((l) => l.startsWith('witnesses: '))!;
    // The CLI's lines (test/audit/quoted-names.test.ts holds them to their exact text): quoted once.
    expect(checkpoint.startsWith(String.raw`checkpoint "example.com/<b>\"q\\b\u009b\u202e" size 1 root `)).toBe(true);
    expect(witnesses).toMatch(
      /^witnesses: 1 of 1 pinned cosigned \(quorum 1\): "witness\.example\/\\"w\\\\\\u009b\\u202e\+/,
    );
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await verifyOnPage(page, f.cosigned);
      await expectSameAsCli(page, expected.report!);
      expect(await page.textContent('#checkpoint-info')).toBe(checkpoint);
      expect(await page.textContent('#witness-info')).toBe(
        `✓ witness quorum met (witness keys "witnesses.txt")\n${witnesses}`,
      );
      // Text, never markup: the origin's `<b>` made no element.
      expect(await page.$$eval('#checkpoint-info *, #witness-info *, b', (els) => els.length)).toBe(0);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("a finding's message naming a witness: the CLI's line", async () => {
    const expected = await cliVerify(f.pasted, f.trust, undefined, ['--witness-keys', f.witnessKeys, '--quorum', '1']);
    const line = (await cliLines(f.pasted)).find((l) => l.startsWith('  WITNESS_COSIGNATURE_INVALID: '))!;
    expect(line).toBe(
      String.raw`  WITNESS_COSIGNATURE_INVALID: the cosignature by pinned witness "witness.example/\"w\\\u009b\u202e" does not verify: the Ed25519 signature does not verify`,
    );
    const page = await browser.newPage();
    try {
      await verifyOnPage(page, f.pasted);
      await expectSameAsCli(page, expected.report!);
      const texts = await page.$$eval('#findings li[data-code="WITNESS_COSIGNATURE_INVALID"]', (lis) =>
        lis.map((li) => li.textContent),
      );
      expect(texts).toEqual([line.trimStart()]);
    } finally {
      await page.close();
    }
  });
});

/**
 * A folder or file name is data too: the line saying what is chosen (and the status a screen reader says) quotes each
 * name once, as a refusal names a file, so a name holding `; trust file …` cannot pass for another part of the line,
 * nor a quote or a bidi control for another name. It printed them bare (only escaped).
 */
describe('the page names the bundle and files chosen quoted, escaped once', { timeout: 180_000 }, () => {
  // No backslash: the folder picker reads one in a folder's name as a path separator (webkitRelativePath).
  const HOSTILE = 'b"\u202e; trust file other.json';
  const QUOTED = String.raw`"b\"\u202e; trust file other.json"`;
  let dir: string;
  let trustPath: string;
  beforeAll(async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    dir = join(base, HOSTILE);
    await writeBundleDir(dir, b.lines);
    trustPath = join(base, 'keys; x.json');
    await writeTrustFile(trustPath, b.trust);
  });

  it('a picked folder and trust file', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', dir);
      await page.setInputFiles('#trust-input', trustPath);
      await expect
        .poll(() => picked(page), { timeout: 10_000 })
        .toMatch(
          new RegExp(
            `^bundle ${escapeRe(QUOTED)}: [\\d,]+ bytes of manifests; trust file "keys; x\\.json"; no earlier checkpoint chosen \\(optional\\); no witness keys chosen \\(optional\\)$`,
          ),
        );
      expect(await page.textContent('#picked-status')).not.toContain('\u202e');
    } finally {
      await page.close();
    }
  });

  it('the bundle and trust file audit-ui serves', async () => {
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: false, trust: trustPath });
    const page = await browser.newPage();
    try {
      await page.goto(server.url);
      await page.waitForSelector('body[data-state="ok"]', { timeout: 90_000 });
      expect(await picked(page)).toBe(
        `bundle ${QUOTED}, served by handoff-ledger audit-ui; trust file "keys; x.json", served by audit-ui; no earlier checkpoint chosen (optional); no witness keys chosen (optional)`,
      );
    } finally {
      await page.close();
      await server.close();
    }
  });
});

const escapeRe = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
