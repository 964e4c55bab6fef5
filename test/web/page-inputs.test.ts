/**
 * What the auditor gives the page beside the bundle: the checkpoint the bundle was cut at is checked
 * (step 9), an earlier checkpoint is held to it as `verify --since` does, and oversized files are refused
 * as the CLI refuses them. Bundles come from real ledgers; the CLI's report on the same files is the
 * expected result.
 */
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { cliVerify, ORIGIN, writeCheckpointFiles, type CheckpointFiles } from '../support/checkpoint-bundle.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { codesAt, expectSameAsCli, PAGE_URL as PAGE, picked } from '../support/page-checks.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let base: string;
let f: CheckpointFiles;

beforeAll(async () => {
  ensurePageBuilt();
  // Not tempDir(): that is emptied after each test, and these files serve the whole file.
  base = mkdtempSync(join(tmpdir(), 'hl-page-inputs-'));
  chmodSync(base, 0o700);
  f = await writeCheckpointFiles(base);
  ({ browser, close: closeBrowser } = await launchChromium());
}, 180_000);

afterAll(async () => {
  await closeBrowser?.();
  if (base) rmSync(base, { recursive: true, force: true });
});

const cli = (since?: string) => cliVerify(f.bundle, f.trust, since);

async function pick(page: Page, since: string): Promise<void> {
  await page.goto(PAGE);
  await page.setInputFiles('#bundle-input', f.bundle);
  await page.setInputFiles('#trust-input', f.trust);
  await page.setInputFiles('#since-input', since);
}

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
    const expected = (await cliVerify(dir, f.trust)).report!;
    expect(codesAt(expected)).toEqual(['TREE_SIZE_MISMATCH@-', 'SESSION_HEAD_MISMATCH@-']);
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

describe("the session's completeness proof (step 10)", { timeout: 180_000 }, () => {
  /** `export --session s1` without its newest manifest and that manifest's inclusion proof, heads.jsonl kept. */
  function tailCutCopy(): string {
    const dir = join(base, `tail-cut-${Date.now()}`);
    cpSync(f.sessionBundle, dir, { recursive: true });
    for (const name of ['manifests.jsonl', 'proofs.jsonl']) {
      const lines = readFileSync(join(dir, name), 'utf8').split('\n').slice(0, -2);
      writeFileSync(join(dir, name), lines.map((l) => `${l}\n`).join(''));
    }
    const header = JSON.parse(readFileSync(join(dir, 'bundle.json'), 'utf8'));
    header.counts.manifests -= 1;
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify(header));
    return dir;
  }

  it('reads heads.jsonl from a picked folder and from audit-ui, and reports a missing tail as the CLI does', async () => {
    const dir = tailCutCopy();
    const expected = (await cliVerify(dir, f.trust)).report!;
    expect(codesAt(expected)).toEqual(['SESSION_TAIL_MISSING@-']);
    expect(expected.checked.completeness).toEqual({ checked: true, sessions: 1 });
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: false, trust: f.trust });
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', dir);
      await page.setInputFiles('#trust-input', f.trust);
      await page.click('#verify');
      await expectSameAsCli(page, expected);

      await page.goto(server.url);
      await expectSameAsCli(page, expected);
      expect(seen.requests).toContain(`${server.url}bundle/heads.jsonl`);
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

      const huge = join(base, 'huge.note');
      writeFileSync(huge, 'x'.repeat(64 * 1024 + 1));
      expect((await cli(huge)).stderr).toContain(`USAGE: --since ${huge}: over 64 KiB`);
      await page.setInputFiles('#since-input', huge);
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

describe('the trust file', { timeout: 180_000 }, () => {
  it('refuses a trust file over 16 MiB before reading it, with the CLI’s TRUST_INVALID', async () => {
    const big = join(base, 'big-trust.json');
    writeFileSync(big, ' '.repeat(16 * 1024 * 1024 + 1));
    const refused = await cliVerify(f.bundle, big);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(`handoff-ledger: TRUST_INVALID: trust file ${big} is over 16777216 bytes\n`);
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
