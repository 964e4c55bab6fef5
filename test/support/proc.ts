/**
 * Where a child process waits, read from Linux's /proc, so that a test signals a child once it has reached a wait, not
 * while it is still starting (however slow the machine): what its event loop polls, what it has open, and whether a
 * thread of it is blocked opening a FIFO. Elsewhere (no /proc) each tells nothing: empty, false.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

const list = (dir: string): string[] => {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
};

const link = (path: string): string | undefined => {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
};

/** The descriptors of `pid` whose link is `path` (a file it has open). */
export function openAt(pid: number, path: string): number[] {
  return list(`/proc/${pid}/fd`)
    .filter((fd) => link(`/proc/${pid}/fd/${fd}`) === path)
    .map(Number);
}

/**
 * The descriptors an epoll set of `pid` watches (the `tfd` lines of its fdinfo): what its event loop waits on. A
 * stream Node reads, standard input's pipe included, is there once its read has begun, not before.
 */
export function polledFds(pid: number): number[] {
  const fds: number[] = [];
  for (const fd of list(`/proc/${pid}/fd`)) {
    if (link(`/proc/${pid}/fd/${fd}`) !== 'anon_inode:[eventpoll]') continue;
    let info = '';
    try {
      info = readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    } catch {
      continue;
    }
    for (const m of info.matchAll(/^tfd:\s+(\d+)\s/gm)) fds.push(Number(m[1]));
  }
  return fds;
}

/** Whether a thread of `pid` is blocked opening a FIFO that has no writer (its wchan is `wait_for_partner`). */
export function blockedOpeningFifo(pid: number): boolean {
  return list(`/proc/${pid}/task`).some((task) => {
    try {
      return readFileSync(`/proc/${pid}/task/${task}/wchan`, 'utf8') === 'wait_for_partner';
    } catch {
      return false;
    }
  });
}

/** Polls `done` every 10 ms until it holds; throws after `ms`, naming `what`. */
export async function until(done: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
