import { cpSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fsck, gc } from '../../src/ops/maintenance.js';
import { LevelManifestLog } from '../../manifests/log/level/log.js';
import { writeSyncedBatch } from '../../manifests/log/level/tables.js';
import { ManifestError } from '../../manifests/errors.js';
import { exportBundle } from '../../src/ops/export.js';
import { openNote, parseVerifierKey, signNote, type NoteSigner } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { checkpointVerifiers } from '../../manifests/format/trust.js';
import { decodeBase64, encodeBase64 } from '../../manifests/encoding/base64.js';
import { leafHash, verifyConsistency, verifyInclusion } from '../../manifests/tlog/merkle.js';
import { readPinnedNote } from '../../src/ledger/checkpoint-pin.js';
import type { Digest } from '../../store/hash/digest.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { open, publishMany, refusal, scope } from './ledger-support.js';

const b64 = (s: string) => decodeBase64(s)!;

describe('checkpoints', () => {
  it('signs a C2SP checkpoint of the whole log with a checkpoint key listed in the trust file', async () => {
    const ledger = await open(tempDir());
    try {
      await publishMany(ledger, 's1', 2);
      await publishMany(ledger, 's2', 1);
      const { note, checkpoint } = await ledger.checkpoint();
      const trust = ledger.trustStore();
      const opened = openNote(note, checkpointVerifiers(trust));
      expect(parseCheckpoint(opened.text)).toEqual(checkpoint);
      expect(checkpoint).toMatchObject({ origin: 'example.com/handoffs', size: 3 });
      expect(trust.checkpointKeys).toHaveLength(1);
      expect(trust.checkpointKeys![0]!.vkey).toBe(ledger.checkpointVerifierKey);
      expect(parseVerifierKey(ledger.checkpointVerifierKey).name).toBe('example.com/handoffs');
      // One key, one message format: the checkpoint key is not the manifest key.
      expect(trust.checkpointKeys![0]!.keyId).not.toBe(ledger.keyId);
    } finally {
      await ledger.close();
    }
  });

  it('serves inclusion proofs of each manifest and consistency proofs that verify against the checkpoints', async () => {
    const ledger = await open(tempDir());
    try {
      const first = await publishMany(ledger, 's1', 3);
      const old = (await ledger.checkpoint()).checkpoint;
      const later = await publishMany(ledger, 's2', 4);
      const now = (await ledger.checkpoint()).checkpoint;
      for (const r of [...first, ...later]) {
        const p = await ledger.inclusionProof(r.id);
        expect(p.treeSize).toBe(7);
        expect(p.leaf).toBe(r.envelope.payload);
        expect(p.root).toBe(encodeBase64(now.root));
        expect(verifyInclusion(p.leafIndex, p.treeSize, leafHash(b64(p.leaf)), p.proof.map(b64), now.root).ok).toBe(
          true,
        );
      }
      const atOld = await ledger.inclusionProof(first[1]!.id, { size: 3 });
      expect(atOld.root).toBe(encodeBase64(old.root));
      const c = await ledger.consistencyProof(3);
      expect(verifyConsistency(3, 7, c.proof.map(b64), old.root, now.root).ok).toBe(true);
      expect((await refusal(ledger.inclusionProof(later[0]!.id, { size: 3 }))).code).toBe('INVALID_ARGUMENT');
      // `size: null` is no size (the latest), as `null` is "none" for every option; a size of another type is refused.
      expect(await ledger.inclusionProof(first[1]!.id, { size: null })).toEqual(
        await ledger.inclusionProof(first[1]!.id),
      );
      expect(await ledger.consistencyProof(3, { size: null })).toEqual(c);
      for (const size of ['3', NaN, true])
        expect((await refusal(ledger.inclusionProof(first[1]!.id, { size } as never))).code).toBe('INVALID_ARGUMENT');
      expect((await refusal(ledger.consistencyProof(0))).code).toBe('INVALID_ARGUMENT');
      expect((await refusal(ledger.consistencyProof(8))).code).toBe('INVALID_ARGUMENT');
      // The old size is no option: none given is refused (it was taken as the latest, a proof from the tree to itself).
      for (const oldSize of [undefined, null, '3'])
        expect((await refusal(ledger.consistencyProof(oldSize as never))).code, String(oldSize)).toBe(
          'INVALID_ARGUMENT',
        );
      expect((await refusal(ledger.inclusionProof(`blake3:${'0'.repeat(64)}`))).code).toBe('NOT_FOUND');
      // A malformed id is INVALID_ID, as every id: not an id the log does not hold.
      const upper = first[0]!.id.toUpperCase().replace('BLAKE3:', 'blake3:');
      for (const id of ['not-an-id', upper, `${first[0]!.id}0`, first[0]!.id.slice(7), 42])
        expect(await refusal(ledger.inclusionProof(id as Digest)), String(id)).toMatchObject({
          code: 'INVALID_ID',
          message: expect.stringMatching(/^a manifest id is blake3:<64 lowercase hex>, not /),
        });
    } finally {
      await ledger.close();
    }
  });

  it('pins the newest checkpoint in its own root, outside the database', async () => {
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    const { note } = await ledger.checkpoint();
    await ledger.close();
    const files = readdirSync(join(root, 'checkpoints'));
    expect(files).toEqual([expect.stringMatching(/^[0-9a-f]{64}\.pin$/)]);
    expect(await readPinnedNote(join(root, 'checkpoints', files[0]!))).toBe(note);
  });

  it('refuses an origin with a C0 control before it names the store, which then opens as usual', async () => {
    const root = tempDir();
    for (const origin of ['a.example/x\u0007', 'ex.com/a\u001b[31mred'])
      expect((await refusal(open(root, { origin }))).code).toBe('INVALID_ARGUMENT');
    const ledger = await open(root);
    await publishMany(ledger, 's1', 1);
    expect((await ledger.checkpoint()).note).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
    await ledger.close();
  });

  it('refuses another origin for an existing store (INVALID_ARGUMENT)', async () => {
    const root = tempDir();
    await (await open(root)).close();
    expect((await refusal(open(root, { origin: 'example.com/other' }))).code).toBe('INVALID_ARGUMENT');
  });
});

