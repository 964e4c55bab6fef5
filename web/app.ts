/**
 * The auditor's page: pick or drop a bundle folder and its trust files (one, or one per host of a shared store; and,
 * optionally, an earlier checkpoint, witness keys and a quorum), verify in a Web Worker with a progress bar, then
 * show the verdict, the history picture, findings and chains. Built by web/build.mjs into one self-contained
 * dist/web/index.html.
 */
import type { BundleAuditReport } from '../manifests/audit/verify-chain.js';
import type { Finding } from '../manifests/audit/findings.js';
import { HistoryView } from './history/canvas.js';
import { AFTER_EVERY_TIME, buildHistory, distinct, markFor, type HistoryFilter } from './history/model.js';
import type { ManifestMark, PoolState, VerifyRequest, WorkerMessage } from './protocol.js';
import { readDrop } from './drop.js';
import {
  exportJson,
  el,
  showChains,
  showCheckpoint,
  showCoverage,
  showTrust,
  showSigners,
  showWitnessKeys,
  showDetails,
  showFindings,
  showLegend,
  showVerdict,
  shownLines,
  showWitnesses,
} from './report-view.js';
import { printableOnce, quoted } from '../manifests/encoding/printable.js';
import { errorText } from '../store/errors.js';
import { roleOfDroppedFile, SIDE_FILE_ROLES, SIDE_FILES, unplacedFile, type SideFileRole } from './side-files.js';
import { bundleFromFiles, bundleFromPreload, filesOfInput, preloadOf, type PickedBundle } from './sources.js';

/** The worker's bundled source, put in by the build: a blob: worker runs from file:// and any host. */
declare const __WORKER_SOURCE__: string;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** The names of what a verification was given, taken when it starts: the verdict shown and exported is theirs. */
interface Verified {
  bundle: string;
  since: string | undefined;
  witnesses: string | undefined;
}

/**
 * A side file as chosen: its name and text; for the trust audit-ui serves, also the names of the files it read it
 * from (several `--trust` files, served merged as one text).
 */
interface ChosenFile {
  name: string;
  text: string;
  servedFrom?: readonly string[];
}

const state: {
  bundle?: PickedBundle;
  /** Trust files, earlier checkpoint, witness keys: each one chosen (several only for trust files). */
  side: Partial<Record<SideFileRole, ChosenFile[]>>;
  report?: BundleAuditReport;
  /** What `report` is the verdict on. */
  verified?: Verified;
  manifests: ManifestMark[];
  worker?: Worker;
  /**
   * Chosen files and drops still being read, each with whether it still matters: Verify waits for those that do (a
   * run without a file chosen before it was pressed is none asked for), not for a read a later choice of its kind
   * has superseded, whose files will not be taken.
   */
  reading: Set<Reading>;
} = { manifests: [], side: {}, reading: new Set() };

/** A read under way: it matters while what it reads may still be taken. */
interface Reading {
  matters(): boolean;
}

const history = new HistoryView($('history'), $('history-space'), $<HTMLCanvasElement>('history-canvas'), (m, r) =>
  showDetails($('details'), m, r),
);

/**
 * Whether #error shows a run's refusal (its coded error, or WORKER_FAILED): the outcome of a run on the inputs chosen
 * then, taken down with the verdict when they change. A pick's or drop's refusals stay until the next one settles.
 */
let runRefusalShown = false;

/** Shows messages, one a line, each escaped as the CLI escapes its error line (a line break in one as `\x0a`). */
function fail(...messages: string[]): void {
  const e = $('error');
  e.textContent = shownLines(messages);
  e.hidden = false;
  runRefusalShown = false;
}

/**
 * What the auditor chose, gesture by gesture (a pick, a drop, the files audit-ui serves), in the order the gestures
 * were made: a choice is read asynchronously, and reads can end out of order (a large file, a slow disk), so each
 * gesture gets a number when it is made and each kind of input (the bundle, each side file kind) remembers the
 * latest gesture that chose it. A read that ends after a later gesture chose its kind is dropped: the last pick
 * wins, not the last read to end.
 */
