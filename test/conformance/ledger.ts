/**
 * The Ledger contract as one reusable suite: the embedded store and PostgreSQL run it unchanged
 * (test/embedded-backend.test.ts, test/pg-backend.test.ts), so publish/resume semantics cannot drift.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { utimes } from 'node:fs/promises';
import { join } from 'node:path';
import type { Ledger } from '../../src/ledger/ledger.js';
import type { OpenLedgerOptions } from '../../src/ledger/options.js';
import { fsck, gc } from '../../src/ops/maintenance.js';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { TieredBlobStore } from '../../src/ledger/blob-tiers.js';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { STREAM_DECODE_FROM, STREAM_SUMMARY_FROM, validateSummary } from '../../src/summary/summary.js';
import { tempDir } from '../support/tmp.js';
import { generateJwk, LocalSigner } from '../../src/keys/local-signer.js';
import { MANIFEST_PAYLOAD_TYPE, manifestId } from '../../manifests/format/manifest-core.js';
import { LedgerError } from '../../src/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import type { AppendRequest, HeadHold } from '../../manifests/log/log.js';

/** An unsigned envelope whose payload names a summary other than any blob a test stores (gc reads that digest). */
/** The id the log stores for an envelope: its payload's manifest id (gc holds every entry to it). */
const idOf = (envelope: string): Digest => manifestId(Buffer.from(JSON.parse(envelope).payload, 'base64'));

function namingOther(label: string): string {
  const summary = { digest: digestOf(new TextEncoder().encode(`not stored: ${label}`)), size: 1 };
  const payload = Buffer.from(JSON.stringify({ session: label, summary })).toString('base64');
  const sig = Buffer.alloc(64).toString('base64');
  return JSON.stringify({ payloadType: MANIFEST_PAYLOAD_TYPE, payload, signatures: [{ keyid: 'ed25519:junk', sig }] });
}

export interface LedgerBackend {
  /** Opens a ledger on this backend's storage (the same storage every call, so a reopen is a restart). */
  open(extra?: Partial<OpenLedgerOptions>): Promise<Ledger>;
  /** Flips one bit of the inline blob `digest` where this backend's log stores it. */
  corruptInlineBlob(ledger: Ledger, digest: Digest): Promise<void>;
  dispose(): Promise<void>;
}

export type LedgerBackendFactory = () => Promise<LedgerBackend>;

const summary = (n: number | string) => ({ task: `task ${n}`, state: `state ${n}`, nextSteps: [`step ${n}`] });

