/** Shared plumbing of the CLI commands: I/O handles, option parsing, opening the ledger, error output. */
import { hostname } from 'node:os';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { HashBackendName } from '../../store/hash/backends.node.js';
import type { Readable, Writable } from 'node:stream';
import { MAX_TIMER_MS, onAbort } from '../../store/abort.js';
import { invalidIdMessage, isValidId } from '../../manifests/format/id-pattern.js';
import { isHandoffLedgerError, LedgerError } from '../errors.js';
import { errorText, isErrnoError, nearestName } from '../../store/errors.js';
import { readBoundedFile } from '../../store/fs/bounded-read.js';
import { errnoMessage } from '../../store/fs/errno-text.js';
import { AuditError } from '../../manifests/audit/errors.js';
import type { Ledger } from '../ledger/ledger.js';
import type { OpenLedgerOptions } from '../ledger/open.js';
import {
  printable,
  printableJson,
  printableLines,
  pastableShellWord,
  printableOnce,
  quoted,
} from '../../manifests/encoding/printable.js';
import { readWholeNumber } from '../../manifests/encoding/whole-number.js';

export interface CliIo {
  stdout: Writable;
  stderr: Writable;
  stdin?: NodeJS.ReadableStream;
  env: NodeJS.ProcessEnv;
  /** The command being run (`main` sets it): a refusal of its command line points to the command's help. */
  command?: string;
}

export type Command = (argv: string[], io: CliIo) => Promise<number>;

/** Exit codes (README, "CLI"): 0 success, 1 a refusal or finding (coded error), 2 usage or I/O error, 70 a bug. */
export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;
export const EXIT_USAGE = 2;
/** sysexits.h EX_SOFTWARE: an exception no command expected. */
export const EXIT_INTERNAL = 70;

export class UsageError extends Error {}

/**
 * A command line of the wrong shape: an unknown or repeated option, a missing value or required option, an empty
 * argument, a missing or unknown subcommand, a missing or extra argument. Its refusal says where the command's options
 * are listed (`help <command>`). A value of the right place that is refused for what it is (a number out of range, a
 * file that is not a regular file) is a plain UsageError.
 */
export class CommandLineError extends UsageError {}

/**
 * A failed read or write the command words itself (`cannot read summary file "s.json": ENOENT (no such file or
 * directory)`): `IO_FAILED` with its message as it is, and the errno's `code` kept (the cause is the errno error).
 * Any other errno error is worded by `errnoMessage` (its code, its system call and its paths quoted).
 */
export class WordedIoError extends Error {
  readonly code: string | undefined;
  constructor(message: string, cause: NodeJS.ErrnoException) {
    super(message, { cause });
    this.code = cause.code;
  }
}

/**
 * The CLI's own codes, beside those of the library's errors: `USAGE` (bad arguments; exit 2) and `IO_FAILED` (a
 * file, directory or stream the command was given could not be read or written, an `errno` error; exit 2).
 */
export type CliErrorCode = 'USAGE' | 'IO_FAILED';

export type StopSignal = 'SIGINT' | 'SIGTERM';

/** The shell's exit code for a process ended by a signal: 128 + its number. */
export const SIGNAL_EXITS: Readonly<Record<StopSignal, number>> = { SIGINT: 130, SIGTERM: 143 };

/**
 * A command stopped by SIGINT or SIGTERM: `CANCELLED` (its message says what was and was not done), which
 * `reportError` prints as it prints every error and answers with the signal's exit code, 130 / 143.
 */
export class InterruptedError extends LedgerError {
  constructor(
    readonly stoppedBy: StopSignal,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('CANCELLED', message, options);
  }
}

/**
 * Calls `onStop` on the first SIGINT or SIGTERM, whichever comes first, and from then on listens to neither: a second
 * signal of either kind (Ctrl-C twice, or Ctrl-C then `kill`) ends the process at once, as it would without a
 * handler, however long the stopping takes. Returns the function that removes the listeners (if no signal came).
 */
