/**
 * The tree on PostgreSQL: the same log gives the same checkpoints and proofs on both backends, and a
 * rolled-back database is refused by a ledger that pinned a later checkpoint.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { readdirSync, writeFileSync } from 'node:fs';
import pgLib from 'pg';
import { expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import { readPinnedNote } from '../../src/ledger/checkpoint-pin.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { LedgerError } from '../../src/errors.js';
import { fsck } from '../../src/ops/maintenance.js';
import { generateJwk } from '../../src/keys/local-signer.js';
import { describePostgres } from '../support/postgres.js';
import { prefixOf, sessionHeadsRoot, sessionKey } from '../../manifests/tlog/session-heads.js';
import { sampleSummary, tempDir } from '../support/tmp.js';

describePostgres(
  'Merkle tree on PostgreSQL',
  (pg) => {
    const sqlRows = async <R extends object>(text: string): Promise<R[]> => {
      const client = new pgLib.Client({ connectionString: pg.connectionString });
      await client.connect();
      try {
        return (await client.query<R>(text)).rows;
      } finally {
        await client.end();
      }
    };
    const sql = async (text: string) => void (await sqlRows(text));

    /** Two ledgers that sign byte-identical manifests: one key file, one clock, one host, one origin. */
    async function pair() {
      const keyFile = join(tempDir(), 'key.jwk');
      writeFileSync(keyFile, JSON.stringify(generateJwk()), { mode: 0o600 });
      const start = Date.parse('2026-12-01T00:00:00.000Z');
      const clocks = [0, 1].map(() => {
        let t = start;
        return () => new Date((t += 1000));
      });
      const common = { host: 'h1', keyFile, origin: 'example.com/both' };
      const embedded = await openLedger({ ...common, root: tempDir(), clock: clocks[0] });
      const schema = `tree_${process.pid}_${Date.now()}`;
      const pgRoot = tempDir();
      const onPg = await openLedger({
        ...common,
        root: pgRoot,
        clock: clocks[1],
        postgres: { connectionString: pg.connectionString, schema },
      });
      return { embedded, onPg, schema, pgRoot, common };
    }

    const publishBoth = async (ledgers: Ledger[], n: number) => {
      for (let i = 0; i < n; i++)
        for (const l of ledgers)
          await l.publish({ principal: 'alice', session: `s${i % 3}`, run: 'r' }, sampleSummary(i));
    };

    it('gives the same root and the same proofs as the embedded backend for the same log', async () => {
      const { embedded, onPg } = await pair();
      try {
        await publishBoth([embedded, onPg], 11);
        const [a, b] = [await embedded.checkpoint(), await onPg.checkpoint()];
        expect(b.checkpoint.size).toBe(11);
        expect(Buffer.from(b.checkpoint.root).toString('hex')).toBe(Buffer.from(a.checkpoint.root).toString('hex'));
        const history = await embedded.history({ principal: 'alice', session: 's1' });
        for (const h of history) {
          const latest = await embedded.inclusionProof(h.id);
          expect(await onPg.inclusionProof(h.id)).toEqual(latest);
          const size = latest.leafIndex + 1;
          expect(await onPg.inclusionProof(h.id, { size })).toEqual(await embedded.inclusionProof(h.id, { size }));
        }
        for (let m = 1; m <= 11; m++)
          expect(await onPg.consistencyProof(m)).toEqual(await embedded.consistencyProof(m));
        // The session-heads index too: the same extension line, so the same signed checkpoint body.
        expect(b.checkpoint.extensions).toEqual(a.checkpoint.extensions);
        expect(b.checkpoint.extensions).toEqual([expect.stringMatching(/^handoff-ledger\/session-heads /)]);
      } finally {
        await embedded.close();
        await onPg.close();
      }
    });

    it('reports a session-heads node that is not the index of the heads (fsck SESSION_HEADS_ROOT)', async () => {
      const { embedded, onPg, schema } = await pair();
      try {
        await embedded.close();
        await publishBoth([onPg], 6);
        expect((await fsck(onPg)).findings).toEqual([]);
        await sql(`UPDATE "${schema}".session_heads SET hash = decode(repeat('05', 32), 'hex')
          WHERE (depth, prefix) = (SELECT depth, prefix FROM "${schema}".session_heads WHERE leaf_key IS NOT NULL LIMIT 1)`);
        const findings = (await fsck(onPg)).findings;
        expect(new Set(findings.map((f) => f.code))).toEqual(new Set(['SESSION_HEADS_ROOT']));
        expect(findings.filter((f) => f.message.includes("not the session's head"))).toHaveLength(1);
      } finally {
        await onPg.close();
      }
    });

    it('reports a stored node on no session path, and the split beside it removes it, as the embedded store does', async () => {
      const { embedded, onPg, schema } = await pair();
      const bits = (s: string) => createHash('sha256').update(s).digest()[0]! >> 4;
      const idWith = (ok: (b: number) => boolean) => {
        for (let i = 0; ; i++) if (ok(bits(`x${i}`))) return `x${i}`;
      };
      const A = idWith((b) => b >> 3 === 0);
      const B = idWith((b) => b >> 3 === 1);
      const C = idWith((b) => b >> 1 === bits(A) >> 1 && b !== bits(A));
      try {
        await embedded.close();
        for (const s of [A, B]) await onPg.publish({ principal: 'alice', session: s, run: 'r' }, sampleSummary(s));
        const stray = prefixOf(prefixOf(sessionKey(A), 2, true), 2);
        const client = new pgLib.Client({ connectionString: pg.connectionString });
        await client.connect();
        try {
          await client.query(
            `INSERT INTO "${schema}".session_heads (depth, prefix, hash, leaf_key) VALUES (2, $1, decode(repeat('07', 32), 'hex'), NULL)`,
            [Buffer.from(stray)],
          );
        } finally {
          await client.end();
        }
        expect((await fsck(onPg)).findings).toEqual([
          expect.objectContaining({ code: 'SESSION_HEADS_ROOT', message: expect.stringContaining('no session') }),
        ]);
        await onPg.publish({ principal: 'alice', session: C, run: 'r' }, sampleSummary(C));
        const heads = [];
        for await (const h of onPg.log.heads()) heads.push({ session: h.session, head: { seq: h.seq, id: h.id } });
        expect((await onPg.checkpoint()).checkpoint.extensions).toEqual([
          `handoff-ledger/session-heads ${Buffer.from(sessionHeadsRoot(heads)).toString('base64')}`,
        ]);
        expect((await fsck(onPg)).findings).toEqual([]);
      } finally {
        await onPg.close();
      }
    });

    it('reports a missing tree node as an fsck finding (TREE_DAMAGED), as on the embedded store', async () => {
      const { embedded, onPg, schema } = await pair();
      try {
        await embedded.close();
        await publishBoth([onPg], 6);
        expect((await fsck(onPg)).findings).toEqual([]);
        // Leaf 0's node: the right edge of a tree of six leaves does not need it.
        await sql(`DELETE FROM "${schema}".tree_nodes WHERE level = 0 AND idx = 0`);
        const report = await fsck(onPg);
        expect(report.ok).toBe(false);
        expect(report.findings).toEqual([expect.objectContaining({ code: 'TREE_DAMAGED' })]);
      } finally {
        await onPg.close();
      }
    });

    it('refuses a database rolled back behind its pinned checkpoint, watermarks included (ROLLBACK)', async () => {
      const { embedded, onPg, schema, pgRoot, common } = await pair();
      await embedded.close();
      await publishBoth([onPg], 4);
      await onPg.close();
      // The attacker removes the newest entry with everything that would reveal it: head, watermark, tree.
      await sql(`BEGIN;
        DELETE FROM "${schema}".tree_nodes WHERE (level = 0 AND idx = 3) OR (level = 1 AND idx = 1) OR (level = 2 AND idx = 0);
        DELETE FROM "${schema}".heads WHERE session = 's0';
        DELETE FROM "${schema}".entries WHERE position = 3;
        UPDATE "${schema}".heads SET seq = 0 WHERE session = 's0';
        INSERT INTO "${schema}".heads SELECT session, seq, id, principal FROM "${schema}".entries WHERE position = 0;
        UPDATE "${schema}".watermarks SET seq = 0 WHERE session = 's0';
        UPDATE "${schema}".log_counter SET next_position = 3;
        COMMIT;`);
      const err = await openLedger({
        ...common,
        root: pgRoot,
        postgres: { connectionString: pg.connectionString, schema },
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LedgerError);
      expect((err as LedgerError).code).toBe('ROLLBACK');
    });

    it("two processes of one root: one that goes on from a database restored behind the other's pin is refused (ROLLBACK), and the pin stands", async () => {
      const root = tempDir();
      const schema = `shared_${process.pid}_${Date.now()}`;
      const postgres = { connectionString: pg.connectionString, schema };
      const scope = (session: string) => ({ principal: 'alice', session, run: 'r1' });
      const a = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      const b = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      const pinFile = () =>
        join(
          root,
          'checkpoints',
          readdirSync(join(root, 'checkpoints')).find((n) => n.endsWith('.pin'))!,
        );
      try {
        for (let i = 0; i < 3; i++) await a.publish(scope('a'), sampleSummary(`a${i}`));
        expect((await b.checkpoint()).checkpoint.size).toBe(3);
        // A backup of the database at 3 entries; A publishes a fourth (acknowledged, pinned); the backup is restored.
        const tables = (
          await sqlRows<{ t: string }>(
            `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = '${schema}'`,
          )
        ).map((r) => r.t);
        await sql(`CREATE SCHEMA "bak_${schema}"`);
        for (const t of tables) await sql(`CREATE TABLE "bak_${schema}"."${t}" AS SELECT * FROM "${schema}"."${t}"`);
        await a.publish(scope('a'), sampleSummary('a3'));
        const pinnedByA = await readPinnedNote(pinFile());
        expect(pinnedByA).toContain('\n4\n');
        await sql(
          `BEGIN; ${tables.map((t) => `DELETE FROM "${schema}"."${t}"; INSERT INTO "${schema}"."${t}" SELECT * FROM "bak_${schema}"."${t}";`).join(' ')} COMMIT;`,
        );
        // B pinned 3 itself and the log has 3 again: it reads A's pin first (before: it went on, signed a fourth entry
        // of its own as size 4 and wrote it over A's pin; a fresh process then accepted the fork).
        await expect(b.checkpoint()).rejects.toMatchObject({ code: 'ROLLBACK' });
        await expect(b.publish(scope('b'), sampleSummary('b0'))).rejects.toMatchObject({ code: 'ROLLBACK' });
        expect(await readPinnedNote(pinFile())).toBe(pinnedByA);
        await expect(openLedger({ root, host: 'host-a', postgres, onNotice: () => {} })).rejects.toMatchObject({
          code: 'ROLLBACK',
        });
      } finally {
        await b.close();
        await a.close();
      }
    }, 120_000);

    it("two processes of one root pinning in turn take each other's larger pins as they go", async () => {
      const root = tempDir();
      const schema = `turns_${process.pid}_${Date.now()}`;
      const postgres = { connectionString: pg.connectionString, schema };
      const a = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      const b = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      try {
        for (let i = 0; i < 6; i++) {
          const [mine, other] = i % 2 === 0 ? [a, b] : [b, a];
          await mine.publish({ principal: 'alice', session: `s${i % 3}`, run: 'r' }, sampleSummary(i));
          const seen = await other.checkpoint();
          expect(seen.checkpoint.size).toBe(i + 1);
          expect((await mine.checkpoint()).checkpoint.root).toEqual(seen.checkpoint.root);
        }
      } finally {
        await b.close();
        await a.close();
      }
    }, 120_000);
  },
  'handoff_ledger_tree_test',
);