describe('rollback and fork detection', () => {
  /** A copy of the whole database (entries, heads, watermarks, tree), to be put back later by an attacker. */
  const snapshot = (root: string) => {
    const copy = join(tempDir(), 'db');
    cpSync(join(root, 'manifests-v1'), copy, { recursive: true });
    return () => {
      rmSync(join(root, 'manifests-v1'), { recursive: true, force: true });
      cpSync(copy, join(root, 'manifests-v1'), { recursive: true });
    };
  };

  it('refuses a database rolled back to an older copy, watermarks included (ROLLBACK, with both checkpoints)', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 1);
    await ledger.close();
    const restore = snapshot(root);
    ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    const pinned = (await ledger.checkpoint()).note;
    await ledger.close();
    restore();
    const err = await refusal(open(root));
    expect(err.code).toBe('ROLLBACK');
    expect(err.evidence?.pinned).toBe(pinned);
    expect(parseCheckpoint(err.evidence!.current).size).toBe(1);
  });

  it('refuses a forked log: other entries in place of the pinned ones, at the same size or beyond (FORK)', async () => {
    for (const extra of [0, 2]) {
      const root = tempDir();
      let ledger = await open(root);
      await publishMany(ledger, 's1', 1);
      await ledger.close();
      const restore = snapshot(root);
      ledger = await open(root);
      await publishMany(ledger, 's1', 2);
      await ledger.close();
      restore();
      // The attacker writes another history with a ledger of its own (same keys, its own pinned state).
      const attackerRoot = tempDir();
      cpSync(join(root, 'keys'), join(attackerRoot, 'keys'), { recursive: true });
      cpSync(join(root, 'trust.json'), join(attackerRoot, 'trust.json'));
      cpSync(snapshotless(root), join(attackerRoot, 'manifests-v1'), { recursive: true });
      const attacker = await open(attackerRoot);
      await publishMany(attacker, 'evil', 2 + extra);
      await attacker.close();
      rmSync(join(root, 'manifests-v1'), { recursive: true });
      cpSync(join(attackerRoot, 'manifests-v1'), join(root, 'manifests-v1'), { recursive: true });
      const err = await refusal(open(root));
      expect(err.code, `size ${3 + extra}`).toBe('FORK');
      expect(err.evidence?.reason).toMatch(extra === 0 ? /another root/ : /consistency proof/);
    }
  });

  it('refuses the same tree with another session-heads index than the one pinned with it (FORK)', async () => {
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 1);
    await publishMany(ledger, 's2', 1);
    const pinned = (await ledger.checkpoint()).note;
    await ledger.close();
    // Behind the log's back: s2's head is dropped and the index rebuilt from the heads left (what open does when its
    // built marker is gone). The entries and the tree are untouched.
    const db = await LevelManifestLog.open(join(root, 'manifests-v1'));
    await db.raw.batch([
      { type: 'del', key: 'h!s2' },
      { type: 'del', key: 'm!session-heads' },
    ]);
    await db.close();
    const err = await refusal(open(root));
    expect(err.code).toBe('FORK');
    expect(err.evidence?.pinned).toBe(pinned);
    expect(err.evidence?.reason).toBe('another session-heads root');
    expect(parseCheckpoint(err.evidence!.current).size).toBe(
      parseCheckpoint(pinned.slice(0, pinned.indexOf('\n\n') + 1)).size,
    );
  });

  it('refuses every later operation once a fork was seen', async () => {
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    // Behind the ledger's back the tree's size record is lowered: the tree it reads is now older.
    await (ledger.log as LevelManifestLog).raw.put('n!size', '1');
    (ledger.log as unknown as { treeSize: number }).treeSize = 1;
    expect((await refusal(ledger.resume({ principal: 'alice', session: 's1' }))).code).toBe('ROLLBACK');
    expect((await refusal(ledger.publish(scope('s1'), sampleSummary(9)))).code).toBe('ROLLBACK');
    // Nor grants, keys or gc: gc against such a log could delete the evidence.
    for (const op of [
      () => ledger.grant('bob', 's1'),
      () => ledger.revoke('bob', 's1'),
      () => ledger.revoke('bob', '*'),
      () => ledger.grants(),
      () => ledger.rotateKey(),
      () => ledger.revokeKey(ledger.keyId),
      () => gc(ledger, { graceMs: 0 }),
    ])
      expect((await refusal(op())).code).toBe('ROLLBACK');
    await ledger.close();
  });

  it('once a FORK was seen, also refuses history, proofs, checkpoint and export with it; fsck still runs', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const receipts = await publishMany(ledger, 's1', 2);
    const pinned = (await ledger.checkpoint()).note;
    // For one check the log shows another root at the pinned size, and cannot vouch that it grew the pinned tree.
    const log = ledger.log as LevelManifestLog;
    const real = log.treeHead.bind(log);
    log.treeHead = async () => ({ ...(await real()), root: new Uint8Array(32).fill(7) });
    log.grewFrom = () => false;
    const seen = await refusal(ledger.resume({ principal: 'alice', session: 's1' }));
    expect(seen.code).toBe('FORK');
    expect(seen.evidence?.pinned).toBe(pinned);
    // The log shows its true tree again: the fork seen stays the answer.
    delete (log as { treeHead?: unknown }).treeHead;
    delete (log as { grewFrom?: unknown }).grewFrom;
    expect((await log.treeHead()).size).toBe(2);
    for (const [what, op] of [
      ['resume', () => ledger.resume({ principal: 'alice', session: 's1' })],
      ['publish', () => ledger.publish(scope('s1'), sampleSummary(9))],
      ['history', () => ledger.history({ principal: 'alice', session: 's1' })],
      ['inclusionProof', () => ledger.inclusionProof(receipts[0]!.id)],
      ['consistencyProof', () => ledger.consistencyProof(1)],
      ['checkpoint', () => ledger.checkpoint()],
      ['export', () => exportBundle(ledger, { out: join(tempDir(), 'bundle') })],
      ['grant', () => ledger.grant('bob', 's1')],
      ['grants', () => ledger.grants()],
      ['rotateKey', () => ledger.rotateKey()],
      ['revokeKey', () => ledger.revokeKey(ledger.keyId)],
      ['gc', () => gc(ledger, { graceMs: 0 })],
    ] as const) {
      const err = await refusal(op());
      expect(err.code, what).toBe('FORK');
      expect(err.evidence?.pinned, what).toBe(pinned);
    }
    // fsck diagnoses the store instead of refusing, and names the fork it saw.
    const report = await fsck(ledger);
    expect(report).toMatchObject({ ok: false, chains: 1, manifests: 2 });
    expect(report.findings).toEqual([
      expect.objectContaining({ code: 'PIN_MISMATCH', message: expect.stringMatching(/^FORK: /) }),
    ]);
    expect(ledger.checkpointFailure?.code).toBe('FORK');
    await ledger.close();
  });

  it("pins the embedded store's own appends without reading a proof back; any other tree must prove it extends the pin", async () => {
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    const log = ledger.log as LevelManifestLog;
    const treeNodes = log.treeNodes.bind(log);
    let reads = 0;
    log.treeNodes = (ids) => {
      reads++;
      return treeNodes(ids);
    };
    // Its only writer grew the tree from the pinned one in its own memory: nothing to prove.
    await publishMany(ledger, 's1', 3);
    expect(reads).toBe(0);
    const pinned = (await ledger.checkpoint()).checkpoint;
    expect(log.grewFrom(pinned.size, pinned.root)).toBe(true);
    expect(log.grewFrom(pinned.size, new Uint8Array(32))).toBe(false);
    expect(log.grewFrom(pinned.size + 1, pinned.root)).toBe(false);
    // A log that cannot vouch for its tree (a shared one, PostgreSQL) proves it extends the pin from storage.
    log.grewFrom = () => false;
    await publishMany(ledger, 's1', 1);
    expect(reads).toBe(1);
    await ledger.close();
  });

  it("pins a checkpoint signed while its batch was written only once that batch is durable, and never a failed batch's", async () => {
    const root = tempDir();
    let entered: () => void = () => {};
    let gate: Promise<void> = Promise.resolve();
    let fail = false;
    const ledger = await open(root, {
      levelLog: {
        writeBatch: async (db, ops) => {
          entered();
          await gate;
          if (fail) throw new Error('disk full');
          await writeSyncedBatch(db, ops);
        },
      },
    });
    const pinPath = () => join(root, 'checkpoints', readdirSync(join(root, 'checkpoints'))[0]!);
    const pinnedSize = async () => parseCheckpoint((await readPinnedNote(pinPath())).split('\n\n')[0]! + '\n').size;
    try {
      await publishMany(ledger, 's1', 2);
      expect(await pinnedSize()).toBe(2);
      // While the batch is being written the pin stays at the committed tree.
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      const inBatch = new Promise<void>((r) => (entered = r));
      const publishing = ledger.publish(scope('s1'), sampleSummary('held'));
      await inBatch;
      await new Promise((r) => setTimeout(r, 20));
      expect(await pinnedSize()).toBe(2);
      release();
      await publishing;
      expect(await pinnedSize()).toBe(3);
      // A batch that fails: its tree was signed ahead and is never pinned nor returned.
      gate = Promise.resolve();
      fail = true;
      await expect(ledger.publish(scope('s1'), sampleSummary('lost'))).rejects.toMatchObject({
        code: 'STORAGE_FAILED',
      });
      expect(await pinnedSize()).toBe(3);
      expect((await ledger.checkpoint()).checkpoint.size).toBe(3);
      // The next tree of that size is another one (another summary): its own checkpoint is pinned.
      fail = false;
      await ledger.publish(scope('s1'), sampleSummary('kept'));
      const { note, checkpoint } = await ledger.checkpoint();
      const head = await ledger.log.treeHead();
      expect(checkpoint.size).toBe(4);
      expect(Buffer.from(checkpoint.root).toString('hex')).toBe(Buffer.from(head.root).toString('hex'));
      expect(await readPinnedNote(pinPath())).toBe(note);
      expect(parseCheckpoint(openNote(note, checkpointVerifiers(ledger.trustStore())).text)).toEqual(checkpoint);
    } finally {
      await ledger.close();
    }
    // Reopened, the log extends the pin.
    const again = await open(root);
    expect((await again.checkpoint()).checkpoint.size).toBe(4);
    expect((await again.resume({ principal: 'alice', session: 's1' }))?.seq).toBe(3);
    await again.close();
  });

  it('returns a committed publish whose pin failed, says so through onNotice, and pins at the next operation', async () => {
    const root = tempDir();
    const notices: string[] = [];
    const ledger = await open(root, { onNotice: (m) => notices.push(m) });
    const pinnedSize = async () =>
      parseCheckpoint(
        openNote(
          await readPinnedNote(join(root, 'checkpoints', readdirSync(join(root, 'checkpoints'))[0]!)),
          checkpointVerifiers(ledger.trustStore()),
        ).text,
      ).size;
    try {
      await publishMany(ledger, 's1', 1);
      const pin = (ledger as unknown as { checkpoints: { pin: { write: (...a: unknown[]) => Promise<boolean> } } })
        .checkpoints.pin;
      const write = pin.write.bind(pin);
      let failures = 1;
      pin.write = (...a) => (failures-- > 0 ? Promise.reject(new Error('EIO: i/o error, write')) : write(...a));
      // The manifest is durable: the publish returns it, and says that its pin failed.
      const receipt = await ledger.publish(scope('s1'), sampleSummary('pin fails'));
      expect(receipt.seq).toBe(1);
      expect(notices).toEqual([
        expect.stringMatching(
          /session s1 seq 1 is committed, but no checkpoint holding it is pinned yet \(EIO: i\/o error, write\)/,
        ),
      ]);
      expect(await pinnedSize()).toBe(1);
      // The next operation pins before it goes on.
      expect((await ledger.resume({ principal: 'alice', session: 's1' }))?.seq).toBe(1);
      expect(await pinnedSize()).toBe(2);
      await ledger.publish(scope('s1'), sampleSummary('after'));
      expect(await pinnedSize()).toBe(3);
      expect(notices).toHaveLength(1);
    } finally {
      await ledger.close();
    }
  });

  it('leaves no listener on a log passed in when the open fails after its checkpoint guard', async () => {
    const root = tempDir();
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    const listening = () => (log as unknown as { committing?: unknown }).committing !== undefined;
    const get = log.signingKeys.get.bind(log.signingKeys);
    log.signingKeys.get = () => Promise.reject(new ManifestError('STORAGE_FAILED', 'signing-key read failed'));
    await expect(open(root, { log })).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
    expect(listening()).toBe(false);
    // A later open of the same log listens, publishes and pins as usual.
    log.signingKeys.get = get;
    const ledger = await open(root, { log });
    expect(listening()).toBe(true);
    await publishMany(ledger, 's1', 2);
    expect((await ledger.checkpoint()).checkpoint.size).toBe(2);
    await ledger.close();
  });

  it('signs again after the commit when the signature made during the batch failed, and pins', async () => {
    const root = tempDir();
    const ledger = await open(root);
    try {
      await publishMany(ledger, 's1', 1);
      const keyring = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring;
      const real = keyring.checkpointSigner;
      let failures = 1;
      let calls = 0;
      Object.defineProperty(keyring, 'checkpointSigner', {
        configurable: true,
        get: (): NoteSigner => ({
          name: real.name,
          publicKey: real.publicKey,
          sign: (m) => {
            calls++;
            if (failures-- > 0) throw new Error('signing service unavailable');
            return real.sign(m);
          },
        }),
      });
      await ledger.publish(scope('s1'), sampleSummary('after a failed signature'));
      // The first signature (during the batch) failed; the pin after the commit signed again.
      expect(calls).toBe(2);
      const pinned = await readPinnedNote(join(root, 'checkpoints', readdirSync(join(root, 'checkpoints'))[0]!));
      expect(parseCheckpoint(openNote(pinned, checkpointVerifiers(ledger.trustStore())).text).size).toBe(2);
    } finally {
      await ledger.close();
    }
  });

  it('takes a storage failure while reading a consistency proof for what it is (STORAGE_FAILED), not a fork', async () => {
    const root = tempDir();
    const notices: string[] = [];
    const ledger = await open(root, { onNotice: (m) => notices.push(m) });
    await publishMany(ledger, 's1', 2);
    // The database goes away while the checkpoint after the next append reads its proof (a restart). A shared log
    // (PostgreSQL) reads that proof after every append: this one is made to answer as a shared log does.
    const log = ledger.log as LevelManifestLog;
    log.grewFrom = () => false;
    const treeNodes = log.treeNodes.bind(log);
    let failures = 0;
    log.treeNodes = () => {
      failures++;
      return Promise.reject(
        new ManifestError('STORAGE_FAILED', 'manifest log: tree read failed: connection terminated'),
      );
    };
    await ledger.publish(scope('s1'), sampleSummary(3));
    expect(failures).toBe(1);
    expect(notices).toEqual([
      expect.stringMatching(
        /seq 2 is committed, but no checkpoint holding it is pinned yet \(manifest log: tree read failed/,
      ),
    ]);
    const err = await ledger.checkpoint().then(
      () => undefined,
      (e: unknown) => e as ManifestError,
    );
    expect(err?.code).toBe('STORAGE_FAILED');
    // Back again: the same check passes, and publishing and resuming carry on.
    log.treeNodes = treeNodes;
    expect((await ledger.checkpoint()).checkpoint.size).toBe(3);
    await ledger.publish(scope('s1'), sampleSummary(4));
    expect((await ledger.resume({ principal: 'alice', session: 's1' }))?.seq).toBe(3);
    await ledger.close();
  });

  it('takes any failure of the proof read but tree damage for what it is (LOCKED, a bug), not a fork', async () => {
    const root = tempDir();
    const ledger = await open(root, { onNotice: () => {} });
    await publishMany(ledger, 's1', 2);
    // As a shared log (PostgreSQL) answers: its proof read is refused LOCKED when the tree's table is locked past
    // lock_timeout by another connection (VACUUM FULL, LOCK TABLE); a thrown TypeError is a bug. Neither is a proof
    // that the log forked, which would be recorded and refuse every later call until the store is opened again.
    const log = ledger.log as LevelManifestLog;
    log.grewFrom = () => false;
    const treeNodes = log.treeNodes.bind(log);
    for (const failure of [
      new ManifestError('LOCKED', 'postgres manifest log: tree read: another connection held a lock'),
      new TypeError('a bug'),
    ]) {
      log.treeNodes = () => Promise.reject(failure);
      await ledger.publish(scope('s1'), sampleSummary(`${failure.name}`));
      const err = await ledger.checkpoint().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBe(failure);
      expect(ledger.checkpointFailure).toBeUndefined();
      log.treeNodes = treeNodes;
      expect((await ledger.checkpoint()).checkpoint.size).toBe(failure instanceof TypeError ? 4 : 3);
    }
    await ledger.close();
  });
});