export function onStopSignal(onStop: (signal: StopSignal) => void): () => void {
  const signals: StopSignal[] = ['SIGINT', 'SIGTERM'];
  const listeners = signals.map((signal) => [signal, () => stopped(signal)] as const);
  const remove = () => {
    for (const [signal, listener] of listeners) process.removeListener(signal, listener);
  };
  const stopped = (signal: StopSignal) => {
    remove();
    onStop(signal);
  };
  for (const [signal, listener] of listeners) process.on(signal, listener);
  return remove;
}

export interface StopSignals {
  /** The command it stops, as its messages name it. */
  command: string;
  /** Aborted by the first SIGINT or SIGTERM (its reason: `<command> interrupted by <SIGNAL>`). */
  signal: AbortSignal;
  /** The signal that came, if any. */
  stoppedBy(): StopSignal | undefined;
  /** Takes the handlers off again (call once the operation has settled). */
  dispose(): void;
}

/**
 * SIGINT / SIGTERM as an AbortSignal (./stop-signals.ts): listens for both until `dispose()`; `command` names the
 * command in the abort's reason.
 */
export function stopSignals(command: string): StopSignals {
  const controller = new AbortController();
  let stoppedBy: StopSignal | undefined;
  const dispose = onStopSignal((signal) => {
    stoppedBy = signal;
    controller.abort(new Error(`${command} interrupted by ${signal}`));
  });
  return { command, signal: controller.signal, stoppedBy: () => stoppedBy, dispose };
}

/** `--json` before any `--`: known before the options are parsed, so that a parse error is printed as JSON too. */
export function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

export const storeOptions = {
  root: { type: 'string' },
  host: { type: 'string' },
  postgres: { type: 'string' },
  origin: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies ParseArgsConfig['options'];

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * The option parseArgs refused as unknown, as it was given (`unknown`: its name, `-x` of a group `-xyz`, `--name` of
 * `--name=value`) and the argument that held it (`arg`), from the tokens of a lenient parse: the name is taken whole,
 * whatever it holds (a quote, a space, a newline), where a pattern over Node's message cut it there. Undefined for any
 * other parse error, or when the lenient parse does not find the option Node's message names.
 */
function unknownOption(err: unknown, argv: string[], options: Options): { unknown: string; arg: string } | undefined {
  if ((err as { code?: unknown }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return undefined;
  const tokens = lenientTokens(argv, options);
  const token = tokens?.find((t) => t.kind === 'option' && !Object.hasOwn(options, t.name));
  if (token?.kind !== 'option' || !(err as Error).message.startsWith(`Unknown option '${token.rawName}'`))
    return undefined;
  return { unknown: token.rawName, arg: argv[token.index] ?? token.rawName };
}

/** The tokens of a lenient parse (nothing refused), as a strict one reads them; undefined if even that throws. */
function lenientTokens(argv: string[], options: Options) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: false, tokens: true }).tokens;
  } catch {
    return undefined;
  }
}

/**
 * parseArgs' refusal in the CLI's words, each value the user gave quoted once (`quoted`), the rest plain words: Node's
 * own messages put the argument in raw (`Unexpected argument 'x'. This command …`), and the reporter then escaped the
 * whole line, or spread one over three lines (an option's value that begins with a dash). An unknown option is named
 * with the option it is a slip of, or, for a command that takes arguments, with how to give it as one: after `--`, as
 * a shell word to paste when one can be shown clearly (`pastableShellWord`; a pasted `-- --$(id)` would run what it
 * names), else the argument quoted. Node's message as it is for a refusal that names no value of the user's (an
 * option's value missing, a value given to a boolean option).
 */
