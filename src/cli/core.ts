/** The core commands: init, publish, resume, history. */
import { createReadStream } from 'node:fs';
import { LedgerError } from '../errors.js';
import { isErrnoError } from '../../store/errors.js';
import { parsePublishScope } from '../ledger/scope.js';
import { parseExpectedPrev } from '../ledger/ledger.js';
import { DEFAULT_MAX_SUMMARY_BYTES, prepareSummary } from '../summary/summary.js';
import {
  withLedger,
  decimalOption,
  EXIT_OK,
  InterruptedError,
  openFromArgs,
  parse,
  readLimited,
  reportError,
  storeOptions,
  UsageError,
  writeJson,
  type CliIo,
} from './io.js';
import { printableLines, printableRow } from '../../manifests/encoding/printable.js';
import { stopSignals } from './stop-signals.js';

export async function init(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, storeOptions);
  try {
    const ledger = await openFromArgs(values, io, 'init', { createHostKey: true });
    const info = {
      root: ledger.root,
      host: ledger.host,
      keyId: ledger.keyId,
      hash: ledger.hashBackend.name,
      verifier: ledger.verifier.name,
      recovery: ledger.recovery,
    };
    await ledger.close();
    if (values.json) writeJson(io.stdout, info);
    else
      io.stdout.write(printableLines([`store ready at ${info.root}`, `host ${info.host}, signing key ${info.keyId}`]));
    return EXIT_OK;
  } catch (err) {
    return reportError(err, io, values.json);
  }
}

const scopeOptions = {
  ...storeOptions,
  principal: { type: 'string' },
  session: { type: 'string' },
} as const;

function need(value: string | undefined, name: string): string {
  if (value === undefined) throw new UsageError(`--${name} is required`);
  return value;
}

