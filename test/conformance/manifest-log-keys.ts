/**
 * The ManifestLog contract for what orders appends against key rotation and revocation: the newest signed
 * `createdAt` per key kept with the entries, windows closed in append order, and revocations that no
 * append of the revoked principal can outlive. Every backend runs it through the same factory as the main suite.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { ManifestError } from '../../manifests/errors.js';
import type { AppendRequest } from '../../manifests/log/log.js';
import type { ManifestLogFactory, ManifestLogFixture } from './manifest-log.js';

const idOf = (session: string, seq: number): Digest => digestOf(new TextEncoder().encode(`${session}/${seq}`));

function signedLink(session: string, seq: number, createdAt: string, keyId = 'ed25519:k1', principal = 'alice') {
  const request: AppendRequest = {
    session,
    principal,
    seq,
    prev: seq === 0 ? null : idOf(session, seq - 1),
    id: idOf(session, seq),
    envelope: JSON.stringify({ payloadType: 't', payload: Buffer.from(`${session}:${seq}`).toString('base64') }),
    signed: { keyId, createdAt },
  };
  return request;
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => undefined,
    (e: unknown) => (e instanceof ManifestError ? e.code : `not a ManifestError: ${String(e)}`),
  );
}

async function keyIdsOf(fx: ManifestLogFixture): Promise<string[]> {
  const ids: string[] = [];
  for await (const id of fx.log.signingKeys.keyIds()) ids.push(id);
  return ids;
}

export function signingKeySuite(name: string, factory: ManifestLogFactory): void {
  describe(`ManifestLog signing keys and revocation order: ${name}`, () => {
    let fx: ManifestLogFixture;
    beforeEach(async () => {
      fx = await factory();
    });
    afterEach(async () => {
      await fx?.dispose();
    });

    it('keeps the newest createdAt each key signed, across a reopen', async () => {
      await fx.log.append(signedLink('s1', 0, '2026-11-30T10:00:05.000Z'));
      await fx.log.append(signedLink('s2', 0, '2026-11-30T10:00:09.000Z'));
      // Older than what is stored (another host's clock): the newest stays.
      await fx.log.append(signedLink('s1', 1, '2026-11-30T10:00:07.000Z'));
      await fx.log.append(signedLink('s3', 0, '2026-11-30T10:00:01.000Z', 'ed25519:k2'));
      await fx.reopen();
      expect(await fx.log.signingKeys.get('ed25519:k1')).toEqual({
        keyId: 'ed25519:k1',
        lastSignedAt: '2026-11-30T10:00:09.000Z',
      });
      expect((await fx.log.signingKeys.get('ed25519:k2'))?.lastSignedAt).toBe('2026-11-30T10:00:01.000Z');
      expect(await fx.log.signingKeys.get('ed25519:never')).toBeUndefined();
    });

    it('lists the id of every key with a record, in id order, closed windows included', async () => {
      expect(await keyIdsOf(fx)).toEqual([]);
      await fx.log.append(signedLink('s1', 0, '2026-11-30T10:00:05.000Z', 'ed25519:k2'));
      await fx.log.append(signedLink('s2', 0, '2026-11-30T10:00:06.000Z', 'ed25519:k1'));
      await fx.log.signingKeys.close('ed25519:k0', () => '2026-11-30T10:00:07.000Z');
      await fx.reopen();
      expect(await keyIdsOf(fx)).toEqual(['ed25519:k0', 'ed25519:k1', 'ed25519:k2']);
    });

    it('shows close the newest createdAt and refuses with KEY_EXPIRED an append dated at or after the window end', async () => {
      await fx.log.append(signedLink('s1', 0, '2026-11-30T10:00:05.000Z'));
      const seen: unknown[] = [];
      const end = await fx.log.signingKeys.close('ed25519:k1', (record) => {
        seen.push(record);
        return '2026-11-30T10:00:06.000Z';
      });
      expect(end).toBe('2026-11-30T10:00:06.000Z');
      expect(seen).toEqual([{ keyId: 'ed25519:k1', lastSignedAt: '2026-11-30T10:00:05.000Z' }]);
      expect(await codeOf(fx.log.append(signedLink('s1', 1, '2026-11-30T10:00:06.000Z')))).toBe('KEY_EXPIRED');
      expect(await codeOf(fx.log.append(signedLink('s2', 0, '2026-11-30T11:00:00.000Z')))).toBe('KEY_EXPIRED');
      // Dated before the end (signed before the rotation, appended after it): still valid, still accepted.
      await fx.log.append(signedLink('s1', 1, '2026-11-30T10:00:05.999Z'));
      // Another key is not affected; the refusal survives a reopen (another process, a restart).
      await fx.log.append(signedLink('s2', 0, '2026-11-30T11:00:00.000Z', 'ed25519:k2'));
      await fx.reopen();
      expect(await codeOf(fx.log.append(signedLink('s1', 2, '2026-11-30T12:00:00.000Z')))).toBe('KEY_EXPIRED');
      expect(await fx.log.head('s1')).toMatchObject({ seq: 1 });
      expect(await fx.log.signingKeys.get('ed25519:k1')).toEqual({
        keyId: 'ed25519:k1',
        lastSignedAt: '2026-11-30T10:00:05.999Z',
        closedAt: '2026-11-30T10:00:06.000Z',
      });
    });

    it("lists a key record's fields in SigningKeyRecord's order (keyId, lastSignedAt, closedAt), whichever was written first", async () => {
      // The window closed before the key signed anything, then an entry dated before its end: closedAt stored first.
      const seen: unknown[] = [];
      await fx.log.signingKeys.close('ed25519:k1', () => '2026-11-30T10:00:06.000Z');
      await fx.log.append(signedLink('s1', 0, '2026-11-30T10:00:05.000Z'));
      const fields = async () => JSON.stringify(await fx.log.signingKeys.get('ed25519:k1'));
      const want = JSON.stringify({
        keyId: 'ed25519:k1',
        lastSignedAt: '2026-11-30T10:00:05.000Z',
        closedAt: '2026-11-30T10:00:06.000Z',
      });
      expect(await fields()).toBe(want);
      // As the record is shown to close, and as stored (read again after a reopen).
      await fx.log.signingKeys.close('ed25519:k1', (record) => {
        seen.push(JSON.stringify(record));
        return '2026-11-30T10:00:06.000Z';
      });
      expect(seen).toEqual([want]);
      await fx.reopen();
      expect(await fields()).toBe(want);
    });

    it('lets an append in flight either commit dated before the chosen window end or be refused', async () => {
      const appends = Array.from({ length: 8 }, (_, i) =>
        fx.log.append(signedLink(`s${i}`, 0, `2026-11-30T10:00:0${i}.000Z`)),
      );
      // Settled from the start: an append refused while the test awaits the close is not an unhandled rejection.
      const settled = Promise.allSettled(appends);
      const end = await fx.log.signingKeys.close('ed25519:k1', (record) => {
        return new Date(Date.parse(record?.lastSignedAt ?? '2026-11-30T10:00:00.000Z') + 1).toISOString();
      });
      const results = await settled;
      const committed = results.flatMap((r, i) => (r.status === 'fulfilled' ? [`2026-11-30T10:00:0${i}.000Z`] : []));
      // Every append either committed before the end was chosen (and the end lies after it) or was refused.
      for (const t of committed) expect(t < end).toBe(true);
      expect(committed).toContain('2026-11-30T10:00:00.000Z');
      for (const r of results)
        if (r.status === 'rejected') expect((r.reason as ManifestError).code).toBe('KEY_EXPIRED');
    });

    it('refuses with REVOKED an append by a principal revoked for the session or everywhere, once the revocation resolved', async () => {
      await fx.log.append(signedLink('s1', 0, '2026-11-30T10:00:00.000Z'));
      await fx.log.grants.put({ principal: 'alice', session: 's1', state: 'revoked', at: '2026-11-30T10:00:01.000Z' });
      expect(await codeOf(fx.log.append(signedLink('s1', 1, '2026-11-30T10:00:02.000Z')))).toBe('REVOKED');
      await fx.log.append(signedLink('s2', 0, '2026-11-30T10:00:02.000Z'));
      await fx.log.grants.put({ principal: 'alice', session: '*', state: 'revoked', at: '2026-11-30T10:00:03.000Z' });
      expect(await codeOf(fx.log.append(signedLink('s2', 1, '2026-11-30T10:00:04.000Z')))).toBe('REVOKED');
      expect(await codeOf(fx.log.append(signedLink('s3', 0, '2026-11-30T10:00:04.000Z')))).toBe('REVOKED');
      await fx.log.append(signedLink('s3', 0, '2026-11-30T10:00:04.000Z', 'ed25519:k1', 'bob'));
      expect(await fx.log.head('s2')).toMatchObject({ seq: 0 });
    });

    it('lets no append of a principal commit after a concurrent revocation resolved', async () => {
      const appends = Array.from({ length: 8 }, (_, i) =>
        fx.log.append(signedLink(`s${i}`, 0, '2026-11-30T10:00:00.000Z')),
      );
      // Settled from the start: an append refused while the test awaits the revocation is not an unhandled rejection.
      const settled = Promise.allSettled(appends);
      await fx.log.grants.put({ principal: 'alice', session: '*', state: 'revoked', at: '2026-11-30T10:00:01.000Z' });
      const headsAtRevocation = await Promise.all(appends.map((_, i) => fx.log.head(`s${i}`)));
      const results = await settled;
      results.forEach((r, i) => {
        if (r.status === 'fulfilled')
          expect(headsAtRevocation[i], `s${i} committed after the revocation`).toBeDefined();
        else expect((r.reason as ManifestError).code).toBe('REVOKED');
      });
    });

    it('refuses a malformed key id or time with INVALID_ARGUMENT', async () => {
      const bad = signedLink('s1', 0, '2026-11-30T10:00:00Z');
      expect(await codeOf(fx.log.append(bad))).toBe('INVALID_ARGUMENT');
      expect(await codeOf(fx.log.append(signedLink('s1', 0, '2026-11-30T10:00:00.000Z', 'key id')))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await codeOf(fx.log.signingKeys.close('ed25519:k1', () => 'tomorrow'))).toBe('INVALID_ARGUMENT');
      expect(await fx.log.signingKeys.get('ed25519:k1')).toBeUndefined();
    });
  });
}
