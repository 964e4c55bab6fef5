/**
 * How many keys a witness's logs.json may list for one log. The key rotation runbook adds a ledger's new checkpoint
 * key beside the old one at every rotation (of every host that signs the store's checkpoints): a witness restarted
 * after a host's 16th rotation (17 keys) refused to start with a bare schema message. It now takes up to
 * MAX_WITNESS_LOG_KEYS (256) and refuses more by naming the log and which keys may go.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkCosignatures, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { encodeVerifierKey } from '../../manifests/crypto/note.js';
import { main } from '../../src/cli/main.js';
import { openLedger } from '../../src/ledger/open.js';
import { createWitnessKeyFile } from '../../src/witness/key.js';
import { MAX_WITNESS_LOG_KEYS, parseWitnessLogs } from '../../src/witness/logs.js';
import { captureIo } from '../support/capture-io.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { noteSigner, startWitness, stopWitness } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-witness-keys-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** `n` distinct note verifier keys of `origin`, each as `keys vkey` prints one. */
const vkeys = (origin: string, n: number) =>
  Array.from({ length: n }, (_, i) => {
    const seed = new Uint8Array(32);
    new DataView(seed.buffer).setUint32(0, i + 1);
    return encodeVerifierKey(origin, noteSigner(origin, seed).publicKey);
  });

describe("a witness's keys of one log", () => {
  it('after 16 rotations of the host (17 checkpoint keys in logs.json, as the runbook adds them) the witness starts and cosigns', async () => {
    const root = join(base, 'store');
    const origin = 'example.com/rotated-ledger';
    let ledger = await openLedger({ root, host: 'host-r', origin, onNotice: () => {} });
    const keys = [ledger.checkpointVerifierKey];
    for (let i = 0; i < 16; i++) {
      await ledger.rotateKey();
      keys.push(ledger.checkpointVerifierKey);
    }
    await ledger.close();
    expect(new Set(keys).size).toBe(17);
    const w = await startWitness(join(base, 'w'), 'witness.example/w', [{ origin, keys }]);
    try {
      ledger = await openLedger({
        root,
        host: 'host-r',
        origin,
        witnesses: { witnesses: [w.url], timeoutMs: 5000 },
        onNotice: () => {},
      });
      await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(1));
      const { note } = await ledger.checkpoint();
      expect(checkCosignatures(note, [parseCosignerKey(w.vkey)]).valid.map((c) => c.name)).toEqual([
        'witness.example/w',
      ]);
      await ledger.close();
    } finally {
      await stopWitness(w);
    }
  }, 60_000);

  it(`${MAX_WITNESS_LOG_KEYS} keys are read; one more is refused before the witness listens, naming the log and which keys may go`, async () => {
    const origin = 'example.com/crowded';
    expect(MAX_WITNESS_LOG_KEYS).toBe(256);
    const all = vkeys(origin, MAX_WITNESS_LOG_KEYS + 1);
    const other = { origin: 'example.com/other', keys: vkeys('example.com/other', 1) };
    const read = parseWitnessLogs(
      JSON.stringify({ logs: [other, { origin, keys: all.slice(0, MAX_WITNESS_LOG_KEYS) }] }),
    );
    expect(read.get(origin)).toHaveLength(MAX_WITNESS_LOG_KEYS);

    const dir = tempDir();
    const key = join(dir, 'witness.key');
    await createWitnessKeyFile(key, 'witness.example/w1');
    const logs = join(dir, 'logs.json');
    writeFileSync(logs, JSON.stringify({ logs: [other, { origin, keys: all }] }));
    const c = captureIo();
    const code = await main(
      ['witness', 'serve', '--listen', '127.0.0.1:0', '--key', key, '--logs', logs, '--state', join(dir, 'state')],
      c.io,
    );
    expect(code, c.stderr()).toBe(1);
    expect(c.stdout()).toBe('');
    expect(c.stderr()).toBe(
      `handoff-ledger: INVALID_ARGUMENT: the logs file lists 257 keys for the log "example.com/crowded", more than ` +
        'the 256 a log may list: keep the key each host of the log signs checkpoints with now (`handoff-ledger keys ' +
        'vkey` on each host) and the one a rotation replaced until this witness has cosigned a checkpoint since; ' +
        'remove the older ones and every revoked one, then start the witness again\n',
    );
    expect(existsSync(join(dir, 'state'))).toBe(false);
  });

  it('a crowded log whose origin is not a string (an object whose toString is no function, an array nested too deep to print) is INVALID_ARGUMENT naming its type', () => {
    const keys = vkeys('example.com/crowded', MAX_WITNESS_LOG_KEYS + 1);
    for (const origin of [
      '{"toString":1}',
      '{"toString":{},"valueOf":{}}',
      '['.repeat(20_000) + ']'.repeat(20_000),
      '5',
    ]) {
      const text = `{"logs":[{"origin":${origin},"keys":${JSON.stringify(keys)}}]}`;
      expect(() => parseWitnessLogs(text), origin.slice(0, 30)).toThrow(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: expect.stringMatching(
            /^the logs file lists 257 keys for the log with origin (an object|5) \(not a string\), more than the 256/,
          ),
        }),
      );
    }
  });
});
