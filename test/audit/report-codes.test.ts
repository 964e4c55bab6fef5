/**
 * Lines decided by whether a finding occurred (the page's "earlier checkpoint … extended", its witness mark) read
 * every finding's code from the counts, not only the kept list (its first 100,000 findings), which may have been cut
 * before the one that decides them.
 */
import { describe, expect, it } from 'vitest';
import { describeSince, findingCodes } from '../../manifests/audit/report-text.js';
import type { AuditReport } from '../../manifests/audit/findings.js';

/** A report whose kept findings are all LINE_NOT_JSON, with other codes counted past the cut. */
function cutReport(counted: Record<string, number>): Pick<AuditReport, 'findings' | 'counts'> {
  return {
    findings: [{ code: 'LINE_NOT_JSON', line: 1, message: 'not JSON' }],
    counts: { byCode: { LINE_NOT_JSON: 100_000, ...counted } },
  } as unknown as AuditReport;
}

describe('codes of findings past the kept list', () => {
  it('are among the codes, after those of the list in its order', () => {
    expect(findingCodes(cutReport({ WITNESS_QUORUM_MISSING: 1, CONSISTENCY_INVALID: 2 }))).toEqual([
      'LINE_NOT_JSON',
      'WITNESS_QUORUM_MISSING',
      'CONSISTENCY_INVALID',
    ]);
  });

  it('keep an earlier checkpoint from being called extended when one refutes it', () => {
    expect(describeSince(cutReport({ CONSISTENCY_INVALID: 1 }), 'earlier.note')).toBe(
      'earlier checkpoint "earlier.note": not shown to be extended (CONSISTENCY_INVALID)',
    );
    expect(describeSince(cutReport({}), 'earlier.note')).toBe(
      `earlier checkpoint "earlier.note": extended by this bundle's checkpoint`,
    );
  });
});

describe("the earlier checkpoint's name", () => {
  it("is quoted as the bundle's is: a name is data, never words of the line", () => {
    // Bare, this name read as a checkpoint extended, followed by a refutation the auditor's file never made.
    const name = "x.note: extended by this bundle's checkpoint; y.note\u202e\u001b[2J";
    expect(describeSince(cutReport({ CONSISTENCY_INVALID: 1 }), name)).toBe(
      'earlier checkpoint "x.note: extended by this bundle\'s checkpoint; y.note\\u202e\\u001b[2J": not shown to be extended (CONSISTENCY_INVALID)',
    );
  });
});
