/**
 * `checkPublish` (what `compact` asks before the model) refuses a session whose chain was cut back — its head moved
 * back below entries still stored, removed while entries remain, below the session's watermark, or set back with its
 * tail and watermark under the session-heads index (PostgreSQL before: passed, and the model was asked) — with the
 * refusal the append itself would give (`ROLLBACK`, ManifestLog.sessionAppendRefusal: one rule for both), so the
 * transcript never goes to the model for a summary no append would take. Both backends; another session of the store
 * passes.
 * With the head, the watermark and entry 0 all removed, both judge by the entries left (any entry of a session with no
 * head is beyond it), and resume, reading the same head window, refuses it too.
 * A session whose path in the session-heads index is not whole (a node on it or beside it rewritten, or one that
 * cannot be read) is refused by checkPublish and compact with the append's own refusal (`TREE_DAMAGED`,
 * `RECORD_CORRUPT`: its code and message), before the model is asked (before: passed, and the model was asked for a
 * summary the append then refused); the sessions whose paths are whole are compacted.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { compact } from '../src/index.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { headsNodeKey, headsNodeValue } from '../manifests/log/level/session-heads.js';
import { bitAt, headValue, prefixOf, sessionKey } from '../manifests/tlog/session-heads.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { countingModel } from './support/counting-model.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
const transcript = [{ role: 'user' as const, content: 'add retries' }];

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => 'passed',
    (err: { name?: string; code?: string; message?: string }) => `${err.name} ${err.code}: ${err.message}`,
  );

/**
 * The cut-back session `s`, as `principal` sees it: compact refuses with publish's own refusal before the model is
 * asked, checkPublish gives the same, nothing is appended; another session of the store still passes.
 */
async function refusedBeforeTheModel(ledger: Ledger, principal: string, problem: RegExp): Promise<void> {
  const as = { ...scope, principal };
  const head = await ledger.log.head('s');
  const published = await refusal(ledger.publish(as, sampleSummary('refused')));
  expect(published).toMatch(/^LedgerError ROLLBACK: session s: /);
  expect(published).toMatch(problem);
  const model = countingModel();
  expect(await refusal(compact({ ledger, scope: as, model, transcript }))).toBe(published);
  expect(model.asked).toBe(0);
  expect(await refusal(ledger.checkPublish(as))).toBe(published);
  expect(await ledger.log.head('s')).toEqual(head);
  expect((await ledger.log.treeHead()).size).toBe(3);
  // The refusal is the session's, not the store's.
  expect(await refusal(ledger.checkPublish({ ...scope, session: 'other' }))).toBe('passed');
}

/**
 * Session `s` published three times, then set back to seq 0 under the session-heads index with its tail and watermark
 * (nothing else tells): publish, checkPublish and compact refuse it alike, before the model is asked, with the index's
 * problem; `t` (an honest session with a head) and `fresh` (none) are checked and compacted as before.
 */
async function setBackRefusedBeforeTheModel(ledger: Ledger): Promise<void> {
  const head = await ledger.log.head('s');
  expect(head?.seq).toBe(0);
  const model = countingModel();
  const checked = await refusal(ledger.checkPublish(scope));
  expect(checked).toMatch(
    /^LedgerError ROLLBACK: session s: the session-heads index commits a head other than the head record's seq 0; /,
  );
  expect(await refusal(compact({ ledger, scope, model, transcript }))).toBe(checked);
  expect(model.asked).toBe(0);
  expect(await refusal(ledger.publish(scope, sampleSummary('over the cut')))).toBe(checked);
  expect(await ledger.log.head('s')).toEqual(head);
  for (const [session, seq] of [
    ['t', 1],
    ['fresh', 0],
  ] as const) {
    const as = { ...scope, session };
    expect(await refusal(ledger.checkPublish(as))).toBe('passed');
    expect((await compact({ ledger, scope: as, model, transcript })).receipt.seq).toBe(seq);
  }
  expect(model.asked).toBe(2);
}

