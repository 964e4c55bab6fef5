/**
 * `witness serve` refuses a key file or logs file it cannot use before it listens (exit 1, the code on stderr,
 * no state directory made), and a port it cannot listen on before it makes its state directory; the witness state
 * refuses a compare-and-swap from a size it no longer holds; createWitnessServer refuses a body limit out of range.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { createWitnessKeyFile } from '../../src/witness/key.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { MAX_WITNESS_LOGS_BYTES } from '../../src/witness/logs.js';
import { WitnessState } from '../../src/witness/state.js';
import { captureIo } from '../support/capture-io.js';
import { tempDir } from '../support/tmp.js';
import { HandLog, noteSigner } from './support.js';

const log = new HandLog('example.com/witnessed', 3);

/** A directory with a valid witness key (0600) and a valid logs file. */
async function setup() {
  const dir = tempDir();
  const key = join(dir, 'witness.key');
  await createWitnessKeyFile(key, 'witness.example/w1');
  const logs = join(dir, 'logs.json');
  writeFileSync(logs, JSON.stringify({ logs: [{ origin: log.origin, keys: [log.vkey] }] }));
  return { dir, key, logs, state: join(dir, 'state') };
}

async function serve(s: { key: string; logs: string; state: string }, listen = '127.0.0.1:0') {
  const c = captureIo();
  const code = await main(
    ['witness', 'serve', '--listen', listen, '--key', s.key, '--logs', s.logs, '--state', s.state],
    c.io,
  );
  return { code, stdout: c.stdout(), stderr: c.stderr() };
}

/** Rewrites a file in place (its mode stays). */
const rewrite = (path: string, text: string) => writeFileSync(path, text);

