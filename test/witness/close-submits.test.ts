/**
 * `close()` gives the witness pool a bounded chance to submit the newest checkpoint: a ledger closed right after a
 * publish (a one-shot `handoff-ledger publish` with HANDOFF_LEDGER_WITNESSES, a Harness that closes soon after its
 * last compaction) used to cut the submission under way, so the witness never heard of the checkpoint and nothing was
 * said. Now the round under way is waited for (at most `closeWaitMs`, by default the request deadline up to 5 s), and
 * a checkpoint some witness has not cosigned when the ledger closes is said through onNotice, naming each such witness
 * and the size it holds. A command that submitted nothing does not wait. The same pool runs on both backends.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { openLedger } from '../../src/ledger/open.js';
import type { OpenLedgerOptions } from '../../src/ledger/options.js';
import { describePostgres } from '../support/postgres.js';
import { ENDS_AT_SIGNAL_MS, settledWithin } from '../support/settled.js';
import { sampleSummary } from '../support/tmp.js';
import { CLI, startWitness, stopWitness, witnessed, type WitnessProcess } from './support.js';

const bases: string[] = [];
afterAll(() => bases.forEach((b) => rmSync(b, { recursive: true, force: true })));
const newBase = () => {
  const b = mkdtempSync(join(tmpdir(), 'hl-close-submits-'));
  bases.push(b);
  return b;
};

const scope = { principal: 'alice', session: 's1', run: 'r1' };

async function sizeAt(w: WitnessProcess, origin: string): Promise<number> {
  const note = await witnessed(w.url, origin);
  return note === undefined ? 0 : parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)).size;
}

/** A witness that takes every request and never answers; `requests` counts them, `requested` is told of each. */
async function silentWitness(): Promise<{
  url: string;
  requests: () => number;
  requested: (listener: () => void) => void;
  stop: () => Promise<void>;
}> {
  let requests = 0;
  const listeners: Array<() => void> = [];
  const server: Server = createServer((req) => {
    requests++;
    req.resume();
    for (const l of listeners) l();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    requested: (listener) => listeners.push(listener),
    stop: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

function closeScenario(name: string, store: () => Omit<OpenLedgerOptions, 'host'>): void {
  it(`${name}: publish then close() at once: the witness has cosigned the checkpoint when close() returns`, async () => {
    const base = newBase();
    const origin = `example.com/close-submits-${bases.length}`;
    const notices: string[] = [];
    const options = { ...store(), host: 'host-c', origin, onNotice: (m: string) => notices.push(m) };
    const first = await openLedger(options);
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    const w = await startWitness(join(base, 'w'), 'witness.example/close', logs);
    try {
      // The witness process is given 30 s to answer, and close() as long to wait for it: by default (5 s each) a witness
      // slower than that on a loaded machine left the checkpoint uncosigned when close() returned.
      const witnesses = { witnesses: [w.url], timeoutMs: 30_000, closeWaitMs: 30_000 };
      const open = () => openLedger({ ...options, witnesses });
      let ledger = await open();
      await ledger.publish(scope, sampleSummary('one'));
      await ledger.close();
      expect(await sizeAt(w, origin)).toBe(1);
      // Two more, then a close: the newest tree is the one submitted, from the size the witness holds.
      ledger = await open();
      await ledger.publish(scope, sampleSummary('two'));
      await ledger.publish(scope, sampleSummary('three'));
      await ledger.close();
      expect(await sizeAt(w, origin)).toBe(3);
      const sizesFile = readdirSync(join(options.root!, 'checkpoints')).find((f) => f.endsWith('.witnesses.json'))!;
      expect(JSON.parse(readFileSync(join(options.root!, 'checkpoints', sizesFile), 'utf8'))).toMatchObject({
        sizes: { [w.url]: 3 },
      });
      // Everything cosigned: nothing to say.
      expect(notices.filter((n) => n.includes('not cosigned'))).toEqual([]);
    } finally {
      await stopWitness(w);
    }
  }, 60_000);
}

describe('close() submits the newest checkpoint (embedded)', () => {
  closeScenario('embedded', () => ({ root: join(newBase(), 'store') }));

  it('a witness that does not answer: close() returns within closeWaitMs and names the witness and the sizes', async () => {
    const silent = await silentWitness();
    const notices: string[] = [];
    try {
      const ledger = await openLedger({
        root: join(newBase(), 'store'),
        host: 'host-s',
        witnesses: { witnesses: [silent.url], timeoutMs: 60_000, closeWaitMs: 400 },
        onNotice: (m) => notices.push(m),
      });
      const asked = new Promise<void>((resolve) => silent.requested(resolve));
      await ledger.publish(scope, sampleSummary('to a silent witness'));
      // The request is with the witness before the close begins: a process held up (a loaded machine) past the 400 ms
      // the close waits, before its request reached the witness, had the close cut it unsent.
      await asked;
      const started = performance.now();
      await ledger.close();
      const took = performance.now() - started;
      expect(took).toBeGreaterThanOrEqual(350);
      expect(took).toBeLessThan(2500);
      expect(silent.requests()).toBe(1);
      const said = notices.filter((n) => n.includes('not cosigned'));
      expect(said).toHaveLength(1);
      expect(said[0]).toContain(`checkpoint of size 1 not cosigned by ${silent.url}`);
      expect(said[0]).toContain('no answer within the 400 ms close() waited');
      expect(said[0]).toContain('its size not yet known');
      expect(said[0]).toMatch(/next publish, checkpoint or export/);
    } finally {
      await silent.stop();
    }
  }, 60_000);

  it('by default close() waits the request deadline (timeoutMs), not more', async () => {
    const silent = await silentWitness();
    const notices: string[] = [];
    try {
      const ledger = await openLedger({
        root: join(newBase(), 'store'),
        host: 'host-s',
        witnesses: { witnesses: [silent.url], timeoutMs: 700, retryMs: 60_000 },
        onNotice: (m) => notices.push(m),
      });
      await ledger.publish(scope, sampleSummary('to a silent witness'));
      const started = performance.now();
      await ledger.close();
      expect(performance.now() - started).toBeLessThan(2500);
      expect(notices.some((n) => n.includes(silent.url) && n.includes('sent no complete answer within 700 ms'))).toBe(
        true,
      );
      expect(notices.some((n) => n.includes(`checkpoint of size 1 not cosigned by ${silent.url}`))).toBe(true);
    } finally {
      await silent.stop();
    }
  }, 60_000);

  it('a witness that is down: close() returns at once, saying what is not cosigned and the size the witness holds', async () => {
    const base = newBase();
    const root = join(base, 'store');
    const origin = 'example.com/close-submits-down';
    const first = await openLedger({ root, host: 'host-d', origin });
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    const w = await startWitness(join(base, 'w'), 'witness.example/down', logs);
    const notices: string[] = [];
    const options = { root, host: 'host-d', origin, onNotice: (m: string) => notices.push(m) };
    let ledger = await openLedger({ ...options, witnesses: { witnesses: [w.url], retryMs: 60_000 } });
    await ledger.publish(scope, sampleSummary('cosigned'));
    await ledger.close();
    await stopWitness(w, 'SIGKILL');
    ledger = await openLedger({ ...options, witnesses: { witnesses: [w.url], retryMs: 60_000 } });
    await ledger.publish(scope, sampleSummary('while down'));
    const started = performance.now();
    await ledger.close();
    expect(performance.now() - started).toBeLessThan(2000);
    const said = notices.filter((n) => n.includes('not cosigned'));
    expect(said).toHaveLength(1);
    expect(said[0]).toContain(`checkpoint of size 2 not cosigned by ${w.url} (it holds size 1)`);
  }, 60_000);

  it('closeWaitMs 0: close() does not wait, and says what it left', async () => {
    const silent = await silentWitness();
    const notices: string[] = [];
    try {
      const ledger = await openLedger({
        root: join(newBase(), 'store'),
        host: 'host-s',
        witnesses: { witnesses: [silent.url], closeWaitMs: 0 },
        onNotice: (m) => notices.push(m),
      });
      await ledger.publish(scope, sampleSummary('not waited for'));
      const started = performance.now();
      await ledger.close();
      expect(performance.now() - started).toBeLessThan(1000);
      expect(notices.filter((n) => n.includes(`checkpoint of size 1 not cosigned by ${silent.url}`))).toHaveLength(1);
    } finally {
      await silent.stop();
    }
  });

  it('a ledger that submitted nothing does not wait for a silent witness, nor says anything at close', async () => {
    const silent = await silentWitness();
    const root = join(newBase(), 'store');
    try {
      const plain = await openLedger({ root, host: 'host-n' });
      await plain.publish(scope, sampleSummary('before the witness'));
      await plain.close();
      const notices: string[] = [];
      const ledger = await openLedger({
        root,
        host: 'host-n',
        // Ten minutes for the witness to answer and for close() to wait: a close that waited for it would not end
        // within the test, where a bound of 1 s on the clock also failed a close that was only slow (a loaded machine).
        witnesses: { witnesses: [silent.url], timeoutMs: 600_000, closeWaitMs: 600_000 },
        onNotice: (m) => notices.push(m),
      });
      await ledger.history(scope);
      expect(await settledWithin(ledger.close(), ENDS_AT_SIGNAL_MS)).toBe('settled');
      expect(silent.requests()).toBe(0);
      expect(notices).toEqual([]);
    } finally {
      await silent.stop();
    }
  });

  it('openLedger refuses closeWaitMs out of 0 to 2^31 − 1 (INVALID_ARGUMENT)', async () => {
    for (const closeWaitMs of [-1, 2 ** 31, NaN])
      await expect(
        openLedger({
          root: join(newBase(), 'store'),
          host: 'h',
          witnesses: { witnesses: ['http://127.0.0.1:1'], closeWaitMs },
        }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('witnesses.closeWaitMs') });
  });
});

let schemas = 0;
describePostgres('close() submits the newest checkpoint (PostgreSQL)', (pg) => {
  closeScenario('PostgreSQL', () => ({
    root: join(newBase(), 'store'),
    postgres: { connectionString: pg.connectionString, schema: `close_submits_${++schemas}` },
  }));
});

/** Preloaded into a CLI child: `stop signals released` on stderr once the command listens to SIGTERM no more. */
const SIGNALS_RELEASED = fileURLToPath(new URL('../support/signals-released.mjs', import.meta.url));

/**
 * Runs the compiled CLI (`preload`: a module `--import`ed first); resolves with its exit code or signal, stdout, stderr
 * and how long it ran. `onOutput` is called with all its output so far on each chunk of either stream.
 */
function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  onOutput?: (out: { stdout: string; stderr: string }, kill: (signal: NodeJS.Signals) => void) => void,
  preload?: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, [...(preload ? ['--import', preload] : []), CLI, ...argv], {
    env: { ...process.env, ...env },
  });
  let stdout = '';
  let stderr = '';
  const told = () => onOutput?.({ stdout, stderr }, (s) => child.kill(s));
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    told();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    told();
  });
  child.stdin.end();
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr, ms: performance.now() - started })),
  );
}

