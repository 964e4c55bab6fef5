/**
 * The auditor's page as a screen reader has it: Chromium's accessibility tree, read through the DevTools protocol
 * (the role, name and description a screen reader is given for an element), with the keyboard only. Choosing files:
 * each file input is hidden behind a button named by its words and described by what the page holds (the input is
 * cleared once read, and would say "No file chosen"); settings named by their label, described by their hint.
 * Browsing the history: a listbox whose one option is the selected manifest (WAI-ARIA's listbox pattern with
 * aria-activedescendant), its short name said at each move; the details panel is not live. A run refused or failed:
 * said by the alert, the status cleared, focus left where the auditor was.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { buildBundle, writeBundleDir, writeTrustFile } from '../support/bundle-builder.js';
import { launchChromium, watchPage } from '../support/browser.js';
import { ensurePageBuilt } from '../support/page-build.js';
import { activeId, liveness, PAGE_URL as PAGE, picked, tabTo } from '../support/page-checks.js';

let browser: BrowserContext;
let closeBrowser: () => Promise<void>;
let root: string;
let bundle: string;
let trust: string;

const UPDATE_WAIT = { timeout: 10_000 };
const VERDICT_WAIT_MS = 90_000;

beforeAll(async () => {
  ensurePageBuilt();
  root = mkdtempSync(join(tmpdir(), 'hl-page-a11y-'));
  chmodSync(root, 0o700);
  const b = await buildBundle({
    chains: [
      { session: 's1', count: 3 },
      { session: 's2', count: 2 },
    ],
  });
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

interface AxNode {
  role?: string;
  name?: string;
  description?: string;
  value?: string;
  /** Said as unavailable ("dimmed", "unavailable"): disabled, natively or by aria-disabled. */
  disabled: boolean;
  ignored: boolean;
}

/** What a screen reader is given for the element `selector` selects: Chromium's accessibility node for it. */
async function ax(page: Page, selector: string): Promise<AxNode> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { root: doc } = await cdp.send('DOM.getDocument', { depth: 0 });
    const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: doc.nodeId, selector });
    expect(nodeId, selector).toBeGreaterThan(0);
    const { nodes } = await cdp.send('Accessibility.getPartialAXTree', { nodeId, fetchRelatives: false });
    const n = nodes[0]!;
    const text = (v?: { value?: unknown }) => (v?.value === undefined ? undefined : String(v.value));
    return {
      role: text(n.role),
      name: text(n.name),
      description: text(n.description),
      value: text(n.value),
      disabled: n.properties?.some((p) => p.name === 'disabled' && p.value.value === true) ?? false,
      ignored: n.ignored,
    };
  } finally {
    await cdp.detach();
  }
}

/** Every name, value and description in the page's accessibility tree. */
async function everythingSaid(page: Page): Promise<string[]> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { nodes } = await cdp.send('Accessibility.getFullAXTree');
    return nodes.flatMap((n) =>
      n.ignored ? [] : [n.name?.value, n.value?.value, n.description?.value].filter((v) => v !== undefined).map(String),
    );
  } finally {
    await cdp.detach();
  }
}

/**
 * The page's text as a screen reader reading it line by line meets it: the text of every node of Chromium's
 * accessibility tree that is not ignored (a visually hidden element is there too; names and descriptions given to
 * controls by aria-describedby are not text met on the way).
 */
async function textRead(page: Page): Promise<string[]> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { nodes } = await cdp.send('Accessibility.getFullAXTree');
    return nodes.flatMap((n) => (!n.ignored && n.role?.value === 'StaticText' ? [String(n.name?.value ?? '')] : []));
  } finally {
    await cdp.detach();
  }
}

/** The Tab order from the top of the page: the id of each element focused in turn. */
async function tabOrder(page: Page, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    await page.keyboard.press('Tab');
    ids.push(await activeId(page));
  }
  return ids;
}

