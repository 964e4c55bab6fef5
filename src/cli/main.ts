#!/usr/bin/env node
/** The `handoff-ledger` command line: dispatch, help and version. Each command lives in src/cli/ and returns its exit code. */
import { pathToFileURL } from 'node:url';
import { realpathSync } from 'node:fs';
import { commandHelp, commands, usage } from './commands.js';
import {
  EXIT_OK,
  EXIT_USAGE,
  reportError,
  reportInternalError,
  SIGNAL_EXITS,
  wantsJson,
  writeJson,
  type CliIo,
} from './io.js';
import { printable, quoted } from '../../manifests/encoding/printable.js';
import { packageVersion } from '../version.js';

/** `--help` or `-h` before any `--`: the command's help, whatever else the line says. */
function asksForHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    io.stdout.write(`${packageVersion()}\n`);
    return EXIT_OK;
  }
  if (!name) {
    io.stderr.write(usage());
    return EXIT_USAGE;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    const topic = rest[0];
    if (topic === undefined) {
      io.stdout.write(usage());
      return EXIT_OK;
    }
    const spec = Object.hasOwn(commands, topic) ? commands[topic] : undefined;
    if (!spec) {
      // A usage error as the unknown command's below: with --json, as JSON on stdout too.
      if (wantsJson(argv)) writeJson(io.stdout, { error: { code: 'USAGE', message: `no command ${quoted(topic)}` } });
      io.stderr.write(`handoff-ledger: USAGE: no command ${quoted(topic)}\n\n${usage()}`);
      return EXIT_USAGE;
    }
    io.stdout.write(commandHelp(spec));
    return EXIT_OK;
  }
  const spec = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!spec) {
    // A usage error like any other: coded on stderr (`handoff-ledger: USAGE: …`, as every other refusal), and with
    // --json as JSON on stdout too.
    // `--json` in the command's place (`handoff-ledger --json init`) asks for JSON too.
    if (wantsJson(argv)) writeJson(io.stdout, { error: { code: 'USAGE', message: `unknown command ${quoted(name)}` } });
    io.stderr.write(`handoff-ledger: USAGE: unknown command ${quoted(name)}\n\n${usage()}`);
    return EXIT_USAGE;
  }
  if (asksForHelp(rest)) {
    io.stdout.write(commandHelp(spec));
    return EXIT_OK;
  }
  // The command's name goes with its streams: a refusal of its command line points to its help.
  const commandIo = { ...io, command: name };
  try {
    return await (
      await spec.load()
    )(rest, commandIo);
  } catch (err) {
    // What a command let through: its option-parse errors (USAGE, as JSON too with --json), I/O errors, or a bug (70).
    return reportError(err, commandIo, wantsJson(rest));
  }
}

/** `main` as the process runs it: a rejection is a bug, printed with its stack, exit 70 (EX_SOFTWARE). */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  try {
    return await main(argv, io);
  } catch (err) {
    return reportInternalError(err, io);
  }
}

function isEntryPoint(): boolean {
  try {
    return process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false;
  }
}

/**
 * Runs the CLI on the process's streams. A failed write to stdout (ENOSPC on a full disk, EPIPE when the reader
 * went away, as `| head` does) arrives as an 'error' event, often after the command's work is done: unhandled, Node
 * would die with exit 1, which says "refused" to a caller that may then retry a publish that was made.
 * EPIPE is the reader's choice: quiet, the command's own exit code. Any other failure: a message and exit 2.
 */
function runProcess(): void {
  let code: number | undefined;
  let failure: NodeJS.ErrnoException | undefined;
  const settle = () => {
    if (code === undefined) return;
    if (failure === undefined || failure.code === 'EPIPE') {
      process.exitCode = code;
      return;
    }
    const done = code === 0 ? ' (the operation itself completed)' : '';
    if (!stderrFailed) {
      try {
        process.stderr.write(
          `handoff-ledger: cannot write output: ${printable(failure.code ?? failure.message)}${done}\n`,
        );
      } catch {
        // nothing more can be said; the exit code says it
      }
    }
    process.exitCode = EXIT_USAGE;
  };
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (failure !== undefined) return;
    failure = err;
    settle();
  });
  // A failed stderr (its reader gone, a full disk under `2>log`) loses the messages, never the exit code: unhandled,
  // it too would end the process with 1, after a publish that was made.
  let stderrFailed = false;
  process.stderr.on('error', () => {
    stderrFailed = true;
  });
  void runCli(process.argv.slice(2), {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
  }).then((c) => {
    code = c;
    settle();
    // A command a signal stopped (130 / 143) ends now, its output written: what it left running in the background
    // would keep the process up to that work's own timeout (the open answers at the signal and the steps it stopped
    // end behind it: a PostgreSQL statement's cancel, sent on a connection of its own, up to its 10 s connect timeout).
    if (Object.values(SIGNAL_EXITS).includes(c)) process.stdout.write('', () => process.exit());
  });
}

if (isEntryPoint()) runProcess();
