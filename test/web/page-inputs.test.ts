/**
 * What the auditor gives the page beside the bundle: the checkpoint the bundle was cut at is checked
 * (step 9), an earlier checkpoint is held to it as `verify --since` does, pinned witness keys and a quorum
 * as `verify --witness-keys --quorum` (step 9d), and oversized files are refused as the CLI refuses them. Bundles come from real ledgers; the CLI's report on the same files is the
 * expected result.
 */
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { auditorPagePath } from '../../src/ops/auditor-page.js';
import { startAuditServer } from '../../src/ops/audit-server.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { describeSigners, describeWitnesses, describeWitnessKeys } from '../../manifests/audit/report-text.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import { captureIo } from '../support/capture-io.js';
import {
  cliVerify,
  HOSTILE_WITNESS,
  ORIGIN,
  writeCheckpointFiles,
  writeWitnessFiles,
  type CheckpointFiles,
  type WitnessFiles,
} from '../support/checkpoint-bundle.js';
import { ensurePageBuilt } from '../support/page-build.js';
import {
  activeId,
  chooseByKeyboard,
  codesAt,
  dropFiles,
  expectSameAsCli,
  exportedReport,
  PAGE_URL as PAGE,
  picked,
  tabTo,
} from '../support/page-checks.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let base: string;
let f: CheckpointFiles;
let w: WitnessFiles;

beforeAll(async () => {
  ensurePageBuilt();
  // Not tempDir(): that is emptied after each test, and these files serve the whole file.
  base = mkdtempSync(join(tmpdir(), 'hl-page-inputs-'));
  chmodSync(base, 0o700);
  f = await writeCheckpointFiles(base);
  w = await writeWitnessFiles(base, f);
  ({ browser, close: closeBrowser } = await launchChromium());
}, 180_000);

afterAll(async () => {
  await closeBrowser?.();
  if (base) rmSync(base, { recursive: true, force: true });
});

const cli = (since?: string) => cliVerify(f.bundle, f.trust, since);

/** Opens the page and picks a bundle folder and the pinned trust file. */
async function pickBundle(page: Page, dir: string): Promise<void> {
  await page.goto(PAGE);
  await page.setInputFiles('#bundle-input', dir);
  await page.setInputFiles('#trust-input', f.trust);
}