const setBackTitle =
  'a head set back under the session-heads index, with its tail and watermark: ROLLBACK before the model is asked; an honest session and a fresh one are compacted';

/** Resume of `s` from a ledger that holds no watermark of its own for it: the log's head window alone refuses. */
async function resumeRefused(ledger: Ledger): Promise<void> {
  expect(await refusal(ledger.resume(scope))).toMatch(
    /^LedgerError ROLLBACK: session s: entries exist, but no head names them$/,
  );
}

/** How many leading bits the session-heads keys of two sessions share (where their paths in the index part). */
function sharedBits(a: string, b: string): number {
  const [x, y] = [sessionKey(a), sessionKey(b)];
  let n = 0;
  while (n < 256 && bitAt(x, n) === bitAt(y, n)) n++;
  return n;
}

/** The first of `names` whose path in the index shares exactly `bits` leading bits with s's. */
const partingFromS = (names: string[], bits: number) => names.find((n) => sharedBits('s', n) === bits)!;

const OTHERS = ['t', ...Array.from({ length: 6 }, (_, i) => `o${i}`)];
/** Sessions never published: one whose path parts from s's at the root, candidates for one that runs beside s's leaf. */
const UNPUBLISHED = Array.from({ length: 20_000 }, (_, i) => `n${i}`);

/** s published three times, the others once each (s's leaf then lies a few depths down); s's receipts. */
async function publishDamageStore(ledger: Ledger): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
  for (const session of OTHERS) await ledger.publish({ ...scope, session }, sampleSummary(session));
  return ids;
}

type Damage = 'leaf rewritten' | 'node beside it rewritten' | 'node unreadable';
const damages: Damage[] = ['leaf rewritten', 'node beside it rewritten', 'node unreadable'];
const damageTitle = (damage: Damage) =>
  `s's path in the session-heads index not whole (${damage}): checkPublish and compact refuse with the append's own refusal before the model is asked; whole paths are compacted`;

/**
 * Each of `refused` (a session and the start of the refusal the append gives it, `<class> <code>: <message>`):
 * checkPublish refuses with it, compact gives the same without asking the model, publish the same, nothing appended.
 * Then a published session and an unpublished one whose paths part from s's at the root pass and are compacted.
 */
async function damageRefusedBeforeTheModel(ledger: Ledger, refused: Array<[string, string]>): Promise<void> {
  const model = countingModel();
  for (const [session, expected] of refused) {
    const as = { ...scope, session };
    const head = await ledger.log.head(session);
    const checked = await refusal(ledger.checkPublish(as));
    expect(checked.slice(0, expected.length), session).toBe(expected);
    expect(await refusal(compact({ ledger, scope: as, model, transcript }))).toBe(checked);
    expect(model.asked).toBe(0);
    expect(await refusal(ledger.publish(as, sampleSummary('over the damage')))).toBe(checked);
    expect(await ledger.log.head(session)).toEqual(head);
  }
  const whole = [partingFromS(OTHERS, 0), partingFromS(UNPUBLISHED, 0)];
  for (const session of whole) {
    const as = { ...scope, session };
    const seq = ((await ledger.log.head(session))?.seq ?? -1) + 1;
    expect(await refusal(ledger.checkPublish(as))).toBe('passed');
    expect((await compact({ ledger, scope: as, model, transcript })).receipt.seq).toBe(seq);
  }
  expect(model.asked).toBe(whole.length);
}

/** The append's refusal of a path through a stored interior node at `depth` that does not hash its children. */
const unhashedAt = (depth: number) =>
  `ManifestError TREE_DAMAGED: session-heads index: the stored node at depth ${depth} does not hash its children (`;

type Cut = 'moved back' | 'removed' | 'below the watermark';

