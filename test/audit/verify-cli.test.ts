import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FINDING_CODES } from '../../manifests/audit/findings.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import {
  buildBundle,
  ChainBuilder,
  makeKey,
  readerOf,
  trustOf,
  writeBundleDir,
  writeTrustFile,
  type TestBundle,
} from '../support/bundle-builder.js';
import { captureIo } from '../support/capture-io.js';
import { tempDir } from '../support/tmp.js';
import {
  cliVerify,
  writeCheckpointFiles,
  writeWitnessFiles,
  type CheckpointFiles,
  type WitnessFiles,
} from '../support/checkpoint-bundle.js';
import { parseWitnessKeys, witnessDigest } from '../../manifests/audit/verify-witnesses.js';
import type { CosignerKey } from '../../manifests/crypto/cosignature.js';
import { deriveFiltered } from '../support/derive-filtered.js';
// From the entry point: a library auditor merges a shared store's hosts' files as verify --trust merges them.
import { mergeTrust, parseTrustStore, trustDigest, type TrustStore } from '../../manifests/audit/index.js';
import { verifyBundle, type BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { describeCoverage } from '../../manifests/audit/report-text.js';
import { storedSummaryProblem } from '../../manifests/format/summary.js';

let big: TestBundle;

beforeAll(async () => {
  // 10,000 manifests in 100 interleaved chains of 100.
  big = await buildBundle({
    chains: Array.from({ length: 100 }, (_, i) => ({ session: `session-${i}`, principal: `p${i % 7}`, count: 100 })),
  });
}, 120_000);

async function bundleDir(lines: string[], o: Parameters<typeof writeBundleDir>[2] = {}) {
  const dir = tempDir();
  await writeBundleDir(join(dir, 'bundle'), lines, o);
  await writeTrustFile(join(dir, 'keys.json'), big.trust);
  return { bundle: join(dir, 'bundle'), trust: join(dir, 'keys.json'), dir };
}

describe('verify command', () => {
  it('verifies a clean 10,000-manifest bundle with blobs: exit 0 and an OK verdict', async () => {
    const { bundle, trust } = await bundleDir(big.lines, { blobs: big.blobs });
    const c = captureIo();
    expect(await verifyCli([bundle, '--trust', trust], c.io)).toBe(0);
    expect(c.stdout()).toMatch(/verdict: OK — 10000 manifests in 100 chains verified, 10000 blobs checked\n$/);
    expect(c.stderr()).toBe('');
  });

  it('gives the same verdict in one thread (--workers 0), on two workers, and with the noble verifier', async () => {
    const { bundle, trust } = await bundleDir(big.lines.slice(0, 400));
    for (const args of [
      ['--workers', '0'],
      ['--workers', '2'],
      ['--workers', '0', '--verifier', 'noble'],
    ]) {
      const c = captureIo();
      expect(await verifyCli([bundle, '--trust', trust, ...args], c.io)).toBe(0);
      expect(c.stdout()).toContain('verdict: OK — 400 manifests in 100 chains verified');
    }
  });

  it('--json prints one valid JSON report naming every finding, and exits 1', async () => {
    const lines = [...big.lines];
    lines.splice(500, 1); // a SEQ_GAP in session-0's chain
    lines.push('not json', lines[10]!); // LINE_NOT_JSON, DUPLICATE
    const { bundle, trust } = await bundleDir(lines, { count: 10_000 });
    const c = captureIo();
    expect(await verifyCli([bundle, '--trust', trust, '--json'], c.io)).toBe(1);
    const report = JSON.parse(c.stdout());
    expect(report.ok).toBe(false);
    expect(report.findings.map((f: { code: string; line?: number }) => `${f.code}@${f.line ?? '-'}`)).toEqual([
      'SEQ_GAP@600',
      'LINE_NOT_JSON@10000',
      'DUPLICATE@10001',
      'COUNT_MISMATCH@-',
    ]);
    for (const f of report.findings) expect(Object.keys(FINDING_CODES)).toContain(f.code);
    expect(report.findings[0]).toMatchObject({ chain: 'session-0', seq: 6, evidence: { expected: 5, actual: 6 } });
    expect(report.counts).toMatchObject({ lines: 10_001, manifests: 10_000, chains: 100, findings: 4 });
    expect(report.header).toMatchObject({ format: 'handoff-ledger-bundle', host: 'host-a' });
  });

  it('groups human findings by chain and ends with a one-line FAILED verdict', async () => {
    const lines = big.lines.slice(0, 300); // chains of 3
    lines.splice(100, 1); // session-0 seq 1
    lines.push('{');
    const { bundle, trust } = await bundleDir(lines);
    const c = captureIo();
    expect(await verifyCli([bundle, '--trust', trust], c.io)).toBe(1);
    const out = c.stdout().split('\n');
    expect(out).toContain(
      'chain session-0: 2 manifests, head seq 2 ' + big.chains.get('session-0')!.built[2]!.id + ' — 1 finding',
    );
    expect(out).toContain('99 more chains: ok');
    // The header's host is its claim (nothing signs bundle.json), said so.
    expect(out[0]).toMatch(
      /^bundle \S+: its unsigned header claims: exported by host host-a at 2026-\S+Z, filters none$/,
    );
    expect(out.at(-2)).toBe('verdict: FAILED — 2 findings (LINE_NOT_JSON 1, SEQ_GAP 1) in 300 lines');
  });

  it('draws a progress bar on stderr only when stderr is a terminal', async () => {
    const { bundle, trust } = await bundleDir(big.lines.slice(0, 2000), {});
    const tty = captureIo({ tty: true });
    expect(await verifyCli([bundle, '--trust', trust], tty.io)).toBe(0);
    expect(tty.stderr()).toMatch(/\r\[#*\.*\] +\d+%/);
    expect(tty.stderr().endsWith('\r\x1b[K')).toBe(true);
    expect(tty.stdout()).not.toContain('\r');
    const pipe = captureIo();
    expect(await verifyCli([bundle, '--trust', trust], pipe.io)).toBe(0);
    expect(pipe.stderr()).toBe('');
  });

  describe('exit 2', () => {
    it('without --trust, without DIR, or with an unknown option (USAGE)', async () => {
      const { bundle, trust } = await bundleDir(big.lines.slice(0, 3));
      for (const argv of [
        [bundle],
        ['--trust', trust],
        [bundle, '--trust', trust, '--bogus'],
        [bundle, '--trust', trust, '--workers', 'many'],
      ]) {
        const c = captureIo();
        expect(await verifyCli(argv, c.io), argv.join(' ')).toBe(2);
        expect(c.stderr()).toContain('USAGE');
      }
    });

    it('for a missing directory (BUNDLE_IO) and a directory that is not a bundle (BUNDLE_INVALID)', async () => {
      const { dir, trust } = await bundleDir(big.lines.slice(0, 3));
      const a = captureIo();
      expect(await verifyCli([join(dir, 'nope'), '--trust', trust], a.io)).toBe(2);
      expect(a.stderr()).toContain('BUNDLE_IO');
      mkdirSync(join(dir, 'empty'));
      const b = captureIo();
      expect(await verifyCli([join(dir, 'empty'), '--trust', trust, '--json'], b.io)).toBe(2);
      expect(JSON.parse(b.stdout())).toMatchObject({ error: { code: 'BUNDLE_INVALID' } });
      writeFileSync(join(dir, 'bundle', 'bundle.json'), '{"format":"something-else"}');
      const c = captureIo();
      expect(await verifyCli([join(dir, 'bundle'), '--trust', trust], c.io)).toBe(2);
      expect(c.stderr()).toContain('BUNDLE_INVALID');
    });

    it('for a header time of the right shape that names no date (BUNDLE_INVALID, not an internal error)', async () => {
      const { bundle, trust } = await bundleDir(big.lines.slice(0, 3));
      const header = JSON.parse(readFileSync(join(bundle, 'bundle.json'), 'utf8')) as Record<string, unknown>;
      writeFileSync(join(bundle, 'bundle.json'), JSON.stringify({ ...header, exportedAt: '2024-13-01T00:00:00.000Z' }));
      const c = captureIo();
      expect(await verifyCli([bundle, '--trust', trust, '--json'], c.io)).toBe(2);
      expect(JSON.parse(c.stdout())).toMatchObject({ error: { code: 'BUNDLE_INVALID' } });
    });

    it('for an unreadable or malformed trust file (TRUST_INVALID)', async () => {
      const { dir, bundle } = await bundleDir(big.lines.slice(0, 3));
      writeFileSync(
        join(dir, 'bad.json'),
        JSON.stringify({ version: 1, keys: [{ ...makeKey('h').trusted, extra: 1 }] }),
      );
      for (const t of [join(dir, 'missing.json'), join(dir, 'bad.json')]) {
        const c = captureIo();
        expect(await verifyCli([bundle, '--trust', t], c.io)).toBe(2);
        expect(c.stderr()).toContain('TRUST_INVALID');
      }
    });
  });
});

describe('verify --workers whose threads cannot start (a Node permission model without --allow-worker)', () => {
  const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
  // A process run under Node's permission model may read files and load native addons (BLAKE3) but may not start a
  // worker thread: a real environment's limit, met by the compiled CLI as an operator would meet it. (Node 22.13+
  // spells the flag --permission.)
  const permission = process.allowedNodeEnvironmentFlags.has('--permission')
    ? '--permission'
    : '--experimental-permission';

  function verifyRestricted(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(
      process.execPath,
      [permission, '--allow-fs-read=*', '--allow-addons', '--no-warnings', CLI, 'verify', ...args],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  }

  it('an explicit --workers N is WORKER_FAILED, exit 2 (and --json says so on stdout); --workers 0 verifies', async () => {
    const { bundle, trust } = await bundleDir(big.lines.slice(0, 200));
    const r = await verifyRestricted([bundle, '--trust', trust, '--workers', '2']);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/^handoff-ledger: WORKER_FAILED: verification worker \d+ did not start: .+\n$/);
    const json = await verifyRestricted([bundle, '--trust', trust, '--workers', '1', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'WORKER_FAILED' } });
    const one = await verifyRestricted([bundle, '--trust', trust, '--workers', '0']);
    expect([one.code, one.stderr]).toEqual([0, '']);
    expect(one.stdout).toContain('verdict: OK — 200 manifests in 100 chains verified');
  }, 60_000);

  it.runIf(availableParallelism() >= 2)(
    '--workers auto (the default) on a bundle large enough for threads says it verifies in one thread, and does: exit 0',
    async () => {
      const { bundle, trust } = await bundleDir(big.lines);
      const r = await verifyRestricted([bundle, '--trust', trust]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(
        /^handoff-ledger: verifying in one thread \(verification worker \d+ did not start: .+\)\n$/,
      );
      expect(r.stdout).toMatch(/verdict: OK — 10000 manifests in 100 chains verified\n$/);
    },
    60_000,
  );
});

describe("verify --expect, and a header's filters the auditor did not confirm", () => {
  let base: string;
  let files: CheckpointFiles;
  /** The full bundle with s2 dropped, proofs derived from the bundle itself, and `session s1` declared. */
  let passedOff: string;
  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'hl-expect-'));
    chmodSync(base, 0o700);
    files = await writeCheckpointFiles(base);
    const full = {
      header: readFileSync(join(files.bundle, 'bundle.json'), 'utf8'),
      lines: readFileSync(join(files.bundle, 'manifests.jsonl'), 'utf8').split('\n').slice(0, -1),
    };
    const { report } = await cliVerify(files.bundle, files.trust);
    const d = await deriveFiltered(full, report!.chains, (s) => s === 's1', { session: 's1' });
    passedOff = join(base, 'passed-off');
    cpSync(files.bundle, passedOff, { recursive: true });
    writeFileSync(join(passedOff, 'bundle.json'), d.header);
    writeFileSync(join(passedOff, 'manifests.jsonl'), d.lines.map((l) => `${l}\n`).join(''));
    writeFileSync(join(passedOff, 'proofs.jsonl'), d.proofs);
    writeFileSync(join(passedOff, 'heads.jsonl'), d.heads);
  }, 60_000);
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const human = async (dir: string, ...more: string[]) => {
    const c = captureIo();
    const code = await verifyCli([dir, '--trust', files.trust, '--workers', '0', ...more], c.io);
    return { code, out: c.stdout(), err: c.stderr() };
  };

  it('fails a full bundle with chains dropped and filters written into its header (SCOPE_UNCONFIRMED, exit 1)', async () => {
    const r = await human(passedOff);
    expect(r.code).toBe(1);
    expect(r.out).toContain('  SCOPE_UNCONFIRMED: bundle.json declares session s1, which the auditor did not ask for');
    expect(r.out).toMatch(
      /\nverdict: FAILED — 1 finding \(SCOPE_UNCONFIRMED 1\) in 3 lines \(filtered bundle: session s1, scope from header\)\n$/,
    );
    const json = await cliVerify(passedOff, files.trust);
    expect(json.code).toBe(1);
    expect(json.report!.checked).toMatchObject({ expect: 'none', bundle: 'filtered', scopeFrom: 'header' });
  });

  it('--expect full checks it as the whole log it claims not to be (SCOPE_UNEXPECTED, TREE_SIZE_MISMATCH, exit 1)', async () => {
    const r = await cliVerify(passedOff, files.trust, undefined, ['--expect', 'full']);
    expect(r.code).toBe(1);
    expect(r.report!.findings.map((f) => f.code)).toEqual([
      'SCOPE_UNEXPECTED',
      'TREE_SIZE_MISMATCH',
      'SESSION_HEAD_MISMATCH',
    ]);
    expect(r.report!.checked).toMatchObject({ expect: 'full', bundle: 'full', scopeFrom: 'none' });
    // The honest full bundle is what --expect full asks for.
    const ok = await human(files.bundle, '--expect', 'full');
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/\nverdict: OK — 5 manifests in 2 chains verified, 3 blobs checked\n$/);
  });

  it('passes a filtered bundle the auditor confirmed, by naming its scope or by --expect filtered, and says who chose it', async () => {
    for (const dir of [passedOff, files.sessionBundle]) {
      const named = await human(dir, '--session', 's1');
      expect(named.code, named.out).toBe(0);
      expect(named.out).toMatch(
        /\nverdict: OK — 3 manifests in 1 chain verified(, 3 blobs checked)? \(filtered bundle: session s1, scope from auditor\)\n$/,
      );
      const expected = await human(dir, '--expect', 'filtered');
      expect(expected.code, expected.out).toBe(0);
      expect(expected.out).toMatch(/ \(filtered bundle: session s1, scope from header\)\n$/);
    }
    const json = await cliVerify(files.sessionBundle, files.trust, undefined, ['--expect', 'filtered']);
    expect(json.report!.checked).toMatchObject({ expect: 'filtered', bundle: 'filtered', scopeFrom: 'header' });
  });

  it('--expect filtered on a full bundle is SCOPE_UNEXPECTED (exit 1), the bundle checked as the full one it is', async () => {
    const r = await cliVerify(files.bundle, files.trust, undefined, ['--expect', 'filtered']);
    expect(r.code).toBe(1);
    expect(r.report!.findings.map((f) => f.code)).toEqual(['SCOPE_UNEXPECTED']);
    expect(r.report!.checked).toMatchObject({ expect: 'filtered', bundle: 'full' });
  });

  it('refuses an --expect that is neither full nor filtered (USAGE, exit 2)', async () => {
    const r = await human(files.bundle, '--expect', 'whole');
    expect(r.code).toBe(2);
    expect(r.err).toBe('handoff-ledger: USAGE: --expect must be full or filtered\n');
  });
});