/** The restored database directory itself (after `restore()`), for the attacker to build on. */
function snapshotless(root: string): string {
  const copy = join(tempDir(), 'db');
  cpSync(join(root, 'manifests-v1'), copy, { recursive: true });
  return copy;
}

describe('fsck of the tree', () => {
  it('passes a store whose tree is the tree of its entries', async () => {
    const ledger = await open(tempDir());
    await publishMany(ledger, 's1', 3);
    expect((await fsck(ledger)).findings).toEqual([]);
    await ledger.close();
  });

  it('reports a stored node that is not the hash of its entries (TREE_NODE_MISMATCH) and a wrong root', async () => {
    const ledger = await open(tempDir());
    await publishMany(ledger, 's1', 4);
    const db = (ledger.log as LevelManifestLog).raw;
    await db.put(`n!01!${'0'.repeat(15)}1`, encodeBase64(new Uint8Array(32).fill(9)));
    const codes = (await fsck(ledger)).findings.map((f) => f.code);
    expect(codes).toContain('TREE_NODE_MISMATCH');
    await ledger.close();
  });

  it('reports an entry changed under the tree (TREE_NODE_MISMATCH, TREE_ROOT)', async () => {
    const ledger = await open(tempDir());
    const [r0] = await publishMany(ledger, 's1', 2);
    const db = (ledger.log as LevelManifestLog).raw;
    const key = `e!s1!${'0'.repeat(12)}`;
    const entry = JSON.parse((await db.get(key))!);
    const env = JSON.parse(entry.envelope);
    env.payload = encodeBase64(new TextEncoder().encode('{"changed":true}'));
    entry.envelope = JSON.stringify(env);
    await db.put(key, JSON.stringify(entry));
    const codes = (await fsck(ledger)).findings.map((f) => f.code);
    expect(codes).toEqual(expect.arrayContaining(['TREE_NODE_MISMATCH', 'TREE_ROOT']));
    expect(r0).toBeDefined();
    await ledger.close();
  });
});

