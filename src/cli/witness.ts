/**
 * `handoff-ledger witness keygen --name NAME --out FILE` and `handoff-ledger witness serve --listen
 * HOST:PORT --key FILE --logs LOGS.json --state DIR`: a C2SP tlog-witness for ledgers (and any C2SP log).
 * Both print the witness's verifier key, the string log operators and auditors pin.
 */
import type { AddressInfo } from 'node:net';
import { createWitnessKeyFile, loadWitnessKeyFile, type WitnessKey } from '../witness/key.js';
import { MAX_WITNESS_LOGS_BYTES, parseWitnessLogs } from '../witness/logs.js';
import { createWitnessServer, type WitnessServer } from '../witness/server.js';
import { WitnessState } from '../witness/state.js';
import {
  CommandLineError,
  EXIT_OK,
  onStopSignal,
  parse,
  readRegularFile,
  reportError,
  UsageError,
  wholeNumber,
  writeJson,
  type CliIo,
} from './io.js';
import { isErrnoError, shownValue } from '../../store/errors.js';
import { printable, printableLines, quoted } from '../../manifests/encoding/printable.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { MAX_TIMER_MS } from '../../store/abort.js';

export const usage =
  'witness (keygen --name NAME --out FILE [--json] | serve --listen HOST:PORT --key FILE --logs LOGS.json --state DIR [--max-body-bytes N] [--request-timeout-ms N])';

/** An optional numeric option of serve: `fallback` when absent, else `wholeNumber` from 1 to `max`. */
function optionalCount(text: string | undefined, name: string, fallback: number, max: number, unit: string): number {
  return text === undefined ? fallback : wholeNumber(text, name, 1, max, unit);
}

/** `--listen HOST:PORT`: PORT read as every number of the CLI is (`wholeNumber`), 0 (any free port) to 65535. */
function listenAddress(text: string): { host: string; port: number } {
  const m = /^(127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0|\[::\]|[A-Za-z0-9.-]+):([^:]*)$/.exec(text);
  if (!m) throw new UsageError('--listen must be HOST:PORT (PORT 0: any free port)');
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: wholeNumber(m[2]!, "--listen's PORT", 0, 65535) };
}

/**
 * The logs file, `--logs`: a regular file of at most 16 MiB (a witness follows a few logs). A device (`/dev/zero`),
 * a FIFO, a larger file or one that cannot be read is `USAGE` (README, error codes), refused before it is read whole.
 */
async function readLogsFile(path: string): Promise<string> {
  try {
    return (await readRegularFile(path, MAX_WITNESS_LOGS_BYTES)).toString('utf8');
  } catch (err) {
    if (!(err instanceof UsageError) && !isErrnoError(err)) throw err;
    throw new UsageError(`--logs ${quoted(path)}: ${errnoText(err)}`, { cause: err });
  }
}