export async function publish(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { ...scopeOptions, run: { type: 'string' }, 'max-bytes': { type: 'string' }, 'expected-prev': { type: 'string' } },
    true,
  );
  try {
    const principal = need(values.principal, 'principal');
    const session = need(values.session, 'session');
    const run = need(values.run, 'run');
    const maxSummaryBytes =
      values['max-bytes'] === undefined
        ? DEFAULT_MAX_SUMMARY_BYTES
        : decimalOption(values['max-bytes'], 'max-bytes', 1, Number.MAX_SAFE_INTEGER);
    if (positionals.length > 1) throw new UsageError('publish takes at most one FILE (default: standard input)');
    // The ids and --expected-prev as publish judges them, before the summary is read: a summary piped from a model
    // call is not taken in vain by a command that was refused anyway.
    parsePublishScope({ principal, session, run });
    const prev = values['expected-prev'];
    const expectedPrev = parseExpectedPrev(prev === 'null' ? null : prev); // `null`: an empty chain
    const file = positionals[0];
    // FILE is read as a stream, as standard input is, with the same bound: a FIFO, or a pipe a shell's process
    // substitution names (`publish … <(model-call)`), is read to its end, waiting for its writer as standard input
    // waits for its pipe's (a signal ends the wait); a device too (/dev/zero: SUMMARY_TOO_LARGE at the bound).
    const input = file && file !== '-' ? createReadStream(file) : io.stdin;
    if (!input) throw new UsageError('no summary given: pass FILE or pipe JSON on standard input');
    // JSON text can be larger than its canonical form: up to 6 times when every character is written as a \u
    // escape (as Python's json.dumps writes non-ASCII text), plus whitespace. Beyond that it cannot fit the limit,
    // and it is refused before it is buffered, with the same code as a summary a little over it.
    const rawLimit = maxSummaryBytes * 6 + 4096;
    const raw = await readLimited(input, rawLimit).catch((err: unknown) => {
      // A read of FILE that fails (a directory: EISDIR) names it, as a failed open does (IO_FAILED).
      if (input !== io.stdin && isErrnoError(err) && err.path === undefined)
        throw Object.assign(new Error(`${err.message} '${file}'`, { cause: err }), { code: err.code, path: file });
      if (!(err instanceof UsageError)) throw err;
      throw new LedgerError(
        'SUMMARY_TOO_LARGE',
        `the summary input is over ${rawLimit} bytes: it cannot fit --max-bytes ${maxSummaryBytes}`,
      );
    });
    let summary: unknown;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch (err) {
      throw new LedgerError('SUMMARY_INVALID', 'the summary is not valid UTF-8 JSON', { cause: err });
    }
    // Nothing at all (a model call that answered nothing, piped in) is an empty summary, not a malformed one.
    if (/^[ \t\r\n]*$/.test(text))
      throw new LedgerError(
        'SUMMARY_EMPTY',
        `the summary input is empty (${file && file !== '-' ? 'FILE' : 'standard input'})`,
      );
    try {
      summary = JSON.parse(text);
    } catch (err) {
      throw new LedgerError('SUMMARY_INVALID', 'the summary is not valid UTF-8 JSON', { cause: err });
    }
    // Judged as publish judges it (schema, content, size) before the store is opened: the open makes a store on a new
    // root and a key for a new --host, which a refused summary would otherwise leave behind. (A summary of a million
    // characters or more has its exact canonical size judged as it is written, as publish does.)
    prepareSummary(summary, maxSummaryBytes);
    // SIGINT / SIGTERM end the open (nothing done), or the publish before its append commits (nothing published: the
    // library's CANCELLED); one that comes after the commit changes nothing, the receipt is printed and the exit is 0,
    // for the summary is published. A second signal, of either kind, ends the process at once (stopSignals).
    const stop = stopSignals('publish');
    try {
      return await withLedger(
        values,
        io,
        stop,
        async (ledger) => {
          let receipt;
          try {
            receipt = await ledger.publish({ principal, session, run }, summary, { expectedPrev, signal: stop.signal });
          } catch (err) {
            const stoppedBy = stop.stoppedBy();
            if (stoppedBy === undefined || !(err instanceof LedgerError) || err.code !== 'CANCELLED') throw err;
            throw new InterruptedError(
              stoppedBy,
              `publish interrupted by ${stoppedBy} before its append committed; nothing was published`,
              { cause: err },
            );
          }
          if (values.json) writeJson(io.stdout, receipt);
          else
            io.stdout.write(
              printableLines([
                `published ${session} seq ${receipt.seq}`,
                `manifest ${receipt.id}`,
                `summary  ${receipt.digest} (${receipt.size} bytes)`,
              ]),
            );
          // The receipt is out: from here a signal ends the process at once, as without a handler, the close's wait
          // for witnesses included (the summary is published; the next publish or checkpoint catches the witnesses up).
          stop.dispose();
          return EXIT_OK;
        },
        { maxSummaryBytes, createHostKey: true },
      );
    } finally {
      stop.dispose();
    }
  } catch (err) {
    return reportError(err, io, values.json);
  }
}

export async function resume(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, scopeOptions);
  try {
    const principal = need(values.principal, 'principal');
    const session = need(values.session, 'session');
    return await withLedger(values, io, 'resume', async (ledger) => {
      const resumed = await ledger.resume({ principal, session });
      if (!resumed) {
        io.stderr.write(printableLines([`session ${session} has no compaction yet`]));
        if (values.json) writeJson(io.stdout, null);
        return EXIT_OK;
      }
      if (values.json) writeJson(io.stdout, resumed);
      else writeJson(io.stdout, resumed.summary);
      return EXIT_OK;
    });
  } catch (err) {
    return reportError(err, io, values.json);
  }
}

export async function history(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, scopeOptions);
  try {
    const principal = need(values.principal, 'principal');
    const session = need(values.session, 'session');
    return await withLedger(values, io, 'history', async (ledger) => {
      const entries = await ledger.history({ principal, session });
      // As resume says it: an empty listing alone reads as a failure to list.
      if (entries.length === 0) io.stderr.write(printableLines([`session ${session} has no compaction yet`]));
      if (values.json)
        writeJson(
          io.stdout,
          entries.map((e) => ({ id: e.id, manifest: e.manifest })),
        );
      else
        for (const { id, manifest: m } of entries)
          // Who published each: in a shared session the owner or a grantee (--json: manifest.principal).
          io.stdout.write(
            printableRow([String(m.seq), m.createdAt, m.principal, m.host, m.run, id, `${m.summary.size} bytes`]),
          );
      return EXIT_OK;
    });
  } catch (err) {
    return reportError(err, io, values.json);
  }
}