/** How the chain is cut back; `unmarked`: its watermark record removed too, so only the entries beyond tell. */
const cases: Array<{ cut: Cut; unmarked?: true; principal: string; problem: RegExp }> = [
  { cut: 'moved back', principal: 'alice', problem: /head is at seq 0, but seq 2 was already verified/ },
  { cut: 'moved back', unmarked: true, principal: 'alice', problem: /entries exist beyond head seq 0/ },
  // No head names an owner: anyone's publish would start the chain again, and is refused.
  { cut: 'removed', principal: 'mallory', problem: /head is at seq none, but seq 2 was already verified/ },
  { cut: 'removed', unmarked: true, principal: 'mallory', problem: /entries exist, but no head names them/ },
  { cut: 'below the watermark', principal: 'alice', problem: /head is at seq 2, but seq 5 was already verified/ },
];

const title = (cut: Cut, unmarked: boolean | undefined) =>
  `a head ${cut}${unmarked ? ', its watermark removed too' : ''}: ROLLBACK before the model is asked`;

describe('checkPublish and a chain cut back, embedded store', () => {
  for (const { cut, unmarked, principal, problem } of cases)
    it(title(cut, unmarked), async () => {
      const root = tempDir();
      let ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
      if (cut === 'below the watermark') await ledger.log.setWatermark('s', 5);
      else {
        // Behind the store's back, between two opens (its lock keeps others out while it is open).
        await ledger.close();
        const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
        if (cut === 'moved back')
          await log.raw.put('h!s', JSON.stringify({ session: 's', seq: 0, id: ids[0], owner: 'alice' }));
        else await log.raw.del('h!s');
        if (unmarked) await log.raw.del('w!s');
        await log.close();
        ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
      }
      try {
        await refusedBeforeTheModel(ledger, principal, problem);
      } finally {
        await ledger.close();
      }
    });

  it(setBackTitle, async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
    await ledger.publish({ ...scope, session: 't' }, sampleSummary('t'));
    await ledger.close();
    // Offline: s's head record back to seq 0, its watermark with it, entries 1 and 2 (positions 1 and 2) removed.
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
    await log.raw.batch([
      { type: 'put', key: 'h!s', value: JSON.stringify({ session: 's', seq: 0, id: ids[0], owner: 'alice' }) },
      { type: 'put', key: 'w!s', value: '0' },
      ...[1, 2].flatMap((n) => [
        { type: 'del' as const, key: `e!s!${hex(n, 12)}` },
        { type: 'del' as const, key: `p!${hex(n, 16)}` },
      ]),
    ]);
    await log.close();
    ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      await setBackRefusedBeforeTheModel(ledger);
    } finally {
      await ledger.close();
    }
  });

  it('a head removed with its watermark and the first entry: resume, checkPublish and publish refuse ROLLBACK (any entry of a headless session)', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
    await ledger.close();
    // Seq 1 and 2 are left, and no head or watermark says the chain exists: an append must not start it again at 0.
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    await log.raw.batch([
      { type: 'del', key: 'h!s' },
      { type: 'del', key: 'w!s' },
      { type: 'del', key: `e!s!${'0'.repeat(12)}` },
    ]);
    await log.close();
    ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      await resumeRefused(ledger);
      await refusedBeforeTheModel(ledger, 'mallory', /entries exist, but no head names them/);
      expect(await ledger.log.entry('s', 0)).toBeUndefined();
    } finally {
      await ledger.close();
    }
  });

  for (const damage of damages)
    it(damageTitle(damage), async () => {
      const root = tempDir();
      let ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
      const ids = await publishDamageStore(ledger);
      await ledger.close();
      // Offline, the head records as they were: a node of the index on s's path or beside it rewritten, or s's leaf made
      // unreadable.
      const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
      const at = (depth: number) => headsNodeKey({ depth, prefix: prefixOf(sessionKey('s'), depth) });
      let leaf = 0;
      while (!(await log.raw.get(at(leaf)))?.startsWith('l ')) leaf++;
      expect(leaf).toBeGreaterThan(3);
      if (damage === 'leaf rewritten')
        await log.raw.put(
          at(leaf),
          headsNodeValue({ leaf: true, key: sessionKey('s'), value: headValue({ seq: 0, id: ids[0]! }) }),
        );
      else if (damage === 'node beside it rewritten')
        await log.raw.put(
          headsNodeKey({ depth: 2, prefix: prefixOf(sessionKey('s'), 2, true) }),
          headsNodeValue({ leaf: false, hash: new Uint8Array(32).fill(7) }),
        );
      else await log.raw.put(at(leaf), 'not a node');
      await log.close();
      ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
      try {
        // A session never published whose path runs beside s's leaf: its path does not hash to the root either.
        const beside = partingFromS(UNPUBLISHED, leaf - 1);
        await damageRefusedBeforeTheModel(
          ledger,
          damage === 'leaf rewritten'
            ? [
                ['s', unhashedAt(leaf - 1)],
                [beside, unhashedAt(leaf - 1)],
              ]
            : damage === 'node beside it rewritten'
              ? [['s', unhashedAt(1)]]
              : [
                  ['s', `ManifestError RECORD_CORRUPT: manifest log record ${at(leaf)} is corrupt: `],
                  [beside, `ManifestError RECORD_CORRUPT: manifest log record ${at(leaf)} is corrupt: `],
                ],
        );
      } finally {
        await ledger.close();
      }
    });
});