function commandLineRefusal(err: unknown, argv: string[], options: Options, allowPositionals: boolean): Error {
  const message = (err as Error).message;
  const code = (err as { code?: unknown }).code;
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    const token = lenientTokens(argv, options)?.find((t) => t.kind === 'positional');
    const named = token?.kind === 'positional' ? ` ${quoted(token.value)}` : '';
    return new CommandLineError(`unexpected argument${named}; this command takes no arguments`);
  }
  // `Option '--root' argument is ambiguous.\nDid you forget to specify the option argument for '--root'?\nTo specify
  // an option argument starting with a dash use '--root=-XYZ'.`: the option's name (one of its known names) and the
  // way to give such a value, on one line.
  const ambiguous = /^Option '[^']*' argument is ambiguous\.\n.* for '(-[^']*)'\?\n.* use '(-[^']*)'\.$/s.exec(message);
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && ambiguous !== null)
    return new CommandLineError(
      `the value after ${ambiguous[1]} begins with '-', as an option does (was its value left out?); give such a value as ${ambiguous[2]}`,
    );
  const found = unknownOption(err, argv, options);
  if (found === undefined) return new CommandLineError(message);
  const { unknown, arg } = found;
  const near = unknown.startsWith('--') ? nearestName(unknown.slice(2), Object.keys(options)) : undefined;
  // The argument after `--` is the one given (`-xyz` whole, `--bogus=v` with its value).
  const word = pastableShellWord(arg);
  const after = word !== undefined ? `: -- ${word}` : arg === unknown ? '' : ` (${quoted(arg)})`;
  const hint =
    near !== undefined
      ? ` (did you mean '--${near}'?)`
      : allowPositionals
        ? `; an argument that begins with '-' goes after '--'${after}`
        : '';
  return new CommandLineError(`unknown option ${quoted(unknown)}${hint}`);
}

export function parse<T extends Options>(
  argv: string[],
  options: T,
  allowPositionals = false,
): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true }>> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals, strict: true, tokens: true });
  } catch (err) {
    // A misspelt option (`--hots`) is named with the option it is a slip of, as the library's options objects are.
    // Node's message for a command that takes arguments goes on with a hint about `--` that ends in an unclosed
    // quote (`… as in '-- "--hots"`), which put the did-you-mean after it: the message is written here instead.
    throw commandLineRefusal(err, argv, options, allowPositionals);
  }
  // parseArgs lets the last of a repeated option win: `revoke --principal mallory --principal alice` would act on
  // one of the two silently. A single-value option given twice is refused instead.
  const seen = new Set<string>();
  for (const t of parsed.tokens) {
    // An empty argument is the same mistake: `publish "$FILE"` would read standard input, `verify "$DIR"` the
    // working directory.
    if (t.kind === 'positional' && t.value === '') throw new CommandLineError('an argument must not be empty');
    if (t.kind !== 'option') continue;
    // An empty value is a mistake (an unset shell variable), not a value: `--principal ""` is USAGE as a missing one
    // is, whichever option, rather than an INVALID_ID from deeper down for some and a default for others.
    if (t.value === '') throw new CommandLineError(`--${t.name} must not be empty`);
    const spec = options[t.name];
    if (!spec || spec.multiple || spec.type !== 'string') continue;
    if (seen.has(t.name)) throw new CommandLineError(`--${t.name} given more than once`);
    seen.add(t.name);
  }
  const { tokens: _tokens, ...result } = parsed;
  return result as ReturnType<
    typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true }>
  >;
}

/**
 * A number the operator wrote, as every numeric option (`--max-bytes`, `--port`, witness serve's `--max-body-bytes`,
 * `--request-timeout-ms` and `--listen`'s PORT, `prove`'s sizes, `verify --workers`) and
 * HANDOFF_LEDGER_WITNESS_TIMEOUT_MS read it: `readWholeNumber` (manifests/encoding/whole-number.ts, which the
 * auditor's `--max-bundle-bytes` and `--quorum` read through too): ASCII decimal digits only (no sign, blank,
 * fraction, exponent or hex; a leading zero is decimal, `05` is 5), a safe integer within `min`..`max`.
 * @param name as the operator wrote it: `--port`, `HANDOFF_LEDGER_WITNESS_TIMEOUT_MS`
 * @param unit what it counts (`bytes`, `milliseconds`), for the message
 * @param or a word the caller takes beside the numbers (`auto`), for the message
 * @throws UsageError `NAME must be [OR or ]a whole number [of UNIT] from MIN to MAX, not "TEXT"`
 */
export function wholeNumber(text: string, name: string, min: number, max: number, unit?: string, or?: string): number {
  return readWholeNumber(text, { name, min, max, unit, or }, (message) => new UsageError(message));
}

