/**
 * A witness shutting down while an add-checkpoint is still signing or writing: the state directory's lock is released
 * only once the write has settled (a witness restarted on the directory meanwhile could cosign tree B, and the old
 * process's late write would put tree A back over it), a write asked for after close is refused, and a request whose
 * connection closed while it was being signed stores nothing.
 */
import { existsSync, readdirSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nobleSign } from '../../manifests/crypto/ed25519.js';
import type { NoteSigner } from '../../manifests/crypto/note.js';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { tempDir } from '../support/tmp.js';
import { HandLog, noteSigner } from './support.js';

/** While set, the next atomic write waits for `hold` before it begins; `started` says it was asked for. */
const gate: { hold?: Promise<void>; started?: () => void } = {};

vi.mock('../../store/fs/atomic-file.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../store/fs/atomic-file.js')>();
  return {
    ...real,
    writeFileAtomic: async (...args: Parameters<typeof real.writeFileAtomic>) => {
      const hold = gate.hold;
      gate.hold = undefined;
      gate.started?.();
      if (hold) await hold;
      return real.writeFileAtomic(...args);
    },
  };
});

afterEach(() => {
  gate.hold = undefined;
  gate.started = undefined;
});

const log = new HandLog('witness-close.example/log', 11);
const leaves = HandLog.leaves('c', 20);
const tree = (n: number) => ({ size: n, root: log.root(leaves.slice(0, n)), note: `note ${n}` });

/**
 * A witness server over a fresh state whose signer waits: `signed` once it was asked to sign, and it answers once
 * `finish()` is called.
 */
async function slowSigningWitness(name: string, seedByte: number) {
  const dir = join(tempDir(), 'state');
  const state = await WitnessState.open(dir);
  const seed = new Uint8Array(32).fill(seedByte);
  let signing!: () => void;
  const signed = new Promise<void>((r) => (signing = r));
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const slow: NoteSigner = {
    ...noteSigner(name, seed),
    sign: async (m) => {
      signing();
      await finished;
      return nobleSign(m, seed);
    },
  };
  const server = createWitnessServer({
    signer: slow,
    logs: new Map([[log.origin, [parseVerifierKey(log.vkey)]]]),
    state,
  });
  return { dir, state, signed, finish, server };
}

describe('witness state close', () => {
  it('releases the lock only after a write under way has settled, and refuses a write after it (CLOSED)', async () => {
    const dir = join(tempDir(), 'state');
    const state = await WitnessState.open(dir);
    let release!: () => void;
    gate.hold = new Promise<void>((r) => (release = r));
    const started = new Promise<void>((r) => (gate.started = r));
    const put = state.put(log.origin, 0, tree(8));
    await started;
    let closed = false;
    const closing = state.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(closed).toBe(false);
    expect(existsSync(join(dir, 'witness.lock'))).toBe(true);
    await expect(state.put(log.origin, 8, tree(20))).rejects.toMatchObject({ code: 'CLOSED' });
    release();
    await put;
    await closing;
    expect(existsSync(join(dir, 'witness.lock'))).toBe(false);
    const again = await WitnessState.open(dir);
    try {
      expect(await again.get(log.origin)).toMatchObject({ size: 8, note: 'note 8' });
    } finally {
      await again.close();
    }
  });

  it('stores nothing for a request whose connection closed while it was being signed', async () => {
    // A slow signing device: it answers once the test has closed the connection (a 300 ms sleep stood for it, and a
    // loaded machine closing later than that let the request complete and its state be stored).
    const { dir, state, signed, finish, server } = await slowSigningWitness('witness.example/slow', 12);
    // The server's side of each connection closed: what the handler's check after the signer sees.
    const sockets: Promise<void>[] = [];
    server.on('connection', (socket: Socket) => sockets.push(new Promise((r) => socket.once('close', () => r()))));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const abort = new AbortController();
      const request = fetch(`${url}/add-checkpoint`, {
        method: 'POST',
        body: await log.request(0, leaves.slice(0, 8)),
        signal: abort.signal,
      }).catch(() => undefined);
      await signed;
      // What `witness serve` does on SIGTERM: every connection closed, then the handlers drained.
      server.closeAllConnections();
      abort.abort();
      await request;
      await Promise.all(sockets);
      finish();
      await new Promise<void>((r) => server.close(() => r()));
      await server.settled();
      expect(readdirSync(join(dir, 'logs'))).toEqual([]);
      expect(await state.get(log.origin)).toBeUndefined();
    } finally {
      await state.close();
    }
  });

  it('stores nothing for a request whose signer returns in the same turn as the witness closed its connections', async () => {
    // What `witness serve` does on SIGTERM is `closeAllConnections()`: each socket is destroyed at once, but its
    // response is marked destroyed only when the socket's close is emitted, a turn of the event loop later. A signer
    // (a device, an agent) whose answer lands in between must not have its tree stored: the connection is gone.
    const { dir, state, signed, finish, server } = await slowSigningWitness('witness.example/same-turn', 14);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const request = fetch(`${url}/add-checkpoint`, {
        method: 'POST',
        body: await log.request(0, leaves.slice(0, 8)),
      }).catch(() => undefined);
      await signed;
      // In one synchronous step: the handler's check after the signer runs in the microtasks that follow, before any
      // socket's close can be emitted, however loaded the machine is.
      server.closeAllConnections();
      finish();
      expect(await request).toBeUndefined();
      await new Promise<void>((r) => server.close(() => r()));
      await server.settled();
      expect(readdirSync(join(dir, 'logs'))).toEqual([]);
      expect(await state.get(log.origin)).toBeUndefined();
    } finally {
      await state.close();
    }
  });

  it('a server given its state still opening: a request waits for it, and one whose opening failed is answered 500', async () => {
    const dir = join(tempDir(), 'state');
    let open!: () => void;
    const opening = new Promise<void>((r) => (open = r)).then(() => WitnessState.open(dir));
    // Fails before any request comes, with no handler of the caller's: the server's own (an unhandled rejection
    // would end the process).
    const failed = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('the state could not be opened')), 20),
    );
    const logs = new Map([[log.origin, [parseVerifierKey(log.vkey)]]]);
    const signer = noteSigner('witness.example/w', new Uint8Array(32).fill(13));
    const servers = [
      createWitnessServer({ signer, logs, state: opening }),
      createWitnessServer({ signer, logs, state: failed }),
    ];
    for (const server of servers) await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = (i: number) => `http://127.0.0.1:${(servers[i]!.address() as AddressInfo).port}`;
    try {
      let answered = false;
      const request = fetch(`${url(0)}/add-checkpoint`, {
        method: 'POST',
        body: await log.request(0, leaves.slice(0, 8)),
      }).then((res) => ((answered = true), res));
      await new Promise((r) => setTimeout(r, 200));
      expect(answered).toBe(false);
      open();
      expect((await request).status).toBe(200);
      expect(await (await opening).get(log.origin)).toMatchObject({ size: 8 });
      const refused = await fetch(`${url(1)}/add-checkpoint`, {
        method: 'POST',
        body: await log.request(0, leaves.slice(0, 8)),
      });
      expect(refused.status).toBe(500);
    } finally {
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
        await server.settled();
      }
      await (await opening).close();
    }
  });
});
