/**
 * Crash-test child (test/reliability/crash.test.ts). Loads the compiled ledger, says `loaded`, waits
 * for the store root on stdin (so the parent can start the next child's slow module loading while the previous
 * one runs), opens the store, then publishes in a loop until it is SIGKILLed: a few concurrent writers,
 * several sessions, sizes from 100 B to 12 MiB. Every receipt is written to stdout synchronously the
 * moment publish resolves: a line on stdout is an acknowledgement the store must never lose.
 *
 *   node crash-child.mjs <child-number> <seed> [mixed|large|staged]     then: <root>\n on stdin
 *
 * `large`: every summary is 9–12 MiB, so every publish streams its summary into the store and passes a
 * flush-behind fsync before its final one. `staged` (test/two-writers.test.ts): every summary is 128 KiB – 1 MiB,
 * over the inline bound, so every publish writes a staging file in the blob store.
 */
import { createInterface } from 'node:readline';
import { crashSummary, SESSIONS } from './crash-summary.mjs';
import { mulberry32 } from '../support/prng.mjs';
import { say as emit } from '../support/say.mjs';

const [childArg, seedArg, modeArg = 'mixed'] = process.argv.slice(2);
const child = Number(childArg);
const random = mulberry32(Number(seedArg));

/**
 * Mostly small summaries, some medium, a few near 2 MiB: the sizes a Harness really produces; and three in a
 * hundred of 9–12 MiB, which the ledger streams into the store with a flush-behind fsync along the way.
 */
function pickSize() {
  if (modeArg === 'large') return Math.floor(9 * 1024 * 1024 + random() * 3 * 1024 * 1024);
  if (modeArg === 'staged') return Math.floor(128 * 1024 + random() * 896 * 1024);
  const r = random();
  const [lo, hi] =
    r < 0.7
      ? [100, 8 * 1024]
      : r < 0.93
        ? [8 * 1024, 256 * 1024]
        : r < 0.97
          ? [256 * 1024, 2 * 1024 * 1024]
          : [9 * 1024 * 1024, 12 * 1024 * 1024];
  return Math.floor(lo * Math.pow(hi / lo, random()));
}

const { openLedger } = await import('../../dist/src/index.js');
emit({ t: 'loaded' });

const lines = createInterface({ input: process.stdin });
const root = await new Promise((resolve) => lines.once('line', resolve));
lines.close();

const ledger = await openLedger({ root, host: 'crash-host', maxSummaryBytes: 16 * 1024 * 1024, onNotice: () => {} });
emit({ t: 'open', recovery: ledger.recovery });

let n = 0;
async function writer() {
  for (;;) {
    const s = Math.floor(random() * SESSIONS);
    const scope = { principal: `owner-${s}`, session: `session-${s}`, run: `run-${child}` };
    const marker = `${child}.${n++}`;
    const size = pickSize();
    try {
      const r = await ledger.publish(scope, crashSummary(marker, size));
      emit({
        t: 'ack',
        session: scope.session,
        principal: scope.principal,
        seq: r.seq,
        id: r.id,
        digest: r.digest,
        size: r.size,
        marker,
        fill: size,
      });
    } catch (err) {
      emit({
        t: 'error',
        session: scope.session,
        marker,
        name: err?.name,
        code: err?.code,
        message: String(err?.message ?? err),
      });
      process.exit(3);
    }
  }
}
const writers = 1 + Math.floor(random() * 3);
for (let i = 0; i < writers; i++) void writer();