describe('witness serve refuses', () => {
  it('a port that cannot be listened on (in use): USAGE, exit 2, nothing on stdout', async () => {
    const s = await setup();
    const taken = createServer();
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
    const { port } = taken.address() as AddressInfo;
    try {
      const r = await serve(s, `127.0.0.1:${port}`);
      expect(r).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toBe(`handoff-ledger: USAGE: cannot listen on "127.0.0.1:${port}": EADDRINUSE\n`);
      // A refused start leaves nothing behind: the state directory is made only once the port is the witness's.
      expect(existsSync(s.state)).toBe(false);
    } finally {
      await new Promise((done) => taken.close(done));
    }
  });

  it('a state directory it cannot make once it listens: the code, exit 1, nothing on stdout, the port free again', async () => {
    const s = await setup();
    // The state's parent is a file: the directory cannot be made (its refusal comes after the port was taken).
    writeFileSync(join(s.dir, 'file'), '');
    const state = join(s.dir, 'file', 'state');
    const free = createServer();
    await new Promise<void>((done) => free.listen(0, '127.0.0.1', done));
    const { port } = free.address() as AddressInfo;
    await new Promise((done) => free.close(done));
    const r = await serve({ ...s, state }, `127.0.0.1:${port}`);
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.stderr).toMatch(/^handoff-ledger: [A-Z_]+: /);
    expect(r.stdout).toBe('');
    const refused = await new Promise<string | undefined>((done) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), done(undefined)));
      socket.once('error', (err: NodeJS.ErrnoException) => done(err.code));
    });
    expect(refused).toBe('ECONNREFUSED');
  });

  it('a witness key file whose name is not a note key name, or that is not JSON, or not a key (KEY_INVALID)', async () => {
    for (const change of [
      (jwk: Record<string, unknown>) => JSON.stringify({ ...jwk, name: 'not a name' }),
      (jwk: Record<string, unknown>) => JSON.stringify({ ...jwk, name: undefined }),
      (jwk: Record<string, unknown>) => JSON.stringify({ ...jwk, d: undefined }),
      () => '{"name": "witness.example/w1",',
    ]) {
      const s = await setup();
      rewrite(s.key, change(JSON.parse(readFileSync(s.key, 'utf8')) as Record<string, unknown>));
      const r = await serve(s);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^handoff-ledger: KEY_INVALID: /);
      expect(r.stdout).toBe('');
      expect(existsSync(s.state)).toBe(false);
    }
  });

  it('a witness key file that group or others can read (KEY_FILE_UNSAFE)', async () => {
    const s = await setup();
    chmodSync(s.key, 0o644);
    const r = await serve(s);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^handoff-ledger: KEY_FILE_UNSAFE: .*mode 644/);
    expect(existsSync(s.state)).toBe(false);
  });

  it('a logs file that is not JSON, not the logs shape, or lists an origin twice (INVALID_ARGUMENT)', async () => {
    const entry = { origin: log.origin, keys: [log.vkey] };
    for (const [text, message] of [
      ['{"logs": [', /not JSON/],
      [JSON.stringify([entry]), /the logs file: /],
      [JSON.stringify({ logs: [{ origin: log.origin }] }), /the logs file: /],
      [JSON.stringify({ logs: [{ origin: log.origin, keys: ['not a key'] }] }), /the logs file: /],
      [JSON.stringify({ logs: [entry, entry] }), /twice/],
    ] as const) {
      const s = await setup();
      rewrite(s.logs, text);
      const r = await serve(s);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/^handoff-ledger: INVALID_ARGUMENT: /);
      expect(r.stderr).toMatch(message);
      expect(existsSync(s.state)).toBe(false);
    }
  });

  it('a logs file over 16 MiB, or one that is not a regular file (a device, a directory, a FIFO), as USAGE before reading it whole', async () => {
    const s = await setup();
    // Sparse: a file of any size costs nothing to make; read whole, it was parsed (INVALID_ARGUMENT, exit 1).
    writeFileSync(s.logs, '');
    truncateSync(s.logs, MAX_WITNESS_LOGS_BYTES + 1);
    let r = await serve(s);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe(
      `handoff-ledger: USAGE: --logs "${s.logs}": ${MAX_WITNESS_LOGS_BYTES + 1} bytes, over ${MAX_WITNESS_LOGS_BYTES}\n`,
    );
    expect(existsSync(s.state)).toBe(false);
    // At the bound it is read (and is no JSON).
    truncateSync(s.logs, MAX_WITNESS_LOGS_BYTES);
    r = await serve(s);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^handoff-ledger: INVALID_ARGUMENT: the logs file is not JSON/);
    // /dev/zero was read for ~630 MB before it failed; a FIFO with no writer was waited on for ever.
    const fifo = join(s.dir, 'logs.fifo');
    execFileSync('mkfifo', [fifo]);
    const dir = join(s.dir, 'logs.d');
    mkdirSync(dir);
    for (const logs of ['/dev/zero', dir, fifo]) {
      r = await serve({ ...s, logs });
      expect(r, logs).toMatchObject({
        code: 2,
        stdout: '',
        stderr: `handoff-ledger: USAGE: --logs "${logs}": not a regular file\n`,
      });
      expect(existsSync(s.state)).toBe(false);
    }
  });

  it('reports an error with no code as a bug (internal error, exit 70), not USAGE, and stops listening', async () => {
    const s = await setup();
    const free = createServer();
    await new Promise<void>((done) => free.listen(0, '127.0.0.1', done));
    const { port } = free.address() as AddressInfo;
    await new Promise((done) => free.close(done));
    const c = captureIo();
    // A bug once it listens: the line saying where it listens throws.
    const stdout = new Writable({
      write() {
        throw new TypeError("Cannot read properties of undefined (reading 'x')");
      },
    });
    const argv = [
      'witness',
      'serve',
      '--listen',
      `127.0.0.1:${port}`,
      '--key',
      s.key,
      '--logs',
      s.logs,
      '--state',
      s.state,
    ];
    expect(await main(argv, { ...c.io, stdout })).toBe(70);
    // (after the line saying its state is new: the state opens before the address is printed)
    expect(c.stderr()).toMatch(
      /^witness: a new state in .*\nhandoff-ledger: internal error: TypeError: Cannot read properties .*\n {4}at /,
    );
    // The port is free again (a server left listening would keep the process running), and so is the state.
    const refused = await new Promise<string | undefined>((done) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), done(undefined)));
      socket.once('error', (err: NodeJS.ErrnoException) => done(err.code));
    });
    expect(refused).toBe('ECONNREFUSED');
    const state = await WitnessState.open(s.state);
    await state.close();
  });
});

