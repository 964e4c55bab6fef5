/**
 * An unknown key in a summary or a compaction's `covers` is named as an unknown option is: the key (as data, nothing
 * a terminal acts on left raw) and the known field it is a slip of, with the code each refusal had.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeZodError } from '../manifests/format/zod-issue.js';
import { validateSummary } from '../src/summary/summary.js';
import { openLedger, resumeContext } from '../src/index.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { refusal } from './support/settled.js';

describe('an unknown field names the known one it is close to', () => {
  it("publish's summary: SUMMARY_INVALID naming the field and the near name, top level and in a file entry", async () => {
    const top = await refusal(() => validateSummary({ task: 't', state: 's', nextstep: [], nextSteps: [] }, 1e6));
    expect(top).toMatchObject({ code: 'SUMMARY_INVALID' });
    expect(top.message).toBe(`summary: (root): unknown field "nextstep" (did you mean 'nextSteps'?)`);
    const nested = { task: 't', state: 's', nextSteps: [], files: [{ path: 'a.ts', nte: 'x' }] };
    const inFile = await refusal(() => validateSummary(nested, 1e6));
    expect(inFile).toMatchObject({ code: 'SUMMARY_INVALID' });
    expect(inFile.message).toBe(`summary: files.0: unknown field "nte" (did you mean 'note'?)`);
  });

  it('a key near nothing is named without a hint; more than one is counted; a control character is escaped', async () => {
    const key = '\u001b]0;x\u0007\u009b\u202ezz';
    const err = await refusal(() => validateSummary({ task: 't', state: 's', nextSteps: [], [key]: 1, other: 2 }, 1e6));
    expect(err).toMatchObject({ code: 'SUMMARY_INVALID' });
    expect(err.message).toBe('summary: (root): unknown field "\\u001b]0;x\\u0007\\u009b\\u202ezz", and 1 more unknown');
    expect(err.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
  });

  it("resumeContext's summary: INVALID_ARGUMENT naming the near field", async () => {
    const summary = { task: 't', state: 's', nextSteps: [], Decisions: [] };
    const err = await refusal(() =>
      resumeContext({ summary: summary as never, id: `blake3:${'0'.repeat(64)}` as never, seq: 0 }),
    );
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(err.message).toContain(`(root): unknown field "Decisions" (did you mean 'decisions'?)`);
  });

  it("publish's covers: INVALID_ARGUMENT naming the near field; nothing published", async () => {
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      const scope = { principal: 'alice', session: 's1', run: 'r1' };
      const covers = { transcriptThrough: 3, transcriptDigset: `blake3:${'0'.repeat(64)}` };
      const err = await refusal(() => ledger.publish(scope, sampleSummary(), { covers: covers as never }));
      expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(err.message).toBe(`covers: (root): unknown field "transcriptDigset" (did you mean 'transcriptDigest'?)`);
      expect(await ledger.resume(scope)).toBeUndefined();
    } finally {
      await ledger.close();
    }
  });

  it("without the schema, or unescaped (the auditor's findings), zod's words as before", () => {
    const schema = z.strictObject({ alpha: z.number() });
    const parsed = schema.safeParse({ alpha: 1, alpah: 2 });
    expect(describeZodError(parsed.error!, { escaped: true })).toBe('(root): Unrecognized key: "alpah"');
    expect(describeZodError(parsed.error!, { schema })).toBe('(root): Unrecognized key: "alpah"');
    expect(describeZodError(parsed.error!, { escaped: true, schema })).toBe(
      `(root): unknown field "alpah" (did you mean 'alpha'?)`,
    );
  });
});
