/**
 * A PostgreSQL schema this version of handoff-ledger does not read — migrated by a newer one (a version of a component
 * it does not know), or holding a known version under another name (another program, another build) — is refused
 * FORMAT_UNSUPPORTED on every path a user meets it, as an embedded root whose format marker names a newer layout or
 * another format (test/open-root-format.test.ts): `openLedger` with `postgres` (diagnosing too), `openPostgresBackends`,
 * `PgManifestLog.open`, `PgBlobStore.open`, and every CLI command (exit 1, as the embedded refusal). Not STORAGE_FAILED:
 * no retry mends it. Nothing is migrated or written: the migrations table, the schema's tables and the root as they were.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PgBlobStore, BLOB_MIGRATIONS } from '../store/pg/blob-store.js';
import { PgDatabase } from '../store/pg/db.js';
import { StoreError } from '../store/errors.js';
import { nobleBlake3 } from '../store/hash/digest.js';
import { ManifestError } from '../manifests/errors.js';
import { MANIFEST_MIGRATIONS } from '../manifests/log/pg/schema.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import { openLedger } from '../src/ledger/open.js';
import { openPostgresBackends } from '../src/ledger/postgres.js';
import { main } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir, treeSnapshot } from './support/tmp.js';

let schemas = 0;
const nextSchema = () => `u${process.pid}_${schemas++}`;

async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  return p.then(
    () => expect.unreachable('expected a rejection'),
    (err: unknown) => err as Error & { code?: string },
  );
}

describePostgres(
  'a PostgreSQL schema of a newer handoff-ledger, or of another program',
  (pg) => {
    const sql = <R extends Record<string, unknown>>(text: string, values?: unknown[]) =>
      sqlOn<R>(pg.connectionString, text, values);
    const conn = (schema: string) => ({ connectionString: pg.connectionString, schema });

    /** What the schema holds: its migrations rows (when they were applied included) and its tables. */
    const schemaState = async (schema: string) => ({
      migrations: await sql(
        `SELECT component, version, name, applied_at::text FROM "${schema}".handoff_ledger_migrations ORDER BY 1, 2`,
      ),
      tables: (
        await sql<{ t: string }>('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1', [
          schema,
        ])
      )
        .map((r) => r.t)
        .sort(),
    });

    const future = (schema: string, component: string, version: number) =>
      sql(
        `INSERT INTO "${schema}".handoff_ledger_migrations (component, version, name) VALUES ($1, $2, 'from the future')`,
        [component, version],
      );

    it('openLedger (diagnosing too), openPostgresBackends, PgManifestLog.open: a newer log schema, nothing written', async () => {
      const schema = nextSchema();
      const root = tempDir();
      const made = await openLedger({ root, host: 'h1', postgres: conn(schema) });
      await made.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary());
      await made.close();
      await future(schema, 'manifests', MANIFEST_MIGRATIONS.length + 1);
      const before = { db: await schemaState(schema), root: treeSnapshot(root) };

      for (const diagnose of [false, true]) {
        const err = await rejection(openLedger({ root, host: 'h1', postgres: conn(schema), diagnose }));
        expect(err).toBeInstanceOf(ManifestError);
        expect(err.code).toBe('FORMAT_UNSUPPORTED');
        expect(err.message).toMatch(
          new RegExp(`manifests schema v${MANIFEST_MIGRATIONS.length + 1} in "${schema}" is newer than this library`),
        );
        expect(err.message).toMatch(/upgrade handoff-ledger/i);
      }
      const backends = await rejection(openPostgresBackends(conn(schema)));
      expect(backends).toBeInstanceOf(ManifestError);
      expect(backends.code).toBe('FORMAT_UNSUPPORTED');
      const log = await rejection(PgManifestLog.open(conn(schema)));
      expect(log).toBeInstanceOf(ManifestError);
      expect(log.code).toBe('FORMAT_UNSUPPORTED');
      // A host that opens with another root (no key yet) makes none: the refusal comes before the keyring.
      const other = tempDir();
      expect((await rejection(openLedger({ root: other, host: 'h2', postgres: conn(schema) }))).code).toBe(
        'FORMAT_UNSUPPORTED',
      );
      expect(readdirSync(other)).toEqual([]);

      expect(await schemaState(schema)).toEqual(before.db);
      expect(treeSnapshot(root)).toEqual(before.root);
    });

    it('openLedger with an origin: the versions are judged before the stored origin is read, nothing written', async () => {
      // A store named `log.example/a`; opened asking for another name (or the same), and with the log's table of a
      // layout this release does not read. Each is a schema a newer handoff-ledger migrated: FORMAT_UNSUPPORTED, not
      // the origin mismatch (INVALID_ARGUMENT) nor the failed read of its table (STORAGE_FAILED) it would be otherwise.
      for (const [component, version, Class, relayout] of [
        ['manifests', MANIFEST_MIGRATIONS.length + 1, ManifestError, false],
        ['manifests', MANIFEST_MIGRATIONS.length + 1, ManifestError, true],
        ['blobs', BLOB_MIGRATIONS.length + 1, StoreError, false],
      ] as const) {
        const schema = nextSchema();
        const root = tempDir();
        const made = await openLedger({ root, host: 'h1', postgres: conn(schema), origin: 'log.example/a' });
        await made.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary());
        await made.close();
        await future(schema, component, version);
        if (relayout) await sql(`ALTER TABLE "${schema}".log_meta RENAME COLUMN value TO v`);
        const before = { db: await schemaState(schema), root: treeSnapshot(root) };
        for (const origin of ['log.example/b', 'log.example/a'])
          for (const diagnose of [false, true]) {
            const err = await rejection(openLedger({ root, host: 'h1', postgres: conn(schema), origin, diagnose }));
            const what = `${component} v${version}${relayout ? ', log_meta relaid' : ''}, origin ${origin}`;
            expect(err, what).toBeInstanceOf(Class);
            expect(err.code, `${what}: ${err.message}`).toBe('FORMAT_UNSUPPORTED');
            expect(err.message).toMatch(
              new RegExp(
                `${component} schema v${version} in "${schema}" is newer than this library.*upgrade handoff-ledger`,
                'i',
              ),
            );
          }
        // A root not made yet stays unmade: the refusal comes before it.
        const other = join(tempDir(), 'root');
        expect(
          (await rejection(openLedger({ root: other, host: 'h2', postgres: conn(schema), origin: 'log.example/b' })))
            .code,
        ).toBe('FORMAT_UNSUPPORTED');
        expect(existsSync(other)).toBe(false);
        expect(await schemaState(schema)).toEqual(before.db);
        expect(treeSnapshot(root)).toEqual(before.root);
      }
    });

    it('judges the versions before it migrates: a log of an older release with a newer version gets no step, nor blob tables', async () => {
      const schema = nextSchema();
      // As release 0.1.0 left a schema (log v1–v2), then a version this library does not know.
      const db = new PgDatabase(conn(schema));
      try {
        await db.migrate('manifests', MANIFEST_MIGRATIONS.slice(0, 2), ManifestError);
      } finally {
        await db.close();
      }
      await future(schema, 'manifests', MANIFEST_MIGRATIONS.length + 3);
      const before = await schemaState(schema);
      const err = await rejection(openPostgresBackends(conn(schema)));
      expect(err).toBeInstanceOf(ManifestError);
      expect(err.code).toBe('FORMAT_UNSUPPORTED');
      expect(err.message).toMatch(new RegExp(`which knows up to v${MANIFEST_MIGRATIONS.length}`));
      // v3–v5 not applied (no tree_nodes, log_meta, …), the migrations as they were; nor the blob store's tables made,
      // whose open comes first (both components judged before either migrates).
      expect(await schemaState(schema)).toEqual(before);
      expect(before.tables).not.toContain('blobs');
      expect((await rejection(PgManifestLog.open(conn(schema)))).code).toBe('FORMAT_UNSUPPORTED');
      expect(await schemaState(schema)).toEqual(before);
    });

    it('PgBlobStore.open and openPostgresBackends: a newer blob schema is StoreError FORMAT_UNSUPPORTED, the log untouched', async () => {
      const schema = nextSchema();
      await (await PgBlobStore.open({ ...conn(schema), hash: nobleBlake3 })).close();
      await future(schema, 'blobs', BLOB_MIGRATIONS.length + 1);
      const before = await schemaState(schema);
      const store = await rejection(PgBlobStore.open({ ...conn(schema), hash: nobleBlake3 }));
      expect(store).toBeInstanceOf(StoreError);
      expect(store.code).toBe('FORMAT_UNSUPPORTED');
      expect(store.message).toMatch(/blobs schema v2 in "[^"]+" is newer than this library.*upgrade handoff-ledger/i);
      for (const open of [
        () => openPostgresBackends(conn(schema)),
        () => openLedger({ root: tempDir(), host: 'h1', postgres: conn(schema) }),
      ]) {
        const err = await rejection(open());
        expect(err).toBeInstanceOf(StoreError);
        expect(err.code).toBe('FORMAT_UNSUPPORTED');
      }
      // The log's tables were never made: the blob store's refusal came first.
      expect(await schemaState(schema)).toEqual(before);
    });

    it('a version no release writes (0 or below, a hand edit): FORMAT_UNSUPPORTED that says so, not "newer", nothing written', async () => {
      for (const [component, version, Class] of [
        ['manifests', 0, ManifestError],
        ['manifests', -3, ManifestError],
        ['blobs', 0, StoreError],
      ] as const) {
        const schema = nextSchema();
        const root = tempDir();
        await (await openLedger({ root, host: 'h1', postgres: conn(schema) })).close();
        await future(schema, component, version);
        const before = { db: await schemaState(schema), root: treeSnapshot(root) };
        const opens = [
          () => openLedger({ root, host: 'h1', postgres: conn(schema) }),
          () => openLedger({ root, host: 'h1', postgres: conn(schema), diagnose: true }),
          () => openPostgresBackends(conn(schema)),
          component === 'manifests'
            ? () => PgManifestLog.open(conn(schema))
            : () => PgBlobStore.open({ ...conn(schema), hash: nobleBlake3 }),
        ];
        for (const open of opens) {
          const err = await rejection(open());
          expect(err).toBeInstanceOf(Class);
          expect(err.code, err.message).toBe('FORMAT_UNSUPPORTED');
          expect(err.message).toContain(`${component} schema in "${schema}" records unknown version ${version}`);
          expect(err.message).not.toMatch(/newer/i);
        }
        expect(await schemaState(schema)).toEqual(before.db);
        expect(treeSnapshot(root)).toEqual(before.root);
      }
    });

    it('a known version under another name: FORMAT_UNSUPPORTED, the stored name escaped', async () => {
      const schema = nextSchema();
      await (await PgManifestLog.open(conn(schema))).close();
      const name = 'x\u001b]0;owned\u0007\u202e';
      await sql(
        `UPDATE "${schema}".handoff_ledger_migrations SET name = $1 WHERE component = 'manifests' AND version = 3`,
        [name],
      );
      const before = await schemaState(schema);
      for (const open of [
        () => PgManifestLog.open(conn(schema)),
        () => openPostgresBackends(conn(schema)),
        () => openLedger({ root: tempDir(), host: 'h1', postgres: conn(schema) }),
      ]) {
        const err = await rejection(open());
        expect(err).toBeInstanceOf(ManifestError);
        expect(err.code).toBe('FORMAT_UNSUPPORTED');
        expect(err.message).toContain(
          `manifests schema v3 in "${schema}" is "x\\u001b]0;owned\\u0007\\u202e", expected "${MANIFEST_MIGRATIONS[2]!.name}"`,
        );
        expect(err.message).not.toMatch(/[\u001b\u0007\u202e]/);
      }
      expect(await schemaState(schema)).toEqual(before);
    });

    it("a schema whose migrations table lost its rows (deleted, or the table dropped) while the component's tables remain: FORMAT_UNSUPPORTED saying so, nothing written", async () => {
      /** As `schemaState`, the migrations table's absence included (a dropped one must not be made again). */
      const state = async (schema: string) =>
        schemaState(schema).catch(async () => ({
          migrations: 'dropped',
          tables: (
            await sql<{ t: string }>('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1', [
              schema,
            ])
          )
            .map((r) => r.t)
            .sort(),
        }));
      const origin = 'log.example/a';
      const logV1 = `manifests schema in "S" already holds log_counter, entries, heads, grants, watermarks, which its step v1 ("${MANIFEST_MIGRATIONS[0]!.name}") makes, but its handoff_ledger_migrations table records no version of manifests`;
      for (const [lost, Class, said] of [
        [
          'blobs',
          StoreError,
          'blobs schema in "S" already holds blobs, blob_chunks, which its step v1 ("blobs and chunks") makes, but its handoff_ledger_migrations table records no version of blobs',
        ],
        ['manifests', ManifestError, logV1],
        [
          'manifests v4 and v5',
          ManifestError,
          `manifests schema in "S" already holds signing_keys, which its step v4 ("${MANIFEST_MIGRATIONS[3]!.name}") makes, but its handoff_ledger_migrations table records v1, v2, v3 of manifests and not v4`,
        ],
        [
          'the table',
          StoreError,
          'blobs schema in "S" already holds blobs, blob_chunks, which its step v1 ("blobs and chunks") makes, but its handoff_ledger_migrations table records no version of blobs',
        ],
      ] as const) {
        const schema = nextSchema();
        const root = tempDir();
        const made = await openLedger({ root, host: 'h1', postgres: conn(schema), origin });
        await made.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary());
        await made.close();
        if (lost === 'the table') await sql(`DROP TABLE "${schema}".handoff_ledger_migrations`);
        else if (lost === 'manifests v4 and v5')
          await sql(`DELETE FROM "${schema}".handoff_ledger_migrations WHERE component = 'manifests' AND version >= 4`);
        else await sql(`DELETE FROM "${schema}".handoff_ledger_migrations WHERE component = $1`, [lost]);
        const before = { db: await state(schema), root: treeSnapshot(root) };
        const message = said.replace('"S"', `"${schema}"`);
        const refused = async (what: string, open: () => Promise<unknown>, Expected: typeof Class, text: string) => {
          const err = await rejection(open());
          expect(err, `${lost}, ${what}: ${err.message}`).toBeInstanceOf(Expected);
          expect(err.code, `${lost}, ${what}: ${err.message}`).toBe('FORMAT_UNSUPPORTED');
          expect(err.message).toContain(text);
          expect(err.message).toMatch(
            /nothing was migrated or changed\. Restore the schema's handoff_ledger_migrations table from a backup/,
          );
        };
        // Every open a user meets it by; an origin other than the store's is refused for the schema, not the name.
        for (const diagnose of [false, true])
          for (const asked of [undefined, origin, 'log.example/b'])
            await refused(
              `openLedger origin ${asked} diagnose ${diagnose}`,
              () => openLedger({ root, host: 'h1', postgres: conn(schema), diagnose, ...(asked && { origin: asked }) }),
              Class,
              message,
            );
        await refused('openPostgresBackends', () => openPostgresBackends(conn(schema)), Class, message);
        // Each store's own open (no judging of both first): its component, in its migration's transaction.
        if (lost === 'blobs' || lost === 'the table')
          await refused(
            'PgBlobStore.open',
            () => PgBlobStore.open({ ...conn(schema), hash: nobleBlake3 }),
            StoreError,
            message,
          );
        if (lost !== 'blobs')
          await refused(
            'PgManifestLog.open',
            () => PgManifestLog.open(conn(schema)),
            ManifestError,
            lost === 'the table' ? logV1.replace('"S"', `"${schema}"`) : message,
          );
        // The component that kept its rows opens as ever.
        if (lost === 'blobs') await (await PgManifestLog.open(conn(schema))).close();
        expect(await state(schema)).toEqual(before.db);
        expect(treeSnapshot(root)).toEqual(before.root);
      }
    });

    it('every CLI command: FORMAT_UNSUPPORTED, exit 1 (as an embedded root of a newer layout), nothing changed', async () => {
      // The CLI's schema (handoff_ledger), a store the CLI made.
      const dir = tempDir();
      const root = join(dir, 'root');
      const summary = join(dir, 'summary.json');
      writeFileSync(summary, JSON.stringify(sampleSummary('cli')));
      const env = { HANDOFF_LEDGER_POSTGRES: pg.connectionString, HANDOFF_LEDGER_HOST: 'h1' };
      const run = async (args: string[]) => {
        const c = captureIo({ env });
        const code = await main([...args, '--root', root], c.io);
        return { code, stdout: c.stdout(), stderr: c.stderr() };
      };
      const scope = ['--principal', 'alice', '--session', 's1'];
      const published = await run(['publish', ...scope, '--run', 'r1', summary]);
      expect(published.code, published.stderr).toBe(0);

      for (const [component, version] of [
        ['manifests', MANIFEST_MIGRATIONS.length + 1],
        ['blobs', BLOB_MIGRATIONS.length + 1],
      ] as const) {
        await future('handoff_ledger', component, version);
        const before = { db: await schemaState('handoff_ledger'), root: treeSnapshot(root) };
        for (const args of [
          ['fsck'],
          ['history', ...scope],
          ['resume', ...scope],
          ['init'],
          ['publish', ...scope, '--run', 'r2', summary],
        ]) {
          const r = await run(args);
          expect(r.code, `${args[0]}: ${r.stderr}`).toBe(1);
          expect(r.stderr).toMatch(
            new RegExp(
              `^handoff-ledger: FORMAT_UNSUPPORTED: ${component} schema v${version} .*[Uu]pgrade handoff-ledger`,
            ),
          );
        }
        const json = await run(['fsck', '--json']);
        expect(json.code).toBe(1);
        expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'FORMAT_UNSUPPORTED' } });
        expect(await schemaState('handoff_ledger')).toEqual(before.db);
        expect(treeSnapshot(root)).toEqual(before.root);
        await sql('DELETE FROM handoff_ledger.handoff_ledger_migrations WHERE component = $1 AND version = $2', [
          component,
          version,
        ]);
      }
      // Without the newer version the store opens as before.
      const history = await run(['history', ...scope]);
      expect(history.code, history.stderr).toBe(0);
    });
  },
  'hl_schema_unsupported',
);
