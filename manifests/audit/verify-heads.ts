/**
 * Step 10 of the offline audit: completeness against the checkpoint's session-heads index
 * (manifests/tlog/session-heads.ts), whose root the checkpoint commits in its `handoff-ledger/session-heads`
 * extension line (signed by the log's checkpoint key and covered by every witness cosignature).
 *
 *   full bundle      the index recomputed from the chains' heads has the checkpoint's root     SESSION_HEAD_MISMATCH
 *   filtered bundle  per exported chain (and the auditor's --session), heads.jsonl proves its head at the checkpoint
 *                    (or its absence), and the chain ends exactly there                           SESSION_HEAD_MISSING,
 *                                                      SESSION_HEAD_INVALID, SESSION_TAIL_MISSING, SESSION_HEAD_MISMATCH
 *
 * A checkpoint without the line (from before the index) is still a checkpoint: the report says completeness was
 * not checked. Isomorphic.
 */
import { BUNDLE_HEADS_FILE, textLines, type BundleReader } from './bundle.js';
import type { ChainSummary, FindingSink } from './findings.js';
import { encodeBase64 } from '../encoding/base64.js';
import { isValidId } from '../format/id-pattern.js';
import { equalBytes } from '../tlog/merkle.js';
import { buildSessionHeads, sessionHeadsOf, verifySessionHead, type SessionHead } from '../tlog/session-heads.js';

/** What step 10 established, for the report's `checked.completeness`. */
export type CompletenessCoverage =
  | { checked: true; sessions: number }
  | {
      checked: false;
      reason: 'no verified checkpoint' | 'no session-heads line in the checkpoint' | 'malformed session-heads line';
    };

interface HeadsLine {
  head: SessionHead | null;
  proof: unknown;
}

const isHead = (v: unknown): v is SessionHead =>
  typeof v === 'object' &&
  v !== null &&
  Number.isSafeInteger((v as SessionHead).seq) &&
  (v as SessionHead).seq >= 0 &&
  typeof (v as SessionHead).id === 'string';

/**
 * heads.jsonl by session; a line that is not `{ session, head, proof }` with `session` an id (or longer than any proof
 * line: not parsed), or repeats a session, is handed to `bad` (its line number) as it is met. A session is an id as
 * everywhere else (manifests, `--session`, the header's filters): the name goes into findings, and a name that is not
 * one could carry line breaks and text of its own into the report.
 */
function parseHeadsFile(text: string | undefined, bad: (line: number) => void): Map<string, HeadsLine> {
  const bySession = new Map<string, HeadsLine>();
  let i = 0;
  for (const raw of textLines(text ?? '')) {
    i++;
    if (raw?.length === 0) continue;
    let v: { session?: unknown; head?: unknown; proof?: unknown } | null;
    try {
      v = raw === undefined ? null : (JSON.parse(raw) as typeof v);
    } catch {
      v = null;
    }
    if (
      typeof v !== 'object' ||
      v === null ||
      !isValidId(v.session) ||
      !(v.head === null || isHead(v.head)) ||
      bySession.has(v.session)
    ) {
      bad(i);
      continue;
    }
    bySession.set(v.session, { head: v.head, proof: v.proof });
  }
  return bySession;
}

/**
 * Runs step 10 against a checkpoint that passed step 9a (`extensions` are its signed extension lines).
 */
