/**
 * Model-based test of the ledger: fast-check draws sequences of the public operations (test/support/ledger-model.ts)
 * and runs each against a real ledger, on the embedded store and on PostgreSQL, and a small model of what README says
 * they do; each command checks the real answer against the model. The seed varies from run to run; a failure prints
 * the shrunk sequence with its seed, path and replayPath:
 * `HL_MODEL_SEED=<seed> HL_MODEL_PATH=<path> HL_MODEL_REPLAY=<replayPath> npx vitest run test/model-based.test.ts`
 * replays it. HL_MODEL_RUNS=<n> runs n sequences per backend (a soak), HL_MODEL_STATS=1 prints how often each
 * command ended each way (what the runs reached).
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import type { Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import type { OpenLedgerOptions } from '../src/ledger/options.js';
import { commandArbs, emptyModel, outcomes, INLINE_BYTES, MAX_BYTES, type Real } from './support/ledger-model.js';
import { describePostgres } from './support/postgres.js';
import { tempDir } from './support/tmp.js';

const RUNS = Number(process.env.HL_MODEL_RUNS ?? 25);
const MAX_COMMANDS = 30;
/** Generous: a default run takes a few seconds on each backend; HL_MODEL_RUNS scales it. */
const TIMEOUT_MS = 60_000 + RUNS * 5_000;
const replay =
  process.env.HL_MODEL_SEED !== undefined
    ? {
        seed: Number(process.env.HL_MODEL_SEED),
        ...(process.env.HL_MODEL_PATH ? { path: process.env.HL_MODEL_PATH } : {}),
      }
    : {};

/** Runs the model against ledgers `open` opens, a fresh store for each sequence. */
async function runModel(fresh: () => { open: (extra: Partial<OpenLedgerOptions>) => Promise<Ledger> }): Promise<void> {
  await fc.assert(
    fc.asyncProperty(
      fc.commands(commandArbs, {
        maxCommands: MAX_COMMANDS,
        size: 'max',
        ...(process.env.HL_MODEL_REPLAY ? { replayPath: process.env.HL_MODEL_REPLAY } : {}),
      }),
      async (cmds) => {
        const { open } = fresh();
        const options = { inlineSummaryBytes: INLINE_BYTES, maxSummaryBytes: MAX_BYTES, onNotice: () => {} };
        const real: Real = {
          ledger: await open(options),
          bundles: tempDir('hl-model-bundles-'),
          async reopen() {
            await real.ledger.close();
            real.ledger = await open(options);
          },
        };
        try {
          await fc.asyncModelRun(() => ({ model: emptyModel(real.ledger.keyId), real }), cmds);
        } finally {
          await real.ledger.close().catch(() => {});
        }
      },
    ),
    { numRuns: RUNS, ...replay },
  );
  if (process.env.HL_MODEL_STATS === '1')
    console.log(
      [...outcomes]
        .sort()
        .map(([k, n]) => `${n}\t${k}`)
        .join('\n'),
    );
  outcomes.clear();
}

describe('model-based: embedded store', () => {
  it(
    'random sequences of publish, resume, history, grants, keys, export, gc, fsck, checkpoints and reopen agree with the model',
    async () => {
      await runModel(() => {
        const root = `${tempDir('hl-model-')}/store`;
        return { open: (extra) => openLedger({ root, host: 'model-host', ...extra }) };
      });
    },
    TIMEOUT_MS,
  );
});

let schemas = 0;
describePostgres('model-based: PostgreSQL', (pg) => {
  it(
    'random sequences of publish, resume, history, grants, keys, export, gc, fsck, checkpoints and reopen agree with the model',
    async () => {
      await runModel(() => {
        const root = `${tempDir('hl-model-pg-')}/store`;
        const schema = `model_${process.pid}_${schemas++}`;
        return {
          open: (extra) =>
            openLedger({
              root,
              host: 'model-host',
              postgres: { connectionString: pg.connectionString, schema },
              ...extra,
            }),
        };
      });
    },
    TIMEOUT_MS,
  );
});
