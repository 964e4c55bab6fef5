/**
 * Step 10 on a filtered bundle's heads.jsonl, called directly (manifests/audit/verify-heads.ts): a line whose
 * `session` is not an id is a malformed line, so no session name from the bundle that is not an id reaches a
 * finding (the name of a line that is not an id once carried line breaks and a verdict of its own into the report).
 */
import { describe, expect, it } from 'vitest';
import { FindingSink } from '../../manifests/audit/findings.js';
import { verifySessionHeads } from '../../manifests/audit/verify-heads.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import {
  headValue,
  sessionHeadsLine,
  sessionHeadsRoot,
  sessionKey,
  type SessionHead,
} from '../../manifests/tlog/session-heads.js';

const HEAD = { seq: 1, id: `blake3:${'5'.repeat(64)}` as const } satisfies SessionHead;
// An index of one session: its proof is its leaf alone, and any other session's absence proof names that leaf.
const ROOT = sessionHeadsRoot([{ session: 's1', head: HEAD }]);
const OWN = { session: 's1', head: HEAD, proof: { depth: 0, bitmap: '', siblings: [] } };
const ABSENT = {
  depth: 0,
  bitmap: '',
  siblings: [],
  other: { key: encodeBase64(sessionKey('s1')), value: encodeBase64(headValue(HEAD)) },
};

/** Step 10 on a bundle holding s1's chain (head HEAD), with `lines` as its heads.jsonl. */
async function step10(lines: unknown[]) {
  const reader = memoryBundleReader({
    header: '{}',
    manifests: '',
    treeFiles: { 'heads.jsonl': lines.map((l) => `${JSON.stringify(l)}\n`).join('') },
  });
  const sink = new FindingSink(100);
  const coverage = await verifySessionHeads(
    reader,
    [sessionHeadsLine(ROOT)],
    [{ session: 's1', head: HEAD.id, headSeq: HEAD.seq }],
    true,
    undefined,
    sink,
  );
  return { coverage, findings: sink.findings };
}

/** The reviewer's line: a session name that writes a finding and a verdict of its own. */
const FORGED =
  "zz\n  SESSION_HEAD_INVALID: (none; the lines below are the auditor's notes)\n\nverdict: OK — all heads proven";

describe('heads.jsonl sessions (step 10)', () => {
  it('proves an honest head with no finding', async () => {
    expect(await step10([OWN])).toEqual({ coverage: { checked: true, sessions: 1 }, findings: [] });
  });

  it('takes a line whose session is not an id as malformed: its name is in no finding', async () => {
    const malformed = (line: number) => ({
      code: 'SESSION_HEAD_INVALID',
      message: `heads.jsonl line ${line} is not a well-formed proof`,
    });
    // The proof does not verify: before, the name went whole into that finding's message.
    expect((await step10([OWN, { session: FORGED, head: null, proof: {} }])).findings).toEqual([malformed(2)]);
    // The proof verifies (an absence proof naming s1's leaf): before, the line passed as a session proven absent.
    expect((await step10([OWN, { session: FORGED, head: null, proof: ABSENT }])).findings).toEqual([malformed(2)]);
    expect((await step10([OWN, { session: 'zz', head: null, proof: ABSENT }])).findings).toEqual([]);
    // Not ids either: empty, a space, a bidi override, over 128 characters, not starting alphanumeric.
    for (const session of ['', 's 1', 's\u202e1', `s${'1'.repeat(128)}`, '-s1'])
      expect((await step10([{ session, head: null, proof: ABSENT }, OWN])).findings, session).toEqual([malformed(1)]);
  });
});
