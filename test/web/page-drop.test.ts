/**
 * Dropping a bundle folder and the files beside it on the page. Drops are real drops: Chromium's
 * DevTools protocol drags the files from disk onto the drop zone, so the page's own drop handler reads
 * them, on a page opened from disk (getAsFileSystemHandle) and on one served over http with only the
 * entries API, as in browsers without the former.
 */
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { cliVerify, writeCheckpointFiles, type CheckpointFiles } from '../support/checkpoint-bundle.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { describeVerdict } from '../../manifests/audit/report-text.js';
import {
  activeId,
  codesAt,
  dropFiles,
  expectSameAsCli,
  PAGE_URL as PAGE,
  pageFindings,
  picked,
} from '../support/page-checks.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let base: string;
let f: CheckpointFiles;
/** A file the page takes as nothing. */
let stray: string;

beforeAll(async () => {
  ensurePageBuilt();
  // Not tempDir(): that is emptied after each test, and these files serve the whole file.
  base = mkdtempSync(join(tmpdir(), 'hl-page-drop-'));
  chmodSync(base, 0o700);
  f = await writeCheckpointFiles(base);
  stray = join(base, 'notes.md');
  writeFileSync(stray, 'not for the page');
  ({ browser, close: closeBrowser } = await launchChromium());
}, 180_000);

afterAll(async () => {
  await closeBrowser?.();
  if (base) rmSync(base, { recursive: true, force: true });
});

