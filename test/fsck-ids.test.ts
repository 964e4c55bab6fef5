/**
 * The records that give a manifest id's global position (LevelDB `i!<id>`, PostgreSQL the `id` column of `entries`),
 * which an inclusion proof by id reads: fsck holds every one to the leaves in one listing (a damaged record
 * `RECORD_CORRUPT`, one that names another position, a leaf none names and a record of an id the log does not hold
 * `ID_POSITION_MISMATCH`), and a proof by id refuses a record that leads to another manifest (`RECORD_CORRUPT`)
 * instead of returning that manifest's proof under the id asked for.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { join } from 'node:path';
import { digestOf, type Digest } from '../store/hash/digest.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { fsck, type FsckFinding } from '../src/ops/maintenance.js';
import { fsckTree } from '../src/ops/fsck-tree.js';
import { fsckIdPositions, LeafIds } from '../src/ops/fsck-ids.js';
import { runCli } from '../src/cli/main.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { PgManifestLog } from '../manifests/log/pg/log.js';
import type { AppendRequest, ManifestLog } from '../manifests/log/log.js';
import { captureIo } from './support/capture-io.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

/** A well-formed id no manifest of these stores has. */
const stranger = `blake3:${'ab'.repeat(32)}` as Digest;

/** Four manifests in two sessions: `ids[p]` is the id of the manifest at global position p. */
async function publishFour(ledger: Ledger): Promise<Digest[]> {
  const ids: Digest[] = [];
  for (let i = 0; i < 4; i++)
    ids.push((await ledger.publish({ principal: 'alice', session: `s${i % 2}`, run: 'r' }, sampleSummary(i))).id);
  return ids;
}

async function rejection(p: Promise<unknown>): Promise<{ name?: string; code?: string; message?: string }> {
  return p.then(
    () => expect.unreachable('expected a refusal'),
    (err: unknown) => err as { name?: string; code?: string; message?: string },
  );
}

const idFindings = (findings: FsckFinding[]) =>
  findings.filter((f) => f.code === 'ID_POSITION_MISMATCH' || f.code === 'RECORD_CORRUPT');

/** A synthetic append whose id is the BLAKE3 of its payload, as a manifest's is. */
function synthetic(session: string): AppendRequest {
  const payload = new TextEncoder().encode(`payload of ${session}`);
  return {
    session,
    principal: 'alice',
    seq: 0,
    prev: null,
    id: digestOf(payload),
    envelope: JSON.stringify({ payloadType: 't', payload: Buffer.from(payload).toString('base64'), signatures: [] }),
  };
}

/** fsck's tree walk and its id check on a bare log, as fsck runs them. */
async function checkIds(log: ManifestLog): Promise<FsckFinding[]> {
  const ids = new LeafIds();
  const tree = await fsckTree(log, undefined, ids);
  expect(tree).toEqual([]);
  expect(ids.complete).toBe(true);
  return fsckIdPositions(log, ids);
}

