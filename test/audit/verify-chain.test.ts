import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FINDING_CODES } from '../../manifests/audit/findings.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { verifyBundle, verifyChain } from '../../manifests/audit/verify-chain.js';
import { splitLineRuns, splitLines, MAX_LINE_BYTES } from '../../manifests/audit/verify-line.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { loadHashBackend } from '../../store/hash/backends.node.js';
import { buildBundle, ChainBuilder, jsonl, makeKey, trustOf } from '../support/bundle-builder.js';

const found = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** `bytes` cut into chunks of the given lengths (as far as they go), the rest as the last chunk. */
function cutAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  let off = 0;
  for (const c of cuts) {
    chunks.push(bytes.subarray(off, Math.min(bytes.length, off + c)));
    off = Math.min(bytes.length, off + c);
  }
  chunks.push(bytes.subarray(off));
  return chunks;
}

describe('verifyChain', () => {
  it('verifies envelope lines from any iterable with 1-based line numbers', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const lines = [...b.lines];
    lines.splice(1, 1);
    const r = await verifyChain(lines, { trust: b.trust });
    expect(found(r)).toEqual(['SEQ_GAP@2']);
    expect(r.counts).toMatchObject({ lines: 2, manifests: 2, chains: 1 });
  });

  it('refuses lines that are not an iterable of strings, and options without a trust store: USAGE', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const text = b.lines.join('\n');
    const usage = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ name: 'AuditError', code: 'USAGE' });
      // The message names what was wrong, never the caller's text.
      expect((err as Error).message.length).toBeLessThan(200);
      return (err as Error).message;
    };
    expect(await usage(verifyChain(text as never, { trust: b.trust }))).toMatch(/not one string/);
    for (const lines of [null, undefined, 5, {}])
      expect(await usage(verifyChain(lines as never, { trust: b.trust }))).toMatch(/an iterable of strings/);
    for (const options of [undefined, null, {}, { trust: 'trust.json' }])
      expect(await usage(verifyChain(b.lines, options as never))).toMatch(/trust store/);
    const reader = memoryBundleReader({ manifests: jsonl(b.lines) });
    expect(await usage(verifyBundle(reader, undefined as never))).toMatch(/trust store/);
    expect(await usage(verifyBundle(undefined as never, { trust: b.trust }))).toMatch(/bundle reader/);
  });

  it('refuses a line that is no string with USAGE naming its number and type, never converting it', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const hostile = {
      toString() {
        throw new TypeError('toString was called');
      },
    };
    for (const odd of [hostile, 5, null, Symbol('s'), { toString: () => b.lines[1] }]) {
      const lines = [b.lines[0]!, odd] as never;
      async function* later() {
        yield* lines as Iterable<unknown>;
      }
      for (const given of [lines, later() as never]) {
        const err = await verifyChain(given, { trust: b.trust }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toMatchObject({ name: 'AuditError', code: 'USAGE' });
        expect((err as Error).message).toMatch(
          /^verifyChain takes the envelope lines as strings: line 2 is (an object|5|null|a symbol)$/,
        );
      }
    }
  });

  it('accepts an async iterable (a ManifestLog mapped to envelopes)', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const r = await verifyChain(
      (async function* () {
        yield* b.lines;
      })(),
      { trust: b.trust },
    );
    expect(r.ok).toBe(true);
    expect(r.chains[0]!.head).toBe(b.manifests[2]!.id);
  });

  it('reports a string over the line bound as LINE_TOO_LONG', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const r = await verifyChain([...b.lines, 'x'.repeat(MAX_LINE_BYTES + 1)], { trust: b.trust });
    expect(found(r)).toEqual(['LINE_TOO_LONG@2']);
  });

  it('keeps at most maxFindings findings but counts every one', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const r = await verifyChain(
      Array.from({ length: 1000 }, () => 'nope'),
      { trust: b.trust, maxFindings: 10 },
    );
    expect(r.findings).toHaveLength(10);
    expect(r.counts.findings).toBe(1000);
    expect(r.counts.byCode).toEqual({ LINE_NOT_JSON: 1000 });
    expect(r.findingsTruncated).toBe(true);
    expect(r.ok).toBe(false);
  });

  it('gives the same report in batches of 1 and of 1000', async () => {
    const b = await buildBundle({
      chains: [
        { session: 's1', count: 6 },
        { session: 's2', count: 4 },
      ],
    });
    const lines = [...b.lines];
    lines.splice(3, 1);
    const one = await verifyChain(lines, { trust: b.trust, batchSize: 1 });
    const many = await verifyChain(lines, { trust: b.trust });
    expect(one).toEqual(many);
  });

  it('gives an array (cut into runs without an async step) the report of the same lines as an async iterable', async () => {
    const b = await buildBundle({
      chains: Array.from({ length: 5 }, (_, i) => ({ session: `s${i}`, count: 500 })),
    });
    // Past one run of 1,024 lines, with findings on both sides of a run's edge and a duplicate runs away.
    const lines: string[] = [...b.lines];
    lines.splice(1023, 1, 'not json');
    lines.splice(1024, 0, '', 'x'.repeat(MAX_LINE_BYTES + 1));
    lines.splice(2047, 1);
    lines.push(b.lines[3]!);
    for (const batchSize of [1000, 7]) {
      const fromArray = await verifyChain(lines, { trust: b.trust, verifier: nodeVerifier, batchSize });
      const fromAsync = await verifyChain(
        (async function* () {
          yield* lines;
        })(),
        { trust: b.trust, verifier: nodeVerifier, batchSize },
      );
      expect(fromArray).toEqual(fromAsync);
      expect(new Set(found(fromArray).map((f) => f.split('@')[0]))).toEqual(
        new Set(['LINE_NOT_JSON', 'LINE_TOO_LONG', 'SEQ_GAP', 'DUPLICATE']),
      );
    }
  });
});

