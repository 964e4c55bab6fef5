/**
 * The tamper matrix: each case builds a valid bundle, applies one mutation, and asserts the exact
 * findings (code and line). Unless a case says otherwise the unsigned header is rewritten to match the
 * mutated lines, as an attacker would, so each case shows what the signed chain alone reveals.
 */
import { describe, expect, it } from 'vitest';
import { decodeSummary } from '../../src/summary/summary.js';
import { nobleVerifier, type SignatureVerifier } from '../../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { CHECKPOINT_FINDING_CODES, FINDING_CODES, type FindingCode } from '../../manifests/audit/findings.js';
import { verifyBundle, type VerifyBundleOptions } from '../../manifests/audit/verify-chain.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { serializeEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import { MANIFEST_PAYLOAD_TYPE } from '../../manifests/format/manifest.js';
import {
  at,
  buildBundle,
  ChainBuilder,
  headerFor,
  jsonl,
  makeKey,
  readerOf,
  signPayload,
  trustOf,
  type LayoutOptions,
  type TestBundle,
} from '../support/bundle-builder.js';
import { editEnvelope, flipPayloadBit, flipSignatureBit } from '../support/tamper-cases.js';

const provoked = new Set<FindingCode>();

/** The bundle's layout (readerOf), apart from the auditor's options: verifyBundle refuses an option it does not know. */
const LAYOUT_FIELDS: ReadonlySet<string> = new Set<keyof LayoutOptions>([
  'count',
  'chainCount',
  'blobCount',
  'filters',
  'blobs',
  'text',
  'host',
]);

async function audit(lines: string[], b: TestBundle, o: LayoutOptions & Partial<VerifyBundleOptions> = {}) {
  const options = Object.fromEntries(Object.entries(o).filter(([name]) => !LAYOUT_FIELDS.has(name)));
  const report = await verifyBundle(readerOf(lines, o), { trust: b.trust, ...options });
  for (const f of report.findings) provoked.add(f.code);
  return report;
}

const found = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

function flipLastChar(s: string): string {
  return s.slice(0, -1) + String.fromCharCode(s.charCodeAt(s.length - 1) ^ 1);
}

// s1 (alice) seq 0-4 and s2 (bob) seq 0-3, interleaved: line 2k+1 = s1#k, line 2k+2 = s2#k, line 9 = s1#4.
const spec = {
  chains: [
    { session: 's1', principal: 'alice', count: 5 },
    { session: 's2', principal: 'bob', count: 4 },
  ],
};

