/**
 * `close()` gives the witness pool a bounded chance to submit the newest checkpoint: a ledger closed right after a
 * publish (a one-shot `handoff-ledger publish` with HANDOFF_LEDGER_WITNESSES, a Harness that closes soon after its
 * last compaction) used to cut the submission under way, so the witness never heard of the checkpoint and nothing was
 * said. Now the round under way is waited for (at most `closeWaitMs`, by default the request deadline up to 5 s), and
 * a checkpoint some witness has not cosigned when the ledger closes is said through onNotice, naming each such witness
 * and the size it holds. A command that submitted nothing does not wait. The same pool runs on both backends. The CLI
 * takes both delays from HANDOFF_LEDGER_WITNESS_TIMEOUT_MS (default 5 s), for an operator with a slow or distant witness.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { main } from '../../src/cli/main.js';
import { witnessingFromEnv } from '../../src/cli/io.js';
import { openLedger } from '../../src/ledger/open.js';
import type { OpenLedgerOptions } from '../../src/ledger/options.js';
import { captureIo } from '../support/capture-io.js';
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

/**
 * A witness in front of `target` (a real witness) that holds every request until `release()`: then it passes each on
 * to `target` and answers with its answer. Its answer comes when the test says, not after a delay that a loaded
 * machine could stretch. `arrived` resolves once the first request has been read whole.
 */
