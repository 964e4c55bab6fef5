/**
 * Witness test support: a C2SP log made by hand (leaves, RFC 6962 roots and consistency proofs, signed
 * checkpoints) and real `handoff-ledger witness serve` child processes on 127.0.0.1 (the compiled CLI:
 * `npm test` builds it first).
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { nobleSign, noblePublicKey } from '../../manifests/crypto/ed25519.js';
import { encodeVerifierKey, signNote, type NoteSigner } from '../../manifests/crypto/note.js';
import { formatCheckpoint } from '../../manifests/format/checkpoint.js';
import { EMPTY_ROOT, leafHash, nodeHash } from '../../manifests/tlog/merkle.js';
import { consistencyRanges } from '../../manifests/tlog/tree.js';
import { formatAddCheckpoint, parseAddCheckpoint } from '../../manifests/witness/add-checkpoint.js';

export const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** Makes `server` listen on an ephemeral port of 127.0.0.1; resolves to its base URL. */
export async function listenLocal(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes `server`, its open connections (keep-alive ones included) first. */
export async function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return EMPTY_ROOT;
  if (leaves.length === 1) return leafHash(leaves[0]!);
  const k = 2 ** Math.floor(Math.log2(leaves.length - 1));
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

export const noteSigner = (name: string, seed: Uint8Array): NoteSigner => ({
  name,
  publicKey: noblePublicKey(seed),
  sign: (m) => nobleSign(m, seed),
});

/** A log whose host can sign any tree it likes: the split-view attacker of the witness tests. */
export class HandLog {
  readonly signer: NoteSigner;
  constructor(
    readonly origin: string,
    seedByte: number,
  ) {
    this.signer = noteSigner(origin, new Uint8Array(32).fill(seedByte));
  }
  get vkey(): string {
    return encodeVerifierKey(this.origin, this.signer.publicKey);
  }
  static leaves(prefix: string, n: number): Uint8Array[] {
    return Array.from({ length: n }, (_, i) => new TextEncoder().encode(`${prefix}-${i}`));
  }
  root(leaves: Uint8Array[]): Uint8Array {
    return mth(leaves);
  }
  async note(leaves: Uint8Array[], signers: NoteSigner[] = [this.signer], extensions: string[] = []): Promise<string> {
    return signNote(
      formatCheckpoint({ origin: this.origin, size: leaves.length, root: mth(leaves), extensions }),
      signers,
    );
  }
  proof(oldSize: number, leaves: Uint8Array[]): Uint8Array[] {
    return consistencyRanges(oldSize, leaves.length).map(([s, e]) => mth(leaves.slice(s, e)));
  }
  /** The add-checkpoint body taking a witness from `oldSize` (of these same leaves) to all of them. */
  async request(oldSize: number, leaves: Uint8Array[], extensions: string[] = []): Promise<string> {
    return formatAddCheckpoint({
      oldSize,
      proof: this.proof(oldSize, leaves),
      note: await this.note(leaves, [this.signer], extensions),
    });
  }
}

export interface WitnessProcess {
  url: string;
  vkey: string;
  proc: ChildProcessWithoutNullStreams;
  /** The line it printed as it began to listen (`listening on URL (N logs); …`). */
  listening: string;
  stderr(): string;
  exited: Promise<number | null>;
}

/**
 * How long a witness is given to print its address: past it, startWitness fails with what the child printed so far and
 * where it waited (a diagnostic report of Node's), not a hook's bare timeout. Below the 60 s the tests give the hooks.
 */
export const START_DEADLINE_MS = 45_000;

/** The part of a Node diagnostic report (`--report-on-signal`) that says where a process waits: its stack and handles. */
function reportExcerpt(dir: string): string {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  } catch {
    return '(no diagnostic report)';
  }
  if (files.length === 0) return '(no diagnostic report: its JavaScript did not run to write one)';
  return files
    .map((f) => {
      try {
        const r = JSON.parse(readFileSync(join(dir, f), 'utf8')) as {
          javascriptStack?: { message?: string; stack?: string[] };
          libuv?: Array<{ type?: string; is_active?: boolean; localEndpoint?: unknown }>;
        };
        const handles = (r.libuv ?? [])
          .filter((h) => h.is_active)
          .map((h) => `${h.type ?? '?'}${h.localEndpoint ? ` ${JSON.stringify(h.localEndpoint)}` : ''}`);
        return `report ${f}: ${r.javascriptStack?.message ?? ''}\n${(r.javascriptStack?.stack ?? []).join('\n')}\nactive handles: ${handles.join(', ')}`;
      } catch (err) {
        return `report ${f}: unreadable (${String(err)})`;
      }
    })
    .join('\n');
}