describe.each<[string, SignatureVerifier]>([
  ['noble', nobleVerifier],
  ['node:crypto', nodeVerifier],
])('verifyBundle tamper matrix (%s verifier)', (_name, verifier) => {
  const fresh = async () => {
    const b = await buildBundle(spec);
    return {
      b,
      lines: [...b.lines],
      run: (lines: string[], o: LayoutOptions & Partial<VerifyBundleOptions> = {}) =>
        audit(lines, b, { verifier, ...o }),
    };
  };

  it('reports a clean bundle as ok with both chains and their heads', async () => {
    const { b, lines, run } = await fresh();
    const r = await run(lines, { blobs: b.blobs });
    expect(found(r)).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.counts).toMatchObject({ lines: 9, manifests: 9, chains: 2, findings: 0, blobsChecked: 9 });
    expect(r.chains).toEqual([
      {
        session: 's1',
        entries: 5,
        head: b.chains.get('s1')!.built[4]!.id,
        headSeq: 4,
        principals: ['alice'],
        hosts: ['host-a'],
      },
      {
        session: 's2',
        entries: 4,
        head: b.chains.get('s2')!.built[3]!.id,
        headSeq: 3,
        principals: ['bob'],
        hosts: ['host-a'],
      },
    ]);
  });

  describe('flipped bits', () => {
    it('finds SIGNATURE_INVALID for a flipped bit in the payload of a chain head', async () => {
      const { lines, run } = await fresh();
      lines[8] = flipPayloadBit(lines[8]!, '"run":"');
      expect(found(await run(lines))).toEqual(['SIGNATURE_INVALID@9']);
    });

    it('finds SIGNATURE_INVALID and the SEQ_GAP it leaves for a flipped payload bit mid-chain', async () => {
      const { lines, run } = await fresh();
      lines[4] = flipPayloadBit(lines[4]!, '"run":"');
      expect(found(await run(lines))).toEqual(['SIGNATURE_INVALID@5', 'SEQ_GAP@7']);
    });

    it('finds SIGNATURE_INVALID for a flipped bit in the signature', async () => {
      const { lines, run } = await fresh();
      lines[8] = flipSignatureBit(lines[8]!);
      expect(found(await run(lines))).toEqual(['SIGNATURE_INVALID@9']);
    });

    it("finds SIGNATURE_INVALID for a flipped bit in the envelope's key id (the hint must name the signed key)", async () => {
      const { lines, run } = await fresh();
      lines[8] = editEnvelope(lines[8]!, (e) => void (e.signatures[0]!.keyid = flipLastChar(e.signatures[0]!.keyid!)));
      expect(found(await run(lines))).toEqual(['SIGNATURE_INVALID@9']);
    });

    it("finds KEY_UNTRUSTED for a flipped bit in the payload's keyId", async () => {
      const { lines, run } = await fresh();
      lines[8] = flipPayloadBit(lines[8]!, '"keyId":"ed25519:');
      expect(found(await run(lines))).toEqual(['KEY_UNTRUSTED@9']);
    });

    it('finds BLOB_DIGEST for a flipped bit in a summary blob', async () => {
      const { b, lines, run } = await fresh();
      const blobs = new Map(b.blobs);
      const digest = b.chains.get('s2')!.built[1]!.manifest.summary.digest;
      const bytes = Uint8Array.from(blobs.get(digest)!);
      bytes[3]! ^= 1;
      blobs.set(digest, bytes);
      expect(found(await run(lines, { blobs }))).toEqual(['BLOB_DIGEST@4']);
    });
  });

  describe('lines removed, duplicated, reordered, inserted', () => {
    it('finds SEQ_GAP where a line was removed mid-chain', async () => {
      const { lines, run } = await fresh();
      lines.splice(4, 1); // s1#2
      const r = await run(lines);
      expect(found(r)).toEqual(['SEQ_GAP@6']);
      // One missing seq is named alone, not as the range "2..2".
      expect(r.findings[0]!.message).toBe('seq 2 missing before seq 3');
      lines.splice(5, 1); // s1#3 too
      expect((await run(lines)).findings[0]!.message).toBe('seq 2..3 missing before seq 4');
    });

    it('finds SEQ_NOT_ZERO when the first manifest of a chain was removed', async () => {
      const { lines, run } = await fresh();
      lines.splice(1, 1); // s2#0
      expect(found(await run(lines))).toEqual(['SEQ_NOT_ZERO@3']);
    });

    it('cannot see the newest manifest removed when the header is rewritten too (documented limitation)', async () => {
      const { lines, run } = await fresh();
      lines.pop();
      const r = await run(lines);
      expect(r.ok).toBe(true);
      expect(r.chains.find((c) => c.session === 's1')!.headSeq).toBe(3);
    });

    it('finds COUNT_MISMATCH when lines are removed but the header is left as exported', async () => {
      const { lines, run } = await fresh();
      lines.pop();
      expect(found(await run(lines, { count: 9 }))).toEqual(['COUNT_MISMATCH@-']);
    });

    it("finds COUNT_MISMATCH, naming the count, when the header's chain or blob count is not what the bundle holds", async () => {
      const { b, lines, run } = await fresh();
      // A whole chain removed, the manifest count rewritten but not the chain count.
      const s1 = lines.filter((_, i) => i % 2 === 0 || i === 8);
      const r = await run(s1, { chainCount: 2 });
      expect(found(r)).toEqual(['COUNT_MISMATCH@-']);
      expect(r.findings[0]).toMatchObject({
        message: 'bundle.json counts 2 chains; its manifests hold 1 chain',
        evidence: { expected: 2, actual: 1 },
      });
      expect(found(await run(lines, { chainCount: 1 }))).toEqual(['COUNT_MISMATCH@-']);
      // Blobs: one fewer counted than the manifests name, and one more.
      for (const blobCount of [8, 10]) {
        const c = await run(lines, { blobs: b.blobs, blobCount });
        expect(found(c)).toEqual(['COUNT_MISMATCH@-']);
        expect(c.findings[0]!.message).toBe(
          `bundle.json counts ${blobCount} blobs; its manifests name 9 blobs the bundle holds`,
        );
      }
      // A header without counts.blobs says the bundle carries none (it is present iff the bundle does): one that does
      // disagrees with it too.
      const header = headerFor(lines);
      expect(header.counts.blobs).toBeUndefined();
      const uncounted = await verifyBundle(
        memoryBundleReader({ header: JSON.stringify(header), manifests: jsonl(lines), blobs: b.blobs }),
        { trust: b.trust, verifier },
      );
      expect(found(uncounted)).toEqual(['COUNT_MISMATCH@-']);
      expect(uncounted.findings[0]).toMatchObject({
        message: 'bundle.json counts no blobs (it has no counts.blobs); its manifests name 9 blobs the bundle holds',
        evidence: { expected: 0, actual: 9 },
      });
      // A line that does not verify names no chain or blob the auditor can count: fewer held than counted is no finding.
      const spoiled = [...lines];
      spoiled[1] = flipSignatureBit(spoiled[1]!);
      expect(
        found(
          await run(
            spoiled.filter((_, i) => i % 2 === 1),
            { chainCount: 2, blobs: b.blobs, blobCount: 9 },
          ),
        ),
      ).toEqual(['SIGNATURE_INVALID@1', 'SEQ_NOT_ZERO@2']);
    });

    it('finds DUPLICATE for a repeated line, pointing at the first occurrence', async () => {
      const { lines, run } = await fresh();
      lines.splice(5, 0, lines[2]!); // s1#1 again after s1#2
      const r = await run(lines);
      expect(found(r)).toEqual(['DUPLICATE@6']);
      expect(r.findings[0]!.evidence?.lines).toEqual([3]);
    });

    it('finds OUT_OF_ORDER for two reordered lines of one chain', async () => {
      const { lines, run } = await fresh();
      [lines[2], lines[4]] = [lines[4]!, lines[2]!]; // s1#2 now before s1#1
      expect(found(await run(lines))).toEqual(['OUT_OF_ORDER@5']);
    });

    it('finds SIGNATURE_INVALID for an inserted manifest forged under the host key id', async () => {
      const { b, lines, run } = await fresh();
      const forger = makeKey('host-a', 66);
      const forged = new ChainBuilder(
        { ...forger, keyId: b.key.keyId, signer: { ...forger.signer, keyId: b.key.keyId } },
        { principal: 'alice', session: 's1' },
      );
      for (const m of b.chains.get('s1')!.built) forged.built.push(m);
      lines.push((await forged.next()).line); // a well-formed s1#5 that links correctly
      expect(found(await run(lines))).toEqual(['SIGNATURE_INVALID@10']);
    });

    it('finds LINE_NOT_JSON for an inserted non-JSON line and keeps verifying after it', async () => {
      const { lines, run } = await fresh();
      lines.splice(3, 0, 'this is not json');
      const r = await run(lines);
      expect(found(r)).toEqual(['LINE_NOT_JSON@4']);
      expect(r.counts.manifests).toBe(9);
    });

    it('finds LINE_NOT_JSON for an empty line, a byte-order mark, and bytes that are not UTF-8', async () => {
      const { b } = await fresh();
      const bytes = Buffer.concat([
        Buffer.from(`${b.lines[0]}\n\n\ufeff${b.lines[2]}\n`),
        Buffer.from([0xff, 0xfe, 0x0a]),
      ]);
      const r = await verifyBundle(memoryBundleReader({ manifests: bytes }), { trust: b.trust, verifier });
      r.findings.forEach((f) => provoked.add(f.code));
      expect(found(r)).toEqual(['LINE_NOT_JSON@2', 'LINE_NOT_JSON@3', 'LINE_NOT_JSON@4']);
    });
  });

  describe('replays', () => {
    it('finds OUT_OF_SCOPE for a manifest replayed from another session into a one-session bundle', async () => {
      const { b, run } = await fresh();
      const lines = b.chains.get('s1')!.built.map((m) => m.line);
      lines.splice(2, 0, b.chains.get('s2')!.built[0]!.line);
      expect(found(await run(lines, { filters: { session: 's1' }, expect: 'filtered' }))).toEqual(['OUT_OF_SCOPE@3']);
      // The header's filter alone, unconfirmed, is a finding of its own.
      expect(found(await run(lines, { filters: { session: 's1' } }))).toEqual([
        'OUT_OF_SCOPE@3',
        'SCOPE_UNCONFIRMED@-',
      ]);
    });

    it("finds OUT_OF_SCOPE for a manifest replayed from another principal's chain into a principal's bundle", async () => {
      const { b, run } = await fresh();
      const lines = b.chains.get('s1')!.built.map((m) => m.line);
      lines.push(b.chains.get('s2')!.built[0]!.line);
      expect(found(await run(lines, { filters: { principal: 'alice' }, scope: { principal: 'alice' } }))).toEqual([
        'OUT_OF_SCOPE@6',
      ]);
    });

    it('finds DUPLICATE for a manifest replayed into the middle of an unfiltered bundle', async () => {
      const { b, lines, run } = await fresh();
      lines.splice(6, 0, b.chains.get('s2')!.built[0]!.line);
      expect(found(await run(lines))).toEqual(['DUPLICATE@7']);
    });
  });

  describe("the header's filters against the auditor's scope and expectation", () => {
    it('finds SCOPE_UNCONFIRMED for filters only the header declares, and SCOPE_UNEXPECTED for filters against --expect', async () => {
      const { b, run } = await fresh();
      const lines = b.chains.get('s1')!.built.map((m) => m.line);
      expect(found(await run(lines, { filters: { session: 's1' } }))).toEqual(['SCOPE_UNCONFIRMED@-']);
      expect(found(await run(lines, { filters: { session: 's1' }, scope: { session: 's1' } }))).toEqual([]);
      expect(found(await run(lines, { filters: { session: 's1' }, expect: 'filtered' }))).toEqual([]);
      expect(found(await run(lines, { filters: { session: 's1' }, expect: 'full' }))).toEqual(['SCOPE_UNEXPECTED@-']);
      expect(found(await run(lines, { expect: 'filtered' }))).toEqual(['SCOPE_UNEXPECTED@-']);
      expect(found(await run(lines, { expect: 'full' }))).toEqual([]);
    });
  });

  describe('keys', () => {
    it("finds KEY_UNTRUSTED for a manifest signed by another host's trusted key", async () => {
      const { b, lines, run } = await fresh();
      const other = makeKey('host-b', 2);
      lines.push((await b.chains.get('s1')!.next({}, { signWith: other })).line);
      expect(found(await run(lines, { trust: trustOf(b.key.trusted, other.trusted) }))).toEqual(['KEY_UNTRUSTED@10']);
    });

    it('finds KEY_EXPIRED for manifests created at or after notAfter, and before notBefore', async () => {
      const { b, lines, run } = await fresh();
      expect(found(await run(lines, { trust: trustOf({ ...b.key.trusted, notAfter: at(3) }) }))).toEqual([
        'KEY_EXPIRED@7',
        'KEY_EXPIRED@8',
        'KEY_EXPIRED@9',
      ]);
      expect(found(await run(lines, { trust: trustOf({ ...b.key.trusted, notBefore: at(1) }) }))).toEqual([
        'KEY_EXPIRED@1',
        'KEY_EXPIRED@2',
        'SEQ_NOT_ZERO@3',
        'SEQ_NOT_ZERO@4',
      ]);
    });

    it('finds KEY_REVOKED for manifests created at or after revokedAt', async () => {
      const { b, lines, run } = await fresh();
      expect(found(await run(lines, { trust: trustOf({ ...b.key.trusted, revokedAt: at(4) }) }))).toEqual([
        'KEY_REVOKED@9',
      ]);
    });
  });

  describe('validly signed payloads that are not canonical', () => {
    it.each<[string, (payload: string) => string]>([
      ['a duplicate key (JSON.parse keeps the later one)', (p) => p.replace('{', '{"session":"s2",')],
      ['whitespace between tokens', (p) => p.replace(',', ', ')],
      [
        'keys out of order',
        (p) => JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(p) as object).reverse())),
      ],
      ['an unneeded escape', (p) => p.replace('"compaction"', '"\\u0063ompaction"')],
    ])('finds MANIFEST_INVALID for %s', async (_, mutate) => {
      const { b, lines, run } = await fresh();
      const canonical = new TextDecoder().decode((await b.chains.get('s1')!.next()).payload);
      const text = mutate(canonical);
      expect(text).not.toBe(canonical);
      expect(JSON.parse(text)).toEqual(JSON.parse(canonical)); // the same manifest to JSON.parse, other bytes
      lines.push(
        serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, new TextEncoder().encode(text), b.key.signer)),
      );
      expect(found(await run(lines))).toEqual(['MANIFEST_INVALID@10']);
    });
  });

  describe('chain rules on validly signed manifests', () => {
    it('finds FORK for two manifests at one seq, with both envelopes as evidence', async () => {
      const { b, lines, run } = await fresh();
      const s1 = b.chains.get('s1')!;
      const twin = await new ChainBuilder(b.key, { principal: 'alice', session: 's1', run: 'run-2' }).next({
        seq: 4,
        prev: s1.built[3]!.id,
        createdAt: at(4),
      });
      lines.push(twin.line);
      const r = await run(lines);
      expect(found(r)).toEqual(['FORK@10']);
      expect(r.findings[0]!.evidence).toMatchObject({
        lines: [9, 10],
        ids: [s1.built[4]!.id, twin.id],
        envelopes: [lines[8], twin.line],
      });
    });

    it('finds PREV_MISMATCH for a manifest whose prev skips its predecessor', async () => {
      const { b, lines, run } = await fresh();
      const s1 = b.chains.get('s1')!;
      lines.push((await s1.next({ prev: s1.built[3]!.id })).line);
      expect(found(await run(lines))).toEqual(['PREV_MISMATCH@10']);
    });

    it('finds SESSION_MISMATCH for a manifest whose prev is in another session', async () => {
      const { b, lines, run } = await fresh();
      lines.push((await b.chains.get('s1')!.next({ prev: b.chains.get('s2')!.built[3]!.id })).line);
      expect(found(await run(lines))).toEqual(['SESSION_MISMATCH@10']);
    });

    it('finds TIME_REVERSED for a manifest created before its predecessor', async () => {
      const { b, lines, run } = await fresh();
      lines.push((await b.chains.get('s1')!.next({ createdAt: at(2) })).line);
      expect(found(await run(lines))).toEqual(['TIME_REVERSED@10']);
    });

    it('finds OUT_OF_SCOPE for chains outside an explicit scope option', async () => {
      const { lines, run } = await fresh();
      expect(found(await run(lines, { scope: { session: 's2' } }))).toEqual(['OUT_OF_SCOPE@1']);
    });
  });

  describe('hostile lines', () => {
    it('finds LINE_TRUNCATED for a cut-off last line', async () => {
      const { lines, run } = await fresh();
      const r = await run(lines, { text: jsonl(lines).slice(0, -40) });
      expect(found(r)).toEqual(['LINE_TRUNCATED@9']);
      expect(r.chains.find((c) => c.session === 's1')!.headSeq).toBe(3);
    });

    it('finds LINE_TRUNCATED but keeps an intact last line that only lacks its newline', async () => {
      const { lines, run } = await fresh();
      const r = await run(lines, { text: jsonl(lines).slice(0, -1) });
      expect(found(r)).toEqual(['LINE_TRUNCATED@9']);
      expect(r.chains.find((c) => c.session === 's1')!.headSeq).toBe(4);
    });

    it("finds LINE_TRUNCATED and a parsed last line's own finding (SIGNATURE_INVALID, KEY_UNTRUSTED), not only the cut", async () => {
      const { lines, run } = await fresh();
      lines[8] = flipSignatureBit(lines[8]!);
      const r = await run(lines, { text: jsonl(lines).slice(0, -1) });
      expect(found(r)).toEqual(['LINE_TRUNCATED@9', 'SIGNATURE_INVALID@9']);
      expect(r.chains.find((c) => c.session === 's1')!.headSeq).toBe(3);
      const other = (await fresh()).lines;
      other[8] = flipPayloadBit(other[8]!, '"keyId":"ed25519:');
      expect(found(await run(other, { text: jsonl(other).slice(0, -1) }))).toEqual([
        'LINE_TRUNCATED@9',
        'KEY_UNTRUSTED@9',
      ]);
      // A line cut inside its JSON is not JSON because it was cut: LINE_TRUNCATED alone says so.
      expect(found(await run(other, { text: jsonl(other).slice(0, -40) }))).toEqual(['LINE_TRUNCATED@9']);
    });

    it('finds LINE_TOO_LONG for a 10 MB line without parsing it', async () => {
      const { lines, run } = await fresh();
      lines.splice(2, 0, `{"payload":"${'A'.repeat(10 * 1024 * 1024)}"}`);
      expect(found(await run(lines))).toEqual(['LINE_TOO_LONG@3']);
    });

    it('finds ENVELOPE_INVALID for JSON that is not a DSSE envelope', async () => {
      const { lines, run } = await fresh();
      lines.push(
        editEnvelope(lines[0]!, (e) => void ((e.signatures[0] as unknown as Record<string, unknown>).keyid = 1)),
      );
      lines.push(editEnvelope(lines[0]!, (e) => void (e.payload = `${e.payload.slice(0, -4)}====`)));
      expect(found(await run(lines))).toEqual(['ENVELOPE_INVALID@10', 'ENVELOPE_INVALID@11']);
    });

    it('finds MANIFEST_INVALID for a validly signed payload with an extra field', async () => {
      const { b, lines, run } = await fresh();
      const s1 = b.chains.get('s1')!.built;
      lines.push(
        (await signPayload({ ...s1[4]!.manifest, seq: 5, prev: s1[4]!.id, createdAt: at(5), extra: true }, b.key)).line,
      );
      expect(found(await run(lines))).toEqual(['MANIFEST_INVALID@10']);
    });

    it('finds PAYLOAD_TYPE for a valid envelope of another payload type', async () => {
      const { b, lines, run } = await fresh();
      lines.push(
        (await signPayload({ _type: 'https://in-toto.io/Statement/v1' }, b.key, 'application/vnd.in-toto+json')).line,
      );
      expect(found(await run(lines))).toEqual(['PAYLOAD_TYPE@10']);
    });
  });

  describe('blobs', () => {
    it('finds BLOB_MISSING for a manifest whose blob is absent', async () => {
      const { b, lines, run } = await fresh();
      const blobs = new Map(b.blobs);
      blobs.delete(b.manifests[0]!.manifest.summary.digest);
      expect(found(await run(lines, { blobs }))).toEqual(['BLOB_MISSING@1']);
    });

    it('finds BLOB_SIZE for a truncated blob', async () => {
      const { b, lines, run } = await fresh();
      const blobs = new Map(b.blobs);
      const digest = b.manifests[2]!.manifest.summary.digest;
      blobs.set(digest, blobs.get(digest)!.subarray(0, 10));
      expect(found(await run(lines, { blobs }))).toEqual(['BLOB_SIZE@3']);
    });

    it('finds SUMMARY_INVALID for an intact blob that is not a summary', async () => {
      const { b, lines, run } = await fresh();
      const bad = new TextEncoder().encode('{"task":"x"}');
      const m = await b.chains.get('s1')!.next({}, { blob: bad });
      lines.push(m.line);
      const blobs = new Map(b.blobs).set(m.manifest.summary.digest, bad);
      const checkSummary = (bytes: Uint8Array) => {
        try {
          decodeSummary(bytes);
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      };
      expect(found(await run(lines, { blobs, checkSummary }))).toEqual(['SUMMARY_INVALID@10']);
    });
  });
});

describe('the tamper matrix', () => {
  // Runs last (tests in a file run in order), so it sees every case above.
  it('provokes every documented finding code', () => {
    // Step 9 (the signed checkpoint) has its own matrix: test/audit/tamper-tree.test.ts.
    const expected = Object.keys(FINDING_CODES).filter((c) => !CHECKPOINT_FINDING_CODES.includes(c as FindingCode));
    expect([...provoked].sort()).toEqual(expected.sort());
  });
});
