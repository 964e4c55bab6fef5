/**
 * Filesystem attacks on the store: symlinks planted at a blob path, a shard directory or in
 * staging; a blob replaced by a FIFO or a directory; store directories made group/world-writable or
 * swapped for links; the same on an audit bundle. Each must be refused with a clear typed error, never
 * hang, and never read through the link — the link targets below hold exactly the right bytes, so a
 * store that followed a link would "succeed" and be caught.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { bundleBlobPath } from '../../manifests/audit/bundle.js';
import { digestHex, digestOf } from '../../store/hash/digest.js';
import { validateSummary } from '../../src/summary/summary.js';
import { buildBundle, makeKey, trustOf, writeBundleDir } from '../support/bundle-builder.js';
import { tempDir } from '../support/tmp.js';
import { Judge } from './hostile-kit.js';
import { recordFigures } from './figures.js';
import { blobPath, sizedSummary, stagingFiles } from './store-support.js';

const judge = new Judge();
const started = Date.now();
const scope = { principal: 'alice', session: 's', run: 'r' };
const T = 'filesystem attacks';
// These attacks target blob files: every summary is stored as a file, none inline in the log.
const FILES_ONLY = 0;

async function storeWithBlob(): Promise<{
  root: string;
  outside: string;
  ledger: Ledger;
  digest: string;
  path: string;
}> {
  const root = join(tempDir('hl-fsa-'), 'store');
  const outside = tempDir('hl-fsa-outside-');
  const ledger = await openLedger({ root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY });
  const r = await ledger.publish(scope, sizedSummary('victim'));
  return { root, outside, ledger, digest: r.digest, path: blobPath(root, r.digest) };
}

/** Every entry below `dir`, to prove nothing was written there. */
function tree(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).sort();
}

const refused = (what: string) => () =>
  judge.tally.right(false, `${what}: accepted (read or wrote through a planted path)`);

describe('planted symlinks', () => {
  it('a symlink at a blob path, pointing at a file with the right bytes: UNSAFE_PATH, nothing read', async () => {
    const s = await storeWithBlob();
    copyFileSync(s.path, join(s.outside, 'same-bytes'));
    rmSync(s.path);
    symlinkSync(join(s.outside, 'same-bytes'), s.path);
    await judge.judge(T, () => s.ledger.resume(scope), refused('blob symlink'), ['UNSAFE_PATH']);
    expect(await s.ledger.blobs.has(s.digest)).toBe(false);
    await s.ledger.close();
  });

  it.each([1, 2])(
    'a symlinked shard directory (level %i) is refused for reads and writes; nothing lands outside',
    async (level) => {
      const s = await storeWithBlob();
      const hex = digestHex(s.digest);
      const shard = level === 1 ? join(s.root, 'blobs-v1', 'blake3', hex.slice(0, 2)) : dirname(s.path);
      // The outside copy mirrors the shard, right bytes included: following the link would verify.
      execFileSync('cp', ['-a', `${shard}/.`, s.outside]);
      rmSync(shard, { recursive: true });
      symlinkSync(s.outside, shard);
      const before = tree(s.outside);
      await judge.judge(T, () => s.ledger.resume(scope), refused('shard symlink (read)'), ['UNSAFE_PATH']);
      // A new blob whose digest falls in the linked shard: find one, then publish it.
      const prefix = level === 1 ? hex.slice(0, 2) : hex.slice(0, 4);
      let marker = 0;
      let summary = sizedSummary('w0');
      while (!digestHex(digestOf(validateSummary(summary).bytes)).startsWith(prefix))
        summary = sizedSummary(`w${++marker}`);
      await judge.judge(T, () => s.ledger.publish(scope, summary), refused('shard symlink (write)'), ['UNSAFE_PATH']);
      expect(tree(s.outside)).toEqual(before);
      expect(stagingFiles(s.root)).toEqual([]);
      await s.ledger.close();
    },
  );

  it('a symlink planted in staging is removed at open; its target is untouched', async () => {
    const s = await storeWithBlob();
    await s.ledger.close();
    writeFileSync(join(s.outside, 'precious'), 'do not delete');
    mkdirSync(join(s.outside, 'dir'));
    writeFileSync(join(s.outside, 'dir', 'inner'), 'keep');
    symlinkSync(join(s.outside, 'precious'), join(s.root, 'tmp', 'a.tmp'));
    symlinkSync(join(s.outside, 'dir'), join(s.root, 'tmp', 'b.tmp'));
    await judge.judge(
      T,
      () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      async (ledger) => {
        judge.tally.right(
          ledger.recovery.stagingRemoved === 2 && stagingFiles(s.root).length === 0,
          'staging links not cleared',
        );
        judge.tally.right(
          readFileSync(join(s.outside, 'precious'), 'utf8') === 'do not delete' &&
            readFileSync(join(s.outside, 'dir', 'inner'), 'utf8') === 'keep',
          'recovery deleted through a link',
        );
        await ledger.close();
      },
    );
  });

  it.each([
    ['tmp', 'UNSAFE_PATH'],
    ['blobs-v1', 'UNSAFE_PATH'],
    ['quarantine', 'UNSAFE_PATH'],
    ['keys', 'UNSAFE_PATH'],
    ['manifests-v1', 'UNSAFE_PATH'], // BUG-2 (fixed): LevelDB used to follow this link and write outside the root
  ])('the store directory %s swapped for a symlink: open refuses %s, writes nothing outside', async (name, code) => {
    const s = await storeWithBlob();
    await s.ledger.close();
    execFileSync('cp', ['-a', `${join(s.root, name)}/.`, s.outside]);
    rmSync(join(s.root, name), { recursive: true });
    symlinkSync(s.outside, join(s.root, name));
    const before = tree(s.outside);
    await judge.judge(
      T,
      () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused(`${name} symlink`),
      [code],
    );
    expect(tree(s.outside)).toEqual(before);
  });

  it('the key file swapped for a symlink: KEY_FILE_UNSAFE', async () => {
    const s = await storeWithBlob();
    await s.ledger.close();
    const keyDir = join(s.root, 'keys');
    const [keyName] = readdirSync(keyDir);
    copyFileSync(join(keyDir, keyName!), join(s.outside, 'key.jwk'));
    rmSync(join(keyDir, keyName!));
    symlinkSync(join(s.outside, 'key.jwk'), join(keyDir, keyName!));
    await judge.judge(
      T,
      () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused('key symlink'),
      ['KEY_FILE_UNSAFE'],
    );
  });
});