/**
 * Each thread of a process as Linux shows it: its name (the main thread marked), its state (D: waiting in the kernel,
 * on a disk) and the number of the system call it is in (74 fsync, 75 fdatasync, 202 futex, 232 epoll_wait on
 * x86-64). Empty elsewhere.
 */
function threadStates(pid: number | undefined): string {
  if (pid === undefined) return '';
  try {
    return readdirSync(`/proc/${pid}/task`)
      .map((t) => {
        const at = (f: string) => {
          try {
            return readFileSync(`/proc/${pid}/task/${t}/${f}`, 'utf8');
          } catch {
            return '';
          }
        };
        const state = /^State:\s*(\S+)/m.exec(at('status'))?.[1] ?? '?';
        const main = t === String(pid) ? ' (main)' : '';
        return `${at('comm').trim()}${main} ${state} syscall ${at('syscall').split(' ')[0]?.trim() ?? '?'}`;
      })
      .join('; ');
  } catch {
    return '';
  }
}

/**
 * The native stack of a process's main thread, as gdb shows it (where gdb is installed; at most 8 s): a main thread
 * blocked in native code (a lock, futex 202) never runs the JavaScript that writes the diagnostic report. So was a hung
 * `witness keygen` found: Node deadlocked in a JWK export of a key generateKeyPairSync gave.
 */
function nativeStack(pid: number | undefined): Promise<string> {
  if (pid === undefined) return Promise.resolve('');
  return new Promise((resolve) =>
    execFile(
      'gdb',
      ['-p', String(pid), '-batch', '-ex', 'bt 30'],
      { encoding: 'utf8', timeout: 8_000, killSignal: 'SIGKILL' },
      (err, stdout) => {
        const frames = stdout
          .split('\n')
          .filter((l) => l.startsWith('#'))
          .join('\n');
        resolve(
          frames ? `main thread (gdb):\n${frames}\n` : `(no native stack: ${err ? err.message : 'gdb showed none'})\n`,
        );
      },
    ),
  );
}

/**
 * Runs `node args`, resolves with the child once `ready(line)` returns a value for a line of its stdout (without
 * `ready`: once it exits 0); rejects when it exits first (otherwise), or after `deadlineMs` (then with what it printed and a diagnostic report of where it waited, and
 * the child killed).
 */
