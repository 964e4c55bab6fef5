/**
 * fsck looks and does not change: its diagnosing open (openLedger `diagnose: true`) leaves the root as it found it,
 * on both backends. Staging files a crash left beside trust.json, the key files and the pin stay (a notice names them),
 * and so do (embedded) the blob store's staging files, blobs an interrupted gc held in gc-aside/ and key files a
 * stopped rotation staged (`<file>.next`); a missing checkpoints/ is not made, and a 0.1.0 pin (`<hash>.note`) is read
 * in place, not moved into a slot file, and a root made before the format marker gets none.
 * Only LevelDB's own files under manifests-v1/ change (it writes LOG and MANIFEST at every open). An ordinary open
 * still clears and converts them, as before.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { readPinnedNote } from '../src/ledger/checkpoint-pin.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { generateJwk, LocalSigner } from '../src/keys/local-signer.js';
import { fsck } from '../src/ops/maintenance.js';
import { describePostgres } from './support/postgres.js';
import { tempDir } from './support/tmp.js';
import { ORIGIN, publishMany } from './tlog/ledger-support.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

/** Every path under `root` but LevelDB's own directory, with each file's size and time. */
function listing(root: string): string[] {
  return (readdirSync(root, { recursive: true }) as string[])
    .filter((name) => name !== 'manifests-v1' && !name.startsWith('manifests-v1/'))
    .map((name) => {
      const st = statSync(join(root, name));
      return st.isDirectory() ? `${name}/` : `${name} ${st.size} ${st.mtimeMs}`;
    })
    .sort();
}

/** Staging files of trust.json, a key file, the pin and a lock file, an hour old (a shared root's are old ones only). */
function leaveStagingFiles(root: string): string[] {
  const paths = [
    join(root, '.0123456789abcdef.tmp'),
    join(root, 'trust.json.lock.0123456789abcdef.tmp'),
    join(root, 'keys', '.0123456789abcdef.tmp'),
  ];
  if (existsSync(join(root, 'checkpoints'))) paths.push(join(root, 'checkpoints', '.fedcba9876543210.tmp'));
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (const path of paths) {
    writeFileSync(path, 'half written', { mode: 0o600 });
    utimesSync(path, hourAgo, hourAgo);
  }
  return paths;
}

/** What 0.1.0 kept: the newest note alone, in `<hash>.note`, and no slot file. */
async function asOldPin(root: string): Promise<string> {
  const dir = join(root, 'checkpoints');
  const [pin] = readdirSync(dir).filter((n) => n.endsWith('.pin'));
  const note = await readPinnedNote(join(dir, pin!));
  rmSync(join(dir, pin!));
  const legacy = pin!.replace(/\.pin$/, '.note');
  writeFileSync(join(dir, legacy), note, { mode: 0o600 });
  return legacy;
}

