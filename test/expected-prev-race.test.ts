/**
 * Several processes publish into one session at the same moment, each with the `expectedPrev` it built on: exactly
 * one of them extends the chain, and every other is told so without writing anything (README, "In a Harness"). On
 * the embedded store a second process cannot open the store at all (`LOCKED`, exit 2) or, once it can, finds the head
 * moved (`CHAIN_CONFLICT`, exit 1); on PostgreSQL the processes are all open at once and race in the database.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LedgerError } from '../src/errors.js';
import { LocalSigner, generateJwk } from '../src/keys/local-signer.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { startLineChild } from './support/line-child.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const CHILD = fileURLToPath(new URL('./support/race-publisher.mjs', import.meta.url));
const PROCESSES = 6;

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in a process of its own, `input` on its standard input. */
function cliProcess(args: string[], input: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe('processes racing to extend one chain of an embedded store', () => {
  it('exactly one publish wins each round; the others are LOCKED (exit 2) or CHAIN_CONFLICT (exit 1) and write nothing', async () => {
    expect(existsSync(CLI), 'dist/ is built by `npm test` (pretest)').toBe(true);
    const root = join(tempDir(), 'store');
    const store = ['--root', root, '--host', 'h'];
    expect((await cliProcess(['init', ...store], '')).code).toBe(0);
    let prev = 'null';
    for (let round = 0; round < 2; round++) {
      const outcomes = await Promise.all(
        Array.from({ length: PROCESSES }, (_, i) =>
          cliProcess(
            [
              'publish',
              ...store,
              '--principal',
              'alice',
              '--session',
              's',
              '--run',
              `r${round}-${i}`,
              '--expected-prev',
              prev,
              '--json',
            ],
            JSON.stringify(sampleSummary(`${round}-${i}`)),
          ),
        ),
      );
      const won = outcomes.filter((o) => o.code === 0);
      expect(won, outcomes.map((o) => `${o.code} ${o.stderr}`).join('\n')).toHaveLength(1);
      for (const o of outcomes.filter((x) => x.code !== 0))
        expect(`${o.code} ${o.stderr}`).toMatch(/^(2 handoff-ledger: LOCKED|1 handoff-ledger: CHAIN_CONFLICT): /);
      const receipt = JSON.parse(won[0]!.stdout) as { id: string; seq: number };
      expect(receipt.seq).toBe(round);
      prev = receipt.id;
    }
    const ledger = await openLedger({ root, host: 'h' });
    try {
      const history = await ledger.history({ principal: 'alice', session: 's' });
      expect(history.map((h) => h.manifest.seq)).toEqual([0, 1]);
      expect(history[1]!.id).toBe(prev);
      expect((await fsck(ledger)).ok).toBe(true);
    } finally {
      await ledger.close();
    }
  }, 120_000);
});

interface RacerMsg {
  type: 'ready' | 'ack' | 'fail';
  id?: string;
  seq?: number;
  code?: string;
  error?: string;
}

/** A race-publisher process: `ready` once its ledger is open; `go(prev)` starts its publish; `result` its answer. */
function startRacer(config: object) {
  const { child, ready, done, kill } = startLineChild<RacerMsg>(CHILD, config, 'racer');
  const result = done.then((messages) => {
    const last = messages.at(-1);
    if (last && last.type !== 'ready') return last;
    throw new Error(`racer exited 0 without an answer (${JSON.stringify(messages)})`);
  });
  result.catch(() => {}); // awaited by the test once the race is started
  return { ready, go: (prev: string) => child.stdin.end(`${prev}\n`), result, kill };
}

describePostgres('processes racing to extend one chain on PostgreSQL', (pg) => {
  /** Starts `principals.length` processes of one host on one root and schema, all open before any publishes. */
  async function race(root: string, schema: string, session: string, principals: string[], prev: string) {
    const racers = principals.map((principal) =>
      startRacer({ root, host: 'h', connectionString: pg.connectionString, schema, principal, session }),
    );
    try {
      await Promise.all(racers.map((r) => r.ready));
      for (const r of racers) r.go(prev);
      return await Promise.all(racers.map((r) => r.result));
    } finally {
      racers.forEach((r) => r.kill());
    }
  }

  it('exactly one process extends the chain each round; every other one is CHAIN_CONFLICT and writes nothing', async () => {
    expect(existsSync(CHILD)).toBe(true);
    const root = tempDir();
    const schema = `prev_race_${process.pid}`;
    const postgres = { connectionString: pg.connectionString, schema };
    // The root's store, key and pin, made before the racers start.
    const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
    try {
      let prev = 'null';
      for (let round = 0; round < 2; round++) {
        const results = await race(root, schema, 's', Array(PROCESSES).fill('alice'), prev);
        const acks = results.filter((m) => m.type === 'ack');
        expect(acks, JSON.stringify(results)).toHaveLength(1);
        expect(results.filter((m) => m.type === 'fail').map((m) => m.code)).toEqual(
          Array(PROCESSES - 1).fill('CHAIN_CONFLICT'),
        );
        expect(acks[0]!.seq).toBe(round);
        prev = acks[0]!.id!;
      }
      const history = await ledger.history({ principal: 'alice', session: 's' });
      expect(history.map((h) => h.manifest.seq)).toEqual([0, 1]);
      expect(history[1]!.id).toBe(prev);
      expect((await fsck(ledger)).ok).toBe(true);
    } finally {
      await ledger.close();
    }
  }, 180_000);

  it('of principals racing to start one session, exactly one becomes its owner; no other lands a manifest in it', async () => {
    const root = tempDir();
    const schema = `owner_race_${process.pid}`;
    const postgres = { connectionString: pg.connectionString, schema };
    const ledger = await openLedger({ root, host: 'h', postgres, onNotice: () => {} });
    try {
      const principals = Array.from({ length: PROCESSES }, (_, i) => `user${i}`);
      const results = await race(root, schema, 'contested', principals, 'null');
      const acks = results.flatMap((m, i) => (m.type === 'ack' ? [principals[i]!] : []));
      expect(acks, JSON.stringify(results)).toHaveLength(1);
      // A loser lost the race for the head (CHAIN_CONFLICT), or came after it and is not the owner (UNAUTHORIZED).
      for (const m of results.filter((x) => x.type === 'fail'))
        expect(['CHAIN_CONFLICT', 'UNAUTHORIZED']).toContain(m.code);
      const owner = acks[0]!;
      expect((await ledger.log.head('contested'))?.owner).toBe(owner);
      expect(
        (await ledger.history({ principal: owner, session: 'contested' })).map((h) => h.manifest.principal),
      ).toEqual([owner]);
      for (const p of principals.filter((x) => x !== owner))
        await expect(ledger.resume({ principal: p, session: 'contested' })).rejects.toMatchObject({
          code: 'UNAUTHORIZED',
        });
    } finally {
      await ledger.close();
    }
  }, 180_000);

  it('a race lost between the head check and the commit is the head that moved, as the check says it: the head found, what to do', async () => {
    // Host a's signer holds its manifest's signature (after its head was read and checked against expectedPrev)
    // until host b has published: a's append then finds the head taken, in the database. It said only the log's
    // `append at seq 0 does not extend the head (seq 0)`, a ManifestError naming neither head nor what to do.
    const schema = `prev_lost_${process.pid}`;
    const postgres = { connectionString: pg.connectionString, schema };
    const inner = new LocalSigner(generateJwk());
    let hold: Promise<void> | undefined;
    let signing!: () => void;
    const held = new Promise<void>((resolve) => (signing = resolve));
    const signer = {
      keyId: inner.keyId,
      publicKey: inner.publicKey,
      async sign(bytes: Uint8Array) {
        const wait = hold;
        hold = undefined;
        if (wait) {
          signing();
          await wait;
        }
        return inner.sign(bytes);
      },
    };
    const a = await openLedger({ root: tempDir(), host: 'host-a', postgres, signer, onNotice: () => {} });
    const b = await openLedger({ root: tempDir(), host: 'host-b', postgres, onNotice: () => {} });
    try {
      const scope = { principal: 'alice', session: 's', run: 'r' };
      let release!: () => void;
      hold = new Promise<void>((resolve) => (release = resolve));
      const lost = a.publish(scope, sampleSummary('a'), { expectedPrev: null }).catch((e: unknown) => e);
      await held;
      const won = await b.publish(scope, sampleSummary('b'), { expectedPrev: null });
      release();
      const err = await lost;
      expect(err).toBeInstanceOf(LedgerError);
      expect(err).toMatchObject({ code: 'CHAIN_CONFLICT' });
      expect((err as Error).message).toBe(
        `session s: the head moved (expected an empty chain, found ${won.id} at seq 0): another run published in it ` +
          'since; resume the session and go on from its head (the next expectedPrev is the id resume returns)',
      );
      expect((err as Error).cause).toMatchObject({ code: 'CHAIN_CONFLICT' });
      expect((await b.log.head('s'))?.id).toBe(won.id);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);
});
