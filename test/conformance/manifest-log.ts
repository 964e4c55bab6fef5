/**
 * The ManifestLog contract as one reusable suite: chains, the global order, conflicts, grants and
 * watermarks. Every backend (LevelDB, PostgreSQL) runs it unchanged through a factory.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInNewContext } from 'node:vm';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { ManifestError, type ManifestErrorCode } from '../../manifests/errors.js';
import type { AppendRequest, GrantRecord, HeadWindow, LogEntry, ManifestLog } from '../../manifests/log/log.js';
import { headProblems } from '../../manifests/chain/head-rules.js';
import { MAX_GRANT_BY_UNITS, MAX_SEQ } from '../../manifests/log/abstract-log.js';
import { EMPTY_ROOT, leafHash, nodeHash, verifyConsistency, verifyInclusion } from '../../manifests/tlog/merkle.js';
import { consistencyRanges, hashRanges, inclusionRanges } from '../../manifests/tlog/tree.js';
import {
  EMPTY_HEADS_ROOT,
  headValue,
  proveSessionHead,
  sessionHeadsRoot,
  verifySessionHead,
} from '../../manifests/tlog/session-heads.js';

export interface ManifestLogFixture {
  log: ManifestLog;
  /** Closes the log and opens a new one on the same storage; `log` is replaced. */
  reopen(): Promise<ManifestLog>;
  /** Closes the log and removes its storage. */
  dispose(): Promise<void>;
  /**
   * Closes the log, removes its session-heads index as a store from before the index would lack it, and opens a
   * new one on the same storage; `log` is replaced.
   */
  reopenWithoutSessionHeads(): Promise<ManifestLog>;
  /**
   * Cuts a chain back behind the log's back, as a bad restore or someone who can write the storage would: the head
   * record moved to `to` (removed when undefined), the session's watermark removed too when `dropWatermark`. Then
   * reopens the log (nothing it cached survives); `log` is replaced.
   */
  cutBack(
    session: string,
    to: { seq: number; id: Digest; owner: string } | undefined,
    options?: { dropWatermark?: boolean },
  ): Promise<ManifestLog>;
  /** Removes a stored entry that no head names, as a damaged store might lack it. */
  removeEntry(session: string, seq: number): Promise<void>;
  /**
   * Damages a stored record behind the log's back. Returns the code a read of it fails with, or undefined when
   * the backend's types keep it readable (it then reads as a different, well-formed record).
   */
  damage(
    record: { kind: 'entry'; session: string; seq: number } | { kind: 'head'; session: string },
  ): Promise<ManifestErrorCode | undefined>;
  /**
   * Where `positionOf` finds an id that a later append appended again: its lowest position (the default), or its
   * latest ('latest': the embedded log, which writes the id's record without reading it; ManifestLog.positionOf).
   */
  idAppendedAgain?: 'lowest' | 'latest';
  /**
   * The head window holds a head to the session-heads index (HeadWindow.index: the embedded log); otherwise `index` is
   * never set.
   */
  windowReadsIndex?: boolean;
  /**
   * Starts the appends and has them committed in one batch, where the backend batches appends (the embedded log's
   * group commit: each append reads its session's records before it queues, so which ones share a batch otherwise
   * depends on how fast those reads come back). Without it they are started together and each commits on its own.
   */
  appendTogether?(start: Array<() => Promise<LogEntry>>): Promise<LogEntry[]>;
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
      payload: Buffer.from(`${session}:${seq}${salt}`).toString('base64'),
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

/** RFC 6962 MTH straight from the definition: the reference every backend's stored tree must equal. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return EMPTY_ROOT;
  if (leaves.length === 1) return leafHash(leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

const payloadOf = (envelope: string) => Buffer.from(JSON.parse(envelope).payload as string, 'base64');
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Registers the ManifestLog conformance tests for one backend. */
/**
 * `holdsHeads`: the log has `holdHead` (a shared log, whose writers race for heads); without it the suite checks that
 * it has none.
 */
