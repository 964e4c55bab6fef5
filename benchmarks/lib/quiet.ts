/**
 * A quiet page cache for timed durable cases. On ext4 any fsync commits the journal for every file, and
 * with it other files' dirty data: a peer that never syncs (cacache) leaves writeback that would land on
 * the next durable case's clock and make that case look slower than it is, and the ledger's ratio to it
 * better. So each timed durable case starts after `sync(1)`, and the writeback a case leaves behind is
 * synced right after it, outside its timing, and reported beside it.
 */
import { execFileSync } from 'node:child_process';

/** Flushes every dirty page of the machine (`sync(1)`); returns the seconds it took. */
export function syncPageCache(): number {
  const t0 = performance.now();
  execFileSync('sync', { stdio: 'ignore' });
  return (performance.now() - t0) / 1000;
}
