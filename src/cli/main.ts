#!/usr/bin/env node
/** The `handoff-ledger` command line: dispatch, help and version. Each command lives in src/cli/ and returns its exit code. */
import { pathToFileURL } from 'node:url';
import { realpathSync } from 'node:fs';
import { commandHelp, commands, usage } from './commands.js';
import { EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UsageError, type CliIo } from './io.js';
import { printable } from '../../manifests/encoding/printable.js';
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
      io.stderr.write(`handoff-ledger: no command ${printable(JSON.stringify(topic))}\n\n${usage()}`);
      return EXIT_USAGE;
    }
    io.stdout.write(commandHelp(topic, spec));
    return EXIT_OK;
  }
  const spec = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!spec) {
    io.stderr.write(`handoff-ledger: unknown command ${printable(JSON.stringify(name))}\n\n${usage()}`);
    return EXIT_USAGE;
  }
  if (asksForHelp(rest)) {
    io.stdout.write(commandHelp(name, spec));
    return EXIT_OK;
  }
  try {
    return await (
      await spec.load()
    )(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`handoff-ledger: ${printable(err.message)}\n`);
      return EXIT_USAGE;
    }
    throw err;
  }
}

/** `main` as the process runs it: a rejection is a bug, printed with its stack, exit 70 (EX_SOFTWARE). */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  try {
    return await main(argv, io);
  } catch (err) {
    io.stderr.write(`handoff-ledger: internal error: ${(err as Error)?.stack ?? err}\n`);
    return EXIT_INTERNAL;
  }
}

function isEntryPoint(): boolean {
  try {
    return process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  void runCli(process.argv.slice(2), {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
  }).then((code) => {
    process.exitCode = code;
  });
}
