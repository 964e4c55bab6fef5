/**
 * Step 6 of the offline audit: the chain rules, over manifests that already passed every per-line
 * step (so every field used here is signed by a trusted key); the link rules themselves are shared with
 * fsck and the ledger (../chain/link-rules.ts). Chains are keyed by session: a session
 * has exactly one chain (docs/DESIGN.md, "Core contracts"). Each entry gets at most one chain finding, the
 * most specific, so one tampered line does not drown the report in consequences. Isomorphic.
 */
import type { Digest } from '../../store/hash/digest.js';
import type { ChainSummary, FindingSink } from './findings.js';
import type { VerifiedLine } from './verify-line.js';
import { checkLink, type LinkViolation } from '../chain/link-rules.js';

/**
 * A verified line as the chain rules keep it: its signed fields only, never its text, so that memory grows with
 * the distinct signed manifests and not with the bytes of the bundle (fork evidence texts are read back later).
 */
export type ChainEntry = VerifiedLine;

/** What the bundle claims to contain; a chain outside it is `OUT_OF_SCOPE`. */
export interface AuditScope {
  session?: string | undefined;
  /** Chains in which this principal published at least one manifest. */
  principal?: string | undefined;
}

function inScope(session: string, chain: ChainEntry[], scope: AuditScope | undefined): boolean {
  if (scope?.session !== undefined && session !== scope.session) return false;
  if (scope?.principal !== undefined && !chain.some((e) => e.principal === scope.principal)) return false;
  return true;
}

function verifyForksAndOrder(
  session: string,
  chain: ChainEntry[],
  bySeq: Map<number, ChainEntry[]>,
  sink: FindingSink,
): Set<ChainEntry> {
  const flagged = new Set<ChainEntry>();
  let maxSeq = -1;
  for (const e of chain) {
    const group = bySeq.get(e.seq)!;
    if (group.length > 1 && group[0] !== e) {
      const first = group[0]!;
      sink.add({
        code: 'FORK',
        line: e.line,
        chain: session,
        seq: e.seq,
        message: `two manifests at seq ${e.seq}: lines ${first.line} and ${e.line}`,
        evidence: { lines: [first.line, e.line], ids: [first.id, e.id] },
      });
      flagged.add(e);
    } else if (e.seq < maxSeq) {
      sink.add({
        code: 'OUT_OF_ORDER',
        line: e.line,
        chain: session,
        seq: e.seq,
        message: `seq ${e.seq} appears after seq ${maxSeq} of the same chain`,
        evidence: { expected: maxSeq + 1, actual: e.seq },
      });
      flagged.add(e);
    }
    maxSeq = Math.max(maxSeq, e.seq);
  }
  return flagged;
}

/** The link rules (../chain/link-rules.ts) over each seq group; forks and order were judged before. */
function verifyLinks(
  session: string,
  bySeq: Map<number, ChainEntry[]>,
  byId: Map<Digest, ChainEntry>,
  flagged: Set<ChainEntry>,
  sink: FindingSink,
): void {
  const seqs = [...bySeq.keys()].sort((a, b) => a - b);
  const add = (e: ChainEntry, v: LinkViolation, extra: { lines?: number[] } = {}) =>
    sink.add({
      code: v.code,
      line: e.line,
      chain: session,
      seq: e.seq,
      message: v.message,
      evidence: { expected: v.expected, actual: v.actual, ...extra },
    });
  for (let i = 0; i < seqs.length; i++) {
    const seq = seqs[i]!;
    const group = bySeq.get(seq)!;
    const before = i === 0 ? undefined : bySeq.get(seqs[i - 1]!)![0]!;
    if (!before || before.seq !== seq - 1) {
      const broken = checkLink(before, group[0]!);
      if (broken) {
        add(group[0]!, broken);
        continue;
      }
    }
    if (seq === 0) continue; // the schema already holds prev === null exactly at seq 0
    for (const e of group) {
      if (flagged.size > 0 && flagged.has(e)) continue;
      // With a fork at seq - 1, the parent is the side that e's prev names.
      const linked = e.prev === null ? undefined : byId.get(e.prev);
      const parent = linked && linked.session === session && linked.seq === seq - 1 ? linked : before!;
      const broken = checkLink(parent, e);
      if (!broken) continue;
      if (broken.code === 'PREV_MISMATCH' && linked !== undefined && linked.session !== session) {
        sink.add({
          code: 'SESSION_MISMATCH',
          line: e.line,
          chain: session,
          seq,
          message: `prev links to line ${linked.line} of session ${linked.session}`,
          evidence: { expected: broken.expected, actual: broken.actual },
        });
      } else add(e, broken, broken.code === 'TIME_REVERSED' ? { lines: [parent.line] } : {});
    }
  }
}

