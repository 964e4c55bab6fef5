/**
 * The calling thread's own on-CPU time, for figures that must not count the time a thread waited for a core.
 *
 * Event-loop utilization (what the concurrency suite's `mainThreadMicros` is made of) counts as busy every moment the
 * loop was inside a callback, preempted or not: on a machine whose cores are shared with other work it reads the wall
 * clock of the callbacks, and a cut of the main thread's CPU path can vanish in the time it waited for a core. The
 * kernel keeps each thread's own time on a CPU: `/proc/thread-self/schedstat`'s first field (nanoseconds, the
 * scheduler's exact sum), or failing that `/proc/thread-self/stat`'s utime + stime (clock ticks, 10 ms each at the
 * usual USER_HZ of 100). Elsewhere than Linux neither exists and the reading is `undefined`.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's `stat` times (USER_HZ): 100 on every Linux architecture Node runs on. */
const USER_HZ = 100;

function fromSchedstat(): number | undefined {
  try {
    const first = readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ', 1)[0]!;
    const ns = Number(first);
    return Number.isSafeInteger(ns) && ns >= 0 ? ns : undefined;
  } catch {
    return undefined;
  }
}

function fromStat(): number | undefined {
  try {
    const text = readFileSync('/proc/thread-self/stat', 'latin1');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name (field 3 is the first).
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isSafeInteger(ticks) && ticks >= 0 ? (ticks * 1e9) / USER_HZ : undefined;
  } catch {
    return undefined;
  }
}

let source: (() => number | undefined) | undefined | null;

/**
 * The calling thread's on-CPU time so far, nanoseconds, or `undefined` where the platform does not tell it. Only
 * differences of two readings on the same thread mean anything.
 */
export function threadCpuNanos(): number | undefined {
  if (source === undefined) {
    if (fromSchedstat() !== undefined) source = fromSchedstat;
    else if (fromStat() !== undefined) source = fromStat;
    else source = null;
  }
  return source === null ? undefined : source();
}