async function gatedWitness(target: string): Promise<{
  url: string;
  arrived: Promise<void>;
  release: () => void;
  requests: () => number;
  stop: () => Promise<void>;
}> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let first!: () => void;
  const arrived = new Promise<void>((resolve) => (first = resolve));
  let requests = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests++;
      first();
      void gate
        .then(async () => {
          const answer = await fetch(`${target}${req.url}`, { method: req.method, body: Buffer.concat(chunks) });
          const body = Buffer.from(await answer.arrayBuffer());
          res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' });
          res.end(body);
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrived,
    release,
    requests: () => requests,
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
        witnesses: { witnesses: [silent.url], timeoutMs: 600_000, closeWaitMs: 400 },
        onNotice: (m) => notices.push(m),
      });
      const asked = new Promise<void>((resolve) => silent.requested(resolve));
      await ledger.publish(scope, sampleSummary('to a silent witness'));
      // The request is with the witness before the close begins: a process held up (a loaded machine) past the 400 ms
      // the close waits, before its request reached the witness, had the close cut it unsent.
      await asked;
      const started = performance.now();
      // Not the request's 10 min deadline (where a bound of 2.5 s on the clock failed a loaded machine).
      const closing = ledger.close();
      expect(await settledWithin(closing, ENDS_AT_SIGNAL_MS), 'close() waited past closeWaitMs').toBe('settled');
      await closing;
      expect(performance.now() - started).toBeGreaterThanOrEqual(350);
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
        witnesses: { witnesses: [silent.url], timeoutMs: 700, retryMs: 600_000 },
        onNotice: (m) => notices.push(m),
      });
      await ledger.publish(scope, sampleSummary('to a silent witness'));
      // Not the retry 10 min later (where a bound of 2.5 s on the clock failed a loaded machine): the notice below
      // says the request's own deadline ended it.
      const closing = ledger.close();
      expect(await settledWithin(closing, ENDS_AT_SIGNAL_MS), 'close() waited past the request deadline').toBe(
        'settled',
      );
      await closing;
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
    // A close that waited would wait 10 min (closeWaitMs): it returns once the round has ended (the witness refused
    // the connection), where a bound of 2 s on the clock failed a loaded machine.
    ledger = await openLedger({
      ...options,
      witnesses: { witnesses: [w.url], retryMs: 600_000, timeoutMs: 600_000, closeWaitMs: 600_000 },
    });
    await ledger.publish(scope, sampleSummary('while down'));
    const closing = ledger.close();
    expect(await settledWithin(closing, ENDS_AT_SIGNAL_MS), 'close() waited').toBe('settled');
    await closing;
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
        witnesses: { witnesses: [silent.url], closeWaitMs: 0, timeoutMs: 600_000 },
        onNotice: (m) => notices.push(m),
      });
      await ledger.publish(scope, sampleSummary('not waited for'));
      // A close that waited for the request would wait its 10 min deadline (where a bound of 1 s on the clock failed a
      // loaded machine).
      const closing = ledger.close();
      expect(await settledWithin(closing, ENDS_AT_SIGNAL_MS), 'close() waited').toBe('settled');
      await closing;
      expect(notices.filter((n) => n.includes(`checkpoint of size 1 not cosigned by ${silent.url}`))).toHaveLength(1);
    } finally {
      await silent.stop();
    }
  });

  it("an onNotice that throws at close's notice still has the store closed: the root reopens, and close() resolves", async () => {
    const silent = await silentWitness();
    const root = join(newBase(), 'store');
    try {
      const ledger = await openLedger({
        root,
        host: 'host-s',
        witnesses: { witnesses: [silent.url], closeWaitMs: 0, timeoutMs: 600_000 },
        // The caller's sink fails on the notice close() gives (what a witness was left without): that is the sink's
        // failure, not the close's, and the log, its lock, the blob store and the pin are closed all the same.
        onNotice: (m) => {
          if (m.includes('not cosigned')) throw new Error('the notice sink failed');
        },
      });
      await ledger.publish(scope, sampleSummary('not waited for'));
      await ledger.close();
      const again = await openLedger({ root, host: 'host-s' });
      expect((await again.resume(scope))?.seq).toBe(0);
      await again.close();
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
describe('an onNotice that throws fails nothing', () => {
  // A witness on port 1: fetch refuses the port at once ("bad port"), with no connection made, so each round ends in a
  // notice ("gave no usable answer") without waiting on anything.
  const refusing = 'http://127.0.0.1:1';
  const throwingOn = (text: string, told: () => void) => (m: string) => {
    if (!m.includes(text)) return;
    told();
    throw new Error('the notice sink failed');
  };

  it('a witness round in the background after a publish: no unhandled rejection (it ended the process)', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      let told!: () => void;
      const said = new Promise<void>((resolve) => (told = resolve));
      const ledger = await openLedger({
        root: join(newBase(), 'store'),
        host: 'host-t',
        witnesses: { witnesses: [refusing], retryMs: 600_000 },
        onNotice: throwingOn('no usable answer', () => told()),
      });
      expect((await ledger.publish(scope, sampleSummary('committed'))).seq).toBe(0);
      await said;
      // The round's end and Node's look for unhandled rejections come within the turns after the notice.
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      await ledger.close();
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  it("checkpoint() returns the checkpoint when the sink throws at a witness's notice", async () => {
    const ledger = await openLedger({
      root: join(newBase(), 'store'),
      host: 'host-t',
      witnesses: { witnesses: [refusing], retryMs: 600_000 },
      onNotice: throwingOn('no usable answer', () => {}),
    });
    try {
      await ledger.publish(scope, sampleSummary('committed'));
      expect((await ledger.checkpoint()).checkpoint.size).toBe(1);
    } finally {
      await ledger.close();
    }
  });
});

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
  const cliEnv = {
    HANDOFF_LEDGER_HASH: 'auto',
    HANDOFF_LEDGER_TRUST: '',
    HANDOFF_LEDGER_POSTGRES: '',
    HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '',
  };

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
      // A minute for the witness process to answer, and for publish to wait for it: with the default 5 s a witness
      // slower than that on a loaded machine left the checkpoint uncosigned when publish exited.
      const run = await runCli([...argv, '--run', 'r1', summary], {
        ...cliEnv,
        HANDOFF_LEDGER_WITNESSES: w.url,
        HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '60000',
      });
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
      // The 5 s request deadline is the bound: the notice names it, and the run ends well before any later bound (the
      // socket's headers timeout, 300 s) would end it; ENDS_AT_SIGNAL_MS is for the CLI's start and open on a loaded
      // machine (the margin was 25 s, the deadline included in the 30).
      expect(run.stderr).toContain('sent no complete answer within 5000 ms');
      expect(run.ms).toBeLessThan(5000 + ENDS_AT_SIGNAL_MS);
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

  /** A store of its own and a real witness of its log behind a gated one; the summary file publish is given. */
  async function gatedSetup(name: string) {
    const base = newBase();
    const root = join(base, 'store');
    const origin = `example.com/close-submits-${name}`;
    const first = await openLedger({ root, host: 'host-cli', origin });
    const logs = [{ origin, keys: [first.checkpointVerifierKey] }];
    await first.close();
    const w = await startWitness(join(base, 'w'), `witness.example/${name}`, logs);
    const gated = await gatedWitness(w.url);
    const summary = join(base, 'summary.json');
    writeFileSync(summary, JSON.stringify(sampleSummary(`to a slow witness, ${name}`)));
    const argv = ['publish', '--root', root, '--host', 'host-cli', '--principal', 'alice', '--session', 's1'];
    return {
      root,
      origin,
      w,
      gated,
      argv: [...argv, '--run', 'r1', summary],
      stop: async () => {
        await gated.stop();
        await stopWitness(w);
      },
    };
  }

  /** The witness sizes publish kept in `.witnesses.json` (what it learnt from the answers it got). */
  const keptSizes = (root: string): unknown => {
    const file = readdirSync(join(root, 'checkpoints')).find((f) => f.endsWith('.witnesses.json'));
    return file && (JSON.parse(readFileSync(join(root, 'checkpoints', file), 'utf8')) as { sizes: unknown }).sizes;
  };

  it('HANDOFF_LEDGER_WITNESS_TIMEOUT_MS lengthens the wait: a witness that answers after the default 5 s is cosigned', async () => {
    const t = await gatedSetup('slow');
    try {
      let exited = false;
      const running = runCli(t.argv, {
        ...cliEnv,
        HANDOFF_LEDGER_WITNESSES: t.gated.url,
        HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '60000',
      }).finally(() => (exited = true));
      await t.gated.arrived;
      // The answer is held until publish has waited well past the default 5 s (its request began before it reached
      // the witness): a publish that still runs then waits longer than the default. Before the variable it had cut the
      // request and exited by now.
      await new Promise((r) => setTimeout(r, 7000));
      expect(exited, 'publish still waits for the witness 7 s after its request came').toBe(false);
      t.gated.release();
      const run = await running;
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^published s1 seq 0\n/);
      // Cosigned: nothing said of a witness left without a cosignature, and publish kept the size the witness holds.
      expect(run.stderr).toBe('');
      expect(keptSizes(t.root)).toEqual({ [t.gated.url]: 1 });
      expect(await sizeAt(t.w, t.origin)).toBe(1);
    } finally {
      await t.stop();
    }
  }, 120_000);

  it('without HANDOFF_LEDGER_WITNESS_TIMEOUT_MS (or set to ""), the same witness is left out: publish waits 5 s, not for it', async () => {
    const t = await gatedSetup('default');
    try {
      // The answer is held until publish has exited: it cannot have had it.
      const run = await runCli(t.argv, { ...cliEnv, HANDOFF_LEDGER_WITNESSES: t.gated.url });
      expect(t.gated.requests()).toBe(1);
      t.gated.release();
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^published s1 seq 0\n/);
      expect(run.stderr).toContain(`checkpoint of size 1 not cosigned by ${t.gated.url}`);
      // The request's deadline, or the close's wait: both the default 5 s.
      expect(run.stderr).toMatch(/within (the )?5000 ms/);
    } finally {
      await t.stop();
    }
  }, 60_000);
});

