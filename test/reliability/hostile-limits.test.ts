/**
 * 100 MB inputs are refused before they are buffered. Streams are generated lazily and
 * count what was pulled from them, so each test proves the refusal came after at most the limit (plus
 * one read-ahead window) — not after swallowing the whole input. Large strings, a sparse 100 MB file
 * planted at a blob path and a 100 MB trust file cover the non-stream doors.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, openSync, closeSync, ftruncateSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openLedger } from '../../src/ledger/open.js';
import { readLimited } from '../../src/cli/io.js';
import { publish as cliPublish } from '../../src/cli/core.js';
import { run as cliVerify } from '../../src/cli/verify.js';
import { FsBlobStore } from '../../store/fs/blob-store.js';
import { loadHashBackend } from '../../store/hash/backends.node.js';
import { parseEnvelope } from '../../manifests/crypto/envelope.js';
import { parseBundleHeader, memoryBundleReader, type BundleReader } from '../../manifests/audit/bundle.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { buildBundle, makeKey, trustOf, writeBundleDir } from '../support/bundle-builder.js';
import { captureIo } from '../support/capture-io.js';
import { tempDir } from '../support/tmp.js';
import { Judge } from './hostile-kit.js';
import { recordFigures } from './figures.js';
import { blobPath, sizedSummary, stagingFiles } from './store-support.js';

const MB100 = 100 * 1024 * 1024;
const MiB = 1024 * 1024;
const judge = new Judge();
const started = Date.now();
const refusedAfter: Record<string, number> = {};

/** A lazy 100 MB source in `chunk`-byte pieces that counts how much was pulled. */
function hundredMegabytes(chunk = 64 * 1024, byte = 0x61) {
  const counter = { pulled: 0 };
  const piece = new Uint8Array(chunk).fill(byte);
  async function* gen() {
    while (counter.pulled < MB100) {
      counter.pulled += chunk;
      yield piece;
    }
    yield new Uint8Array([0x0a]);
  }
  return { counter, gen };
}

async function refusedBeforeBuffered(
  target: string,
  pulled: () => number,
  limit: number,
  fn: () => Promise<unknown>,
  codes: string[],
): Promise<void> {
  await judge.judge(target, fn, () => judge.tally.right(false, `${target}: a 100 MB input was accepted`), codes);
  refusedAfter[target] = pulled();
  // Read-ahead of a Readable (16 chunks) or one chunk of a generator is fine; 100 MB is not.
  judge.tally.right(
    pulled() <= limit + 2 * MiB,
    `${target}: pulled ${pulled()} bytes before refusing (limit ${limit})`,
  );
}

describe('100 MB streams are refused after at most the limit', () => {
  it('readLimited (the CLI reading a summary) stops at its limit', async () => {
    const { counter, gen } = hundredMegabytes();
    // UsageError is the CLI's own refusal (exit 2); readLimited is CLI plumbing, so that is its typed answer.
    const err = await readLimited(Readable.from(gen()), MiB).catch((e: unknown) => e);
    judge.inputs.add('100 MB: CLI readLimited');
    expect(err).toMatchObject({ name: 'Error', message: expect.stringMatching(/larger than 1048576 bytes/) });
    refusedAfter['100 MB: CLI readLimited'] = counter.pulled;
    expect(counter.pulled).toBeLessThanOrEqual(MiB + 2 * MiB);
  });

  it('CLI publish of a 100 MB stdin exits 1 (SUMMARY_TOO_LARGE) without creating the store', async () => {
    const { counter, gen } = hundredMegabytes();
    const root = join(tempDir('hl-limits-'), 'store');
    const cap = captureIo();
    judge.inputs.add('100 MB: CLI publish stdin');
    const code = await cliPublish(['--root', root, '--host', 'h', '--principal', 'p', '--session', 's', '--run', 'r'], {
      ...cap.io,
      stdin: Readable.from(gen()),
    });
    expect(code).toBe(1);
    expect(cap.stderr()).toMatch(/^handoff-ledger: SUMMARY_TOO_LARGE: the summary input is over /);
    expect(existsSync(root)).toBe(false);
    refusedAfter['100 MB: CLI publish stdin'] = counter.pulled;
    // The raw input may be 6 times the 1 MiB limit (\u escapes), and no more.
    expect(counter.pulled).toBeLessThanOrEqual(6 * MiB + 4096 + 2 * MiB);
  });

  it('BlobStore.put of a 100 MB async iterable with maxBytes → BLOB_TOO_LARGE, no staging file, no blob', async () => {
    const root = tempDir('hl-limits-');
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('wasm') });
    const { counter, gen } = hundredMegabytes();
    await refusedBeforeBuffered(
      '100 MB: BlobStore.put stream',
      () => counter.pulled,
      MiB,
      () => store.put(gen(), { maxBytes: MiB }),
      ['BLOB_TOO_LARGE'],
    );
    expect(stagingFiles(root)).toEqual([]);
    const listed: string[] = [];
    for await (const d of store.list()) listed.push(d);
    expect(listed).toEqual([]);
  });

  it('the auditor skips a 100 MB line without decoding or parsing it', async () => {
    const { counter, gen } = hundredMegabytes(MiB, 0x5b /* '[' */);
    const reader: BundleReader = { ...memoryBundleReader({ manifests: '' }), manifests: gen };
    const key = makeKey('host-a');
    await judge.judge(
      '100 MB: bundle line',
      () => verifyBundle(reader, { trust: trustOf(key.trusted), verifier: nodeVerifier }),
      (report) => {
        judge.tally.right(
          !report.ok && report.counts.byCode.LINE_TOO_LONG === 1 && report.counts.manifests === 0,
          `audit: ${JSON.stringify(report.counts)}`,
        );
      },
    );
    expect(counter.pulled).toBe(MB100);
  });
});