describe('verify --since: the report says the check was made', () => {
  let base: string;
  let files: CheckpointFiles;
  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'hl-since-'));
    chmodSync(base, 0o700);
    files = await writeCheckpointFiles(base);
  }, 60_000);
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('names the earlier checkpoint and whether it was extended, in the human report and in checked.since', async () => {
    // Without --since: no such line, no checked.since (an OK report looked the same with it and without it).
    const plain = captureIo();
    expect(await verifyCli([files.bundle, '--trust', files.trust, '--workers', '0'], plain.io)).toBe(0);
    expect(plain.stdout()).not.toContain('earlier checkpoint');
    expect((await cliVerify(files.bundle, files.trust)).report!.checked.since).toBeUndefined();
    const c = captureIo();
    expect(
      await verifyCli([files.bundle, '--trust', files.trust, '--workers', '0', '--since', files.earlier], c.io),
    ).toBe(0);
    expect(c.stdout()).toContain(
      `\nearlier checkpoint "${files.earlier}": extended by this bundle's checkpoint (size 2)\n`,
    );
    expect((await cliVerify(files.bundle, files.trust, files.earlier)).report!.checked.since).toEqual({
      size: 2,
      extended: true,
    });
    // A history rewritten since: not extended, and the finding says why.
    const forked = captureIo();
    expect(
      await verifyCli([files.bundle, '--trust', files.trust, '--workers', '0', '--since', files.forked], forked.io),
    ).toBe(1);
    expect(forked.stdout()).toMatch(
      /\nearlier checkpoint .*: not shown to be extended \(CONSISTENCY_INVALID\) \(size \d+\)\n/,
    );
    expect((await cliVerify(files.bundle, files.trust, files.forked)).report!.checked.since).toMatchObject({
      extended: false,
    });
  });
});

