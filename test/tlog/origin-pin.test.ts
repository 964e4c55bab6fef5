/**
 * One root pins one log. A database writer who rolls the log back AND deletes or changes its origin record must not
 * get a fresh origin, a fresh pin and no rollback check: the root's pin of the old origin makes the open a FORK, on
 * both backends, before anything is written under the new name (the log's origin record, trust.json and the pins stay
 * as they were). The same refusal keeps a root from being used with a second log (another PostgreSQL schema), which
 * used to list its checkpoint key twice and leave trust.json unloadable for both.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LevelManifestLog } from '../../manifests/log/level/log.js';
import { readPinnedNote } from '../../src/ledger/checkpoint-pin.js';
import { openLedger } from '../../src/ledger/open.js';
import { describePostgres, sqlOn } from '../support/postgres.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { ORIGIN, publishMany, refusal, scope } from './ledger-support.js';

const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** Every path under `root` (directories end in /), with each file's size and time: what a refused open must leave. */
function listing(root: string): string[] {
  return (readdirSync(root, { recursive: true }) as string[])
    .map((name) => {
      const st = statSync(join(root, name));
      return st.isDirectory() ? `${name}/` : `${name} ${st.size} ${st.mtimeMs}`;
    })
    .sort();
}

/** The CLI's default: no origin given, so the first open names the log at random and stores the name in it. */
const openDefault = (root: string, extra: Partial<Parameters<typeof openLedger>[0]> = {}) =>
  openLedger({ root, host: 'host-a', ...extra });

async function editLevel(root: string, change: (log: LevelManifestLog) => Promise<void>): Promise<void> {
  const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
  try {
    await change(log);
  } finally {
    await log.close();
  }
}

