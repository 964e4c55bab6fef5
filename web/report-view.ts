/**
 * The report as the page shows it: verdict first, then findings (each linking to its manifest in the
 * history picture), chains, and the selected manifest's fields. Every string from a bundle goes into
 * the page as a Text node (textContent), never as markup, and escaped as the CLI escapes it (control, bidirectional
 * and invisible characters, and line breaks: a bidi override must not reorder a finding into another meaning, and a
 * line break in a bundle's text must not start a line of its own, a forged finding or verdict, inside a finding). The
 * report's lines (report-text.ts) come escaped once, each value as it was put in (a name quoted, `"a\"b\u202e"`):
 * shown as they are (`printableOnce`), as the CLI prints them, never escaped again; a value the page shows bare (a
 * table cell, a manifest's field) is escaped with `printable`. The only line breaks are the page's own, between lines
 * it puts together (`shownLines`); the wording is the CLI's (report-text.ts), and so is each line's text.
 */
import {
  describeBundle,
  describeCheckpoint,
  describeCoverage,
  describeTrust,
  describeSigners,
  describeWitnessKeys,
  describeFinding,
  describeSince,
  findingCodes,
  describeVerdict,
  describeWitnesses,
} from '../manifests/audit/report-text.js';
import type { Finding } from '../manifests/audit/findings.js';
import type { BundleAuditReport } from '../manifests/audit/verify-chain.js';
import { STATE_STYLE } from './history/canvas.js';
import type { Mark, MarkState, Row } from './history/model.js';
import { counted, printable, printableOnce, quoted } from '../manifests/encoding/printable.js';

/** Findings and chains listed in the page; the JSON export always carries the whole report. */
const MAX_LISTED = 2000;

/**
 * Lines the page puts together into one text (an element styled to keep line breaks), each escaped once as the CLI
 * prints a report line (`printableOnce`): a line break inside a line is shown as `\x0a`, as the CLI shows it.
 */
