#!/usr/bin/env node
/** The `handoff-ledger` command line. Each command lives in src/cli/ and returns its exit code. */
import { pathToFileURL } from 'node:url';
import { realpathSync } from 'node:fs';
import { EXIT_USAGE, UsageError, type CliIo, type Command } from './io.js';

const commands: Record<string, { summary: string; load: () => Promise<Command> }> = {
  init: { summary: 'create or open the store and its host key', load: async () => (await import('./core.js')).init },
  publish: {
    summary: 'publish a summary: publish --principal P --session S --run R [FILE|-]',
    load: async () => (await import('./core.js')).publish,
  },
  resume: {
    summary: 'print the verified latest summary: resume --principal P --session S',
    load: async () => (await import('./core.js')).resume,
  },
  history: {
    summary: "list a session's verified chain: history --principal P --session S",
    load: async () => (await import('./core.js')).history,
  },
  grant: {
    summary: 'grant --principal P (--session S | --all)',
    load: async () => (await import('./access.js')).grant,
  },
  revoke: {
    summary: 'revoke --principal P (--session S | --all)',
    load: async () => (await import('./access.js')).revoke,
  },
  grants: { summary: 'list grants and revocations', load: async () => (await import('./access.js')).grants },
  demo: {
    summary: "the main job: a restricted user's session compacted, restarted and resumed",
    load: async () => (await import('./demo.js')).run,
  },
  export: {
    summary: 'export [--principal P] [--session S] --out DIR [--with-blobs]: write an audit bundle',
    load: async () => (await import('./export.js')).run,
  },
  verify: {
    summary: 'verify DIR --trust FILE [--json] [--workers auto|N] [--verifier node|noble]: audit a bundle offline',
    load: async () => (await import('./verify.js')).run,
  },
  fsck: {
    summary: 'check every manifest, blob and head; exit 1 on any finding',
    load: async () => (await import('./maintenance.js')).fsck,
  },
  gc: {
    summary: 'gc --grace DURATION [--dry-run]: remove unreferenced blobs older than the grace period',
    load: async () => (await import('./maintenance.js')).gc,
  },
  keys: {
    summary: 'keys export [--out FILE] | rotate | revoke KEYID | list',
    load: async () => (await import('./access.js')).keys,
  },
};

export function registerCommand(name: string, summary: string, load: () => Promise<Command>): void {
  commands[name] = { summary, load };
}

function usage(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`);
  return [
    'usage: handoff-ledger <command> [options]',
    '',
    ...lines,
    '',
    'Common options: --root DIR (or HANDOFF_LEDGER_ROOT; default ${XDG_STATE_HOME:-~/.local/state}/handoff-ledger),',
    '  --host ID (or HANDOFF_LEDGER_HOST; default the machine name), --postgres URL (or HANDOFF_LEDGER_POSTGRES), --json',
    'BLAKE3 backend: HANDOFF_LEDGER_HASH=auto|native|wasm|noble (default auto: native, else WASM, else noble).',
    'Exit codes: 0 ok, 1 refused (a coded error or audit finding), 2 usage or I/O error.',
    '',
  ].join('\n');
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    (name ? io.stdout : io.stderr).write(usage());
    return name ? 0 : EXIT_USAGE;
  }
  const command = commands[name];
  if (!command) {
    io.stderr.write(`handoff-ledger: unknown command ${JSON.stringify(name)}\n\n${usage()}`);
    return EXIT_USAGE;
  }
  try {
    return await (
      await command.load()
    )(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`handoff-ledger: ${err.message}\n`);
      return EXIT_USAGE;
    }
    throw err;
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
  main(process.argv.slice(2), {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`handoff-ledger: internal error: ${(err as Error)?.stack ?? err}\n`);
      process.exitCode = 70;
    },
  );
}
