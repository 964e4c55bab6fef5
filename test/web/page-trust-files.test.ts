/**
 * Several trust files on the standalone page, as `verify --trust a.json --trust b.json` takes them: a store two hosts
 * share holds manifests each host signed with its own key, and each host's `keys export` is a file of its own. The
 * page takes them all (picked together or dropped together) and merges them as the CLI does (mergeTrust: the
 * narrowest window of a key listed twice; one key id with two public keys is TRUST_INVALID naming the files). The
 * CLI's report on the same files is the expected result.
 */
import { generateJwk } from '../../src/keys/local-signer.js';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { mergeTrust, parseTrustStore, trustDigest, type TrustStore } from '../../manifests/format/trust.js';
import { describeSigners, describeTrust } from '../../manifests/audit/report-text.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { cliVerify } from '../support/checkpoint-bundle.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { dropFiles, expectSameAsCli, exportedReport, PAGE_URL as PAGE, picked } from '../support/page-checks.js';
import { sampleSummary } from '../support/tmp.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let base: string;
let bundle: string;
/** h1's keys only, h2's keys only (each with its checkpoint keys), and h2's key id listed with another public key. */
let trustA: string;
let trustB: string;
let forged: string;

beforeAll(async () => {
  ensurePageBuilt();
  base = mkdtempSync(join(tmpdir(), 'hl-page-trust-files-'));
  chmodSync(base, 0o700);
  const root = join(base, 'store');
  // Two hosts of one store, each publishing with its own key.
  for (const [host, session] of [
    ['h1', 's1'],
    ['h2', 's2'],
    ['h1', 's1'],
  ] as const) {
    const ledger = await openLedger({ root, host, origin: 'example.com/shared' });
    try {
      await ledger.publish({ principal: 'alice', session, run: 'r' }, sampleSummary(session));
    } finally {
      await ledger.close();
    }
  }
  const ledger = await openLedger({ root, host: 'h1', origin: 'example.com/shared' });
  let trust: TrustStore;
  try {
    bundle = join(base, 'audit');
    await exportBundle(ledger, { out: bundle, withBlobs: true });
    trust = ledger.trustStore();
  } finally {
    await ledger.close();
  }
  const only = (host: string): TrustStore => ({
    version: 1,
    keys: trust.keys.filter((k) => k.host === host),
    checkpointKeys: (trust.checkpointKeys ?? []).filter((k) => k.host === host),
  });
  trustA = join(base, 'a.json');
  trustB = join(base, 'b.json');
  forged = join(base, 'forged.json');
  writeFileSync(trustA, JSON.stringify(only('h1')));
  writeFileSync(trustB, JSON.stringify(only('h2')));
  const other = generateJwk().x;
  const b = only('h2');
  writeFileSync(forged, JSON.stringify({ ...b, keys: b.keys.map((k) => ({ ...k, publicKey: other })) }));
  ({ browser, close: closeBrowser } = await launchChromium());
}, 180_000);

const storeOf = (file: string) => parseTrustStore(readFileSync(file, 'utf8'));

afterAll(async () => {
  await closeBrowser?.();
  if (base) rmSync(base, { recursive: true, force: true });
});