describe('HANDOFF_LEDGER_WITNESS_TIMEOUT_MS', () => {
  it('sets the request deadline and the close wait of the witnessing options every command builds', () => {
    const env = { HANDOFF_LEDGER_WITNESSES: 'http://a.example http://b.example#KEY' };
    expect(witnessingFromEnv({ ...env, HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '20000' })).toEqual({
      witnesses: { witnesses: ['http://a.example', 'http://b.example#KEY'], timeoutMs: 20_000, closeWaitMs: 20_000 },
    });
    // checkpoint --witness URL adds to the list, with the same deadline.
    expect(witnessingFromEnv({ HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '1' }, ['http://c.example'])).toEqual({
      witnesses: { witnesses: ['http://c.example'], timeoutMs: 1, closeWaitMs: 1 },
    });
    expect(witnessingFromEnv({ ...env, HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '2147483647' })).toMatchObject({
      witnesses: { timeoutMs: 2 ** 31 - 1, closeWaitMs: 2 ** 31 - 1 },
    });
    // Unset or "": the library's defaults.
    for (const unset of [{}, { HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '' }])
      expect(witnessingFromEnv({ ...env, ...unset })).toEqual({
        witnesses: { witnesses: ['http://a.example', 'http://b.example#KEY'] },
      });
    // No witnesses: nothing to time.
    expect(witnessingFromEnv({ HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '20000' })).toEqual({});
  });

  it('is in the help of the commands that name the 5 s wait (publish, checkpoint)', async () => {
    const { commandHelp, commands } = await import('../../src/cli/commands.js');
    for (const name of ['publish', 'checkpoint'])
      expect(commandHelp(commands[name]!), name).toContain('HANDOFF_LEDGER_WITNESS_TIMEOUT_MS=N');
  });

  const bad = ['0', '-1', '+5', '1.5', '1e4', '0x10', ' 100', '100 ', 'abc', '2147483648', '99999999999', '\x1b[31m'];

  it('refuses a value that is no whole number of milliseconds from 1 to 2^31 − 1: USAGE, exit 2, nothing made', async () => {
    const base = newBase();
    const summary = join(base, 'summary.json');
    writeFileSync(summary, JSON.stringify(sampleSummary('never published')));
    const root = join(base, 'store');
    const store = ['--root', root, '--host', 'h'];
    const commands = [
      ['publish', ...store, '--principal', 'alice', '--session', 's1', '--run', 'r1', summary],
      ['checkpoint', ...store, '--witness', 'http://127.0.0.1:1'],
      ['history', ...store, '--principal', 'alice', '--session', 's1'],
    ];
    for (const value of bad)
      for (const argv of commands)
        for (const witnesses of ['http://127.0.0.1:1', '']) {
          const c = captureIo({
            env: { HANDOFF_LEDGER_WITNESSES: witnesses, HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: value },
          });
          const code = await main(argv, c.io);
          const where = `${argv[0]} with ${JSON.stringify(value)}`;
          expect(code, where).toBe(2);
          expect(c.stderr(), where).toMatch(
            /^handoff-ledger: USAGE: HANDOFF_LEDGER_WITNESS_TIMEOUT_MS must be a whole number of milliseconds from 1 to 2147483647, not "/,
          );
          // Escaped: nothing a terminal acts on reaches it.
          expect(c.stderr(), where).not.toContain('\x1b');
          expect(existsSync(root), where).toBe(false);
        }
    const c = captureIo({ env: { HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '\x1b[31m' } });
    expect(await main(['checkpoint', ...store, '--json'], c.io)).toBe(2);
    expect(JSON.parse(c.stdout())).toEqual({
      error: {
        code: 'USAGE',
        message:
          'HANDOFF_LEDGER_WITNESS_TIMEOUT_MS must be a whole number of milliseconds from 1 to 2147483647, not "\\u001b[31m"',
      },
    });
  });
});