export function manifestLogSuite(name: string, factory: ManifestLogFactory, { holdsHeads = false } = {}): void {
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
        const req = { ...link('s1', 0), envelope: '{"payload":"eA==","odd":"\\u0000 é 😀 \\n","signatures":[]}' };
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

      it('answers appendHead with the head the next append extends, as head does, and refuses a malformed id', async () => {
        const log = fx.log;
        expect(await log.appendHead?.('s1')).toBeUndefined();
        await appendChain('s1', 2);
        expect(await log.appendHead?.('s1')).toEqual(await log.head('s1'));
        await log.append(link('s1', 2, 'bob'));
        expect(await log.appendHead?.('s1')).toEqual({ session: 's1', seq: 2, id: idOf('s1', 2), owner: 'alice' });
        // A refused append leaves it where it was.
        await expectManifestError(log.append(link('s1', 7)), 'CHAIN_CONFLICT');
        expect((await log.appendHead?.('s1'))?.seq).toBe(2);
        if (log.appendHead) await expectManifestError(log.appendHead('../s1'), 'INVALID_ID');
        // Across a reopen it is read back from storage.
        expect(await (await fx.reopen()).appendHead?.('s1')).toEqual(await fx.log.head('s1'));
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

    describe('head window (one round of reads)', () => {
      /** The same facts through the separate reads: the reference every backend's one round must equal. */
      const separately = async (session: string): Promise<HeadWindow> => {
        const head = await fx.log.head(session);
        const seq = head?.seq ?? -1;
        return {
          session,
          head,
          entryAtHead: head ? await fx.log.entry(session, seq) : undefined,
          entryBeforeHead: seq > 0 ? await fx.log.entry(session, seq - 1) : undefined,
          // With no head, any entry of the session is beyond it (not only seq 0).
          entryBeyondHead: head
            ? (await fx.log.entry(session, seq + 1)) !== undefined
            : (await collect(fx.log.chain(session))).length > 0,
          watermark: await fx.log.getWatermark(session),
        };
      };
      /** Both ways of reading, as values or as error codes: they must agree. */
      const outcome = (p: Promise<HeadWindow>) =>
        p.then(
          (value) => ({ value }),
          (err: unknown) => ({ code: err instanceof ManifestError ? err.code : String(err) }),
        );

      it('returns the head, the entries at and before it, nothing beyond, and the watermark', async () => {
        const entries = await appendChain('w', 3);
        await appendChain('w-other', 2);
        await fx.log.setWatermark('w', 5);
        expect(await fx.log.headWindow('w')).toEqual({
          session: 'w',
          head: { session: 'w', seq: 2, id: entries[2]!.id, owner: 'alice' },
          entryAtHead: entries[2],
          entryBeforeHead: entries[1],
          entryBeyondHead: false,
          watermark: 5,
        });
        expect(await fx.log.headWindow('w')).toEqual(await separately('w'));
      });

      it('returns no entry before a head at seq 0, and nothing at all for an unknown session', async () => {
        const [first] = await appendChain('one', 1);
        expect(await fx.log.headWindow('one')).toEqual({
          session: 'one',
          head: { session: 'one', seq: 0, id: first!.id, owner: 'alice' },
          entryAtHead: first,
          entryBeforeHead: undefined,
          entryBeyondHead: false,
          watermark: 0,
        });
        const none = {
          session: 'none',
          head: undefined,
          entryAtHead: undefined,
          entryBeforeHead: undefined,
          entryBeyondHead: false,
          watermark: undefined,
        };
        expect(await fx.log.headWindow('none')).toEqual(none);
        await fx.log.setWatermark('none', 1);
        expect(await fx.log.headWindow('none')).toEqual({ ...none, watermark: 1 });
      });

      it('counts any entry of a session with no head as beyond it, with seq 0 gone too', async () => {
        await appendChain('lost', 3);
        await fx.removeEntry('lost', 0);
        const log = await fx.cutBack('lost', undefined, { dropWatermark: true });
        const window = await log.headWindow('lost');
        expect(window).toEqual({
          session: 'lost',
          head: undefined,
          entryAtHead: undefined,
          entryBeforeHead: undefined,
          entryBeyondHead: true,
          watermark: undefined,
          // The index, left as it was, still commits the removed head.
          index: fx.windowReadsIndex
            ? {
                code: 'ROLLBACK',
                problem: 'the session-heads index commits a head for the session, which has no head record',
              }
            : undefined,
        });
        expect({ ...window, index: undefined }).toEqual(await separately('lost'));
        expect(headProblems(window)).toEqual([
          { session: 'lost', code: 'ROLLBACK', problem: 'entries exist, but no head names them' },
        ]);
        // Only the session's own entries count, not those of a session whose id begins with its id ('lost', 'los').
        expect((await log.headWindow('los')).entryBeyondHead).toBe(false);
      });

      it('reports a missing entry before the head as the separate reads do', async () => {
        await appendChain('gap', 3);
        await fx.removeEntry('gap', 1);
        const window = await fx.log.headWindow('gap');
        expect(window.entryBeforeHead).toBeUndefined();
        expect(window.entryAtHead?.seq).toBe(2);
        expect(window).toEqual(await separately('gap'));
      });

      it('fails on a damaged entry or head with the code of the separate reads', async () => {
        for (const [session, record] of [
          ['at', { kind: 'entry', session: 'at', seq: 2 }],
          ['before', { kind: 'entry', session: 'before', seq: 1 }],
          ['head', { kind: 'head', session: 'head' }],
        ] as const) {
          await appendChain(session, 3);
          const code = await fx.damage(record);
          const window = await outcome(fx.log.headWindow(session));
          // A head read back as another well-formed head (no code: PostgreSQL's typed columns) is one the session-heads
          // index, left as it was, does not commit, where the window reads the index.
          const index = 'value' in window ? window.value.index : undefined;
          expect(index).toEqual(
            code === undefined && record.kind === 'head' && fx.windowReadsIndex
              ? { code: 'ROLLBACK', problem: expect.stringContaining("commits a head other than the head record's") }
              : undefined,
          );
          expect('value' in window ? { value: { ...window.value, index: undefined } } : window).toEqual(
            await outcome(separately(session)),
          );
          if (code !== undefined) expect(window).toEqual({ code });
        }
      });

      it('refuses a session outside the id grammar with INVALID_ID', async () => {
        await expectManifestError(fx.log.headWindow('a!b'), 'INVALID_ID');
        await expectManifestError(fx.log.headWindow(undefined as unknown as string), 'INVALID_ID');
      });

      it('reads one committed state while appends commit meanwhile: never an entry beyond the head', async () => {
        const n = 24;
        await appendChain('race', 1);
        const windows: HeadWindow[] = [];
        let appending = true;
        const appender = (async () => {
          try {
            for (let seq = 1; seq < n; seq++) await fx.log.append(link('race', seq));
          } finally {
            appending = false;
          }
        })();
        const reader = (async () => {
          while (appending) windows.push(await fx.log.headWindow('race'));
        })();
        await Promise.all([appender, reader]);
        windows.push(await fx.log.headWindow('race'));
        for (const w of windows) {
          expect(headProblems(w)).toEqual([]);
          const seq = w.head!.seq;
          expect(w.entryAtHead).toMatchObject({ seq, id: idOf('race', seq) });
          expect(w.entryBeforeHead?.id).toBe(seq > 0 ? idOf('race', seq - 1) : undefined);
        }
        expect(windows.at(-1)!.head!.seq).toBe(n - 1);
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
        await fx.log.append(link('w', 3));
        expect(await fx.log.getWatermark('w')).toBe(3);
        // A watermark above the head says the chain was cut back: the append is refused, the mark kept.
        await fx.log.setWatermark('w', 9);
        await expectManifestError(fx.log.append(link('w', 4)), 'ROLLBACK');
        expect(await fx.log.getWatermark('w')).toBe(9);
        expect((await fx.log.head('w'))?.seq).toBe(3);
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

      it('refuses positionOf an id that is not a blake3 digest (INVALID_ID) and entryAt a position that is not a non-negative integer (INVALID_ARGUMENT)', async () => {
        await appendChain('s1', 1);
        // Before the shared front checked them the embedded log looked the text up as a key (i!<anything>) and
        // PostgreSQL compared it, each answering undefined; a bad position was undefined on both.
        for (const bad of ['blake3:xyz', 'sha256:00', '', 'i!x', undefined, null, 7, {}])
          await expectManifestError(fx.log.positionOf(bad as unknown as Digest), 'INVALID_ID');
        for (const bad of [-1, 1.5, NaN, Infinity, '0', null, undefined, 2 ** 53])
          await expectManifestError(fx.log.entryAt(bad as number), 'INVALID_ARGUMENT');
        // Well-formed but not stored: nothing, as before.
        expect(await fx.log.positionOf(idOf('zz', 0))).toBeUndefined();
        expect(await fx.log.entryAt(Number.MAX_SAFE_INTEGER)).toBeUndefined();
        expect(await fx.log.entryAt(0)).toMatchObject({ session: 's1', seq: 0, position: 0 });
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

      it('finds nothing above MAX_SEQ (2^31 - 1) and refuses to write a seq above it with INVALID_ARGUMENT', async () => {
        await appendChain('s1', 1);
        for (const big of [MAX_SEQ + 1, Number.MAX_SAFE_INTEGER]) {
          expect(await fx.log.entry('s1', big)).toBeUndefined();
          expect(await collect(fx.log.chain('s1', { fromSeq: big }))).toEqual([]);
          await expectManifestError(fx.log.setWatermark('s1', big), 'INVALID_ARGUMENT');
          await expectManifestError(fx.log.append({ ...link('s1', 1), seq: big }), 'INVALID_ARGUMENT');
        }
        expect(await fx.log.entry('s1', MAX_SEQ)).toBeUndefined();
        expect(await collect(fx.log.chain('s1', { fromSeq: MAX_SEQ }))).toEqual([]);
        expect(await fx.log.getWatermark('s1')).toBe(0);
        await fx.log.setWatermark('s2', MAX_SEQ);
        expect(await fx.log.getWatermark('s2')).toBe(MAX_SEQ);
      });

      it('refuses with INVALID_ARGUMENT a malformed grant record, and stores nothing', async () => {
        const good: GrantRecord = { principal: 'bob', session: '*', state: 'revoked', at: '2026-11-30T12:00:00.000Z' };
        await expectManifestError(fx.log.grants.put({ ...good, state: 'maybe' as never }), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.grants.put({ ...good, at: 'yesterday' }), 'INVALID_ARGUMENT');
        // A time Date.parse reads past a NUL (PostgreSQL failed it as STORAGE_FAILED, the embedded log stored it).
        for (const at of ['2026-11-30T12:00:00.000Z\u0000', '2026-11-30 \u0000x'])
          await expectManifestError(fx.log.grants.put({ ...good, at }), 'INVALID_ARGUMENT');
        await expectManifestError(fx.log.grants.put({ ...good, by: 7 as never }), 'INVALID_ARGUMENT');
        // Text one backend could not store as given is refused by all.
        for (const by of ['ops\u0000console', 'ops\ud800', '\udc00ops'])
          await expectManifestError(fx.log.grants.put({ ...good, by }), 'INVALID_ARGUMENT');
        // A `by` longer than the bound, counted in UTF-16 code units (a surrogate pair is two).
        for (const by of ['o'.repeat(MAX_GRANT_BY_UNITS + 1), '\u{1F600}'.repeat(MAX_GRANT_BY_UNITS / 2) + 'o']) {
          const err = await expectManifestError(fx.log.grants.put({ ...good, by }), 'INVALID_ARGUMENT');
          expect(err.message).toContain(`at most ${MAX_GRANT_BY_UNITS}`);
        }
        await expectManifestError(fx.log.grants.put({ ...good, principal: 'b!ob' }), 'INVALID_ID');
        expect(await fx.log.grants.list()).toEqual([]);
        await fx.log.grants.put(good);
        expect(await fx.log.grants.list()).toEqual([good]);
        // The longest `by` is stored and read back exactly.
        const longest = { ...good, by: '\u{1F600}'.repeat(MAX_GRANT_BY_UNITS / 2) };
        await fx.log.grants.put(longest);
        expect(await fx.log.grants.list()).toEqual([longest]);
      });

      it('refuses with INVALID_ARGUMENT an envelope one backend could not store as given (a lone surrogate)', async () => {
        // PostgreSQL's UTF-8 text replaces a lone surrogate with U+FFFD, the embedded log kept it: refused by all.
        for (const odd of ['\ud800', '\udc00x', 'x\udbff'])
          await expectManifestError(
            fx.log.append({ ...link('a', 0), envelope: `{"payload":"YQ==","x":"${odd}"}` }),
            'INVALID_ARGUMENT',
          );
        expect(await fx.log.head('a')).toBeUndefined();
        expect((await fx.log.treeHead()).size).toBe(0);
        // A pair, and the escaped form of a lone surrogate (six ASCII characters), are stored exactly.
        for (const [seq, fine] of ['\u{1F600}', '\\ud800'].entries()) {
          const request = { ...link('a', seq), envelope: `{"payload":"YQ==","x":"${fine}"}` };
          await fx.log.append(request);
          expect((await fx.log.entry('a', seq))?.envelope).toBe(request.envelope);
        }
      });

      it('refuses a malformed inline blob in an append (INVALID_ID, INVALID_ARGUMENT) before it is queued: nothing of it is stored, an append beside it commits', async () => {
        const bytes = new TextEncoder().encode('inline');
        const digest = digestOf(bytes);
        const bad: Array<[unknown, ManifestErrorCode]> = [
          [{ digest: 'blake3:xyz', bytes }, 'INVALID_ID'],
          [{ digest, bytes: 'inline' }, 'INVALID_ARGUMENT'],
          [{ digest, bytes: [1, 2] }, 'INVALID_ARGUMENT'],
          [{ digest }, 'INVALID_ARGUMENT'],
          [null, 'INVALID_ARGUMENT'],
          ['inline', 'INVALID_ARGUMENT'],
        ];
        for (const [i, [blob, code]] of bad.entries()) {
          // Started together, one append before it and one after (the embedded log writes the two it queued while the
          // first was written in one batch): a refused append must not take a well-formed one with it.
          const [before, refused, after] = await Promise.allSettled([
            fx.log.append(link(`before${i}`, 0)),
            fx.log.append({ ...link('bad', 0), blob: blob as never }),
            fx.log.append(link(`after${i}`, 0)),
          ]);
          expect([before.status, after.status]).toEqual(['fulfilled', 'fulfilled']);
          expect(refused.status).toBe('rejected');
          const err = (refused as PromiseRejectedResult).reason as unknown;
          expect(err).toBeInstanceOf(ManifestError);
          expect((err as ManifestError).code).toBe(code);
        }
        expect(await fx.log.head('bad')).toBeUndefined();
        expect(await collect(fx.log.inlineBlobs!.list())).toEqual([]);
        expect((await fx.log.treeHead()).size).toBe(2 * bad.length);
      });

      it("stores an inline blob given as another realm's Uint8Array (a vm context's, a test sandbox's) as its bytes", async () => {
        const bytes = new TextEncoder().encode('inline, from another realm');
        const digest = digestOf(bytes);
        const foreign = runInNewContext('new Uint8Array(b)', { b: [...bytes] }) as Uint8Array;
        expect(foreign instanceof Uint8Array).toBe(false);
        await fx.log.append({ ...link('a', 0), blob: { digest, bytes: foreign } });
        expect(new Uint8Array((await fx.log.inlineBlobs!.get(digest))!)).toEqual(bytes);
      });

      it('refuses a malformed digest (INVALID_ID) or storedBeforeMs (INVALID_ARGUMENT) for an inline blob, and removes nothing', async () => {
        const bytes = new TextEncoder().encode('inline');
        const digest = digestOf(bytes);
        await fx.log.append({ ...link('a', 0), blob: { digest, bytes } });
        const inline = fx.log.inlineBlobs!;
        for (const bad of ['blake3:xyz', `sha256:${'0'.repeat(64)}`, digest.toUpperCase(), 42]) {
          await expectManifestError(inline.get(bad as Digest), 'INVALID_ID');
          await expectManifestError(inline.stat(bad as Digest), 'INVALID_ID');
          await expectManifestError(inline.delete(bad as Digest), 'INVALID_ID');
        }
        // NaN compared as no bound (the embedded log removed the blob) or failed as STORAGE_FAILED (PostgreSQL);
        // Infinity removed it on PostgreSQL: refused by all, as BlobStore.delete refuses them.
        for (const storedBeforeMs of [NaN, Infinity, -Infinity, '5', null])
          await expectManifestError(
            inline.delete(digest, { storedBeforeMs: storedBeforeMs as number }),
            'INVALID_ARGUMENT',
          );
        for (const options of [null, 7, 'x'])
          await expectManifestError(inline.delete(digest, options as never), 'INVALID_ARGUMENT');
        expect(await inline.stat(digest)).toMatchObject({ size: bytes.length });
        expect(await inline.delete(digest, { storedBeforeMs: 0 })).toBe(false);
        expect(await inline.delete(digest, { storedBeforeMs: Date.now() + 60_000 })).toBe(true);
        expect(await inline.stat(digest)).toBeUndefined();
      });
    });

    describe('head check', () => {
      it('finds nothing in a log written only through append', async () => {
        await appendChain('a', 3);
        await appendChain('b', 1);
        await fx.log.setWatermark('a', 2);
        expect(await fx.log.checkHeads()).toEqual([]);
      });

      it('takes a signal: an aborted one is CANCELLED (its reason the cause), one that is no AbortSignal INVALID_ARGUMENT', async () => {
        await appendChain('a', 2);
        await fx.log.setWatermark('a', 4);
        const reason = new Error('the open gave up');
        await expect(fx.log.checkHeads({ signal: AbortSignal.abort(reason) })).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'CANCELLED',
          cause: reason,
        });
        await expect(fx.log.checkHeads({ signal: { aborted: true } as never })).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'INVALID_ARGUMENT',
        });
        // One that has not aborted changes nothing.
        expect(await fx.log.checkHeads({ signal: new AbortController().signal })).toHaveLength(1);
      });

      it('reports a session with a watermark and no head, its first entry removed, for the entries left', async () => {
        await appendChain('a', 3);
        await fx.removeEntry('a', 0);
        const log = await fx.cutBack('a', undefined);
        expect(await log.checkHeads()).toEqual([
          { session: 'a', code: 'ROLLBACK', problem: 'head is at seq none, but seq 2 was already verified' },
          { session: 'a', code: 'ROLLBACK', problem: 'entries exist, but no head names them' },
        ]);
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

    describe('a chain cut back (ROLLBACK on append, nothing written)', () => {
      const cases: Array<{
        what: string;
        to: (owner: string) => { seq: number; id: Digest; owner: string } | undefined;
        dropWatermark: boolean;
        next: number;
        /** Entry 0 removed too: only entries 1… are left, which no head names. */
        dropFirst?: true;
      }> = [
        {
          what: 'its head moved back below its watermark',
          to: (owner) => ({ seq: 0, id: idOf('c', 0), owner }),
          dropWatermark: false,
          next: 1,
        },
        {
          what: 'its head moved back and its watermark gone: entries beyond the head',
          to: (owner) => ({ seq: 0, id: idOf('c', 0), owner }),
          dropWatermark: true,
          next: 1,
        },
        { what: 'its head removed, its watermark kept', to: () => undefined, dropWatermark: false, next: 0 },
        {
          what: 'its head and its watermark removed: entries no head names',
          to: () => undefined,
          dropWatermark: true,
          next: 0,
        },
        {
          what: 'its head, its watermark and its first entry removed: entries no head names',
          to: () => undefined,
          dropWatermark: true,
          next: 0,
          dropFirst: true,
        },
      ];
      for (const c of cases)
        it(`refuses an append to a chain with ${c.what}`, async () => {
          let before = await appendChain('c', 3);
          if (c.dropFirst) {
            await fx.removeEntry('c', 0);
            before = before.slice(1);
          }
          const log = await fx.cutBack('c', c.to('alice'), { dropWatermark: c.dropWatermark });
          // The next append the moved head invites: another manifest at a seq that is stored, by anyone.
          const request = {
            ...link('c', c.next, 'mallory', '-again'),
            prev: c.next === 0 ? null : idOf('c', c.next - 1),
          };
          // What a caller that checks before it appends is told first (Ledger.checkPublish): the append's own refusal.
          const told = await log.sessionAppendRefusal!('c');
          const err = await expectManifestError(log.append(request), 'ROLLBACK');
          expect(err.message).toMatch(/session c: .*cut back/);
          expect(told).toMatchObject({ name: 'ManifestError', code: 'ROLLBACK', message: err.message });
          expect(await log.sessionAppendRefusal!('other')).toBeUndefined();
          expect(await collect(log.chain('c'))).toEqual(before);
          expect(await collect(log.entries())).toEqual(before);
          expect((await log.treeHead()).size).toBe(3);
          // Other chains are appended to as before.
          expect(await log.append(link('other', 0))).toMatchObject({ position: 3 });
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

    describe('Merkle tree', () => {
      it('is empty with the empty root before the first append', async () => {
        expect(await fx.log.treeHead()).toEqual({ size: 0, root: EMPTY_ROOT, sessionHeads: EMPTY_HEADS_ROOT });
      });

      it('covers every entry in global order, leaf = the envelope payload bytes, after concurrent appends', async () => {
        await Promise.all(['a', 'b', 'c'].map((s) => appendChain(s, 4)));
        const entries = await collect(fx.log.entries());
        const head = await fx.log.treeHead();
        expect(head.size).toBe(12);
        expect(hex(head.root)).toBe(hex(mth(entries.map((e) => payloadOf(e.envelope)))));
      });

      it('serves inclusion and consistency proofs that verify, and finds entries by id and position', async () => {
        await appendChain('a', 7);
        await appendChain('b', 4);
        const entries = await collect(fx.log.entries());
        const leaves = entries.map((e) => payloadOf(e.envelope));
        const read = (ids: Parameters<ManifestLog['treeNodes']>[0]) => fx.log.treeNodes(ids);
        for (const e of entries) {
          expect(await fx.log.positionOf(e.id)).toBe(e.position);
          expect(await fx.log.entryAt(e.position)).toEqual(e);
          for (const size of [e.position + 1, leaves.length]) {
            const proof = await hashRanges(inclusionRanges(e.position, size), read);
            const root = mth(leaves.slice(0, size));
            expect(verifyInclusion(e.position, size, leafHash(leaves[e.position]!), proof, root).ok).toBe(true);
          }
        }
        for (let m = 1; m < leaves.length; m++) {
          const proof = await hashRanges(consistencyRanges(m, leaves.length), read);
          expect(verifyConsistency(m, leaves.length, proof, mth(leaves.slice(0, m)), mth(leaves)).ok).toBe(true);
        }
        expect(await fx.log.positionOf(idOf('zz', 0))).toBeUndefined();
        expect(await fx.log.entryAt(99)).toBeUndefined();
        // The records positionOf answers from, listed in one pass (fsck's check of them): one per id, each position
        // the one positionOf gives.
        const listed = await collect(fx.log.idPositions!());
        expect(listed.map((r) => r.id).sort()).toEqual(entries.map((e) => e.id as string).sort());
        for (const r of listed) expect(r).toEqual({ id: r.id, position: await fx.log.positionOf(r.id as Digest) });
      });

      it('finds an id appended more than once at its lowest position within a batch, and where the backend says after a later append', async () => {
        // The ledger appends each id once; a caller of the log (or a hostile one) can append one again. PostgreSQL
        // answers the lowest position; the embedded log the first of a batch, and the latest once a later batch appends
        // the id again (it writes the record without reading it: ManifestLog.positionOf).
        const twice = idOf('a', 0);
        await appendChain('a', 2);
        const again = (session: string, id: Digest) => fx.log.append({ ...link(session, 0), id });
        const later = await again('b', twice);
        const twiceAt = fx.idAppendedAgain === 'latest' ? later.position : 0;
        // Appended together: one batch of the embedded log.
        const thrice = idOf('x', 0, 'shared');
        const start = [() => fx.log.append(link('c', 0)), ...['d', 'e', 'f'].map((s) => () => again(s, thrice))];
        const together = await (fx.appendTogether ? fx.appendTogether(start) : Promise.all(start.map((a) => a())));
        const check = async (log: ManifestLog) => {
          expect(await log.positionOf(twice)).toBe(twiceAt);
          expect(await log.positionOf(thrice)).toBe(Math.min(...together.slice(1).map((e) => e.position)));
          const listed = (await collect(log.idPositions!())).filter((r) => r.id === twice || r.id === thrice);
          expect(listed).toEqual(
            [
              { id: twice, position: twiceAt },
              { id: thrice, position: await log.positionOf(thrice) },
            ].sort((x, y) => (x.id < y.id ? -1 : 1)),
          );
        };
        await check(fx.log);
        await check(await fx.reopen());
      });

      it('keeps the tree across a reopen and keeps growing it', async () => {
        await appendChain('a', 5);
        const before = await fx.log.treeHead();
        const log = await fx.reopen();
        expect(hex((await log.treeHead()).root)).toBe(hex(before.root));
        await log.append(link('a', 5));
        const entries = await collect(log.entries());
        expect(hex((await log.treeHead()).root)).toBe(hex(mth(entries.map((e) => payloadOf(e.envelope)))));
      });

      it('refuses an envelope without a base64 payload and appends nothing (ENVELOPE_INVALID)', async () => {
        await expectManifestError(
          fx.log.append({ ...link('a', 0), envelope: '{"payload":"not base64!"}' }),
          'ENVELOPE_INVALID',
        );
        expect(await fx.log.head('a')).toBeUndefined();
        expect((await fx.log.treeHead()).size).toBe(0);
      });

      it('refuses an envelope without a base64 payload as ENVELOPE_INVALID whatever the chain holds: before judging its head', async () => {
        await appendChain('a', 2);
        const bad = (seq: number) => ({ ...link('a', seq), envelope: '{"payload":"not base64!"}' });
        // At the next seq, at a seq taken (a conflict) and at one beyond it: the request itself is refused.
        for (const seq of [2, 1, 5]) await expectManifestError(fx.log.append(bad(seq)), 'ENVELOPE_INVALID');
        await expectManifestError(fx.log.append({ ...link('a', 2), envelope: 'not json' }), 'ENVELOPE_INVALID');
        // And on a chain cut back (which an append with a payload is refused as ROLLBACK).
        await fx.cutBack('a', { seq: 0, id: idOf('a', 0), owner: 'alice' });
        await expectManifestError(fx.log.append(link('a', 1)), 'ROLLBACK');
        await expectManifestError(fx.log.append(bad(1)), 'ENVELOPE_INVALID');
        expect((await fx.log.treeHead()).size).toBe(2);
      });

      it('reports a missing tree node as TREE_DAMAGED', async () => {
        await expectManifestError(fx.log.treeNodes([{ level: 3, index: 0 }]), 'TREE_DAMAGED');
      });

      it('refuses with INVALID_ARGUMENT a node id that names no node (a missing one is TREE_DAMAGED)', async () => {
        await appendChain('a', 3);
        // Before: the embedded log looked a fractional or negative index up and reported it missing (TREE_DAMAGED),
        // PostgreSQL failed it as STORAGE_FAILED; a list that was not one was an uncoded TypeError or STORAGE_FAILED,
        // and levels or indexes given as strings were read as numbers by both.
        const bad: unknown[] = [
          [{ level: -1, index: 0 }],
          [{ level: 64, index: 0 }],
          [{ level: 0.5, index: 0 }],
          [{ level: 0, index: -1 }],
          [{ level: 0, index: 1.5 }],
          [{ level: 0, index: 2 ** 53 }],
          [{ level: '0', index: 1 }],
          [{ level: 0, index: '1' }],
          [{ level: 0, index: 0 }, null],
          'x',
          null,
        ];
        for (const ids of bad) await expectManifestError(fx.log.treeNodes(ids as never), 'INVALID_ARGUMENT');
        expect(await fx.log.treeNodes([])).toEqual([]);
        expect((await fx.log.treeNodes([{ level: 1, index: 0 }])).map(hex)).toHaveLength(1);
        await expectManifestError(fx.log.treeNodes([{ level: 63, index: 0 }]), 'TREE_DAMAGED');
      });

      it('stores its origin once: the first proposal wins; asked without one, it only reads', async () => {
        expect(await fx.log.origin()).toBeUndefined();
        expect(await fx.log.origin()).toBeUndefined();
        expect(await fx.log.origin('example.org/one')).toBe('example.org/one');
        expect(await fx.log.origin()).toBe('example.org/one');
        expect(await fx.log.origin('example.org/two')).toBe('example.org/one');
        expect(await (await fx.reopen()).origin('example.org/three')).toBe('example.org/one');
      });

      it('refuses with INVALID_ARGUMENT a proposed origin that is not a valid origin, storing nothing, whether or not one is stored', async () => {
        // PostgreSQL failed a NUL as STORAGE_FAILED and stored a lone surrogate as U+FFFD; the embedded log stored
        // both, and a number, as given. None of them is an origin a ledger could sign checkpoints under.
        const bad = ['', 'a\u0000b', 'a\ud800', 'with space', 'a+b', 'a\nb', 'x'.repeat(257), 5, null];
        for (const proposed of bad) await expectManifestError(fx.log.origin(proposed as string), 'INVALID_ARGUMENT');
        expect(await fx.log.origin()).toBeUndefined();
        expect(await fx.log.origin('example.org/one')).toBe('example.org/one');
        for (const proposed of bad) await expectManifestError(fx.log.origin(proposed as string), 'INVALID_ARGUMENT');
        expect(await fx.log.origin()).toBe('example.org/one');
      });

      it('refuses with INVALID_ARGUMENT a new origin the CLI would print escaped (bidi, format, C1, backslash); a stored one is answered', async () => {
        // Valid key names (isValidOrigin), but `keys vkey` would print them escaped: no copying its line into logs.json.
        const escaped = [
          'example.org/\u202elog',
          'example.org/a\u200bb',
          'example.org/\u009b2J',
          'example.org/a\u007f',
          'example.org/a\\b',
          'example.org/a\u2066b',
          'example.org/\u{e0041}',
          'example.org/a\ufe0fb',
        ];
        for (const proposed of escaped) {
          const err = await expectManifestError(fx.log.origin(proposed), 'INVALID_ARGUMENT');
          expect(err.message).toMatch(/prints escaped/);
        }
        expect(await fx.log.origin()).toBeUndefined();
        // A log named so before the rule (its record written as the log stores any name) keeps its name.
        const legacy = 'example.org/\u202elog';
        await (fx.log as unknown as { _origin(p: string): Promise<string> })._origin(legacy);
        expect(await (await fx.reopen()).origin()).toBe(legacy);
        expect(await fx.log.origin(legacy)).toBe(legacy);
        expect(await fx.log.origin('example.org/a\\b')).toBe(legacy);
        expect(await fx.log.origin('example.org/two')).toBe(legacy);
      });
    });

    describe('session-heads index', () => {
      /** The index root recomputed from the heads the log lists: what every backend's stored index must equal. */
      const expectedRoot = async (log: ManifestLog) =>
        hex(sessionHeadsRoot((await collect(log.heads())).map((h) => ({ session: h.session, head: h }))));

      it("reads a node at a path whose prefix is another realm's Uint8Array (it was INVALID_ARGUMENT)", async () => {
        await appendChain('a', 2);
        const prefix = runInNewContext('new Uint8Array(32)') as Uint8Array;
        expect(prefix instanceof Uint8Array).toBe(false);
        const [node] = await fx.log.sessionHeadNodes!([{ depth: 0, prefix }]);
        expect(node).toBeDefined();
        expect(node).toEqual((await fx.log.sessionHeadNodes!([{ depth: 0, prefix: new Uint8Array(32) }]))[0]);
      });

      it('commits every head with the entries, after concurrent appends, and proves each one', async () => {
        await Promise.all(['a', 'b', 'c', 'a.b', 'ab'].map((s, i) => appendChain(s, 1 + (i % 3))));
        const head = await fx.log.treeHead();
        expect(head.size).toBe(9);
        expect(hex(head.sessionHeads!)).toBe(await expectedRoot(fx.log));
        const read = (paths: Parameters<NonNullable<ManifestLog['sessionHeadNodes']>>[0]) =>
          fx.log.sessionHeadNodes!(paths);
        for await (const h of fx.log.heads()) {
          const { proof, value } = await proveSessionHead(read, h.session);
          expect(value).toEqual(headValue(h));
          expect(verifySessionHead(head.sessionHeads!, h.session, h, proof)).toEqual({ ok: true });
          expect(verifySessionHead(head.sessionHeads!, h.session, { ...h, seq: h.seq - 1 }, proof).ok).toBe(false);
        }
        const { proof, value } = await proveSessionHead(read, 'never');
        expect(value).toBeUndefined();
        expect(verifySessionHead(head.sessionHeads!, 'never', undefined, proof)).toEqual({ ok: true });
      });

      it('moves with each append and is kept across a reopen', async () => {
        await appendChain('a', 2);
        const before = await fx.log.treeHead();
        await fx.log.append(link('a', 2));
        const after = await fx.log.treeHead();
        expect(hex(after.sessionHeads!)).not.toBe(hex(before.sessionHeads!));
        const log = await fx.reopen();
        expect(hex((await log.treeHead()).sessionHeads!)).toBe(hex(after.sessionHeads!));
        await log.append(link('b', 0));
        expect(hex((await log.treeHead()).sessionHeads!)).toBe(await expectedRoot(log));
      });

      it('is built on open for a store written before the index existed', async () => {
        await Promise.all(['a', 'b', 'c'].map((s, i) => appendChain(s, i + 1)));
        const before = await fx.log.treeHead();
        const log = await fx.reopenWithoutSessionHeads();
        expect(hex((await log.treeHead()).sessionHeads!)).toBe(hex(before.sessionHeads!));
        await log.append(link('c', 3));
        await log.append(link('d', 0));
        expect(hex((await log.treeHead()).sessionHeads!)).toBe(await expectedRoot(log));
      });

      it('refuses node paths that name no node with INVALID_ARGUMENT, as treeNodes refuses node ids', async () => {
        await appendChain('a', 2);
        await appendChain('b', 1);
        const read = fx.log.sessionHeadNodes!.bind(fx.log);
        const zero = () => new Uint8Array(32);
        const root = { depth: 0, prefix: zero() };
        const [rootNode] = await read([root]);
        expect(rootNode).toMatchObject({ leaf: false });
        expect(await read([])).toEqual([]);
        const setAt = (byte: number, value: number) => {
          const p = zero();
          p[byte] = value;
          return p;
        };
        const throwing = Object.defineProperty({ prefix: zero() }, 'depth', {
          get() {
            throw new Error('no depth');
          },
        });
        const bad: unknown[] = [
          undefined,
          null,
          'x',
          { length: 1, 0: root },
          [null],
          [5],
          [{}],
          [throwing],
          [{ depth: -1, prefix: zero() }],
          [{ depth: 257, prefix: zero() }],
          [{ depth: 1.5, prefix: zero() }],
          [{ depth: '1', prefix: zero() }],
          [{ depth: 0, prefix: new Uint8Array(31) }],
          [{ depth: 0, prefix: new Uint8Array(33) }],
          [{ depth: 0, prefix: Array.from(zero()) }],
          // A bit set past the depth: inside the depth's last byte, and in a byte past it (which the embedded log's
          // key left out: it named the node at the shorter prefix there, and none on PostgreSQL).
          [{ depth: 3, prefix: setAt(0, 0x10) }],
          [{ depth: 0, prefix: setAt(31, 1) }],
          [root, { depth: 8, prefix: setAt(5, 0x80) }],
        ];
        for (const paths of bad) await expectManifestError(read(paths as never), 'INVALID_ARGUMENT');
        // The deepest path is a node's name too (a leaf stored at depth 256 would be there).
        expect(await read([{ depth: 256, prefix: setAt(31, 1) }, root])).toEqual([undefined, rootNode]);
      });

      it('is unchanged by a refused append', async () => {
        await appendChain('a', 1);
        const before = await fx.log.treeHead();
        await expectManifestError(fx.log.append(link('a', 5)), 'CHAIN_CONFLICT');
        expect(hex((await fx.log.treeHead()).sessionHeads!)).toBe(hex(before.sessionHeads!));
      });

      it('stays the index of the heads over many sessions and rounds of concurrent appends', async () => {
        // Enough sessions for paths several nodes deep, each round on nodes the previous rounds wrote.
        for (let round = 0; round < 3; round++) {
          await Promise.all(Array.from({ length: 40 }, (_, i) => fx.log.append(link(`m${i}`, round))));
          expect(hex((await fx.log.treeHead()).sessionHeads!)).toBe(await expectedRoot(fx.log));
        }
      });
    });

    describe('held heads', () => {
      /** The log's holdHead, which the suite's options say it has. */
      const hold = (session: string, options?: { signal?: AbortSignal }) => {
        expect(fx.log.holdHead).toBeTypeOf('function');
        return fx.log.holdHead!(session, options);
      };
      /** Settles `p` without a handler left wanting; `settled()` says whether it has. */
      const watch = <T>(p: Promise<T>) => {
        let done = false;
        const answer = p.then(
          (value) => ((done = true), { value }),
          (error: unknown) => ((done = true), { error }),
        );
        return { answer, settled: () => done };
      };

      // Each log registers the tests of what it is (none skipped): one writer has no holdHead.
      if (!holdsHeads)
        it('has none: the log has one writer', () => {
          expect(fx.log.holdHead).toBeUndefined();
        });

      if (holdsHeads)
        describe('holdHead', () => {
          it('holds the head for one append, which no other append moves meanwhile', async () => {
            const [, last] = await appendChain('s', 2);
            const held = (await hold('s'))!;
            expect(held.head).toEqual({ session: 's', seq: 1, id: last!.id, owner: 'alice' });
            // Another writer's append at the same seq waits for the hold, then finds the head moved.
            const other = watch(fx.log.append(link('s', 2, 'alice', '-other')));
            await new Promise((r) => setTimeout(r, 200));
            expect(other.settled()).toBe(false);
            const entry = await held.append(link('s', 2));
            expect(entry).toMatchObject({ session: 's', seq: 2, id: link('s', 2).id });
            const answer = await other.answer;
            expect('error' in answer && answer.error).toBeInstanceOf(ManifestError);
            expect(answer).toMatchObject({ error: { code: 'CHAIN_CONFLICT' } });
            expect(await fx.log.head('s')).toMatchObject({ seq: 2, id: link('s', 2).id });
            // Its release after the append changes nothing; a second append is refused.
            await held.release();
            await expectManifestError(held.append(link('s', 3)), 'INVALID_ARGUMENT');
            expect(await fx.log.head('s')).toMatchObject({ seq: 2 });
          });

          it('a release writes nothing and lets the waiting append in', async () => {
            await appendChain('s', 1);
            const held = (await hold('s'))!;
            const other = watch(fx.log.append(link('s', 1, 'alice', '-other')));
            await held.release();
            expect(await other.answer).toMatchObject({ value: { seq: 1, id: link('s', 1, 'alice', '-other').id } });
            await expectManifestError(held.append(link('s', 1)), 'INVALID_ARGUMENT');
            expect(await fx.log.head('s')).toMatchObject({ seq: 1, id: link('s', 1, 'alice', '-other').id });
          });

          it('a chain with no head has none to hold: undefined, and its first append goes as usual', async () => {
            for (let i = 0; i < 12; i++) expect(await hold('new')).toBeUndefined();
            expect(await fx.log.append(link('new', 0))).toMatchObject({ seq: 0 });
            // Nothing was left held (nor counted as held): the head there now is held and appended to.
            const held = (await hold('new'))!;
            expect(await held.append(link('new', 1))).toMatchObject({ seq: 1 });
          });

          it('an append that does not extend the held head is CHAIN_CONFLICT and ends the hold', async () => {
            await appendChain('s', 1);
            const held = (await hold('s'))!;
            await expectManifestError(held.append(link('s', 5)), 'CHAIN_CONFLICT');
            expect(await fx.log.append(link('s', 1))).toMatchObject({ seq: 1 });
          });

          it('a malformed request is refused as append refuses it, and ends the hold with nothing written', async () => {
            await appendChain('s', 1);
            for (const [request, code] of [
              [{ ...link('s', 1), envelope: '' }, 'INVALID_ARGUMENT'],
              [{ ...link('s', 1), session: 'bad id' }, 'INVALID_ID'],
              [{ ...link('s', 1), envelope: '{"payload":"not base64!"}' }, 'ENVELOPE_INVALID'],
              [null, 'INVALID_ARGUMENT'],
            ] as const) {
              const held = (await hold('s'))!;
              await expectManifestError(held.append(request as never), code);
              await held.release();
            }
            // A request of another session under this one's hold is refused too.
            await appendChain('t', 1);
            const held = (await hold('s'))!;
            await expectManifestError(held.append(link('t', 1)), 'INVALID_ARGUMENT');
            expect(await fx.log.head('t')).toMatchObject({ seq: 0 });
            expect(await fx.log.append(link('s', 1))).toMatchObject({ seq: 1 });
          });

          it("an abort of the hold's signal ends it: its append is CANCELLED, nothing written", async () => {
            await appendChain('s', 1);
            const ac = new AbortController();
            const held = (await hold('s', { signal: ac.signal }))!;
            const other = watch(fx.log.append(link('s', 1, 'alice', '-other')));
            ac.abort(new Error('caller gave up'));
            expect(await other.answer).toMatchObject({ value: { seq: 1 } });
            await expectManifestError(held.append(link('s', 1)), 'CANCELLED');
            await held.release();
            expect(await fx.log.head('s')).toMatchObject({ id: link('s', 1, 'alice', '-other').id });
          });

          it('refuses bad arguments and an aborted signal, holding nothing', async () => {
            await appendChain('s', 1);
            await expectManifestError(hold('bad id'), 'INVALID_ID');
            await expectManifestError(hold('s', 'no' as never), 'INVALID_ARGUMENT');
            await expectManifestError(hold('s', { signal: {} as AbortSignal }), 'INVALID_ARGUMENT');
            await expectManifestError(hold('s', { signal: AbortSignal.abort() }), 'CANCELLED');
            expect(await fx.log.append(link('s', 1))).toMatchObject({ seq: 1 });
          });
        });
    });
  });
}
