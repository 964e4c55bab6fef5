/**
 * A witness's state is bound to the witness key it was written with (`<state>/witness.json`): `witness serve` with
 * another key's state is refused (WITNESS_KEY_MISMATCH, exit 1, the state untouched), since a witness handed another
 * witness's view would cosign what that view accepts. A new state is said on stderr (it trusts every log afresh), a
 * state of an earlier version (no key named) is bound to the key that opens it, and a damaged key record is refused.
 */
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createWitnessKeyFile } from '../../src/witness/key.js';
import { originHash, WitnessState } from '../../src/witness/state.js';
import { tempDir } from '../support/tmp.js';
import { addCheckpoint, HandLog, startWitness, stopWitness } from './support.js';
import { ENDS_AT_SIGNAL_MS } from '../support/settled.js';

const log = new HandLog('example.com/state-binding', 21);
const leaves = HandLog.leaves('b', 6);
const tree = (n: number) => ({ size: n, root: log.root(leaves.slice(0, n)), note: `note ${n}` });

async function keys(dir: string) {
  const a = await createWitnessKeyFile(join(dir, 'a.key'), 'witness.example/a');
  const b = await createWitnessKeyFile(join(dir, 'b.key'), 'witness.example/b');
  return { a: a.vkey, b: b.vkey };
}

describe('the witness state and its key', () => {
  it('is refused to another witness key (WITNESS_KEY_MISMATCH), its lock released; its own key opens it', async () => {
    const base = tempDir();
    const { a, b } = await keys(base);
    const dir = join(base, 'state');
    let state = await WitnessState.open(dir, a);
    expect(state.binding).toBe('created');
    await state.put(log.origin, 0, tree(4));
    await state.close();
    expect(JSON.parse(readFileSync(join(dir, 'witness.json'), 'utf8'))).toEqual({ version: 1, vkey: a });

    const refused = await WitnessState.open(dir, b).then(
      () => undefined,
      (err: unknown) => err as { code?: string; message: string },
    );
    expect(refused?.code).toBe('WITNESS_KEY_MISMATCH');
    expect(refused?.message).toContain(a);
    // Nothing changed, and the lock was let go: the key the state belongs to opens it at once.
    expect(JSON.parse(readFileSync(join(dir, 'witness.json'), 'utf8'))).toEqual({ version: 1, vkey: a });
    state = await WitnessState.open(dir, a);
    try {
      expect(state.binding).toBe('same');
      expect((await state.get(log.origin))?.size).toBe(4);
    } finally {
      await state.close();
    }
  });

  it('binds a state of an earlier version (no key named) to the key that opens it; a damaged key record is RECORD_CORRUPT', async () => {
    const base = tempDir();
    const { a, b } = await keys(base);
    const dir = join(base, 'state');
    let state = await WitnessState.open(dir); // as an earlier version wrote it: no witness.json
    await state.put(log.origin, 0, tree(3));
    await state.close();
    state = await WitnessState.open(dir, a);
    expect(state.binding).toBe('adopted');
    await state.close();
    await expect(WitnessState.open(dir, b)).rejects.toMatchObject({ code: 'WITNESS_KEY_MISMATCH' });

    writeFileSync(join(dir, 'witness.json'), '{"version": 1, "vk');
    await expect(WitnessState.open(dir, a)).rejects.toMatchObject({ code: 'RECORD_CORRUPT' });
  });

  it("a log's stored tree that is JSON but no object (null, a number, a list) is RECORD_CORRUPT, not a TypeError", async () => {
    const dir = join(tempDir(), 'state');
    const state = await WitnessState.open(dir);
    try {
      await state.put(log.origin, 0, tree(3));
      const path = join(dir, 'logs', `${originHash(log.origin)}.json`);
      expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ origin: log.origin, size: 3 });
      for (const [i, text] of ['null', '0', '[]', '"x"', 'true'].entries()) {
        const origin = `${log.origin}/${i}`;
        writeFileSync(join(dir, 'logs', `${originHash(origin)}.json`), `${text}\n`);
        await expect(state.get(origin), text).rejects.toMatchObject({
          code: 'RECORD_CORRUPT',
          message: `the witness state of ${JSON.stringify(origin)} is damaged`,
        });
      }
    } finally {
      await state.close();
    }
  });

  it('witness serve: another key on a state is refused, exit 1, and cosigns nothing; a new state is said on stderr', async () => {
    const base = tempDir();
    const logs = [{ origin: log.origin, keys: [log.vkey] }];
    const a = await startWitness(join(base, 'a'), 'witness.example/a', logs);
    let stderrA: string;
    try {
      // (stderr is its own pipe: the line may come just after the address on stdout)
      const said = `witness: a new state in ${JSON.stringify(join(base, 'a', 'state'))}: each log's first checkpoint`;
      // Polled for as long as a wait that must end is given (5 s was not enough on a loaded machine).
      const until = Date.now() + ENDS_AT_SIGNAL_MS;
      while (Date.now() < until && !a.stderr().includes(said)) await new Promise((r) => setTimeout(r, 100));
      expect(a.stderr()).toContain(said);
      expect((await addCheckpoint(a.url, await log.request(0, leaves.slice(0, 4)))).status).toBe(200);
    } finally {
      await stopWitness(a);
      stderrA = a.stderr();
    }
    expect(stderrA.match(/a new state/g)).toHaveLength(1);
    // A's state handed to a witness of key B (copied while A is stopped).
    cpSync(join(base, 'a', 'state'), join(base, 'b', 'state'), { recursive: true });
    rmSync(join(base, 'b', 'state', 'witness.lock'), { force: true });
    const started = await startWitness(join(base, 'b'), 'witness.example/b', logs).then(
      async (w) => {
        // Listening on A's view: a fork of A's tree from size 0 is not what it must be able to cosign.
        await stopWitness(w);
        return `listening (${w.stderr()})`;
      },
      (err: unknown) => (err as Error).message,
    );
    expect(started).toMatch(
      /^witness exited 1 before listening: .*handoff-ledger: WITNESS_KEY_MISMATCH: the witness state /s,
    );
    expect(readFileSync(join(base, 'b', 'state', 'witness.json'), 'utf8')).toBe(
      readFileSync(join(base, 'a', 'state', 'witness.json'), 'utf8'),
    );

    // A restarted on its own state: not new, nothing said.
    const again = await startWitness(join(base, 'a'), 'witness.example/a', logs);
    try {
      expect((await addCheckpoint(again.url, await log.request(4, leaves.slice(0, 6)))).status).toBe(200);
      expect(again.stderr()).not.toContain('a new state');
    } finally {
      await stopWitness(again);
    }
  }, 60_000);
});
