/**
 * Steps 8-10 as a matrix: every combination of what the auditor asks (`expect`, `scope`), what the unsigned header
 * declares (`filters`) and what an attacker holding a full bundle (no key) leaves out (whole chains, a chain's newest
 * manifest, a session's `heads.jsonl` line), each bundle's proofs derived from the full one's lines so that every line
 * still has a valid inclusion proof. Whatever the combination, an OK verdict never reports a chain shorter than the
 * log's, never leaves out a session the auditor named on its own (`--session` without `--principal`), and without any
 * scope stands for every chain. The single cases are in tamper-tree.test.ts; this holds their rules to every mix.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { exportBundle } from '../../src/ops/export.js';
import {
  verifyBundle,
  type AuditScope,
  type BundleExpectation,
  type VerifyBundleOptions,
} from '../../manifests/audit/verify-chain.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { describeCoverage } from '../../manifests/audit/report-text.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { deriveFiltered } from '../support/derive-filtered.js';

const payloadOf = (line: string): { session: string; principal: string } =>
  JSON.parse(Buffer.from(JSON.parse(line).payload as string, 'base64').toString('utf8'));
const text = (lines: string[]) => lines.map((l) => `${l}\n`).join('');

let ledger: Ledger;
let trust: TrustStore;
let header: string;
let lines: string[];
let checkpoint: string;
/** Each session's head seq in the log, as the full bundle holds it. */
const truth = new Map<string, number>();

beforeAll(async () => {
  const base = tempDir();
  ledger = await openLedger({ root: join(base, 'store'), host: 'h1', origin: 'example.com/matrix' });
  const publish = (principal: string, session: string, marker: number) =>
    ledger.publish({ principal, session, run: 'r' }, sampleSummary(marker));
  await publish('alice', 's1', 0);
  await publish('bob', 's2', 0);
  await publish('alice', 's1', 1);
  await publish('bob', 's3', 0);
  await ledger.grant('alice', 's2', { by: 'bob' });
  await publish('alice', 's2', 1);
  await publish('alice', 's1', 2);
  await publish('bob', 's3', 1);
  trust = ledger.trustStore();
  await exportBundle(ledger, { out: join(base, 'full') });
  const read = (name: string) => readFileSync(join(base, 'full', name), 'utf8');
  header = read('bundle.json');
  lines = read('manifests.jsonl').split('\n').slice(0, -1);
  checkpoint = read('checkpoint.note');
  for (const line of lines) truth.set(payloadOf(line).session, (truth.get(payloadOf(line).session) ?? -1) + 1);
  // Everything the cases use is in memory now; the store goes with tempDir's cleanup after the first test.
  await ledger.close();
});

const SUBSETS = [[], ['s1'], ['s2'], ['s3'], ['s1', 's2'], ['s1', 's3'], ['s1', 's2', 's3']];
const FILTERS: AuditScope[] = [
  {},
  { session: 's1' },
  { session: 's2' },
  { principal: 'alice' },
  { principal: 'bob' },
  { session: 's1', principal: 'alice' },
  { session: 's2', principal: 'bob' },
];
const SCOPES: Array<AuditScope | undefined> = [
  undefined,
  { session: 's1' },
  { session: 's3' },
  { principal: 'alice' },
  { principal: 'bob' },
  { session: 's1', principal: 'alice' },
  { session: 's3', principal: 'alice' },
];
const EXPECTS: Array<BundleExpectation | undefined> = [undefined, 'full', 'filtered'];

/** The whole bundle verified with `options` (trust added). */
function verifyWhole(options: Omit<VerifyBundleOptions, 'trust'> = {}) {
  return verifyBundle(
    memoryBundleReader({ header, manifests: text(lines), treeFiles: { 'checkpoint.note': checkpoint } }),
    { trust, ...options },
  );
}

/** A filtered bundle as `deriveFiltered` made it, verified by the auditor held to `scope`. */
function verifyFiltered(d: Awaited<ReturnType<typeof deriveFiltered>>, scope: AuditScope) {
  return verifyBundle(
    memoryBundleReader({
      header: d.header,
      manifests: text(d.lines),
      treeFiles: { 'checkpoint.note': checkpoint, 'proofs.jsonl': d.proofs, 'heads.jsonl': d.heads },
    }),
    { trust, verifier: nodeVerifier, scope },
  );
}