async function startChild<T>(
  what: string,
  /** What it is waited for, as the errors say it ("listening"). */
  until: string,
  args: string[],
  reports: string,
  ready: ((line: string) => T | undefined) | undefined,
  deadlineMs: number,
): Promise<{ proc: ChildProcessWithoutNullStreams; value: T; stderr: () => string; exited: Promise<number | null> }> {
  const proc = spawn(process.execPath, [
    '--report-on-signal',
    '--report-signal=SIGUSR2',
    `--report-directory=${reports}`,
    ...args,
  ]);
  let err = '';
  const out: string[] = [];
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  const lines = createInterface({ input: proc.stdout });
  let timer: NodeJS.Timeout | undefined;
  try {
    const value = await new Promise<T>((resolve, reject) => {
      lines.on('line', (line) => {
        out.push(line);
        const v = ready?.(line);
        if (v !== undefined) resolve(v);
      });
      void exited.then((code) => {
        if (ready === undefined && code === 0) resolve(undefined as T);
        else reject(new Error(`${what} exited ${String(code)} before ${until}: ${err}`));
      });
      timer = setTimeout(() => {
        // Where it waits, then the child killed: a hung start must not outlive the test. The native stack first (gdb
        // stops the process while it looks), then the report, which needs the process running.
        const threads = threadStates(proc.pid);
        void nativeStack(proc.pid).then((native) => {
          proc.kill('SIGUSR2');
          setTimeout(() => {
            proc.kill('SIGKILL');
            reject(
              new Error(
                `${what} not ${until} after ${deadlineMs} ms (pid ${String(proc.pid)});\nstdout: ${out.join('\n')}\nstderr: ${err}\nthreads: ${threads}\n${native}${reportExcerpt(reports)}`,
              ),
            );
          }, 2_000);
        });
      }, deadlineMs);
    });
    return { proc, value, stderr: () => err, exited };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Writes a witness's key (once per dir) and logs file, then starts `witness serve` and waits until it listens (at
 * most `deadlineMs` for each of the two children: see START_DEADLINE_MS).
 */
export async function startWitness(
  dir: string,
  name: string,
  logs: Array<{ origin: string; keys: string[] }>,
  extra: string[] = [],
  /** Node's own options before the CLI (`--import PRELOAD`). */
  nodeArgs: string[] = [],
  deadlineMs = START_DEADLINE_MS,
): Promise<WitnessProcess> {
  mkdirSync(dir, { recursive: true });
  const key = join(dir, 'witness.key');
  const logsFile = join(dir, 'logs.json');
  const reports = join(dir, 'reports');
  mkdirSync(reports, { recursive: true });
  writeFileSync(logsFile, JSON.stringify({ logs }));
  if (!existsSync(key)) {
    // Waited for until it exits (0: its key written).
    await startChild(
      'witness keygen',
      'done',
      [CLI, 'witness', 'keygen', '--name', name, '--out', key],
      reports,
      undefined,
      deadlineMs,
    );
  }
  const listen = extra.includes('--listen') ? [] : ['--listen', '127.0.0.1:0'];
  const args = ['witness', 'serve', ...listen, '--key', key, '--logs', logsFile];
  let vkey = '';
  let listening = '';
  const started = await startChild(
    'witness',
    'listening',
    [...nodeArgs, CLI, ...args, '--state', join(dir, 'state'), ...extra],
    reports,
    (line) => {
      if (line.startsWith('witness ')) vkey = line.slice('witness '.length);
      const m = /^listening on (http:\/\/[^ ]+) /.exec(line);
      if (!m) return undefined;
      listening = line;
      return m[1]!;
    },
    deadlineMs,
  );
  return { url: started.value, vkey, proc: started.proc, listening, stderr: started.stderr, exited: started.exited };
}

export async function stopWitness(w: WitnessProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill(signal);
  return w.exited;
}

export async function addCheckpoint(
  url: string,
  body: string,
): Promise<{ status: number; type: string; text: string }> {
  const res = await fetch(`${url}/add-checkpoint`, { method: 'POST', body, signal: AbortSignal.timeout(20_000) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
}

/** What a witness serves to monitors for a log (undefined: 404, it never cosigned one). */
export async function witnessed(url: string, origin: string): Promise<string | undefined> {
  const { createHash } = await import('node:crypto');
  // Bounded: a witness that never answers fails the test here, named, not at the test's timeout.
  const res = await fetch(`${url}/${createHash('sha256').update(origin).digest('hex')}/checkpoint`, {
    signal: AbortSignal.timeout(15_000),
  });
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw new Error(`monitor GET answered ${res.status}`);
  return res.text();
}

/**
 * A witness in this process, on 127.0.0.1, that answers every add-checkpoint 200 with what `answer` gives for the
 * request's checkpoint (the note's text up to its signatures): the witnesses a test makes say what a real one would
 * not (several keys' lines, lines that break a note).
 */
export async function answeringWitness(
  answer: (checkpointText: string) => Promise<string>,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const { note } = parseAddCheckpoint(Buffer.concat(chunks).toString('utf8'));
        const lines = await answer(note.slice(0, note.indexOf('\n\n') + 1));
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(lines);
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
