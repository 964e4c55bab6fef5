import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Digest } from '../../store/hash/digest.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import {
  buildSessionHeads,
  EMPTY_HEADS_ROOT,
  headValue,
  innerNodeHash,
  leafNodeHash,
  nodeName,
  proveSessionHead,
  sessionHeadsOf,
  sessionHeadsLine,
  sessionHeadsRoot,
  SessionHeadsUpdate,
  sessionKey,
  verifySessionHead,
  type HeadsNode,
  type HeadsNodeReader,
  type SessionHead,
} from '../../manifests/tlog/session-heads.js';

const head = (seq: number): SessionHead => ({ seq, id: `blake3:${seq.toString(16).padStart(64, '0')}` });

/** A stored index in a map, as a backend keeps it. */
function memoryIndex() {
  const nodes = new Map<string, HeadsNode>();
  const read: HeadsNodeReader = async (paths) => paths.map((p) => nodes.get(nodeName(p)));
  const apply = async (changes: Array<[string, SessionHead]>) => {
    const u = new SessionHeadsUpdate(read);
    for (const [s, h] of changes) await u.set(s, h);
    for (const c of await u.changes()) nodes.set(nodeName(c.path), c.node);
    return u.root();
  };
  return { nodes, read, apply };
}

describe('session-heads index: the root', () => {
  it('is SHA-256(0x12) for no sessions, the leaf hash for one, an interior hash for two', () => {
    expect(sessionHeadsRoot([])).toEqual(sha256(Uint8Array.of(0x12)));
    const k = sessionKey('s1');
    expect(k).toEqual(sha256(new TextEncoder().encode('s1')));
    const v = headValue(head(3));
    expect(v).toEqual(sha256(new TextEncoder().encode(`{"id":"blake3:${'0'.repeat(63)}3","seq":3}`)));
    expect(sessionHeadsRoot([{ session: 's1', head: head(3) }])).toEqual(leafNodeHash(k, v));
    // 's1' and 's3' differ in the first bit of their keys (checked here), so they are the root's two children.
    const k2 = sessionKey('s3');
    expect(k[0]! >> 7).not.toBe(k2[0]! >> 7);
    const [l, r] = k[0]! >> 7 === 0 ? [k, k2] : [k2, k];
    const vl = l === k ? v : headValue(head(0));
    const vr = r === k ? v : headValue(head(0));
    expect(
      sessionHeadsRoot([
        { session: 's1', head: head(3) },
        { session: 's3', head: head(0) },
      ]),
    ).toEqual(innerNodeHash(leafNodeHash(l, vl), leafNodeHash(r, vr)));
  });

  it('is the same whether built at once or by updates in any order and batching (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 5 })), { maxLength: 60 }),
        fc.integer({ min: 1, max: 7 }),
        async (ops, batch) => {
          const index = memoryIndex();
          const latest = new Map<string, SessionHead>();
          let root = EMPTY_HEADS_ROOT;
          for (let i = 0; i < ops.length; i += batch) {
            const changes = ops.slice(i, i + batch).map(([s, seq]) => [`s${s}`, head(seq)] as [string, SessionHead]);
            for (const [s, h] of changes) latest.set(s, h);
            root = await index.apply(changes);
          }
          const built = sessionHeadsRoot([...latest].map(([session, h]) => ({ session, head: h })));
          expect(encodeBase64(root)).toBe(encodeBase64(built));
          // A rebuild stores exactly the nodes the updates stored.
          const rebuilt = buildSessionHeads([...latest].map(([session, h]) => ({ session, head: h })));
          expect(new Set(rebuilt.nodes.map((n) => nodeName(n.path)))).toEqual(new Set(index.nodes.keys()));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('computes the same changes and root in one apply, whether the reader answers at once, later, or mixed (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 5 })), { maxLength: 60 }),
        fc.integer({ min: 1, max: 7 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 16 }),
        async (ops, batch, answers) => {
          const byUpdates = memoryIndex();
          const byApply = new Map<string, HeadsNode>();
          let call = 0;
          let waited = false;
          // Answers at once or as a promise, in the pattern `answers` gives (the cache hits and misses of a backend).
          const read: HeadsNodeReader = (paths) => {
            const got = paths.map((p) => byApply.get(nodeName(p)));
            if (answers[call++ % answers.length]) return got;
            waited = true;
            return Promise.resolve(got);
          };
          for (let i = 0; i < ops.length; i += batch) {
            const changes = ops.slice(i, i + batch).map(([s, seq]) => [`s${s}`, head(seq)] as [string, SessionHead]);
            const expected = await byUpdates.apply(changes);
            waited = false;
            const pending = new SessionHeadsUpdate(read).apply(changes.map(([session, h]) => ({ session, head: h })));
            // Synchronous exactly when no read was answered later.
            expect(pending instanceof Promise).toBe(waited);
            const applied = await pending;
            for (const c of applied.changes) byApply.set(nodeName(c.path), c.node);
            expect(encodeBase64(applied.root)).toBe(encodeBase64(expected));
          }
          expect(new Set(byApply.keys())).toEqual(new Set(byUpdates.nodes.keys()));
          for (const [name, node] of byUpdates.nodes) expect(byApply.get(name)).toEqual(node);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('passes a failed read on, whether it throws at once or rejects', async () => {
    const boom = new Error('disk');
    const throwing: HeadsNodeReader = () => {
      throw boom;
    };
    expect(() => new SessionHeadsUpdate(throwing).apply([{ session: 's1', head: head(0) }])).toThrow(boom);
    await expect(new SessionHeadsUpdate(throwing).set('s1', head(0))).rejects.toBe(boom);
    const rejecting: HeadsNodeReader = () => Promise.reject(boom);
    await expect(new SessionHeadsUpdate(rejecting).apply([{ session: 's1', head: head(0) }])).rejects.toBe(boom);
  });
});

it('holds a node it made itself to its children too: a child changed without it is TREE_DAMAGED, an equal copy is not', async () => {
  // The update skips re-hashing a changed node's children only when they are the very nodes it was hashed from (a
  // log's cache of its own writes); a child replaced under it, even in a cache, is hashed and compared.
  const sessions = Array.from({ length: 16 }, (_, i) => `s${i}`);
  const rootSide = (s: string) => sessionKey(s)[0]! >> 7;
  const right = sessions.filter((s) => rootSide(s) === 1);
  const left = sessions.filter((s) => rootSide(s) === 0);
  expect(left.length).toBeGreaterThan(1);
  expect(right.length).toBeGreaterThan(1);
  const depthOne = nodeName({ depth: 1, prefix: Uint8Array.of(0x80, ...new Uint8Array(31)) });
  const heads = new Map(sessions.map((s, i) => [s, head(i)]));

  const copied = memoryIndex();
  await copied.apply([...heads]);
  const made = copied.nodes.get(depthOne)!;
  expect(made.leaf).toBe(false);
  // The same node read back from storage: another object, the same bytes: accepted.
  copied.nodes.set(depthOne, { leaf: false, hash: Uint8Array.from((made as { hash: Uint8Array }).hash) });
  heads.set(left[0]!, head(100));
  expect(await copied.apply([[left[0]!, head(100)]])).toEqual(
    sessionHeadsRoot([...heads].map(([session, h]) => ({ session, head: h }))),
  );

  const changed = memoryIndex();
  await changed.apply(sessions.map((s, i) => [s, head(i)]));
  changed.nodes.set(depthOne, { leaf: false, hash: new Uint8Array(32).fill(7) });
  await expect(changed.apply([[left[0]!, head(100)]])).rejects.toMatchObject({ code: 'TREE_DAMAGED' });
});

it('refuses ROLLBACK a change whose `previous` head the stored leaf does not commit, once the path is whole', async () => {
  const index = memoryIndex();
  const sessions = Array.from({ length: 12 }, (_, i) => `s${i}`);
  await index.apply(sessions.map((s) => [s, head(2)]));
  const before = new Map(index.nodes);
  const update = (changes: Array<{ session: string; head: SessionHead; previous?: SessionHead | null }>) =>
    new SessionHeadsUpdate(index.read).apply(changes);
  // The head it extends: accepted, the same root as without the check.
  const root = (await update([{ session: 's3', head: head(3), previous: head(2) }])).root;
  expect(root).toEqual((await update([{ session: 's3', head: head(3) }])).root);
  // Another head (the head row set back to seq 1), or none (the row removed): ROLLBACK naming the session; a session
  // that is new where the index commits none: accepted.
  await expect(update([{ session: 's3', head: head(2), previous: head(1) }])).rejects.toMatchObject({
    code: 'ROLLBACK',
    message: expect.stringContaining(
      "session s3: the session-heads index commits a head other than the head record's seq 1",
    ),
  });
  await expect(update([{ session: 's3', head: head(0), previous: null }])).rejects.toMatchObject({
    code: 'ROLLBACK',
    message: expect.stringContaining('commits a head for the session, which has no head record'),
  });
  await expect(update([{ session: 'new', head: head(1), previous: head(0) }])).rejects.toMatchObject({
    code: 'ROLLBACK',
    message: expect.stringContaining('commits no head for the session, whose head record names seq 0'),
  });
  expect((await update([{ session: 'new', head: head(0), previous: null }])).root).toEqual(
    sessionHeadsRoot([...sessions.map((session) => ({ session, head: head(2) })), { session: 'new', head: head(0) }]),
  );
  // In a batch, only the session held to another head refuses; alone, the others pass.
  await expect(
    update([
      { session: 's1', head: head(3), previous: head(2) },
      { session: 's4', head: head(3), previous: head(1) },
    ]),
  ).rejects.toMatchObject({ code: 'ROLLBACK', message: expect.stringContaining('session s4:') });
  // An index of one session (its leaf at the root, no interior node to hold it to): still held to the head.
  const one = memoryIndex();
  await one.apply([['only', head(5)]]);
  await expect(
    new SessionHeadsUpdate(one.read).apply([{ session: 'only', head: head(5), previous: head(4) }]),
  ).rejects.toMatchObject({ code: 'ROLLBACK' });
  // The leaf rewritten with the head (the path no longer whole): TREE_DAMAGED, as a reader judges it.
  const leaf = [...index.nodes].find(([, n]) => n.leaf && n.key.every((b, i) => b === sessionKey('s3')[i]))!;
  index.nodes.set(leaf[0], { ...(leaf[1] as HeadsNode & { leaf: true }), value: headValue(head(1)) });
  await expect(update([{ session: 's3', head: head(2), previous: head(1) }])).rejects.toMatchObject({
    code: 'TREE_DAMAGED',
  });
  expect(index.nodes.size).toBe(before.size);
});

describe('session-heads index: proofs', () => {
  const sessions = Array.from({ length: 300 }, (_, i) => `session-${i}`);
  const setup = async () => {
    const index = memoryIndex();
    const root = await index.apply(sessions.map((s, i) => [s, head(i % 7)]));
    return { ...index, root };
  };

  it('reads a small index a few depths per round trip, and walks a deeper path on in further rounds', async () => {
    const rounds = (index: ReturnType<typeof memoryIndex>, calls: number[]) =>
      new SessionHeadsUpdate(async (paths) => {
        calls.push(paths.length);
        return index.read(paths);
      });
    const small = memoryIndex();
    await small.apply([
      ['a', head(1)],
      ['b', head(2)],
    ]);
    const big = memoryIndex();
    const all = Array.from({ length: 3000 }, (_, i): [string, SessionHead] => [`s${i}`, head(i)]);
    for (let i = 0; i < all.length; i += 500) await big.apply(all.slice(i, i + 500));
    // After one walk of the small index, the next reads it a few depths at a time; the big index's paths are ~12 deep.
    await rounds(small, []).set('c', head(3));
    const smallCalls: number[] = [];
    await rounds(small, smallCalls).set('d', head(4));
    expect(smallCalls[0]).toBeLessThanOrEqual(8);
    const bigCalls: number[] = [];
    const u = rounds(big, bigCalls);
    await u.set('s7', head(70_000));
    expect(bigCalls[0]).toBeLessThanOrEqual(8);
    expect(bigCalls[1]).toBe(32);
    const changed = all.map(([s, h]): [string, SessionHead] => [s, s === 's7' ? head(70_000) : h]);
    expect(encodeBase64(await u.root())).toBe(
      encodeBase64(buildSessionHeads(changed.map(([session, h]) => ({ session, head: h }))).root),
    );
  });

  it('proves every member at its head, and nothing else of it', async () => {
    const { read, root } = await setup();
    for (const [i, s] of sessions.entries()) {
      const { proof, value } = await proveSessionHead(read, s);
      expect(value).toEqual(headValue(head(i % 7)));
      expect(verifySessionHead(root, s, head(i % 7), proof)).toEqual({ ok: true });
      // A shorter chain (an older head), another id, or "absent" do not verify with this proof.
      expect(verifySessionHead(root, s, head((i % 7) + 1), proof).ok).toBe(false);
      expect(verifySessionHead(root, s, { seq: i % 7, id: `blake3:${'f'.repeat(64)}` }, proof).ok).toBe(false);
      expect(verifySessionHead(root, s, undefined, proof).ok).toBe(false);
    }
  });

  it('proves absent sessions absent (an empty subtree or another leaf ends the path), and not present', async () => {
    const { read, root } = await setup();
    let withOther = 0;
    for (let i = 0; i < 200; i++) {
      const s = `absent-${i}`;
      const { proof, value } = await proveSessionHead(read, s);
      expect(value).toBeUndefined();
      if (proof.other) withOther++;
      expect(verifySessionHead(root, s, undefined, proof)).toEqual({ ok: true });
      expect(verifySessionHead(root, s, head(0), proof).ok).toBe(false);
    }
    expect(withOther).toBeGreaterThan(0);
    expect(withOther).toBeLessThan(200);
  });

  it("cannot use a member's proof to call it absent, or another session's proof", async () => {
    const { read, root } = await setup();
    const { proof } = await proveSessionHead(read, 'session-5');
    expect(verifySessionHead(root, 'session-6', head(5), proof).ok).toBe(false);
    // An attacker who turns the member's leaf into "another key's leaf" is refused: the key is the session's own.
    const forged = {
      ...proof,
      other: { key: encodeBase64(sessionKey('session-5')), value: encodeBase64(headValue(head(5))) },
    };
    expect(verifySessionHead(root, 'session-5', undefined, forged)).toMatchObject({ ok: false });
  });

  it('refuses malformed proofs with a reason and never throws', async () => {
    const { read, root } = await setup();
    const { proof } = await proveSessionHead(read, 'session-1');
    const bad: unknown[] = [
      null,
      'x',
      { ...proof, depth: 257 },
      { ...proof, depth: -1 },
      { ...proof, depth: 1.5 },
      { ...proof, bitmap: 'not base64!' },
      { ...proof, siblings: [...proof.siblings, proof.siblings[0]] },
      { ...proof, siblings: proof.siblings.map(() => 'AAAA') },
      { ...proof, siblings: 'x' },
      { ...proof, depth: proof.depth + 1 },
    ];
    for (const p of bad) {
      const r = verifySessionHead(root, 'session-1', head(1), p);
      expect(r.ok, JSON.stringify(p)).toBe(false);
      if (!r.ok) expect(r.reason.length).toBeGreaterThan(0);
    }
    expect(verifySessionHead(new Uint8Array(3), 'session-1', head(1), proof).ok).toBe(false);
  });

  it('proves absence in the empty index', async () => {
    const { proof } = await proveSessionHead(async (p) => p.map(() => undefined), 's');
    expect(proof).toEqual({ depth: 0, bitmap: '', siblings: [] });
    expect(verifySessionHead(EMPTY_HEADS_ROOT, 's', undefined, proof)).toEqual({ ok: true });
  });

  it('keeps proofs small: about log2(sessions) siblings', async () => {
    const { read } = await setup();
    const sizes = await Promise.all(sessions.map(async (s) => (await proveSessionHead(read, s)).proof.siblings.length));
    const mean = sizes.reduce((a, b) => a + b, 0) / sizes.length;
    expect(mean).toBeLessThan(Math.log2(sessions.length) + 3);
  });
});

describe('session-heads checkpoint extension line', () => {
  it('round-trips and refuses a malformed or repeated line', () => {
    const line = sessionHeadsLine(EMPTY_HEADS_ROOT);
    expect(line).toBe(`handoff-ledger/session-heads ${encodeBase64(EMPTY_HEADS_ROOT)}`);
    expect(sessionHeadsOf([line])).toEqual(EMPTY_HEADS_ROOT);
    expect(sessionHeadsOf(['other/ext 1'])).toBeUndefined();
    expect(sessionHeadsOf([line, line])).toBe('invalid');
    expect(sessionHeadsOf(['handoff-ledger/session-heads AAAA'])).toBe('invalid');
    expect(sessionHeadsOf(['handoff-ledger/session-heads'])).toBe('invalid');
  });
});

describe('session-heads index in the LevelDB log: the node cache', () => {
  it('answers at once for cached nodes, reads the others, and builds a batch without waiting when all are cached', async () => {
    const { Level } = await import('level');
    const { tempDir } = await import('../support/tmp.js');
    const { HeadsNodeCache, headsPuts } = await import('../../manifests/log/level/session-heads.js');
    const db = new Level<string, string>(join(await tempDir(), 'db'));
    await db.open();
    try {
      const cache = new HeadsNodeCache(db);
      const heads = (seq: number) =>
        ['a', 'b', 'c'].map((session) => ({ session, seq, id: head(seq).id as Digest, owner: 'p' }));
      const commit = async (seq: number) => {
        const built = await headsPuts(cache.read, heads(seq));
        await db.batch(built.puts);
        cache.commit(built.changes, built.removed);
      };
      // Nothing cached: the first batch reads (absent nodes are remembered as absent).
      const uncached = headsPuts(new HeadsNodeCache(db).read, heads(0));
      expect(uncached).toBeInstanceOf(Promise);
      await uncached;
      await commit(0);
      // A walk reads a few depths past where the walk before it ended (a hint shared by the process), so the next two
      // batches may still read depths not read before; from then on the same sessions read the same depths.
      await commit(1);
      await commit(2);
      // The same sessions again: every node their batch reads is cached now, so it is built at once.
      const fourth = headsPuts(cache.read, heads(3));
      expect(fourth).not.toBeInstanceOf(Promise);
      const expected = sessionHeadsRoot(['a', 'b', 'c'].map((session) => ({ session, head: head(3) })));
      expect(encodeBase64((await fourth).root)).toBe(encodeBase64(expected));
      // A cache that does not hold a path reads it from the database: the same result.
      const cold = await headsPuts(new HeadsNodeCache(db).read, heads(3));
      expect(encodeBase64(cold.root)).toBe(encodeBase64(expected));
    } finally {
      await db.close();
    }
  });
});
