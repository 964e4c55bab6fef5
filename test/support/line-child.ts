/**
 * A child process of a multi-process test that speaks JSON lines on stdout (`{"type":"ready"}` once set up, then its
 * reports): spawned with its config as JSON in argv[2], its messages collected in order.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface LineChild<M extends { type: string }> {
  child: ChildProcessWithoutNullStreams;
  /** Once it has said `ready` (rejects if it exits with an error first; resolves if it ends without saying it). */
  ready: Promise<void>;
  /** Every message it said, once it has exited 0; rejects (with its stderr) on any other exit. */
  done: Promise<M[]>;
  /** SIGKILL, if it is still running. */
  kill: () => void;
}

export function startLineChild<M extends { type: string }>(
  script: string,
  config: object,
  name = 'child',
): LineChild<M> {
  const child = spawn(process.execPath, [script, JSON.stringify(config)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const messages: M[] = [];
  let onReady!: () => void;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  createInterface({ input: child.stdout }).on('line', (line) => {
    const msg = JSON.parse(line) as M;
    messages.push(msg);
    if (msg.type === 'ready') onReady();
  });
  const done = new Promise<M[]>((resolve, reject) =>
    child.on('close', (code) =>
      code === 0 ? resolve(messages) : reject(new Error(`${name} exited ${code}: ${stderr}`)),
    ),
  );
  done.catch(() => {}); // the test awaits it once it has started what it races
  return {
    child,
    ready: Promise.race([ready, done.then(() => undefined)]),
    done,
    kill: () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