type Role = 'bundle' | SideFileRole;
let gestures = 0;
const latest: Partial<Record<Role, number>> = {};
/** The latest gesture whose refusals (or none) are shown: an earlier one ending later does not clear or hide them. */
let settledGesture = 0;
/** A new gesture's number. */
const gesture = () => ++gestures;
/** Claims `role` for gesture `g` unless a later gesture has claimed it; false when `g`'s choice is superseded. */
function claim(role: Role, g: number): boolean {
  if (g < (latest[role] ?? 0)) return false;
  latest[role] = g;
  return true;
}
const current = (role: Role, g: number) => latest[role] === g;

/**
 * Why Verify cannot start yet, in words (said when it is pressed); undefined when it can: a bundle and the required
 * side files (trust files) are chosen, and no read that matters is under way.
 */
function notReady(): string | undefined {
  // Being read first: a file being read is not chosen yet, and "choose trust files" would be untrue of it.
  if ([...state.reading].some((r) => r.matters())) return 'cannot verify yet: the files chosen are still being read';
  const missing: string[] = [];
  if (state.bundle === undefined) missing.push('a bundle folder');
  for (const role of SIDE_FILE_ROLES) {
    const { required, several, noun } = SIDE_FILES[role];
    if (required && !state.side[role]) missing.push(several ? `${noun}s` : `a ${noun}`);
  }
  return missing.length > 0 ? `cannot verify yet: choose ${missing.join(' and ')}` : undefined;
}
const ready = () => notReady() === undefined;
/** Whether #progress-status says why Verify cannot start (it was pressed too soon): kept true, or taken down. */
let saidNotReady = false;

/**
 * Says `text` in the polite live region `id` (a screen reader announces it when the browser is idle), unless that
 * is what it says already: a region set again to the same words is announced again by some screen readers. Each
 * region is the first part of a line on screen (#picked, #progress-text), so what it says is shown, and read once.
 */
function announce(id: 'picked-status' | 'progress-status', text: string): void {
  const region = $(id);
  if (region.textContent !== text) region.textContent = text;
}

/**
 * While the files audit-ui serves are fetched: they are shown and said once, when all are in (or refused), not as
 * each arrives ("no trust file chosen" said while the trust file is on its way would be untrue). Set before the
 * page's first refresh when audit-ui announces a preload, so the line starts empty and is written once.
 */
let preloading = false;

