/**
 * readPrivateKeyFile and the keyring's read of trust.json judge and read their file through one descriptor
 * (store/fs/bounded-read.ts): a file swapped in at the path after the checks is not what is read, a FIFO is refused
 * without waiting for a writer, an oversized file is refused before it is read, and a symlink, a directory, a socket,
 * a file open to others are refused as before.
 */
import { chmodSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { generateJwk, keyFileIoFailure, readPrivateKeyFile } from '../src/keys/local-signer.js';
import { quoted } from '../manifests/encoding/printable.js';
import { readRegularFile } from '../src/cli/io.js';
import { openLedger } from '../src/ledger/open.js';
import { tempDir } from './support/tmp.js';
import { ENDS_AT_SIGNAL_MS } from './support/settled.js';

/**
 * Run once, right after the first lstat or open of `path` returns (past the first `skip` of them): the swap of the test
 * that sets it.
 */
const swap = vi.hoisted(() => ({ path: '', skip: 0, then: undefined as undefined | (() => void) }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const after = <T>(path: unknown, result: T): T => {
    const then = swap.then;
    if (then && String(path) === swap.path && swap.skip-- <= 0) {
      swap.then = undefined;
      then();
    }
    return result;
  };
  const lstat = (async (path: string, ...rest: never[]) =>
    after(path, await real.lstat(path, ...rest))) as typeof real.lstat;
  const open = (async (path: string, ...rest: never[]) =>
    after(path, await real.open(path, ...rest))) as typeof real.open;
  return { ...real, default: { ...real, lstat, open }, lstat, open };
});

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => 'read',
    (err: { code?: string; message?: string }) => `${err.code}: ${err.message}`,
  );

function keyFile(
  dir: string,
  name: string,
  jwk = generateJwk(),
): { path: string; jwk: ReturnType<typeof generateJwk> } {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(jwk), { mode: 0o600 });
  return { path, jwk };
}

