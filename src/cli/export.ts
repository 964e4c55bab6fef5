/**
 * `handoff-ledger export [--principal P] [--session S] --out DIR [--with-blobs] [--root R] [--json]`:
 * writes an audit bundle. Trust keys are not part of it: auditors get them from `keys export`,
 * out of band. Exit 0 written, 1 a coded ledger error, 2 usage or I/O error; 130 / 143 stopped by SIGINT (Ctrl-C) /
 * SIGTERM before it began to publish the bundle: its staging directory and its claim on --out are removed, so the
 * same command can simply be run again (a second signal, of either kind, ends the process at once, as without a
 * handler).
 */
import { auditUsage } from '../../manifests/audit/errors.js';
import { exportBundleAs, isInsideRoot, type ExportWords } from '../ops/export.js';
import { LedgerError } from '../errors.js';
import {
  postgresUrl,
  EXIT_OK,
  openFromArgs,
  parse,
  readRegularFile,
  reportError,
  storeOptions,
  UsageError,
  CommandLineError,
  wantsJson,
  writeJson,
  type CliIo,
} from './io.js';
import {
  counted,
  pastableShellWord,
  printableLines,
  printableOnceLines,
  quoted,
} from '../../manifests/encoding/printable.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { SIGNAL_EXITS, stopSignals } from './stop-signals.js';

/** The export's refusals name its options as the command's flags (`--since`), not as the library's (`since`). */
const CLI_WORDS: ExportWords = { since: '--since' };

export const usage =
  'export [--principal P] [--session S] --out DIR [--with-blobs] [--since FILE] [--root DIR] [--host ID] [--postgres URL] [--origin NAME] [--json]';

const MAX_SINCE_BYTES = 64 * 1024;

/**
 * An auditor's earlier checkpoint note (a few hundred bytes): a regular file of at most 64 KiB. A FIFO, a device
 * (`--since /dev/zero`) or a directory is `not a regular file` at once, never waited on or read.
 * @throws AuditError `USAGE`
 */
export async function readSince(path: string): Promise<string> {
  try {
    const bytes = await readRegularFile(path, MAX_SINCE_BYTES, () => new UsageError('over 64 KiB'));
    return bytes.toString('utf8');
  } catch (err) {
    throw auditUsage(`--since ${quoted(path)}: ${errnoText(err)}`, { cause: err });
  }
}

/** Runs `export`; returns the exit code. */
export async function run(argv: string[], io: CliIo): Promise<number> {
  let json = wantsJson(argv);
  try {
    const { values, positionals } = parse(
      argv,
      {
        ...storeOptions,
        principal: { type: 'string' },
        session: { type: 'string' },
        out: { type: 'string' },
        'with-blobs': { type: 'boolean', default: false },
        since: { type: 'string' },
      },
      true,
    );
    json = values.json;
    // An argument it takes none of, a required option left out: a command line of the wrong shape.
    if (positionals.length > 0) throw new CommandLineError(`usage: handoff-ledger ${usage}`);
    if (!values.out) throw new CommandLineError('--out DIR is required');
    const since = values.since === undefined ? undefined : await readSince(values.since);
    // SIGINT/SIGTERM end the open (nothing done), or cancel the export, which then removes its staging directory and
    // its claim on --out; a second signal, of either kind, ends the process at once (stopSignals).
    const stop = stopSignals('export');
    let ledger;
    try {
      ledger = await openFromArgs(values, io, stop);
    } catch (err) {
      stop.dispose();
      throw err;
    }
    try {
      // The operator's mistake, refused as `keys export --out` refuses it (USAGE, exit 2) before the library's own
      // refusal (INVALID_ARGUMENT, for library callers) is reached. The store manages what is there (an open clears its
      // tmp/ whole): the evidence would not be safe there.
      if (await isInsideRoot(ledger.root, values.out))
        throw new UsageError(
          `--out ${quoted(values.out)} is inside the store root ${quoted(ledger.root)}, whose files the store manages (its keys, its log, staging files an open clears): export the bundle outside it`,
        );
      const result = await exportBundleAs(
        ledger,
        {
          signal: stop.signal,
          out: values.out,
          ...(values.principal !== undefined ? { principal: values.principal } : {}),
          ...(values.session !== undefined ? { session: values.session } : {}),
          withBlobs: values['with-blobs'],
          ...(since !== undefined ? { since } : {}),
        },
        CLI_WORDS,
      );
      for (const b of result.unavailableBlobs)
        io.stderr.write(
          printableLines([`handoff-ledger: blob ${b.digest} not exported (${b.code}); verify will report it`]),
        );
      const { counts } = result.header;
      if (json) writeJson(io.stdout, result);
      else {
        // The command that exports this store's keys, run as it is: the --root and --host given here (not the default
        // store), and --postgres named, not its URL (which may carry a password). A value that cannot be shown as a
        // word to paste (a control character or line break in it: printed escaped, it would be other text) is a
        // placeholder, named after the command quoted.
        const unpastable: string[] = [];
        const word = (value: string, placeholder: string) => {
          const w = pastableShellWord(value);
          if (w === undefined) unpastable.push(`${placeholder} is ${quoted(value)}`);
          return w ?? placeholder;
        };
        const keysExport = [
          'handoff-ledger keys export',
          ...(values.root !== undefined ? ['--root', word(values.root, 'ROOT')] : []),
          ...(values.host !== undefined ? ['--host', word(values.host, 'HOST')] : []),
          ...(values.postgres !== undefined ? ['--postgres URL'] : []),
        ].join(' ');
        const named = unpastable.length > 0 ? ` (${unpastable.join(', ')})` : '';
        // A shared PostgreSQL store's bundle holds every host's manifests and checkpoints: each host's keys are needed.
        const whose = postgresUrl(values, io.env)
          ? "every host's public keys (each host's own keys export: verify takes one --trust per file); this host's"
          : "this host's public keys";
        // The bundle's directory quoted, as a refusal names it; each line escaped once (printable would double the
        // backslashes of its quotes, and of a shell word's '\'').
        io.stdout.write(
          printableOnceLines([
            `exported ${counted(counts.manifests, 'manifest')} in ${counted(counts.chains, 'chain')}${counts.blobs !== undefined ? ` and ${counted(counts.blobs, 'blob')}` : ''} to ${quoted(result.dir)}`,
            `auditors also need ${whose}: ${keysExport}${named}`,
          ]),
        );
      }
      return EXIT_OK;
    } catch (err) {
      const stoppedBy = stop.stoppedBy();
      if (stoppedBy === undefined || !(err instanceof LedgerError) || err.code !== 'CANCELLED') throw err;
      reportError(
        new LedgerError('CANCELLED', `export interrupted by ${stoppedBy}; no bundle was written`, { cause: err }),
        io,
        json,
      );
      return SIGNAL_EXITS[stoppedBy];
    } finally {
      stop.dispose();
      await ledger.close();
    }
  } catch (err) {
    return reportError(err, io, json);
  }
}
