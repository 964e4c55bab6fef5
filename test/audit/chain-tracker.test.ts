/**
 * The chain tracker's shortcut (manifests/audit/chain-rules.ts): a chain whose every link held as its entries arrived
 * is summarised without running the rules over it. Differential: on generated chains, mutated the ways a bundle can
 * be damaged, the findings (in the order they were added) and the summaries equal those of the rules run over every
 * chain whole (`everyChainWhole`).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChainTracker, type AuditScope, type ChainEntry } from '../../manifests/audit/chain-rules.js';
import { FindingSink } from '../../manifests/audit/findings.js';
import type { Digest } from '../../store/hash/digest.js';

const idOf = (n: number): Digest => `blake3:${n.toString(16).padStart(64, '0')}` as Digest;
const timeOf = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();

/** Honest chains interleaved in file order: session k, seq i gets id k*1000+i+1 and time i*10+k. */
function honest(lengths: number[], principals: string[]): ChainEntry[] {
  const out: ChainEntry[] = [];
  const longest = Math.max(0, ...lengths);
  for (let i = 0; i < longest; i++) {
    lengths.forEach((n, k) => {
      if (i >= n) return;
      out.push({
        line: 0,
        id: idOf(k * 1000 + i + 1),
        host: 'h1',
        keyId: 'ed25519:k1',
        principal: principals[(k + i) % principals.length]!,
        session: `s${k}`,
        seq: i,
        prev: i === 0 ? null : idOf(k * 1000 + i),
        createdAt: timeOf(i * 10 + k),
        summary: { digest: idOf(999_999), size: 1 },
      });
    });
  }
  return out;
}

type Mutation = {
  kind: 'drop' | 'duplicate' | 'swap' | 'earlier' | 'reseq' | 'relink' | 'resession' | 'fork';
  at: number;
  to: number;
};

function mutate(entries: ChainEntry[], mutations: Mutation[]): ChainEntry[] {
  const out = entries.map((e) => ({ ...e }));
  let fresh = 500_000;
  for (const m of mutations) {
    if (out.length === 0) break;
    const i = m.at % out.length;
    const j = m.to % out.length;
    const e = out[i]!;
    switch (m.kind) {
      case 'drop':
        out.splice(i, 1);
        break;
      case 'duplicate':
        out.splice(j, 0, { ...e });
        break;
      case 'swap':
        [out[i], out[j]] = [out[j]!, out[i]!];
        break;
      case 'earlier':
        out[i] = { ...e, createdAt: timeOf(-1 - m.to) };
        break;
      case 'reseq':
        out[i] = { ...e, id: idOf(fresh++), seq: m.to % 6 };
        break;
      case 'relink':
        out[i] = { ...e, id: idOf(fresh++), prev: m.to % 3 === 0 ? null : out[j]!.id };
        break;
      case 'resession':
        out[i] = { ...e, id: idOf(fresh++), session: out[j]!.session };
        break;
      case 'fork':
        out.splice(j, 0, { ...e, id: idOf(fresh++), createdAt: timeOf(m.to) });
        break;
    }
  }
  return out.map((e, n) => ({ ...e, line: n + 1 }));
}

function run(entries: ChainEntry[], scope: AuditScope | undefined, everyChainWhole: boolean) {
  const sink = new FindingSink(1000);
  const tracker = new ChainTracker(sink, { everyChainWhole });
  for (const e of entries) tracker.add(e);
  return { kept: tracker.entries, summaries: tracker.finish(scope), findings: sink.findings, counts: sink.counts() };
}

const mutation = fc.record({
  kind: fc.constantFrom('drop', 'duplicate', 'swap', 'earlier', 'reseq', 'relink', 'resession', 'fork'),
  at: fc.nat(200),
  to: fc.nat(200),
}) as fc.Arbitrary<Mutation>;

describe('ChainTracker', () => {
  it('gives the findings and summaries of the rules run over every chain whole, on damaged chains', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }),
        fc.array(mutation, { maxLength: 4 }),
        fc.option(fc.record({ session: fc.constantFrom('s0', 's1', 's9') }), { nil: undefined }),
        (lengths, mutations, scope) => {
          const entries = mutate(honest(lengths, ['alice', 'bob']), mutations);
          expect(run(entries, scope, false)).toEqual(run(entries, scope, true));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('summarises clean chains with no finding, and finds what a damaged one breaks', () => {
    const clean = honest([3, 2], ['alice']);
    expect(run(clean, undefined, false)).toMatchObject({
      findings: [],
      summaries: [
        { session: 's0', entries: 3, head: idOf(3), headSeq: 2, principals: ['alice'], hosts: ['h1'] },
        { session: 's1', entries: 2, head: idOf(1002), headSeq: 1 },
      ],
    });
    // s0 seq 1 (line 3) dropped: s0 seq 2, now on line 4, follows seq 0.
    const gap = run(mutate(clean, [{ kind: 'drop', at: 2, to: 0 }]), undefined, false);
    expect(gap.findings.map((f) => `${f.code}@${f.line}`)).toEqual(['SEQ_GAP@4']);
    expect(gap.summaries[0]).toMatchObject({ session: 's0', entries: 2, headSeq: 2 });
    const dup = run(mutate(clean, [{ kind: 'duplicate', at: 0, to: 4 }]), undefined, false);
    expect(dup.findings.map((f) => `${f.code}@${f.line}`)).toEqual(['DUPLICATE@5']);
    expect(dup.kept).toHaveLength(5);
  });
});