function cli(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, HANDOFF_LEDGER_HOST: 'h1', ...env },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function suite(
  backend: 'embedded' | 'postgres',
  /** A database of its own for each store (the CLI opens its default schema); none for the embedded store. */
  newDatabase: () => Promise<string | undefined>,
) {
  let connectionString: string | undefined;
  const postgres = () => (connectionString === undefined ? undefined : { connectionString });
  const open = (root: string, extra: Partial<Parameters<typeof openLedger>[0]> = {}) =>
    openLedger({ root, host: 'h1', origin: ORIGIN, postgres: postgres(), onNotice: () => {}, ...extra });
  const cliStore = (root: string) => {
    const pg = postgres();
    return ['--root', root, '--origin', ORIGIN, ...(pg ? ['--postgres', pg.connectionString] : [])];
  };

  async function made(): Promise<string> {
    connectionString = await newDatabase();
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    return root;
  }

  /** fsck by the library, then by the CLI: the root's listing unchanged after each; the notices of the first. */
  async function fsckLeavesIt(root: string): Promise<string[]> {
    const before = listing(root);
    const notices: string[] = [];
    const ledger = await open(root, { diagnose: true, onNotice: (m) => notices.push(m) });
    try {
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
      expect(ledger.recovery.stagingRemoved).toBe(0);
    } finally {
      await ledger.close();
    }
    expect(listing(root)).toEqual(before);
    const r = cli(['fsck', ...cliStore(root)]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^clean: /m);
    expect(listing(root)).toEqual(before);
    return notices;
  }

  describe(`${backend}: fsck's diagnosing open writes nothing to the root`, () => {
    it('leaves stale staging files and a 0.1.0 pin as they are (a notice names the files); an ordinary open then clears and converts them', async () => {
      const root = await made();
      const legacy = await asOldPin(root);
      const staged = leaveStagingFiles(root);
      const notices = await fsckLeavesIt(root);
      expect(notices).toContainEqual(
        expect.stringContaining(
          `a diagnosing open (fsck) left ${staged.length} staging files of interrupted writes in place`,
        ),
      );
      for (const path of staged) expect(notices.join('\n')).toContain(path);
      expect(readdirSync(join(root, 'checkpoints'))).toEqual([legacy, '.fedcba9876543210.tmp'].sort());
      // An ordinary open: the staging files go, the pin moves into its slot file.
      const ledger = await open(root);
      expect(ledger.recovery.stagingRemoved).toBe(staged.length);
      await ledger.close();
      for (const path of staged) expect(existsSync(path), path).toBe(false);
      expect(readdirSync(join(root, 'checkpoints'))).toEqual([legacy.replace(/\.note$/, '.pin')]);
    });

    it('makes no keys/ where it was removed, nor a key: the open is refused KEY_INVALID naming it (library and CLI), the root as it was', async () => {
      const root = await made();
      const keys = join(root, 'keys');
      renameSync(keys, join(root, 'keys.aside'));
      const before = listing(root);
      const err = await open(root, { diagnose: true }).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID' });
      expect((err as Error).message).toContain(`"${keys}" is missing`);
      expect(existsSync(keys)).toBe(false);
      expect(listing(root)).toEqual(before);
      // With an injected signer the host key is not in keys/: the checkpoint key is the one it would make.
      const signer = new LocalSigner(generateJwk());
      const withSigner = await open(root, { diagnose: true, signer }).catch((e: unknown) => e);
      expect(withSigner).toMatchObject({ name: 'LedgerError', code: 'KEY_INVALID' });
      expect((withSigner as Error).message).toMatch(/checkpoint key file/);
      expect(existsSync(keys)).toBe(false);
      expect(listing(root)).toEqual(before);
      // The CLI's fsck reports it (exit 1, KEY_INVALID) and makes nothing either.
      const r = cli(['fsck', ...cliStore(root)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('KEY_INVALID');
      expect(existsSync(keys)).toBe(false);
      expect(listing(root)).toEqual(before);
      // keys/ restored: the diagnosis is clean, and still writes nothing.
      renameSync(join(root, 'keys.aside'), keys);
      expect(await fsckLeavesIt(root)).toEqual([]);
    });

    it("writes no format marker into a root made before it (none there); an ordinary open writes the root's", async () => {
      const root = await made();
      const marker = readFileSync(join(root, 'format.json'), 'utf8');
      rmSync(join(root, 'format.json'));
      expect(await fsckLeavesIt(root)).toEqual([]);
      expect(existsSync(join(root, 'format.json'))).toBe(false);
      const ledger = await open(root);
      await ledger.close();
      expect(readFileSync(join(root, 'format.json'), 'utf8')).toBe(marker);
      expect(marker).toBe('{"format":"handoff-ledger-root","version":1}\n');
    });

    it('makes no checkpoints/ where it is missing; an ordinary open makes it and pins', async () => {
      const root = await made();
      rmSync(join(root, 'checkpoints'), { recursive: true });
      const notices = await fsckLeavesIt(root);
      expect(notices).toEqual([]);
      expect(existsSync(join(root, 'checkpoints'))).toBe(false);
      // A ledger opened to diagnose still pins when it publishes (its first pin makes the directory).
      const diagnosing = await open(root, { diagnose: true });
      await publishMany(diagnosing, 's2', 1);
      await diagnosing.close();
      expect(readdirSync(join(root, 'checkpoints'))).toEqual([expect.stringMatching(/^[0-9a-f]{64}\.pin$/)]);
      rmSync(join(root, 'checkpoints'), { recursive: true });
      const ledger = await open(root);
      await ledger.close();
      expect(readdirSync(join(root, 'checkpoints'))).toEqual([expect.stringMatching(/^[0-9a-f]{64}\.pin$/)]);
    });
  });
}

suite('embedded', async () => undefined);

describe("embedded: fsck's diagnosing open leaves the blob store's crash leftovers", () => {
  it('a blob staging file in tmp/ and a blob an interrupted gc held in gc-aside/ stay (a notice names them); an ordinary open clears and restores them', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    // Over the inline bound: a blob file.
    const receipt = await ledger.publish(
      { principal: 'alice', session: 's1', run: 'r' },
      { task: 'large', state: 'x'.repeat(100_000), nextSteps: ['n'] },
    );
    await ledger.close();
    const hex = receipt.digest.slice('blake3:'.length);
    const blobPath = join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
    // What a publish killed mid-write and a gc killed while it judged the blob leave.
    const staging = join(root, 'tmp', `${'ab'.repeat(16)}.tmp`);
    writeFileSync(staging, 'half written', { mode: 0o600 });
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(staging, hourAgo, hourAgo);
    const aside = join(root, 'gc-aside', hex);
    renameSync(blobPath, aside);

    const notices = await fsckLeavesEmbedded(root);
    expect(existsSync(staging)).toBe(true);
    expect(existsSync(aside)).toBe(true);
    expect(existsSync(blobPath)).toBe(false);
    const said = notices.join('\n');
    expect(said).toContain(staging);
    expect(said).toContain(aside);

    // An ordinary open: the staging file goes, the blob is linked back at its path.
    ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    expect(ledger.recovery.stagingRemoved).toBe(1);
    expect((await ledger.resume({ principal: 'alice', session: 's1' }))?.id).toBe(receipt.id);
    await ledger.close();
    expect(existsSync(staging)).toBe(false);
    expect(existsSync(aside)).toBe(false);
    expect(existsSync(blobPath)).toBe(true);
  });
});

describe("embedded: fsck's diagnosing open makes none of the blob store's directories", () => {
  const WORK = ['tmp', 'quarantine', 'gc-aside'];
  const large = { task: 'large', state: 'x'.repeat(100_000), nextSteps: ['n'] };
  const scope = { principal: 'alice', session: 's1', run: 'r' };

  it('tmp/, quarantine/ and gc-aside/ removed stay absent, with the same verdict; a publish or an ordinary open makes them', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await ledger.publish(scope, large); // a blob file
    await ledger.close();
    const verdict = async () => {
      const diagnosing = await openLedger({ root, host: 'h1', origin: ORIGIN, diagnose: true, onNotice: () => {} });
      try {
        return await fsck(diagnosing);
      } finally {
        await diagnosing.close();
      }
    };
    const before = await verdict();
    expect(before).toMatchObject({ ok: true, findings: [] });
    for (const dir of WORK) rmSync(join(root, dir), { recursive: true });
    await fsckLeavesEmbedded(root);
    for (const dir of WORK) expect(existsSync(join(root, dir)), dir).toBe(false);
    expect(await verdict()).toEqual(before);
    // A ledger opened to diagnose still publishes: its first blob write makes what it writes through.
    ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, diagnose: true, onNotice: () => {} });
    const second = await ledger.publish(scope, { ...large, task: 'second' });
    expect((await ledger.resume(scope))?.id).toBe(second.id);
    await ledger.close();
    expect(existsSync(join(root, 'tmp'))).toBe(true);
    ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await ledger.close();
    for (const dir of WORK) expect(existsSync(join(root, dir)), dir).toBe(true);
  });

  it('a blob missing with gc-aside/ absent is the same finding as with it there', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    const receipt = await ledger.publish(scope, large);
    await ledger.close();
    const hex = receipt.digest.slice('blake3:'.length);
    rmSync(join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex));
    const findings = async () => {
      const diagnosing = await openLedger({ root, host: 'h1', origin: ORIGIN, diagnose: true, onNotice: () => {} });
      try {
        return await fsck(diagnosing);
      } finally {
        await diagnosing.close();
      }
    };
    const withAside = await findings();
    expect(withAside.ok).toBe(false);
    expect(withAside.findings.length).toBeGreaterThan(0);
    for (const dir of WORK) rmSync(join(root, dir), { recursive: true });
    expect(await findings()).toEqual(withAside);
    for (const dir of WORK) expect(existsSync(join(root, dir)), dir).toBe(false);
  });
});