export function ledgerSuite(name: string, factory: LedgerBackendFactory, options: { skip?: boolean } = {}): void {
  describe.skipIf(options.skip)(`Ledger conformance: ${name}`, () => {
    let backend: LedgerBackend | undefined;
    const ledgers: Ledger[] = [];
    const open = async (extra?: Partial<OpenLedgerOptions>) => {
      backend ??= await factory();
      const l = await backend.open(extra);
      ledgers.push(l);
      return l;
    };
    afterEach(async () => {
      for (const l of ledgers.splice(0)) await l.close().catch(() => {});
      await backend?.dispose();
      backend = undefined;
    });
    const scope = { principal: 'alice', session: 'conf-s', run: 'r1' };

    it('publishes and resumes the same summary, also after a restart', async () => {
      let ledger = await open();
      const r = await ledger.publish(scope, summary(1));
      expect(r.seq).toBe(0);
      expect((await ledger.resume(scope))?.summary).toEqual(summary(1));
      await ledger.close();
      ledger = await open();
      expect((await ledger.resume(scope))?.id).toBe(r.id);
      expect((await ledger.publish(scope, summary(2))).seq).toBe(1);
    });

    it('resumes summaries on both sides of STREAM_DECODE_FROM (read whole, decoded as read) exactly, also after a restart', async () => {
      const prose = 'prose "quoted" \\ back\n\ttab é 😀 \u0007 \u2028 ';
      const long = (marker: string, units: number) => ({
        task: `task ${marker}`,
        state: prose.repeat(Math.ceil(units / prose.length)).slice(0, units),
        nextSteps: [`step ${marker}`, 'x'.repeat(60_000)],
        files: [{ path: 'src/a.ts', note: `n "q" ${marker}` }],
      });
      const cases = [long('below', 20_000), long('above', 150_000), long('MiB', 900_000)];
      const sizes = cases.map((c) => validateSummary(c, 8 * 1024 * 1024).bytes.length);
      expect(sizes[0]).toBeLessThan(STREAM_DECODE_FROM);
      expect(sizes[1]).toBeGreaterThanOrEqual(STREAM_DECODE_FROM);
      let ledger = await open({ maxSummaryBytes: 8 * 1024 * 1024 });
      for (const [i, c] of cases.entries()) {
        await ledger.publish({ ...scope, session: `conf-mid-${i}` }, c);
        expect((await ledger.resume({ ...scope, session: `conf-mid-${i}` }))?.summary).toEqual(c);
      }
      await ledger.close();
      ledger = await open({ maxSummaryBytes: 8 * 1024 * 1024 });
      for (const [i, c] of cases.entries()) {
        expect((await ledger.resume({ ...scope, session: `conf-mid-${i}` }))?.summary).toEqual(c);
      }
    });

    it('returns undefined for a session without compactions', async () => {
      const ledger = await open();
      expect(await ledger.resume({ principal: 'alice', session: 'empty' })).toBeUndefined();
    });

    it('links sequential publishes by prev and verifies the history', async () => {
      const ledger = await open();
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await ledger.publish(scope, summary(i))).id);
      const history = await ledger.history(scope);
      expect(history.map((h) => h.id)).toEqual(ids);
      history.forEach((h, i) => expect(h.manifest.prev).toBe(i === 0 ? null : ids[i - 1]));
    });

    it('serializes concurrent publishes into one linear chain', async () => {
      const ledger = await open();
      const receipts = await Promise.all(Array.from({ length: 24 }, (_, i) => ledger.publish(scope, summary(i))));
      expect(receipts.map((r) => r.seq).sort((a, b) => a - b)).toEqual([...Array(24).keys()]);
      expect((await fsck(ledger)).ok).toBe(true);
    });

    it('publishes concurrently into many sessions', async () => {
      const ledger = await open();
      await Promise.all(
        Array.from({ length: 16 }, (_, i) => ledger.publish({ ...scope, session: `many-${i}` }, summary(i))),
      );
      for (let i = 0; i < 16; i++)
        expect((await ledger.resume({ principal: 'alice', session: `many-${i}` }))?.summary.task).toBe(`task ${i}`);
    });

    it('resumes while publishes to the same session commit meanwhile: never a refusal, never going back', async () => {
      const ledger = await open();
      await ledger.publish(scope, summary(0));
      const publishes = 12;
      let publishing = true;
      const writer = (async () => {
        try {
          for (let n = 1; n <= publishes; n++) await ledger.publish(scope, summary(n));
        } finally {
          publishing = false;
        }
      })();
      const seen: number[] = [];
      const reader = (async () => {
        while (publishing) {
          const r = (await ledger.resume(scope))!;
          expect(r.summary).toEqual(summary(r.seq));
          seen.push(r.seq);
        }
      })();
      // Both settle before either is judged: a failed resume must not leave the writer unobserved.
      const [w, r] = await Promise.allSettled([writer, reader]);
      expect(w.status).toBe('fulfilled');
      expect(r).toEqual({ status: 'fulfilled', value: undefined });
      expect(seen.length).toBeGreaterThan(0);
      expect(seen).toEqual([...seen].sort((a, b) => a - b));
      expect((await ledger.resume(scope))?.seq).toBe(publishes);
    });

    it('refuses a stale expectedPrev with CHAIN_CONFLICT', async () => {
      const ledger = await open();
      const first = await ledger.publish(scope, summary(1));
      await ledger.publish(scope, summary(2), { expectedPrev: first.id });
      await expect(ledger.publish(scope, summary(3), { expectedPrev: first.id })).rejects.toMatchObject({
        code: 'CHAIN_CONFLICT',
      });
      expect((await ledger.history(scope)).length).toBe(2);
    });

    it("a publish whose append loses every race is the ledger's CHAIN_CONFLICT, the log's refusal its cause, with or without expectedPrev", async () => {
      const ledger = await open();
      const first = await ledger.publish(scope, summary(1));
      // Each append this ledger makes reaches the log built on a head that is no longer the head, as when another
      // writer committed first: the log's own refusal (CHAIN_CONFLICT), held head or not.
      const log = ledger.log;
      const stale = (r: AppendRequest): AppendRequest => ({ ...r, prev: digestOf(new TextEncoder().encode('moved')) });
      const append = log.append.bind(log);
      const holdHead = log.holdHead?.bind(log);
      let appends = 0;
      Object.assign(log, {
        append: (r: AppendRequest, o?: Parameters<typeof append>[1]) => (appends++, append(stale(r), o)),
        ...(holdHead && {
          holdHead: async (...args: Parameters<typeof holdHead>): Promise<HeadHold | undefined> => {
            const hold = await holdHead(...args);
            return (
              hold && {
                head: hold.head,
                append: (r: AppendRequest) => (appends++, hold.append(stale(r))),
                release: () => hold.release(),
              }
            );
          },
        }),
      });
      try {
        const without = await ledger.publish(scope, summary(2)).catch((e: unknown) => e);
        expect(without).toBeInstanceOf(LedgerError);
        expect(without).toMatchObject({
          code: 'CHAIN_CONFLICT',
          message: `session ${scope.session}: another writer's append came first at each of 8 attempts (each read the head again and signed again); nothing was published: publish again`,
          cause: expect.objectContaining({ code: 'CHAIN_CONFLICT' }),
        });
        expect((without as LedgerError).cause).toBeInstanceOf(ManifestError);
        expect(appends).toBe(8);
        appends = 0;
        const guarded = await ledger.publish(scope, summary(3), { expectedPrev: first.id }).catch((e: unknown) => e);
        expect(guarded).toBeInstanceOf(LedgerError);
        expect(guarded).toMatchObject({
          code: 'CHAIN_CONFLICT',
          message: `session ${scope.session}: the log refused the append on ${first.id} (another writer's append came first), and no other head can be named now; nothing was published: resume the session and go on from its head`,
        });
        expect((guarded as LedgerError).cause).toBeInstanceOf(ManifestError);
        expect(appends).toBe(1);
      } finally {
        Reflect.deleteProperty(log, 'append');
        Reflect.deleteProperty(log, 'holdHead');
      }
      expect((await ledger.resume(scope))?.id).toBe(first.id);
    });

    it('keeps other principals out, honours grants and durable revocation', async () => {
      let ledger = await open();
      await ledger.publish(scope, summary(1));
      await expect(ledger.resume({ principal: 'bob', session: scope.session })).rejects.toMatchObject({
        code: 'UNAUTHORIZED',
      });
      await ledger.grant('bob', scope.session);
      expect((await ledger.resume({ principal: 'bob', session: scope.session }))?.seq).toBe(0);
      await ledger.revoke('bob', scope.session);
      await ledger.close();
      ledger = await open();
      await expect(ledger.resume({ principal: 'bob', session: scope.session })).rejects.toMatchObject({
        code: 'REVOKED',
      });
      expect(await ledger.grants({ principal: 'bob' })).toEqual([
        expect.objectContaining({ session: scope.session, state: 'revoked' }),
      ]);
    });

    it('lists grants filtered by session, by principal, and by both', async () => {
      const ledger = await open();
      await ledger.grant('bob', 's1');
      await ledger.grant('bob', 's2');
      await ledger.grant('carol', 's1');
      await ledger.revoke('carol', 's2');
      await ledger.revoke('dave', '*');
      const key = (g: { principal: string; session: string; state: string }) =>
        `${g.principal}/${g.session}:${g.state}`;
      expect((await ledger.grants()).map(key)).toEqual([
        'bob/s1:granted',
        'bob/s2:granted',
        'carol/s1:granted',
        'carol/s2:revoked',
        'dave/*:revoked',
      ]);
      expect((await ledger.grants({ session: 's1' })).map(key)).toEqual(['bob/s1:granted', 'carol/s1:granted']);
      expect((await ledger.grants({ session: 's2' })).map(key)).toEqual(['bob/s2:granted', 'carol/s2:revoked']);
      expect((await ledger.grants({ session: '*' })).map(key)).toEqual(['dave/*:revoked']);
      expect((await ledger.grants({ session: 's3' })).map(key)).toEqual([]);
      expect((await ledger.grants({ principal: 'carol', session: 's2' })).map(key)).toEqual(['carol/s2:revoked']);
      expect((await ledger.grants({ principal: 'bob', session: 's3' })).map(key)).toEqual([]);
    });

    it('publishes nothing for an invalid summary or a cancelled publish', async () => {
      const ledger = await open();
      await ledger.publish(scope, summary('kept'));
      await expect(ledger.publish(scope, { task: '', state: '', nextSteps: [] })).rejects.toMatchObject({
        code: 'SUMMARY_EMPTY',
      });
      const ac = new AbortController();
      ac.abort();
      await expect(ledger.publish(scope, summary('x'), { signal: ac.signal })).rejects.toMatchObject({
        code: 'CANCELLED',
      });
      expect((await ledger.resume(scope))?.summary.task).toBe('task kept');
    });

    it('an injected signer that throws, or answers with no valid signature, is refused coded and appends nothing', async () => {
      const own = new LocalSigner(generateJwk());
      const other = new LocalSigner(generateJwk());
      let sign: (m: Uint8Array) => unknown = (m) => own.sign(m);
      const signer = { keyId: own.keyId, publicKey: own.publicKey, sign: (m: Uint8Array) => sign(m) as Uint8Array };
      const ledger = await open({ signer });
      const first = await ledger.publish(scope, summary('kept'));
      const kms = new Error('KMS unreachable');
      const cases: Array<[string, (m: Uint8Array) => unknown, string]> = [
        [
          'throws',
          () => {
            throw kms;
          },
          'SIGNER_FAILED',
        ],
        ['rejects', () => Promise.reject(kms), 'SIGNER_FAILED'],
        ['63 bytes', (m) => own.sign(m).subarray(1), 'KEY_INVALID'],
        ['65 bytes', (m) => Uint8Array.of(...own.sign(m), 0), 'KEY_INVALID'],
        ['not bytes', (m) => Array.from(own.sign(m)), 'KEY_INVALID'],
        ['a string', () => 'signature', 'KEY_INVALID'],
        ['undefined', () => undefined, 'KEY_INVALID'],
        ['another key', (m) => other.sign(m), 'KEY_INVALID'],
        ['a flipped bit', (m) => Uint8Array.from(own.sign(m), (b, i) => (i === 0 ? b ^ 1 : b)), 'KEY_INVALID'],
      ];
      for (const [what, fn, code] of cases) {
        sign = fn;
        const err = await ledger.publish(scope, summary(what)).catch((e: unknown) => e);
        expect(err, what).toMatchObject({ code });
        if (code === 'SIGNER_FAILED') expect((err as Error).cause, what).toBe(kms);
      }
      sign = (m) => own.sign(m);
      expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id]);
      expect((await ledger.resume(scope))?.id).toBe(first.id);
      expect((await ledger.publish(scope, summary('next'))).seq).toBe(1);
      expect(await fsck(ledger)).toMatchObject({ ok: true, manifests: 2 });
    });

    it("a publish whose injected signer never answers ends at the caller's abort (CANCELLED), appending nothing and holding no lock", async () => {
      const own = new LocalSigner(generateJwk());
      let hang = false;
      const sign = (m: Uint8Array) => (hang ? new Promise<Uint8Array>(() => {}) : own.sign(m));
      const ledger = await open({ signer: { keyId: own.keyId, publicKey: own.publicKey, sign } });
      const first = await ledger.publish(scope, summary('kept'));
      hang = true;
      const abort = new AbortController();
      const reason = new Error('the caller gave up');
      const publishing = ledger.publish(scope, summary('hung'), { signal: abort.signal });
      setTimeout(() => abort.abort(reason), 50);
      await expect(publishing).rejects.toMatchObject({ code: 'CANCELLED', cause: reason });
      hang = false;
      // The chain's lock is free again: the next publish of the same session goes on at seq 1.
      expect((await ledger.publish(scope, summary('next'))).seq).toBe(1);
      expect((await ledger.history(scope)).map((e) => e.manifest.seq)).toEqual([0, 1]);
      expect((await ledger.history(scope))[0]!.id).toBe(first.id);
    });

    it('reads go on while an injected signer fails, also once trust.json changed (the keys load again at a later read)', async () => {
      const own = new LocalSigner(generateJwk());
      const kms = new Error('KMS unreachable');
      let failing = false;
      const sign = (m: Uint8Array) => {
        if (failing) throw kms;
        return own.sign(m);
      };
      const ledger = await open({ signer: { keyId: own.keyId, publicKey: own.publicKey, sign } });
      const first = await ledger.publish(scope, summary('kept'));
      expect((await ledger.resume(scope))?.id).toBe(first.id);
      failing = true;
      // Another process sharing the root wrote trust.json (PostgreSQL: a read loads the keys again, signing a test).
      const now = new Date();
      await utimes(join(ledger.root, 'trust.json'), now, now);
      expect((await ledger.resume(scope))?.id).toBe(first.id);
      expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id]);
      await expect(ledger.publish(scope, summary('refused'))).rejects.toMatchObject({
        code: 'SIGNER_FAILED',
        cause: kms,
      });
      failing = false;
      expect((await ledger.resume(scope))?.id).toBe(first.id);
      expect((await ledger.publish(scope, summary('next'))).seq).toBe(1);
    });

    it('refuses a signal that is not an AbortSignal with INVALID_ARGUMENT, twice alike, and publishes nothing', async () => {
      const ledger = await open();
      await ledger.publish(scope, summary('kept'));
      // An object shaped like a signal (an `aborted` flag, `addEventListener`) is no AbortSignal either: refused
      // before the operation starts, as the stores it would reach refuse it.
      const signalLike = { aborted: false, addEventListener: () => {}, removeEventListener: () => {} };
      for (const bogus of [{} as AbortSignal, signalLike as unknown as AbortSignal]) {
        for (let i = 0; i < 2; i++) {
          await expect(ledger.publish(scope, summary('x'), { signal: bogus })).rejects.toMatchObject({
            name: 'LedgerError',
            code: 'INVALID_ARGUMENT',
            message: expect.stringMatching(/signal/),
          });
          // Each read called as it is judged: both made at once, the second was left with no handler while the
          // first was awaited.
          for (const read of [
            () => ledger.resume(scope, { signal: bogus }),
            () => ledger.history(scope, { signal: bogus }),
          ])
            await expect(read()).rejects.toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
        }
      }
      expect((await ledger.history(scope)).map((e) => e.manifest.summary.size)).toHaveLength(1);
    });

    describe('small summaries inline in the manifest log', () => {
      const inlineStat = (ledger: Ledger, digest: Digest) => ledger.log.inlineBlobs!.stat(digest);
      const fileTier = (ledger: Ledger) => (ledger.blobs as TieredBlobStore).files;
      const big = { task: 'big', state: 'x'.repeat(4096), nextSteps: ['s'] };

      it('stores a summary up to inlineSummaryBytes in the log and a larger one as a blob, both resumable after a restart', async () => {
        let ledger = await open({ inlineSummaryBytes: 1024 });
        const small = await ledger.publish(scope, summary(1));
        expect(small.digest).toBe(digestOf(validateSummary(summary(1)).bytes));
        expect(await inlineStat(ledger, small.digest)).toMatchObject({ size: small.size });
        expect(await fileTier(ledger).has(small.digest)).toBe(false);
        const large = await ledger.publish({ ...scope, session: 'conf-big' }, big);
        expect(await inlineStat(ledger, large.digest)).toBeUndefined();
        expect(await fileTier(ledger).has(large.digest)).toBe(true);
        await ledger.close();
        ledger = await open({ inlineSummaryBytes: 0 }); // written inline earlier: still read from the log
        expect((await ledger.resume(scope))?.summary).toEqual(summary(1));
        expect((await ledger.resume({ ...scope, session: 'conf-big' }))?.summary).toEqual(big);
        expect(await ledger.blobs.stat(small.digest)).toMatchObject({ digest: small.digest, size: small.size });
        expect(await fsck(ledger)).toMatchObject({ ok: true, manifests: 2, blobsChecked: 2 });
      });

      it('stores inline every summary up to an inlineSummaryBytes above the size summaries stream from', async () => {
        const threshold = STREAM_SUMMARY_FROM * 2;
        const ledger = await open({ inlineSummaryBytes: threshold, maxSummaryBytes: threshold * 2 });
        // Around the size from which a summary is encoded while written, and near the threshold: all inline.
        for (const [i, text] of [STREAM_SUMMARY_FROM - 100, STREAM_SUMMARY_FROM + 10, threshold - 200].entries()) {
          const session = `conf-inline-${i}`;
          const s = { task: 'large inline', state: 'x'.repeat(text), nextSteps: ['s'] };
          const r = await ledger.publish({ ...scope, session }, s);
          expect(r.size).toBeLessThanOrEqual(threshold);
          expect(await inlineStat(ledger, r.digest), `${text} characters`).toMatchObject({ size: r.size });
          expect(await fileTier(ledger).has(r.digest)).toBe(false);
          expect((await ledger.resume({ ...scope, session }))?.summary).toEqual(s);
        }
        // Past it: a blob.
        const over = { task: 'over', state: 'x'.repeat(threshold + 10), nextSteps: ['s'] };
        const r = await ledger.publish({ ...scope, session: 'conf-inline-over' }, over);
        expect(await inlineStat(ledger, r.digest)).toBeUndefined();
        expect(await fileTier(ledger).has(r.digest)).toBe(true);
      });

      it('stores no inline blob when the append is refused (both or neither)', async () => {
        const ledger = await open();
        const first = await ledger.publish(scope, summary(1));
        const refused = summary('refused');
        await expect(ledger.publish(scope, refused, { expectedPrev: null })).rejects.toMatchObject({
          code: 'CHAIN_CONFLICT',
        });
        const digest = digestOf(validateSummary(refused).bytes);
        expect(await ledger.blobs.has(digest)).toBe(false);
        expect((await ledger.resume(scope))?.id).toBe(first.id);
      });

      it('re-hashes an inline blob on every read: changed bytes are BLOB_INTEGRITY for resume and BLOB_DIGEST for fsck, never bytes', async () => {
        const ledger = await open();
        const r = await ledger.publish(scope, summary(1));
        await backend!.corruptInlineBlob(ledger, r.digest);
        await expect(ledger.resume(scope)).rejects.toMatchObject({ name: 'StoreError', code: 'BLOB_INTEGRITY' });
        await expect(ledger.blobs.get(r.digest)).rejects.toMatchObject({ code: 'BLOB_INTEGRITY' });
        const report = await fsck(ledger);
        expect(report.findings.map((f) => f.code)).toEqual(['BLOB_DIGEST']);
      });

      it('reads an intact file copy of the same bytes where the inline copy is damaged; fsck still names the damage', async () => {
        const ledger = await open();
        const r = await ledger.publish(scope, summary(1));
        const bytes = await ledger.blobs.get(r.digest);
        await ledger.blobs.put(bytes); // the same bytes as a file too (a blob in both tiers)
        await backend!.corruptInlineBlob(ledger, r.digest);
        expect((await ledger.resume(scope))?.summary).toEqual(summary(1));
        expect(Buffer.from(await ledger.blobs.get(r.digest)).equals(Buffer.from(bytes))).toBe(true);
        const chunks: Uint8Array[] = [];
        for await (const c of ledger.blobs.chunks(r.digest)) chunks.push(c);
        expect(Buffer.concat(chunks).equals(Buffer.from(bytes))).toBe(true);
        // Still no bytes that do not match, whichever tier: a bound the file copy exceeds is its refusal.
        await expect(ledger.blobs.get(r.digest, { maxBytes: r.size - 1 })).rejects.toMatchObject({
          code: 'BLOB_TOO_LARGE',
        });
        const report = await fsck(ledger);
        expect(report.findings.map((f) => f.code)).toEqual(['BLOB_DIGEST']);
      });

      it('refuses an inline blob larger than the reader allows with BLOB_TOO_LARGE', async () => {
        const ledger = await open();
        const r = await ledger.publish(scope, summary(1));
        await expect(ledger.blobs.get(r.digest, { maxBytes: r.size - 1 })).rejects.toMatchObject({
          code: 'BLOB_TOO_LARGE',
        });
      });

      it('exports inline blobs into the bundle, where the offline verifier checks them', async () => {
        const ledger = await open();
        await ledger.publish(scope, summary(1));
        await ledger.publish(scope, summary(2));
        const out = `${tempDir()}/bundle`;
        const result = await exportBundle(ledger, { out, withBlobs: true });
        expect(result.unavailableBlobs).toEqual([]);
        const report = await verifyBundle(await openBundleDir(out), { trust: ledger.trustStore() });
        expect(report.findings).toEqual([]);
        expect(report.counts).toMatchObject({ manifests: 2, blobsChecked: 2 });
      });

      it('gc removes an inline blob no manifest references, once past the grace period, and keeps referenced ones', async () => {
        const ledger = await open();
        const r = await ledger.publish(scope, summary(1));
        const orphan = new TextEncoder().encode('an inline blob no manifest names');
        const orphanDigest = digestOf(orphan);
        // An entry whose unsigned payload names another summary (fsck would report it; gc reads the digest it
        // names, not this blob's). The log does not verify: it takes every entry's payload as its Merkle leaf.
        await ledger.log.append({
          session: 'conf-junk',
          principal: 'alice',
          seq: 0,
          prev: null,
          id: idOf(namingOther('conf-junk')),
          envelope: namingOther('conf-junk'),
          blob: { digest: orphanDigest, bytes: orphan },
        });
        expect(await ledger.blobs.has(orphanDigest)).toBe(true);
        const young = await gc(ledger, { graceMs: 60_000 });
        expect(young.removed).toEqual([]);
        const report = await gc(ledger, { graceMs: 0, now: Date.now() + 5000 });
        expect(report.removed).toEqual([orphanDigest]);
        expect(await ledger.blobs.has(orphanDigest)).toBe(false);
        expect((await ledger.resume(scope))?.id).toBe(r.id);
      });

      it("gc's conditional delete keeps an inline blob an append wrote again after the cutoff, and reports it kept", async () => {
        const ledger = await open();
        const orphan = new TextEncoder().encode('an inline blob no manifest names, written twice');
        const digest = digestOf(orphan);
        const junk = (session: string) =>
          ledger.log.append({
            session,
            principal: 'alice',
            seq: 0,
            prev: null,
            id: idOf(namingOther(session)),
            // Every entry is a Merkle leaf: the envelope needs a payload, not a signature (the log does not verify).
            envelope: namingOther(session),
            blob: { digest, bytes: orphan },
          });
        const pause = () => new Promise((r) => setTimeout(r, 25));
        await junk('conf-junk-a');
        await ledger.blobs.put(orphan); // the same bytes as a file too, stored before the cutoff
        await pause();
        const cutoff = Date.now();
        await pause();
        await junk('conf-junk-b'); // an append of the same bytes makes the inline copy young again
        expect((await ledger.blobs.stat(digest))!.storedAtMs).toBeGreaterThanOrEqual(cutoff);
        expect(await ledger.log.inlineBlobs!.delete(digest, { storedBeforeMs: cutoff })).toBe(false);
        // The file copy is old and goes; the inline one stays readable, so the blob was not collected.
        expect(await ledger.blobs.delete(digest, { storedBeforeMs: cutoff })).toBe(false);
        expect(await (ledger.blobs as TieredBlobStore).files.has(digest)).toBe(false);
        expect(Buffer.from(await ledger.blobs.get(digest)).equals(orphan)).toBe(true);
        expect(await ledger.blobs.delete(digest, { storedBeforeMs: Date.now() + 5000 })).toBe(true);
        expect(await ledger.blobs.has(digest)).toBe(false);
      });

      it('refuses an inlineSummaryBytes that is not a non-negative integer (INVALID_ARGUMENT)', async () => {
        for (const inlineSummaryBytes of [-1, 1.5, 'big' as unknown as number])
          await expect(open({ inlineSummaryBytes })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      });

      it('refuses a maxSummaryBytes that is not a non-negative integer (NaN or Infinity would compare as no bound)', async () => {
        for (const maxSummaryBytes of [Number.NaN, Number.POSITIVE_INFINITY, -1, 2.5, '300000' as unknown as number]) {
          await expect(open({ maxSummaryBytes }), String(maxSummaryBytes)).rejects.toThrow(/maxSummaryBytes/);
          await expect(open({ maxSummaryBytes })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
        }
      });
    });

    it('fsck is clean and gc keeps referenced blobs', async () => {
      const ledger = await open();
      const r = await ledger.publish(scope, summary(1));
      const orphan = await ledger.blobs.put(new TextEncoder().encode('orphan'));
      const report = await gc(ledger, { graceMs: 0, now: Date.now() + 5000 });
      expect(report.removed).toContain(orphan.digest);
      expect(report.removed).not.toContain(r.digest);
      expect(await fsck(ledger)).toMatchObject({ ok: true, manifests: 1 });
    });
  });
}
