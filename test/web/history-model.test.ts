import { describe, expect, it } from 'vitest';
import type { Digest } from '../../store/hash/digest.js';
import type { Finding } from '../../manifests/audit/findings.js';
import { buildHistory, distinct, markFor } from '../../web/history/model.js';
import type { ManifestMark } from '../../web/protocol.js';

let next = 0;
function mark(session: string, seq: number, o: Partial<ManifestMark> = {}): ManifestMark {
  next++;
  return {
    line: next,
    id: `blake3:${String(next).padStart(64, '0')}` as Digest,
    host: 'host-a',
    principal: 'alice',
    session,
    seq,
    prev: null,
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
    summary: { digest: `blake3:${'f'.repeat(64)}` as Digest, size: 10 },
    ...o,
  };
}

describe('the history model', () => {
  it('puts each session in a row, sorted, with marks in seq order', () => {
    next = 0;
    const m = [mark('b', 0), mark('a', 1), mark('a', 0), mark('b', 1)];
    const h = buildHistory(m, []);
    expect(h.rows.map((r) => [r.session, r.marks.map((x) => x.seq)])).toEqual([
      ['a', [0, 1]],
      ['b', [0, 1]],
    ]);
    expect(h.rows.every((r) => r.marks.every((x) => x.state === 'verified'))).toBe(true);
    expect(h.maxSeq).toBe(1);
  });

  it('marks a manifest with a finding as finding, and one whose blob is missing as blob-missing', () => {
    next = 0;
    const m = [mark('s', 0), mark('s', 1), mark('s', 2)];
    const findings: Finding[] = [
      { code: 'TIME_REVERSED', line: 2, message: '' },
      { code: 'BLOB_MISSING', line: 3, message: '' },
      { code: 'BLOB_DIGEST', line: 3, message: '' },
    ];
    const [row] = buildHistory(m, findings).rows;
    expect(row!.marks.map((x) => x.state)).toEqual(['verified', 'finding', 'blob-missing']);
    expect(row!.marks[2]!.codes).toEqual(['BLOB_MISSING', 'BLOB_DIGEST']);
  });

  it('finds gaps in the seq numbers and forks at one seq, on the whole chain even when filtered', () => {
    next = 0;
    const m = [mark('s', 0), mark('s', 3), mark('s', 4), mark('s', 4, { principal: 'bob' }), mark('s', 7)];
    const full = buildHistory(m, []).rows[0]!;
    expect(full.gaps).toEqual([
      [1, 2],
      [5, 6],
    ]);
    expect(full.forks).toEqual([4]);
    expect(full.marks.filter((x) => x.seq === 4).map((x) => x.lane)).toEqual([0, 1]);
    const bobs = buildHistory(m, [], { principal: 'bob' }).rows[0]!;
    expect(bobs.marks.map((x) => x.line)).toEqual([4]);
    expect(bobs.gaps).toEqual(full.gaps);
  });

  it('filters by principal, host, session substring and time window; empty rows disappear', () => {
    next = 0;
    const m = [mark('alpha', 0), mark('beta', 0, { host: 'host-b', principal: 'bob' }), mark('alpha', 1)];
    expect(buildHistory(m, [], { host: 'host-b' }).rows.map((r) => r.session)).toEqual(['beta']);
    expect(buildHistory(m, [], { session: 'lph' }).rows.map((r) => r.session)).toEqual(['alpha']);
    const late = buildHistory(m, [], { from: '2026-01-01T00:00:01.000Z' });
    expect(late.rows.map((r) => [r.session, r.marks.length])).toEqual([['alpha', 1]]);
    expect([...late.byLine.keys()]).toEqual([3]);
    expect(distinct(m, 'principal')).toEqual(['alice', 'bob']);
  });

  it("shows a repeated manifest's DUPLICATE finding on the mark of its first line, which the link selects", () => {
    next = 0;
    // Lines 1-2 are marked; lines 3 and 5 repeat line 1 (the worker sends no mark for them); line 4 is another finding.
    const m = [mark('s', 0), mark('s', 1)];
    const repeat = (line: number): Finding => ({
      code: 'DUPLICATE',
      line,
      message: '',
      evidence: { lines: [1], ids: [m[0]!.id] },
    });
    const findings: Finding[] = [repeat(3), { code: 'LINE_NOT_JSON', line: 4, message: '' }, repeat(5)];
    const h = buildHistory(m, findings);
    expect(h.rows[0]!.marks.map((x) => [x.line, x.state, x.codes])).toEqual([
      [1, 'finding', ['DUPLICATE']],
      [2, 'verified', []],
    ]);
    expect(h.byLine.size).toBe(2);
    expect([...h.firstLines]).toEqual([
      [3, 1],
      [5, 1],
    ]);
    expect([3, 4, 5, 1, 2].map((line) => markFor(h, line)?.line)).toEqual([1, undefined, 1, 1, 2]);
    // Filtered out with its first line's mark, and in with it.
    expect(markFor(buildHistory(m, findings, { principal: 'bob' }), 3)).toBeUndefined();
    expect(markFor(buildHistory(m, findings, { principal: 'alice' }), 3)?.line).toBe(1);
  });
});