describe('100 MB values are refused before they are parsed or encoded', () => {
  const big = 'x'.repeat(MB100);

  it.each([
    ['100 MB: envelope text', () => parseEnvelope(big), 'ENVELOPE_INVALID'],
    ['100 MB: bundle header', () => parseBundleHeader(big), 'BUNDLE_INVALID'],
  ] as const)('%s is refused by its size bound, not by JSON.parse', async (target, fn, code) => {
    const err = await Promise.resolve()
      .then(fn as () => unknown)
      .catch((e: unknown) => e);
    await judge.judge(
      target,
      () => Promise.reject(err),
      () => {},
      [code],
    );
    // "over N" is the size check's message; a JSON.parse failure would say "not valid JSON".
    expect((err as Error).message).toMatch(/over/);
  });

  it('a 100 MB summary string → SUMMARY_TOO_LARGE, nothing staged', async () => {
    const root = join(tempDir('hl-limits-'), 'store');
    const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    try {
      await judge.judge(
        '100 MB: summary',
        () => ledger.publish({ principal: 'p', session: 's', run: 'r' }, { ...sizedSummary('big'), notes: big }),
        () => judge.tally.right(false, 'accepted'),
        ['SUMMARY_TOO_LARGE'],
      );
      expect(stagingFiles(root)).toEqual([]);
    } finally {
      await ledger.close();
    }
  });
});

describe('100 MB files are refused before they are read', () => {
  it('a sparse 100 MB file planted at a blob path: resume refuses BLOB_INTEGRITY without reading it', async () => {
    const root = join(tempDir('hl-limits-'), 'store');
    // The summary as a blob file (not inline in the log), so there is a blob path to plant at.
    const ledger = await openLedger({ root, host: 'h', onNotice: () => {}, inlineSummaryBytes: 0 });
    try {
      const scope = { principal: 'p', session: 's', run: 'r' };
      const r = await ledger.publish(scope, sizedSummary('small'));
      const path = blobPath(root, r.digest);
      rmSync(path);
      const fd = openSync(path, 'w', 0o600);
      ftruncateSync(fd, MB100);
      closeSync(fd);
      await judge.judge(
        '100 MB: planted blob file',
        () => ledger.resume(scope),
        () => judge.tally.right(false, 'resumed a 100 MB planted blob'),
        // Not the size the manifest signs: refused from the file's size, before a byte is read.
        ['BLOB_INTEGRITY'],
      );
    } finally {
      await ledger.close();
    }
  });

  // Found by this suite (BUG-7, fixed): readTrust read the whole file before checking MAX_TRUST_BYTES.
  it('BUG-7: verify --trust refuses a 100 MB trust file after reading at most its 16 MiB bound', async () => {
    // A FIFO fed by a child process: the child counts what the CLI actually pulled before refusing. The trust file is
    // now read as a regular file only (test/cli-file-inputs.test.ts): the FIFO is refused before a byte is read.
    const dir = tempDir('hl-limits-');
    const key = makeKey('host-a');
    const bundle = await buildBundle({ key, chains: [{ session: 's', count: 1 }] });
    await writeBundleDir(join(dir, 'bundle'), bundle.lines);
    const fifo = join(dir, 'trust.fifo');
    execFileSync('mkfifo', [fifo]);
    const writer = spawn(process.execPath, ['-e', FIFO_WRITER, fifo, String(MB100)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let written = '';
    writer.stdout.on('data', (d: Buffer) => (written += d.toString()));
    const exited = new Promise<void>((resolve) => writer.on('close', () => resolve()));
    const cap = captureIo();
    const code = await cliVerify([join(dir, 'bundle'), '--trust', fifo, '--json'], cap.io);
    const done = await Promise.race([
      exited.then(() => true),
      new Promise<false>((r) => setTimeout(() => r(false), 3000)),
    ]);
    if (!done) writer.kill('SIGKILL'); // the CLI never opened it: nothing was read
    await exited;
    const pulled = Number(written.trim() || 0);
    expect(code).toBe(2);
    expect(cap.stdout()).toContain('TRUST_INVALID');
    expect(pulled).toBeLessThanOrEqual(16 * MiB + 2 * MiB);
  });
});

/** Writes N bytes into a FIFO in 1 MiB pieces and prints how many the reader accepted (EPIPE ends it). */
const FIFO_WRITER = `
const fs = require('node:fs');
const [path, total] = process.argv.slice(1);
const fd = fs.openSync(path, 'w');
const piece = Buffer.alloc(1 << 20, 0x7b);
let written = 0;
try { while (written < Number(total)) written += fs.writeSync(fd, piece); } catch {}
process.stdout.write(String(written));
`;

afterAll(async () => {
  expect(judge.untyped).toBe(0);
  await recordFigures({
    suite: 'hostile-limits',
    title:
      '100 MB inputs at every door — CLI stdin, BlobStore.put streams, bundle lines, envelope/header text, summaries, a sparse file planted at a blob path — refused by a size bound before being buffered, parsed or encoded (the trust file of `verify` is BUG-7, not counted here).',
    durationMs: Date.now() - started,
    inputs: judge.inputs.counts,
    losses: judge.tally.losses,
    wrongAnswers: judge.tally.wrongAnswers,
    details: {
      ...judge.details(),
      ...Object.fromEntries(
        Object.entries(refusedAfter).map(([k, v]) => [`bytes pulled before refusing, ${k.replace('100 MB: ', '')}`, v]),
      ),
    },
  });
});