describe('the scope matrix: auditor × header × what was left out', () => {
  it('never passes a truncated chain, an asked-for session left out, or an unscoped bundle missing a chain', async () => {
    const full = await verifyWhole();
    expect(full.ok).toBe(true);
    const violations = new Set<string>();
    let passed = 0;
    let refused = 0;
    for (const keep of SUBSETS)
      for (const filters of FILTERS)
        for (const cut of ['nothing', 's1 tail', 's1 middle'] as const)
          for (const dropHead of [false, true]) {
            const d = await deriveFiltered({ header, lines }, full.chains, (s) => keep.includes(s), filters);
            let kept = d.lines;
            let proofs = d.proofs.split('\n').slice(0, -1);
            if (cut !== 'nothing') {
              const s1 = kept.flatMap((l, i) => (payloadOf(l).session === 's1' ? [i] : []));
              const at = cut === 's1 tail' ? s1[s1.length - 1] : s1[1];
              if (at === undefined) continue;
              kept = kept.filter((_, i) => i !== at);
              proofs = proofs.filter((_, i) => i !== at);
            }
            const heads = d.heads
              .split('\n')
              .slice(0, -1)
              .filter((h) => !dropHead || JSON.parse(h).session !== 's1');
            // The attacker makes the unsigned header's counts match what is left.
            const h = JSON.parse(d.header);
            h.counts.manifests = kept.length;
            h.counts.chains = new Set(kept.map((l) => payloadOf(l).session)).size;
            for (const scope of SCOPES)
              for (const expectation of EXPECTS) {
                const r = await verifyBundle(
                  memoryBundleReader({
                    header: JSON.stringify(h),
                    manifests: text(kept),
                    treeFiles: {
                      'checkpoint.note': checkpoint,
                      'proofs.jsonl': text(proofs),
                      'heads.jsonl': text(heads),
                    },
                  }),
                  {
                    trust,
                    verifier: nodeVerifier,
                    ...(scope ? { scope } : {}),
                    ...(expectation ? { expect: expectation } : {}),
                  },
                );
                if (!r.ok) {
                  refused++;
                  continue;
                }
                passed++;
                const at = JSON.stringify({ keep, filters, cut, dropHead, scope, expect: expectation });
                for (const c of r.chains)
                  if (c.headSeq !== truth.get(c.session) || c.entries !== truth.get(c.session)! + 1)
                    violations.add(`chain ${c.session} passed short (${c.entries} entries): ${at}`);
                if (scope?.session !== undefined && scope.principal === undefined && truth.has(scope.session))
                  if (!r.chains.some((c) => c.session === scope.session))
                    violations.add(`the asked-for session ${scope.session} passed left out: ${at}`);
                if (r.checked.scope === undefined && r.chains.length !== truth.size)
                  violations.add(`no scope, yet ${r.chains.length} of ${truth.size} chains passed: ${at}`);
              }
          }
    expect([...violations]).toEqual([]);
    // The matrix holds both kinds: honest filtered bundles pass, tampered ones are refused.
    expect(passed).toBeGreaterThan(50);
    expect(refused).toBeGreaterThan(passed);
  }, 600_000);

  it("says a principal's filtered bundle proves the heads of the sessions it holds, not which sessions the principal published in", async () => {
    const full = await verifyWhole({ verifier: nodeVerifier });
    // Every session alice published in (s1 and s2) left out whole, with its heads.jsonl line: the index, keyed by
    // session, cannot show it (docs/AUDIT.md, "Completeness"), so the report must not read as if it did.
    const d = await deriveFiltered({ header, lines }, full.chains, () => false, { principal: 'alice' });
    const r = await verifyFiltered(d, { principal: 'alice' });
    expect(r.ok).toBe(true);
    expect(describeCoverage(r)).toMatch(
      /; completeness \(0 session heads proven at the checkpoint; NOT which sessions principal alice published in: one left out whole, with its heads\.jsonl line, goes unseen\)$/,
    );
    // A session's filtered bundle and a full one claim no such caveat: the asked-for session's head is proven, and a
    // full bundle's root covers every chain.
    const s1 = await deriveFiltered({ header, lines }, full.chains, (s) => s === 's1', { session: 's1' });
    const one = await verifyFiltered(s1, { session: 's1' });
    expect(describeCoverage(one)).toMatch(/; completeness \(1 session head proven at the checkpoint\)$/);
    const whole = await verifyWhole({ verifier: nodeVerifier, expect: 'full' });
    expect(describeCoverage(whole)).toMatch(/; completeness \(3 session heads proven at the checkpoint\)$/);
  });
});