/** A chain as the tracker keeps it: its entries in file order, and whether every link so far held. */
interface TrackedChain {
  entries: ChainEntry[];
  /** Seq 0 first, then each entry linked to the one before it by the link rules: the chain has no finding. */
  clean: boolean;
}

/**
 * Step 6 as the entries arrive: `add` takes each verified entry in file (global log) order while the other lines are
 * still being verified (a repeated id is a `DUPLICATE` finding and is not kept), groups it by session and checks its
 * link to the entry before it; `finish` then applies the scope and the chain rules. A chain whose every link held
 * as it arrived (seq 0 first, each next seq, prev the id before, time not reversed) has no finding under the rules,
 * so it is only summarised; the others go through the rules whole. The findings and summaries are those of the
 * rules over all entries at once (differential test: test/audit/chain-tracker.test.ts).
 */
export class ChainTracker {
  /** Every entry kept (repeated ids left out), in file order: what the later steps (blobs) go through. */
  readonly entries: ChainEntry[] = [];
  private readonly byId = new Map<Digest, ChainEntry>();
  private readonly chains = new Map<string, TrackedChain>();

  /**
   * @param options.everyChainWhole run the rules over every chain, clean or not (tests: the shortcut for clean chains
   *   must not change a finding or a summary)
   */
  constructor(
    private readonly sink: FindingSink,
    private readonly options: { everyChainWhole?: boolean } = {},
  ) {}

  /** Takes the next verified entry in file order; a repeated id is a `DUPLICATE` finding and is not kept. */
  add(e: ChainEntry): void {
    const first = this.byId.get(e.id);
    if (first) {
      this.sink.add({
        code: 'DUPLICATE',
        line: e.line,
        chain: e.session,
        seq: e.seq,
        message: `manifest ${e.id} already appeared on line ${first.line}`,
        evidence: { lines: [first.line], ids: [e.id] },
      });
      return;
    }
    this.byId.set(e.id, e);
    this.entries.push(e);
    let chain = this.chains.get(e.session);
    if (!chain) this.chains.set(e.session, (chain = { entries: [], clean: true }));
    if (chain.clean) chain.clean = checkLink(chain.entries[chain.entries.length - 1], e) === undefined;
    chain.entries.push(e);
  }

  /**
   * Every chain's head (its highest seq, the first such entry in file order, as `finish` takes it), in the auditor's
   * scope or not: a full bundle's session-heads root is rebuilt from all of them.
   */
  heads(): Array<Pick<ChainSummary, 'session' | 'head' | 'headSeq'>> {
    const out: Array<Pick<ChainSummary, 'session' | 'head' | 'headSeq'>> = [];
    for (const [session, { entries }] of this.chains) {
      let head = entries[0]!;
      for (const e of entries) if (e.seq > head.seq) head = e;
      out.push({ session, head: head.id, headSeq: head.seq });
    }
    return out;
  }

  /**
   * The chain rules over every entry added, and one summary per in-scope chain. Findings: OUT_OF_SCOPE, FORK,
   * OUT_OF_ORDER, SEQ_NOT_ZERO, SEQ_GAP, PREV_MISMATCH, SESSION_MISMATCH, TIME_REVERSED.
   */
  finish(scope: AuditScope | undefined): ChainSummary[] {
    const { sink, byId } = this;
    const summaries: ChainSummary[] = [];
    for (const [session, { entries: chain, clean }] of this.chains) {
      if (!inScope(session, chain, scope)) {
        sink.add({
          code: 'OUT_OF_SCOPE',
          line: chain[0]!.line,
          chain: session,
          message: `chain of session ${session} is outside the bundle's scope ${JSON.stringify(scope)}`,
          evidence: { lines: chain.map((e) => e.line).slice(0, 100) },
        });
        continue;
      }
      let head = chain[chain.length - 1]!;
      if (!clean || this.options.everyChainWhole) {
        const bySeq = new Map<number, ChainEntry[]>();
        for (const e of chain) {
          const g = bySeq.get(e.seq);
          if (g) g.push(e);
          else bySeq.set(e.seq, [e]);
        }
        const flagged = verifyForksAndOrder(session, chain, bySeq, sink);
        verifyLinks(session, bySeq, byId, flagged, sink);
        let headSeq = 0;
        for (const seq of bySeq.keys()) if (seq > headSeq) headSeq = seq;
        head = bySeq.get(headSeq)![0]!;
      }
      summaries.push({
        session,
        entries: chain.length,
        head: head.id,
        headSeq: head.seq,
        principals: [...new Set(chain.map((e) => e.principal))],
        hosts: [...new Set(chain.map((e) => e.host))],
      });
    }
    return summaries;
  }
}