function refreshPicked(): void {
  // One line of what the page holds per kind: each shown under its picker (and that button's description), and all of
  // them, joined, the status. The picker lines are aria-hidden (index.html): the status carries exactly their words, so
  // a screen reader reading the page meets each file name once, in the status, which says them as they change.
  const lines: [string, string][] = [['bundle', state.bundle ? state.bundle.description : 'no bundle chosen']];
  for (const role of SIDE_FILE_ROLES) {
    const { noun, required } = SIDE_FILES[role];
    const chosen = state.side[role];
    let part: string;
    if (chosen === undefined) part = `no ${noun} chosen${required ? '' : ' (optional)'}`;
    else {
      // As many as were given: the files audit-ui was started with are named as such, however it serves them.
      const names = chosen.flatMap((c) => (c.servedFrom?.length ? c.servedFrom : [c.name]));
      const served = chosen.some((c) => c.servedFrom) ? ', served by audit-ui' : '';
      // Each name quoted, as a refusal names a file: a name is data (a file called `a.json; trust file b.json` would
      // otherwise read as two), the line escaped once (printable would double the backslashes of the quotes).
      part = `${names.length === 1 ? noun : `${noun}s`} ${names.map((n) => quoted(n)).join(', ')}${served}`;
    }
    lines.push([role, part]);
  }
  // #picked is this line: the files first, in the status (said when they change: the first refresh fills it as the
  // page opens, before a screen reader has it), then the settings, not live (a quorum, a principal or a session typed
  // key by key would have the whole line said again at every key; the field being typed in is what a screen reader
  // follows). While audit-ui's files are fetched neither the status nor the picker lines are written: they stay the
  // same words, written once when all are in.
  if (!preloading) {
    for (const [role, line] of lines) {
      const shown = $(`${role}-chosen`);
      if (shown.textContent !== printableOnce(line)) shown.textContent = printableOnce(line);
    }
    announce('picked-status', lines.map(([, line]) => printableOnce(line)).join('; '));
  }
  const settingParts: string[] = [];
  const quorum = quorumTyped();
  if (quorum !== undefined) settingParts.push(`quorum ${quorum}`);
  const settings = auditorSettings();
  if (settings.requireBlobs) settingParts.push('blobs required');
  if (settings.expect !== undefined) settingParts.push(`expecting a ${settings.expect} bundle`);
  // The ids as typed, quoted as the worker's refusal of one quotes it (they are checked only when verifying).
  if (settings.principal !== undefined) settingParts.push(`principal ${quoted(settings.principal)}`);
  if (settings.session !== undefined) settingParts.push(`session ${quoted(settings.session)}`);
  $('picked-settings').textContent = settingParts.length > 0 ? printableOnce(`; ${settingParts.join('; ')}`) : '';
  // Not `disabled`: a disabled button is skipped by Tab, and a keyboard user would not find it. A press while it is
  // unavailable says why (pressVerify), and verify() starts nothing until it is ready.
  const why = notReady();
  $('verify').setAttribute('aria-disabled', why === undefined ? 'false' : 'true');
  // Said when Verify was pressed too soon: kept true as reads end (or taken down once it can start).
  if (saidNotReady) {
    announce('progress-status', why ?? '');
    saidNotReady = why !== undefined;
  }
}

/** The witness quorum as typed (checked with the CLI's words when verifying); undefined when empty. */
function quorumTyped(): string | undefined {
  const typed = $<HTMLInputElement>('quorum-input').value.trim();
  return typed === '' ? undefined : typed;
}

/**
 * `?expect=` as given in the page's address when it is not one of the Expect choices (a valid one presets the choice):
 * sent as given while nothing is chosen, so the worker refuses it with `verify`'s words rather than it being dropped.
 */
let addressExpect: string | undefined;

/**
 * The auditor's own settings as `verify --require-blobs --expect --principal --session` takes them (the worker checks
 * the ids and the expectation).
 */
function auditorSettings(): Pick<VerifyRequest, 'requireBlobs' | 'expect' | 'principal' | 'session'> {
  const typed = (id: string) => {
    const v = $<HTMLInputElement>(id).value.trim();
    return v === '' ? undefined : v;
  };
  const principal = typed('principal-input');
  const session = typed('session-input');
  const expect = $<HTMLSelectElement>('expect-input').value || addressExpect;
  return {
    requireBlobs: $<HTMLInputElement>('require-blobs-input').checked,
    ...(expect ? { expect } : {}),
    ...(principal !== undefined ? { principal } : {}),
    ...(session !== undefined ? { session } : {}),
  };
}

/** The bound on manifests.jsonl the server announced (`audit-ui --max-bundle-bytes`), if any. */
let servedMaxBundleBytes: number | undefined;

/** Shows why what was just picked or dropped was refused, or clears an earlier message when nothing was. */
function settle(refusals: Array<string | undefined>, g: number): void {
  if (g < settledGesture) return;
  settledGesture = g;
  const said = refusals.filter((r): r is string => r !== undefined);
  if (said.length > 0) fail(...said);
  else {
    $('error').hidden = true;
    runRefusalShown = false;
  }
}

/**
 * Takes down the verdict on screen and stops a verification under way: called whenever what a verdict
 * is about changes (bundle, side file, quorum), so the page never shows or exports a verdict on other inputs.
 */
