/**
 * A quiet page cache for timed durable cases. On ext4 any fsync commits the journal for every file, and
 * with it other files' dirty data: a peer that never syncs (cacache) leaves writeback that would land on
 * the next durable case's clock and make that case look slower than it is, and the ledger's ratio to it
 * better. So each timed durable case starts after `sync(1)`, and the writeback a case leaves behind is
 * synced right after it, outside its timing, and reported beside it.
 *
 * `sync(1)` runs in one helper shell started once, not in a child forked for each call: a fork marks every
 * page of the benchmark process copy-on-write, and the case timed right after it paid a page fault for each
 * page it wrote first. On the shared 2-core VM that put 7–17 ms on the first publishes after a sync and
 * ~3 ms on the first raw write, against 3–4 ms and ~1 ms with the helper (benchmarks/README.md).
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';

type Helper = ChildProcessByStdio<Writable, Readable, null>;

let helper: Helper | undefined;
const replies: Array<(error?: Error) => void> = [];
let failed: Error | undefined;

function start(): Helper {
  // One line in, `sync`, one line out. The shell is not waited for: it ends with this process's stdin.
  const child = spawn('sh', ['-c', 'while read -r _; do sync || exit 1; echo synced; done'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let pending = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    pending += text;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      pending = pending.slice(nl + 1);
      replies.shift()?.();
    }
  });
  const fail = (error: Error) => {
    if (helper !== child) return;
    failed = error;
    helper = undefined;
    for (const reply of replies.splice(0)) reply(error);
  };
  child.on('error', fail);
  child.stdin.on('error', fail); // a write to a helper that died meanwhile
  child.on('exit', (code) => fail(new Error(`the sync helper ended (exit code ${code})`)));
  idle(child);
  return child;
}

/** The helper and its pipes (sockets): referenced while a reply is awaited, else they keep nothing alive. */
const handles = (child: Helper) => [child, child.stdout as unknown as Socket, child.stdin as unknown as Socket];

/** No reply awaited: the helper does not keep the process alive. */
function idle(child: Helper): void {
  for (const h of handles(child)) h.unref();
}

/** Flushes every dirty page of the machine (`sync(1)`); resolves with the seconds it took. */
export async function syncPageCache(): Promise<number> {
  if (failed) throw failed;
  const child = (helper ??= start());
  const t0 = performance.now();
  for (const h of handles(child)) h.ref();
  try {
    await new Promise<void>((resolve, reject) => {
      replies.push((error) => (error ? reject(error) : resolve()));
      child.stdin.write('sync\n');
    });
  } finally {
    if (replies.length === 0 && helper === child) idle(child);
  }
  return (performance.now() - t0) / 1000;
}