async function pick(page: Page, since: string): Promise<void> {
  await pickBundle(page, f.bundle);
  await page.setInputFiles('#since-input', since);
  // The page reads it asynchronously: Verify, enabled once the trust file is read, would verify without it.
  await expect.poll(() => picked(page), { timeout: 10_000 }).toContain(`; earlier checkpoint "${basename(since)}";`);
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
    // The blob only the removed manifest named is counted no more either (the unsigned header rewritten to match).
    header.counts.blobs -= 1;
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
      await pickBundle(page, dir);
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
    // The auditor asked for a filtered export: verify --expect filtered, the page's Expect (chosen, or ?expect=).
    const expected = (await cliVerify(dir, f.trust, undefined, ['--expect', 'filtered'])).report!;
    expect(codesAt(expected)).toEqual(['SESSION_TAIL_MISSING@-']);
    expect(expected.checked.completeness).toEqual({ checked: true, sessions: 1 });
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: false, trust: f.trust });
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await pickBundle(page, dir);
      await page.selectOption('#expect-input', 'filtered');
      await page.click('#verify');
      await expectSameAsCli(page, expected);

      await page.goto(`${server.url}?expect=filtered`);
      await expectSameAsCli(page, expected);
      expect(seen.requests).toContain(`${server.url}bundle/heads.jsonl`);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
      await server.close();
    }
  });

  it('takes a heads.jsonl line whose session is not an id as malformed, picked or served, as the CLI does', async () => {
    // A session name writing a finding and a verdict of its own on the lines after it (a reviewer's case).
    const dir = join(base, `forged-heads-${Date.now()}`);
    cpSync(f.sessionBundle, dir, { recursive: true });
    const session = `zz\n  SESSION_HEAD_INVALID: (none; the lines below are the auditor's notes)\n\nverdict: OK — all heads proven`;
    const heads = readFileSync(join(dir, 'heads.jsonl'), 'utf8');
    writeFileSync(join(dir, 'heads.jsonl'), `${heads}${JSON.stringify({ session, head: null, proof: {} })}\n`);
    const expected = (await cliVerify(dir, f.trust, undefined, ['--session', 's1'])).report!;
    expect(expected.findings.map((x) => `${x.code}: ${x.message}`)).toEqual([
      'SESSION_HEAD_INVALID: heads.jsonl line 2 is not a well-formed proof',
    ]);
    const server = await startAuditServer({
      page: auditorPagePath()!,
      bundle: dir,
      hasBlobs: false,
      trust: f.trust,
      scope: { session: 's1' },
    });
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await pickBundle(page, dir);
      await page.fill('#session-input', 's1');
      await page.click('#verify');
      await expectSameAsCli(page, expected);

      await page.goto(server.url);
      await expectSameAsCli(page, expected);
      expect(await page.textContent('#findings')).not.toContain('verdict: OK');
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
      await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('earlier checkpoint "earlier.note"');
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      const info = await page.textContent('#checkpoint-info');
      const c = expected.report!.checkpoint!;
      expect(info).toContain(`checkpoint "${ORIGIN}" size 5 root ${c.root}, signed by "${c.signedBy[0]}"`);
      // The CLI's line, word for word but the file's name: the earlier checkpoint's size says which one was held.
      expect(info!.split('\n')[1]).toBe(
        `earlier checkpoint "earlier.note": extended by this bundle's checkpoint (size 2)`,
      );
      const human = captureIo();
      expect(await verifyCli([f.bundle, '--trust', f.trust, '--since', f.earlier, '--workers', '0'], human.io)).toBe(0);
      expect(human.stdout()).toContain(
        `\nearlier checkpoint "${f.earlier}": extended by this bundle's checkpoint (size 2)\n`,
      );
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('keeps Verify disabled while a file chosen is still being read, so no run goes without it', async () => {
    const expected = await cli(f.earlier);
    const page = await browser.newPage();
    // Reads of chosen files wait while the test holds them (a slow disk, a large file): window.holdReads / releaseReads.
    await page.addInitScript(() => {
      const read = Blob.prototype.arrayBuffer;
      const w = globalThis as unknown as { holdReads: boolean; releaseReads: () => void };
      let waiting: Array<() => void> = [];
      w.holdReads = false;
      w.releaseReads = () => {
        w.holdReads = false;
        for (const go of waiting) go();
        waiting = [];
      };
      Blob.prototype.arrayBuffer = function (this: Blob) {
        if (!w.holdReads) return read.call(this);
        return new Promise<void>((go) => waiting.push(go)).then(() => read.call(this));
      };
    });
    try {
      await pickBundle(page, f.bundle);
      await expect.poll(() => page.isEnabled('#verify'), { timeout: 30_000 }).toBe(true);
      await page.evaluate(() => {
        (globalThis as unknown as { holdReads: boolean }).holdReads = true;
      });
      await page.setInputFiles('#since-input', f.earlier);
      // Pressed now, Verify would check the bundle without the earlier checkpoint just chosen.
      await expect.poll(() => page.isDisabled('#verify'), { timeout: 5_000 }).toBe(true);
      expect(await picked(page)).not.toContain('earlier.note');
      await page.evaluate(() => (globalThis as unknown as { releaseReads: () => void }).releaseReads());
      await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('; earlier checkpoint "earlier.note";');
      expect(await page.isEnabled('#verify')).toBe(true);
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      expect((await page.textContent('#checkpoint-info'))!.split('\n')[1]).toBe(
        `earlier checkpoint "earlier.note": extended by this bundle's checkpoint (size 2)`,
      );
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
      await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('earlier checkpoint "forked.note"');
      await page.click('#verify');
      await expectSameAsCli(page, expected.report!);
      expect(await page.textContent('#checkpoint-info')).toContain(
        'earlier checkpoint "forked.note": not shown to be extended (CONSISTENCY_INVALID)',
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
      expect((await cli(huge)).stderr).toContain(`USAGE: --since "${huge}": over 64 KiB`);
      await page.setInputFiles('#since-input', huge);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 10_000 })
        .toBe('USAGE: --since "huge.note": over 64 KiB');
      // The refused file replaced nothing: the one chosen before is still the one that would be used.
      expect(await picked(page)).toContain('earlier checkpoint "foreign.note"');
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
    expect(refused.stderr).toBe(`handoff-ledger: TRUST_INVALID: trust file "${big}" is over 16777216 bytes\n`);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#trust-input', big);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 30_000 })
        .toBe('TRUST_INVALID: trust file "big-trust.json" is over 16777216 bytes');
      expect(await picked(page)).toContain('no trust file chosen');
    } finally {
      await page.close();
    }
  });
});