describe('the origin record of an embedded store', () => {
  /** A store with 3 publishes whose log is replaced by its copy taken after the first. */
  async function rolledBack(): Promise<string> {
    const root = tempDir();
    let ledger = await openDefault(root);
    await publishMany(ledger, 's1', 1);
    await ledger.close();
    const copy = join(tempDir(), 'db');
    cpSync(join(root, 'manifests-v1'), copy, { recursive: true });
    ledger = await openDefault(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    rmSync(join(root, 'manifests-v1'), { recursive: true, force: true });
    cpSync(copy, join(root, 'manifests-v1'), { recursive: true });
    return root;
  }

  it('a root whose pin is a FIFO and which holds no log is refused at once (KEY_FILE_UNSAFE), not waited on', async () => {
    const root = tempDir();
    const ledger = await openDefault(root);
    await publishMany(ledger, 's1', 1);
    const { origin } = (await ledger.checkpoint()).checkpoint;
    await ledger.close();
    rmSync(join(root, 'manifests-v1'), { recursive: true, force: true });
    const [pin] = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
    const fifo = join(root, 'checkpoints', pin!);
    rmSync(fifo);
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    try {
      const err = await Promise.race([
        refusal(openDefault(root, { origin })),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the open waited on the FIFO')), 5_000)),
      ]);
      expect(err.code).toBe('KEY_FILE_UNSAFE');
      expect(err.message).toContain('is not a regular file');
    } finally {
      // A reader left waiting on the FIFO (the bug) is let go: a writer opened without blocking, closed at once.
      spawnSync('sh', ['-c', `exec 3<>'${fifo}'; exec 3>&-`]);
    }
  });

  it('a rolled-back log keeping its origin is a ROLLBACK (the control)', async () => {
    const root = await rolledBack();
    expect((await refusal(openDefault(root))).code).toBe('ROLLBACK');
  });

  for (const how of ['deleted', 'changed'] as const)
    it(`a rolled-back log whose origin record was ${how} is a FORK, and nothing is pinned or trusted under the new name`, async () => {
      const root = await rolledBack();
      await editLevel(root, (log) =>
        how === 'deleted' ? log.raw.del('m!origin') : log.raw.put('m!origin', 'evil.example/log'),
      );
      const trustBefore = readFileSync(join(root, 'trust.json'), 'utf8');
      const pinsBefore = readdirSync(join(root, 'checkpoints')).sort();
      const err = await refusal(openDefault(root));
      expect(err.code).toBe('FORK');
      expect(err.message).toMatch(/this root pins another log .*checkpoints\/[0-9a-f]{64}\.pin/);
      // Refused before anything was written: a second open is refused the same way.
      expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(trustBefore);
      expect(readdirSync(join(root, 'checkpoints')).sort()).toEqual(pinsBefore);
      // Nor in the log: a deleted origin record is still missing, a changed one still what it was changed to.
      await editLevel(root, async (log) =>
        expect(await log.origin()).toBe(how === 'deleted' ? undefined : 'evil.example/log'),
      );
      expect((await refusal(openDefault(root))).code).toBe('FORK');
      // Not even to diagnose: the pin is another log's, and this open would write one of its own.
      expect((await refusal(openDefault(root, { diagnose: true }))).code).toBe('FORK');
      expect(readdirSync(join(root, 'checkpoints')).sort()).toEqual(pinsBefore);
    });

  describe('fsck (a diagnosing open) of a root that pins this log and holds no embedded log', () => {
    /** A store with `publishes` publishes on ORIGIN, then its log removed: its pin stays in checkpoints/. */
    async function pinWithoutLog(publishes: number): Promise<string> {
      const root = tempDir();
      const ledger = await openDefault(root, { origin: ORIGIN, onNotice: () => {} });
      await publishMany(ledger, 's1', publishes);
      expect((await ledger.checkpoint()).checkpoint.size).toBe(publishes);
      await ledger.close();
      rmSync(join(root, 'manifests-v1'), { recursive: true, force: true });
      return root;
    }

    /** fsck through the CLI, with this log's origin given as HANDOFF_LEDGER_ORIGIN (else the pin is another log's). */
    function cliFsck(root: string): { status: number | null; stdout: string; stderr: string } {
      if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
      const env: NodeJS.ProcessEnv = { ...process.env, HANDOFF_LEDGER_ORIGIN: ORIGIN };
      delete env.HANDOFF_LEDGER_POSTGRES;
      return spawnSync(process.execPath, [CLI, 'fsck', '--root', root, '--host', 'host-a'], {
        encoding: 'utf8',
        env,
        timeout: 60_000,
      });
    }

    for (const [publishes, code, message] of [
      [1, 'ROLLBACK', /the tree has 0 entries, 1 were pinned \(this root holds no embedded log/],
      [0, 'NOT_FOUND', /\.pin", a tree of 0 entries\) but holds no embedded log .*manifests-v1.* makes none/],
    ] as const)
      it(`a pin of ${publishes} entries: ${code}, naming the pin without its log, and the root's listing unchanged (no manifests-v1/)`, async () => {
        const root = await pinWithoutLog(publishes);
        const before = listing(root);
        expect(before).not.toContain('manifests-v1/');
        const err = await refusal(openDefault(root, { origin: ORIGIN, diagnose: true, onNotice: () => {} }));
        expect(err.code).toBe(code);
        expect(err.message).toMatch(message);
        expect(listing(root)).toEqual(before);
        const r = cliFsck(root);
        expect(r.status, r.stderr).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`^handoff-ledger: ${code}: `));
        expect(r.stderr).toMatch(message);
        expect(listing(root)).toEqual(before);
      });

    for (const [publishes, code, message] of [
      [1, 'ROLLBACK', /the tree has 0 entries, 1 were pinned \(this root holds no embedded log/],
      [0, 'NOT_FOUND', /\.note", a tree of 0 entries\) but holds no embedded log .*manifests-v1.* makes none/],
    ] as const)
      it(`the previous version's pin (<hash>.note) of ${publishes} entries: ${code}, naming that file, for fsck as for an open`, async () => {
        const root = await pinWithoutLog(publishes);
        // What 0.1.0 kept: the newest note alone, in <hash>.note.
        const [pin] = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
        const note = await readPinnedNote(join(root, 'checkpoints', pin!));
        rmSync(join(root, 'checkpoints', pin!));
        writeFileSync(join(root, 'checkpoints', pin!.replace(/\.pin$/, '.note')), note, { mode: 0o600 });
        const before = listing(root);
        const err = await refusal(openDefault(root, { origin: ORIGIN, diagnose: true, onNotice: () => {} }));
        expect(err.code).toBe(code);
        expect(err.message).toMatch(message);
        // The old code named <hash>.pin, "which could not be read", for both sizes.
        expect(err.message).not.toMatch(/\.pin\b|could not be read/);
        expect(listing(root)).toEqual(before);
        if (publishes > 0) {
          // An open that would make the log is refused before it makes anything, as for a slot file.
          const opened = await refusal(openDefault(root, { origin: ORIGIN, onNotice: () => {} }));
          expect(opened.code).toBe('ROLLBACK');
          expect(opened.message).toMatch(message);
          expect(listing(root)).toEqual(before);
        }
      });

    for (const [publishes, code] of [
      [1, 'ROLLBACK'],
      [0, 'NOT_FOUND'],
    ] as const)
      it(`a log directory that holds no log (emptied, or its creation stopped) is judged as a missing one: ${code}, the listing unchanged`, async () => {
        const root = await pinWithoutLog(publishes);
        mkdirSync(join(root, 'manifests-v1'), { mode: 0o700 });
        const before = listing(root);
        const err = await refusal(openDefault(root, { origin: ORIGIN, diagnose: true, onNotice: () => {} }));
        expect(err.code).toBe(code);
        expect(err.message).toMatch(/holds no embedded log/);
        expect(listing(root)).toEqual(before);
        if (publishes > 0) {
          // An open that would make the log: the same ROLLBACK, before LevelDB makes it there.
          expect((await refusal(openDefault(root, { origin: ORIGIN, onNotice: () => {} }))).code).toBe('ROLLBACK');
          expect(listing(root)).toEqual(before);
        }
      });

    it('a pin that cannot be read: NOT_FOUND with the reason, and the listing unchanged', async () => {
      const root = await pinWithoutLog(1);
      const [pin] = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
      writeFileSync(join(root, 'checkpoints', pin!), Buffer.alloc(8192, 1));
      const before = listing(root);
      const err = await refusal(openDefault(root, { origin: ORIGIN, diagnose: true, onNotice: () => {} }));
      expect(err.code).toBe('NOT_FOUND');
      expect(err.message).toMatch(/which could not be read: .* but holds no embedded log/);
      expect(listing(root)).toEqual(before);
      const r = cliFsck(root);
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^handoff-ledger: NOT_FOUND: this root pins the log named/);
      expect(listing(root)).toEqual(before);
    });
  });

  it('an intact store reopens, with or without its origin given', async () => {
    const root = tempDir();
    let ledger = await openDefault(root);
    await publishMany(ledger, 's1', 2);
    const { origin } = (await ledger.checkpoint()).checkpoint;
    await ledger.close();
    ledger = await openDefault(root);
    expect((await ledger.resume(scope('s1')))?.seq).toBe(1);
    await ledger.close();
    ledger = await openDefault(root, { origin });
    expect((await ledger.checkpoint()).checkpoint.size).toBe(2);
    await ledger.close();
  });

  it("an embedded log made in a root whose pin (at size 0) processes of a shared log write too pins as they do: another process's pin stays on file", async () => {
    // The processes sharing the root: a log that says it is not exclusive (as PostgreSQL's), whose open pins size 0.
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    const sharedLog = Object.create(level, { exclusive: { value: false } }) as LevelManifestLog;
    const root = join(base, 'root');
    const other = await openDefault(root, { log: sharedLog, origin: ORIGIN });
    try {
      const [pin] = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
      const pinPath = join(root, 'checkpoints', pin!);
      // The tree size the newest pin on file holds (the note's second line).
      const sizeOnFile = async () => (await readPinnedNote(pinPath)).split('\n')[1];
      expect(await sizeOnFile()).toBe('0');
      // A command run without --postgres, given the store's origin: the pin at size 0 lets it make an embedded log.
      const embedded = await openDefault(root, { origin: ORIGIN, onNotice: () => {} });
      try {
        await publishMany(other, 's1', 1); // pins a tree of 1 under <pin>.lock, in the slot beside the pin at 0
        const theirs = await readPinnedNote(pinPath);
        expect(theirs.split('\n')[1]).toBe('1');
        // Its own log is another one, empty: it reads their pin as the others do, and is refused (ROLLBACK) before it
        // appends or pins, rather than writing its pin over theirs, unread.
        expect((await refusal(embedded.publish(scope('e1'), sampleSummary('embedded')))).code).toBe('ROLLBACK');
        expect((await refusal(embedded.checkpoint())).code).toBe('ROLLBACK');
        expect(await readPinnedNote(pinPath)).toBe(theirs);
      } finally {
        await embedded.close();
      }
    } finally {
      await other.close();
      await level.close();
    }
  });
});

describePostgres('the origin record on PostgreSQL', (pg) => {
  const schemaName = (tag: string) => `origin_${tag}_${process.pid}_${Date.now()}`;

  it('a rolled-back database whose origin row was deleted is a FORK, not a fresh log', async () => {
    const schema = schemaName('rb');
    const opts = { host: 'h1', root: tempDir(), postgres: { connectionString: pg.connectionString, schema } };
    const ledger = await openLedger(opts);
    for (let i = 0; i < 4; i++)
      await ledger.publish({ principal: 'alice', session: `s${i % 3}`, run: 'r' }, sampleSummary(i));
    await ledger.close();
    const rollBack = `
      DELETE FROM "${schema}".tree_nodes WHERE (level = 0 AND idx = 3) OR (level = 1 AND idx = 1) OR (level = 2 AND idx = 0);
      DELETE FROM "${schema}".heads WHERE session = 's0';
      DELETE FROM "${schema}".entries WHERE position = 3;
      INSERT INTO "${schema}".heads SELECT session, seq, id, principal FROM "${schema}".entries WHERE position = 0;
      UPDATE "${schema}".watermarks SET seq = 0 WHERE session = 's0';
      UPDATE "${schema}".log_counter SET next_position = 3;
      DELETE FROM "${schema}".log_meta WHERE key = 'origin';`;
    await sqlOn(pg.connectionString, `BEGIN; ${rollBack} COMMIT;`);
    const trustBefore = readFileSync(join(opts.root, 'trust.json'), 'utf8');
    expect((await refusal(openLedger(opts))).code).toBe('FORK');
    expect(readFileSync(join(opts.root, 'trust.json'), 'utf8')).toBe(trustBefore);
    // Nor did it name the log afresh: the origin row is still missing.
    expect(await sqlOn(pg.connectionString, `SELECT value FROM "${schema}".log_meta WHERE key = 'origin'`)).toEqual([]);
    // Still refused: the refusal wrote no pin of the new name.
    expect((await refusal(openLedger(opts))).code).toBe('FORK');
  });

  it('one root used with a second schema is refused, and both stores still open with their own roots', async () => {
    const root = tempDir();
    const a = { host: 'h1', root, postgres: { connectionString: pg.connectionString, schema: schemaName('a') } };
    const b = { ...a, postgres: { ...a.postgres, schema: schemaName('b') } };
    let ledger = await openLedger(a);
    await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(1));
    await ledger.close();
    const trustBefore = readFileSync(join(root, 'trust.json'), 'utf8');
    expect((await refusal(openLedger(b))).code).toBe('FORK');
    expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(trustBefore);
    // The first store is untouched by the refused open; the second opens with a root of its own.
    ledger = await openLedger(a);
    expect((await ledger.resume({ principal: 'alice', session: 's' }))?.seq).toBe(0);
    await ledger.close();
    ledger = await openLedger({ ...b, root: tempDir() });
    await ledger.close();
  });

  it('an embedded open of a root PostgreSQL processes share is a FORK that leaves the root as it found it (no store directories of its own)', async () => {
    if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
    const root = tempDir();
    const shared = {
      host: 'h1',
      root,
      postgres: { connectionString: pg.connectionString, schema: schemaName('left') },
    };
    const ledger = await openLedger({ ...shared, onNotice: () => {} });
    try {
      await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(1));
      await ledger.checkpoint();
      const before = listing(root);
      expect(before).not.toContain('manifests-v1/');
      // The library's embedded open (no postgres option): nothing of an embedded store is made.
      expect((await refusal(openLedger({ host: 'h1', root, onNotice: () => {} }))).code).toBe('FORK');
      expect(listing(root)).toEqual(before);
      // A command run without --postgres: the same refusal, and the root still as it was.
      const env: NodeJS.ProcessEnv = { ...process.env };
      delete env.HANDOFF_LEDGER_POSTGRES;
      for (const args of [
        ['keys', 'list'],
        ['gc', '--grace', '1h'],
      ]) {
        const r = spawnSync(process.execPath, [CLI, ...args, '--root', root, '--host', 'h1'], {
          encoding: 'utf8',
          env,
          timeout: 60_000,
        });
        expect(r.status, r.stderr).toBe(1);
        expect(r.stderr).toMatch(/FORK: this root pins another log/);
        expect(listing(root), args.join(' ')).toEqual(before);
      }
      // The shared store goes on as before.
      expect((await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(2))).seq).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it("an embedded open of a root PostgreSQL processes share, given the store's own origin (HANDOFF_LEDGER_ORIGIN set, HANDOFF_LEDGER_POSTGRES not), is a ROLLBACK that removes none of their writes in flight and makes nothing", async () => {
    if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
    const root = tempDir();
    const shared = {
      host: 'h1',
      root,
      postgres: { connectionString: pg.connectionString, schema: schemaName('own') },
    };
    const ledger = await openLedger({ ...shared, onNotice: () => {} });
    try {
      await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(1));
      const { origin } = (await ledger.checkpoint()).checkpoint;
      const [pin] = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
      // Staging files of the processes sharing the root, being written (as in the FORK case below).
      for (const file of [
        join(root, 'trust.json.lock.0123456789abcdef.tmp'),
        join(root, 'checkpoints', `${pin}.lock.89abcdef01234567.tmp`),
        join(root, '.fedcba9876543210.tmp'),
        join(root, 'keys', '.00112233445566aa.tmp'),
      ])
        writeFileSync(file, 'being written by another process', { mode: 0o600 });
      const before = listing(root);
      const err = await refusal(openLedger({ host: 'h1', root, origin, onNotice: () => {} }));
      expect(err.code).toBe('ROLLBACK');
      expect(err.message).toMatch(/the tree has 0 entries, 1 were pinned .*holds no embedded log.*--postgres/);
      expect(listing(root)).toEqual(before);
      const env: NodeJS.ProcessEnv = { ...process.env, HANDOFF_LEDGER_ORIGIN: origin };
      delete env.HANDOFF_LEDGER_POSTGRES;
      const r = spawnSync(process.execPath, [CLI, 'keys', 'list', '--root', root, '--host', 'h1'], {
        encoding: 'utf8',
        env,
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/ROLLBACK: the log is not an extension of the pinned checkpoint/);
      expect(listing(root)).toEqual(before);
      // fsck opens to diagnose, which writes nothing to the root it diagnoses: it reports the pin without its log
      // and makes no embedded log to check (nor removes the others' writes in flight).
      const f = spawnSync(process.execPath, [CLI, 'fsck', '--root', root, '--host', 'h1'], {
        encoding: 'utf8',
        env,
        timeout: 60_000,
      });
      expect(f.status, f.stderr).toBe(1);
      expect(f.stderr).toMatch(/ROLLBACK: the log is not an extension of the pinned checkpoint.*holds no embedded log/);
      expect(listing(root), 'fsck').toEqual(before);
      expect((await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(2))).seq).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it("a PostgreSQL open of an embedded store's root (HANDOFF_LEDGER_POSTGRES left set) is a FORK that says to open it without --postgres, never to move its pin aside", async () => {
    if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
    const root = tempDir();
    const embedded = await openLedger({ host: 'h1', root, onNotice: () => {} });
    await embedded.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(1));
    await embedded.close();
    const before = listing(root);
    for (const argv of [['resume', '--principal', 'alice', '--session', 's'], ['fsck']]) {
      const r = spawnSync(process.execPath, [CLI, ...argv, '--root', root, '--host', 'h1'], {
        encoding: 'utf8',
        env: { ...process.env, HANDOFF_LEDGER_POSTGRES: pg.connectionString },
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/FORK: this root pins another log .*holds an embedded store .*without --postgres/);
      expect(r.stderr).not.toMatch(/move that pin aside/);
    }
    expect(listing(root)).toEqual(before);
    // Without the variable it opens as ever.
    const again = await openLedger({ host: 'h1', root, onNotice: () => {} });
    expect((await again.resume({ principal: 'alice', session: 's' }))?.seq).toBe(0);
    await again.close();
  });

  it('an embedded open of a root PostgreSQL processes share (a command run without --postgres) is a FORK that removes none of their writes in flight', async () => {
    if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
    const root = tempDir();
    const shared = { host: 'h1', root, postgres: { connectionString: pg.connectionString, schema: schemaName('mix') } };
    const ledger = await openLedger({ ...shared, onNotice: () => {} });
    try {
      await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(1));
      const [pin] = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
      // What writes of the processes sharing this root look like while they run: the staging files of a lock being
      // taken (createFileWhole: trust.json's, the pin's), of trust.json and of a key file being written (writeFileAtomic).
      const inFlight = [
        join(root, 'trust.json.lock.0123456789abcdef.tmp'),
        join(root, 'checkpoints', `${pin}.lock.89abcdef01234567.tmp`),
        join(root, '.fedcba9876543210.tmp'),
        join(root, 'keys', '.00112233445566aa.tmp'),
      ];
      for (const file of inFlight) writeFileSync(file, 'being written by another process', { mode: 0o600 });
      // The operator's shell lacks HANDOFF_LEDGER_POSTGRES: the command opens an embedded store on the shared root.
      const env: NodeJS.ProcessEnv = { ...process.env };
      delete env.HANDOFF_LEDGER_POSTGRES;
      const r = spawnSync(process.execPath, [CLI, 'keys', 'list', '--root', root, '--host', 'h1'], {
        encoding: 'utf8',
        env,
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/FORK: this root pins another log/);
      // The message names the likely mistake and its fix, and never says to move the pin aside: an operator who
      // only forgot --postgres would then open a second, empty log on the shared root, without the pin's protection.
      expect(r.stderr).toMatch(/holds no embedded log .*--postgres or HANDOFF_LEDGER_POSTGRES/);
      expect(r.stderr).not.toMatch(/move that pin aside/);
      const f = spawnSync(process.execPath, [CLI, 'fsck', '--root', root, '--host', 'h1'], {
        encoding: 'utf8',
        env,
        timeout: 60_000,
      });
      expect(f.status, f.stderr).toBe(1);
      expect(f.stderr).toMatch(/FORK: .*holds no embedded log .*--postgres or HANDOFF_LEDGER_POSTGRES/);
      expect(f.stderr).not.toMatch(/move that pin aside/);
      // LevelDB's lock was on a log of the command's own, not on the root: nothing of the others' was its to remove.
      for (const file of inFlight) expect(existsSync(file), file).toBe(true);
      // The processes of the shared store go on as before.
      await ledger.rotateKey();
      expect((await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(2))).seq).toBe(1);
    } finally {
      await ledger.close();
    }
  });
});