export async function verifySessionHeads(
  reader: BundleReader,
  extensions: readonly string[],
  /** The chains' heads: of every chain in a full bundle, of those in the auditor's scope in a filtered one. */
  chains: ReadonlyArray<Pick<ChainSummary, 'session' | 'head' | 'headSeq'>>,
  filtered: boolean,
  /** The session whose head must be proven though the bundle may hold none of it (`askedSession`), if any. */
  askedSession: string | undefined,
  sink: FindingSink,
  /** Every chain's head in the bundle, in the auditor's scope or not: a finding names a chain held out of scope. */
  held: ReadonlyArray<Pick<ChainSummary, 'session' | 'headSeq'>> = chains,
): Promise<CompletenessCoverage> {
  const root = sessionHeadsOf(extensions);
  if (root === undefined) return { checked: false, reason: 'no session-heads line in the checkpoint' };
  if (root === 'invalid') {
    sink.add({
      code: 'SESSION_HEAD_INVALID',
      message: 'the checkpoint has a malformed or repeated handoff-ledger/session-heads line',
    });
    return { checked: false, reason: 'malformed session-heads line' };
  }
  if (!filtered) {
    // Every chain is here: the index of their heads must be the committed one (a missing chain, a missing tail,
    // a replaced head all change it).
    const computed = buildSessionHeads(
      chains.map((c) => ({ session: c.session, head: { seq: c.headSeq, id: c.head } })),
    ).root;
    if (!equalBytes(computed, root))
      sink.add({
        code: 'SESSION_HEAD_MISMATCH',
        message: "the chains' heads do not hash to the checkpoint's session-heads root",
        evidence: { expected: encodeBase64(root), actual: encodeBase64(computed) },
      });
    return { checked: true, sessions: chains.length };
  }
  const bySession = parseHeadsFile(await reader.treeFile?.(BUNDLE_HEADS_FILE), (line) =>
    sink.add({ code: 'SESSION_HEAD_INVALID', message: `${BUNDLE_HEADS_FILE} line ${line} is not a well-formed proof` }),
  );
  const chainOf = new Map(chains.map((c) => [c.session, c]));
  const heldOf = new Map(held.map((c) => [c.session, c.headSeq]));
  const proven = new Map<string, SessionHead | null>();
  for (const [session, line] of bySession) {
    const r = verifySessionHead(root, session, line.head ?? undefined, line.proof);
    if (r.ok) proven.set(session, line.head);
    else
      sink.add({
        code: 'SESSION_HEAD_INVALID',
        ...(chainOf.has(session) ? { chain: session } : {}),
        message: `the proof that session ${session} ${line.head ? `ends at seq ${line.head.seq}` : 'is absent'} does not verify against the checkpoint: ${r.reason}`,
      });
  }
  // Every exported chain, every session the bundle itself proves a head for (a chain left out whole, its proof kept,
  // is a missing tail too), and the asked-for session.
  const required = new Set([...chains.map((c) => c.session), ...bySession.keys()]);
  if (askedSession !== undefined) required.add(askedSession);
  for (const session of required) {
    const chain = chainOf.get(session);
    const at = chain ? { chain: session } : {};
    if (!bySession.has(session)) {
      sink.add({
        code: 'SESSION_HEAD_MISSING',
        ...at,
        message: `no proof of session ${session}'s head at the checkpoint in ${BUNDLE_HEADS_FILE}`,
      });
      continue;
    }
    if (!proven.has(session)) continue; // SESSION_HEAD_INVALID above
    const head = proven.get(session)!;
    if (head === null) {
      if (chain)
        sink.add({
          code: 'SESSION_HEAD_MISMATCH',
          ...at,
          message: `session ${session} is proven absent at the checkpoint, yet the bundle holds its chain`,
          evidence: { expected: null, actual: chain.head },
        });
    } else if (!chain || chain.headSeq < head.seq) {
      // No chain in scope: the bundle holds none of the session, or holds it outside the scope (OUT_OF_SCOPE).
      const outside = heldOf.get(session);
      sink.add({
        code: 'SESSION_TAIL_MISSING',
        ...at,
        message: `session ${session} has manifests up to seq ${head.seq} at the checkpoint; ${
          chain
            ? `the bundle's chain ends at seq ${chain.headSeq}`
            : outside === undefined
              ? 'the bundle holds none of them'
              : `the bundle's chain (to seq ${outside}) is outside the scope (OUT_OF_SCOPE)`
        }`,
        evidence: { expected: head.seq, actual: chain ? chain.headSeq : null },
      });
    } else if (chain.headSeq !== head.seq || chain.head !== head.id) {
      sink.add({
        code: 'SESSION_HEAD_MISMATCH',
        ...at,
        message: `session ${session}'s chain ends at seq ${chain.headSeq} (${chain.head}), not at the proven head, seq ${head.seq} (${head.id})`,
        evidence: { expected: head.id, actual: chain.head },
      });
    }
  }
  return { checked: true, sessions: required.size };
}
