/**
 * A session's head row set back (or removed) under a PostgreSQL store, with its later entries and watermark, the
 * session-heads index left as it was: the index, whose root the pinned checkpoint signs, still commits the later head.
 * The next publish over it is refused `ROLLBACK` in the append's transaction, by a ledger opened before the change and
 * by one opened after it: nothing appended, the index and the signed checkpoint as they were (before: appended, and
 * the index rewritten so that the next signed root hid the cut).
 */
import { expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { describePostgres, sqlOn } from '../support/postgres.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { publishMany, scope } from './ledger-support.js';

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
        await expect(ledger.publish(scope('s'), sampleSummary('over the cut'))).rejects.toMatchObject({
          code: 'ROLLBACK',
          message: expect.stringContaining('session-heads index commits'),
        });
        expect((await ledger.log.head('s'))?.seq).toBe(headSeq);
        expect(await entries()).toBe(count);
        expect(await s.index()).toEqual(index);
        expect((await ledger.checkpoint()).checkpoint.size).toBe(size);
      }
      // Other sessions are appended as before.
      expect((await ledgers[0]!.publish(scope('t'), sampleSummary('t after'))).seq).toBe(1);
    }

    it('is refused ROLLBACK by the next publish, by a ledger running before and one opened after', async () => {
      const s = await store();
      let fresh: Ledger | undefined;
      try {
        await s.q(
          `WITH d AS (DELETE FROM "${s.schema}".entries WHERE session = 's' AND seq > 0)
            UPDATE "${s.schema}".heads SET seq = 0, id = $1 WHERE session = 's'`,
          [s.published[0]!.id],
        );
        await s.q(`UPDATE "${s.schema}".watermarks SET seq = 0 WHERE session = 's'`);
        fresh = await s.openOne();
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
        await refusedBy([fresh, s.running], s, undefined);
      } finally {
        await fresh?.close();
        await s.running.close();
      }
    }, 120_000);

    it('refuses only the set-back session of appends that share a transaction', async () => {
      const s = await store();
      try {
        await s.q(
          `WITH d AS (DELETE FROM "${s.schema}".entries WHERE session = 's' AND seq > 0)
            UPDATE "${s.schema}".heads SET seq = 0, id = $1 WHERE session = 's'`,
          [s.published[0]!.id],
        );
        await s.q(`UPDATE "${s.schema}".watermarks SET seq = 0 WHERE session = 's'`);
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
