/**
 * The page at scale: a 100,000-manifest bundle verifies in the browser within twice the time the CLI
 * takes on the same machine as operators run it (`verify`'s default: a thread per core; the page spreads
 * the per-line steps over a pool of workers, one per core), and the page keeps answering while it does
 * (the longest main-thread stall is measured between timer ticks). The CLI in one thread (`--workers 0`) is
 * timed too and its ratio printed. The CLI and the page take turns (CLI, page, CLI, page, CLI); each page round
 * is compared with the CLI runs on either side of it, and the better round counts: on a shared, loaded machine
 * a burst of someone else's work then slows one round, not the verdict.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { launchChromium, watchPage } from '../support/browser.js';
import { buildBundle, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { tempDir } from '../support/tmp.js';
import { ensurePageBuilt } from '../support/page-build.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGE = pathToFileURL(join(ROOT, 'dist/web/index.html')).href;
const CLI = join(ROOT, 'dist/src/cli/main.js');
const MANIFESTS = 100_000;

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;

beforeAll(async () => {
  ensurePageBuilt();
  // `npm test` builds first (pretest); a targeted run may not have.
  if (!existsSync(CLI)) execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe' });
  ({ browser, close: closeBrowser } = await launchChromium());
}, 300_000);

afterAll(async () => closeBrowser?.());

describe('the auditor page at scale', () => {
  it('verifies 100,000 manifests within twice the time of the CLI with a thread per core, without stalling the page', async () => {
    const b = await buildBundle({
      chains: Array.from({ length: 1000 }, (_, i) => ({ session: `s-${i}`, principal: `p${i % 13}`, count: 100 })),
    });
    expect(b.lines).toHaveLength(MANIFESTS);
    const root = tempDir();
    const dir = join(root, 'big');
    await writeBundleDir(dir, b.lines);
    await writeTrustFile(join(root, 'trust.json'), b.trust);

    const timeCli = (workers: string): number => {
      const started = performance.now();
      const cli = spawnSync(
        process.execPath,
        [CLI, 'verify', dir, '--trust', join(root, 'trust.json'), '--workers', workers],
        { encoding: 'utf8' },
      );
      const ms = performance.now() - started;
      expect(cli.stdout).toContain(`verdict: OK — ${MANIFESTS} manifests in 1000 chains verified`);
      return ms;
    };

    const timePage = async () => {
      const page = await browser.newPage();
      const seen = watchPage(page);
      try {
        await page.goto(PAGE);
        await page.setInputFiles('#bundle-input', dir);
        await page.setInputFiles('#trust-input', join(root, 'trust.json'));
        await page.evaluate(() => {
          const w = globalThis as unknown as { ticks: number[] };
          w.ticks = [];
          setInterval(() => w.ticks.push(performance.now()), 20);
        });
        const pageStarted = performance.now();
        await page.click('#verify');
        await page.waitForSelector('body[data-state="ok"]', { timeout: 600_000 });
        const pageMs = performance.now() - pageStarted;
        const m = await page.evaluate(() => {
          const at = (name: string) =>
            (performance as any).getEntriesByName(`handoff-ledger:${name}`)[0].startTime as number;
          const [start, verified, rendered] = [at('verify'), at('verified'), at('rendered')];
          const ticks = (globalThis as unknown as { ticks: number[] }).ticks.filter((t) => t >= start && t <= verified);
          let stall = 0;
          for (let i = 1; i < ticks.length; i++) stall = Math.max(stall, ticks[i]! - ticks[i - 1]!);
          const cores = (globalThis as any).navigator.hardwareConcurrency as number;
          return { verifyMs: verified - start, renderMs: rendered - verified, stall, ticks: ticks.length, cores };
        });
        expect(await page.textContent('#verdict')).toBe(
          `✓ verdict: OK — ${MANIFESTS} manifests in 1000 chains verified`,
        );
        // The bundle is far above the pool's floor: with two cores or more the page verifies on one worker a core.
        const pool = m.cores >= 2 ? `on ${Math.min(m.cores, 256)} workers` : 'in one worker';
        expect(await page.textContent('#progress-text')).toMatch(
          new RegExp(`^verified in .* s \\(signatures: \\w+, ${pool}\\)$`),
        );
        expect(m.ticks).toBeGreaterThan(10);
        expect(seen.errors).toEqual([]);
        return { ...m, pageMs, pool };
      } finally {
        await page.close();
      }
    };

    // CLI, page, CLI, page, CLI: each page round is held to the mean of the CLI runs just before and after it,
    // so load that rises or falls during the test weighs on both sides of the ratio alike.
    const cliAuto = [timeCli('auto')];
    const pages: Array<Awaited<ReturnType<typeof timePage>>> = [];
    for (let round = 0; round < 2; round++) {
      pages.push(await timePage());
      cliAuto.push(timeCli('auto'));
    }
    const cliOne = timeCli('0');
    const ratios = pages.map((p, i) => p.verifyMs / ((cliAuto[i]! + cliAuto[i + 1]!) / 2));
    const bestPage = Math.min(...pages.map((p) => p.verifyMs));
    const ms = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(' / ');
    console.log(
      `scale: CLI ${ms(cliAuto)} ms with a thread per core, ${cliOne.toFixed(0)} ms in one thread; ` +
        `page verify ${ms(pages.map((p) => p.verifyMs))} ms ${pages[0]!.pool} ` +
        `(end to end ${ms(pages.map((p) => p.pageMs))} ms, render ${ms(pages.map((p) => p.renderMs))} ms), ` +
        `longest main-thread stall while verifying ${ms(pages.map((p) => p.stall))} ms; ` +
        `page / CLI default by round ${ratios.map((r) => `${r.toFixed(2)}×`).join(' / ')}, ` +
        `best page / best CLI ${(bestPage / Math.min(...cliAuto)).toFixed(2)}× the default, ` +
        `${(bestPage / cliOne).toFixed(2)}× one thread`,
    );
    expect(Math.min(...ratios)).toBeLessThan(2);
    // The page's thread does no verifying: its timer keeps ticking. The pool keeps every core busy, so on a
    // loaded machine one round may see the thread kept off a core for a while; the better round must not.
    expect(Math.min(...pages.map((p) => p.stall))).toBeLessThan(500);
  }, 900_000);
});