describe('handoff-ledger publish with HANDOFF_LEDGER_WITNESSES', () => {
  const cliEnv = { HANDOFF_LEDGER_HASH: 'auto', HANDOFF_LEDGER_TRUST: '', HANDOFF_LEDGER_POSTGRES: '' };

  it('submits the checkpoint before it exits: the witness state holds the log', async () => {
    const base = newBase();
    const root = join(base, 'store');
    const origin = 'example.com/close-submits-cli';
    const first = await openLedger({ root, host: 'host-cli', origin });
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    const w = await startWitness(join(base, 'w'), 'witness.example/cli', logs);
    try {
      const summary = join(base, 'summary.json');
      writeFileSync(summary, JSON.stringify(sampleSummary('from the CLI')));
      const argv = ['publish', '--root', root, '--host', 'host-cli', '--principal', 'alice', '--session', 's1'];
      const run = await runCli([...argv, '--run', 'r1', summary], { ...cliEnv, HANDOFF_LEDGER_WITNESSES: w.url });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toBe('');
      expect(await sizeAt(w, origin)).toBe(1);
      // The witness's state directory holds the log's tree, not only its memory.
      expect(readdirSync(join(base, 'w', 'state')).length).toBeGreaterThan(0);
    } finally {
      await stopWitness(w);
    }
  }, 60_000);

  it('a witness that does not answer: publish exits 0 within the request deadline and says the checkpoint was not cosigned', async () => {
    const silent = await silentWitness();
    try {
      const base = newBase();
      const summary = join(base, 'summary.json');
      writeFileSync(summary, JSON.stringify(sampleSummary('to a silent witness')));
      const argv = ['publish', '--root', join(base, 'store'), '--host', 'h', '--principal', 'alice'];
      const run = await runCli([...argv, '--session', 's1', '--run', 'r1', summary], {
        ...cliEnv,
        HANDOFF_LEDGER_WITNESSES: silent.url,
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^published s1 seq 0\n/);
      expect(silent.requests()).toBe(1);
      expect(run.stderr).toContain(`checkpoint of size 1 not cosigned by ${silent.url}`);
      // The 5 s request deadline is the bound (and the CLI's own start and open).
      expect(run.ms).toBeLessThan(5000 + 4000);
    } finally {
      await silent.stop();
    }
  }, 60_000);

  it('SIGTERM while publish waits for a witness ends it at once', async () => {
    const silent = await silentWitness();
    try {
      const base = newBase();
      const summary = join(base, 'summary.json');
      writeFileSync(summary, JSON.stringify(sampleSummary('interrupted wait')));
      const argv = ['publish', '--root', join(base, 'store'), '--host', 'h', '--principal', 'alice'];
      // Sent once the receipt is out, the CLI listens to SIGTERM no more, and the witness holds the request (the close
      // waits for its answer, up to 5 s): not after a fixed delay, which a loaded machine can outrun, the child held
      // between its receipt and taking its listener off (the signal was then lost, and the publish exited 0).
      let kill: ((signal: NodeJS.Signals) => void) | undefined;
      let out = { stdout: '', stderr: '' };
      let killed = false;
      const ready = () => {
        if (killed || !kill || silent.requests() === 0) return;
        if (!out.stdout.includes('published s1 seq 0') || !out.stderr.includes('stop signals released\n')) return;
        killed = true;
        kill('SIGTERM');
      };
      silent.requested(ready);
      const run = await runCli(
        [...argv, '--session', 's1', '--run', 'r1', summary],
        { ...cliEnv, HANDOFF_LEDGER_WITNESSES: silent.url },
        (output, k) => {
          out = output;
          kill = k;
          ready();
        },
        SIGNALS_RELEASED,
      );
      expect(killed, run.stderr).toBe(true);
      expect(silent.requests()).toBe(1);
      // Ended by the signal itself (no handler left), not by an exit after the close's wait, which would be code 0.
      expect(run.signal ?? run.code).toBe('SIGTERM');
    } finally {
      await silent.stop();
    }
  }, 60_000);
});
