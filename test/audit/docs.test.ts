import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { FINDING_CODES } from '../../manifests/audit/findings.js';
import { FSCK_STORE_CODES } from '../../src/ops/maintenance.js';

const doc = readFileSync(new URL('../../docs/AUDIT.md', import.meta.url), 'utf8');
const AUDIT_ERROR_CODES = [
  ...readFileSync(new URL('../../manifests/audit/errors.ts', import.meta.url), 'utf8').matchAll(/\| '([A-Z_]+)'/g),
].map((m) => m[1]!);

describe('docs/AUDIT.md', () => {
  it('documents every finding code in its table', () => {
    const missing = Object.keys(FINDING_CODES).filter((code) => !doc.includes(`| \`${code}\` |`));
    expect(missing).toEqual([]);
  });

  it('documents every audit error code in its table', () => {
    expect(AUDIT_ERROR_CODES.length).toBeGreaterThan(3);
    expect(AUDIT_ERROR_CODES.filter((code) => !doc.includes(`| \`${code}\` |`))).toEqual([]);
  });

  it('documents every fsck store-only code in its table', () => {
    const missing = Object.keys(FSCK_STORE_CODES).filter((code) => !doc.includes(`| \`${code}\` |`));
    expect(missing).toEqual([]);
  });

  // The three above find each code of the code in a table; this one the other way: no row names a code that went.
  it('names in its tables no code that is not a finding, fsck store or audit error code', () => {
    const known = new Set([...Object.keys(FINDING_CODES), ...Object.keys(FSCK_STORE_CODES), ...AUDIT_ERROR_CODES]);
    const rows = [...doc.matchAll(/^\| \(?`([A-Z_]+)`/gm)].map((m) => m[1]!);
    expect(rows.length).toBeGreaterThan(50);
    expect([...new Set(rows)].filter((code) => !known.has(code))).toEqual([]);
  });

  // The fsck section's two lists, each both ways: the auditor's codes fsck reports (FsckAuditCode) and its table of
  // the codes only a store can have (FSCK_STORE_CODES).
  it("gives fsck's codes as maintenance.ts has them: the auditor's it reports, and its own table", () => {
    const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
    const union = (path: string, type: string) =>
      [
        ...(new RegExp(`export type ${type} = Extract<([^>]*)>;`).exec(read(path))?.[1] ?? '').matchAll(/'([A-Z_]+)'/g),
      ].map((m) => m[1]!);
    const audit = [
      ...union('manifests/chain/checker.ts', 'ManifestRuleCode'),
      ...union('src/ops/maintenance.ts', 'FsckAuditCode'),
    ].filter((code) => code in FINDING_CODES);
    expect(audit.length).toBeGreaterThan(10);
    const section = doc.split('## fsck: the same rules on a live store')[1]!.split('\n## ')[0]!;
    const said = /fsck reports that finding's code: ([^.]*)\./.exec(section.replace(/\s+/g, ' '))?.[1] ?? '';
    expect([...said.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!).sort()).toEqual([...audit].sort());
    const table = section.split('| fsck code |')[1]!.split('\n\n')[0]!;
    const rows = [...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]!);
    expect([...rows].sort()).toEqual(Object.keys(FSCK_STORE_CODES).sort());
  });

  it('documents the tail-truncation limitation', () => {
    expect(doc).toMatch(/Tail truncation is undetectable by a bare chain/);
  });

  // test/audit/tamper-tree.test.ts ("a whole chain replayed from another log of the host") shows the findings.
  it("documents whole-chain replay as a limitation of bare chains, which a full bundle's checkpoint closes", () => {
    const limitations = doc.split('## Limitations')[1]!.split('\n## ')[0]!;
    const bullet = limitations.split('\n- ').find((b) => b.startsWith('**Whole-chain replay'));
    expect(bullet).toBeDefined();
    expect(bullet).not.toMatch(/undetectable in an unfiltered bundle/);
    for (const code of ['TREE_SIZE_MISMATCH', 'TREE_ROOT_MISMATCH', 'SESSION_HEAD_MISMATCH', 'OUT_OF_SCOPE'])
      expect(bullet).toContain(`\`${code}\``);
  });
});
