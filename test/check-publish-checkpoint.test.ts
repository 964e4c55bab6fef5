/**
 * `checkPublish` (what `compact` asks before the model) runs the check of the log against the pinned checkpoint that
 * publish's commit runs before its append, by the same rule (CheckpointGuard.verify / advance): a tree rolled back or
 * damaged after a normal open is refused there with publish's code, the model is never asked, and nothing is signed,
 * pinned or appended. So is a log whose appends refuse whatever they hold (ManifestLog.appendRefusal: tree damage
 * found at a normal open).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { compact } from '../src/index.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import type { TrustStore } from '../manifests/format/trust.js';
import { describePostgres, sqlOn } from './support/postgres.js';
import { countingModel } from './support/counting-model.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };
const transcript = [{ role: 'user' as const, content: 'add retries' }];

const pinOf = (root: string): Buffer => {
  const dir = join(root, 'checkpoints');
  return readFileSync(
    join(
      dir,
      readdirSync(dir).find((n) => n.endsWith('.pin'))!,
    ),
  );
};

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'passed',
    (err: { code?: string }) => err.code,
  );

/**
 * After `damage` (done while the ledger is open): checkPublish and compact refuse with `code` before the model is
 * asked, writing nothing; publish refuses with the same code.
 */
async function refusedBeforeTheModel(ledger: Ledger, root: string, code: string): Promise<void> {
  const pin = pinOf(root);
  const head = await ledger.log.head(scope.session);
  const model = countingModel();
  expect(await codeOf(compact({ ledger, scope, model, transcript }))).toBe(code);
  expect(model.asked).toBe(0);
  expect(await codeOf(ledger.checkPublish(scope))).toBe(code);
  // Nothing signed, pinned or appended.
  expect(pinOf(root).equals(pin)).toBe(true);
  expect(await ledger.log.head(scope.session)).toEqual(head);
  // What publish itself answers.
  expect(await codeOf(ledger.publish(scope, sampleSummary('refused')))).toBe(code);
}

describe('checkPublish and the pinned checkpoint, embedded store', () => {
  it('a tree rolled back after a normal open: ROLLBACK before the model is asked, nothing written', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      for (let i = 0; i < 2; i++) await ledger.publish(scope, sampleSummary(i));
      expect(await codeOf(ledger.checkPublish(scope))).toBe('passed');
      // Behind the ledger's back, in this process (the store's lock keeps other processes out): the tree it reads is
      // now the older one of a single leaf.
      await (ledger.log as LevelManifestLog).raw.put('n!size', '1');
      (ledger.log as unknown as { treeSize: number }).treeSize = 1;
      await refusedBeforeTheModel(ledger, root, 'ROLLBACK');
      // A caller without the right is refused as publish refuses it, authorization first (checkPublish answered
      // the rollback it had recorded: publish's answer is UNAUTHORIZED).
      const mallory = { ...scope, principal: 'mallory' };
      expect(await codeOf(ledger.publish(mallory, sampleSummary('m')))).toBe('UNAUTHORIZED');
      expect(await codeOf(ledger.checkPublish(mallory))).toBe('UNAUTHORIZED');
    } finally {
      await ledger.close();
    }
  });
});

describe('publish with an expectedPrev that is not the head, on a tree rolled back after a normal open', () => {
  it('is ROLLBACK, as checkPublish and the commit judge it, not a retryable CHAIN_CONFLICT', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
      await (ledger.log as LevelManifestLog).raw.put('n!size', '1');
      (ledger.log as unknown as { treeSize: number }).treeSize = 1;
      // The first call after the damage: publish's early look at expectedPrev (before the summary is stored) answered
      // CHAIN_CONFLICT, which a caller retries, before any check of the log against its pin.
      const stale = `blake3:${'0'.repeat(64)}` as const;
      expect(await codeOf(ledger.publish(scope, sampleSummary('stale'), { expectedPrev: stale }))).toBe('ROLLBACK');
      expect(await ledger.log.head(scope.session)).toMatchObject({ id: ids[1] });
    } finally {
      await ledger.close();
    }
  });
});

describe('checkPublish and a log that refuses every append, embedded store', () => {
  it('a session-heads root record damaged before a normal open: TREE_DAMAGED before the model is asked', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    await ledger.publish(scope, sampleSummary(0));
    await ledger.close();
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    await log.raw.put('x!000!', 'not a node');
    await log.close();
    // The store opens (for fsck; the pinned checkpoint of this tree stands), and every append is refused.
    ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
    try {
      await refusedBeforeTheModel(ledger, root, 'TREE_DAMAGED');
    } finally {
      await ledger.close();
    }
  });
});