let schemas = 0;
const nextSchema = () => `cpcut${process.pid}_${schemas++}`;

describePostgres('checkPublish and a chain cut back, PostgreSQL', (pg) => {
  for (const { cut, unmarked, principal, problem } of cases)
    it(title(cut, unmarked), async () => {
      const schema = nextSchema();
      const ledger = await openLedger({
        root: tempDir(),
        host: 'host-a',
        postgres: { connectionString: pg.connectionString, schema },
        onNotice: () => {},
      });
      try {
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
        // In the shared database, while this ledger is open (another host's, or an operator's, doing).
        if (cut === 'moved back')
          await sqlOn(pg.connectionString, `UPDATE "${schema}".heads SET seq = 0, id = $1 WHERE session = 's'`, [
            ids[0],
          ]);
        else if (cut === 'removed')
          await sqlOn(pg.connectionString, `DELETE FROM "${schema}".heads WHERE session = 's'`);
        else await ledger.log.setWatermark('s', 5);
        if (unmarked) await sqlOn(pg.connectionString, `DELETE FROM "${schema}".watermarks WHERE session = 's'`);
        await refusedBeforeTheModel(ledger, principal, problem);
      } finally {
        await ledger.close();
      }
    });

  it(setBackTitle + ' (a ledger running before the change, and one opened after)', async () => {
    const schema = nextSchema();
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema };
    const openOne = () => openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    const running = await openOne();
    let fresh: Ledger | undefined;
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await running.publish(scope, sampleSummary(i))).id);
      await running.publish({ ...scope, session: 't' }, sampleSummary('t'));
      // In the shared database: s's head row back to seq 0, its watermark with it, entries 1 and 2 removed.
      await sqlOn(
        pg.connectionString,
        `WITH d AS (DELETE FROM "${schema}".entries WHERE session = 's' AND seq > 0),
          w AS (UPDATE "${schema}".watermarks SET seq = 0 WHERE session = 's')
          UPDATE "${schema}".heads SET seq = 0, id = $1 WHERE session = 's'`,
        [ids[0]],
      );
      fresh = await openOne();
      await setBackRefusedBeforeTheModel(fresh);
      // The running ledger: t and fresh were compacted by the other one (seq 2 and 1 now).
      const head = await running.log.head('s');
      const model = countingModel();
      const checked = await refusal(running.checkPublish(scope));
      expect(checked).toMatch(/^LedgerError ROLLBACK: session s: the session-heads index commits a head other than/);
      expect(await refusal(compact({ ledger: running, scope, model, transcript }))).toBe(checked);
      expect(model.asked).toBe(0);
      expect(await running.log.head('s')).toEqual(head);
      expect(await refusal(running.checkPublish({ ...scope, session: 't' }))).toBe('passed');
    } finally {
      await fresh?.close();
      await running.close();
    }
  });

  it('a head removed with its watermark and the first entry: resume, checkPublish and publish refuse ROLLBACK (any entry of a headless session)', async () => {
    const schema = nextSchema();
    const ledger = await openLedger({
      root: tempDir(),
      host: 'host-a',
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
    });
    try {
      for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
      for (const table of ['heads', 'watermarks'])
        await sqlOn(pg.connectionString, `DELETE FROM "${schema}".${table} WHERE session = 's'`);
      await sqlOn(pg.connectionString, `DELETE FROM "${schema}".entries WHERE session = 's' AND seq = 0`);
      await refusedBeforeTheModel(ledger, 'mallory', /entries exist, but no head names them/);
      expect(await ledger.log.entry('s', 0)).toBeUndefined();
      // Another host's ledger, which never published to the session: the log's head window alone refuses resume.
      const other = await openLedger({
        root: tempDir(),
        host: 'host-b',
        postgres: { connectionString: pg.connectionString, schema },
        onNotice: () => {},
      });
      try {
        await resumeRefused(other);
      } finally {
        await other.close();
      }
    } finally {
      await ledger.close();
    }
  });

  for (const damage of damages)
    it(damageTitle(damage) + ' (a ledger running before the change)', async () => {
      const schema = nextSchema();
      const ledger = await openLedger({
        root: tempDir(),
        host: 'host-a',
        postgres: { connectionString: pg.connectionString, schema },
        onNotice: () => {},
      });
      try {
        const ids = await publishDamageStore(ledger);
        const key = Buffer.from(sessionKey('s'));
        const leaf = (
          await sqlOn<{ depth: number }>(
            pg.connectionString,
            `SELECT depth FROM "${schema}".session_heads WHERE leaf_key = $1`,
            [key],
          )
        )[0]!.depth;
        expect(leaf).toBeGreaterThan(3);
        // In the shared database, the head rows as they were.
        if (damage === 'leaf rewritten')
          await sqlOn(pg.connectionString, `UPDATE "${schema}".session_heads SET hash = $1 WHERE leaf_key = $2`, [
            Buffer.from(headValue({ seq: 0, id: ids[0]! })),
            key,
          ]);
        else if (damage === 'node beside it rewritten')
          await sqlOn(
            pg.connectionString,
            `INSERT INTO "${schema}".session_heads (depth, prefix, hash, leaf_key) VALUES (2, $1, $2, NULL)
              ON CONFLICT (depth, prefix) DO UPDATE SET hash = EXCLUDED.hash, leaf_key = NULL`,
            [Buffer.from(prefixOf(sessionKey('s'), 2, true)), Buffer.alloc(32, 7)],
          );
        // A node no walk can end at: interior nodes on s's path from its leaf down to depth 256.
        else
          await sqlOn(
            pg.connectionString,
            `INSERT INTO "${schema}".session_heads (depth, prefix, hash, leaf_key)
              SELECT * FROM unnest($1::smallint[], $2::bytea[], $3::bytea[], $4::bytea[])
              ON CONFLICT (depth, prefix) DO UPDATE SET hash = EXCLUDED.hash, leaf_key = NULL`,
            (() => {
              const depths = Array.from({ length: 257 - leaf }, (_, i) => leaf + i);
              return [
                depths,
                depths.map((d) => Buffer.from(prefixOf(sessionKey('s'), d))),
                depths.map(() => Buffer.alloc(32, 7)),
                depths.map(() => null),
              ];
            })(),
          );
        const beside = partingFromS(UNPUBLISHED, leaf - 1);
        await damageRefusedBeforeTheModel(
          ledger,
          damage === 'leaf rewritten'
            ? [
                ['s', unhashedAt(leaf - 1)],
                [beside, unhashedAt(leaf - 1)],
              ]
            : damage === 'node beside it rewritten'
              ? [['s', unhashedAt(1)]]
              : [
                  [
                    's',
                    'ManifestError RECORD_CORRUPT: session-heads index: an interior node at depth 256 (a damaged index)',
                  ],
                  [beside, unhashedAt(leaf - 1)],
                ],
        );
      } finally {
        await ledger.close();
      }
    });
});