describe("a shared store's hosts' trust files, one per host", { timeout: 180_000 }, () => {
  it('says "trust files" where it tells the auditor what to give: the heading, the drop zone, the labels, the README', async () => {
    /** "trust file" but not "trust files". */
    const singular = /\btrust file\b(?!s)/i;
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      expect(await page.textContent('#inputs-title')).toBe('Bundle, trust files, earlier checkpoint, witnesses');
      // What the inputs say of themselves (the picked line and errors are the page's answers: "no trust file chosen").
      const help = await page.$$eval('#inputs-title, #drop, .pickers label', (els) =>
        els.map((e) => e.textContent!.replace(/\s+/g, ' ').trim()),
      );
      expect(help.join('\n')).toMatch(/trust files/i);
      for (const text of help) expect(text).not.toMatch(singular);
    } finally {
      await page.close();
    }
    // The README's section on the page, as the auditor reads it first.
    const readme = readFileSync(join(resolve(import.meta.dirname, '../..'), 'README.md'), 'utf8');
    const section = readme.split("\n### The auditor's page\n")[1]!.split('\n## ')[0]!;
    expect(section).toMatch(/pick or drop the bundle folder, its\s+trust files \(one, or/);
    expect(section).not.toMatch(singular);
  });

  it('the CLI needs both: one alone leaves the other host untrusted', async () => {
    const one = await cliVerify(bundle, trustA);
    expect(one.report!.findings.map((x) => x.code)).toContain('KEY_UNTRUSTED');
    const both = await cliVerify(bundle, trustA, undefined, ['--trust', trustB]);
    expect(both.code).toBe(0);
    expect(both.report!.ok).toBe(true);
  });

  it('takes both picked together and verifies as verify --trust a.json --trust b.json', async () => {
    const expected = await cliVerify(bundle, trustA, undefined, ['--trust', trustB]);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', [trustA, trustB]);
      // The page reads the picked files asynchronously; the line names them once both are read.
      await expect.poll(() => picked(page), { timeout: 30_000 }).toContain('; trust files "a.json", "b.json";');
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("names the trust it verified under as verify does: one file's store, two files' merge (checked.trust)", async () => {
    for (const files of [[trustA], [trustA, trustB]]) {
      const expected = await cliVerify(
        bundle,
        files[0]!,
        undefined,
        files.slice(1).flatMap((f) => ['--trust', f]),
      );
      const store = mergeTrust(...files.map(storeOf));
      expect(expected.report!.checked.trust).toEqual({
        digest: trustDigest(store),
        keys: store.keys.length,
        checkpointKeys: store.checkpointKeys?.length ?? 0,
      });
      const page = await browser.newPage();
      try {
        await page.goto(PAGE);
        await page.setInputFiles('#bundle-input', bundle);
        await page.setInputFiles('#trust-input', files);
        await expect
          .poll(() => picked(page), { timeout: 30_000 })
          .toContain(files.length === 1 ? '; trust file "a.json";' : '; trust files "a.json", "b.json";');
        await page.click('#verify');
        await expectSameAsCli(page, expected.report!);
        expect(await page.textContent('#trust-info')).toBe(describeTrust(expected.report!));
        // Who signed, as verify's signers line says it; no witness keys given, no line for them.
        expect(expected.report!.checked.signers.manifests.length).toBeGreaterThan(0);
        expect(await page.textContent('#signers-info')).toBe(describeSigners(expected.report!));
        expect(await page.isHidden('#witness-keys-info')).toBe(true);
        const exported = await exportedReport(page);
        expect(exported.checked.trust).toEqual(expected.report!.checked.trust);
        expect(exported.checked.signers).toEqual(expected.report!.checked.signers);
        expect('witnesses' in exported.checked).toBe(false);
      } finally {
        await page.close();
      }
    }
    // The files in the other order: their keys merged in another order, the same store and the same digest.
    const both = mergeTrust(storeOf(trustA), storeOf(trustB));
    const swapped = mergeTrust(storeOf(trustB), storeOf(trustA));
    expect(swapped.keys.map((k) => k.host)).not.toEqual(both.keys.map((k) => k.host));
    expect((await cliVerify(bundle, trustB, undefined, ['--trust', trustA])).report!.checked.trust).toEqual({
      digest: trustDigest(both),
      keys: both.keys.length,
      checkpointKeys: both.checkpointKeys?.length ?? 0,
    });
    // The merge's digest is neither file's.
    expect(trustDigest(mergeTrust(storeOf(trustA), storeOf(trustB)))).not.toBe(trustDigest(storeOf(trustA)));
    expect(trustDigest(mergeTrust(storeOf(trustA), storeOf(trustB)))).not.toBe(trustDigest(storeOf(trustB)));
  });

  it('takes both dropped together with the bundle folder', async () => {
    const expected = await cliVerify(bundle, trustA, undefined, ['--trust', trustB]);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await dropFiles(page, [bundle, trustA, trustB]);
      await expect.poll(() => picked(page), { timeout: 30_000 }).toContain('; trust files "a.json", "b.json";');
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
    } finally {
      await page.close();
    }
  });

  it('refuses one key id listed with two public keys, naming the files, as verify does (TRUST_INVALID)', async () => {
    const refused = await cliVerify(bundle, trustA, undefined, ['--trust', trustB, '--trust', forged]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /TRUST_INVALID: trust files ".*a\.json", ".*b\.json", ".*forged\.json": key .* is listed with two public keys/,
    );
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', [trustA, trustB, forged]);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="error"]', { timeout: 90_000 });
      const keyId = (JSON.parse(readFileSync(trustB, 'utf8')) as TrustStore).keys[0]!.keyId;
      expect(await page.textContent('#error')).toBe(
        `TRUST_INVALID: trust files "a.json", "b.json", "forged.json": key "${keyId}" of host h2 is listed with two public keys`,
      );
    } finally {
      await page.close();
    }
  });
});