export function defaultHost(env: NodeJS.ProcessEnv): string {
  if (env.HANDOFF_LEDGER_HOST) return env.HANDOFF_LEDGER_HOST;
  const name = hostname()
    .replace(/[^A-Za-z0-9._:@-]/g, '-')
    .slice(0, 128);
  return isValidId(name) ? name : 'localhost';
}

/** The PostgreSQL store a command works on: `--postgres`, else HANDOFF_LEDGER_POSTGRES; undefined for the embedded one. */
export function postgresUrl(values: { postgres?: string }, env: NodeJS.ProcessEnv): string | undefined {
  return values.postgres ?? env.HANDOFF_LEDGER_POSTGRES;
}

const HASH_BACKENDS: readonly HashBackendName[] = ['auto', 'native', 'wasm', 'noble'];

/**
 * Whether a PostgreSQL store's statements go out as named prepared statements, parsed once per connection:
 * HANDOFF_LEDGER_POSTGRES_PREPARED=on|off (default on; off behind a pooler that does not keep a connection's prepared
 * statements, such as PgBouncer in transaction mode before 1.21). Every command on a store reads it, with or without
 * PostgreSQL: a mistyped value is said. @throws UsageError
 */
export function preparedFromEnv(env: NodeJS.ProcessEnv): boolean {
  const value = env.HANDOFF_LEDGER_POSTGRES_PREPARED || 'on';
  if (value !== 'on' && value !== 'off')
    throw new UsageError(`HANDOFF_LEDGER_POSTGRES_PREPARED must be on or off, not ${quoted(value)}`);
  return value === 'on';
}

/** The BLAKE3 backend an operator asked for with HANDOFF_LEDGER_HASH (default auto). @throws UsageError */
export function hashFromEnv(env: NodeJS.ProcessEnv): HashBackendName {
  const name = env.HANDOFF_LEDGER_HASH || 'auto';
  if (!HASH_BACKENDS.includes(name as HashBackendName)) {
    throw new UsageError(`HANDOFF_LEDGER_HASH must be one of ${HASH_BACKENDS.join(', ')}, not ${quoted(name)}`);
  }
  return name as HashBackendName;
}

/**
 * The BLAKE3 backend HANDOFF_LEDGER_HASH names, loaded (and self-tested) before anything is made when it is `native` or
 * `wasm`, which do not fall back: one that cannot load on this machine (no prebuilt native binary for the platform) is
 * the operator's setting to change, USAGE (exit 2), not an internal error (exit 70) after the root was made. `auto`
 * falls back and `noble` always loads: nothing to judge. Returns the name.
 * @throws UsageError
 */
export async function usableHashFromEnv(env: NodeJS.ProcessEnv): Promise<HashBackendName> {
  const name = hashFromEnv(env);
  if (name !== 'native' && name !== 'wasm') return name;
  const { loadHashBackend } = await import('../../store/hash/backends.node.js');
  try {
    await loadHashBackend(name);
  } catch (err) {
    throw new UsageError(
      `HANDOFF_LEDGER_HASH=${name}: this BLAKE3 backend cannot be used on this machine (${errorText(err, 300)}); use auto, which falls back, or noble`,
      { cause: err },
    );
  }
  return name;
}

/**
 * What `openFromArgs` judges of the store's options and variables before it opens anything: an empty `--root`,
 * `--postgres` or `--origin` (USAGE: an unset shell variable, not a request for the default: `--postgres ""` would
 * otherwise open the embedded store in its place), the host (`--host`, else HANDOFF_LEDGER_HOST; INVALID_ID),
 * HANDOFF_LEDGER_HASH, HANDOFF_LEDGER_POSTGRES_PREPARED and HANDOFF_LEDGER_WITNESS_TIMEOUT_MS (USAGE). `publish` judges
 * them before it reads its summary too (`checkOpenArgs`), so that a summary piped to a command refused anyway is not
 * taken in vain.
 * @throws UsageError, LedgerError `INVALID_ID`
 */
