/**
 * Whether a process of this host still runs: signal 0 checks without sending; EPERM means it runs under
 * another user. Lock files (the witness state directory's owner, trust.json.lock) judge a holder by it.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