describe("embedded: fsck's diagnosing open leaves a stopped rotation's staged key files", () => {
  const staged = (root: string) => readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.next'));

  it('stopped before trust.json: the staged files stay (a notice names them), the old keys are read; an ordinary open removes them', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await publishMany(ledger, 's1', 1);
    const key = ledger.keyId;
    await ledger.close();
    for (const f of readdirSync(join(root, 'keys')).filter((n) => n.endsWith('.jwk')))
      writeFileSync(join(root, 'keys', `${f}.next`), JSON.stringify(generateJwk()), { mode: 0o600 });
    const notices = await fsckLeavesEmbedded(root);
    expect(staged(root)).toHaveLength(2);
    for (const f of staged(root)) expect(notices.join('\n')).toContain(join(root, 'keys', f));
    ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    expect(ledger.keyId).toBe(key);
    await ledger.close();
    expect(staged(root)).toEqual([]);
  });

  it('stopped after trust.json: the staged files stay, the new keys trust.json lists are the ones read; an ordinary open moves them in', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await publishMany(ledger, 's1', 1);
    const files = readdirSync(join(root, 'keys')).filter((n) => n.endsWith('.jwk'));
    const before = Object.fromEntries(files.map((f) => [f, readFileSync(join(root, 'keys', f))]));
    const rotated = await ledger.rotateKey();
    await publishMany(ledger, 's2', 1);
    await ledger.close();
    // Stopped between trust.json and moving the staged files into place.
    for (const [f, bytes] of Object.entries(before)) {
      renameSync(join(root, 'keys', f), join(root, 'keys', `${f}.next`));
      writeFileSync(join(root, 'keys', f), bytes, { mode: 0o600 });
    }
    let keyId: string | undefined;
    const notices = await fsckLeavesEmbedded(root, (l) => (keyId = l.keyId));
    expect(keyId).toBe(rotated);
    expect(staged(root)).toHaveLength(2);
    for (const f of staged(root)) expect(notices.join('\n')).toContain(join(root, 'keys', f));
    ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    expect(ledger.keyId).toBe(rotated);
    await ledger.close();
    expect(staged(root)).toEqual([]);
  });
});