let schemas = 0;
const nextSchema = () => `cpc${process.pid}_${schemas++}`;

describePostgres('checkPublish and the pinned checkpoint, PostgreSQL', (pg) => {
  const sql = (text: string) => sqlOn(pg.connectionString, text);

  /** `trust`: the keys of another root's ledger on the same schema (publishing on its heads needs them trusted). */
  async function open(schema: string, root = tempDir(), trust?: TrustStore) {
    const ledger = await openLedger({
      root,
      host: 'host-a',
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
      ...(trust ? { trust } : {}),
    });
    return { ledger, root };
  }

  it('a node on the tree’s right edge deleted after a normal open: TREE_DAMAGED before the model is asked', async () => {
    const schema = nextSchema();
    const { ledger, root } = await open(schema);
    try {
      for (let i = 0; i < 2; i++) await ledger.publish(scope, sampleSummary(i));
      // Two leaves: the tree's right edge is the one node at level 1, which every tree head is folded from.
      await sql(`DELETE FROM "${schema}".tree_nodes WHERE level = 1 AND idx = 0`);
      await refusedBeforeTheModel(ledger, root, 'TREE_DAMAGED');
    } finally {
      await ledger.close();
    }
  });

  it('a tree node rewritten after a normal open (another root at the pinned size): FORK before the model is asked', async () => {
    const schema = nextSchema();
    const { ledger, root } = await open(schema);
    try {
      for (let i = 0; i < 2; i++) await ledger.publish(scope, sampleSummary(i));
      expect(await codeOf(ledger.checkPublish(scope))).toBe('passed');
      await sql(`UPDATE "${schema}".tree_nodes SET hash = '\\x${'00'.repeat(32)}' WHERE level = 1 AND idx = 0`);
      await refusedBeforeTheModel(ledger, root, 'FORK');
      expect(ledger.checkpointFailure?.code).toBe('FORK');
    } finally {
      await ledger.close();
    }
  });

  it('a database rolled back after a normal open: ROLLBACK before the model is asked, and every later call refuses it', async () => {
    const schema = nextSchema();
    const { ledger, root } = await open(schema);
    try {
      for (let i = 0; i < 3; i++) await ledger.publish(scope, sampleSummary(i));
      // The newest entry removed with everything that would reveal it: head, watermark, tree, counter.
      await sql(`BEGIN;
        DELETE FROM "${schema}".tree_nodes WHERE (level = 0 AND idx = 2) OR (level = 1 AND idx = 1);
        DELETE FROM "${schema}".entries WHERE position = 2;
        UPDATE "${schema}".heads SET seq = 1, id = (SELECT id FROM "${schema}".entries WHERE position = 1);
        UPDATE "${schema}".watermarks SET seq = 1;
        UPDATE "${schema}".log_counter SET next_position = 2;
        COMMIT;`);
      await refusedBeforeTheModel(ledger, root, 'ROLLBACK');
      expect(ledger.checkpointFailure?.code).toBe('ROLLBACK');
    } finally {
      await ledger.close();
    }
  });

  it('a tree with more leaves than the log has positions, opened by a root with no pin: TREE_DAMAGED before the model is asked', async () => {
    const schema = nextSchema();
    const first = await open(schema);
    for (let i = 0; i < 3; i++) await first.ledger.publish(scope, sampleSummary(i));
    const trust = first.ledger.trustStore();
    await first.ledger.close();
    await sql(`UPDATE "${schema}".log_counter SET next_position = 2`);
    // Another root (another host's) has pinned nothing: the open pins the tree of two, and appends are refused.
    const { ledger, root } = await open(schema, tempDir(), trust);
    try {
      await refusedBeforeTheModel(ledger, root, 'TREE_DAMAGED');
    } finally {
      await ledger.close();
    }
  });

  it('a log another host grew passes, proved to extend the pin, and nothing is pinned for it', async () => {
    const schema = nextSchema();
    const a = await open(schema);
    const b = await open(schema, tempDir(), a.ledger.trustStore());
    try {
      await a.ledger.publish(scope, sampleSummary(0));
      await b.ledger.checkpoint();
      for (let i = 1; i < 4; i++) await a.ledger.publish(scope, sampleSummary(i));
      // b pinned the tree of one entry in its own root; the log has four now.
      const pin = pinOf(b.root);
      expect(await codeOf(b.ledger.checkPublish(scope))).toBe('passed');
      expect(pinOf(b.root).equals(pin)).toBe(true);
      const model = countingModel();
      expect((await compact({ ledger: b.ledger, scope, model, transcript })).receipt.seq).toBe(4);
      expect(model.asked).toBe(1);
    } finally {
      await a.ledger.close();
      await b.ledger.close();
    }
  });
});
