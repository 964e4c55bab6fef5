/** The core commands: init, publish, resume, history. */
import { closeSync, constants, createReadStream, fstatSync, open as openFd } from 'node:fs';
import { Socket } from 'node:net';
import { isatty, ReadStream } from 'node:tty';
import { LedgerError } from '../errors.js';
import { errorText, escapedText, isErrnoError } from '../../store/errors.js';
import { parsePublishScope } from '../ledger/scope.js';
import { parseExpectedPrev } from '../ledger/ledger.js';
import { DEFAULT_MAX_SUMMARY_BYTES, prepareSummary } from '../summary/summary.js';
import {
  checkOpenArgs,
  withLedger,
  EXIT_OK,
  InterruptedError,
  openFromArgs,
  parse,
  readLimited,
  reportError,
  storeOptions,
  UsageError,
  CommandLineError,
  wholeNumber,
  writeJson,
  WordedIoError,
  type CliIo,
} from './io.js';
import {
  printable,
  printableLines,
  printableOnceLines,
  printableRow,
  quoted,
} from '../../manifests/encoding/printable.js';
import { errnoText } from '../../store/fs/errno-text.js';
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
    // The root quoted, as a refusal names it (`quoted`), escaped once (printable again would double its backslashes).
    else
      io.stdout.write(
        printableOnceLines([
          `store ready at ${quoted(info.root)}`,
          `host ${printable(info.host)}, signing key ${printable(info.keyId)}`,
        ]),
      );
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
  if (value === undefined) throw new CommandLineError(`--${name} is required`);
  return value;
}

/** What publish reads, as its refusal of text that is not a summary says (an operator piped plain text, or an error). */
const SUMMARY_FORM =
  'publish takes a summary object as JSON text, e.g. {"task": "…", "state": "…", "nextSteps": ["…"]} ' +
  '(README, "Summary schema (v1)")';

export async function publish(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { ...scopeOptions, run: { type: 'string' }, 'max-bytes': { type: 'string' }, 'expected-prev': { type: 'string' } },
    true,
  );
  // SIGINT / SIGTERM are heard from here, before the summary is read: a wait for standard input's or a FIFO's writer
  // ends at the first of either, the command having done nothing (CANCELLED, exit 130 / 143); then they end the open
  // (nothing done), or the publish before its append commits (nothing published: the library's CANCELLED); one that
  // comes after the commit changes nothing, the receipt is printed and the exit is 0, for the summary is published.
  // A second signal, of either kind, ends the process at once (stopSignals).
  const stop = stopSignals('publish');
  try {
    const principal = need(values.principal, 'principal');
    const session = need(values.session, 'session');
    const run = need(values.run, 'run');
    const maxSummaryBytes =
      values['max-bytes'] === undefined
        ? DEFAULT_MAX_SUMMARY_BYTES
        : wholeNumber(values['max-bytes'], '--max-bytes', 1, Number.MAX_SAFE_INTEGER, 'bytes');
    if (positionals.length > 1) throw new CommandLineError('publish takes at most one FILE (default: standard input)');
    // The ids and --expected-prev as publish judges them, before the summary is read: a summary piped from a model
    // call is not taken in vain by a command that was refused anyway.
    parsePublishScope({ principal, session, run });
    const prev = values['expected-prev'];
    const expectedPrev = parseExpectedPrev(prev === 'null' ? null : prev); // `null`: an empty chain
    // The host, the options and the variables every command on a store reads (HANDOFF_LEDGER_TRUST's file, the
    // witnesses, the origin, the connection string, a `native` or `wasm` hash backend that cannot load here), as the
    // open will judge them: before the read too. The open then takes the trust read here.
    const openExtra = await checkOpenArgs(values, io, { maxSummaryBytes, createHostKey: true });
    const file = positionals[0] === '-' ? undefined : positionals[0];
    // JSON text can be larger than its canonical form: up to 6 times when every character is written as a \u
    // escape (as Python's json.dumps writes non-ASCII text), plus whitespace. Beyond that it cannot fit the limit,
    // and it is refused before it is buffered, with the same code as a summary a little over it.
    const rawLimit = maxSummaryBytes * 6 + 4096;
    const input = file ?? io.stdin;
    if (input === undefined) throw new UsageError('no summary given: pass FILE or pipe JSON on standard input');
    const raw = await readSummary(input, rawLimit, stop.signal).catch((err: unknown) => {
      const stoppedBy = stop.stoppedBy();
      if (stoppedBy !== undefined)
        throw new InterruptedError(
          stoppedBy,
          `publish interrupted by ${stoppedBy} while reading the summary, before it began; nothing was published`,
          { cause: err },
        );
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
      throw new LedgerError('SUMMARY_INVALID', `the summary is not valid UTF-8 text; ${SUMMARY_FORM}`, { cause: err });
    }
    // Nothing at all (a model call that answered nothing, piped in) is an empty summary, not a malformed one.
    if (/^[ \t\r\n]*$/.test(text))
      throw new LedgerError('SUMMARY_EMPTY', `the summary input is empty (${file ? 'FILE' : 'standard input'})`);
    try {
      summary = JSON.parse(text);
    } catch (err) {
      // JSON.parse's own words (where it stopped; V8 quotes the start of the text too): the input's, escaped and cut.
      const why = err instanceof SyntaxError ? `: ${escapedText(errorText(err, 160))}` : '';
      throw new LedgerError('SUMMARY_INVALID', `the summary is not JSON${why}; ${SUMMARY_FORM}`, { cause: err });
    }
    // Judged as publish judges it (schema, content, size) before the store is opened: the open makes a store on a new
    // root and a key for a new --host, which a refused summary would otherwise leave behind. (A summary of a million
    // characters or more has its exact canonical size judged as it is written, as publish does.)
    prepareSummary(summary, maxSummaryBytes);
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
      openExtra,
    );
  } catch (err) {
    return reportError(err, io, values.json);
  } finally {
    stop.dispose();
  }
}