describe("embedded: fsck's diagnosing open lists no key in trust.json", () => {
  /** A diagnosing open by the library (createHostKey left as default) and by the CLI: both refused, trust.json kept. */
  async function refusedUnchanged(root: string, named: RegExp): Promise<void> {
    const trust = readFileSync(join(root, 'trust.json'), 'utf8');
    const before = listing(root);
    const err = await openLedger({ root, host: 'h1', origin: ORIGIN, diagnose: true, onNotice: () => {} }).then(
      async (l) => {
        await l.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'KEY_INVALID', message: expect.stringMatching(named) });
    expect((err as Error).message).toMatch(/writes nothing .* trust\.json included/);
    const r = cli(['fsck', '--root', root, '--origin', ORIGIN]);
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.stderr).toContain('KEY_INVALID');
    expect(readFileSync(join(root, 'trust.json'), 'utf8')).toBe(trust);
    expect(listing(root)).toEqual(before);
  }

  it('a checkpoint key file trust.json does not list (a first open stopped before listing it) stays unlisted; an ordinary open lists it', async () => {
    const root = tempDir();
    let ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await publishMany(ledger, 's1', 1);
    await ledger.close();
    const trust = JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as { checkpointKeys?: unknown };
    delete trust.checkpointKeys;
    writeFileSync(join(root, 'trust.json'), JSON.stringify(trust));
    await refusedUnchanged(root, /checkpoint key .* is not listed for this log/);
    ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await ledger.close();
    await fsckLeavesEmbedded(root);
  });

  it('a checkpoint key trust.json lists revoked (a revocation that stopped before its replacement) is not replaced', async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} });
    await publishMany(ledger, 's1', 1);
    await ledger.close();
    const trust = JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as {
      checkpointKeys: Array<{ revokedAt?: string }>;
    };
    trust.checkpointKeys[0]!.revokedAt = new Date().toISOString();
    writeFileSync(join(root, 'trust.json'), JSON.stringify(trust));
    const keys = readdirSync(join(root, 'keys')).sort();
    await refusedUnchanged(root, /checkpoint key .* is listed revoked/);
    expect(readdirSync(join(root, 'keys')).sort()).toEqual(keys);
  });

  it('a host key file trust.json does not list, that signed nothing, stays unlisted', async () => {
    const root = tempDir();
    await (await openLedger({ root, host: 'h1', origin: ORIGIN, onNotice: () => {} })).close();
    const trust = JSON.parse(readFileSync(join(root, 'trust.json'), 'utf8')) as { keys: unknown[] };
    writeFileSync(join(root, 'trust.json'), JSON.stringify({ ...trust, keys: [] }));
    await refusedUnchanged(root, /host's key .* is not listed/);
  });
});

/** fsck of an embedded root by the library, then by the CLI: the root's listing unchanged after each. */
async function fsckLeavesEmbedded(root: string, look: (ledger: Ledger) => void = () => {}): Promise<string[]> {
  const before = listing(root);
  const notices: string[] = [];
  const ledger = await openLedger({
    root,
    host: 'h1',
    origin: ORIGIN,
    diagnose: true,
    onNotice: (m) => notices.push(m),
  });
  try {
    look(ledger);
    expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
    expect(ledger.recovery.stagingRemoved).toBe(0);
  } finally {
    await ledger.close();
  }
  expect(listing(root)).toEqual(before);
  const r = cli(['fsck', '--root', root, '--origin', ORIGIN]);
  expect(r.code, r.stderr).toBe(0);
  expect(listing(root)).toEqual(before);
  return notices;
}

let databases = 0;
describePostgres('fsck on PostgreSQL', (pg) => {
  suite('postgres', () => pg.cluster.createDatabase(`fsck_writes_nothing_${databases++}`));
});