describe('the witness keys picker and quorum (step 9d)', { timeout: 180_000 }, () => {
  const withWitnesses = (dir: string, quorum: string) =>
    cliVerify(dir, f.trust, undefined, ['--witness-keys', w.keys, '--quorum', quorum]);

  /** Picks the bundle, trust file and witness keys, types the quorum (if any) and verifies. */
  async function verifyWith(page: Page, dir: string, quorum: string | undefined): Promise<void> {
    await pickBundle(page, dir);
    await page.setInputFiles('#witness-keys-input', w.keys);
    if (quorum !== undefined) await page.getByLabel(/Witness quorum/).fill(quorum);
    await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('witness keys "witnesses.txt"');
    await page.click('#verify');
  }

  it('passes a checkpoint with a quorum of pinned cosignatures and names who signed and when, as the CLI does', async () => {
    const expected = await withWitnesses(w.cosigned, '2');
    expect(expected.code).toBe(0);
    const summary = expected.report!.checkpoint!.witnesses!;
    expect(summary.signedBy.map((s) => s.witness.replace(/\+[0-9a-f]{8}$/, ''))).toEqual([
      'witness.example/w1',
      HOSTILE_WITNESS,
    ]);
    // The CLI's human report carries the same line the page shows.
    const human = captureIo();
    await verifyCli([w.cosigned, '--trust', f.trust, '--witness-keys', w.keys, '--quorum', '2'], human.io);
    expect(human.stdout()).toContain(`${describeWitnesses(summary)}\n`);
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await verifyWith(page, w.cosigned, '2');
      await expectSameAsCli(page, expected.report!);
      // The witness keys it was held to and who signed, as verify's lines say them and as its --json holds them.
      expect(expected.report!.checked.witnesses).toMatchObject({ keys: 2, quorum: 2 });
      expect(await page.textContent('#witness-keys-info')).toBe(describeWitnessKeys(expected.report!));
      expect(await page.isVisible('#witness-keys-info')).toBe(true);
      expect(human.stdout()).toContain(`\n${describeWitnessKeys(expected.report!)}\n`);
      expect(await page.textContent('#signers-info')).toBe(describeSigners(expected.report!));
      expect(human.stdout()).toContain(`\n${describeSigners(expected.report!)}\n`);
      const exported = await exportedReport(page);
      expect(exported.checked.witnesses).toEqual(expected.report!.checked.witnesses);
      expect(exported.checked.signers).toEqual(expected.report!.checked.signers);
      const info = await page.textContent('#witness-info');
      expect(info).toBe(`✓ witness quorum met (witness keys "witnesses.txt")\n${describeWitnesses(summary)}`);
      expect(info).toContain(`at ${new Date(w.time * 1000).toISOString()}`);
      // The witness named with markup is text on the page: nothing of it was parsed or ran.
      const dom = await page.evaluate(() => ({
        pwned: (globalThis as { __pwned?: number }).__pwned,
        images: (globalThis as any).document.images.length as number,
      }));
      expect(dom).toEqual({ pwned: undefined, images: 0 });
      expect(info).toContain(JSON.stringify(HOSTILE_WITNESS).slice(0, -1));
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('reports a quorum not met with the CLI’s WITNESS_QUORUM_MISSING, in words as well as colour', async () => {
    const expected = await withWitnesses(w.one, '2');
    expect(expected.code).toBe(1);
    expect(codesAt(expected.report!)).toEqual(['WITNESS_QUORUM_MISSING@-']);
    const page = await browser.newPage();
    try {
      await verifyWith(page, w.one, '2');
      await expectSameAsCli(page, expected.report!);
      expect(await page.textContent('#witness-info')).toBe(
        `✗ witness quorum not met (witness keys "witnesses.txt"): WITNESS_QUORUM_MISSING\n${describeWitnesses(expected.report!.checkpoint!.witnesses!)}`,
      );
      expect(await page.getAttribute('#witness-info', 'class')).toBe('failed');
    } finally {
      await page.close();
    }
  });

  it('does not count a cosignature of another tree pasted on (WITNESS_COSIGNATURE_INVALID), as the CLI', async () => {
    const expected = await withWitnesses(w.pasted, '2');
    expect(codesAt(expected.report!)).toEqual(['WITNESS_COSIGNATURE_INVALID@-', 'WITNESS_QUORUM_MISSING@-']);
    const page = await browser.newPage();
    try {
      await verifyWith(page, w.pasted, '2');
      await expectSameAsCli(page, expected.report!);
      expect(await page.textContent('#witness-info')).toMatch(
        /^✗ witness quorum not met \(witness keys "witnesses\.txt"\): WITNESS_COSIGNATURE_INVALID, WITNESS_QUORUM_MISSING\nwitnesses: 1 of 2 pinned cosigned \(quorum 2\): "witness\.example\/w1\+/,
      );
    } finally {
      await page.close();
    }
  });

  it('refuses what the CLI refuses, with its USAGE words: keys without a quorum, a quorum above the keys, a bad key, a file over 16 MiB', async () => {
    const bad = join(base, 'bad-witnesses.txt');
    writeFileSync(bad, '# one good, one not\nwitness.example/w9+00000000+AAAA\n');
    const huge = join(base, 'huge-witnesses.txt');
    writeFileSync(huge, '#'.repeat(16 * 1024 * 1024 + 1));
    const cases: Array<{ keys?: string; quorum?: string; args: string[] }> = [
      { keys: w.keys, args: ['--witness-keys', w.keys] },
      { quorum: '2', args: ['--quorum', '2'] },
      { keys: w.keys, quorum: '3', args: ['--witness-keys', w.keys, '--quorum', '3'] },
      { keys: w.keys, quorum: 'two', args: ['--witness-keys', w.keys, '--quorum', 'two'] },
      { keys: bad, quorum: '1', args: ['--witness-keys', bad, '--quorum', '1'] },
    ];
    const page = await browser.newPage();
    try {
      for (const c of cases) {
        const cli = await cliVerify(w.cosigned, f.trust, undefined, c.args);
        expect(cli.code, c.args.join(' ')).toBe(2);
        const cliLine = cli.stderr
          .trim()
          .replace(/^handoff-ledger: /, '')
          .replace(c.keys ?? '\0', basename(c.keys ?? ''));
        expect(cliLine).toMatch(/^USAGE: --/);
        await pickBundle(page, w.cosigned);
        if (c.keys) await page.setInputFiles('#witness-keys-input', c.keys);
        if (c.quorum) await page.fill('#quorum-input', c.quorum);
        await expect.poll(() => page.isEnabled('#verify'), { timeout: 10_000 }).toBe(true);
        if (c.keys) await expect.poll(() => picked(page), { timeout: 10_000 }).toContain(basename(c.keys));
        await page.click('#verify');
        await page.waitForSelector('body[data-state="error"]', { timeout: 90_000 });
        expect(await page.textContent('#error'), c.args.join(' ')).toBe(cliLine);
        expect(await page.isVisible('#result')).toBe(false);
      }

      // Over the bound: refused before reading, as the CLI refuses it, and the keys chosen before stay.
      const over = await cliVerify(w.cosigned, f.trust, undefined, ['--witness-keys', huge, '--quorum', '1']);
      expect(over.stderr).toBe(
        `handoff-ledger: USAGE: --witness-keys "${huge}": input is larger than 16777216 bytes\n`,
      );
      await page.setInputFiles('#witness-keys-input', huge);
      await expect
        .poll(() => page.textContent('#error'), { timeout: 30_000 })
        .toBe('USAGE: --witness-keys "huge-witnesses.txt": input is larger than 16777216 bytes');
      expect(await picked(page)).toContain('witness keys "bad-witnesses.txt"');
    } finally {
      await page.close();
    }
  });

  it('refuses the settings before the trust files, as the CLI checks its options before it reads --trust', async () => {
    // A trust file that is no trust store and a principal that is no id: `verify` says USAGE (its options are
    // checked first), never TRUST_INVALID; the page said TRUST_INVALID.
    const badTrust = join(base, 'not-a-trust-store.json');
    writeFileSync(badTrust, '{"keys": 5}\n');
    const cli = await cliVerify(w.cosigned, badTrust, undefined, ['--principal', 'not an id']);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/^handoff-ledger: USAGE: --principal/);
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', w.cosigned);
      await page.setInputFiles('#trust-input', badTrust);
      await page.fill('#principal-input', 'not an id');
      await expect.poll(() => page.isEnabled('#verify'), { timeout: 10_000 }).toBe(true);
      await expect.poll(() => picked(page), { timeout: 10_000 }).toContain('trust file "not-a-trust-store.json"');
      await page.click('#verify');
      await page.waitForSelector('body[data-state="error"]', { timeout: 90_000 });
      expect(await page.textContent('#error')).toMatch(/^USAGE: the principal/);
    } finally {
      await page.close();
    }
  });

  it("takes a run's refusal down with the verdict when a setting changes: no refusal is shown of inputs no longer chosen", async () => {
    const page = await browser.newPage();
    try {
      await pickBundle(page, w.cosigned);
      // A quorum without witness keys: the run is refused (USAGE), as `verify --quorum 2` is.
      await page.fill('#quorum-input', '2');
      await expect.poll(() => page.isEnabled('#verify'), { timeout: 10_000 }).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="error"]', { timeout: 90_000 });
      expect(await page.textContent('#error')).toMatch(/^USAGE: --witness-keys FILE and --quorum K go together/);
      // The quorum taken away: the refusal was of a quorum no longer given, and goes down with the state.
      await page.fill('#quorum-input', '');
      expect(await page.getAttribute('body', 'data-state')).toBeNull();
      expect(await page.isVisible('#error')).toBe(false);
      // Verified again, without it: the CLI's verdict on the same files.
      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: 90_000 });
      expect(await page.isVisible('#error')).toBe(false);
    } finally {
      await page.close();
    }
  });

  it('takes witness keys from a drop and a quorum from the keyboard, and verifies as the CLI does', async () => {
    const expected = await withWitnesses(w.cosigned, '2');
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      await dropFiles(page, [w.cosigned, f.trust, w.keys]);
      await expect
        .poll(() => picked(page), { timeout: 30_000 })
        .toMatch(
          /^bundle "cosigned": .*; trust file "trust\.json"; no earlier checkpoint chosen \(optional\); witness keys "witnesses\.txt"$/,
        );
      // Replaced from the keyboard: a labelled file input and a labelled text input, reached with Tab.
      await chooseByKeyboard(page, 'witnesses-choose', w.keys);
      expect(await page.getByLabel(/Witness quorum/).getAttribute('id')).toBe('quorum-input');
      // A key press landing while a loaded machine settles focus can be dropped: typed again until it shows.
      for (let attempt = 0; (await page.inputValue('#quorum-input')) !== '2'; attempt++) {
        if (attempt === 3) throw new Error('the quorum typed from the keyboard never showed');
        await tabTo(page, 'quorum-input');
        await page.keyboard.press('Control+A');
        await page.keyboard.type('2');
        await page
          .waitForFunction(() => (globalThis as any).document.getElementById('quorum-input').value === '2', null, {
            timeout: 5_000,
          })
          .catch(() => undefined);
      }
      await expect.poll(() => picked(page), { timeout: 10_000 }).toMatch(/; witness keys "witnesses\.txt"; quorum 2$/);
      // The keys chosen again have the name of those dropped: the line above cannot tell they are read; Verify can
      // (unavailable, aria-disabled, until they are).
      await expect.poll(() => page.isEnabled('#verify'), { timeout: 30_000 }).toBe(true);
      await tabTo(page, 'verify');
      await page.keyboard.press('Enter');
      await expectSameAsCli(page, expected.report!);
      await expect.poll(() => activeId(page), { timeout: 10_000 }).toBe('verdict');
      expect(await page.textContent('#witness-info')).toMatch(/^✓ witness quorum met/);
    } finally {
      await page.close();
    }
  });
});

