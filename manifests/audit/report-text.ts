/**
 * The auditor's words: one finding line and the verdict line, shared by the CLI (`verify`) and the
 * auditor's page so both say exactly the same thing about a bundle. Isomorphic. Returns terminal-safe lines, each value
 * escaped once where it is put in: a name from a bundle, a trust file or a witness keys file (an origin, a key's or a
 * witness's name) and the bundle's own directory quoted as a JSON string with nothing a terminal acts on left raw
 * (`quoted`: `"a\"b\u202e"`), one shown bare (an id) escaped with `printable`, a finding's message (which quotes its
 * values so) escaped once with `printableOnce`. The CLI prints a line as it is and the page sets it as text (`printableOnce` of a
 * line changes nothing): escaping a whole line again would double every backslash of its quotes (`"a\\\"b"`).
 */
import type { AuditReport, Finding, FindingCode } from './findings.js';
import { counted, printable, printableOnce, quoted } from '../encoding/printable.js';
import { escapeRawInJson, shownValue } from '../../store/errors.js';
import { auditUsage } from './errors.js';
import type { BundleAuditReport } from './verify-chain.js';
import type { CheckpointSummary } from './verify-tree.js';
import type { WitnessSummary } from './verify-witnesses.js';

/**
 * The exported lines' first look at what a JavaScript caller gave them (a report that is none, a finding read from JSON
 * with a field missing): `USAGE` naming the call and the part, before a word is written. Each was a TypeError from
 * inside (`Cannot read properties of null (reading 'line')`), or a line that said something else: a report whose `ok`
 * was the string `'false'` had the verdict OK.
 */
type Fields = Record<string, unknown>;
type FieldType = 'string' | 'number' | 'boolean';

function objectArgument(value: unknown, call: string, name: string, shape: string): Fields {
  if (typeof value !== 'object' || value === null)
    throw auditUsage(`${call}: ${name} must be an object (${shape}), not ${shownValue(value)}`);
  return value as Fields;
}

function checkFields(o: Fields, call: string, name: string, fields: Record<string, FieldType | `${FieldType}?`>): void {
  for (const [key, wanted] of Object.entries(fields)) {
    const type = wanted.replace('?', '');
    const value = o[key];
    if (typeof value === type || (wanted.endsWith('?') && value === undefined)) continue;
    throw auditUsage(`${call}: ${name}.${key} must be a ${type}, not ${shownValue(value)}`);
  }
}

function checkFinding(f: unknown, call: string, name: string): void {
  const finding = objectArgument(f, call, name, "{ code, message, line?, seq? }: one of a report's findings");
  checkFields(finding, call, name, { code: 'string', message: 'string', line: 'number?', seq: 'number?' });
}

/** A scope as the lines print it: absent, or an object whose values are text (a principal's, a session's id). */
function checkScope(scope: unknown, call: string, name: string): void {
  if (scope === undefined) return;
  checkFields(objectArgument(scope, call, name, '{ principal?, session? }'), call, name, {
    principal: 'string?',
    session: 'string?',
  });
}

/** The report's parts `describeVerdict` reads: `ok`, `counts`, and a bundle's `checked` scope when it has one. */
function checkVerdictReport(value: unknown, paint: unknown): void {
  const call = 'describeVerdict';
  const r = objectArgument(value, call, 'the report', "verifyBundle's or verifyChain's report");
  checkFields(r, call, 'the report', { ok: 'boolean' });
  const counts = objectArgument(
    r.counts,
    call,
    "the report's counts",
    '{ lines, manifests, chains, findings, byCode }',
  );
  checkFields(counts, call, 'counts', {
    lines: 'number',
    manifests: 'number',
    chains: 'number',
    findings: 'number',
    blobsChecked: 'number?',
  });
  objectArgument(counts.byCode, call, 'counts.byCode', 'a count per finding code');
  if (r.checked !== undefined) {
    const checked = objectArgument(r.checked, call, "the report's checked", "a bundle report's coverage");
    checkFields(checked, call, 'checked', { bundle: 'string', scopeFrom: 'string' });
    checkScope(checked.scope, call, 'checked.scope');
  }
  const p = objectArgument(paint, call, 'paint', '{ good(word), bad(word) }: functions');
  if (typeof p.good !== 'function' || typeof p.bad !== 'function')
    throw auditUsage(
      `${call}: paint must be { good(word), bad(word) }: functions, not ${shownValue(p.good)} and ${shownValue(p.bad)}`,
    );
}

