/** fsck and gc commands. */
import { fsck as runFsck, gc as runGc, GC_CANCELLED, parseDuration } from '../ops/maintenance.js';
import { LedgerError } from '../errors.js';
import { SIGNAL_EXITS, stopSignals } from './stop-signals.js';
import {
  colours,
  withLedger,
  EXIT_OK,
  EXIT_REFUSED,
  parse,
  reportError,
  storeOptions,
  UsageError,
  CommandLineError,
  writeJson,
  type CliIo,
} from './io.js';
import { counted, escapedOnce, printableRow, quoted } from '../../manifests/encoding/printable.js';

export async function fsck(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, { ...storeOptions, 'skip-blobs': { type: 'boolean', default: false } });
  try {
    // Opened to diagnose: a log that does not extend the pinned checkpoint is reported (PIN_MISMATCH), not refused. A
    // root that pins this log and holds no embedded log is the open's refusal (ROLLBACK, NOT_FOUND): there is no log
    // to report on, and the open writes nothing to the root to make one.
    return await withLedger(
      values,
      io,
      'fsck',
      async (ledger) => {
        const report = await runFsck(ledger, { checkBlobs: !values['skip-blobs'] });
        const recovery = ledger.recovery;
        if (values.json) writeJson(io.stdout, { ...report, recovery });
        else {
          if (recovery.stagingRemoved)
            io.stdout.write(
              `recovery: removed ${counted(recovery.stagingRemoved, 'staging file')} of interrupted writes\n`,
            );
          // A message quotes the values it names escaped already (shownValue, quoted): printed as it is, not escaped
          // again (which would double each backslash of its quotes), unless it holds a tab or anything raw.
          for (const f of report.findings)
            io.stdout.write(printableRow([f.code, f.session ?? '-', String(f.seq ?? '-'), escapedOnce(f.message)]));
          const paint = colours(io, io.stdout);
          io.stdout.write(
            `${report.ok ? paint.good('clean') : paint.bad(counted(report.findings.length, 'finding'))}: ${counted(report.chains, 'chain')}, ${counted(report.manifests, 'manifest')}, ${counted(report.blobsChecked, 'blob')} checked\n`,
          );
          io.stdout.write(`not verified: ${report.notVerified}\n`);
          // A key the trust does not list is most often another host's of a shared store whose keys this one was not
          // given: what to do, once, as resume and history say it.
          if (report.findings.some((f) => f.code === 'KEY_UNTRUSTED'))
            io.stdout.write(
              "hint: a key of another host (KEY_UNTRUSTED) is trusted once that host's keys export is given (HANDOFF_LEDGER_TRUST)\n",
            );
        }
        return report.ok && recovery.headProblems.length === 0 ? EXIT_OK : EXIT_REFUSED;
      },
      { diagnose: true },
    );
  } catch (err) {
    return reportError(err, io, values.json);
  }
}

export async function gc(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, {
    ...storeOptions,
    grace: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
  });
  try {
    if (values.grace === undefined) throw new CommandLineError('--grace DURATION is required (e.g. --grace 24h)');
    let graceMs: number;
    try {
      // Its number read as every number of the CLI is, plain digits (README: ` 5` is refused): parseDuration, the
      // library's, trims the text first.
      if (values.grace !== values.grace.trim()) throw new Error('blanks around it');
      graceMs = parseDuration(values.grace);
    } catch {
      // As every number's refusal (README, "CLI"): the option, its range and the text given.
      throw new UsageError(
        `--grace must be a duration from 0 to ${Number.MAX_SAFE_INTEGER} ms: a whole number and a unit, ms, s, m, h ` +
          `or d (none: s), not ${quoted(values.grace)} (e.g. 30m, 24h, 7d)`,
      );
    }
    // SIGINT/SIGTERM end the open (nothing done), then gc between blobs (a delete waiting behind a hung call on its
    // blob too): each blob is removed whole or kept, and the message counts those removed.
    const stop = stopSignals('gc');
    try {
      return await withLedger(values, io, stop, async (ledger) => {
        let report;
        try {
          report = await runGc(ledger, { graceMs, dryRun: values['dry-run'], signal: stop.signal });
        } catch (err) {
          const stoppedBy = stop.stoppedBy();
          if (stoppedBy === undefined || !(err instanceof LedgerError) || err.code !== 'CANCELLED') throw err;
          const message = err.message.startsWith(GC_CANCELLED)
            ? `gc interrupted by ${stoppedBy}${err.message.slice(GC_CANCELLED.length)}`
            : `gc interrupted by ${stoppedBy}: ${err.message}`;
          reportError(new LedgerError('CANCELLED', message, { cause: err }), io, values.json);
          return SIGNAL_EXITS[stoppedBy];
        } finally {
          stop.dispose();
        }
        if (values.json) writeJson(io.stdout, report);
        else {
          // A dry run lists what it would remove (its help says so); a real run only counts what it removed.
          if (values['dry-run']) for (const digest of report.removed) io.stdout.write(`${digest}\n`);
          io.stdout.write(
            `${values['dry-run'] ? 'would remove' : 'removed'} ${counted(report.removed.length, 'unreferenced blob')}; ${report.referenced} referenced, ${report.keptYoung} kept within the grace period\n`,
          );
        }
        return EXIT_OK;
      });
    } finally {
      stop.dispose();
    }
  } catch (err) {
    return reportError(err, io, values.json);
  }
}