describe('readPrivateKeyFile reads the file it checked', () => {
  it('a key file replaced by a symlink to another key right after the first look at it: the checked file is read', async () => {
    const dir = tempDir();
    const mine = keyFile(dir, 'host.jwk');
    const theirs = keyFile(dir, 'planted.jwk');
    swap.path = mine.path;
    swap.then = () => {
      symlinkSync(theirs.path, join(dir, 'swap'));
      renameSync(join(dir, 'swap'), mine.path);
    };
    try {
      expect(await readPrivateKeyFile(mine.path)).toEqual(mine.jwk);
      expect(swap.then).toBeUndefined(); // the swap happened
    } finally {
      swap.then = undefined;
    }
    // Read again now, the symlink standing at the name is refused as it always was.
    expect(await refusal(readPrivateKeyFile(mine.path))).toBe(
      `KEY_FILE_UNSAFE: key file "${mine.path}" is not a regular file`,
    );
  });

  it('a key file replaced by a large file right after the first look at it: the checked file is read', async () => {
    const dir = tempDir();
    const mine = keyFile(dir, 'host.jwk');
    swap.path = mine.path;
    swap.then = () => {
      writeFileSync(join(dir, 'big'), Buffer.alloc(8 << 20, 0x20), { mode: 0o600 });
      renameSync(join(dir, 'big'), mine.path);
    };
    try {
      expect(await readPrivateKeyFile(mine.path)).toEqual(mine.jwk);
    } finally {
      swap.then = undefined;
    }
    expect(await refusal(readPrivateKeyFile(mine.path))).toBe(
      `KEY_INVALID: key file "${mine.path}" is ${8 << 20} bytes, over 65536: not a key`,
    );
  });

  it('a FIFO is refused at once (no writer is waited for), as a directory and a socket are', async () => {
    const dir = tempDir();
    const fifo = join(dir, 'fifo.jwk');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    // A read that waited for a writer would wait for ever (none comes): given as long as a wait that must end is.
    const timeout = new Promise<string>((r) => setTimeout(() => r('waited'), ENDS_AT_SIGNAL_MS).unref());
    expect(await Promise.race([refusal(readPrivateKeyFile(fifo)), timeout])).toBe(
      `KEY_FILE_UNSAFE: key file "${fifo}" is not a regular file`,
    );
    const sub = join(dir, 'sub.jwk');
    mkdirSync(sub, { mode: 0o700 });
    expect(await refusal(readPrivateKeyFile(sub))).toBe(`KEY_FILE_UNSAFE: key file "${sub}" is not a regular file`);
    const socket = join(dir, 's.jwk');
    const server = createServer();
    await new Promise<void>((r) => server.listen(socket, r));
    try {
      chmodSync(socket, 0o600);
      expect(await refusal(readPrivateKeyFile(socket))).toBe(
        `KEY_FILE_UNSAFE: key file "${socket}" is not a regular file`,
      );
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('a symlink (to a good key, or to nothing) is refused; no file is ENOENT; a file open to others or too large is refused', async () => {
    const dir = tempDir();
    const good = keyFile(dir, 'good.jwk');
    for (const [name, target] of [
      ['link.jwk', good.path],
      ['dangling.jwk', join(dir, 'nowhere')],
    ] as const) {
      symlinkSync(target, join(dir, name));
      expect(await refusal(readPrivateKeyFile(join(dir, name)))).toBe(
        `KEY_FILE_UNSAFE: key file "${join(dir, name)}" is not a regular file`,
      );
    }
    await expect(readPrivateKeyFile(join(dir, 'missing.jwk'))).rejects.toMatchObject({ code: 'ENOENT' });
    chmodSync(good.path, 0o640);
    expect(await refusal(readPrivateKeyFile(good.path))).toMatch(
      /^KEY_FILE_UNSAFE: .*accessible by group or others \(mode 640\)/,
    );
    const big = join(dir, 'big.jwk');
    writeFileSync(big, Buffer.alloc(64 * 1024 + 1, 0x20), { mode: 0o600 });
    expect(await refusal(readPrivateKeyFile(big))).toBe(
      `KEY_INVALID: key file "${big}" is 65537 bytes, over 65536: not a key`,
    );
    writeFileSync(big, Buffer.alloc(64 * 1024, 0x20), { mode: 0o600 });
    expect(await refusal(readPrivateKeyFile(big))).toMatch(/^KEY_INVALID: key file .* is not JSON$/);
  });
});

describe('trust.json is read through the descriptor it was judged on', () => {
  it('a trust.json replaced right after the first look at it at an open: the checked file is read, the open goes on', async () => {
    const root = tempDir();
    await (await openLedger({ root, host: 'h', onNotice: () => {} })).close();
    const trustPath = join(root, 'trust.json');
    const planted = join(root, 'planted');
    writeFileSync(planted, '{ not a trust file', { mode: 0o600 });
    swap.path = trustPath;
    // The open's first look at the name is whether the root is a store at all (a root inside another store's is
    // refused); the swap comes right after the keyring's own look, the one its read must hold to.
    swap.skip = 1;
    swap.then = () => renameSync(planted, trustPath);
    try {
      const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
      await ledger.close();
      expect(swap.then).toBeUndefined(); // the swap happened
    } finally {
      swap.then = undefined;
    }
    // What stands at the name now is refused, as it always was.
    expect(await refusal(openLedger({ root, host: 'h', onNotice: () => {} }))).toMatch(/^TRUST_INVALID: /);
  });
});

describe('readRegularFile (the CLI: witness serve --logs) shares the one-descriptor read', () => {
  it('reads a file through a symlink, refuses a FIFO at once, a directory and a larger file', async () => {
    const dir = tempDir();
    const file = join(dir, 'logs.json');
    writeFileSync(file, '{"logs":[]}');
    symlinkSync(file, join(dir, 'link.json'));
    expect((await readRegularFile(join(dir, 'link.json'), 64)).toString()).toBe('{"logs":[]}');
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    // A read that waited for a writer would wait for ever (none comes): given as long as a wait that must end is.
    const timeout = new Promise<string>((r) => setTimeout(() => r('waited'), ENDS_AT_SIGNAL_MS).unref());
    expect(await Promise.race([refusal(readRegularFile(fifo, 64)), timeout])).toBe('undefined: not a regular file');
    expect(await refusal(readRegularFile(dir, 64))).toBe('undefined: not a regular file');
    expect(await refusal(readRegularFile(file, 5))).toBe('undefined: 11 bytes, over 5');
  });
});

describe('keyFileIoFailure', () => {
  it('names an errno failure by its code, not by its message, which repeats the path raw', () => {
    const path = '/k\u001b\\u001b.jwk';
    const err = Object.assign(new Error(`EIO: i/o error, read '${path}'`), { code: 'EIO', errno: -5, syscall: 'read' });
    expect(keyFileIoFailure(err, `cannot read key file ${quoted(path)}`)).toMatchObject({
      code: 'STORAGE_FAILED',
      message: 'cannot read key file "/k\\u001b\\\\u001b.jwk": EIO (i/o error)',
      cause: err,
    });
  });
});