describe('witness state', () => {
  it('refuses a put from a size it does not hold (CHAIN_CONFLICT), keeping the tree it holds', async () => {
    const dir = join(tempDir(), 'state');
    const leaves = HandLog.leaves('l', 3);
    const tree = (n: number) => ({ size: n, root: log.root(leaves.slice(0, n)), note: `note ${n}` });
    let state = await WitnessState.open(dir);
    try {
      await expect(state.put(log.origin, 1, tree(2))).rejects.toMatchObject({ code: 'CHAIN_CONFLICT' });
      expect(await state.get(log.origin)).toBeUndefined();
      // The origin is any checkpoint origin (a C1 control, a bidi override): quoted escaped, as every refusal quotes one.
      const odd = 'example.com/\u202elog\u0085';
      await expect(state.put(odd, 1, tree(2))).rejects.toMatchObject({
        code: 'CHAIN_CONFLICT',
        message: `the witness's view of "example.com/\\u202elog\\u0085" changed while it was checked`,
      });
      await state.put(log.origin, 0, tree(2));
      for (const stale of [0, 1, 3])
        await expect(state.put(log.origin, stale, tree(3))).rejects.toMatchObject({ code: 'CHAIN_CONFLICT' });
      expect((await state.get(log.origin))?.size).toBe(2);
    } finally {
      await state.close();
    }
    state = await WitnessState.open(dir);
    try {
      expect(await state.get(log.origin)).toMatchObject({ size: 2, note: 'note 2' });
    } finally {
      await state.close();
    }
  });

  it('removes at open the staging files a crash left: a state write in logs/, an old lock creation beside them', async () => {
    const dir = join(tempDir(), 'state');
    await (await WitnessState.open(dir)).close();
    const write = join(dir, 'logs', '.0123456789abcdef.tmp');
    const oldLock = join(dir, 'witness.lock.0123456789abcdef.tmp');
    const freshLock = join(dir, 'witness.lock.fedcba9876543210.tmp'); // another process making its lock now
    for (const path of [write, oldLock, freshLock]) writeFileSync(path, 'left by a crash');
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(oldLock, hourAgo, hourAgo);
    const state = await WitnessState.open(dir);
    try {
      expect([write, oldLock, freshLock].map((p) => existsSync(p))).toEqual([false, false, true]);
    } finally {
      await state.close();
    }
  });
});

describe('createWitnessServer refuses', () => {
  it('a maxBodyBytes that is not a whole number of bytes from 1 to 2^53 − 1 (INVALID_ARGUMENT, the value shown)', async () => {
    const state = await WitnessState.open(join(tempDir(), 'state'));
    const server = (maxBodyBytes: unknown) =>
      createWitnessServer({
        signer: noteSigner('witness.example/w1', new Uint8Array(32).fill(1)),
        logs: new Map(),
        state,
        maxBodyBytes: maxBodyBytes as number,
      });
    try {
      // NaN and Infinity took any body (no size is over them), 0 and below refused every one (413), a string
      // compared as a number or not at all: each is refused as the other options are.
      for (const [value, shown] of [
        [NaN, 'NaN'],
        [Infinity, 'Infinity'],
        [0, '0'],
        [-1, '-1'],
        [1024.5, '1024.5'],
        [2 ** 53, String(2 ** 53)],
        ['65536', '"65536"'],
        [true, 'true'],
        [{}, 'an object'],
      ] as const)
        expect(() => server(value), String(value)).toThrow(
          expect.objectContaining({
            code: 'INVALID_ARGUMENT',
            message: `maxBodyBytes must be a whole number of bytes from 1 to ${Number.MAX_SAFE_INTEGER}, got ${shown}`,
          }),
        );
      // The bounds, and null or undefined for the default (64 KiB), as for every option.
      for (const value of [1, Number.MAX_SAFE_INTEGER, null, undefined]) server(value);
    } finally {
      await state.close();
    }
  });
});
