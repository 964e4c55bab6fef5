/**
 * A session's head set back offline (its tail and watermark with it) under the embedded store, the session-heads index
 * edited along with it by someone who can write the closed store's LevelDB records but holds no key: every way tried
 * here is refused, at open (`FORK`: another index root at the pinned tree) or at the head's first read (`TREE_DAMAGED`:
 * a path that no longer hashes to the stored root; `RECORD_CORRUPT`: an index the open could not build), and fsck
 * reports it. Publishes to the session and to the sessions beside its leaf do not fold the forged leaf into a new root.
 */
import { describe, expect, it } from 'vitest';
import { LevelManifestLog } from '../../manifests/log/level/log.js';
import { HEADS_BUILT_KEY, headsNodeKey, headsNodeValue } from '../../manifests/log/level/session-heads.js';
import { bitAt, buildSessionHeads, headValue, prefixOf, sessionKey } from '../../manifests/tlog/session-heads.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { fsck } from '../../src/ops/maintenance.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { editClosedLog, logLocation, open, publishMany, scope } from './ledger-support.js';

const hex12 = (n: number) => n.toString(16).padStart(12, '0');
const ROOT_KEY = headsNodeKey({ depth: 0, prefix: new Uint8Array(32) });
const at = (session: string, depth: number) => headsNodeKey({ depth, prefix: prefixOf(sessionKey(session), depth) });

const edit = editClosedLog;

/** A closed store: s published three times, t and o0…o5 once; s's receipts. */
async function store() {
  const root = tempDir();
  const ledger = await open(root);
  const published = await publishMany(ledger, 's', 3);
  for (const other of ['t', ...Array.from({ length: 6 }, (_, i) => `o${i}`)]) await publishMany(ledger, other, 1);
  const location = logLocation(ledger);
  await ledger.close();
  return { root, location, seq0: { seq: 0, id: published[0]!.id } };
}

/** s's records set back to seq 0: its head record, watermark and later entries. */
async function setBack(log: LevelManifestLog, seq0: { seq: number; id: string }) {
  const head = JSON.parse((await log.raw.get('h!s'))!);
  return {
    'h!s': JSON.stringify({ ...head, ...seq0 }),
    'w!s': '0',
    [`e!s!${hex12(1)}`]: undefined,
    [`e!s!${hex12(2)}`]: undefined,
  } as Record<string, string | undefined>;
}

const leafOfS = (seq0: { seq: number; id: string }) =>
  headsNodeValue({ leaf: true, key: sessionKey('s'), value: headValue(seq0) });

/** The depth of s's leaf in the stored index. */
async function leafDepth(log: LevelManifestLog): Promise<number> {
  for (let d = 0; d <= 256; d++) if ((await log.raw.get(at('s', d)))?.startsWith('l ')) return d;
  throw new Error('no leaf for s');
}

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (err: unknown) => (err as { code?: string }).code,
  );

/** What the open, then resume of `session`, then fsck make of the store. */
async function judged(root: string, sessions = ['s']) {
  let ledger: Ledger;
  try {
    ledger = await open(root);
  } catch (err) {
    return { open: (err as { code?: string }).code };
  }
  try {
    const resume: Record<string, unknown> = {};
    for (const s of sessions)
      resume[s] = await ledger.resume(scope(s)).then(
        (r) => (r ? `seq ${r.seq}` : 'none'),
        (err: unknown) => `${(err as { code?: string }).code}: ${(err as Error).message}`,
      );
    return { open: 'ok', resume, fsck: (await fsck(ledger)).findings.map((f) => f.code) };
  } finally {
    await ledger.close();
  }
}