function dropVerdict(): void {
  state.worker?.terminate();
  delete state.worker;
  delete state.report;
  delete state.verified;
  state.manifests = [];
  delete $('history').dataset.manifests;
  delete $('history').dataset.marks;
  // Focus in the result (its verdict heading, the history, a filter, a button) would fall to the body as the result
  // is hidden (a mouse drop while the verdict heading has focus): it goes to Verify, next to what is chosen and
  // described by it. Focus anywhere else (a field being typed in) is left where it is.
  const result = $('result');
  const focusInResult = !result.hidden && result.contains(document.activeElement);
  result.hidden = true;
  if (focusInResult) $('verify').focus();
  $('progress').hidden = true;
  $('progress-count').textContent = '';
  announce('progress-status', '');
  saidNotReady = false;
  // A run's refusal is its outcome on the inputs chosen then, as a verdict is: it goes down with it.
  if (runRefusalShown) {
    $('error').hidden = true;
    runRefusalShown = false;
  }
  delete document.body.dataset.state;
}

/**
 * Takes a bundle chosen by gesture `g`; returns why not. A refused one leaves the one chosen before in place, and so
 * does one a later gesture has superseded (a folder dropped, then another picked before the drop was read).
 */
function takeBundle(picked: PickedBundle | string | undefined, g: number): string | undefined {
  if (picked === undefined) return undefined;
  if (typeof picked === 'string') return picked;
  if (!claim('bundle', g)) return undefined;
  dropVerdict();
  state.bundle = picked;
  refreshPicked();
  return undefined;
}

/** UTF-8 as the CLI reads a file: a byte order mark is kept (and refused where the CLI refuses it), not dropped as Blob.text() drops it. */
async function textOf(file: Blob): Promise<string> {
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(await file.arrayBuffer());
}

/**
 * Takes the trust files, earlier checkpoint, … given in one gesture (a pick or a drop): all of them for a kind given
 * several at once (trust files), else the one given; they replace those chosen before. Returns why not (the CLI's
 * code and words, or that two of a single kind were dropped together), and then keeps those chosen before.
 */
async function takeSideFiles(
  role: SideFileRole,
  files: ReadonlyArray<{ file: Blob; name: string; servedFrom?: readonly string[] }>,
  g: number,
): Promise<string | undefined> {
  const { tooLarge, several, noun, unreadable } = SIDE_FILES[role];
  if (files.length === 0) return undefined;
  // Two earlier checkpoints (or witness keys files) in one drop are refused, as two bundle folders are, rather than
  // one of them taken silently. (Their pickers take one file: no `multiple`.)
  if (!several && files.length > 1)
    return `drop one ${noun} file, not ${files.length}: ${files.map((f) => quoted(f.name)).join(', ')}`;
  // Refused before reading: a bound applied after reading bounds nothing.
  for (const { file, name } of files) if (file.size > tooLarge.bytes) return tooLarge.refusal(name);
  // Superseded by a later gesture of this kind already: nothing of it is taken.
  if (!claim(role, g)) return undefined;
  // What is verified is about to change: a verdict on the files chosen before is not left showing while these are
  // read (nor a run under way left to show one).
  dropVerdict();
  const read: ChosenFile[] = [];
  // Waited for until it ends, or until a later choice of this kind supersedes it.
  const reading: Reading = { matters: () => current(role, g) };
  state.reading.add(reading);
  refreshPicked();
  try {
    for (const { file, name, servedFrom } of files) {
      let text: string;
      try {
        text = await textOf(file);
      } catch (err) {
        // Gone or changed since it was chosen, or no permission to read it: said, and the files chosen before stay.
        return current(role, g) ? unreadable([name], errorText(err)) : undefined;
      }
      read.push({ name, text, ...(servedFrom ? { servedFrom } : {}) });
    }
  } finally {
    state.reading.delete(reading);
    refreshPicked();
  }
  // Another of this kind was chosen while these were read: the later choice stands.
  if (!current(role, g)) return undefined;
  state.side[role] = read;
  refreshPicked();
  return undefined;
}

/** The first instant whose `toISOString` has no four-digit year: every manifest's createdAt is before it. */
const AFTER_EVERY_MANIFEST_MS = Date.UTC(10000, 0, 1);