describe('fsck of the session-heads index', () => {
  it('reports a stored index node that is not the index of the heads (SESSION_HEADS_ROOT), on LevelDB', async () => {
    const ledger = await open(tempDir());
    for (const s of ['s1', 's2', 's3']) await publishMany(ledger, s, 2);
    expect((await fsck(ledger)).findings).toEqual([]);
    const db = (ledger.log as LevelManifestLog).raw;
    const leaves: Array<[string, string]> = [];
    for await (const [key, value] of db.iterator({ gte: 'x!', lt: 'x!\xff' }))
      if (value.startsWith('l ')) leaves.push([key, value]);
    expect(leaves).toHaveLength(3);
    // One leaf's value replaced by another 32-byte hash: a head the chain does not have.
    const [key, value] = leaves[0]!;
    await db.put(key, `${value.slice(0, value.lastIndexOf(' '))} ${encodeBase64(new Uint8Array(32).fill(5))}`);
    const findings = (await fsck(ledger)).findings;
    // That session's leaf is not its head; the others' paths pass beside it and no longer lead to the root.
    expect(findings.map((f) => f.code)).toEqual(['SESSION_HEADS_ROOT', 'SESSION_HEADS_ROOT', 'SESSION_HEADS_ROOT']);
    expect(findings.filter((f) => f.message.includes("not the session's head"))).toHaveLength(1);
    // An unparseable node record is named, and the rest is still checked.
    await db.put(key, 'garbage');
    expect((await fsck(ledger)).findings.map((f) => f.code)).toEqual(['RECORD_CORRUPT']);
    await ledger.close();
  });

  it('reports a root that is not the index of the heads, while each path still leads to it', async () => {
    const ledger = await open(tempDir());
    await publishMany(ledger, 's1', 2);
    await publishMany(ledger, 's2', 1);
    const db = (ledger.log as LevelManifestLog).raw;
    // A head record moved back under the index (the index still holds the newer head).
    const head = JSON.parse((await db.get('h!s1'))!);
    const older = JSON.parse((await db.get(`e!s1!${'0'.repeat(12)}`))!);
    await db.put('h!s1', JSON.stringify({ ...head, seq: 0, id: older.id }));
    const codes = (await fsck(ledger)).findings.filter((f) => f.code === 'SESSION_HEADS_ROOT');
    expect(codes.map((f) => f.session ?? '-')).toEqual(['-', 's1']);
    await ledger.close();
  });

  it('builds the index of a store from before it on open, and re-signs the pinned checkpoint with its line', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await publishMany(ledger, 's2', 1);
    const current = await ledger.checkpoint();
    expect(current.checkpoint.extensions).toEqual([expect.stringMatching(/^handoff-ledger\/session-heads /)]);
    // What the version before the index left: a pinned checkpoint without the line (in that version's pin file,
    // `<hash>.note`, which this version reads and moves into its slot file), no index records.
    const signer = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;
    const body = current.note
      .slice(0, current.note.indexOf('\n\n') + 1)
      .replace(/handoff-ledger\/session-heads .*\n/, '');
    const pins = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
    expect(pins).toHaveLength(1);
    const pinPath = join(root, 'checkpoints', pins[0]!);
    rmSync(pinPath);
    writeFileSync(pinPath.replace(/\.pin$/, '.note'), await signNote(body, [signer]));
    const db = (ledger.log as LevelManifestLog).raw;
    const stale: string[] = [];
    for await (const key of db.keys()) if (key.startsWith('x!') || key === 'm!session-heads') stale.push(key);
    await db.batch(stale.map((key) => ({ type: 'del' as const, key })));
    await ledger.close();
    ledger = await open(root);
    try {
      const again = await ledger.checkpoint();
      expect(again.checkpoint.size).toBe(current.checkpoint.size);
      expect(again.checkpoint.extensions).toEqual(current.checkpoint.extensions);
      expect(await readPinnedNote(pinPath)).toBe(again.note);
      expect(readdirSync(join(root, 'checkpoints'))).toEqual(pins);
      expect((await fsck(ledger)).findings).toEqual([]);
    } finally {
      await ledger.close();
    }
  });
});