describe('blobs replaced by other file types', () => {
  it.each(['fifo', 'directory'])(
    'a blob replaced by a %s: resume refuses UNSAFE_PATH without hanging; republishing quarantines it',
    async (kind) => {
      const s = await storeWithBlob();
      rmSync(s.path);
      if (kind === 'fifo') execFileSync('mkfifo', ['-m', '600', s.path]);
      else mkdirSync(s.path, { mode: 0o700 });
      await judge.judge(T, () => s.ledger.resume(scope), refused(`blob ${kind}`), ['UNSAFE_PATH']);
      // The same bytes published again: the impostor is moved aside and the real blob put back.
      await judge.judge(
        T,
        () => s.ledger.publish(scope, sizedSummary('victim')),
        async () => {
          const r = await s.ledger.resume(scope);
          judge.tally.right(
            r?.summary.task === sizedSummary('victim').task && statSync(s.path).isFile(),
            'blob not restored',
          );
          judge.tally.right(readdirSync(join(s.root, 'quarantine')).length === 1, 'impostor not quarantined');
        },
      );
      await s.ledger.close();
    },
  );
});

describe('unsafe permissions', () => {
  it.each(['777', '770', '707', '720', '702'])('a store root with mode %s is refused UNSAFE_ROOT', async (octal) => {
    const mode = parseInt(octal, 8);
    const s = await storeWithBlob();
    await s.ledger.close();
    chmodSync(s.root, mode);
    await judge.judge(
      T,
      () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused(`root mode ${mode.toString(8)}`),
      ['UNSAFE_ROOT'],
    );
    chmodSync(s.root, 0o700);
  });

  it('a store root that is a symlink or a file is refused UNSAFE_ROOT', async () => {
    const s = await storeWithBlob();
    await s.ledger.close();
    const link = join(tempDir('hl-fsa-'), 'link');
    symlinkSync(s.root, link);
    await judge.judge(
      T,
      () => openLedger({ root: link, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused('root symlink'),
      ['UNSAFE_ROOT'],
    );
    const file = join(tempDir('hl-fsa-'), 'file');
    writeFileSync(file, '');
    await judge.judge(
      T,
      () => openLedger({ root: file, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused('root file'),
      ['UNSAFE_ROOT'],
    );
  });

  it.each(['tmp', 'blobs-v1', 'manifests-v1', 'keys'])('a world-writable %s is refused UNSAFE_PATH', async (name) => {
    const s = await storeWithBlob();
    await s.ledger.close();
    chmodSync(join(s.root, name), 0o777);
    await judge.judge(
      T,
      () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused(`${name} 0777`),
      ['UNSAFE_PATH'],
    );
  });

  it('a key file readable by others is refused KEY_FILE_UNSAFE', async () => {
    const s = await storeWithBlob();
    await s.ledger.close();
    const [keyName] = readdirSync(join(s.root, 'keys'));
    chmodSync(join(s.root, 'keys', keyName!), 0o644);
    await judge.judge(
      T,
      () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
      refused('key 0644'),
      ['KEY_FILE_UNSAFE'],
    );
  });

  it.each([
    ['0664', 0o664],
    ['0646', 0o646],
    ['0666', 0o666],
  ] as const)(
    'a trust.json writable by group or others (%s) is refused KEY_FILE_UNSAFE: it decides which keys count',
    async (label, mode) => {
      const s = await storeWithBlob();
      await s.ledger.close();
      chmodSync(join(s.root, 'trust.json'), mode);
      const open = () => openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY });
      await judge.judge(T, open, refused(`trust.json ${label}`), ['KEY_FILE_UNSAFE']);
      await expect(open()).rejects.toThrow(`"${join(s.root, 'trust.json')}" is writable by group or others`);
    },
  );

  it('a trust.json readable by others (0644) is accepted: it holds only public keys', async () => {
    const s = await storeWithBlob();
    await s.ledger.close();
    chmodSync(join(s.root, 'trust.json'), 0o644);
    const ledger = await openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY });
    try {
      expect((await ledger.resume(scope))?.summary).toEqual(sizedSummary('victim'));
    } finally {
      await ledger.close();
    }
  });
});