/**
 * Reads the summary `publish` was given, FILE (a path) or standard input, within `maxBytes` (`readLimited`:
 * UsageError over it; `CANCELLED` once `signal` aborts, the stream destroyed).
 *
 * FILE is read as a stream, as standard input is, with the same bound: a FIFO, or a pipe a shell's process
 * substitution names (`publish … <(model-call)`), is read to its end, waiting for its writer as standard input waits
 * for its pipe's; a device too (/dev/zero: over the bound). It is opened without blocking, and a FIFO is read through
 * the event loop, as a pipe on standard input is: a blocking open(2) or read(2) of a FIFO whose writer has not come,
 * or writes nothing, would wait in a thread of libuv's pool, where the signal cannot end it, and would hold up the
 * process's exit after the signal too. (A FIFO opened without blocking reports no end until a writer has come and
 * gone, so the wait for its first writer stays a wait.)
 */
async function readSummary(
  input: string | NodeJS.ReadableStream,
  maxBytes: number,
  signal: AbortSignal,
): Promise<Buffer> {
  if (typeof input !== 'string') return readLimited(input, maxBytes, signal);
  try {
    const fd = await new Promise<number>((resolve, reject) =>
      openFd(input, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY, (err, fd) =>
        err ? reject(err) : resolve(fd),
      ),
    );
    let stream: NodeJS.ReadableStream;
    try {
      stream = fstatSync(fd).isFIFO()
        ? new Socket({ fd, readable: true, writable: false })
        : isatty(fd)
          ? new ReadStream(fd)
          : createReadStream(input, { fd });
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    return await readLimited(stream, maxBytes, signal);
  } catch (err) {
    throw isErrnoError(err) ? summaryFileError(input, err) : err;
  }
}

/**
 * A summary file that cannot be opened or read (absent, a directory, no permission): still an I/O failure (`IO_FAILED`,
 * its errno's code kept), named as every file the CLI is given is named: its path quoted and the failure by its code
 * (`cannot read summary file "s.json": ENOENT (no such file or directory)`), not by the errno's own message, which
 * repeats the path raw (or, for a read, names none).
 */
function summaryFileError(path: string, err: NodeJS.ErrnoException): Error {
  return Object.assign(new WordedIoError(`cannot read summary file ${quoted(path)}: ${errnoText(err)}`, err), { path });
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
