/**
 * The history picture's model, built from a report and the manifests that passed the per-line steps:
 * one row per session, one mark per manifest (at its seq), each with a state; forks (two ids at one seq)
 * and gaps (missing seqs) per row. Pure data, no DOM: the drawing (canvas.ts) and the tests use it.
 *
 * One mark per distinct manifest, as the chain tracker keeps one entry per id: a line repeating an earlier
 * one gets no mark of its own (the worker sends none), and its `DUPLICATE` finding is shown on the mark of
 * the line the manifest first appeared on, so the picture grows with the distinct manifests, not the lines.
 */
import type { Finding, FindingCode } from '../../manifests/audit/findings.js';
import type { ManifestMark } from '../protocol.js';

/** verified: no finding; finding: some finding on its line; blob-missing: its summary blob is absent. */
export type MarkState = 'verified' | 'finding' | 'blob-missing';

export interface Mark extends ManifestMark {
  state: MarkState;
  codes: FindingCode[];
  /** Position among the distinct manifests at this seq of the row (0 unless forked). */
  lane: number;
}

export interface Row {
  session: string;
  marks: Mark[];
  maxSeq: number;
  /** Missing seq ranges, inclusive. */
  gaps: Array<[number, number]>;
  /** Seqs with more than one distinct manifest. */
  forks: number[];
}

export interface HistoryModel {
  rows: Row[];
  maxSeq: number;
  /** Every mark by line, for finding links. */
  byLine: Map<number, Mark>;
  /**
   * A `DUPLICATE` finding's line → the line its manifest first appeared on, whose mark it is shown on: one entry
   * per such finding in the report (the report keeps at most `maxFindings`), none per mark.
   */
  firstLines: Map<number, number>;
}

export interface HistoryFilter {
  principal?: string;
  host?: string;
  /** Substring of the session id. */
  session?: string;
  /** ISO timestamps, inclusive (`AFTER_EVERY_TIME`: after every manifest's). */
  from?: string;
  to?: string;
}

/** A bound after every createdAt (`toISOString` of a four-digit year: every one starts with a digit, `~` after it). */
export const AFTER_EVERY_TIME = '~';

/** The line of the mark a finding is shown on: its own, or for a repeated manifest the line it first appeared on. */
export function markLineOf(f: Finding): number | undefined {
  return f.code === 'DUPLICATE' ? (f.evidence?.lines?.[0] ?? f.line) : f.line;
}

/** The mark a finding on `line` is shown on, if it is in the (filtered) picture. */
export function markFor(model: HistoryModel, line: number): Mark | undefined {
  return model.byLine.get(model.firstLines.get(line) ?? line);
}

function stateOf(codes: FindingCode[]): MarkState {
  if (codes.includes('BLOB_MISSING')) return 'blob-missing';
  return codes.length > 0 ? 'finding' : 'verified';
}

export function matches(m: ManifestMark, f: HistoryFilter): boolean {
  return (
    (!f.principal || m.principal === f.principal) &&
    (!f.host || m.host === f.host) &&
    (!f.session || m.session.includes(f.session)) &&
    (!f.from || m.createdAt >= f.from) &&
    (!f.to || m.createdAt <= f.to)
  );
}

export function buildHistory(manifests: ManifestMark[], findings: Finding[], filter: HistoryFilter = {}): HistoryModel {
  const codesByLine = new Map<number, FindingCode[]>();
  const firstLines = new Map<number, number>();
  for (const f of findings) {
    const line = markLineOf(f);
    if (line === undefined) continue;
    if (f.line !== undefined && line !== f.line) firstLines.set(f.line, line);
    const codes = codesByLine.get(line) ?? [];
    if (!codes.includes(f.code)) codes.push(f.code);
    codesByLine.set(line, codes);
  }
  const bySession = new Map<string, Mark[]>();
  for (const m of manifests) {
    const codes = codesByLine.get(m.line) ?? [];
    const list = bySession.get(m.session) ?? [];
    list.push({ ...m, codes, state: stateOf(codes), lane: 0 });
    bySession.set(m.session, list);
  }
  const rows: Row[] = [];
  const byLine = new Map<number, Mark>();
  let maxSeq = 0;
  for (const [session, marks] of [...bySession].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    marks.sort((a, b) => a.seq - b.seq || a.line - b.line);
    const forks: number[] = [];
    const gaps: Array<[number, number]> = [];
    let expected = 0;
    for (let i = 0; i < marks.length;) {
      const seq = marks[i]!.seq;
      if (seq > expected) gaps.push([expected, seq - 1]);
      const ids: string[] = [];
      for (; i < marks.length && marks[i]!.seq === seq; i++) {
        const m = marks[i]!;
        let lane = ids.indexOf(m.id);
        if (lane < 0) lane = ids.push(m.id) - 1;
        m.lane = lane;
        if (matches(m, filter)) byLine.set(m.line, m);
      }
      if (ids.length > 1) forks.push(seq);
      expected = seq + 1;
    }
    // Gaps and forks belong to the whole chain; the filter only chooses which marks are shown.
    const shown = marks.filter((m) => matches(m, filter));
    if (shown.length === 0) continue;
    const rowMax = marks.at(-1)!.seq;
    maxSeq = Math.max(maxSeq, rowMax);
    rows.push({ session, marks: shown, maxSeq: rowMax, gaps, forks });
  }
  return { rows, maxSeq, byLine, firstLines };
}

/** Distinct values of a field, sorted, for the filter menus. */
export function distinct(manifests: ManifestMark[], field: 'principal' | 'host'): string[] {
  return [...new Set(manifests.map((m) => m[field]))].sort();
}
