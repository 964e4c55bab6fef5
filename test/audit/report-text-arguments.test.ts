/**
 * The report lines `handoff-ledger/audit` exports (`describeFinding`, `describeVerdict`, `describeCoverage`), given
 * from JavaScript what is no finding or report (null, a report read back from JSON with a part missing): `USAGE`
 * naming the call and the part, never a TypeError from inside, and never a line that says something else (a report
 * whose `ok` was the string 'false' had the verdict OK).
 */
import { describe, expect, it } from 'vitest';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { describeCoverage, describeFinding, describeVerdict } from '../../manifests/audit/index.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { isHandoffLedgerError } from '../../store/errors.js';
import { buildBundle, jsonl } from '../support/bundle-builder.js';

/** What `call` threw: its class, code and message; fails for an uncoded error or none. */
function refusal(call: () => unknown): { name: string; code: string; message: string } {
  try {
    call();
  } catch (err) {
    if (isHandoffLedgerError(err)) return { name: err.name, code: err.code, message: err.message };
    throw new Error(`uncoded: ${String(err)}`, { cause: err });
  }
  throw new Error('no error');
}

const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
const report = await verifyBundle(memoryBundleReader({ manifests: jsonl(b.lines) }), {
  trust: b.trust,
  verifier: nodeVerifier,
  scope: { session: 's1' },
});
const finding = { code: 'SIGNATURE_INVALID' as const, line: 3, seq: 2, message: 'prev does not link' };
const failed = { ...report, ok: false, findings: [finding], counts: { ...report.counts, findings: 1 } };

describe('the report lines refuse what is no finding or report: USAGE naming the part', () => {
  const NOT_OBJECTS: unknown[] = [undefined, null, 5, 'abc', true];
  const cases: Array<[string, () => unknown, RegExp]> = [
    ...NOT_OBJECTS.map((bad): [string, () => unknown, RegExp] => [
      `describeFinding(${String(bad)})`,
      () => describeFinding(bad as never),
      /^describeFinding: the finding must be an object \(\{ code, message, line\?, seq\? \}/,
    ]),
    [
      'describeFinding({})',
      () => describeFinding({} as never),
      /^describeFinding: the finding\.code must be a string, not undefined$/,
    ],
    [
      'describeFinding, no message',
      () => describeFinding({ code: 'SIGNATURE_INVALID' } as never),
      /^describeFinding: the finding\.message must be a string, not undefined$/,
    ],
    [
      'describeFinding, a line that is text',
      () => describeFinding({ ...finding, line: '3' } as never),
      /^describeFinding: the finding\.line must be a number, not "3"$/,
    ],
    ...NOT_OBJECTS.map((bad): [string, () => unknown, RegExp] => [
      `describeVerdict(${String(bad)})`,
      () => describeVerdict(bad as never),
      /^describeVerdict: the report must be an object \(verifyBundle's or verifyChain's report\), not /,
    ]),
    [
      'describeVerdict({})',
      () => describeVerdict({} as never),
      /^describeVerdict: the report\.ok must be a boolean, not undefined$/,
    ],
    // The string 'false' is truthy: this said `verdict: OK`.
    [
      "describeVerdict, ok 'false'",
      () => describeVerdict({ ...failed, ok: 'false' } as never),
      /^describeVerdict: the report\.ok must be a boolean, not "false"$/,
    ],
    [
      'describeVerdict, no counts',
      () => describeVerdict({ ok: true } as never),
      /^describeVerdict: the report's counts must be an object/,
    ],
    [
      'describeVerdict, no byCode',
      () => describeVerdict({ ...report, counts: { ...report.counts, byCode: undefined } } as never),
      /^describeVerdict: counts\.byCode must be an object/,
    ],
    [
      'describeVerdict, a scope that is a number',
      () => describeVerdict({ ...report, checked: { ...report.checked, scope: { session: 5 } } } as never),
      /^describeVerdict: checked\.scope\.session must be a string, not 5$/,
    ],
    [
      'describeVerdict, paint null',
      () => describeVerdict(report, null as never),
      /^describeVerdict: paint must be an object \(\{ good\(word\), bad\(word\) \}/,
    ],
    [
      'describeVerdict, paint without bad',
      () => describeVerdict(report, { good: (w: string) => w } as never),
      /^describeVerdict: paint must be \{ good\(word\), bad\(word\) \}: functions/,
    ],
    ...NOT_OBJECTS.map((bad): [string, () => unknown, RegExp] => [
      `describeCoverage(${String(bad)})`,
      () => describeCoverage(bad as never),
      /^describeCoverage: the report must be an object \(verifyBundle's report\), not /,
    ]),
    [
      'describeCoverage, a chain report (no checked)',
      () => describeCoverage({ ok: true, findings: [], counts: report.counts } as never),
      /^describeCoverage: the report's checked must be an object/,
    ],
    [
      'describeCoverage, no completeness',
      () => describeCoverage({ ...report, checked: { ...report.checked, completeness: null } } as never),
      /^describeCoverage: checked\.completeness must be an object/,
    ],
    [
      'describeCoverage, findings that are none',
      () => describeCoverage({ ...report, findings: undefined } as never),
      /^describeCoverage: the report's findings must be an array, not undefined$/,
    ],
    [
      'describeCoverage, a finding that is null',
      () => describeCoverage({ ...failed, findings: [finding, null] } as never),
      /^describeCoverage: findings\[1\] must be an object/,
    ],
    [
      'describeCoverage, hints null',
      () => describeCoverage(report, null as never),
      /^describeCoverage: hints must be an object/,
    ],
    [
      'describeCoverage, hints without scope',
      () => describeCoverage(report, { requireBlobs: 'x' } as never),
      /^describeCoverage: hints\.scope must be a string, not undefined$/,
    ],
  ];
  it.each(cases)('%s', (_name, call, message) => {
    expect(refusal(call)).toMatchObject({
      name: 'AuditError',
      code: 'USAGE',
      message: expect.stringMatching(message) as string,
    });
  });

  it('a report and a finding as verifyBundle gives them say what they said', () => {
    expect(report.ok).toBe(true);
    expect(describeVerdict(report)).toMatch(/^verdict: OK — 2 manifests in 1 chain verified \(/);
    expect(describeVerdict(failed, { good: (w) => `+${w}`, bad: (w) => `!${w}` })).toMatch(
      /^verdict: !FAILED — 1 finding/,
    );
    expect(describeCoverage(report)).toMatch(/^checked: signatures, chain rules, /);
    expect(describeCoverage(report, { requireBlobs: 'R', scope: 'S' })).toContain(
      'NOT blobs (the bundle carries none; R',
    );
    expect(describeFinding(finding)).toBe('  SIGNATURE_INVALID (line 3, seq 2): prev does not link');
    expect(describeFinding({ code: 'SIGNATURE_INVALID', message: 'm' })).toBe('  SIGNATURE_INVALID: m');
    // A report read back from its JSON (the CLI's --json) says the same.
    const json = JSON.parse(JSON.stringify(report)) as typeof report;
    expect(describeVerdict(json)).toBe(describeVerdict(report));
    expect(describeCoverage(json)).toBe(describeCoverage(report));
  });
});