describe('id → position records on the embedded store', () => {
  afterEach(() => vi.restoreAllMocks());

  async function open(): Promise<{ ledger: Ledger; raw: LevelManifestLog['raw']; ids: Digest[] }> {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    const ids = await publishFour(ledger);
    return { ledger, raw: (ledger.log as LevelManifestLog).raw, ids };
  }

  it('a sound store has none to report, and fsck reads them in one listing, never id by id', async () => {
    const { ledger } = await open();
    try {
      const listed = vi.spyOn(LevelManifestLog.prototype, 'idPositions');
      const looked = vi.spyOn(LevelManifestLog.prototype, 'positionOf');
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
      expect(listed).toHaveBeenCalledTimes(1);
      expect(looked).not.toHaveBeenCalled();
    } finally {
      await ledger.close();
    }
  });

  it('a record that is not a position: RECORD_CORRUPT naming it, once (its manifest is not reported again)', async () => {
    const { ledger, raw, ids } = await open();
    try {
      await raw.put(`i!${ids[1]}`, 'one');
      const report = await fsck(ledger);
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual([
        { code: 'RECORD_CORRUPT', message: `manifest log record i!${ids[1]} is corrupt: not a decimal count` },
      ]);
      expect(await rejection(ledger.inclusionProof(ids[1]!))).toMatchObject({ code: 'RECORD_CORRUPT' });
    } finally {
      await ledger.close();
    }
  });

  it('a record that names another manifest’s position: ID_POSITION_MISMATCH, and a proof by that id is refused', async () => {
    const { ledger, raw, ids } = await open();
    try {
      await raw.put(`i!${ids[1]}`, '3');
      const report = await fsck(ledger);
      expect(report.findings).toEqual([
        {
          code: 'ID_POSITION_MISMATCH',
          message: `the position record of manifest ${ids[1]} names global position 3; the manifest is at 1`,
        },
      ]);
      // Not the proof of leaf 3 under the id of manifest 1.
      expect(await rejection(ledger.inclusionProof(ids[1]!))).toMatchObject({
        name: 'LedgerError',
        code: 'RECORD_CORRUPT',
        message: expect.stringContaining(
          `manifest ${ids[1]}: the log's position record for it names global position 3`,
        ),
      });
      // The manifest whose leaf it names is proved as before.
      expect((await ledger.inclusionProof(ids[3]!)).leafIndex).toBe(3);
    } finally {
      await ledger.close();
    }
  });

  it('a manifest without its record: ID_POSITION_MISMATCH (a proof by its id answers NOT_FOUND)', async () => {
    const { ledger, raw, ids } = await open();
    try {
      await raw.del(`i!${ids[2]}`);
      expect((await fsck(ledger)).findings).toEqual([
        {
          code: 'ID_POSITION_MISMATCH',
          message: `manifest ${ids[2]} at global position 2: no position record names it there (an inclusion proof by its id cannot reach its leaf)`,
        },
      ]);
      expect(await rejection(ledger.inclusionProof(ids[2]!))).toMatchObject({ code: 'NOT_FOUND' });
    } finally {
      await ledger.close();
    }
  });

  it('a record of an id the log does not hold: ID_POSITION_MISMATCH, whether its position holds a leaf or not', async () => {
    const { ledger, raw, ids } = await open();
    try {
      await raw.put(`i!${stranger}`, '0');
      expect((await fsck(ledger)).findings).toEqual([
        {
          code: 'ID_POSITION_MISMATCH',
          message: `a position record names manifest ${stranger} at global position 0, which holds manifest ${ids[0]}; the log holds no manifest with that id`,
        },
      ]);
      expect(await rejection(ledger.inclusionProof(stranger))).toMatchObject({ code: 'RECORD_CORRUPT' });
      await raw.put(`i!${stranger}`, '9');
      expect((await fsck(ledger)).findings).toEqual([
        {
          code: 'ID_POSITION_MISMATCH',
          message: `a position record names manifest ${stranger} at global position 9, beyond the log's 4 entries; the log holds no manifest with that id`,
        },
      ]);
      expect(await rejection(ledger.inclusionProof(stranger))).toMatchObject({ code: 'NOT_FOUND' });
    } finally {
      await ledger.close();
    }
  });

  it('a record whose key names no manifest id: RECORD_CORRUPT, the key quoted', async () => {
    const { ledger, raw } = await open();
    try {
      await raw.put('i!x\u001b[2J', '0');
      expect((await fsck(ledger)).findings).toEqual([
        {
          code: 'RECORD_CORRUPT',
          message: 'manifest log record "i!x\\u001b[2J" is corrupt: not the key of a manifest id',
        },
      ]);
    } finally {
      await ledger.close();
    }
  });

  it('fsck (the command) prints a finding whose message quotes a key escaped once, its tab no column of its own', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a' });
    await publishFour(ledger);
    // ESC, a quote, a backslash, a tab and U+202E: the message quotes the key (shownValue), JSON-escaped already.
    await (ledger.log as LevelManifestLog).raw.put('i!x\u001b[2J"\\\t\u202e', '0');
    await ledger.close();
    const c = captureIo();
    expect(await runCli(['fsck', '--root', root, '--host', 'host-a', '--skip-blobs'], c.io)).toBe(1);
    const line = c.stdout().split('\n')[0]!;
    expect(line).toBe(
      'RECORD_CORRUPT\t-\t-\tmanifest log record "i!x\\u001b[2J\\"\\\\\\t\\u202e" is corrupt: not the key of a manifest id',
    );
    expect(line.split('\t')).toHaveLength(4);
  });

  it('prove inclusion (the command) refuses a record that leads to another manifest with its code, exit 1', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a' });
    const ids = await publishFour(ledger);
    await (ledger.log as LevelManifestLog).raw.put(`i!${ids[0]}`, '2');
    await ledger.close();
    const c = captureIo();
    expect(await runCli(['prove', 'inclusion', ids[0]!, '--root', root, '--host', 'host-a'], c.io)).toBe(1);
    expect(c.stdout()).toBe('');
    expect(c.stderr()).toMatch(
      new RegExp(
        `^handoff-ledger: RECORD_CORRUPT: manifest ${ids[0]}: the log's position record for it names global position 2`,
      ),
    );
  });

  it('holds a log of more leaves than one batch of the walk to its records, wherever the damage is', async () => {
    const log = await LevelManifestLog.open(join(tempDir(), 'log'));
    try {
      const requests = Array.from({ length: 1100 }, (_, i) => synthetic(`s${i}`));
      await Promise.all(requests.map((r) => log.append(r)));
      expect(await checkIds(log)).toEqual([]);
      const at = (await log.positionOf(requests[1050]!.id))!;
      await log.raw.put(`i!${requests[1050]!.id}`, String(at === 0 ? 1 : 0));
      expect(idFindings(await checkIds(log))).toEqual([
        expect.objectContaining({
          code: 'ID_POSITION_MISMATCH',
          message: expect.stringContaining(`the manifest is at ${at}`),
        }),
      ]);
    } finally {
      await log.close();
    }
  });
});

let schemas = 0;
const nextSchema = () => `ids${process.pid}_${schemas++}`;