describe('splitLines', () => {
  it('splits bytes into the same lines whatever the chunk boundaries', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.string({ maxLength: 20 }).map((s) => s.replace(/\n/g, '')),
          { maxLength: 20 },
        ),
        fc.array(fc.nat(50), { maxLength: 10 }),
        async (lines, cuts) => {
          const bytes = new TextEncoder().encode(jsonl(lines));
          const chunks = cutAt(bytes, cuts);
          const got = await collect(splitLines(chunks));
          expect(got.map((l) => l.text)).toEqual(lines);
          expect(got.every((l) => l.terminated)).toBe(true);
        },
      ),
    );
  });

  it('gives, for any bytes and chunking, the lines of a line-by-line reference (UTF-8, over-long, empty, unterminated)', async () => {
    // Whole lines within a chunk are decoded together; this holds the result to one decode a line.
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    const reference = (bytes: Uint8Array, max: number) => {
      const out: Array<Record<string, unknown>> = [];
      let from = 0;
      let line = 0;
      while (from < bytes.length) {
        const nl = bytes.indexOf(10, from);
        const to = nl < 0 ? bytes.length : nl;
        const terminated = nl >= 0;
        const bytesUsed = to - from + (terminated ? 1 : 0);
        line++;
        if (to - from > max) out.push({ line, tooLong: to - from, terminated, bytes: bytesUsed });
        else {
          try {
            out.push({ line, text: strict.decode(bytes.subarray(from, to)), terminated, bytes: bytesUsed });
          } catch {
            out.push({ line, notUtf8: true, terminated, bytes: bytesUsed });
          }
        }
        from = to + 1;
      }
      return out;
    };
    // ASCII, newline, a BOM, a two-byte letter, and bytes that are not UTF-8 where they stand.
    const pieces = [[0x61], [0x7b], [10], [10], [0xef, 0xbb, 0xbf], [0xc3, 0xa9], [0xc3], [0xa9], [0xff], [0x80]];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.nat(pieces.length - 1), { maxLength: 60 }),
        fc.array(fc.nat(30), { maxLength: 8 }),
        fc.integer({ min: 1, max: 12 }),
        async (picks, cuts, max) => {
          const bytes = Uint8Array.from(picks.flatMap((i) => pieces[i]!));
          const chunks = cutAt(bytes, cuts);
          expect(await collect(splitLines(chunks, max))).toEqual(reference(bytes, max));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('cuts a chunk of many lines into runs of at most 1,024, the lines of splitLines in order', async () => {
    const bytes = new TextEncoder().encode('\n'.repeat(3000) + 'a\nb');
    const runs: number[] = [];
    const lines: unknown[] = [];
    for await (const run of splitLineRuns([bytes])) {
      runs.push(run.length);
      lines.push(...run);
    }
    expect(runs).toEqual([1024, 1024, 953, 1]);
    expect(lines).toEqual(await collect(splitLines([bytes])));
  });

  it('never buffers more than the bound of one line', async () => {
    const big = new Uint8Array(1024 * 1024).fill(0x41);
    const chunks = [...Array.from({ length: 10 }, () => big), new Uint8Array([10, 0x7b, 0x7d, 10])];
    const got = await collect(splitLines(chunks, 1000));
    expect(got).toEqual([
      { line: 1, tooLong: 10 * 1024 * 1024, terminated: true, bytes: 10 * 1024 * 1024 + 1 },
      { line: 2, text: '{}', terminated: true, bytes: 3 },
    ]);
  });
});

