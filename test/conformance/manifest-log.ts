/**
 * The ManifestLog contract as one reusable suite: chains, the global order, conflicts, grants and
 * watermarks. Every backend (LevelDB, PostgreSQL) runs it unchanged through a factory.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { ManifestError, type ManifestErrorCode } from '../../manifests/errors.js';
import type { AppendRequest, GrantRecord, LogEntry, ManifestLog } from '../../manifests/log/log.js';

export interface ManifestLogFixture {
  log: ManifestLog;
  /** Closes the log and opens a new one on the same storage; `log` is replaced. */
  reopen(): Promise<ManifestLog>;
  /** Closes the log and removes its storage. */
  dispose(): Promise<void>;
}

export type ManifestLogFactory = () => Promise<ManifestLogFixture>;

const idOf = (session: string, seq: number, salt = ''): Digest =>
  digestOf(new TextEncoder().encode(`${session}/${seq}${salt}`));

/** A request that extends `session` from `seq - 1` (ids are derived, so the suite can predict `prev`). */
function link(session: string, seq: number, principal = 'alice', salt = ''): AppendRequest {
  return {
    session,
    principal,
    seq,
    prev: seq === 0 ? null : idOf(session, seq - 1),
    id: idOf(session, seq, salt),
    envelope: JSON.stringify({
      payloadType: 't',
      payload: `${session}:${seq}${salt}`,
      signatures: [{ keyid: 'k', sig: 'é\u2028"' }],
    }),
  };
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

async function expectManifestError(p: Promise<unknown>, code: ManifestErrorCode): Promise<ManifestError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected ManifestError ${code}`).toBeInstanceOf(ManifestError);
  expect((err as ManifestError).code).toBe(code);
  return err as ManifestError;
}

/** Registers the ManifestLog conformance tests for one backend. */
export function manifestLogSuite(name: string, factory: ManifestLogFactory): void {
  describe(`ManifestLog conformance: ${name}`, () => {
    let fx: ManifestLogFixture;
    beforeEach(async () => {
      fx = await factory();
    });
    afterEach(async () => {
      await fx?.dispose();
    });

    const appendChain = async (session: string, n: number, principal = 'alice') => {
      const out: LogEntry[] = [];
      for (let seq = 0; seq < n; seq++) out.push(await fx.log.append(link(session, seq, principal)));
      return out;
    };

    describe('chains', () => {
      it('starts empty', async () => {
        expect(await fx.log.head('s1')).toBeUndefined();
        expect(await fx.log.entry('s1', 0)).toBeUndefined();
        expect(await collect(fx.log.chain('s1'))).toEqual([]);
        expect(await collect(fx.log.entries())).toEqual([]);
        expect(await collect(fx.log.heads())).toEqual([]);
      });

      it('appends seq 0 and returns the stored entry at global position 0', async () => {
        const req = link('s1', 0);
        const entry = await fx.log.append(req);
        expect(entry).toEqual({
          position: 0,
          session: 's1',
          seq: 0,
          id: req.id,
          principal: 'alice',
          envelope: req.envelope,
        });
        expect(await fx.log.head('s1')).toEqual({ session: 's1', seq: 0, id: req.id, owner: 'alice' });
        expect(await fx.log.entry('s1', 0)).toEqual(entry);
      });

      it('keeps the envelope text exactly as given', async () => {
        const req = { ...link('s1', 0), envelope: '{"payload":"x","odd":"\\u0000 é 😀 \\n","signatures":[]}' };
        await fx.log.append(req);
        expect((await fx.log.entry('s1', 0))!.envelope).toBe(req.envelope);
      });

      it('returns a chain in seq order, from any seq', async () => {
        const entries = await appendChain('s1', 5);
        expect(await collect(fx.log.chain('s1'))).toEqual(entries);
        expect(await collect(fx.log.chain('s1', { fromSeq: 3 }))).toEqual(entries.slice(3));
        expect(await collect(fx.log.chain('s1', { fromSeq: 9 }))).toEqual([]);
        expect(await fx.log.head('s1')).toMatchObject({ seq: 4, id: idOf('s1', 4) });
      });

      it('keeps the owner of seq 0 on the head when another principal appends', async () => {
        await fx.log.append(link('s1', 0, 'alice'));
        const e1 = await fx.log.append(link('s1', 1, 'bob'));
        expect(e1.principal).toBe('bob');
        expect(await fx.log.head('s1')).toEqual({ session: 's1', seq: 1, id: idOf('s1', 1), owner: 'alice' });
      });

      it('keeps sessions whose ids share a prefix apart', async () => {
        await appendChain('s', 2);
        await appendChain('s1', 1);
        await appendChain('s.1', 1);
        expect((await collect(fx.log.chain('s'))).map((e) => e.session)).toEqual(['s', 's']);
        expect((await collect(fx.log.heads())).map((h) => h.session).sort()).toEqual(['s', 's.1', 's1']);
      });
    });

    describe('global order', () => {
      it('numbers entries 0, 1, 2, … across sessions in append order', async () => {
        const order = [link('a', 0), link('b', 0), link('a', 1), link('c', 0), link('b', 1)];
        for (const r of order) await fx.log.append(r);
        const all = await collect(fx.log.entries());
        expect(all.map((e) => e.position)).toEqual([0, 1, 2, 3, 4]);
        expect(all.map((e) => `${e.session}:${e.seq}`)).toEqual(['a:0', 'b:0', 'a:1', 'c:0', 'b:1']);
        expect((await collect(fx.log.entries({ afterPosition: 2 }))).map((e) => e.position)).toEqual([3, 4]);
        expect((await collect(fx.log.entries({ afterPosition: -1 }))).map((e) => e.position)).toEqual([0, 1, 2, 3, 4]);
      });

      it('gives concurrent appends on different chains distinct, gap-free positions', async () => {
        const sessions = Array.from({ length: 12 }, (_, i) => `c${i}`);
        const entries = await Promise.all(sessions.map((s) => fx.log.append(link(s, 0))));
        expect(entries.map((e) => e.position).sort((a, b) => a - b)).toEqual(sessions.map((_, i) => i));
        const all = await collect(fx.log.entries());
        expect(all.map((e) => e.position)).toEqual(sessions.map((_, i) => i));
        expect(new Set(all.map((e) => e.session)).size).toBe(sessions.length);
      });

      it('lists every head', async () => {
        await appendChain('a', 3);
        await appendChain('b', 1);
        const heads = (await collect(fx.log.heads())).sort((x, y) => x.session.localeCompare(y.session));
        expect(heads).toEqual([
          { session: 'a', seq: 2, id: idOf('a', 2), owner: 'alice' },
          { session: 'b', seq: 0, id: idOf('b', 0), owner: 'alice' },
        ]);
      });
    });

    describe('conflicts', () => {
      const refused: Array<[string, (s: string) => AppendRequest]> = [
        ['seq 0 again', (s) => link(s, 0, 'alice', 'other')],
        ['a seq past the head', (s) => link(s, 3)],
        ['the right seq with the wrong prev', (s) => ({ ...link(s, 2), prev: idOf(s, 0) })],
        ['the right seq with prev null', (s) => ({ ...link(s, 2), prev: null })],
        ['an old seq', (s) => link(s, 1, 'alice', 'other')],
      ];
      for (const [what, make] of refused) {
        it(`throws CHAIN_CONFLICT for ${what}, and changes nothing`, async () => {
          await appendChain('s1', 2);
          const before = await collect(fx.log.entries());
          await expectManifestError(fx.log.append(make('s1')), 'CHAIN_CONFLICT');
          expect(await collect(fx.log.entries())).toEqual(before);
          expect(await fx.log.head('s1')).toMatchObject({ seq: 1, id: idOf('s1', 1) });
          // The chain still extends normally afterwards, at the next position.
          expect(await fx.log.append(link('s1', 2))).toMatchObject({ seq: 2, position: 2 });
        });
      }

      it('throws CHAIN_CONFLICT for a first append that names a prev', async () => {
        await expectManifestError(fx.log.append({ ...link('s1', 0), prev: idOf('x', 0) }), 'CHAIN_CONFLICT');
        expect(await fx.log.head('s1')).toBeUndefined();
      });

      const expectOneWinner = async (results: PromiseSettledResult<LogEntry>[], seq: number) => {
        const won = results.filter((r): r is PromiseFulfilledResult<LogEntry> => r.status === 'fulfilled');
        expect(won).toHaveLength(1);
        for (const r of results) {
          if (r.status === 'rejected') {
            expect(r.reason).toBeInstanceOf(ManifestError);
            expect((r.reason as ManifestError).code).toBe('CHAIN_CONFLICT');
          }
        }
        expect(await fx.log.head('race')).toMatchObject({
          seq,
          id: won[0]!.value.id,
          owner: seq === 0 ? won[0]!.value.principal : 'alice',
        });
        expect(await collect(fx.log.chain('race'))).toHaveLength(seq + 1);
      };

      it('lets exactly one of many concurrent first appends to a new chain win', async () => {
        const racers = Array.from({ length: 8 }, (_, i) => link('race', 0, `p${i}`, `#${i}`));
        await expectOneWinner(await Promise.allSettled(racers.map((r) => fx.log.append(r))), 0);
      });

      it('lets exactly one of many concurrent appends at the next seq win', async () => {
        await fx.log.append(link('race', 0));
        const racers = Array.from({ length: 8 }, (_, i) => ({
          ...link('race', 1, `p${i}`),
          id: idOf('race', 1, `#${i}`),
        }));
        await expectOneWinner(await Promise.allSettled(racers.map((r) => fx.log.append(r))), 1);
      });

      it('never forks or gaps a chain under concurrent writers extending it', async () => {
        await fx.log.append(link('busy', 0));
        const writers = Array.from({ length: 4 }, async (_, w) => {
          let wins = 0;
          for (let attempt = 0; attempt < 40 && wins < 5; attempt++) {
            const head = (await fx.log.head('busy'))!;
            const req: AppendRequest = {
              ...link('busy', head.seq + 1, `w${w}`),
              prev: head.id,
              id: idOf('busy', head.seq + 1, `w${w}`),
            };
            try {
              await fx.log.append(req);
              wins++;
            } catch (err) {
              expect((err as ManifestError).code).toBe('CHAIN_CONFLICT');
            }
          }
          return wins;
        });
        const wins = (await Promise.all(writers)).reduce((a, b) => a + b, 0);
        const chain = await collect(fx.log.chain('busy'));
        expect(chain).toHaveLength(wins + 1);
        chain.forEach((e, i) => expect(e.seq).toBe(i));
        expect((await collect(fx.log.entries())).map((e) => e.position)).toEqual(chain.map((_, i) => i));
      });

      it('appends nothing when the signal is already aborted (CANCELLED, as in every layer)', async () => {
        const reason = new Error('stop');
        const err = await expectManifestError(
          fx.log.append(link('s1', 0), { signal: AbortSignal.abort(reason) }),
          'CANCELLED',
        );
        expect(err.cause).toBe(reason);
        expect(await fx.log.head('s1')).toBeUndefined();
        expect(await collect(fx.log.entries())).toEqual([]);
      });
    });

    describe('grants', () => {
      const g = (principal: string, session: string, state: 'granted' | 'revoked', by?: string): GrantRecord => ({
        principal,
        session,
        state,
        at: '2026-11-30T12:00:00.000Z',
        ...(by === undefined ? {} : { by }),
      });

      it('returns undefined for a grant never written', async () => {
        expect(await fx.log.grants.get('bob', 's1')).toBeUndefined();
        expect(await fx.log.grants.list()).toEqual([]);
      });

      it('stores, overwrites and reads back grants exactly', async () => {
        await fx.log.grants.put(g('bob', 's1', 'granted', 'ops:1'));
        expect(await fx.log.grants.get('bob', 's1')).toEqual(g('bob', 's1', 'granted', 'ops:1'));
        await fx.log.grants.put({ ...g('bob', 's1', 'revoked'), at: '2026-12-01T00:00:00.000Z' });
        const rec = await fx.log.grants.get('bob', 's1');
        expect(rec).toEqual({ ...g('bob', 's1', 'revoked'), at: '2026-12-01T00:00:00.000Z' });
        expect(rec).not.toHaveProperty('by');
      });

      it('lists grants sorted by principal then session, filtered by either', async () => {
        await fx.log.grants.put(g('carol', 's1', 'granted'));
        await fx.log.grants.put(g('bob', 's2', 'granted'));
        await fx.log.grants.put(g('bob', '*', 'revoked'));
        await fx.log.grants.put(g('bob', 's1', 'granted'));
        await fx.log.grants.put(g('bobby', 's1', 'granted'));
        const key = (r: GrantRecord) => `${r.principal}/${r.session}`;
        expect((await fx.log.grants.list()).map(key)).toEqual(['bob/*', 'bob/s1', 'bob/s2', 'bobby/s1', 'carol/s1']);
        expect((await fx.log.grants.list({ principal: 'bob' })).map(key)).toEqual(['bob/*', 'bob/s1', 'bob/s2']);
        expect((await fx.log.grants.list({ session: 's1' })).map(key)).toEqual(['bob/s1', 'bobby/s1', 'carol/s1']);
        expect((await fx.log.grants.list({ principal: 'bob', session: '*' })).map(key)).toEqual(['bob/*']);
      });
    });

    describe('watermarks', () => {
      it('records the highest verified seq per session and never lowers it', async () => {
        expect(await fx.log.getWatermark('s1')).toBeUndefined();
        await fx.log.setWatermark('s1', 3);
        await fx.log.setWatermark('s2', 0);
        await fx.log.setWatermark('s1', 2);
        expect(await fx.log.getWatermark('s1')).toBe(3);
        expect(await fx.log.getWatermark('s2')).toBe(0);
        await fx.log.setWatermark('s1', 7);
        expect(await fx.log.getWatermark('s1')).toBe(7);
      });

      it('raises the watermark with every append, in the same commit', async () => {
        await appendChain('w', 3, 'alice');
        expect(await fx.log.getWatermark('w')).toBe(2);
        await fx.log.setWatermark('w', 9);
        await fx.log.append(link('w', 3));
        expect(await fx.log.getWatermark('w')).toBe(9);
      });
    });

    describe('invalid arguments (checked once, in front of every backend)', () => {
      const badIds = ['', 'a!b', 'a\u0000', 'é', 'x'.repeat(129), '-lead', 42, null];

      it('refuses with INVALID_ID a session or principal outside the id grammar, and changes nothing', async () => {
        await appendChain('s1', 1);
        for (const bad of badIds) {
          const id = bad as string;
          await expectManifestError(fx.log.head(id), 'INVALID_ID');
          await expectManifestError(fx.log.entry(id, 0), 'INVALID_ID');
          await expectManifestError(collect(fx.log.chain(id)), 'INVALID_ID');
          await expectManifestError(fx.log.getWatermark(id), 'INVALID_ID');
          await expectManifestError(fx.log.setWatermark(id, 1), 'INVALID_ID');
          await expectManifestError(fx.log.append({ ...link('s1', 1), session: id }), 'INVALID_ID');
          await expectManifestError(fx.log.append({ ...link('s1', 1), principal: id }), 'INVALID_ID');
          await expectManifestError(fx.log.grants.get(id, 's1'), 'INVALID_ID');
          await expectManifestError(fx.log.grants.list({ session: id }), 'INVALID_ID');
        }
        expect((await collect(fx.log.entries())).map((e) => `${e.session}:${e.seq}`)).toEqual(['s1:0']);
      });

      it('refuses with INVALID_ID an id or prev that is not a blake3 digest', async () => {
        await appendChain('s1', 1);
        await expectManifestError(fx.log.append({ ...link('s1', 1), id: 'blake3:xyz' as Digest }), 'INVALID_ID');
        await expectManifestError(fx.log.append({ ...link('s1', 1), prev: 'sha256:00' as Digest }), 'INVALID_ID');
        expect(await fx.log.head('s1')).toMatchObject({ seq: 0 });
      });

      it('refuses with INVALID_ARGUMENT a seq, position or watermark that is not a non-negative integer, and an empty envelope', async () => {
        await appendChain('s1', 1);
        for (const bad of [-1, 1.5, NaN, '1', null]) {
          const n = bad as number;
          await expectManifestError(fx.log.entry('s1', n), 'INVALID_ARGUMENT');
          await expectManifestError(collect(fx.log.chain('s1', { fromSeq: n })), 'INVALID_ARGUMENT');
          if (n !== -1) await expectManifestError(collect(fx.log.entries({ afterPosition: n })), 'INVALID_ARGUMENT');
          await expectManifestError(fx.log.setWatermark('s1', n), 'INVALID_ARGUMENT');
          await expectManifestError(fx.log.append({ ...link('s1', 1), seq: n }), 'INVALID_ARGUMENT');
        }
        await expectManifestError(collect(fx.log.entries({ afterPosition: -2 })), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.append({ ...link('s1', 1), envelope: '' }), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.append(null as never), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.append(link('s1', 1), { signal: {} as AbortSignal }), 'INVALID_ARGUMENT');
        expect(await fx.log.head('s1')).toMatchObject({ seq: 0 });
        expect(await fx.log.getWatermark('s1')).toBe(0);
      });

      it('refuses with INVALID_ARGUMENT a malformed grant record, and stores nothing', async () => {
        const good: GrantRecord = { principal: 'bob', session: '*', state: 'revoked', at: '2026-11-30T12:00:00.000Z' };
        await expectManifestError(fx.log.grants.put({ ...good, state: 'maybe' as never }), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.grants.put({ ...good, at: 'yesterday' }), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.grants.put({ ...good, by: 7 as never }), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.grants.put({ ...good, principal: 'b!ob' }), 'INVALID_ID');
        expect(await fx.log.grants.list()).toEqual([]);
        await fx.log.grants.put(good);
        expect(await fx.log.grants.list()).toEqual([good]);
      });
    });

    describe('head check', () => {
      it('finds nothing in a log written only through append', async () => {
        await appendChain('a', 3);
        await appendChain('b', 1);
        await fx.log.setWatermark('a', 2);
        expect(await fx.log.checkHeads()).toEqual([]);
      });

      it('reports ROLLBACK for a session whose watermark is above its head, or that has a watermark and no head', async () => {
        await appendChain('a', 2);
        await fx.log.setWatermark('a', 4);
        await fx.log.setWatermark('gone', 0);
        expect(await fx.log.checkHeads()).toEqual([
          { session: 'a', code: 'ROLLBACK', problem: 'head is at seq 1, but seq 4 was already verified' },
          { session: 'gone', code: 'ROLLBACK', problem: 'head is at seq none, but seq 0 was already verified' },
        ]);
      });
    });

    describe('persistence', () => {
      it('keeps entries, heads, positions, grants and watermarks across close and reopen', async () => {
        const a = await appendChain('a', 2, 'alice');
        const b = await appendChain('b', 1, 'bob');
        await fx.log.grants.put({
          principal: 'bob',
          session: 'a',
          state: 'granted',
          at: '2026-11-30T12:00:00.000Z',
          by: 'alice',
        });
        await fx.log.setWatermark('a', 1);
        const log = await fx.reopen();
        expect(await collect(log.entries())).toEqual([...a, ...b]);
        expect(await log.head('a')).toEqual({ session: 'a', seq: 1, id: idOf('a', 1), owner: 'alice' });
        expect(await log.head('b')).toEqual({ session: 'b', seq: 0, id: idOf('b', 0), owner: 'bob' });
        expect(await log.grants.get('bob', 'a')).toMatchObject({ state: 'granted', by: 'alice' });
        expect(await log.getWatermark('a')).toBe(1);
        // Positions continue after the stored ones.
        expect(await log.append(link('a', 2))).toMatchObject({ position: 3 });
      });
    });
  });
}
