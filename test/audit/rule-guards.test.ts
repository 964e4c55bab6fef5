/**
 * Cases a mutation review found no test for: each pins a rule of the verifiers whose removal (a flipped comparison,
 * a dropped check) no other test noticed. Chain rules, the bundle verifier, envelopes, the trust file and ids.
 */
import { describe, expect, it } from 'vitest';
import { verifyBundle, verifyChain } from '../../manifests/audit/verify-chain.js';
import { ChainTracker } from '../../manifests/audit/chain-rules.js';
import { FindingSink } from '../../manifests/audit/findings.js';
import { verifyLineText } from '../../manifests/audit/verify-line.js';
import { nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { MAX_ENVELOPE_BYTES, parseEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import { encodeVerifierKey } from '../../manifests/crypto/note.js';
import { encodeBase64Url } from '../../manifests/encoding/base64.js';
import { MANIFEST_PAYLOAD_TYPE } from '../../manifests/format/manifest.js';
import { checkpointVerifiers, earlierTime, parseTrustStore, restrictiveWindow } from '../../manifests/format/trust.js';
import { parseScope } from '../../src/ledger/scope.js';
import { at, buildBundle, ChainBuilder, makeKey, readerOf } from '../support/bundle-builder.js';

const spec = {
  chains: [
    { session: 's1', principal: 'alice', count: 5 },
    { session: 's2', principal: 'bob', count: 4 },
  ],
};
const found = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);
const codeOf = (f: () => unknown) => {
  try {
    f();
    return 'none';
  } catch (e) {
    return (e as { code?: string }).code;
  }
};

describe('chain rules', () => {
  it("a prev naming another session's manifest at exactly seq - 1 is SESSION_MISMATCH", async () => {
    const b = await buildBundle(spec);
    const lines = [...b.lines];
    const s2 = b.chains.get('s2')!;
    lines.push((await s2.next()).line); // s2#4, line 10
    lines.push((await b.chains.get('s1')!.next({ prev: s2.built[4]!.id })).line); // s1#5 → s2#4, line 11
    expect(found(await verifyChain(lines, { trust: b.trust }))).toEqual(['SESSION_MISMATCH@11']);
  });

  it('a forked entry gets one chain finding (FORK), not also TIME_REVERSED', async () => {
    const b = await buildBundle(spec);
    const s1 = b.chains.get('s1')!;
    const twin = await new ChainBuilder(b.key, { principal: 'alice', session: 's1', run: 'run-2' }).next({
      seq: 4,
      prev: s1.built[3]!.id,
      createdAt: at(1),
    });
    expect(found(await verifyChain([...b.lines, twin.line], { trust: b.trust }))).toEqual(['FORK@10']);
  });

  it('an entry out of order after a gap gets OUT_OF_ORDER, and the gap before it is still named (SEQ_GAP)', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', principal: 'alice', count: 5 }] });
    const [l0, , l2, l3, l4] = b.lines;
    expect(found(await verifyChain([l0!, l3!, l2!, l4!], { trust: b.trust }))).toEqual(['OUT_OF_ORDER@3', 'SEQ_GAP@3']);
  });

  it('heads() and finish() name the same head for a chain forked at its head', async () => {
    const b = await buildBundle(spec);
    const s1 = b.chains.get('s1')!;
    const twin = await new ChainBuilder(b.key, { principal: 'alice', session: 's1', run: 'run-2' }).next({
      seq: 4,
      prev: s1.built[3]!.id,
      createdAt: at(4),
    });
    const tracker = new ChainTracker(new FindingSink(100));
    [...b.lines, twin.line].forEach((text, i) => {
      const o = verifyLineText(i + 1, text, { trust: b.trust, verifier: nobleVerifier });
      if (o.ok) tracker.add(o.entry);
    });
    const heads = tracker.heads().find((h) => h.session === 's1')!;
    expect(heads.head).toBe(tracker.finish(undefined).find((c) => c.session === 's1')!.head);
  });
});