export function checkStoreArgs(
  values: { root?: string; host?: string; postgres?: string; origin?: string },
  env: NodeJS.ProcessEnv,
): void {
  for (const name of ['root', 'postgres', 'origin'] as const)
    if (values[name] === '') throw new UsageError(`--${name} must not be empty`);
  // As the open's parseHost (src/ledger/scope.ts) words it; not imported from there: --help and --version load nothing
  // of src/ledger/ (test/cli-startup.test.ts).
  const host = values.host ?? defaultHost(env);
  if (!isValidId(host)) throw new LedgerError('INVALID_ID', invalidIdMessage('host', host));
  hashFromEnv(env);
  preparedFromEnv(env);
  witnessTimeoutFromEnv(env);
}

/**
 * Opens the ledger the options name, under SIGINT / SIGTERM: the first of either during the open ends it (the open's
 * signal: a wait for another process's trust or pin lock, PostgreSQL connecting or migrating, included) with what it
 * had opened closed and its locks released, and the command with `InterruptedError` (`CANCELLED`, exit 130 / 143),
 * having done nothing; a second signal ends the process at once, as without a handler.
 * @param by the command's name, for an open under handlers of its own, taken off once the open has ended (a signal
 *   after it then ends the process at once, as without a handler; one that came as the open ended is honoured:
 *   the ledger is closed again and the command does not begin); or the command's own `stopSignals`, kept listening
 *   after the open (export, gc, publish: their operation takes its signal)
 */
export async function openFromArgs(
  values: { root?: string; host?: string; postgres?: string; origin?: string },
  io: CliIo,
  by: string | StopSignals,
  extra: Partial<OpenLedgerOptions> = {},
): Promise<Ledger> {
  const options = await openOptionsFromArgs(values, io, extra);
  // Loaded here, not at the top: a command that opens no ledger does not load the store and LevelDB (`verify` on an
  // auditor's machine), nor, for `--help` and `--version`, zod and the telemetry API.
  const { openLedger } = await import('../ledger/open.js');
  const stop = typeof by === 'string' ? stopSignals(by) : by;
  const interrupted = (stoppedBy: StopSignal, cause: unknown) =>
    new InterruptedError(
      stoppedBy,
      `${stop.command} interrupted by ${stoppedBy} while opening the store, before it began; run it again`,
      { cause },
    );
  let ledger: Ledger;
  try {
    ledger = await openLedger({ ...options, signal: stop.signal });
  } catch (err) {
    const stoppedBy = stop.stoppedBy();
    if (stoppedBy !== undefined && err instanceof LedgerError && err.code === 'CANCELLED')
      throw interrupted(stoppedBy, err);
    throw err;
  } finally {
    if (typeof by === 'string') stop.dispose();
  }
  const stoppedBy = typeof by === 'string' ? stop.stoppedBy() : undefined;
  if (stoppedBy !== undefined) {
    // The signal came as the open ended: the command has not begun, and does not.
    await ledger.close();
    throw interrupted(stoppedBy, stop.signal.reason);
  }
  return ledger;
}

/**
 * The options `openFromArgs` opens the ledger with (without its signal): the store's options and variables judged
 * (`checkStoreArgs`), the BLAKE3 backend loaded when it does not fall back, HANDOFF_LEDGER_TRUST's file read
 * (unless `extra` names the trust), the witnesses, the origin and PostgreSQL's connection string taken.
 * @throws UsageError, LedgerError `INVALID_ID`, ManifestError `TRUST_INVALID` (HANDOFF_LEDGER_TRUST)
 */
