/**
 * A new log is not named with characters the CLI prints escaped (a bidi override, another format character, a C1
 * control, DEL, a backslash): `keys vkey` would print its verifier key escaped, and the README's logs.json recipe copies
 * that line. Refused with INVALID_ARGUMENT, nothing written for an embedded root; on PostgreSQL no origin stored. A store
 * named so before the rule still opens, with its origin given or not, on both backends.
 */
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import { openPostgresBackends } from '../../src/ledger/pg-backend.js';
import { main } from '../../src/cli/main.js';
import { captureIo } from '../support/capture-io.js';
import { describePostgres, sqlOn } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import { embeddedNamedAsBefore, nameAsBefore, publishMany, refusal } from './ledger-support.js';

const ESCAPED = [
  'example.com/\u202elog',
  'example.com/a\u200db',
  'example.com/\u009b2J',
  'example.com/log\u007f',
  'example.com/a\\b',
  'example.com/\u2066x',
];
/** A name given before the rule: a bidi override (U+202E), legal in a C2SP key name. */
const LEGACY = 'example.com/\u202elog';

describe('a new embedded log', () => {
  it('is refused a name the CLI prints escaped (INVALID_ARGUMENT), with nothing written: no root made', async () => {
    for (const origin of ESCAPED) {
      const root = join(tempDir(), 'store');
      const err = await refusal(openLedger({ root, host: 'host-a', origin }));
      expect(err.code).toBe('INVALID_ARGUMENT');
      expect(err.message).toMatch(/^origin: a new log's origin may not hold a character the CLI prints escaped/);
      expect(existsSync(root)).toBe(false);
    }
  });

  it('is refused to a diagnosing open (fsck) too, and where the log directory holds no log yet: the root as it was', async () => {
    for (const origin of ESCAPED)
      for (const diagnose of [false, true]) {
        const missing = join(tempDir(), 'store');
        const err = await refusal(openLedger({ root: missing, host: 'host-a', origin, diagnose }));
        expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^origin: a new log's/) });
        expect(existsSync(missing)).toBe(false);
        // The log directory made, LevelDB not yet (a creation that stopped): LevelDB would make its log there, and the
        // open made it, with the blob store's directories, before the origin was refused.
        const root = tempDir();
        mkdirSync(join(root, 'manifests-v1'), { mode: 0o700 });
        const again = await refusal(openLedger({ root, host: 'host-a', origin, diagnose }));
        expect(again).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: expect.stringMatching(/^origin: a new log's/),
        });
        expect(readdirSync(root, { recursive: true })).toEqual(['manifests-v1']);
      }
  });

  it('is judged after the refusal that says more: no store there, for a command that makes none', async () => {
    const root = join(tempDir(), 'store');
    const none = await refusal(openLedger({ root, host: 'host-a', origin: LEGACY, createHostKey: false }));
    expect(none).toMatchObject({ code: 'KEY_INVALID', message: expect.stringMatching(/^no store at /) });
    expect(existsSync(root)).toBe(false);
  });

  it('from the CLI: init --origin with a bidi override is INVALID_ARGUMENT (exit 1), nothing made', async () => {
    const root = join(tempDir(), 'store');
    const c = captureIo({ env: {} });
    expect(await main(['init', '--root', root, '--host', 'host-a', '--origin', LEGACY], c.io)).toBe(1);
    expect(c.stderr()).toMatch(/^handoff-ledger: INVALID_ARGUMENT: origin: a new log's origin/);
    expect(existsSync(root)).toBe(false);
  });

  it('named so before the rule still opens, with its origin given or not, and keys vkey names it', async () => {
    const root = tempDir();
    await embeddedNamedAsBefore(root, LEGACY);
    let ledger = await openLedger({ root, host: 'host-a', origin: LEGACY });
    await publishMany(ledger, 's1', 1);
    expect((await ledger.checkpoint()).checkpoint.origin).toBe(LEGACY);
    await ledger.close();
    ledger = await openLedger({ root, host: 'host-a' });
    expect((await ledger.checkpoint()).checkpoint).toMatchObject({ origin: LEGACY, size: 1 });
    await ledger.close();
    const c = captureIo({ env: {} });
    expect(await main(['keys', 'vkey', '--root', root, '--host', 'host-a', '--json'], c.io)).toBe(0);
    expect(c.stdout()).toContain('\\u202e');
  });
});

describePostgres('a new log on PostgreSQL', (pg) => {
  const schemaName = (tag: string) => `origin_printable_${tag}_${process.pid}_${Date.now()}`;

  /** The schema, if it was made, and its tables. */
  const made = async (schema: string) => [
    ...(await sqlOn(pg.connectionString, 'SELECT schema_name FROM information_schema.schemata WHERE schema_name = $1', [
      schema,
    ])),
    ...(await sqlOn(pg.connectionString, 'SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [
      schema,
    ])),
  ];

  it('is refused a name the CLI prints escaped (INVALID_ARGUMENT), with nothing made: no root, no schema', async () => {
    const schema = schemaName('new');
    const postgres = { connectionString: pg.connectionString, schema };
    for (const origin of ESCAPED)
      for (const diagnose of [false, true]) {
        const root = join(tempDir(), 'store');
        const err = await refusal(openLedger({ root, host: 'h1', origin, postgres, diagnose }));
        expect(err.code).toBe('INVALID_ARGUMENT');
        expect(err.message).toMatch(/^origin: a new log's origin may not hold a character the CLI prints escaped/);
        expect(existsSync(root)).toBe(false);
      }
    expect(await made(schema)).toEqual([]);
    // The store is not spoiled: a printable name is taken.
    const ledger = await openLedger({ root: tempDir(), host: 'h1', origin: 'example.com/pg', postgres });
    expect((await ledger.checkpoint()).checkpoint.origin).toBe('example.com/pg');
    await ledger.close();
  });

  it('is refused such a name where the schema is made but its log not named yet: no origin stored, no root made', async () => {
    const schema = schemaName('unnamed');
    const postgres = { connectionString: pg.connectionString, schema };
    const { log, blobs } = await openPostgresBackends(postgres);
    await log.close();
    await blobs.close();
    const tables = await made(schema);
    const root = join(tempDir(), 'store');
    const err = await refusal(openLedger({ root, host: 'h1', origin: LEGACY, postgres }));
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^origin: a new log's/) });
    expect(existsSync(root)).toBe(false);
    expect(await made(schema)).toEqual(tables);
    expect(await sqlOn(pg.connectionString, `SELECT value FROM "${schema}".log_meta WHERE key = 'origin'`)).toEqual([]);
  });

  it('from the CLI: init --postgres --origin with a bidi override is INVALID_ARGUMENT (exit 1) as embedded, nothing made', async () => {
    // A database of its own: the CLI opens the default schema.
    const connectionString = await pg.cluster.createDatabase('origin_printable_cli');
    const root = join(tempDir(), 'store');
    const c = captureIo({ env: {} });
    const args = ['init', '--root', root, '--host', 'h1', '--origin', LEGACY, '--postgres', connectionString];
    expect(await main(args, c.io)).toBe(1);
    expect(c.stderr()).toMatch(/^handoff-ledger: INVALID_ARGUMENT: origin: a new log's origin/);
    expect(existsSync(root)).toBe(false);
    const schemas = await sqlOn(
      connectionString,
      "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')",
    );
    expect(schemas).toEqual([]);
  });

  it('named so before the rule still opens, with its origin given or not', async () => {
    const postgres = { connectionString: pg.connectionString, schema: schemaName('legacy') };
    const { log, blobs } = await openPostgresBackends(postgres);
    await nameAsBefore(log, LEGACY);
    await log.close();
    await blobs.close();
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', origin: LEGACY, postgres });
    await publishMany(ledger, 's1', 1);
    expect((await ledger.checkpoint()).checkpoint.origin).toBe(LEGACY);
    await ledger.close();
    ledger = await openLedger({ root, host: 'h1', postgres });
    expect((await ledger.checkpoint()).checkpoint).toMatchObject({ origin: LEGACY, size: 1 });
    await ledger.close();
  });

  it('another origin than the stored one is refused (INVALID_ARGUMENT) before a missing root directory is made, diagnosing or not, library and CLI', async () => {
    const connectionString = await pg.cluster.createDatabase('origin_mismatch_root');
    const postgres = { connectionString };
    const first = await openLedger({ root: tempDir(), host: 'h1', origin: 'example.com/first', postgres });
    await first.close();
    const refused = "this store's checkpoint origin is example.com/first, not example.com/other";
    for (const diagnose of [false, true]) {
      const root = join(tempDir(), 'store');
      const err = await refusal(openLedger({ root, host: 'h1', origin: 'example.com/other', postgres, diagnose }));
      expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: refused });
      expect(existsSync(root)).toBe(false);
    }
    for (const command of ['init']) {
      const root = join(tempDir(), 'store');
      const c = captureIo({ env: {} });
      const args = [
        command,
        '--root',
        root,
        '--host',
        'h1',
        '--origin',
        'example.com/other',
        '--postgres',
        connectionString,
      ];
      expect(await main(args, c.io), c.stderr()).toBe(1);
      expect(c.stderr()).toBe(`handoff-ledger: INVALID_ARGUMENT: ${refused}\n`);
      expect(existsSync(root)).toBe(false);
    }
    // Its own name opens, from a fresh root too.
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({ root, host: 'h1', origin: 'example.com/first', postgres });
    expect((await ledger.checkpoint()).checkpoint.origin).toBe('example.com/first');
    await ledger.close();
  });
});