describe('the report names the trust it was verified under (checked.trust)', () => {
  let base: string;
  let files: CheckpointFiles;
  let store: TrustStore;
  /** The trust file split in two: the manifest keys, and the checkpoint keys (each alone fails). */
  let keysOnly: string;
  let checkpointOnly: string;
  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'hl-report-trust-'));
    chmodSync(base, 0o700);
    files = await writeCheckpointFiles(base);
    store = parseTrustStore(readFileSync(files.trust, 'utf8'));
    expect(store.checkpointKeys?.length).toBeGreaterThan(0);
    keysOnly = join(base, 'keys-only.json');
    checkpointOnly = join(base, 'checkpoint-only.json');
    writeFileSync(keysOnly, JSON.stringify({ version: 1, keys: store.keys }));
    writeFileSync(checkpointOnly, JSON.stringify({ version: 1, keys: [], checkpointKeys: store.checkpointKeys }));
  }, 60_000);
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const libraryReport = async (trust: TrustStore) => {
    return verifyBundle(await openBundleDir(files.bundle), { trust });
  };

  it('one --trust file: the digest of its store and its counts, the same in --json, the library and the human report', async () => {
    const cli = await cliVerify(files.bundle, files.trust);
    expect(cli.code).toBe(0);
    const expected = {
      digest: trustDigest(store),
      keys: store.keys.length,
      checkpointKeys: store.checkpointKeys!.length,
    };
    expect(expected.digest).toMatch(/^blake3:[0-9a-f]{64}$/);
    expect(cli.report!.checked.trust).toEqual(expected);
    expect((await libraryReport(store)).checked.trust).toEqual(expected);
    const c = captureIo();
    expect(await verifyCli([files.bundle, '--trust', files.trust, '--workers', '0'], c.io)).toBe(0);
    expect(c.stdout().split('\n')[2]).toBe(
      `trust: ${expected.digest} (${store.keys.length} key${store.keys.length === 1 ? '' : 's'}, ${expected.checkpointKeys} checkpoint key${expected.checkpointKeys === 1 ? '' : 's'})`,
    );
  });

  // A library audit without checkSummary checks blobs' digests and sizes only, and its report's `checked` was the same as
  // the CLI's, which also holds each blob to the summary schema: a kept report could not show which check was made.
  it('says whether the blobs were held to the summary schema (checked.summaries), the CLI always, the library as asked', async () => {
    const cli = await cliVerify(files.bundle, files.trust);
    expect(cli.code).toBe(0);
    expect(cli.report!.checked).toMatchObject({ blobs: true, summaries: true });
    const c = captureIo();
    expect(await verifyCli([files.bundle, '--trust', files.trust, '--workers', '0'], c.io)).toBe(0);
    expect(c.stdout().split('\n')[1]).toMatch(/^checked: signatures, chain rules, blobs; /);
    const bare = await libraryReport(store);
    expect(bare.checked).toMatchObject({ blobs: true, summaries: false });
    expect(describeCoverage(bare)).toMatch(
      /^checked: signatures, chain rules, blobs \(digests and sizes: NOT the summary schema, no checkSummary\); /,
    );
    const withSchema = await verifyBundle(await openBundleDir(files.bundle), {
      trust: store,
      checkSummary: storedSummaryProblem,
    });
    expect(withSchema.checked).toEqual(cli.report!.checked);
    expect(describeCoverage(withSchema)).toBe(c.stdout().split('\n')[1]);
    // No blobs checked: no summaries either, whatever the option.
    const sessionOnly = await verifyBundle(await openBundleDir(files.sessionBundle), {
      trust: store,
      checkSummary: storedSummaryProblem,
    });
    expect(sessionOnly.checked).toMatchObject({ blobs: false, summaries: false });
  });

  it("two --trust files: the merged store's digest (no file's), whatever their order, as one file holding both", async () => {
    const two = await cliVerify(files.bundle, keysOnly, undefined, ['--trust', checkpointOnly]);
    expect(two.code).toBe(0);
    const merged = mergeTrust(
      parseTrustStore(readFileSync(keysOnly, 'utf8')),
      parseTrustStore(readFileSync(checkpointOnly, 'utf8')),
    );
    expect(two.report!.checked.trust).toEqual({
      digest: trustDigest(merged),
      keys: store.keys.length,
      checkpointKeys: store.checkpointKeys!.length,
    });
    // The merge holds what the one file holds: the same digest; neither file alone gives it.
    expect(two.report!.checked.trust.digest).toBe(trustDigest(store));
    for (const one of [keysOnly, checkpointOnly])
      expect(trustDigest(parseTrustStore(readFileSync(one, 'utf8')))).not.toBe(two.report!.checked.trust.digest);
    const swapped = await cliVerify(files.bundle, checkpointOnly, undefined, ['--trust', keysOnly]);
    expect(swapped.report!.checked.trust).toEqual(two.report!.checked.trust);
    expect((await libraryReport(merged)).checked.trust).toEqual(two.report!.checked.trust);
  });

  it('verifyBundle refuses a trust that is no store before reading the bundle (USAGE): the report could not name it', async () => {
    for (const trust of [
      { version: 1, keys: 'h1' },
      { version: 1, keys: [{ host: 'h1', notBefore: 1n }] },
    ])
      await expect(
        verifyBundle(memoryBundleReader({ manifests: '' }), { trust: trust as unknown as TrustStore }),
      ).rejects.toMatchObject({ code: 'USAGE', message: expect.stringContaining('parseTrustStore') });
  });

  it('a changed trust file changes the digest, though the verdict is the same', async () => {
    const before = (await cliVerify(files.bundle, files.trust)).report!;
    // A wider window for the first key: still trusted for every manifest, but not the store the first report names.
    const changed = join(base, 'changed.json');
    writeFileSync(
      changed,
      JSON.stringify({
        ...store,
        keys: store.keys.map((k, i) => (i === 0 ? { ...k, notBefore: '2000-01-01T00:00:00.000Z' } : k)),
      }),
    );
    const after = await cliVerify(files.bundle, changed);
    expect(after.code).toBe(0);
    expect(after.report!.checked.trust.keys).toBe(before.checked.trust.keys);
    expect(after.report!.checked.trust.digest).not.toBe(before.checked.trust.digest);
    // The keys of one file in another order: the same store, the same digest.
    const reordered = join(base, 'reordered.json');
    writeFileSync(reordered, JSON.stringify({ ...store, keys: [...store.keys].reverse() }));
    expect((await cliVerify(files.bundle, reordered)).report!.checked.trust).toEqual(before.checked.trust);
  });
});