/**
 * A From or To input's local time as the filter compares it with a manifest's createdAt (its `toISOString`):
 * `undefined` when empty, `after` for a time past the year 9999. The input takes years up to 275760, which Date
 * does not read (a year of five digits: `toISOString` threw a RangeError), and a local time late in 9999 may be in
 * 10000 in UTC (`+010000-…`, which sorts before every createdAt). Every manifest is signed with a four-digit year.
 */
function timeBound(v: string): string | 'after' | undefined {
  if (!v) return undefined;
  const ms = new Date(v).getTime();
  if (/^\d{5,}-/.test(v) || ms >= AFTER_EVERY_MANIFEST_MS) return 'after';
  // The input hands no other value Date does not read; one it did would bound nothing.
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

function currentFilter(): HistoryFilter {
  const value = (id: string) => $<HTMLInputElement>(id).value;
  const f: HistoryFilter = {};
  if (value('filter-principal')) f.principal = value('filter-principal');
  if (value('filter-host')) f.host = value('filter-host');
  if (value('filter-session')) f.session = value('filter-session');
  const from = timeBound(value('filter-from'));
  const to = timeBound(value('filter-to'));
  // From after every manifest leaves none; To after every manifest holds back none.
  if (from) f.from = from === 'after' ? AFTER_EVERY_TIME : from;
  if (to && to !== 'after') f.to = to;
  return f;
}

function render(): void {
  const report = state.report!;
  const filter = currentFilter();
  const model = buildHistory(state.manifests, report.findings, filter);
  history.setModel(model);
  // What the page holds, for the tests: the marks kept (one per distinct manifest) and those in the picture as filtered.
  const held = $('history').dataset;
  held.manifests = String(state.manifests.length);
  held.marks = String(model.byLine.size);
  const filtered = Object.keys(filter).length > 0;
  const findings = filtered
    ? report.findings.filter((f: Finding) => f.line !== undefined && markFor(model, f.line) !== undefined)
    : report.findings;
  showFindings(
    $('findings'),
    $('findings-note'),
    findings,
    report,
    (line) => markFor(model, line) !== undefined,
    (line) => {
      history.selectLine(line);
    },
  );
}

function fillSelect(id: string, label: string, values: string[]): void {
  const select = $<HTMLSelectElement>(id);
  select.replaceChildren(el('option', `all ${label}`, { value: '' }));
  for (const v of values) {
    const option = el('option', v);
    option.value = v;
    select.append(option);
  }
}

/** Where the signatures are checked, in words: on a pool of workers, or in one worker and why not on a pool. */
function describePool(pool: PoolState | undefined): string {
  if (pool && pool.workers > 0) return pool.workers === 1 ? 'on 1 worker' : `on ${pool.workers} workers`;
  return pool?.fallback ? `in one worker: ${pool.fallback}` : 'in one worker';
}

function finished(
  verified: Verified,
  report: BundleAuditReport,
  manifests: ManifestMark[],
  verifier: string,
  ms: number,
  pool: PoolState | undefined,
): void {
  state.report = report;
  state.verified = verified;
  state.manifests = manifests;
  $('progress').hidden = true;
  $('progress-count').textContent = '';
  announce(
    'progress-status',
    `verified in ${(ms / 1000).toFixed(2)} s (signatures: ${verifier}, ${describePool(pool)})`,
  );
  $('result').hidden = false;
  showVerdict($('verdict'), $('bundle-info'), report, verified.bundle);
  showCoverage($('coverage'), report);
  showTrust($('trust-info'), report);
  showWitnessKeys($('witness-keys-info'), report);
  showSigners($('signers-info'), report);
  showCheckpoint($('checkpoint-info'), report, verified.since);
  showWitnesses($('witness-info'), report, verified.witnesses);
  fillSelect('filter-principal', 'principals', distinct(manifests, 'principal'));
  fillSelect('filter-host', 'hosts', distinct(manifests, 'host'));
  showChains($('chains').querySelector('tbody')!, $('chains-note'), report);
  render();
  document.body.dataset.state = report.ok ? 'ok' : 'failed';
  $('verdict').focus();
}

/** Verify pressed (click, Enter or Space): a run, or, before one can start, what is missing, said in the status. */
function pressVerify(): void {
  const why = notReady();
  if (why === undefined) return verify();
  saidNotReady = true;
  announce('progress-status', why);
}

function verify(): void {
  const trust = state.side.trust;
  if (!state.bundle || !trust || trust.length === 0 || !ready()) return;
  dropVerdict();
  const verified: Verified = {
    bundle: state.bundle.name,
    since: state.side.since?.[0]?.name,
    witnesses: state.side.witnesses?.[0]?.name,
  };
  $('error').hidden = true;
  $('result').hidden = true;
  document.body.dataset.state = 'verifying';
  const progress = $<HTMLProgressElement>('progress');
  progress.hidden = false;
  progress.removeAttribute('value');
  // The counter (#progress-count, after the status on the line) changes with every progress message (up to 20 a
  // second): it is not live. What is said is the start, each quarter of the bundle read (when its size is known) and
  // the end.
  announce('progress-status', 'verifying the bundle');
  let quarters = 0;
  // One source for the worker and, handed to it, for its pool of line verifiers (web/worker/line-pool.ts).
  const source = new Blob([__WORKER_SOURCE__], { type: 'text/javascript' });
  const url = URL.createObjectURL(source);
  /** The run ended without a verdict (the worker's coded refusal, or WORKER_FAILED): said in place of progress. */
  const runFailed = (message: string) => {
    progress.hidden = true;
    $('progress-count').textContent = '';
    announce('progress-status', '');
    document.body.dataset.state = 'error';
    fail(message);
    runRefusalShown = true;
  };
  /** The worker could not run or stopped speaking: said, and nothing it might say after is taken. */
  const workerFailed = (message: string) => runFailed(`WORKER_FAILED: ${message}`);
  let worker: Worker;
  try {
    worker = new Worker(url);
  } catch (err) {
    // A browser that refuses the page's worker (a policy against workers, blob: workers refused) throws here.
    workerFailed(errorText(err));
    return;
  } finally {
    URL.revokeObjectURL(url);
  }
  state.worker = worker;
  let pool: PoolState | undefined;
  const manifests: ManifestMark[] = [];
  worker.onmessage = (event: MessageEvent<WorkerMessage>) => {
    // A worker stopped by dropVerdict() has nothing more to say.
    if (state.worker !== worker) return;
    const m = event.data;
    if (m.type === 'pool') {
      pool = m;
      $('progress-count').textContent = `; signatures ${describePool(pool)}`;
    } else if (m.type === 'progress') {
      if (m.totalBytes) {
        progress.value = m.bytes / m.totalBytes;
        const reached = Math.floor((4 * m.bytes) / m.totalBytes);
        if (reached > quarters && reached < 4) {
          quarters = reached;
          announce('progress-status', `${25 * quarters}% of the bundle read`);
        }
      }
      $('progress-count').textContent = `; ${m.lines.toLocaleString('en-US')} lines verified (${describePool(pool)})`;
    } else if (m.type === 'marks') {
      for (const mark of JSON.parse(m.json) as ManifestMark[]) manifests.push(mark);
    } else if (m.type === 'done') {
      worker.terminate();
      // Marks for measuring: verification ends here; drawing the result is the page's own cost.
      performance.mark('handoff-ledger:verified');
      delete state.worker;
      finished(verified, m.report, manifests, m.verifier, m.ms, pool);
      performance.mark('handoff-ledger:rendered');
    } else {
      worker.terminate();
      delete state.worker;
      runFailed(`${m.code}: ${m.message}`);
    }
  };
  const stop = (message: string) => {
    if (state.worker !== worker) return;
    worker.terminate();
    delete state.worker;
    workerFailed(message);
  };
  // An uncaught error in it, or a message that could not be read: its run is over, whatever it would post after.
  worker.onerror = (e) => {
    e.preventDefault();
    stop(e.message || 'the verification worker failed');
  };
  // (Chromium's Worker has no onmessageerror attribute: a listener.)
  worker.addEventListener('messageerror', () => stop('a message from the verification worker could not be read'));
  performance.mark('handoff-ledger:verify');
  const since = state.side.since?.[0]?.text;
  const witnessKeys = state.side.witnesses?.[0];
  const quorum = quorumTyped();
  // `?workers=N` and `?batch=N` in the page's address, as `verify --workers N`; the worker checks them.
  const params = new URLSearchParams(location.search);
  const workers = params.get('workers') ?? undefined;
  const batch = params.get('batch') ?? undefined;
  // `?max-bundle-bytes=N` as `verify --max-bundle-bytes N`; else the bound audit-ui was started with, if any.
  const maxBundleBytes =
    params.get('max-bundle-bytes') ?? (servedMaxBundleBytes !== undefined ? String(servedMaxBundleBytes) : undefined);
  const request: VerifyRequest = {
    type: 'verify',
    source: state.bundle.source,
    trust: trust.map(({ name, text }) => ({ name, text })),
    poolSource: source,
    ...(since !== undefined ? { since } : {}),
    ...(witnessKeys ? { witnessKeys } : {}),
    ...(quorum !== undefined ? { quorum } : {}),
    ...(workers !== undefined ? { workers } : {}),
    ...(batch !== undefined ? { batch } : {}),
    ...(maxBundleBytes !== undefined ? { maxBundleBytes } : {}),
    ...auditorSettings(),
  };
  worker.postMessage(request);
}

function wire(): void {
  showLegend($('legend'));
  showDetails($('details'), undefined, undefined);
  // Each file input is hidden behind its button (index.html), which opens its chooser. Once its files are taken the
  // input is cleared: a browser fires no `change` for the same file picked again (a trust file edited, then picked
  // again), so an input left holding it would ignore the edit silently. What is chosen is said under the button.
  const picker = (id: string, choose: string, take: (input: HTMLInputElement) => void) => {
    const input = $<HTMLInputElement>(id);
    $(choose).addEventListener('click', () => input.click());
    input.addEventListener('change', () => {
      take(input);
      input.value = '';
    });
  };
  picker('bundle-input', 'bundle-choose', (input) => {
    const g = gesture();
    if (input.files) settle([takeBundle(bundleFromFiles(filesOfInput(input.files)), g)], g);
  });
  for (const role of SIDE_FILE_ROLES)
    picker(SIDE_FILES[role].input, `${role}-choose`, (input) => {
      const files = Array.from(input.files ?? [], (file) => ({ file, name: file.name }));
      const g = gesture();
      if (files.length > 0) void takeSideFiles(role, files, g).then((refused) => settle([refused], g));
    });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (!e.dataTransfer) return;
    // Text or a link dragged from another page is no choice of files: nothing is read, the verdict stays.
    if (![...e.dataTransfer.items].some((item) => item.kind === 'file')) return;
    const g = gesture();
    // What is verified is about to change, as at a pick: the verdict on the files chosen before goes down now, not
    // once the drop's folder has been walked (which a large folder or a slow disk makes long), so an old verdict is
    // never shown beside the files just dropped. A drop then refused whole leaves the files chosen before, and Verify.
    dropVerdict();
    // Verify waits for the drop to be read, as for a picked file (its folder is walked asynchronously): what it holds
    // is not known until then, so a later choice supersedes none of it yet.
    const walking: Reading = { matters: () => true };
    state.reading.add(walking);
    refreshPicked();
    const reading = readDrop(e.dataTransfer.items).finally(() => {
      state.reading.delete(walking);
      refreshPicked();
    });
    void reading.then(async (got) => {
      const refusals = [takeBundle(got.bundle, g)];
      // The files of each kind dropped together are given together: several trust files are all taken.
      const byRole = new Map<SideFileRole, Array<{ file: Blob; name: string }>>();
      for (const file of got.files) {
        const role = roleOfDroppedFile(file.name);
        if (role) byRole.set(role, [...(byRole.get(role) ?? []), { file, name: file.name }]);
        else refusals.push(unplacedFile(file.name));
      }
      for (const [role, files] of byRole) refusals.push(await takeSideFiles(role, files, g));
      settle(refusals, g);
    });
  });
  for (const id of ['quorum-input', 'require-blobs-input', 'expect-input', 'principal-input', 'session-input'])
    $(id).addEventListener('input', () => {
      if (id === 'expect-input') addressExpect = undefined;
      dropVerdict();
      refreshPicked();
    });
  // `?expect=full|filtered` in the page's address presets the choice, as `verify --expect`; another value is kept as
  // given and refused when verifying.
  const asked = new URLSearchParams(location.search).get('expect');
  if (asked === 'full' || asked === 'filtered') $<HTMLSelectElement>('expect-input').value = asked;
  else if (asked !== null) addressExpect = asked;
  $('verify').addEventListener('click', pressVerify);
  $('export-json').addEventListener(
    'click',
    () => state.report && state.verified && exportJson(state.report, state.verified.bundle),
  );
  $('print').addEventListener('click', () => window.print());
  $('filters').addEventListener('input', () => state.report && render());
  $('filters').addEventListener('submit', (e) => e.preventDefault());
  // With a preload, what is chosen is written once audit-ui's files are all in (the line starts empty), not first
  // as "no bundle chosen".
  preloading = preloadOf(document) !== undefined;
  refreshPicked();
  void preload();
}