export function shownLines(lines: readonly string[]): string {
  return lines.map(printableOnce).join('\n');
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string,
  attrs: Record<string, string> = {},
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = printable(text);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

export function showVerdict(target: HTMLElement, info: HTMLElement, report: BundleAuditReport, name: string): void {
  target.className = report.ok ? 'ok' : 'failed';
  target.textContent = printableOnce(`${report.ok ? '✓' : '✗'} ${describeVerdict(report)}`);
  info.textContent = printableOnce(describeBundle(name, report));
}

/** What the audit checked and what it did not, in the CLI's words with the page's names for the auditor's settings. */
export function showCoverage(target: HTMLElement, report: BundleAuditReport): void {
  target.textContent = printableOnce(
    describeCoverage(report, { requireBlobs: '"Require blobs"', scope: 'the Principal / Session fields' }),
  );
}

/** The trust the bundle was verified under (the trust files merged), in the CLI's words: `trust: blake3:… (…)`. */
export function showTrust(target: HTMLElement, report: BundleAuditReport): void {
  target.textContent = printableOnce(describeTrust(report));
}

/**
 * The pinned witness keys the checkpoint was held to, in the CLI's words (`witness keys: blake3:… (N keys, quorum Q)`);
 * hidden when none were given.
 */
export function showWitnessKeys(target: HTMLElement, report: BundleAuditReport): void {
  const line = describeWitnessKeys(report);
  target.textContent = line === undefined ? '' : printableOnce(line);
  target.hidden = line === undefined;
}

/** Who signed what verified, in the CLI's words: `signers: N manifest keys (…), M checkpoint keys (…)`. */
export function showSigners(target: HTMLElement, report: BundleAuditReport): void {
  target.textContent = printableOnce(describeSigners(report));
}

/**
 * The checkpoint the bundle was cut at, in the CLI's words, and whether it extends the auditor's earlier
 * one (`--since`); a failure is also a finding in the list.
 */
export function showCheckpoint(target: HTMLElement, report: BundleAuditReport, sinceName: string | undefined): void {
  const c = report.checkpoint;
  const parts: string[] = [];
  // Origin and key names come from the bundle: shown quoted, escaped once, as the CLI prints them.
  if (c) parts.push(describeCheckpoint(c));
  if (sinceName !== undefined) {
    // From every finding's code, not only the kept list's: it may have been cut before the deciding one.
    parts.push(describeSince(report, sinceName));
  }
  target.textContent = shownLines(parts);
  target.hidden = parts.length === 0;
}

/**
 * Step 9d when the auditor pinned witnesses: whether the quorum was met, in words and a mark as well as
 * colour, with the codes of the findings about it (they are in the list too), then the CLI's line naming
 * who cosigned and when.
 */
export function showWitnesses(target: HTMLElement, report: BundleAuditReport, keysName: string | undefined): void {
  target.hidden = keysName === undefined;
  if (keysName === undefined) return;
  const w = report.checkpoint?.witnesses;
  const met = w !== undefined && w.signedBy.length >= w.quorum;
  const codes = findingCodes(report)
    .filter((c) => c.startsWith('WITNESS_') || c.startsWith('CHECKPOINT_'))
    .join(', ');
  target.className = met && !codes ? 'ok' : 'failed';
  const head = `${met ? '✓ witness quorum met' : '✗ witness quorum not met'} (witness keys ${quoted(keysName)})${codes ? `: ${codes}` : ''}`;
  target.textContent = shownLines(w ? [head, describeWitnesses(w)] : [head]);
}

export function showFindings(
  list: HTMLElement,
  note: HTMLElement,
  findings: Finding[],
  report: BundleAuditReport,
  linkable: (line: number) => boolean,
  onShow: (line: number) => void,
): void {
  list.replaceChildren();
  for (const f of findings.slice(0, MAX_LISTED)) {
    const li = el('li', undefined, {
      'data-code': f.code,
      ...(f.line !== undefined ? { 'data-line': String(f.line) } : {}),
    });
    // The CLI's line for the finding, its code in bold: one line, whatever the message carries (escaped once, its
    // quotes of bundle text as they are: `el`'s `printable` is for the code alone, which is plain).
    const text = printableOnce(describeFinding(f).trimStart());
    li.append(el('code', f.code), text.slice(f.code.length));
    if (f.line !== undefined && linkable(f.line)) {
      const button = el('button', 'show manifest', {
        type: 'button',
        'aria-label': `show manifest of line ${f.line}`,
      });
      const line = f.line;
      button.addEventListener('click', () => onShow(line));
      li.append(button);
    }
    list.append(li);
  }
  const notes: string[] = [];
  if (findings.length === 0) notes.push(report.ok ? 'No findings.' : 'No findings match the filters.');
  if (findings.length > MAX_LISTED)
    notes.push(`${counted(findings.length - MAX_LISTED, 'more finding is', 'more findings are')} in the JSON export.`);
  if (report.findingsTruncated)
    notes.push(
      `… ${counted(report.counts.findings - report.findings.length, 'more finding', 'more findings')} not listed`,
    );
  note.textContent = notes.join(' ');
}

export function showChains(body: HTMLElement, note: HTMLElement, report: BundleAuditReport): void {
  body.replaceChildren(
    ...report.chains.slice(0, MAX_LISTED).map((c) => {
      const tr = el('tr');
      for (const v of [
        c.session,
        String(c.entries),
        String(c.headSeq),
        c.head,
        c.principals.join(', '),
        c.hosts.join(', '),
      ])
        tr.append(el('td', v));
      return tr;
    }),
  );
  note.textContent =
    report.chains.length > MAX_LISTED
      ? `${counted(report.chains.length - MAX_LISTED, 'more chain is', 'more chains are')} in the JSON export.`
      : '';
}

export function showDetails(target: HTMLElement, mark: Mark | undefined, row: Row | undefined): void {
  if (!mark || !row) {
    target.textContent = 'No manifest selected.';
    return;
  }
  const dl = el('dl');
  const fields: Array<[string, string]> = [
    ['state', `${STATE_STYLE[mark.state].label}${mark.codes.length ? ` (${mark.codes.join(', ')})` : ''}`],
    ['session', mark.session],
    ['seq', `${mark.seq}${row.forks.includes(mark.seq) ? ' (fork: another manifest has this seq)' : ''}`],
    ['line', String(mark.line)],
    ['principal', mark.principal],
    ['host', mark.host],
    ['created', mark.createdAt],
    ['id', mark.id],
    ['prev', mark.prev ?? '(none: first of its chain)'],
    ['summary', `${mark.summary.digest}, ${mark.summary.size} bytes`],
  ];
  for (const [k, v] of fields) dl.append(el('dt', k), el('dd', v));
  target.replaceChildren(dl);
}

const SVG = 'http://www.w3.org/2000/svg';

/** A small drawing of a state's mark, matching the canvas, for the legend. */
function icon(state: MarkState): SVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', '14');
  svg.setAttribute('height', '14');
  svg.setAttribute('aria-hidden', 'true');
  const colour = STATE_STYLE[state].colour;
  const shape = document.createElementNS(
    SVG,
    state === 'verified' ? 'rect' : state === 'finding' ? 'polygon' : 'circle',
  );
  const attrs: Record<string, string> =
    state === 'verified'
      ? { x: '3', y: '3', width: '8', height: '8', fill: colour }
      : state === 'finding'
        ? { points: '7,1 13,12 1,12', fill: colour }
        : { cx: '7', cy: '7', r: '5', fill: 'none', stroke: colour, 'stroke-width': '2' };
  for (const [k, v] of Object.entries(attrs)) shape.setAttribute(k, v);
  svg.append(shape);
  return svg;
}

export function showLegend(list: HTMLElement): void {
  const items = (Object.keys(STATE_STYLE) as MarkState[]).map((state) => {
    const li = el('li');
    li.append(icon(state), `${STATE_STYLE[state].label} (${STATE_STYLE[state].shape})`);
    return li;
  });
  items.push(el('li', 'fork: purple bar, marks stacked at one seq'), el('li', 'gap: red dashed line'));
  list.replaceChildren(...items);
}

/** Downloads the report in the CLI's `--json` shape. */
export function exportJson(report: BundleAuditReport, name: string): void {
  const blob = new Blob([`${JSON.stringify({ bundle: name, ...report }, null, 2)}\n`], { type: 'application/json' });
  const a = el('a', undefined, { download: `${name || 'bundle'}.audit.json` });
  a.href = URL.createObjectURL(blob);
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}