export const keygenOptions = {
  name: { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

async function keygen(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, keygenOptions);
  try {
    // A required option left out: a command line of the wrong shape, which points to the command's help.
    if (!values.name || !values.out) throw new CommandLineError(`usage: handoff-ledger ${usage}`);
    const key = await createWitnessKeyFile(values.out, values.name);
    // createWitnessKeyFile took only a name that prints as it is; escaped all the same, like all data.
    if (values.json) writeJson(io.stdout, { vkey: key.vkey, name: values.name, out: values.out });
    else io.stdout.write(printableLines([key.vkey]));
    return EXIT_OK;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return reportError(
        new UsageError(`${quoted(values.out!)} exists: a witness key is never replaced`),
        io,
        values.json,
      );
    return reportError(err, io, values.json);
  }
}

export const serveOptions = {
  listen: { type: 'string' },
  key: { type: 'string' },
  logs: { type: 'string' },
  state: { type: 'string' },
  'max-body-bytes': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
} as const;

/**
 * The witness key, `--key`: a missing file is `USAGE` (README, error codes); the key file's own refusals
 * (`KEY_INVALID`, `KEY_FILE_UNSAFE`, `STORAGE_FAILED` for one that cannot be read) are reported as they are.
 */
async function loadKeyFile(path: string): Promise<WitnessKey> {
  try {
    return await loadWitnessKeyFile(path);
  } catch (err) {
    if (isErrnoError(err)) throw new UsageError(`--key ${quoted(path)}: ${errnoText(err)}`, { cause: err });
    throw err;
  }
}

async function serve(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, serveOptions);
  let state: WitnessState | undefined;
  let server: WitnessServer | undefined;
  try {
    if (!values.listen || !values.key || !values.logs || !values.state)
      throw new CommandLineError(`usage: handoff-ledger ${usage}`);
    const { host, port } = listenAddress(values.listen);
    const maxBodyBytes = optionalCount(
      values['max-body-bytes'],
      '--max-body-bytes',
      64 * 1024,
      Number.MAX_SAFE_INTEGER,
      'bytes',
    );
    // A timer past 2^31 − 1 ms fires after 1 ms: every request would be answered 408 at once.
    const requestTimeoutMs = optionalCount(
      values['request-timeout-ms'],
      '--request-timeout-ms',
      10_000,
      MAX_TIMER_MS,
      'milliseconds',
    );
    const key = await loadKeyFile(values.key);
    const logs = parseWitnessLogs(await readLogsFile(values.logs));
    // The state directory is made (and locked) only once the port is ours: a start refused before it listens (the
    // port in use) leaves no directory behind. A request that comes in meanwhile waits for the state.
    const stateDir = values.state;
    let listening!: () => void;
    // Awaited below once it begins (the server handles a failure of its own: a request that finds it failed is 500).
    // Bound to the key: a state another witness key wrote is refused (WITNESS_KEY_MISMATCH).
    const opening = new Promise<void>((resolve) => (listening = resolve)).then(() =>
      WitnessState.open(stateDir, key.vkey),
    );
    const created = createWitnessServer({
      signer: key.signer,
      logs,
      state: opening,
      maxBodyBytes,
      requestTimeoutMs,
      // Origins and reasons come from requests: data, escaped; an origin no log of ours has may be as long as a
      // request's body (64 KiB a line for every request): its first 200 characters (shownValue: `…` after the quote).
      onRequest: (e) =>
        io.stderr.write(
          `witness: ${e.status}${e.origin !== undefined ? ` ${shownValue(e.origin, 200)}` : ''}${e.reason ? ` ${printable(e.reason)}` : ''}\n`,
        ),
    });
    server = created;
    await new Promise<void>((resolve, reject) => {
      created.once('error', reject);
      created.listen(port, host, resolve);
    }).catch((err: NodeJS.ErrnoException) => {
      // The operator's HOST:PORT quoted, as every value of theirs a refusal names; the failure by its code.
      throw new UsageError(`cannot listen on ${quoted(values.listen!)}: ${err.code ?? errnoText(err)}`, { cause: err });
    });
    listening();
    state = await opening;
    // A new state trusts every log afresh: said, since a witness that cosigned before and lost its state would
    // otherwise cosign a fork without a word. The path is the operator's: quoted, as a refusal names it.
    if (state.binding === 'created')
      io.stderr.write(
        `witness: a new state in ${quoted(stateDir)}: each log's first checkpoint is trusted as it comes (a witness that cosigned before must be given its own state back, not a new one)\n`,
      );
    else if (state.binding === 'adopted')
      io.stderr.write(
        `witness: the state in ${quoted(stateDir)} named no witness key (an earlier version wrote it): it is bound to this key now\n`,
      );
    const address = created.address() as AddressInfo;
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    // The first signal stops it; a second, of either kind, ends the process at once if the stopping hangs. Listened
    // for before the address is printed: a signal sent as soon as a caller reads it must find the listener.
    const stopped = new Promise<void>((stop) => onStopSignal(() => stop()));
    // The verifier key carries the name read from the key file: data, escaped.
    io.stdout.write(
      printableLines([
        `witness ${key.vkey}`,
        `listening on http://${shown}:${address.port} (${logs.size} ${logs.size === 1 ? 'log' : 'logs'}); Ctrl-C stops it`,
      ]),
    );
    await stopped;
    return EXIT_OK;
  } catch (err) {
    // As every command: a coded error or an I/O error (IO_FAILED) exit 1 or 2, anything else a bug (exit 70).
    return reportError(err, io);
  } finally {
    // Stopped, or failed once it listened (a bug): a server left listening would keep the process running.
    if (server) {
      const stopping = server;
      stopping.closeAllConnections();
      if (stopping.listening) await new Promise<void>((resolve) => stopping.close(() => resolve()));
      // A request whose connection just closed may still be signing or storing: the state (and its lock, which a
      // restarted witness takes) is closed only after it ended, so no write of this process lands after the release.
      await stopping.settled();
    }
    await state?.close();
  }
}

/** `witness keygen …` | `witness serve …` */
export async function run(argv: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'keygen') return keygen(rest, io);
  if (sub === 'serve') return serve(rest, io);
  // A subcommand left out or misspelt: a command line of the wrong shape, which points to the command's help.
  if (sub === undefined || sub.startsWith('-'))
    throw new CommandLineError(
      `witness needs a subcommand first${sub ? `, not ${quoted(sub)}` : ''}; usage: handoff-ledger ${usage}`,
    );
  throw new CommandLineError(`unknown witness subcommand ${quoted(sub)}; usage: handoff-ledger ${usage}`);
}
