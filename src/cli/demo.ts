/** `handoff-ledger demo [--root DIR] [--host ID]`: runs the end-to-end demo on the embedded store. */
import { runDemo } from './demo-scenario.js';
import { defaultRoot } from '../ledger/open.js';
import { LedgerError } from '../errors.js';
import { EXIT_OK, usableHashFromEnv, InterruptedError, parse, reportError, wantsJson, type CliIo } from './io.js';
import { stopSignals } from './stop-signals.js';

/**
 * @returns 0 when every step ran and every check held; 1 on a refused ledger operation; 2 otherwise; 130 / 143 when
 *   SIGINT / SIGTERM stopped it (at an open of the store, a compaction's publish before its append commits, or its next
 *   step: the ledger closed and the temporary project directory removed; what it published before stays)
 */
export async function run(argv: string[], io: CliIo): Promise<number> {
  // SIGINT / SIGTERM end the demo at its next safe point, as they end every command on a store while it opens it; a
  // second signal, of either kind, ends the process at once (stopSignals).
  const stop = stopSignals('demo');
  try {
    const { values } = parse(argv, { root: { type: 'string' }, host: { type: 'string' } });
    // The host as every command takes it (--host, then HANDOFF_LEDGER_HOST); the machine's name is not the default
    // here: the demo names its host, so a demo run on a real store adds a key that says it came from the demo.
    const host = values.host ?? (io.env.HANDOFF_LEDGER_HOST || 'demo-host');
    // The BLAKE3 backend as every command takes it: HANDOFF_LEDGER_HASH, an unknown one refused before anything is made.
    const hash = await usableHashFromEnv(io.env);
    // Run by `npm start` in a checkout, where the `handoff-ledger` command is not installed: the last line, how to look
    // at what it wrote, names the command as it runs there.
    const cli =
      io.env.npm_lifecycle_event === 'start' && io.env.npm_package_name === 'handoff-ledger'
        ? 'node dist/src/cli/main.js'
        : 'handoff-ledger';
    // The log's name as every command takes it: an exported HANDOFF_LEDGER_ORIGIN names the store the demo makes
    // (a made-up name would have every later command with it refused) and must match an existing store's.
    const origin = io.env.HANDOFF_LEDGER_ORIGIN || undefined;
    await runDemo({
      root: values.root ?? defaultRoot(io.env),
      host,
      hash,
      origin,
      cli,
      out: io.stdout,
      signal: stop.signal,
    });
    return EXIT_OK;
  } catch (err) {
    const stoppedBy = stop.stoppedBy();
    if (stoppedBy !== undefined && err instanceof LedgerError && err.code === 'CANCELLED')
      return reportError(
        new InterruptedError(
          stoppedBy,
          `demo interrupted by ${stoppedBy}; its temporary project directory was removed (what it published before stays in the store)`,
          { cause: err },
        ),
        io,
      );
    // The demo prints no JSON, but a usage error is one with --json as for every command (the parse refuses --json).
    return reportError(err, io, wantsJson(argv));
  } finally {
    stop.dispose();
  }
}
