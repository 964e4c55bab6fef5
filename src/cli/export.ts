/**
 * `handoff-ledger export [--principal P] [--session S] --out DIR [--with-blobs] [--root R] [--json]`:
 * writes an audit bundle. Trust keys are not part of it: auditors get them from `keys export`,
 * out of band. Exit 0 written, 1 a coded ledger error, 2 usage or I/O error.
 */
import { createReadStream } from 'node:fs';
import { AuditError } from '../../manifests/audit/errors.js';
import { exportBundle } from '../ops/export.js';
import {
  EXIT_OK,
  openFromArgs,
  parse,
  readLimited,
  reportError,
  storeOptions,
  UsageError,
  wantsJson,
  writeJson,
  type CliIo,
} from './io.js';
import { printable, printableLines } from '../../manifests/encoding/printable.js';

export const usage = 'export [--principal P] [--session S] --out DIR [--with-blobs] [--since CHECKPOINT] [--root R]';

const MAX_SINCE_BYTES = 64 * 1024;

/** An auditor's earlier checkpoint note (a few hundred bytes). @throws AuditError `USAGE` */
export async function readSince(path: string): Promise<string> {
  try {
    // Bounded while reading, not after: the file may be a pipe or a device (`--since /dev/zero`) of any length.
    const bytes = await readLimited(createReadStream(path), MAX_SINCE_BYTES).catch((err: unknown) => {
      throw err instanceof UsageError ? new Error('over 64 KiB') : err;
    });
    return bytes.toString('utf8');
  } catch (err) {
    throw new AuditError('USAGE', `--since ${path}: ${(err as Error).message}`, { cause: err });
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
    if (positionals.length > 0) throw new UsageError(`usage: handoff-ledger ${usage}`);
    if (!values.out) throw new UsageError('--out DIR is required');
    const since = values.since === undefined ? undefined : await readSince(values.since);
    const ledger = await openFromArgs(values, io);
    try {
      const result = await exportBundle(ledger, {
        out: values.out,
        ...(values.principal !== undefined ? { principal: values.principal } : {}),
        ...(values.session !== undefined ? { session: values.session } : {}),
        withBlobs: values['with-blobs'],
        ...(since !== undefined ? { since } : {}),
      });
      for (const b of result.unavailableBlobs)
        io.stderr.write(
          printableLines([`handoff-ledger: blob ${b.digest} not exported (${b.code}); verify will report it`]),
        );
      const { counts } = result.header;
      if (json) writeJson(io.stdout, result);
      else {
        io.stdout.write(
          `exported ${counts.manifests} manifests in ${counts.chains} chains${counts.blobs !== undefined ? ` and ${counts.blobs} blobs` : ''} to ${printable(result.dir)}\n` +
            `auditors also need this host's public keys: handoff-ledger keys export\n`,
        );
      }
      return EXIT_OK;
    } finally {
      await ledger.close();
    }
  } catch (err) {
    return reportError(err, io, json);
  }
}