async function openOptionsFromArgs(
  values: { root?: string; host?: string; postgres?: string; origin?: string },
  io: CliIo,
  extra: Partial<OpenLedgerOptions>,
): Promise<OpenLedgerOptions> {
  checkStoreArgs(values, io.env);
  const { defaultRoot } = await import('../ledger/open.js');
  const root = values.root ?? defaultRoot(io.env);
  const host = values.host ?? defaultHost(io.env);
  const options: OpenLedgerOptions = {
    root,
    host,
    hash: await usableHashFromEnv(io.env),
    // Notices of the witness pool come escaped already (printable): escaped again, `\x1b` would read as a backslash.
    onNotice: (m) => io.stderr.write(`${printableOnce(m)}\n`),
    // Only `init` and `publish` make a host a key of its own: a mistyped --host (or a default host name on another
    // machine) on any other command is refused, naming the hosts that have keys, instead of adding a trusted key.
    createHostKey: false,
    ...witnessingFromEnv(io.env),
    // Not for a command that names its own (`keys` passes `trust: undefined`: it exports and lists this store's own).
    ...('trust' in extra ? {} : await trustFromEnv(io.env)),
    ...((values.origin ?? io.env.HANDOFF_LEDGER_ORIGIN)
      ? { origin: values.origin ?? io.env.HANDOFF_LEDGER_ORIGIN }
      : {}),
    ...extra,
  };
  const pg = postgresUrl(values, io.env);
  const prepared = preparedFromEnv(io.env);
  return pg
    ? { ...options, postgres: { connectionString: pg, ...(prepared ? {} : { preparedStatements: false }) } }
    : options;
}

/**
 * Judges, before anything is opened or made, all that the open of the store the options name would refuse and that
 * can be known without opening it (`checkOpenOptions`): the store's options and variables (`checkStoreArgs`), a
 * `native` or `wasm` HANDOFF_LEDGER_HASH that cannot load here, HANDOFF_LEDGER_TRUST's file (read now), the witnesses
 * HANDOFF_LEDGER_WITNESSES names (each a URL, a pinned key that parses), the root (a file, a layout this version does
 * not read, a directory inside another store), the origin (`--origin`, HANDOFF_LEDGER_ORIGIN: its form, and the
 * new-log rule for an embedded store that holds no log yet) and PostgreSQL's connection string, by the open's own steps
 * in its order.
 * `publish` calls it before it reads its summary. Returns `extra` with the trust read, for the open: the file is not
 * read twice.
 * @throws UsageError, LedgerError `INVALID_ID` / `INVALID_ARGUMENT`, ManifestError `TRUST_INVALID` / `KEY_INVALID`
 */
export async function checkOpenArgs(
  values: { root?: string; host?: string; postgres?: string; origin?: string },
  io: CliIo,
  extra: Partial<OpenLedgerOptions> = {},
): Promise<Partial<OpenLedgerOptions>> {
  const options = await openOptionsFromArgs(values, io, extra);
  const { checkOpenOptions } = await import('../ledger/open.js');
  await checkOpenOptions(options);
  return { ...extra, trust: options.trust };
}

/**
 * HANDOFF_LEDGER_TRUST: a trust file of further keys every command's ledger trusts beside the store's trust.json (the
 * other hosts' `keys export`, for hosts sharing a PostgreSQL store), read as `verify --trust` reads one: a file that
 * cannot be read, is not a regular file or does not parse is `TRUST_INVALID` (exit 2), before the store is opened; so
 * is one group or others may write or another user owns, as the store's trust.json is (what its keys sign, resume
 * returns).
 */
async function trustFromEnv(env: NodeJS.ProcessEnv): Promise<Partial<OpenLedgerOptions>> {
  const path = env.HANDOFF_LEDGER_TRUST;
  if (!path) return {};
  const { readTrustFile } = await import('./trust-file.js');
  try {
    return { trust: (await readTrustFile(path, { anchor: true })).trust };
  } catch (err) {
    // Named by the variable that gave it: no option of the command line names that file.
    if (isHandoffLedgerError(err) && err.code === 'TRUST_INVALID')
      throw new AuditError('TRUST_INVALID', `HANDOFF_LEDGER_TRUST: ${err.message}`, { cause: err });
    throw err;
  }
}

/**
 * The witnessing options of every command's ledger. HANDOFF_LEDGER_WITNESSES: witness URLs (space-separated;
 * `URL#VKEY` pins a witness's verifier key) it submits new checkpoints to; `more` (`checkpoint --witness URL`) adds to
 * them. HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: the deadline of each request to a witness and how long the close waits for a
 * submission under way (`timeoutMs` and `closeWaitMs`; default 5000 ms each), so that an operator with a slow or
 * distant witness can give it longer before the command exits.
 * @throws UsageError a timeout that is not a whole number of milliseconds from 1 to 2^31 − 1 (checked whether or not
 *   witnesses are given: a mistyped value is said, not ignored)
 */