describe('attacks on an audit bundle', () => {
  async function bundleDir() {
    const key = makeKey('host-a');
    const b = await buildBundle({ key, chains: [{ session: 's', count: 2 }] });
    const dir = join(tempDir('hl-fsa-'), 'bundle');
    await writeBundleDir(dir, b.lines, { blobs: b.blobs });
    return { dir, b, opts: { trust: trustOf(key.trusted), verifier: nodeVerifier } };
  }

  it.each(['bundle.json', 'manifests.jsonl'])('%s replaced by a FIFO: BUNDLE_INVALID, no hang', async (name) => {
    const { dir } = await bundleDir();
    rmSync(join(dir, name));
    execFileSync('mkfifo', [join(dir, name)]);
    await judge.judge(T, () => openBundleDir(dir), refused(`bundle ${name} fifo`), ['BUNDLE_INVALID']);
  });

  it.each(['symlink', 'fifo'])(
    'a bundle blob replaced by a %s (right bytes behind it) counts as missing, never read',
    async (kind) => {
      const { dir, b, opts } = await bundleDir();
      const digest = b.manifests[0]!.manifest.summary.digest;
      const path = join(dir, bundleBlobPath(digest));
      const outside = join(tempDir('hl-fsa-outside-'), 'blob');
      renameSync(path, outside);
      if (kind === 'symlink') symlinkSync(outside, path);
      else execFileSync('mkfifo', [path]);
      await judge.judge(
        T,
        async () => verifyBundle(await openBundleDir(dir), opts),
        (report) => {
          judge.tally.right(
            // The header, as written, still counts the blob: COUNT_MISMATCH too.
            report.counts.manifests === 2 &&
              isDeepStrictEqual(report.counts.byCode, { BLOB_MISSING: 1, COUNT_MISMATCH: 1 }),
            `audit: ${JSON.stringify(report.counts)}`,
          );
        },
      );
    },
  );
});

// Found by this suite (BUG-8, BUG-9), fixed: kept as regression tests.
describe('known bugs', () => {
  it('BUG-8: a trust.json swapped for a symlink is refused, not read through the link', async () => {
    const s = await storeWithBlob();
    await s.ledger.close();
    const trust = join(s.root, 'trust.json');
    copyFileSync(trust, join(s.outside, 'trust.json'));
    rmSync(trust);
    symlinkSync(join(s.outside, 'trust.json'), trust);
    await expect(
      openLedger({ root: s.root, host: 'h', onNotice: () => {}, inlineSummaryBytes: FILES_ONLY }),
    ).rejects.toMatchObject({
      code: expect.stringMatching(/UNSAFE_PATH|KEY_FILE_UNSAFE|TRUST_INVALID/),
    });
  });

  it('BUG-9: staging swapped for a symlink while the ledger is open: publish refuses instead of writing through it', async () => {
    const s = await storeWithBlob();
    try {
      rmSync(join(s.root, 'tmp'), { recursive: true });
      symlinkSync(s.outside, join(s.root, 'tmp'));
      await expect(s.ledger.publish(scope, sizedSummary('through the link'))).rejects.toMatchObject({
        code: 'UNSAFE_PATH',
      });
    } finally {
      await s.ledger.close();
    }
  });
});

afterAll(async () => {
  expect(judge.untyped).toBe(0);
  await recordFigures({
    suite: 'fs-attacks',
    title:
      'Symlinks planted at a blob path, a shard directory (both levels), in staging and at every store directory and the key file; blobs replaced by a FIFO or a directory; group/world-writable root and directories; FIFOs and symlinks in an audit bundle. Link targets hold the right bytes, so reading through a link would have been caught as a wrong answer.',
    durationMs: Date.now() - started,
    inputs: judge.inputs.counts,
    losses: judge.tally.losses,
    wrongAnswers: judge.tally.wrongAnswers,
    details: judge.details(),
  });
});