/** The page's outcome equals the CLI's: the same report, or the same refusal code when the CLI refuses. */
async function expectCliOutcome(
  page: Page,
  cliRun: Awaited<ReturnType<typeof cliVerify>>,
  what: string,
): Promise<void> {
  if (cliRun.report) return expectSameAsCli(page, cliRun.report);
  const code = /^handoff-ledger: ([A-Z_]+): /.exec(cliRun.stderr)?.[1];
  expect(code, what).toBeDefined();
  await page.waitForSelector('body[data-state="ok"], body[data-state="failed"], body[data-state="error"]', {
    timeout: 90_000,
  });
  expect(await page.getAttribute('body', 'data-state'), what).toBe('error');
  expect(await page.textContent('#error'), what).toMatch(new RegExp(`^${code}: `));
}

describe('files that start with a byte order mark', { timeout: 180_000 }, () => {
  const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
  const withBom = (path: string) => writeFileSync(path, Buffer.concat([BOM, readFileSync(path)]));

  it('are read with the mark, as the CLI reads them: bundle.json, checkpoint.note, heads.jsonl, the trust file', async () => {
    const trustBom = join(base, 'bom-trust.json');
    cpSync(f.trust, trustBom);
    withBom(trustBom);
    const cases: Array<{ what: string; dir: string; trust: string; hasBlobs: boolean }> = [];
    for (const [bundle, file] of [
      [f.bundle, 'bundle.json'],
      [f.bundle, 'checkpoint.note'],
      [f.sessionBundle, 'heads.jsonl'],
    ] as const) {
      const dir = join(base, `bom-${file}`, basename(bundle));
      cpSync(bundle, dir, { recursive: true });
      withBom(join(dir, file));
      cases.push({ what: file, dir, trust: f.trust, hasBlobs: bundle === f.bundle });
    }
    cases.push({ what: 'trust file', dir: f.bundle, trust: trustBom, hasBlobs: true });
    const page = await browser.newPage();
    try {
      for (const c of cases) {
        const expected = await cliVerify(c.dir, c.trust);
        expect(expected.report?.ok, c.what).not.toBe(true);
        await page.goto(PAGE);
        await page.setInputFiles('#bundle-input', c.dir);
        await page.setInputFiles('#trust-input', c.trust);
        await page.click('#verify');
        await expectCliOutcome(page, expected, c.what);
        // Served by audit-ui (its own start-up checks left out, to reach the page's reading).
        const server = await startAuditServer({
          page: auditorPagePath()!,
          bundle: c.dir,
          hasBlobs: c.hasBlobs,
          trust: c.trust,
        });
        try {
          await page.goto(server.url);
          await expectCliOutcome(page, expected, `${c.what}, served`);
        } finally {
          await server.close();
        }
      }
    } finally {
      await page.close();
    }
  });
});

