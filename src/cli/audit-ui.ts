/**
 * `handoff-ledger audit-ui [--open] [--trust FILE] [--since OLD.note] [--witness-keys FILE --quorum K]
 * [--require-blobs] [--expect full|filtered] [--principal ID] [--session ID] [--max-bundle-bytes N] [--port N] [BUNDLE_DIR]`: serves the
 * auditor's page on 127.0.0.1 with the bundle (and trust file, earlier checkpoint, witness keys and quorum)
 * preloaded and the auditor's settings preset in the page's fields, read-only, until interrupted. Verification runs
 * in the browser; the server only hands it these files. Every option is read at start and refused as `verify`
 * refuses it.
 */
import { spawn } from 'node:child_process';
import { basename } from 'node:path';
import { AuditError } from '../../manifests/audit/errors.js';
import { openBundleDir } from '../ops/bundle-dir.js';
import { auditorPagePath } from '../ops/auditor-page.js';
import { startAuditServer, type AuditServer } from '../ops/audit-server.js';
import { readSince } from './export.js';
import { printableOnceLines, quoted } from '../../manifests/encoding/printable.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { auditorScope, byteCount, expectation, readWitnessArgs } from './verify.js';
import { readTrustFiles } from './trust-file.js';
import {
  CommandLineError,
  EXIT_OK,
  onStopSignal,
  parse,
  reportError,
  UsageError,
  wholeNumber,
  type CliIo,
} from './io.js';

export const usage =
  'audit-ui [--open] [--trust FILE]… [--since FILE] [--witness-keys FILE --quorum K] [--require-blobs] [--expect full|filtered] [--principal ID] [--session ID] [--max-bundle-bytes N] [--port N] [BUNDLE_DIR]';

/**
 * What `--open` says when no browser opened: the opener (`xdg-open`, `open`, `explorer`) quoted as a refusal names a
 * program, its failure by its errno code (`errnoText`: not the spawn's message, which repeats what it ran raw) or its
 * exit status, and the address to open by hand. One line on stderr; the server goes on serving.
 */
export function browserFailure(url: string, command: string, failure: NodeJS.ErrnoException | number): string {
  const why =
    typeof failure === 'number'
      ? `${quoted(command)} exited with status ${failure}`
      : `${quoted(command)} did not start: ${errnoText(failure)}`;
  // ENOENT: no such program on PATH (xdg-open comes with xdg-utils on Linux).
  const hint =
    typeof failure !== 'number' && failure.code === 'ENOENT'
      ? ` (--open runs ${quoted(command)} from PATH${command === 'xdg-open' ? ', which xdg-utils installs' : ''})`
      : '';
  return `handoff-ledger: could not open a browser: ${why}${hint}; open ${url} in a browser yourself`;
}

function openInBrowser(url: string, io: CliIo): void {
  const command = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  const child = spawn(command, [url], { detached: true, stdio: 'ignore' });
  const say = (failure: NodeJS.ErrnoException | number) =>
    io.stderr.write(printableOnceLines([browserFailure(url, command, failure)]));
  child.on('error', (err) => say(err));
  // An opener that started and failed (xdg-open with no browser to hand it to: status 3) says so by its status only
  // (its stderr is not ours to show). explorer exits 1 when it did open the page: not judged.
  child.on('exit', (code) => {
    if (code !== null && code !== 0 && process.platform !== 'win32') say(code);
  });
  child.unref();
}

/** Starts the server for `argv`; resolves once it listens. @throws UsageError, AuditError */
export async function serve(argv: string[], io: CliIo): Promise<AuditServer> {
  const { values, positionals } = parse(
    argv,
    {
      open: { type: 'boolean', default: false },
      trust: { type: 'string', multiple: true },
      since: { type: 'string' },
      'witness-keys': { type: 'string' },
      quorum: { type: 'string' },
      port: { type: 'string', default: '0' },
      'require-blobs': { type: 'boolean', default: false },
      expect: { type: 'string' },
      principal: { type: 'string' },
      session: { type: 'string' },
      'max-bundle-bytes': { type: 'string' },
    },
    true,
  );
  // More than one BUNDLE_DIR: a command line of the wrong shape, which points to the command's help.
  if (positionals.length > 1) throw new CommandLineError(`usage: handoff-ledger ${usage}`);
  const port = wholeNumber(values.port, '--port', 0, 65535);
  const scope = auditorScope(values.principal, values.session);
  const expect = expectation(values.expect);
  const maxManifestsBytes =
    values['max-bundle-bytes'] === undefined ? undefined : byteCount(values['max-bundle-bytes']);
  // Read now, with verify's checks and words: a bad combination is a usage error here, not a surprise in the page.
  const since = values.since === undefined ? undefined : await readSince(values.since);
  const witnesses = await readWitnessArgs(values['witness-keys'], values.quorum);
  // Read and parsed now, as verify reads it (a symlink is followed); the page is served this text.
  const trust = values.trust === undefined ? undefined : await readTrustFiles(values.trust);
  const page = auditorPagePath();
  if (!page) throw new UsageError('the auditor page is not built (npm run build:web writes dist/web/index.html)');
  const bundle = positionals[0];
  // Refused here, with the CLI's codes, rather than as an error in the browser.
  if (bundle) await openBundleDir(bundle, { maxManifestsBytes });
  const server = await startAuditServer({
    page,
    port,
    // Whether it carries blobs is looked at for each request of the page, as verify run then would see it.
    ...(bundle ? { bundle } : {}),
    ...(values['require-blobs'] ? { requireBlobs: true } : {}),
    ...(scope ? { scope } : {}),
    ...(expect ? { expect } : {}),
    ...(maxManifestsBytes !== undefined ? { maxManifestsBytes } : {}),
    ...(trust ? { trust: { text: trust.text, names: values.trust!.map((path) => basename(path)) } } : {}),
    ...(since !== undefined ? { since: { name: basename(values.since!), text: since } } : {}),
    ...(witnesses
      ? {
          witnessKeys: {
            name: basename(values['witness-keys']!),
            text: witnesses.text,
            quorum: witnesses.policy.quorum,
          },
        }
      : {}),
  });
  // The bundle's directory quoted, as a refusal names it, escaped once (printable would double its backslashes).
  io.stdout.write(
    printableOnceLines([
      `audit-ui: ${server.url}${bundle ? ` (bundle ${quoted(bundle)}, read-only)` : ''}; Ctrl-C stops it`,
    ]),
  );
  if (values.open) openInBrowser(server.url, io);
  return server;
}

/** Runs `audit-ui` until SIGINT or SIGTERM; returns the exit code. */
export async function run(argv: string[], io: CliIo): Promise<number> {
  let server: AuditServer;
  // The first signal stops it; a second, of either kind, ends the process at once if the stopping hangs. Listened for
  // before the address is printed (by serve): a signal sent as soon as a caller reads it must find the listener. One
  // that comes while it starts stops it once it has started.
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const stopListening = onStopSignal(() => stop());
  try {
    server = await serve(argv, io);
  } catch (err) {
    stopListening();
    // A port in use or not permitted is the operator's to change: USAGE, exit 2, worded as `witness serve` words it.
    const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
    if (e.syscall === 'listen' && typeof e.code === 'string')
      return reportError(
        new UsageError(`cannot listen on ${quoted(`${e.address}:${e.port}`)}: ${e.code}`, { cause: err }),
        io,
      );
    if (!(err instanceof AuditError)) throw err;
    // The auditor's refusal (a trust file, --since, the witness keys): printed as every refusal is, exit 2.
    return reportError(err, io);
  }
  await stopped;
  await server.close();
  return EXIT_OK;
}