describePostgres('id → position records on PostgreSQL', (pg) => {
  async function open(): Promise<{ ledger: Ledger; schema: string; ids: Digest[] }> {
    const schema = nextSchema();
    const ledger = await openLedger({
      root: tempDir(),
      host: 'host-a',
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
    });
    return { ledger, schema, ids: await publishFour(ledger) };
  }
  const sql = (text: string, values?: unknown[]) => sqlOn(pg.connectionString, text, values);

  it('a sound store has none to report', async () => {
    const { ledger } = await open();
    try {
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
    } finally {
      await ledger.close();
    }
  });

  it("an entry's id set to another manifest's: both ids reported, and a proof by the taken id is refused", async () => {
    const { ledger, schema, ids } = await open();
    try {
      // positionOf answers the lowest position holding an id: position 1 now, for the manifest at 3.
      await sql(`UPDATE "${schema}".entries SET id = $1 WHERE position = 1`, [ids[3]]);
      expect(await ledger.log.positionOf(ids[3]!)).toBe(1);
      const report = await fsck(ledger);
      expect(report.findings).toContainEqual(expect.objectContaining({ code: 'ID_MISMATCH', seq: 0 }));
      expect(idFindings(report.findings)).toEqual([
        {
          code: 'ID_POSITION_MISMATCH',
          message: `manifest ${ids[1]} at global position 1: no position record names it there (an inclusion proof by its id cannot reach its leaf)`,
        },
        {
          code: 'ID_POSITION_MISMATCH',
          message: `the position record of manifest ${ids[3]} names global position 1; the manifest is at 3`,
        },
      ]);
      expect(await rejection(ledger.inclusionProof(ids[3]!))).toMatchObject({
        name: 'LedgerError',
        code: 'RECORD_CORRUPT',
      });
      expect(await rejection(ledger.inclusionProof(ids[1]!))).toMatchObject({ code: 'NOT_FOUND' });
    } finally {
      await ledger.close();
    }
  });

  it("an entry's id set to one no manifest has: a record of an id the log does not hold, and its manifest without one", async () => {
    const { ledger, schema, ids } = await open();
    try {
      await sql(`UPDATE "${schema}".entries SET id = $1 WHERE position = 2`, [stranger]);
      expect(idFindings((await fsck(ledger)).findings)).toEqual([
        {
          code: 'ID_POSITION_MISMATCH',
          message: `manifest ${ids[2]} at global position 2: no position record names it there (an inclusion proof by its id cannot reach its leaf)`,
        },
        {
          code: 'ID_POSITION_MISMATCH',
          message: `a position record names manifest ${stranger} at global position 2, which holds manifest ${ids[2]}; the log holds no manifest with that id`,
        },
      ]);
      expect(await rejection(ledger.inclusionProof(stranger))).toMatchObject({ code: 'RECORD_CORRUPT' });
    } finally {
      await ledger.close();
    }
  });

  it('holds a log of more ids than one page of the listing to them', async () => {
    const schema = nextSchema();
    await (await PgManifestLog.open({ connectionString: pg.connectionString, schema })).close();
    // 1100 entries written in one statement (an append each would take a transaction each), their tree built at open.
    const requests = Array.from({ length: 1100 }, (_, i) => synthetic(`s${i}`));
    await sql(
      `INSERT INTO "${schema}".entries (position, session, seq, id, principal, envelope)
        SELECT p - 1, r.session, 0, r.id, 'alice', r.envelope
        FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(session, id, envelope, p)`,
      [requests.map((r) => r.session), requests.map((r) => r.id), requests.map((r) => r.envelope)],
    );
    await sql(`UPDATE "${schema}".log_counter SET next_position = 1100`);
    const log = await PgManifestLog.open({ connectionString: pg.connectionString, schema });
    try {
      let listed = 0;
      for await (const _ of log.idPositions()) listed++;
      expect(listed).toBe(1100);
      expect(await checkIds(log)).toEqual([]);
      await sql(`UPDATE "${schema}".entries SET id = $1 WHERE position = 1075`, [stranger]);
      expect((await checkIds(log)).map((f) => f.message)).toEqual([
        expect.stringContaining('at global position 1075: no position record names it there'),
        expect.stringContaining(`names manifest ${stranger} at global position 1075`),
      ]);
    } finally {
      await log.close();
    }
  });
});

describe("an id record that is no manifest id (a hand-edited row, a log of the caller's)", () => {
  it('is named as data: escaped and shortened, nothing a terminal acts on left raw', async () => {
    const ids = new LeafIds();
    ids.add(new TextEncoder().encode('leaf 0'));
    ids.complete = true;
    const hostile = `\u001b]0;owned\u0007\u202e${'x'.repeat(500)}`;
    const log = {
      async *idPositions() {
        yield { id: hostile as Digest, position: 0 };
      },
    } as unknown as ManifestLog;
    const findings = await fsckIdPositions(log, ids);
    const message = findings.find((f) => f.message.includes('the log holds no manifest with that id'))!.message;
    expect(message).not.toMatch(/[\u0000-\u001f\u007f\u202e]/);
    expect(message).toContain('\\u001b]0;owned');
    expect(message.length).toBeLessThan(400);
  });
});