/** The bundle report's parts `describeCoverage` reads: its `checked` coverage, its findings and their counts. */
function checkCoverageReport(value: unknown, hints: unknown): void {
  const call = 'describeCoverage';
  const r = objectArgument(value, call, 'the report', "verifyBundle's report");
  const checked = objectArgument(r.checked, call, "the report's checked", "a bundle report's coverage");
  checkFields(checked, call, 'checked', {
    blobs: 'boolean',
    blobsRequired: 'boolean',
    summaries: 'boolean',
    scopeFrom: 'string',
  });
  checkScope(checked.scope, call, 'checked.scope');
  const completeness = objectArgument(
    checked.completeness,
    call,
    'checked.completeness',
    '{ checked, sessions | reason }',
  );
  checkFields(completeness, call, 'checked.completeness', { checked: 'boolean' });
  checkFields(
    completeness,
    call,
    'checked.completeness',
    completeness.checked ? { sessions: 'number' } : { reason: 'string' },
  );
  if (!Array.isArray(r.findings))
    throw auditUsage(`${call}: the report's findings must be an array, not ${shownValue(r.findings)}`);
  r.findings.forEach((f, i) => checkFinding(f, call, `findings[${i}]`));
  const counts = objectArgument(
    r.counts,
    call,
    "the report's counts",
    '{ lines, manifests, chains, findings, byCode }',
  );
  objectArgument(counts.byCode, call, 'counts.byCode', 'a count per finding code');
  checkFields(objectArgument(hints, call, 'hints', "{ requireBlobs, scope }: the settings' names"), call, 'hints', {
    requireBlobs: 'string',
    scope: 'string',
  });
}

/**
 * `  CODE (line N, seq S): message`
 * @throws AuditError `USAGE` for a finding that is no object, or whose code or message is no string
 */
export function describeFinding(f: Finding): string {
  checkFinding(f, 'describeFinding', 'the finding');
  const where = [f.line !== undefined ? `line ${f.line}` : undefined, f.seq !== undefined ? `seq ${f.seq}` : undefined]
    .filter(Boolean)
    .join(', ');
  // The message quotes what it names escaped already (`quoted`, `shownValue`): printed as it is, only a character a
  // terminal acts on left raw in it (a line break) escaped, its quotes' backslashes never doubled.
  return `  ${f.code}${where ? ` (${where})` : ''}: ${printableOnce(f.message)}`;
}

/**
 * `bundle "NAME": its unsigned header claims: exported by host H at T, filters F`: what bundle.json says, labelled as
 * the claim it is (nothing signs it; the host that signed each manifest is in its chain's `hosts`). The name (the
 * directory `verify` was given, the folder the page read) quoted, as a refusal names a path (`quoted`).
 */
export function describeBundle(name: string, r: Pick<BundleAuditReport, 'header'>): string {
  const h = r.header;
  if (!h) return `bundle ${quoted(name)}`;
  const filters = Object.keys(h.filters).length > 0 ? escapeRawInJson(JSON.stringify(h.filters)) : 'none';
  return `bundle ${quoted(name)}: its unsigned header claims: exported by host ${printable(h.host)} at ${printable(h.exportedAt)}, filters ${filters}`;
}

/** How a medium marks the verdict word (a terminal colours it); plain text by default. */
export interface VerdictPaint {
  good(word: string): string;
  bad(word: string): string;
}

const plain: VerdictPaint = { good: (w) => w, bad: (w) => w };

/**
 * `verdict: OK — …` or `verdict: FAILED — N findings (CODE n, …) in L lines`; a bundle's report adds how it was
 * checked and who chose the scope, when it has one: ` (filtered bundle: session s1, scope from auditor)`.
 * @throws AuditError `USAGE` for a report (or `paint`) that is none: a part it reads missing or of another type
 */
export function describeVerdict(r: AuditReport | BundleAuditReport, paint: VerdictPaint = plain): string {
  checkVerdictReport(r, paint);
  const byCode = Object.entries(r.counts.byCode)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
  const scope = 'checked' in r && r.checked ? describeBundleScope(r.checked) : undefined;
  const how = scope ? ` (${scope})` : '';
  return r.ok
    ? `verdict: ${paint.good('OK')} — ${counted(r.counts.manifests, 'manifest')} in ${counted(r.counts.chains, 'chain')} verified${r.counts.blobsChecked ? `, ${counted(r.counts.blobsChecked, 'blob')} checked` : ''}${how}`
    : `verdict: ${paint.bad('FAILED')} — ${counted(r.counts.findings, 'finding')} (${byCode}) in ${counted(r.counts.lines, 'line')}${how}`;
}