describe('a set-back head with the session-heads index edited to match', () => {
  it('the whole index rebuilt for the set-back heads: FORK at open (another root at the pinned tree)', async () => {
    const { root, location, seq0 } = await store();
    await edit(location, async (log) => {
      const ops = await setBack(log, seq0);
      const heads: Array<{ session: string; head: { seq: number; id: string } }> = [];
      for await (const [key, raw] of log.raw.iterator({ gte: 'h!', lt: 'h!\xff' })) {
        const h = JSON.parse(raw) as { seq: number; id: string };
        heads.push({ session: key.slice(2), head: key === 'h!s' ? seq0 : { seq: h.seq, id: h.id } });
      }
      await log.raw.clear({ gte: 'x!', lt: 'x!\xff' });
      for (const n of buildSessionHeads(heads).nodes) ops[headsNodeKey(n.path)] = headsNodeValue(n.node);
      return ops;
    });
    expect(await judged(root)).toEqual({ open: 'FORK' });
  }, 60_000);

  it('the marker removed, so that the open rebuilds the index from the set-back heads: FORK at open', async () => {
    const { root, location, seq0 } = await store();
    await edit(location, async (log) => ({ ...(await setBack(log, seq0)), [HEADS_BUILT_KEY]: undefined }));
    expect(await judged(root)).toEqual({ open: 'FORK' });
  }, 60_000);

  it("the root record replaced by s's set-back leaf (a path of one node hashes to itself): FORK at open", async () => {
    const { root, location, seq0 } = await store();
    await edit(location, async (log) => ({ ...(await setBack(log, seq0)), [ROOT_KEY]: leafOfS(seq0) }));
    expect(await judged(root)).toEqual({ open: 'FORK' });
  }, 60_000);

  for (const [name, move] of [
    ['a forged leaf one depth higher (the path ends early)', (d: number) => ({ [at('s', d - 1)]: 'leaf' })],
    ['the leaf moved one depth lower', (d: number) => ({ [at('s', d)]: undefined, [at('s', d + 1)]: 'leaf' })],
    ['the leaf rewritten in place', (d: number) => ({ [at('s', d)]: 'leaf' })],
  ] as const)
    it(`${name}: TREE_DAMAGED at resume, fsck reports it`, async () => {
      const { root, location, seq0 } = await store();
      await edit(location, async (log) => {
        const d = await leafDepth(log);
        expect(d).toBeGreaterThan(1);
        const ops = await setBack(log, seq0);
        for (const [key, value] of Object.entries(move(d))) ops[key] = value && leafOfS(seq0);
        return ops;
      });
      const got = await judged(root);
      expect(got.resume?.s).toMatch(/^TREE_DAMAGED: session s: session-heads index: the nodes on the session's path/);
      expect(got.fsck).toContain('SESSION_HEADS_ROOT');
    }, 60_000);

  it('publishes to s and to sessions beside its rewritten leaf are refused: the leaf never reaches a new root', async () => {
    const { root, location, seq0 } = await store();
    let depth = 0;
    await edit(location, async (log) => {
      depth = await leafDepth(log);
      return { ...(await setBack(log, seq0)), [at('s', depth)]: leafOfS(seq0) };
    });
    // One session whose walk ends at s's leaf (their keys share its depth's bits: a split), one with s's leaf beside
    // its path (they part at the leaf's depth).
    const k = sessionKey('s');
    const shared = (name: string) => {
      const key = sessionKey(name);
      let n = 0;
      while (n < 256 && bitAt(key, n) === bitAt(k, n)) n++;
      return n;
    };
    const names = Array.from({ length: 20_000 }, (_, i) => `n${i}`);
    const splits = names.find((n) => shared(n) >= depth)!;
    const beside = names.find((n) => shared(n) === depth - 1)!;
    expect([splits, beside].every((n) => n !== undefined)).toBe(true);
    const ledger = await open(root);
    try {
      for (const s of ['s', splits, beside])
        expect(await codeOf(ledger.publish(scope(s), sampleSummary(`over ${s}`))), s).toBe('TREE_DAMAGED');
      await ledger.publish(scope('o0'), sampleSummary('elsewhere')); // o0 and its path are whole
      await ledger.checkpoint();
    } finally {
      await ledger.close();
    }
    expect((await judged(root)).resume?.s).toMatch(/^TREE_DAMAGED/);
  }, 60_000);
});

describe('an index the open could not build', () => {
  it("refuses every head RECORD_CORRUPT naming the damaged record (before: a removed session's resume found none)", async () => {
    const { root, location } = await store();
    // s's records all removed, the marker removed and a head record that cannot be parsed: the open's rebuild clears
    // the index, then fails on that record (the pin stands: its tree is unchanged). An index with no node commits no
    // head: s's absence agreed with it, and t's head did not (ROLLBACK, though t was not touched).
    await edit(location, async () => {
      const ops: Record<string, string | undefined> = {
        'h!s': undefined,
        'w!s': undefined,
        [HEADS_BUILT_KEY]: undefined,
      };
      for (const seq of [0, 1, 2]) ops[`e!s!${hex12(seq)}`] = undefined;
      return { ...ops, 'h!zz': 'x' };
    });
    const got = await judged(root, ['s', 't', 'never']);
    for (const s of ['s', 't', 'never'])
      expect(got.resume?.[s], s).toMatch(
        /^RECORD_CORRUPT: session \w+: the session-heads index could not be built or read at open: .*h!zz/,
      );
    expect(got.fsck).toEqual(expect.arrayContaining(['RECORD_CORRUPT', 'SESSION_HEADS_ROOT']));
  }, 60_000);
});