export function witnessingFromEnv(env: NodeJS.ProcessEnv, more: readonly string[] = []): Partial<OpenLedgerOptions> {
  const timeoutMs = witnessTimeoutFromEnv(env);
  const urls = [...(env.HANDOFF_LEDGER_WITNESSES ?? '').split(/\s+/).filter(Boolean), ...more];
  if (urls.length === 0) return {};
  return { witnesses: { witnesses: urls, ...(timeoutMs !== undefined ? { timeoutMs, closeWaitMs: timeoutMs } : {}) } };
}

/**
 * HANDOFF_LEDGER_WITNESS_TIMEOUT_MS as milliseconds (undefined: unset or "", the library's default): `wholeNumber`,
 * 1 to 2^31 − 1 (the longest timer Node keeps; what the library's `timeoutMs` accepts).
 * @throws UsageError
 */
function witnessTimeoutFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const text = env.HANDOFF_LEDGER_WITNESS_TIMEOUT_MS;
  if (!text) return undefined;
  return wholeNumber(text, 'HANDOFF_LEDGER_WITNESS_TIMEOUT_MS', 1, MAX_TIMER_MS, 'milliseconds');
}

/**
 * Opens the ledger the options name (`openFromArgs`: `by` says how SIGINT / SIGTERM are heard), runs `fn`, and closes
 * the ledger whatever happens.
 */
export async function withLedger(
  values: { root?: string; host?: string; postgres?: string; origin?: string },
  io: CliIo,
  by: string | StopSignals,
  fn: (ledger: Ledger) => Promise<number>,
  extra: Partial<OpenLedgerOptions> = {},
): Promise<number> {
  const ledger = await openFromArgs(values, io, by, extra);
  try {
    return await fn(ledger);
  } finally {
    await ledger.close();
  }
}

/**
 * Colour for a stream that is a terminal, unless the user opted out: NO_COLOR (no-color.org: any non-empty
 * value) wins over FORCE_COLOR, which turns colour on for a pipe.
 */
export function colours(io: CliIo, stream: Writable): { good: (s: string) => string; bad: (s: string) => string } {
  const { NO_COLOR, FORCE_COLOR, TERM } = io.env;
  const tty = (stream as { isTTY?: boolean }).isTTY === true && TERM !== 'dumb';
  const forced = FORCE_COLOR !== undefined && FORCE_COLOR !== '' && FORCE_COLOR !== '0' && FORCE_COLOR !== 'false';
  const on = !NO_COLOR && (tty || forced);
  const paint = (code: number) => (s: string) => (on ? `\x1b[${code}m${s}\x1b[39m` : s);
  return { good: paint(32), bad: paint(31) };
}

export function writeJson(out: Writable, value: unknown): void {
  out.write(printableJson(value) + '\n');
}

/** A bug: `internal error` and the stack on stderr, exit 70. */
export function reportInternalError(err: unknown, io: CliIo): number {
  // The stack's message may quote data (a file name, a stored value): escaped line by line, like all output.
  // A thrown value that is no Error (an object whose toString throws, too) is named by errorText, never re-thrown here.
  const stack: unknown = (err as Error | undefined)?.stack;
  io.stderr.write(
    printableLines(`handoff-ledger: internal error: ${typeof stack === 'string' ? stack : errorText(err)}`.split('\n')),
  );
  return EXIT_INTERNAL;
}

/**
 * The one error printer of the CLI: `handoff-ledger: CODE: message` on stderr (and `{ error: { code, message } }`
 * on stdout with --json), and the exit code: 2 when the command could not run (usage, I/O, storage, lock, the
 * auditor's own errors), 1 when the ledger refused (a coded refusal: tampering, scope, keys, …), 130 / 143 when a
 * SIGINT / SIGTERM stopped it (`InterruptedError`), 70 for any other error: a bug, printed with its stack.
 */