/**
 * How a bundle was checked and who chose its scope: `filtered bundle: session s1, scope from header`, `full bundle held
 * to session s1, scope from auditor`; nothing for a full bundle without a scope (the whole log, checked whole).
 */
function describeBundleScope(c: BundleAuditReport['checked']): string | undefined {
  const scope = c.scope
    ? Object.entries(c.scope)
        .map(([k, v]) => `${k} ${printable(v)}`)
        .join(', ')
    : undefined;
  if (c.bundle === 'filtered') return `filtered bundle: ${scope ?? 'no scope'}, scope from ${c.scopeFrom}`;
  return scope ? `full bundle held to ${scope}, scope from ${c.scopeFrom}` : undefined;
}

/** How a medium names the auditor's own settings in the coverage line: the CLI's options or the page's fields. */
export interface CoverageHints {
  requireBlobs: string;
  scope: string;
}

/** Step 10's codes: the completeness check failed. */
const COMPLETENESS_CODES: readonly string[] = [
  'SESSION_HEAD_MISSING',
  'SESSION_HEAD_INVALID',
  'SESSION_TAIL_MISSING',
  'SESSION_HEAD_MISMATCH',
] satisfies FindingCode[];

const CLI_HINTS: CoverageHints = { requireBlobs: '--require-blobs', scope: '--principal / --session' };

/**
 * What step 10 cannot show of a filtered bundle held to a principal: the session-heads index is keyed by session, so a
 * session the principal published in, left out whole with its heads.jsonl line, goes unseen (docs/AUDIT.md,
 * "Completeness"). Said beside the heads proven, so that an OK report of such a bundle (even an empty one) never reads
 * as proof that it holds every session of the principal. A full bundle's root covers every chain: nothing to add.
 */
function principalCaveat(c: BundleAuditReport['checked']): string {
  const principal = c.scope?.principal;
  if (principal === undefined || c.bundle !== 'filtered') return '';
  return `; NOT which sessions principal ${printable(principal)} published in: one left out whole, with its heads.jsonl line, goes unseen`;
}

/**
 * `checked: signatures, chain rules, …`: what the audit checked and what it did not (blobs, the scope chains were
 * held to and who declared it, completeness), so a clean verdict never hides what the bundle left out.
 * @throws AuditError `USAGE` for a report (or `hints`) that is none: a part it reads missing or of another type
 */
export function describeCoverage(r: BundleAuditReport, hints: CoverageHints = CLI_HINTS): string {
  checkCoverageReport(r, hints);
  const c = r.checked;
  const blobs = c.blobs
    ? `blobs${c.blobsRequired ? ' (required)' : ''}${c.summaries ? '' : ' (digests and sizes: NOT the summary schema, no checkSummary)'}`
    : `NOT blobs (the bundle carries none; ${hints.requireBlobs} makes that a finding)`;
  const scope = c.scope
    ? `scope ${Object.entries(c.scope)
        .map(([k, v]) => `${k} ${printable(v)}`)
        .join(', ')} (from ${c.scopeFrom})`
    : `no scope (none declared; ${hints.scope} hold chains to one)`;
  // Step 10 ran; whether it proved the heads is its findings' to say: never "proven" beside one of them.
  const codes = findingCodes(r);
  const complete = !c.completeness.checked
    ? `NOT completeness (${c.completeness.reason})`
    : COMPLETENESS_CODES.some((code) => codes.includes(code))
      ? `completeness (checked against the checkpoint: not proven, see the findings)`
      : `completeness (${counted(c.completeness.sessions, 'session head')} proven at the checkpoint${principalCaveat(c)})`;
  return `checked: signatures, chain rules, ${blobs}; ${scope}; ${complete}`;
}

/**
 * `trust: blake3:… (N keys, M checkpoint keys)`: the trust store the bundle was verified under (`checked.trust`: with
 * several trust files, their merge), so a kept report names what it was checked against.
 */
export function describeTrust(r: Pick<BundleAuditReport, 'checked'>): string {
  const t = r.checked.trust;
  return `trust: ${t.digest} (${counted(t.keys, 'key')}, ${counted(t.checkpointKeys, 'checkpoint key')})`;
}

