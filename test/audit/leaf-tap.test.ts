/**
 * Step 9's leaves, taken as the lines stream past (LeafTap): a full bundle's folded into the tree's frontier, a
 * filtered bundle's packed with a bit a line. Both against the tree code the ledger itself appends with.
 */
import { describe, expect, it, vi } from 'vitest';
import { openSince, startTreeCheck, type LeafTap } from '../../manifests/audit/verify-tree.js';
import type { RawLine } from '../../manifests/audit/verify-line.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { encodeVerifierKey, signNote } from '../../manifests/crypto/note.js';
import { nobleSign, noblePublicKey } from '../../manifests/crypto/ed25519.js';
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import { keyIdOf, type TrustStore } from '../../manifests/format/trust.js';
import { leafHash } from '../../manifests/tlog/merkle.js';
import { appendLeafHashes, rootOf } from '../../manifests/tlog/tree.js';

const origin = 'example.com/leaf-tap';
const seed = new Uint8Array(32).fill(5);
const publicKey = noblePublicKey(seed);
const trust: TrustStore = {
  version: 1,
  keys: [],
  checkpointKeys: [
    {
      host: 'h',
      keyId: keyIdOf(publicKey),
      vkey: encodeVerifierKey(origin, publicKey),
      notBefore: '2020-01-01T00:00:00.000Z',
    },
  ],
};
const note = (size: number, root: Uint8Array) =>
  signNote(`${origin}\n${size}\n${encodeBase64(root)}\n`, [
    { name: origin, publicKey, sign: (m) => nobleSign(m, seed) },
  ]);
const line = (i: number) => JSON.stringify({ payload: encodeBase64(new TextEncoder().encode(`leaf ${i}`)) });
const leafOf = (i: number) => leafHash(new TextEncoder().encode(`leaf ${i}`));

async function* runs(count: number, text: (i: number) => string | undefined, per = 4096) {
  for (let start = 0; start < count; start += per) {
    const run: RawLine[] = [];
    for (let i = start; i < Math.min(count, start + per); i++)
      run.push({ line: i + 1, text: text(i), terminated: true, bytes: 1 });
    yield run;
  }
}

async function drain(tap: LeafTap, source: AsyncIterable<RawLine[]>): Promise<void> {
  for await (const _ of tap.tap(source));
}

async function tapFor(filtered: boolean, size: number, root: Uint8Array, since?: string) {
  const reader = memoryBundleReader({ manifests: '', treeFiles: { 'checkpoint.note': await note(size, root) } });
  const options = { trust, ...(since ? { since } : {}) };
  return (await startTreeCheck(reader, filtered, options, since ? openSince(since, options, 'since') : undefined))
    .leaves;
}

describe('LeafTap', () => {
  it('is made only behind a checkpoint that verifies', async () => {
    const reader = memoryBundleReader({ manifests: '', treeFiles: { 'checkpoint.note': 'not a note' } });
    expect((await startTreeCheck(reader, false, { trust }, undefined)).leaves).toBeUndefined();
    expect(
      (await startTreeCheck(memoryBundleReader({ manifests: '' }), false, { trust }, undefined)).leaves,
    ).toBeUndefined();
  });

  it("folds a full bundle's leaves to the root the tree code computes, and takes the root at --since's size", async () => {
    for (const n of [1, 2, 3, 7, 8, 9, 100]) {
      const hashes = Array.from({ length: n }, (_, i) => leafOf(i));
      const root = rootOf(appendLeafHashes([], 0, hashes).frontier);
      const at = Math.ceil(n / 2);
      const sinceRoot = rootOf(appendLeafHashes([], 0, hashes.slice(0, at)).frontier);
      const tap = (await tapFor(false, n, root, await note(at, sinceRoot)))!;
      await drain(tap, runs(n, line));
      expect(tap.count).toBe(n);
      expect(tap.root()).toEqual(root);
      expect(tap.rootAt(at)).toEqual(sinceRoot);
    }
    const broken = (await tapFor(false, 3, new Uint8Array(32)))!;
    await drain(
      broken,
      runs(3, (i) => (i === 1 ? undefined : line(i))),
    );
    expect(broken.root()).toBeUndefined();
  });

  it("keeps a filtered bundle's leaves in order, a line without a payload costing a bit, past 2^24 of them", async () => {
    const n = 2 ** 24 + 3;
    const tap = (await tapFor(true, n, new Uint8Array(32)))!;
    const withPayload = new Set([0, 5, 2 ** 24 + 1]);
    await drain(
      tap,
      runs(n, (i) => (withPayload.has(i) ? line(i) : undefined), 65536),
    );
    expect(tap.count).toBe(n);
    let i = 0;
    const found: number[] = [];
    for (const leaf of tap.lines()) {
      if (leaf) {
        expect(leaf).toEqual(leafOf(i));
        found.push(i);
      }
      i++;
    }
    expect(found).toEqual([...withPayload]);
  }, 120_000);

  it("keeps no more of a filtered bundle's leaves than the checkpoint has: the lines past them are excess", async () => {
    const tap = (await tapFor(true, 2, new Uint8Array(32)))!;
    // Lines 0 and 2 have payloads (kept), line 1 none; from line 3 on, each payload is one past the checkpoint's 2.
    await drain(
      tap,
      runs(6, (i) => (i === 1 ? undefined : line(i))),
    );
    expect(tap.count).toBe(6);
    const got = [...tap.lines()];
    expect(got.slice(0, 3)).toEqual([leafOf(0), undefined, leafOf(2)]);
    expect(got.slice(3).every((l) => typeof l === 'symbol')).toBe(true);
  });

  it('parses no line that cannot be a JSON object for its leaf (empty, `x`), and takes the same leaves otherwise', async () => {
    const texts = ['', 'x', '[1]', '"payload"', 'null', ' \t{"payload":"bGVhZiAw"}', '{"payload":"bGVhZiAw"', '{}'];
    const tap = (await tapFor(true, texts.length, new Uint8Array(32)))!;
    const parse = vi.spyOn(JSON, 'parse');
    let parsed: unknown[];
    try {
      await drain(
        tap,
        runs(100_000, (i) => (i % 2 === 0 ? '' : 'x')),
      );
      parsed = parse.mock.calls.map((c) => c[0]);
    } finally {
      parse.mockRestore();
    }
    expect(parsed).toEqual([]);
    const few = (await tapFor(true, texts.length, new Uint8Array(32)))!;
    await drain(
      few,
      runs(texts.length, (i) => texts[i]),
    );
    // Only the line with leading JSON whitespace before a whole envelope has a payload (leaf 0's bytes).
    expect([...few.lines()]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      leafOf(0),
      undefined,
      undefined,
    ]);
  });
});