describe('choosing files and settings, as a screen reader has them', { timeout: 180_000 }, () => {
  it('each file is chosen with a button named by its words and described by what is chosen; nothing says "No file chosen"', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      // The file inputs are not in the Tab order nor said: their buttons are, and Verify (unavailable until a bundle
      // and trust files are chosen, but found).
      expect(await tabOrder(page, 10)).toEqual([
        'bundle-choose',
        'trust-choose',
        'since-choose',
        'witnesses-choose',
        'quorum-input',
        'require-blobs-input',
        'expect-input',
        'principal-input',
        'session-input',
        'verify',
      ]);
      for (const id of ['bundle-input', 'trust-input', 'since-input', 'witness-keys-input'])
        expect((await ax(page, `#${id}`)).ignored, id).toBe(true);
      expect(await ax(page, '#bundle-choose')).toMatchObject({
        role: 'button',
        name: 'Choose bundle folder',
        description: 'no bundle chosen',
      });
      expect(await ax(page, '#trust-choose')).toMatchObject({
        role: 'button',
        name: 'Choose trust files',
        description:
          'no trust file chosen the pinned public keys: one file, or one per host of a shared store, merged as verify --trust a.json --trust b.json',
      });
      expect(await ax(page, '#since-choose')).toMatchObject({
        name: 'Choose earlier checkpoint',
        description: 'no earlier checkpoint chosen (optional) optional: the signed note kept from a previous audit',
      });
      expect(await ax(page, '#witnesses-choose')).toMatchObject({
        name: 'Choose witness keys',
        description:
          "no witness keys chosen (optional) optional: the pinned witnesses' cosignature/v1 keys, one per line",
      });
      // Settings: named by their label, their hint said after it.
      expect(await ax(page, '#quorum-input')).toMatchObject({
        name: 'Witness quorum',
        description: 'with witness keys: how many pinned witnesses must have cosigned',
      });
      expect(await ax(page, '#require-blobs-input')).toMatchObject({
        name: 'Require blobs',
        description: 'a bundle without the summaries fails, as verify --require-blobs',
      });
      expect((await ax(page, '#expect-input')).name).toBe('Expect');
      expect((await ax(page, '#principal-input')).name).toBe('Principal');
      expect((await ax(page, '#session-input')).name).toBe('Session');

      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      expect((await ax(page, '#bundle-choose')).description).toMatch(/^bundle "bundle": [\d,]+ bytes of manifests$/);
      expect((await ax(page, '#trust-choose')).description).toMatch(/^trust file "trust\.json" the pinned public keys/);
      // The inputs were cleared once read (the same file picked again is read again), and no control says so.
      for (const id of ['#bundle-input', '#trust-input'])
        expect(await page.$eval(id, (input) => (input as unknown as { value: string }).value), id).toBe('');
      expect((await everythingSaid(page)).filter((t) => /no file chosen/i.test(t))).toEqual([]);
      // Verify says what it would verify.
      expect(await ax(page, '#verify')).toMatchObject({
        role: 'button',
        name: 'Verify',
        description: await picked(page),
      });
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe('browsing the history, as a screen reader has it', { timeout: 180_000 }, () => {
  /** The selected manifest as the listbox's active option: its id, name and place in the set. */
  const active = (page: Page) =>
    page.evaluate(() => {
      const d = (globalThis as any).document;
      const id = d.getElementById('history').getAttribute('aria-activedescendant') as string | null;
      const option = id ? d.getElementById(id) : null;
      return option
        ? {
            id: id!,
            role: option.getAttribute('role') as string,
            selected: option.getAttribute('aria-selected') as string,
            text: option.textContent as string,
            at: `${option.getAttribute('aria-posinset')}/${option.getAttribute('aria-setsize')}`,
          }
        : null;
    });

  it('says the selected manifest in short at each move (a listbox option), not the details, which are not live', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      // The details' ten fields change at each key: not live, read when the auditor goes to them.
      expect(await liveness(page, 'details')).toBe('off');
      expect(await ax(page, '#details-section')).toMatchObject({ role: 'region', name: 'Selected manifest' });
      expect(await ax(page, '#history')).toMatchObject({ role: 'listbox', name: 'Manifests by session and seq' });
      // The filters are a form of their own, so their Principal and Session are not taken for the settings' fields.
      expect(await ax(page, '#filters')).toMatchObject({ role: 'form', name: 'Filter the history' });
      expect((await ax(page, '#history')).description).toMatch(/^Sessions as rows, seq along each row\. /);

      await tabTo(page, 'history');
      const first = await active(page);
      expect(first).toEqual({
        id: expect.stringMatching(/^history-line-\d+$/),
        role: 'option',
        selected: 'true',
        text: 's1, seq 0: verified',
        at: '1/5',
      });
      expect(await ax(page, `#${first!.id}`)).toMatchObject({ role: 'option', name: 's1, seq 0: verified' });
      await page.keyboard.press('ArrowRight');
      // Another option is active (a new id: what a screen reader follows), the details follow quietly.
      await expect.poll(() => active(page), UPDATE_WAIT).toMatchObject({ text: 's1, seq 1: verified', at: '2/5' });
      expect((await active(page))!.id).not.toBe(first!.id);
      await expect.poll(() => page.textContent('#details'), UPDATE_WAIT).toMatch(/sessions1seq1/);
      await page.keyboard.press('ArrowDown');
      await expect.poll(() => active(page), UPDATE_WAIT).toMatchObject({ text: 's2, seq 1: verified', at: '5/5' });
      await page.keyboard.press('Home');
      await expect.poll(() => active(page), UPDATE_WAIT).toMatchObject({ text: 's2, seq 0: verified', at: '4/5' });
      expect(await activeId(page)).toBe('history');
      // Filters that keep no manifest: no option, none active.
      await page.fill('#filter-session', 'no-such-session');
      await expect.poll(() => active(page), UPDATE_WAIT).toBeNull();
      expect(await page.getAttribute('#history', 'aria-activedescendant')).toBeNull();
      expect(await page.textContent('#details')).toBe('No manifest selected.');
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe('a run, as a screen reader has it', { timeout: 180_000 }, () => {
  it('the result region is named once, its verdict heading focused; a refused run is said by the alert', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(PAGE);
      expect(await liveness(page, 'error')).toBe('assertive');
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      await tabTo(page, 'verify');
      await page.keyboard.press('Enter');
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      await expect.poll(() => activeId(page), UPDATE_WAIT).toBe('verdict');
      // The region is "Result", not the verdict a second time before its heading.
      expect(await ax(page, '#result')).toMatchObject({ role: 'region', name: 'Result' });
      expect(await ax(page, '#verdict')).toMatchObject({ role: 'heading', name: await page.textContent('#verdict') });
      // A quorum without witness keys: the worker refuses the run with verify's USAGE words.
      await page.fill('#quorum-input', '1');
      await tabTo(page, 'verify');
      await page.keyboard.press('Enter');
      await page.waitForSelector('body[data-state="error"]', UPDATE_WAIT);
      expect(await page.textContent('#error')).toMatch(/^USAGE: /);
      expect(await page.isVisible('#error')).toBe(true);
      // Said by the alert; the status says no "verifying" left over; focus stays on Verify.
      expect(await page.textContent('#progress-status')).toBe('');
      expect(await page.isHidden('#progress')).toBe(true);
      expect(await activeId(page)).toBe('verify');
    } finally {
      await page.close();
    }
  });
});

describe('what is chosen and how a run went, read once', { timeout: 180_000 }, () => {
  it('each file name is met once: the picker lines are shown, aria-hidden, and the status says exactly their words', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    const pickerLines = ['#bundle-chosen', '#trust-chosen', '#since-chosen', '#witnesses-chosen'];
    /** What each picker line shows (on screen), checking the status says exactly that, joined. */
    const lines = async () => {
      const shown = await Promise.all(pickerLines.map((id) => page.textContent(id)));
      expect(await page.textContent('#picked-status')).toBe(shown.join('; '));
      for (const id of pickerLines) expect(await page.isVisible(id), id).toBe(true);
      return shown as string[];
    };
    try {
      await page.goto(PAGE);
      expect(await lines()).toEqual([
        'no bundle chosen',
        'no trust file chosen',
        'no earlier checkpoint chosen (optional)',
        'no witness keys chosen (optional)',
      ]);
      expect((await textRead(page)).filter((t) => t.includes('no trust file chosen'))).toHaveLength(1);
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      const [bundleLine = '', trustLine] = await lines();
      expect(bundleLine).toMatch(/^bundle "bundle": [\d,]+ bytes of manifests$/);
      expect(trustLine).toBe('trust file "trust.json"');
      // Reading the page, each file is named once: in the status, not again in the line beside its picker.
      const read = await textRead(page);
      expect(read.filter((t) => t.includes('trust.json'))).toEqual([await page.textContent('#picked-status')]);
      expect(read.filter((t) => t.includes(bundleLine))).toHaveLength(1);
      for (const id of pickerLines) expect((await ax(page, id)).ignored, id).toBe(true);
      // Each picker's button is still described by its line (a hidden element referenced by aria-describedby).
      expect((await ax(page, '#bundle-choose')).description).toBe(bundleLine);
      expect((await ax(page, '#trust-choose')).description).toMatch(/^trust file "trust\.json" the pinned public keys/);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('the status that says what is chosen, and the one that says how a run went, are the lines on screen, not copies', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    try {
      await page.goto(PAGE);
      await page.setInputFiles('#bundle-input', bundle);
      await page.setInputFiles('#trust-input', trust);
      await expect.poll(() => page.isEnabled('#verify'), UPDATE_WAIT).toBe(true);
      const files = (await picked(page))!;
      expect(files).toMatch(/^bundle "bundle": [^;]+; trust file "trust\.json"; no earlier checkpoint chosen/);
      // Met once reading the page: the status is the line on screen (WCAG's technique ARIA22), not a hidden copy.
      expect((await textRead(page)).filter((t) => t === files)).toEqual([files]);
      expect(await liveness(page, 'picked-status')).toBe('polite');
      expect(await page.isVisible('#picked-status')).toBe(true);
      expect(await page.textContent('#picked-status')).toBe(files);
      // The settings typed follow on the same line, outside the status (not said again at each key).
      await page.fill('#principal-input', 'alice');
      await expect.poll(() => picked(page), UPDATE_WAIT).toBe(`${files}; principal "alice"`);
      expect(await page.textContent('#picked-status')).toBe(files);
      expect(await liveness(page, 'picked-settings')).toBe('off');
      expect((await textRead(page)).filter((t) => t.includes('trust file "trust.json";'))).toEqual([files]);

      await page.click('#verify');
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      const done = (await page.textContent('#progress-text'))!;
      expect(done).toMatch(/^verified in [0-9.]+ s \(signatures: /);
      expect((await textRead(page)).filter((t) => t === done)).toEqual([done]);
      expect(await page.isVisible('#progress-status')).toBe(true);
      expect(await page.textContent('#progress-status')).toBe(done);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe('Verify before there is something to verify', { timeout: 180_000 }, () => {
  it('is in the Tab order, said unavailable, and pressed says what is missing, without starting a run', async () => {
    const page = await browser.newPage();
    const seen = watchPage(page);
    // Every worker the page starts is counted; reads of chosen files wait while the test holds them.
    await page.addInitScript(() => {
      const g = globalThis as any;
      const Real = g.Worker;
      g.__workers = 0;
      g.Worker = class extends Real {
        constructor(...args: unknown[]) {
          super(...args);
          g.__workers++;
        }
      };
      const read = g.Blob.prototype.arrayBuffer;
      let waiting: Array<() => void> = [];
      g.holdReads = false;
      g.releaseReads = () => {
        g.holdReads = false;
        for (const go of waiting) go();
        waiting = [];
      };
      g.Blob.prototype.arrayBuffer = function (this: Blob) {
        if (!g.holdReads) return read.call(this);
        return new Promise<void>((go) => waiting.push(go)).then(() => read.call(this));
      };
    });
    const workers = () => page.evaluate(() => (globalThis as any).__workers as number);
    const status = () => page.textContent('#progress-status');
    const press = async () => {
      await tabTo(page, 'verify');
      await page.keyboard.press('Enter');
    };
    try {
      await page.goto(PAGE);
      expect(await ax(page, '#verify')).toMatchObject({ role: 'button', name: 'Verify', disabled: true });
      expect(await page.getAttribute('#verify', 'aria-disabled')).toBe('true');
      expect(await page.getAttribute('#verify', 'disabled')).toBeNull();
      await press();
      await expect.poll(status, UPDATE_WAIT).toBe('cannot verify yet: choose a bundle folder and trust files');
      expect(await liveness(page, 'progress-status')).toBe('polite');
      expect(await activeId(page)).toBe('verify');
      await page.setInputFiles('#bundle-input', bundle);
      await expect.poll(() => picked(page), UPDATE_WAIT).toMatch(/^bundle "bundle": /);
      // A choice clears what was said; pressed again, what is still missing.
      expect(await status()).toBe('');
      await press();
      await expect.poll(status, UPDATE_WAIT).toBe('cannot verify yet: choose trust files');
      // A trust file chosen and still being read: Verify waits for it, and says so.
      await page.evaluate(() => ((globalThis as any).holdReads = true));
      await page.setInputFiles('#trust-input', trust);
      await press();
      await expect.poll(status, UPDATE_WAIT).toBe('cannot verify yet: the files chosen are still being read');
      expect((await ax(page, '#verify')).disabled).toBe(true);
      expect(await workers()).toBe(0);
      expect(await page.getAttribute('body', 'data-state')).toBeNull();
      // Read: available, and what was said of it is gone.
      await page.evaluate(() => (globalThis as any).releaseReads());
      await expect.poll(() => page.getAttribute('#verify', 'aria-disabled'), UPDATE_WAIT).toBe('false');
      expect((await ax(page, '#verify')).disabled).toBe(false);
      expect(await status()).toBe('');
      await press();
      await page.waitForSelector('body[data-state="ok"]', { timeout: VERDICT_WAIT_MS });
      expect(await workers()).toBe(1);
      expect(seen.errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