/**
 * `witness keys: blake3:… (N keys, quorum Q)`: the pinned witnesses the checkpoint was held to (`checked.witnesses`),
 * so a kept report names them; undefined when none were given.
 */
export function describeWitnessKeys(r: Pick<BundleAuditReport, 'checked'>): string | undefined {
  const w = r.checked.witnesses;
  return w && `witness keys: ${w.digest} (${counted(w.keys, 'key')}, quorum ${w.quorum})`;
}

/** Signers named on the signers line, per kind; the report's JSON has them all. */
const SIGNERS_SHOWN = 3;

/**
 * `signers: N manifest keys (host keyId ×n, …), M checkpoint keys (host keyId ×n)`: the trusted keys whose signatures
 * verified (`checked.signers`), at most three of each kind by name (the report's JSON lists them all).
 */
export function describeSigners(r: Pick<BundleAuditReport, 'checked'>): string {
  const list = (signers: Array<{ host: string; keyId: string; count: number }>, noun: string): string => {
    const named = signers.slice(0, SIGNERS_SHOWN).map((s) => `${printable(s.host)} ${printable(s.keyId)} ×${s.count}`);
    if (signers.length > SIGNERS_SHOWN) named.push(`and ${signers.length - SIGNERS_SHOWN} more`);
    return `${counted(signers.length, noun)}${named.length > 0 ? ` (${named.join(', ')})` : ''}`;
  };
  const s = r.checked.signers;
  return `signers: ${list(s.manifests, 'manifest key')}, ${list(s.checkpoints, 'checkpoint key')}`;
}

/**
 * `checkpoint "origin" size N root R, signed by "key", …`: the checkpoint the bundle was cut at. Origin and key
 * names come from the bundle (a C2SP origin may hold a quote, a backslash, C1 and bidi characters), so they are quoted
 * (`quoted`: a JSON string, what a terminal acts on as `\uXXXX`), escaped once.
 */
export function describeCheckpoint(c: CheckpointSummary): string {
  return `checkpoint ${quoted(c.origin)} size ${c.size} root ${printable(c.root)}, signed by ${c.signedBy.map(quoted).join(', ')}`;
}

/**
 * `witnesses: S of P pinned cosigned (quorum Q): "name+hash" at time, …` (step 9d): which pinned witnesses
 * cosigned the checkpoint, and when each says it did. Names are quoted as `describeCheckpoint` quotes key names.
 */
export function describeWitnesses(w: WitnessSummary): string {
  const who = w.signedBy.map((s) => `${quoted(s.witness)} at ${printable(s.time)}`).join(', ');
  return `witnesses: ${w.signedBy.length} of ${w.pinned} pinned cosigned (quorum ${w.quorum})${who ? `: ${who}` : ''}`;
}

/**
 * The codes of every finding of a report: those of its kept list in their order, then any counted past the list's
 * end (`counts` counts every finding; the list keeps the first `maxFindings`). What a line decided by a finding's
 * presence reads, so that a cut list never turns a failure into a pass.
 */
export function findingCodes(r: Pick<AuditReport, 'findings' | 'counts'>): string[] {
  const counted = r.counts.byCode as Record<string, number | undefined>;
  return [...new Set([...r.findings.map((f) => f.code), ...Object.keys(counted)])].filter((c) => (counted[c] ?? 0) > 0);
}

/**
 * Whether the bundle's checkpoint extends the auditor's earlier one (`--since`), as `verify` and the page say it: with
 * the earlier checkpoint's size (`checked.since.size`) when the report has it, which says which one was held.
 */
export function describeSince(
  r: Pick<AuditReport, 'findings' | 'counts'> & { checked?: { since?: { size: number } } },
  sinceName: string,
): string {
  const failed = findingCodes(r).find((c) => c.startsWith('CONSISTENCY_') || c.startsWith('CHECKPOINT_'));
  const size = r.checked?.since ? ` (size ${r.checked.since.size})` : '';
  // The file's name (a path, a picked file's name) is data, quoted as the bundle's name is: bare, a name holding `: `
  // or a line's words would read as part of the verdict.
  return failed
    ? `earlier checkpoint ${quoted(sinceName)}: not shown to be extended (${failed})${size}`
    : `earlier checkpoint ${quoted(sinceName)}: extended by this bundle's checkpoint${size}`;
}