describe('the bundle verifier', () => {
  it('a report with findings is not ok even when maxFindings keeps none of them', async () => {
    const b = await buildBundle(spec);
    const lines = [...b.lines];
    lines.splice(2, 1); // s1#1 gone
    const r = await verifyChain(lines, { trust: b.trust, maxFindings: 0 });
    expect([r.counts.findings > 0, r.ok, r.findings]).toEqual([true, false, []]);
  });

  it("the unsigned header's filters never replace the auditor's own scope", async () => {
    const b = await buildBundle(spec);
    const r = await verifyBundle(readerOf(b.lines, { filters: { session: 's2' } }), {
      trust: b.trust,
      scope: { session: 's1' },
    });
    expect(r.checked.scope).toEqual({ session: 's1' });
    expect(r.chains.map((c) => c.session)).toEqual(['s1']);
  });

  it('COUNT_MISMATCH when manifests.jsonl has more lines than the header counts', async () => {
    const b = await buildBundle(spec);
    const r = await verifyBundle(readerOf(b.lines, { count: b.lines.length - 1 }), { trust: b.trust });
    expect(found(r)).toEqual(['COUNT_MISMATCH@-']);
  });
});

describe('envelopes', () => {
  it('an envelope with no signatures is ENVELOPE_INVALID', () => {
    expect(codeOf(() => parseEnvelope({ payloadType: MANIFEST_PAYLOAD_TYPE, payload: 'AAAA', signatures: [] }))).toBe(
      'ENVELOPE_INVALID',
    );
  });

  it('a signer returning a 63-byte signature fails signEnvelope with KEY_INVALID (nothing is published)', async () => {
    const k = makeKey('host-a');
    await expect(
      signEnvelope(MANIFEST_PAYLOAD_TYPE, new Uint8Array([1]), { ...k.signer, sign: () => new Uint8Array(63) }),
    ).rejects.toMatchObject({ code: 'KEY_INVALID' });
  });

  it('an envelope text over 64 KiB is refused, even a valid envelope padded with spaces', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const padded = b.lines[0]! + ' '.repeat(MAX_ENVELOPE_BYTES);
    expect(codeOf(() => verifyManifestEnvelope(padded, { trust: b.trust }))).toBe('ENVELOPE_INVALID');
  });
});

describe('the trust file', () => {
  const k = makeKey('host-a');

  it('checkpointVerifiers leaves revoked checkpoint keys out (unless asked for them)', () => {
    const vkey = encodeVerifierKey('log.example/x', k.publicKey);
    const trust = parseTrustStore({
      version: 1,
      keys: [],
      checkpointKeys: [
        {
          host: 'host-a',
          keyId: 'cp1',
          vkey,
          notBefore: '2020-01-01T00:00:00.000Z',
          revokedAt: '2025-01-01T00:00:00.000Z',
        },
      ],
    });
    expect(checkpointVerifiers(trust)).toHaveLength(0);
    expect(checkpointVerifiers(trust, undefined, { withRevoked: true })).toHaveLength(1);
  });

  it('restrictiveWindow takes the latest notBefore and the earliest notAfter and revokedAt', () => {
    const a = {
      notBefore: '2020-01-01T00:00:00.000Z',
      notAfter: '2030-01-01T00:00:00.000Z',
      revokedAt: '2029-01-01T00:00:00.000Z',
    };
    const b = {
      notBefore: '2021-01-01T00:00:00.000Z',
      notAfter: '2027-01-01T00:00:00.000Z',
      revokedAt: '2028-01-01T00:00:00.000Z',
    };
    expect(restrictiveWindow(a, b)).toEqual({ notBefore: b.notBefore, notAfter: b.notAfter, revokedAt: b.revokedAt });
    expect(restrictiveWindow(b, a)).toEqual({ notBefore: b.notBefore, notAfter: b.notAfter, revokedAt: b.revokedAt });
    expect(earlierTime(a.notAfter, b.notAfter)).toBe(b.notAfter);
  });

  it('a trust entry whose public key is not 32 bytes is TRUST_INVALID', () => {
    const short = { ...k.trusted, publicKey: encodeBase64Url(new Uint8Array(31)) };
    expect(codeOf(() => parseTrustStore({ version: 1, keys: [short] }))).toBe('TRUST_INVALID');
  });
});

describe('ids', () => {
  it('a null scope is INVALID_ID, not a TypeError', () => {
    expect(() => parseScope(null)).toThrow(expect.objectContaining({ code: 'INVALID_ID' }));
  });
});