describe('a tree file audit-ui serves over its bound', { timeout: 180_000 }, () => {
  /** The error the page shows for `dir` served by audit-ui (its own start-up checks left out). */
  async function servedError(dir: string): Promise<string | null> {
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: true, trust: f.trust });
    const page = await browser.newPage();
    try {
      await page.goto(server.url);
      await page.waitForSelector('body[data-state="error"]', { timeout: 90_000 });
      return await page.textContent('#error');
    } finally {
      await page.close();
      await server.close();
    }
  }

  it('is refused by its size with BUNDLE_INVALID, before its bytes are read', async () => {
    const dir = join(base, 'huge-note', 'audit-2026-11');
    cpSync(f.bundle, dir, { recursive: true });
    const size = 3 * 2 ** 20; // over the 1 MiB bound of checkpoint.note, every byte written
    writeFileSync(join(dir, 'checkpoint.note'), Buffer.alloc(size, 0x61));
    expect(await servedError(dir)).toMatch(
      new RegExp(`^BUNDLE_INVALID: checkpoint\\.note is ${size} bytes, over \\d+$`),
    );
  });

  it('with holes within its bound, is read as the bytes it holds, as verify reads it', async () => {
    // What a file system reports allocated tells no hole from a compressed or just-written block (ZFS reports both as
    // fewer blocks than the size): refusing by it refused honest bundles there.
    const dir = join(base, 'holes-note', 'audit-2026-11');
    cpSync(f.bundle, dir, { recursive: true });
    truncateSync(join(dir, 'checkpoint.note'), 512 * 1024); // under checkpoint.note's bound of 1 MiB; no disk used
    const cli = await cliVerify(dir, f.trust);
    // NULs: no checkpoint text, a finding (not a refusal of the bundle).
    expect(cli.report?.findings.map((x) => x.code)).toEqual(['CHECKPOINT_INVALID']);
    const server = await startAuditServer({ page: auditorPagePath()!, bundle: dir, hasBlobs: true, trust: f.trust });
    const page = await browser.newPage();
    try {
      await page.goto(server.url);
      await expectCliOutcome(page, cli, 'checkpoint.note with holes, served');
    } finally {
      await page.close();
      await server.close();
    }
  });
});