describe('the report names the witness keys it held the checkpoint to (checked.witnesses)', () => {
  let base: string;
  let files: CheckpointFiles;
  let w: WitnessFiles;
  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'hl-report-witnesses-'));
    chmodSync(base, 0o700);
    files = await writeCheckpointFiles(base);
    w = await writeWitnessFiles(base, files);
  }, 60_000);
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const witnessArgs = (keys: string, quorum: string) => ['--witness-keys', keys, '--quorum', quorum];

  it('--witness-keys: their digest, count and the quorum, the same in --json, the library and the human report', async () => {
    const keys = parseWitnessKeys(readFileSync(w.keys, 'utf8'));
    const expected = { digest: witnessDigest(keys), keys: 2, quorum: 2 };
    expect(expected.digest).toMatch(/^blake3:[0-9a-f]{64}$/);
    const cli = await cliVerify(w.cosigned, files.trust, undefined, witnessArgs(w.keys, '2'));
    expect(cli.code).toBe(0);
    expect(cli.report!.checked.witnesses).toEqual(expected);
    const trust = parseTrustStore(readFileSync(files.trust, 'utf8'));
    const library = await verifyBundle(await openBundleDir(w.cosigned), { trust, witnesses: { keys, quorum: 2 } });
    expect(library.checked.witnesses).toEqual(expected);
    const c = captureIo();
    expect(
      await verifyCli([w.cosigned, '--trust', files.trust, '--workers', '0', ...witnessArgs(w.keys, '2')], c.io),
    ).toBe(0);
    expect(c.stdout().split('\n')[3]).toBe(`witness keys: ${expected.digest} (2 keys, quorum 2)`);
  });

  it('none given: absent from the report (as checked.since is), and no line for them', async () => {
    const cli = await cliVerify(w.cosigned, files.trust);
    expect(cli.code).toBe(0);
    expect('witnesses' in cli.report!.checked).toBe(false);
    const c = captureIo();
    expect(await verifyCli([w.cosigned, '--trust', files.trust, '--workers', '0'], c.io)).toBe(0);
    expect(c.stdout()).not.toContain('witness keys:');
  });

  it('the same keys in another order, repeated, commented, their hashes in capitals: the same digest; one key fewer: another', async () => {
    const lines = readFileSync(w.keys, 'utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(lines).toHaveLength(2);
    const shouted = (l: string) => l.replace(/\+([0-9a-f]{8})\+/, (_, h: string) => `+${h.toUpperCase()}+`);
    const other = join(base, 'witnesses-reordered.txt');
    writeFileSync(other, `${shouted(lines[1]!)}\n# again\n${lines[0]}\n${lines[1]}\n`);
    const before = (await cliVerify(w.cosigned, files.trust, undefined, witnessArgs(w.keys, '2'))).report!;
    const after = (await cliVerify(w.cosigned, files.trust, undefined, witnessArgs(other, '2'))).report!;
    expect(after.checked.witnesses).toEqual(before.checked.witnesses);
    const fewer = join(base, 'witnesses-one.txt');
    writeFileSync(fewer, `${lines[0]}\n`);
    const one = (await cliVerify(w.cosigned, files.trust, undefined, witnessArgs(fewer, '1'))).report!;
    expect(one.checked.witnesses).toEqual({
      digest: witnessDigest(parseWitnessKeys(`${lines[0]}\n`)),
      keys: 1,
      quorum: 1,
    });
    expect(one.checked.witnesses!.digest).not.toBe(before.checked.witnesses!.digest);
    // The quorum is reported beside the keys, not in their digest.
    const lower = (await cliVerify(w.cosigned, files.trust, undefined, witnessArgs(w.keys, '1'))).report!;
    expect(lower.checked.witnesses).toEqual({ ...before.checked.witnesses, quorum: 1 });
  });

  it('verifyBundle refuses pinned witness keys built by hand that are none (USAGE) before reading', async () => {
    const [good] = parseWitnessKeys(readFileSync(w.keys, 'utf8'));
    for (const keys of [
      [{ ...good!, publicKey: new Uint8Array(31) }],
      [{ ...good!, keyHash: 2 ** 32 }],
      [{ ...good!, name: 7 }],
    ])
      await expect(
        verifyBundle(memoryBundleReader({ manifests: '' }), {
          trust: { version: 1, keys: [] },
          witnesses: { keys: keys as unknown as CosignerKey[], quorum: 1 },
        }),
      ).rejects.toMatchObject({ code: 'USAGE' });
  });

  it("verifyBundle's USAGE for witness keys that are no list, or not parseWitnessKeys's, says so (not a TypeError's words)", async () => {
    // The witness keys file's text given as `keys` (parseWitnessKeys left out) was refused 'keys.map is not a function'.
    const text = readFileSync(w.keys, 'utf8');
    const [good] = parseWitnessKeys(text);
    for (const [keys, message] of [
      [text, 'the pinned witness keys are not a list'],
      [undefined, 'the pinned witness keys are not a list'],
      [[{ ...good!, publicKey: 'x' }], 'a pinned witness key is not one (read them with parseWitnessKeys)'],
    ] as const)
      await expect(
        verifyBundle(memoryBundleReader({ manifests: '' }), {
          trust: { version: 1, keys: [] },
          witnesses: { keys: keys as unknown as CosignerKey[], quorum: 1 },
        }),
      ).rejects.toMatchObject({ code: 'USAGE', message });
  });
});