const cli = (since?: string) => cliVerify(f.bundle, f.trust, since);

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
          /^bundle "audit-2026-11": \d[\d,]* bytes of manifests, \d+ blobs, cut at checkpoint\.note; trust file "trust\.json"; earlier checkpoint "forked\.note"; no witness keys chosen \(optional\)$/,
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
        .toMatch(/^bundle "audit-2026-11": .*; trust file "trust\.json";/);
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
      await expect.poll(() => picked(page), { timeout: 30_000 }).toContain('trust file "trust.json"');
      // One drop, one file the page takes and one it does not: the refusal stays on screen.
      await dropFiles(page, [stray, f.earlier]);
      await expect
        .poll(() => picked(page), { timeout: 30_000 })
        .toBe(
          'no bundle chosen; trust file "trust.json"; earlier checkpoint "earlier.note"; no witness keys chosen (optional)',
        );
      expect(await page.textContent('#error')).toBe(
        '"notes.md" is not a folder, nor a trust file (.json) or earlier checkpoint (.note) or witness keys (.txt, .vkeys): use the pickers to choose it',
      );
      expect(await page.isVisible('#error')).toBe(true);
      expect(await page.isEnabled('#verify')).toBe(false);

      // A name with a backslash and a right-to-left override is quoted as the CLI quotes a value, once: the override
      // escaped inside the quotes, the backslash escaped once (not doubled by a second escaping of the whole line).
      const odd = join(base, 'a\\b\u202egpj.md');
      writeFileSync(odd, 'not for the page');
      await dropFiles(page, [odd]);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 30_000 })
        .toBe(
          '"a\\\\b\\u202egpj.md" is not a folder, nor a trust file (.json) or earlier checkpoint (.note) or witness keys (.txt, .vkeys): use the pickers to choose it',
        );
    } finally {
      await page.close();
    }
  });

  it.each(['blobs/blake3', 'blobs'])(
    'checks every blob of a dropped folder whose blobs directory is empty (%s made), as the CLI does',
    async (made) => {
      // Dropped folders are walked directory by directory, so an empty blobs/ is seen (the folder picker lists files only).
      // A session export: its bundle.json counts no blobs, so only the empty directory says it carries them; `verify`
      // took a blobs/ without blobs/blake3/ for none (no finding) where the page reported every blob BLOB_MISSING.
      const dir = join(base, `empty-${made.replace('/', '-')}`, 'audit-s1');
      cpSync(f.sessionBundle, dir, { recursive: true });
      mkdirSync(join(dir, made), { recursive: true });
      const expected = (await cliVerify(dir, f.trust)).report!;
      expect(expected.findings.map((x) => x.code)).toContain('BLOB_MISSING');
      const page = await browser.newPage();
      try {
        await page.goto(PAGE);
        await dropFiles(page, [dir, f.trust]);
        await expect
          .poll(() => picked(page), { timeout: 30_000 })
          .toMatch(/^bundle "audit-s1": .*, 0 blobs.*; trust file/);
        await page.click('#verify');
        // Codes, lines and verdict: these findings' lines are drawn, so each carries a "show manifest" button.
        await page.waitForSelector('body[data-state="failed"]', { timeout: 90_000 });
        expect(await pageFindings(page)).toEqual(codesAt(expected));
        expect(await page.textContent('#verdict')).toBe(`✗ ${describeVerdict(expected)}`);
      } finally {
        await page.close();
      }
    },
  );

  it.each(['getAsFileSystemHandle', 'entries API'])(
    'reads of a dropped folder only what verify reads (%s): files beside the bundle, however named or deep, refuse nothing',
    async (api) => {
      // A name that is not UTF-8 is one the browser lists but cannot open again: read, it failed the whole drop
      // ("cannot read the dropped folder"), where `verify` never opens it. At the top, deep in a directory of notes,
      // and among the blobs under a name no manifest can give.
      const dir = join(base, `beside-${api.replace(/ /g, '-')}`, 'audit-2026-11');
      cpSync(f.bundle, dir, { recursive: true });
      const deep = join(dir, 'notes', 'a', 'b', 'c');
      mkdirSync(deep, { recursive: true });
      const unreadable = Buffer.from([0x6e, 0x6f, 0x74, 0x65, 0xff]);
      for (const where of [dir, deep, join(dir, 'blobs', 'blake3')])
        writeFileSync(Buffer.concat([Buffer.from(`${where}/`), unreadable]), 'not part of the bundle');
      // `verify` reads none of them: the bundle verifies.
      const expected = await cliVerify(dir, f.trust);
      expect(expected.report?.ok).toBe(true);
      // The entries API cannot read a dropped folder on a file:// page in Chromium: served, as in browsers without the other.
      const server = api === 'entries API' ? await startAuditServer({ page: auditorPagePath()! }) : undefined;
      const page = await browser.newPage();
      const seen = watchPage(page);
      try {
        if (server) {
          await page.addInitScript(() => {
            delete (globalThis as any).DataTransferItem.prototype.getAsFileSystemHandle;
          });
          await page.goto(server.url);
        } else await page.goto(PAGE);
        await dropFiles(page, [dir, f.trust]);
        await expect
          .poll(() => picked(page), { timeout: 30_000 })
          .toMatch(
            /^bundle "audit-2026-11": \d[\d,]* bytes of manifests, 3 blobs, cut at checkpoint\.note; trust file "trust\.json";/,
          );
        expect(await page.isHidden('#error')).toBe(true);
        await page.click('#verify');
        await expectSameAsCli(page, expected.report!);
        expect(seen.errors).toEqual([]);
      } finally {
        await page.close();
        await server?.close();
      }
    },
  );

  it('refuses two bundle folders in one drop, and keeps the bundle chosen before', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await dropFiles(page, [f.bundle]);
      await expect.poll(() => picked(page), { timeout: 30_000 }).toMatch(/^bundle "audit-2026-11": /);
      await dropFiles(page, [f.bundle, f.sessionBundle]);
      await expect.poll(() => page.textContent('#error'), { timeout: 30_000 }).toBe('drop one bundle folder');
      expect(await page.isVisible('#error')).toBe(true);
      expect(await picked(page)).toMatch(/^bundle "audit-2026-11": /);
    } finally {
      await page.close();
    }
  });

  it('refuses two earlier checkpoints or two witness keys files in one drop, naming the kind, and keeps the one chosen before', async () => {
    const keys = ['w1.txt', 'w2.txt', 'w3.vkeys'].map((name) => join(base, name));
    for (const path of keys) writeFileSync(path, '# pinned witnesses\n');
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      // The pickers of these kinds take one file: the browser cannot give them two.
      for (const id of ['#since-input', '#witness-keys-input']) {
        expect(await page.$eval(id, (input) => (input as unknown as { multiple: boolean }).multiple), id).toBe(false);
        await expect(page.setInputFiles(id, [f.earlier, f.forked]), id).rejects.toThrow(/single file/);
      }
      await dropFiles(page, [f.bundle, f.trust, f.earlier, keys[0]!]);
      const chosen = /; earlier checkpoint "earlier\.note"; witness keys "w1\.txt"$/;
      await expect.poll(() => picked(page), { timeout: 30_000 }).toMatch(chosen);
      await dropFiles(page, [f.forked, f.foreign]);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 30_000 })
        .toBe('drop one earlier checkpoint file, not 2: "forked.note", "foreign.note"');
      expect(await page.isVisible('#error')).toBe(true);
      expect(await picked(page)).toMatch(chosen);
      // Witness keys the same, and a trust file dropped with them is still taken.
      await dropFiles(page, [keys[1]!, keys[2]!, f.trust]);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 30_000 })
        .toBe('drop one witness keys file, not 2: "w2.txt", "w3.vkeys"');
      expect(await picked(page)).toMatch(chosen);
      expect(await page.isEnabled('#verify')).toBe(true);
    } finally {
      await page.close();
    }
  });

  it('moves focus to Verify when a drop takes down the result it was in, and leaves it in a field being typed in', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await dropFiles(page, [f.bundle, f.trust]);
      await expect.poll(() => page.isEnabled('#verify'), { timeout: 30_000 }).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="failed"], body[data-state="ok"]', { timeout: 90_000 });
      // Focus is in the result: its verdict heading, then a filter of the history typed in.
      await expect.poll(() => activeId(page), { timeout: 10_000 }).toBe('verdict');
      await page.focus('#filter-session');
      await page.keyboard.type('s');
      // A mouse drop takes the result down at once (before its folder is walked): focus goes to Verify, not the body.
      await dropFiles(page, [f.bundle, f.trust]);
      await expect.poll(() => page.isHidden('#result'), { timeout: 10_000 }).toBe(true);
      await expect.poll(() => activeId(page), { timeout: 10_000 }).toBe('verify');
      await expect.poll(() => page.isEnabled('#verify'), { timeout: 30_000 }).toBe(true);
      expect(await activeId(page)).toBe('verify');
      // Typing in a field outside the result: a drop leaves focus there, and the keys typed after it land in it.
      await page.focus('#principal-input');
      await page.keyboard.type('ali');
      await dropFiles(page, [f.earlier]);
      await expect.poll(() => picked(page), { timeout: 30_000 }).toContain('; earlier checkpoint "earlier.note";');
      await page.keyboard.type('ce');
      expect(await activeId(page)).toBe('principal-input');
      expect(await page.inputValue('#principal-input')).toBe('alice');
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
