/**
 * A session's head row set back (or removed) under a PostgreSQL store, with its later entries and watermark, the
 * session-heads index left as it was: the index, whose root the pinned checkpoint signs, still commits the later head.
 * The next publish over it is refused `ROLLBACK` in the append's transaction, by a ledger opened before the change and
 * by one opened after it, and checkPublish (compact's check before the model) refuses it alike: nothing appended, the
 * index and the signed checkpoint as they were (before: appended, and the index rewritten so that the next signed root
 * hid the cut; checkPublish passed it). Resume and history read the session's path with the head, from the same
 * snapshot, and refuse likewise (before: the older summary was resumed, or none).
 */
import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { headValue, sessionKey } from '../../manifests/tlog/session-heads.js';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { describePostgres, sqlOn, watchStatements } from '../support/postgres.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { publishMany, refusal, scope } from './ledger-support.js';

describePostgres(
  'a head row set back under PostgreSQL, the session-heads index left as it was',
  (pg) => {
    let n = 0;
    /** A store on a schema of its own: `writer` published s three times and t once, `running` opened before. */
    async function store() {
      const root = tempDir();
      const schema = `setback_${process.pid}_${n++}`;
      const postgres = { connectionString: pg.connectionString, schema };
      const openOne = () => openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      const writer = await openOne();
      const running = await openOne();
      const published = await publishMany(writer, 's', 3);
      await publishMany(writer, 't', 1);
      await writer.close();
      const q = <R extends Record<string, unknown>>(text: string, values?: unknown[]) =>
        sqlOn<R>(pg.connectionString, text, values);
      const index = async () =>
        (
          await q<{ d: number; p: string; h: string }>(
            `SELECT depth AS d, encode(prefix, 'hex') AS p, encode(hash, 'hex') AS h FROM "${schema}".session_heads ORDER BY 1, 2`,
          )
        ).map((r) => `${r.d}/${r.p}/${r.h}`);
      return { schema, openOne, running, published, q, index };
    }

    /** Publishes over the cut with each ledger: ROLLBACK, nothing appended, index and checkpoint unchanged. */
    async function refusedBy(ledgers: Ledger[], s: Awaited<ReturnType<typeof store>>, headSeq: number | undefined) {
      const index = await s.index();
      const entries = async () =>
        (await s.q<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".entries`))[0]!.n;
      const count = await entries();
      for (const ledger of ledgers) {
        const size = (await ledger.checkpoint()).checkpoint.size;
        // checkPublish (compact's check before the model) refuses it as the publish does.
        const checked = await refusal(ledger.checkPublish(scope('s')));
        expect(checked).toMatchObject({
          code: 'ROLLBACK',
          message: expect.stringContaining('session-heads index commits'),
        });
        await expect(ledger.publish(scope('s'), sampleSummary('over the cut'))).rejects.toMatchObject({
          code: 'ROLLBACK',
          message: checked.message,
        });
        expect((await ledger.log.head('s'))?.seq).toBe(headSeq);
        expect(await entries()).toBe(count);
        expect(await s.index()).toEqual(index);
        expect((await ledger.checkpoint()).checkpoint.size).toBe(size);
      }
      // Other sessions are appended as before.
      expect((await ledgers[0]!.publish(scope('t'), sampleSummary('t after'))).seq).toBe(1);
    }

    /** s's head row set back to seq 0 by SQL, with its later entries removed and its watermark lowered. */
    async function setBack(s: Awaited<ReturnType<typeof store>>) {
      await s.q(
        `WITH d AS (DELETE FROM "${s.schema}".entries WHERE session = 's' AND seq > 0)
          UPDATE "${s.schema}".heads SET seq = 0, id = $1 WHERE session = 's'`,
        [s.published[0]!.id],
      );
      await s.q(`UPDATE "${s.schema}".watermarks SET seq = 0 WHERE session = 's'`);
    }

    /** Resume and history of s by each ledger: refused with `code`, the message naming `problem`. */
    async function readsRefused(ledgers: Ledger[], code: string, problem: string) {
      for (const ledger of ledgers)
        for (const read of [() => ledger.resume(scope('s')), () => ledger.history(scope('s'))])
          await expect(read()).rejects.toMatchObject({ code, message: expect.stringContaining(problem) });
    }

    it('is refused ROLLBACK by the next publish, by a ledger running before and one opened after', async () => {
      const s = await store();
      let fresh: Ledger | undefined;
      try {
        await setBack(s);
        fresh = await s.openOne();
        await readsRefused([s.running, fresh], 'ROLLBACK', "commits a head other than the head record's seq 0");
        expect((await fresh.resume(scope('t')))?.seq).toBe(0);
        await refusedBy([s.running, fresh], s, 0);
      } finally {
        await fresh?.close();
        await s.running.close();
      }
    }, 120_000);

    it("is refused ROLLBACK when the session's rows are all removed (before: a new chain began)", async () => {
      const s = await store();
      let fresh: Ledger | undefined;
      try {
        await s.q(
          `WITH d AS (DELETE FROM "${s.schema}".entries WHERE session = 's'),
            w AS (DELETE FROM "${s.schema}".watermarks WHERE session = 's')
            DELETE FROM "${s.schema}".heads WHERE session = 's'`,
        );
        fresh = await s.openOne();
        await readsRefused([fresh, s.running], 'ROLLBACK', 'commits a head for the session, which has no head record');
        await refusedBy([fresh, s.running], s, undefined);
      } finally {
        await fresh?.close();
        await s.running.close();
      }
    }, 120_000);

    it('is TREE_DAMAGED when the leaf was set back with the head (a path that no longer hashes to the root)', async () => {
      const s = await store();
      try {
        const key = sessionKey('s');
        // The leaf of s, wherever its path ends, rewritten to commit seq 0: its ancestors still hash seq 2.
        const leaf = await s.q<{ depth: number }>(
          `UPDATE "${s.schema}".session_heads SET hash = $1 WHERE leaf_key = $2 RETURNING depth`,
          [Buffer.from(headValue({ seq: 0, id: s.published[0]!.id })), Buffer.from(key)],
        );
        expect(leaf).toHaveLength(1);
        expect(leaf[0]!.depth).toBeGreaterThan(0);
        await setBack(s);
        await readsRefused([s.running], 'TREE_DAMAGED', "the nodes on the session's path do not hash to its root");
        // checkPublish (compact's check before the model) refuses it as the append's index update does, not ROLLBACK.
        const checked = await s.running.checkPublish(scope('s')).then(
          () => undefined,
          (err: Error) => err,
        );
        expect(checked).toMatchObject({ name: 'ManifestError', code: 'TREE_DAMAGED' });
        await expect(s.running.publish(scope('s'), sampleSummary('over the damage'))).rejects.toMatchObject({
          name: 'ManifestError',
          code: 'TREE_DAMAGED',
          message: checked!.message,
        });
      } finally {
        await s.running.close();
      }
    }, 120_000);

    it('reads a path deeper than the window read at first in one more statement, the head still held to it', async () => {
      // Two sessions whose keys share their first 12 bits: their leaves sit at depth 13 or deeper, below the first
      // read (8 depths for a log that walked nothing yet).
      const first12 = (id: string) => createHash('sha256').update(id).digest().readUInt16BE(0) >> 4;
      const seen = new Map<number, string>();
      let pair: [string, string] | undefined;
      for (let i = 0; !pair; i++) {
        const id = `deep-${i}`;
        const other = seen.get(first12(id));
        if (other !== undefined) pair = [other, id];
        else seen.set(first12(id), id);
      }
      const root = tempDir();
      const postgres = { connectionString: pg.connectionString, schema: `setback_${process.pid}_deep` };
      const openOne = () => openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      const writer = await openOne();
      await publishMany(writer, pair[0], 2);
      await publishMany(writer, pair[1], 1);
      await writer.close();
      const reader = await openOne();
      try {
        const windows: number[] = [];
        const watch = watchStatements(({ text }) => {
          if (text?.includes('headless_beyond') && text.includes('heads_nodes')) windows.push(1);
        });
        try {
          expect((await reader.resume(scope(pair[0])))?.seq).toBe(1);
          const deeper = windows.length;
          expect((await reader.resume(scope(pair[1])))?.seq).toBe(0);
          // The first read again with the deeper path (2 statements); then the read-ahead follows the walk (1).
          expect([deeper, windows.length - deeper]).toEqual([2, 1]);
        } finally {
          watch.stop();
        }
        // Set back under the deep path: still held to the index.
        const published = await reader.history(scope(pair[0]));
        await sqlOn(
          pg.connectionString,
          `WITH d AS (DELETE FROM "${postgres.schema}".entries WHERE session = $1 AND seq > 0),
            w AS (UPDATE "${postgres.schema}".watermarks SET seq = 0 WHERE session = $1)
            UPDATE "${postgres.schema}".heads SET seq = 0, id = $2 WHERE session = $1`,
          [pair[0], published[0]!.id],
        );
        const fresh = await openOne();
        try {
          // checkPublish first: its facts' statement reads the deeper path again too (a new ledger reads 8 depths).
          await expect(fresh.checkPublish(scope(pair[0]))).rejects.toMatchObject({
            code: 'ROLLBACK',
            message: expect.stringContaining("commits a head other than the head record's seq 0"),
          });
          await fresh.checkPublish(scope(pair[1]));
          await expect(fresh.resume(scope(pair[0]))).rejects.toMatchObject({ code: 'ROLLBACK' });
          expect((await fresh.resume(scope(pair[1])))?.seq).toBe(0);
        } finally {
          await fresh.close();
        }
      } finally {
        await reader.close();
      }
    }, 120_000);

    it('refuses only the set-back session of appends that share a transaction', async () => {
      const s = await store();
      try {
        await setBack(s);
        const sessions = ['s', 'u1', 'u2', 'u3', 'u4', 'u5', 't'];
        const outcomes = await Promise.allSettled(
          sessions.map((session) => s.running.publish(scope(session), sampleSummary(`${session} together`))),
        );
        expect(
          outcomes.map((o) => (o.status === 'fulfilled' ? o.value.seq : (o.reason as { code: string }).code)),
        ).toEqual(['ROLLBACK', 0, 0, 0, 0, 0, 1]);
        expect((await s.running.log.head('s'))?.seq).toBe(0);
      } finally {
        await s.running.close();
      }
    }, 120_000);
  },
  'head_set_back',
);