export function reportError(err: unknown, io: CliIo, json = false): number {
  const parseArgsError = String((err as { code?: unknown } | undefined)?.code ?? '').startsWith('ERR_PARSE_ARGS_');
  const known =
    err instanceof UsageError || parseArgsError
      ? { code: 'USAGE' satisfies CliErrorCode, message: (err as Error).message }
      : isHandoffLedgerError(err)
        ? err
        : err instanceof WordedIoError
          ? { code: 'IO_FAILED' satisfies CliErrorCode, message: err.message }
          : isErrnoError(err)
            ? { code: 'IO_FAILED' satisfies CliErrorCode, message: errnoMessage(err) }
            : undefined;
  if (!known) return reportInternalError(err, io);
  if (json) writeJson(io.stdout, { error: { code: known.code, message: known.message } });
  // A refusal quotes the values it names escaped already (`shownValue`, `invalidIdMessage`, `quoted`: `"a\u001b"`): a
  // message is printed escaped once (`printableOnce`), the same words --json gives, only a character a terminal acts
  // on left raw in it escaped; escaped again, every backslash of those quotes would print doubled (`"a\\u001b"`).
  // An I/O error is named by its code and the paths it names quoted (`errnoMessage`), not by its message, which
  // embeds them raw.
  io.stderr.write(`handoff-ledger: ${known.code}: ${printableOnce(known.message)}\n`);
  if (err instanceof CommandLineError && io.command !== undefined)
    io.stderr.write(`Try 'handoff-ledger help ${printable(io.command)}' for its options.\n`);
  if (err instanceof InterruptedError) return SIGNAL_EXITS[err.stoppedBy];
  const couldNotRun = !isHandoffLedgerError(err) || err instanceof AuditError || USAGE_CODES.has(known.code);
  return couldNotRun ? EXIT_USAGE : EXIT_REFUSED;
}

const USAGE_CODES = new Set(['STORAGE_FAILED', 'LOCKED']);

/**
 * Reads a whole stream, refusing more than `maxBytes` before buffering it. `signal`: once it aborts, the read ends
 * (the stream is destroyed, its descriptor closed: a wait for a pipe's or a FIFO's writer ends with it) and
 * `readLimited` rejects with `LedgerError` `CANCELLED` (the signal's reason as its cause), whatever the stream did.
 */
export async function readLimited(
  stream: NodeJS.ReadableStream,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<Buffer> {
  const cancelled = () => new LedgerError('CANCELLED', 'the read was cancelled', { cause: signal?.reason });
  const destroy = () => (stream as Partial<Readable>).destroy?.();
  if (signal?.aborted) {
    destroy();
    throw cancelled();
  }
  const unsubscribe = signal ? onAbort(signal, destroy) : () => {};
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
      size += b.length;
      if (size > maxBytes) throw new UsageError(`input is larger than ${maxBytes} bytes`);
      chunks.push(b);
    }
  } catch (err) {
    // The stream destroyed at the abort ends the loop with its own error (a premature close): the abort is the news.
    if (signal?.aborted) throw cancelled();
    throw err;
  } finally {
    unsubscribe();
  }
  // The last chunk and the abort may come together: a read the signal ended is not taken, whatever it returned.
  if (signal?.aborted) throw cancelled();
  return Buffer.concat(chunks);
}

/**
 * Reads a file that must be a regular file of at most `maxBytes` (a configuration file a command was given). Opened
 * once, without blocking, so a FIFO is refused rather than waited on; a device (`/dev/zero`), a FIFO, a socket or a
 * directory is refused before anything is read, a larger file too, and the bound holds while reading (the file may
 * grow): store/fs/bounded-read.ts, checked and read through one descriptor.
 * @param tooLarge the error for a file over the bound (`size` its stat's, or undefined when it grew while read);
 *   default: UsageError `S bytes, over N` (the caller names the option and the path)
 * @throws UsageError `not a regular file`, `tooLarge`'s error; the `errno` error itself when the file cannot be
 *   opened or read
 */
export async function readRegularFile(
  path: string,
  maxBytes: number,
  tooLarge: (size: number | undefined) => Error = (size) =>
    new UsageError(
      size === undefined ? `over ${maxBytes} bytes (it grew while read)` : `${size} bytes, over ${maxBytes}`,
    ),
): Promise<Buffer> {
  return readBoundedFile(path, maxBytes, { notAFile: () => new UsageError('not a regular file'), tooLarge });
}