async function preload(): Promise<void> {
  const p = preloadOf(document);
  if (!p) return;
  // The files audit-ui serves are chosen as the page opens: one gesture, before any the auditor makes.
  const g = gesture();
  preloading = true;
  try {
    if (p.bundle) takeBundle(bundleFromPreload(p.bundle), g);
    // The auditor's settings audit-ui was started with: shown in the fields, where the auditor may change them.
    if (p.requireBlobs) $<HTMLInputElement>('require-blobs-input').checked = true;
    // The page's own address (?expect=) wins over audit-ui's preset, as ?max-bundle-bytes= does.
    if (p.expect !== undefined && !new URLSearchParams(location.search).has('expect'))
      $<HTMLSelectElement>('expect-input').value = p.expect;
    if (p.principal !== undefined) $<HTMLInputElement>('principal-input').value = p.principal;
    if (p.session !== undefined) $<HTMLInputElement>('session-input').value = p.session;
    if (p.maxBundleBytes !== undefined) servedMaxBundleBytes = p.maxBundleBytes;
    refreshPicked();
    const served = async (role: SideFileRole, url: string, name: string, servedFrom?: readonly string[]) => {
      // audit-ui stopped, the connection dropped, an answer other than the file: said as a file that cannot be read
      // (the CLI's code and words), by the names audit-ui was given.
      const unreadable = (reason: string) => SIDE_FILES[role].unreadable(servedFrom ?? [name], reason);
      let file: Blob;
      try {
        const res = await fetch(new URL(url, location.href), { cache: 'no-store' });
        if (!res.ok) return unreadable(`HTTP ${res.status}`);
        file = await res.blob();
      } catch (err) {
        return unreadable(errorText(err));
      }
      return takeSideFiles(role, [{ file, name, ...(servedFrom ? { servedFrom } : {}) }], g);
    };
    const refusals: Array<string | undefined> = [];
    if (p.trust) refusals.push(await served('trust', p.trust.url, 'served by audit-ui', p.trust.names));
    if (p.since) refusals.push(await served('since', p.since.url, p.since.name));
    if (p.witnessKeys) {
      refusals.push(await served('witnesses', p.witnessKeys.url, p.witnessKeys.name));
      $<HTMLInputElement>('quorum-input').value = String(p.witnessKeys.quorum);
      refreshPicked();
    }
    settle(refusals, g);
  } finally {
    // Said once, now: what audit-ui served, or what is left of it once refused.
    preloading = false;
    refreshPicked();
  }
  if (ready()) verify();
}

wire();