describe('verifyBundle on hostile input', () => {
  it('never throws, whatever bytes manifests.jsonl holds, and reports only documented codes with line numbers', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const base = new TextEncoder().encode(jsonl(b.lines));
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.nat(base.length - 1), byte: fc.integer({ min: 0, max: 255 }) }), {
          minLength: 1,
          maxLength: 8,
        }),
        async (edits) => {
          const bytes = Uint8Array.from(base);
          for (const e of edits) bytes[e.at] = e.byte;
          const r = await verifyBundle(memoryBundleReader({ manifests: bytes }), {
            trust: b.trust,
            verifier: nodeVerifier,
          });
          for (const f of r.findings) {
            expect(Object.keys(FINDING_CODES)).toContain(f.code);
            expect(f.line).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('survives deeply nested JSON and prototype-shaped keys', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const lines = ['['.repeat(30_000) + ']'.repeat(30_000), '{"__proto__":{"payloadType":1},"constructor":{}}'];
    const r = await verifyChain(lines, { trust: b.trust });
    expect(found(r)).toEqual(['ENVELOPE_INVALID@1', 'ENVELOPE_INVALID@2']);
  });
});

describe('verifyBundle blob step', () => {
  it('hashes large blobs with the injected backend and finds BLOB_DIGEST and BLOB_SIZE without reading oversized blobs', async () => {
    const key = makeKey('host-a');
    const chain = new ChainBuilder(key, { principal: 'alice', session: 's1' });
    const big = new TextEncoder().encode(JSON.stringify({ task: 'x'.repeat(200_000), state: 's', nextSteps: [] }));
    const lines = [
      (await chain.next({}, { blob: big })).line,
      (await chain.next({}, { blob: big.subarray(1) })).line,
      (await chain.next({}, { blob: big.subarray(2) })).line,
    ];
    const flipped = Uint8Array.from(big);
    flipped[150_000]! ^= 1;
    const oversized = new Uint8Array(big.length + 10);
    const reads: number[] = [];
    const blobs = new Map([
      [chain.built[0]!.manifest.summary.digest, big],
      [chain.built[1]!.manifest.summary.digest, flipped.subarray(1)],
      [chain.built[2]!.manifest.summary.digest, oversized],
    ]);
    const reader = memoryBundleReader({ manifests: jsonl(lines), blobs });
    const readBlob = reader.readBlob!;
    reader.readBlob = async (d, max) => {
      const r = await readBlob(d, max);
      if (r?.bytes) reads.push(r.bytes.length);
      return r;
    };
    const hash = await loadHashBackend('wasm');
    const r = await verifyBundle(reader, { trust: trustOf(key.trusted), hash });
    expect(found(r)).toEqual(['BLOB_DIGEST@2', 'BLOB_SIZE@3']);
    expect(reads.sort()).toEqual([big.length - 1, big.length].sort());
  });
});

describe('verifyBundle and a reader that says a blob is behind a link', () => {
  it("says so for the blob's own link (one finding per manifest) and once for a linked directory", async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 3 }] });
    const digests = b.manifests.map((m) => m.manifest.summary.digest);
    const linking = (link: (digest: string) => unknown) => {
      const reader = memoryBundleReader({ manifests: jsonl(b.lines), blobs: b.blobs });
      const read = reader.readBlob!;
      reader.readBlob = async (d, max) => (link(d) as never) ?? read(d, max);
      return verifyBundle(reader, { trust: b.trust });
    };
    // The second blob's own file is a link: that manifest's finding says so, the others are checked.
    const own = await linking((d) => (d === digests[1] ? { link: 'file' } : undefined));
    expect(found(own)).toEqual(['BLOB_MISSING@2']);
    expect(own.findings[0]!.message).toBe(
      `summary blob ${digests[1]}: blobs/blake3/${digests[1]!.slice(7)} is a symbolic link: a bundle's files are ` +
        'read only as regular files in the bundle, never through a link (copy the file itself into the bundle, or ' +
        'export it again)',
    );
    // blobs/blake3 a link: every read says so, and the report says it once, with no line.
    const dir = await linking(() => ({ link: 'blobs/blake3' }));
    expect(found(dir)).toEqual(['BLOB_MISSING@-']);
    expect(dir.findings[0]!.message).toMatch(
      /^blobs\/blake3 is a symbolic link: .*\(copy the directory itself into the bundle, or export it again\); no blob is read through it \(the manifests name 3 summary blobs\)$/,
    );
    // A reason this verifier does not know (another reader's, or a hostile value): absent, in the verifier's words.
    const other = await linking((d) => (d === digests[0] ? { link: '../../etc/passwd\n' } : undefined));
    expect(found(other)).toEqual(['BLOB_MISSING@1']);
    expect(other.findings[0]!.message).toBe(`summary blob ${digests[0]} is not in the bundle`);
  });
});