describe('the report names who signed what it verified (checked.signers)', () => {
  let base: string;
  let files: CheckpointFiles;
  let store: TrustStore;
  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'hl-report-signers-'));
    chmodSync(base, 0o700);
    files = await writeCheckpointFiles(base);
    store = parseTrustStore(readFileSync(files.trust, 'utf8'));
  }, 60_000);
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it("a ledger's bundle: its host key for every manifest and its checkpoint key once, in --json (threads or not), the library and the human report", async () => {
    const cli = await cliVerify(files.bundle, files.trust);
    expect(cli.code).toBe(0);
    const r = cli.report!;
    expect(store.keys).toHaveLength(1);
    expect(store.checkpointKeys).toHaveLength(1);
    const expected = {
      manifests: [{ host: 'h1', keyId: store.keys[0]!.keyId, count: 5 }],
      checkpoints: [{ host: 'h1', keyId: store.checkpointKeys![0]!.keyId, count: 1 }],
    };
    expect(r.counts.manifests).toBe(5);
    expect(r.checked.signers).toEqual(expected);
    // Worker threads verify the lines there: the key id comes back with each verified line.
    const threads = captureIo();
    expect(await verifyCli([files.bundle, '--trust', files.trust, '--json', '--workers', '2'], threads.io)).toBe(0);
    expect((JSON.parse(threads.stdout()) as BundleAuditReport).checked.signers).toEqual(expected);
    expect((await verifyBundle(await openBundleDir(files.bundle), { trust: store })).checked.signers).toEqual(expected);
    const c = captureIo();
    expect(await verifyCli([files.bundle, '--trust', files.trust, '--workers', '0'], c.io)).toBe(0);
    expect(c.stdout().split('\n')[3]).toBe(
      `signers: 1 manifest key (h1 ${expected.manifests[0]!.keyId} ×5), 1 checkpoint key (h1 ${expected.checkpoints[0]!.keyId} ×1)`,
    );
  });

  it('no checkpoint key in the trust: no checkpoint signer (the checkpoint did not verify), the manifests still named', async () => {
    const keysOnly = join(base, 'keys-only.json');
    writeFileSync(keysOnly, JSON.stringify({ version: 1, keys: store.keys }));
    const r = (await cliVerify(files.bundle, keysOnly)).report!;
    expect(r.checkpoint).toBeUndefined();
    expect(r.checked.signers).toEqual({
      manifests: [{ host: 'h1', keyId: store.keys[0]!.keyId, count: 5 }],
      checkpoints: [],
    });
  });

  it('a hostile bundle naming a thousand keys: only keys of the trust store that verified appear, each once, sorted', async () => {
    const a1 = makeKey('host-a', 1);
    const a2 = makeKey('host-a', 2);
    const expired = makeKey('host-a', 3);
    const b1 = makeKey('host-b', 4);
    const chainA = new ChainBuilder(a1, { principal: 'alice', session: 'sa' });
    const chainB = new ChainBuilder(b1, { principal: 'bob', session: 'sb' });
    const lines: string[] = [];
    for (let i = 0; i < 4; i++) lines.push((await chainA.next({}, { signWith: i % 2 ? a2 : a1 })).line);
    lines.push(lines[0]!); // a duplicate: verified again, a finding of step 6, counted as a verified signature
    for (let i = 0; i < 3; i++) lines.push((await chainB.next()).line);
    // A manifest of host-a signed by host-b's key: not listed for host-a, KEY_UNTRUSTED.
    lines.push((await new ChainBuilder(a1, { principal: 'eve', session: 'se' }).next({}, { signWith: b1 })).line);
    lines.push((await new ChainBuilder(a1, { principal: 'eve', session: 'sx' }).next({}, { signWith: expired })).line);
    // A thousand keys no trust store lists.
    for (let i = 0; i < 1000; i++)
      lines.push(
        (await new ChainBuilder(makeKey('host-a', 100 + i), { principal: 'eve', session: `u${i}` }).next()).line,
      );
    const trust = trustOf(a2.trusted, b1.trusted, a1.trusted, {
      ...expired.trusted,
      notAfter: '2021-01-01T00:00:00.000Z',
    });
    const r = await verifyBundle(readerOf(lines), { trust });
    expect(r.counts.byCode).toMatchObject({ KEY_UNTRUSTED: 1001, KEY_EXPIRED: 1, DUPLICATE: 1 });
    const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    const expected = [
      { host: 'host-a', keyId: a1.keyId, count: 3 },
      { host: 'host-a', keyId: a2.keyId, count: 2 },
      { host: 'host-b', keyId: b1.keyId, count: 3 },
    ].sort((x, y) => byText(x.host, y.host) || byText(x.keyId, y.keyId));
    expect(r.checked.signers).toEqual({ manifests: expected, checkpoints: [] });
    expect(r.checked.signers.manifests.reduce((n, s) => n + s.count, 0)).toBe(r.counts.manifests);
    expect(r.checked.signers.manifests.length).toBeLessThanOrEqual(trust.keys.length);
  });

  it('names every trust entry listing the checkpoint key that verified, whatever the order of the trust files', async () => {
    const cp = store.checkpointKeys![0]!;
    const other = join(base, 'other-host.json');
    // The same checkpoint key listed by a second host's file (a shared key).
    writeFileSync(other, JSON.stringify({ version: 1, keys: [], checkpointKeys: [{ ...cp, host: 'h0' }] }));
    const expected = [
      { host: 'h0', keyId: cp.keyId, count: 1 },
      { host: 'h1', keyId: cp.keyId, count: 1 },
    ];
    for (const order of [
      [files.trust, other],
      [other, files.trust],
    ]) {
      const r = (await cliVerify(files.bundle, order[0]!, undefined, ['--trust', order[1]!])).report!;
      expect(r.checkpoint).toBeDefined();
      expect(r.checked.signers.checkpoints).toEqual(expected);
    }
    // A revoked copy of it by a third host, under another key id, revokes it in every listing (mergeTrust): the
    // checkpoint verifies under none of them.
    const revoked = join(base, 'revoked-copy.json');
    writeFileSync(
      revoked,
      JSON.stringify({
        version: 1,
        keys: [],
        checkpointKeys: [{ ...cp, host: 'h9', keyId: 'ed25519:revoked', revokedAt: cp.notBefore }],
      }),
    );
    for (const order of [
      [files.trust, revoked],
      [revoked, files.trust],
    ]) {
      const r = (await cliVerify(files.bundle, order[0]!, undefined, ['--trust', other, '--trust', order[1]!])).report!;
      expect(r.checkpoint).toBeUndefined();
      expect(r.checked.signers.checkpoints).toEqual([]);
    }
  });
});
