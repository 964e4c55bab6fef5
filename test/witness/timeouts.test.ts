/**
 * Delays are bounded to what a Node timer keeps (1 to 2^31 − 1 ms): a longer one fires after 1 ms, so a deadline of a
 * month aborted every witness request at once and `witness serve` answered every request 408. The CLI refuses such an
 * option (USAGE), the library such an option (INVALID_ARGUMENT, before the store is touched), and the longest deadline
 * allowed is kept as long as it says.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { main } from '../../src/cli/main.js';
import { openLedger } from '../../src/ledger/open.js';
import { WitnessPool } from '../../src/ledger/witnessing.js';
import { createWitnessKeyFile } from '../../src/witness/key.js';
import { createWitnessServer } from '../../src/witness/server.js';
import { WitnessState } from '../../src/witness/state.js';
import { captureIo } from '../support/capture-io.js';
import { tempDir } from '../support/tmp.js';
import { HandLog, noteSigner } from './support.js';

const MAX = 2 ** 31 - 1;
const log = new HandLog('example.com/timeouts', 4);

describe('witness delays out of a timer’s range', () => {
  it('witness serve refuses --request-timeout-ms above 2^31 − 1 (USAGE, exit 2) before it listens', async () => {
    const dir = tempDir();
    const key = join(dir, 'witness.key');
    await createWitnessKeyFile(key, 'witness.example/w1');
    const logs = join(dir, 'logs.json');
    writeFileSync(logs, JSON.stringify({ logs: [{ origin: log.origin, keys: [log.vkey] }] }));
    for (const value of [String(MAX + 1), '99999999999']) {
      const c = captureIo();
      // The old code listened instead (and would have answered every request 408): it printed its address, which this
      // waits for alongside the exit, where a race against 5 s stood for it (and lost on a loaded machine).
      let printed!: () => void;
      const listening = new Promise<'listening'>((resolve) => (printed = () => resolve('listening')));
      const write = c.io.stdout.write.bind(c.io.stdout);
      c.io.stdout.write = ((...args: Parameters<typeof write>) => {
        printed();
        return write(...args);
      }) as typeof write;
      const argv = ['witness', 'serve', '--listen', '127.0.0.1:0', '--key', key, '--logs', logs];
      const served = main([...argv, '--state', join(dir, 'state'), '--request-timeout-ms', value], c.io);
      const code = await Promise.race([served, listening]);
      // Stopped as Ctrl-C stops it, should it have listened.
      if (code === 'listening') process.emit('SIGINT', 'SIGINT');
      expect(code, c.stdout()).toBe(2);
      expect(c.stderr()).toBe(
        `handoff-ledger: USAGE: --request-timeout-ms must be a whole number of milliseconds from 1 to ${MAX}, not "${value}"\n`,
      );
      expect(c.stdout()).toBe('');
    }
  });

  it('createWitnessServer refuses requestTimeoutMs out of 1 to 2^31 − 1 (INVALID_ARGUMENT)', async () => {
    const state = await WitnessState.open(join(tempDir(), 'state'));
    try {
      for (const requestTimeoutMs of [MAX + 1, 0, -5, NaN, 1500.5])
        expect(() =>
          createWitnessServer({
            signer: noteSigner('witness.example/w1', new Uint8Array(32).fill(1)),
            logs: new Map(),
            state,
            requestTimeoutMs,
          }),
        ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    } finally {
      await state.close();
    }
  });

  it('openLedger refuses witnesses.timeoutMs and retryMs out of 1 to 2^31 − 1 (INVALID_ARGUMENT), the store untouched', async () => {
    for (const bad of [
      { timeoutMs: MAX + 1 },
      { timeoutMs: 0 },
      { timeoutMs: -1 },
      { timeoutMs: NaN },
      { retryMs: NaN },
    ]) {
      const root = join(tempDir(), 'store');
      await expect(
        openLedger({ root, host: 'h', witnesses: { witnesses: ['http://127.0.0.1:1'], ...bad } }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('witnesses.') });
      expect(existsSync(root)).toBe(false);
    }
    // null is the default, as for every option.
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({
      root,
      host: 'h',
      witnesses: { witnesses: [], ...({ timeoutMs: null, retryMs: null } as Record<string, unknown>) },
    });
    await ledger.close();
  });

  it('keeps the longest deadline allowed: checkpoint() waits for a silent witness instead of returning at once', async () => {
    const server: Server = createServer((req) => req.resume()); // and never answer
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pool = await WitnessPool.open({
      // closeWaitMs 0: the close does not wait for the silent witness (its default wait would be 5 s).
      options: { witnesses: [url], timeoutMs: MAX, retryMs: MAX, closeWaitMs: 0 },
      checkpointStem: join(tempDir(), 'stem'),
      proof: async () => [],
      notice: () => {},
      checkpointKeys: () => [parseVerifierKey(log.vkey)],
    });
    try {
      const leaves = HandLog.leaves('t', 2);
      const note = await log.note(leaves);
      const cp = { note, checkpoint: parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)) };
      let returned = false;
      const arrived = new Promise((resolve) => server.once('request', resolve));
      void pool.cosign(cp).then(() => (returned = true));
      // cosign arms its bound before the request goes out: a bound cut to 1 ms (a delay past 2^31 − 1) has fired
      // before a timer armed once the request arrived fires (Node runs timers in the order they are due), however
      // slow the machine, where a race against 500 ms stood for it.
      await arrived;
      await new Promise((r) => setTimeout(r, 50));
      expect(returned, 'checkpoint() returned at once').toBe(false);
    } finally {
      await pool.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
