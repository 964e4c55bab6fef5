/**
 * `handoff-ledger verify DIR --trust keys.json [--json] [--workers N] [--verifier node|noble] [--require-blobs]
 * [--expect full|filtered] [--principal ID] [--session ID] [--max-bundle-bytes N]`: the offline auditor. Exit 0 clean, 1 findings, 2 usage
 * or I/O error. A progress bar goes to stderr only when stderr is a terminal; stdout carries the report alone,
 * every line of it escaped (bundle contents are data, never terminal control).
 */
import { availableParallelism } from 'node:os';
import { loadHashBackend } from '../../store/hash/backends.node.js';
import type { Finding } from '../../manifests/audit/findings.js';
import {
  describeBundle,
  describeCheckpoint,
  describeCoverage,
  describeSince,
  describeTrust,
  describeSigners,
  describeWitnessKeys,
  describeFinding,
  describeVerdict,
  describeWitnesses,
} from '../../manifests/audit/report-text.js';
import { nobleVerifier } from '../../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import { readTrustFiles } from './trust-file.js';
import type {
  AuditProgress,
  AuditScope,
  BundleAuditReport,
  BundleExpectation,
} from '../../manifests/audit/verify-chain.js';
import {
  readAuditorScope,
  readByteBound,
  readExpectation,
  type SettingWords,
} from '../../manifests/audit/auditor-options.js';
import { auditBundleAs } from '../ops/audit.js';
import {
  MAX_WITNESS_KEYS_BYTES,
  readWitnessPolicy,
  type WitnessPolicy,
} from '../../manifests/audit/verify-witnesses.js';
import { readSince } from './export.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { isErrnoError } from '../../store/errors.js';
import type { LineVerifier } from '../../manifests/audit/verify-line.js';
import { createWorkerLineVerifier } from '../../manifests/audit/verify-workers.node.js';
import { openBundleDir } from '../ops/bundle-dir.js';
import { storedSummaryProblem } from '../../manifests/format/summary.js';
import {
  colours,
  CommandLineError,
  EXIT_OK,
  EXIT_REFUSED,
  usableHashFromEnv,
  parse,
  readRegularFile,
  reportError,
  UsageError,
  wantsJson,
  wholeNumber,
  type CliIo,
} from './io.js';
import {
  counted,
  printable,
  printableJson,
  printableOnce,
  printableOnceLines,
} from '../../manifests/encoding/printable.js';

/** Below this, starting threads costs more than it saves (~4,000 manifests). */
const WORKERS_FROM_BYTES = 3 * 1024 * 1024;

export const usage =
  'verify DIR --trust FILE [--trust FILE]… [--since FILE] [--witness-keys FILE --quorum K] [--json] [--workers auto|N] [--verifier node|noble] [--require-blobs] [--expect full|filtered] [--principal ID] [--session ID] [--max-bundle-bytes N]';

/**
 * `--witness-keys FILE --quorum K`: both or neither (manifests/audit/verify-witnesses.ts); the policy and the
 * file's text (`audit-ui` serves it to the page). @throws AuditError `USAGE`
 */
export async function readWitnessArgs(
  file: string | undefined,
  quorum: string | undefined,
): Promise<{ policy: WitnessPolicy; text: string } | undefined> {
  let text = '';
  // A regular file (a FIFO, a device or a directory is `not a regular file`, never waited on or read), bounded. A file
  // that cannot be read is said by its errno code (`ENOENT (no such file or directory)`), as `--since` and `--trust`
  // say it: the errno's own message repeats the path raw, after the quoted one.
  const read = async () => {
    let bytes: Buffer;
    try {
      bytes = await readRegularFile(
        file!,
        MAX_WITNESS_KEYS_BYTES,
        () => new UsageError(`input is larger than ${MAX_WITNESS_KEYS_BYTES} bytes`),
      );
    } catch (err) {
      throw isErrnoError(err) ? new UsageError(errnoText(err)) : err;
    }
    return (text = bytes.toString('utf8'));
  };
  const policy = await readWitnessPolicy(file === undefined ? undefined : { name: file, read }, quorum);
  return policy && { policy, text };
}

async function readTrust(paths: readonly string[]): Promise<TrustStore> {
  return (await readTrustFiles(paths)).trust;
}

function progressBar(io: CliIo): { update: (p: AuditProgress) => void; done: () => void } {
  const tty = (io.stderr as { isTTY?: boolean }).isTTY === true;
  let last = 0;
  let drawn = false;
  return {
    update(p) {
      if (!tty) return;
      const now = Date.now();
      if (now - last < 100) return;
      last = now;
      const frac = p.totalBytes ? Math.min(1, p.bytes / p.totalBytes) : 0;
      const width = 30;
      const full = Math.round(frac * width);
      io.stderr.write(
        `\r[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(frac * 100).toFixed(0).padStart(3)}%  ${p.lines.toLocaleString('en-US')} lines`,
      );
      drawn = true;
    },
    done() {
      if (drawn) io.stderr.write('\r\x1b[K');
    },
  };
}

/** `--workers`: `auto`, or a number of threads from 0 (none) to 256 read as every number of the CLI is (`wholeNumber`). */
function workersAsked(text: string): number | 'auto' {
  return text === 'auto' ? 'auto' : wholeNumber(text, '--workers', 0, MAX_WORKER_THREADS, undefined, 'auto');
}

const MAX_WORKER_THREADS = 256;

async function lineVerifierFor(
  workers: number | 'auto',
  trust: TrustStore,
  verifier: 'node' | 'noble',
  size: number,
  io: CliIo,
): Promise<LineVerifier | undefined> {
  if (workers === 0) return undefined;
  if (workers === 'auto') {
    if (availableParallelism() < 2 || size < WORKERS_FROM_BYTES) return undefined;
    try {
      return await createWorkerLineVerifier({ trust, verifier });
    } catch (err) {
      io.stderr.write(`handoff-ledger: verifying in one thread (${printable((err as Error).message)})\n`);
      return undefined;
    }
  }
  return createWorkerLineVerifier({ trust, verifier, threads: workers });
}

const NO_PAINT = { good: (s: string) => s, bad: (s: string) => s };

/**
 * The human-readable report: findings grouped by chain, every line escaped once (report-text.ts escapes each value as
 * it puts it in: a name quoted, an id bare; `printableOnce` prints such a line as it is), one verdict line at the end
 * (its verdict word painted after, so the colour codes are the only control characters that reach the terminal).
 */
export function humanReport(
  dir: string,
  r: BundleAuditReport,
  paint: ReturnType<typeof colours> = NO_PAINT,
  sinceName?: string,
): string {
  const out: string[] = [];
  out.push(describeBundle(dir, r));
  out.push(describeCoverage(r));
  out.push(describeTrust(r));
  const witnessKeys = describeWitnessKeys(r);
  if (witnessKeys !== undefined) out.push(witnessKeys);
  out.push(describeSigners(r));
  const byChain = new Map<string, Finding[]>();
  const unattributed: Finding[] = [];
  for (const f of r.findings) {
    if (f.chain === undefined) unattributed.push(f);
    else {
      const list = byChain.get(f.chain);
      if (list) list.push(f);
      else byChain.set(f.chain, [f]);
    }
  }
  const listAll = r.chains.length <= 20;
  let hidden = 0;
  for (const c of r.chains) {
    const fs = byChain.get(c.session) ?? [];
    if (fs.length === 0 && !listAll) {
      hidden++;
      continue;
    }
    out.push(
      `chain ${printable(c.session)}: ${counted(c.entries, 'manifest')}, head seq ${c.headSeq} ${printable(c.head)} — ${fs.length === 0 ? 'ok' : counted(fs.length, 'finding')}`,
    );
    out.push(...fs.map(describeFinding));
    byChain.delete(c.session);
  }
  for (const [session, fs] of byChain) {
    out.push(`chain ${printable(session)} (out of scope):`, ...fs.map(describeFinding));
  }
  if (hidden > 0) out.push(`${counted(hidden, 'more chain', 'more chains')}: ok`);
  // The origin, key and witness names are quoted escaped once (report-text.ts): printed as they are, not escaped again.
  if (r.checkpoint) out.push(describeCheckpoint(r.checkpoint));
  if (r.checkpoint?.witnesses) out.push(describeWitnesses(r.checkpoint.witnesses));
  // The auditor's earlier checkpoint, in the page's words: an OK report says that this check was made too.
  if (sinceName !== undefined && r.checked.since) out.push(describeSince(r, sinceName));
  if (unattributed.length > 0)
    out.push('lines not attributable to a chain, and bundle-level findings:', ...unattributed.map(describeFinding));
  if (r.findingsTruncated)
    out.push(`… ${counted(r.counts.findings - r.findings.length, 'more finding', 'more findings')} not listed`);
  // Each line escaped once: as report-text made it, only a character left raw in it (nothing should be) escaped.
  return `${printableOnceLines(out)}${describeVerdict(r, paint)}\n`;
}

/** The CLI's words for the auditor's settings (its options), refused as usage errors. */
const OPTION_WORDS: SettingWords = {
  name: (setting) => `--${setting}`,
  refuse: (message) => new UsageError(message),
};

export const auditorScope = (principal: string | undefined, session: string | undefined): AuditScope | undefined =>
  readAuditorScope(principal, session, OPTION_WORDS);

export const byteCount = (text: string): number => readByteBound(text, OPTION_WORDS);

export const expectation = (text: string | undefined): BundleExpectation | undefined =>
  readExpectation(text, OPTION_WORDS);

/** Runs `verify`; returns the exit code. */
export async function run(argv: string[], io: CliIo): Promise<number> {
  let json = wantsJson(argv);
  try {
    const { values, positionals } = parse(
      argv,
      {
        trust: { type: 'string', multiple: true },
        since: { type: 'string' },
        'witness-keys': { type: 'string' },
        quorum: { type: 'string' },
        json: { type: 'boolean', default: false },
        workers: { type: 'string', default: 'auto' },
        verifier: { type: 'string', default: 'node' },
        'require-blobs': { type: 'boolean', default: false },
        expect: { type: 'string' },
        principal: { type: 'string' },
        session: { type: 'string' },
        'max-bundle-bytes': { type: 'string' },
      },
      true,
    );
    json = values.json;
    // DIR left out (or more than one given), a required option left out: a command line of the wrong shape, which
    // points to the command's help.
    if (positionals.length !== 1) throw new CommandLineError(`usage: handoff-ledger ${usage}`);
    if (!values.trust || values.trust.length === 0)
      throw new CommandLineError(
        '--trust FILE is required: the pinned public keys of the hosts (`handoff-ledger keys export`)',
      );
    if (values.verifier !== 'node' && values.verifier !== 'noble')
      throw new UsageError('--verifier must be node or noble');
    // Read with the other arguments, before any file: a mistyped --workers is said before a bundle is opened.
    const workers = workersAsked(values.workers);
    const dir = positionals[0]!;
    const scope = auditorScope(values.principal, values.session);
    const expect = expectation(values.expect);
    const maxManifestsBytes =
      values['max-bundle-bytes'] === undefined ? undefined : byteCount(values['max-bundle-bytes']);
    // The BLAKE3 backend asked for, loaded before any file is read (a `native` that cannot load here: USAGE).
    const hashName = await usableHashFromEnv(io.env);
    const trust = await readTrust(values.trust);
    const since = values.since === undefined ? undefined : await readSince(values.since);
    const witnesses = await readWitnessArgs(values['witness-keys'], values.quorum);
    const reader = await openBundleDir(dir, { maxManifestsBytes });
    const size = (await reader.manifestsSize?.()) ?? 0;
    const lineVerifier = await lineVerifierFor(workers, trust, values.verifier, size, io);
    const bar = progressBar(io);
    let report: BundleAuditReport;
    try {
      report = await auditBundleAs(
        reader,
        {
          trust,
          verifier: values.verifier === 'noble' ? nobleVerifier : nodeVerifier,
          ...(lineVerifier ? { lineVerifier } : {}),
          hash: await loadHashBackend(hashName, (m) => io.stderr.write(`${printableOnce(m)}\n`)),
          checkSummary: storedSummaryProblem,
          requireBlobs: values['require-blobs'],
          ...(scope ? { scope } : {}),
          ...(expect ? { expect } : {}),
          onProgress: bar.update,
          ...(since !== undefined ? { since } : {}),
          ...(witnesses ? { witnesses: witnesses.policy } : {}),
        },
        { since: '--since' },
      );
    } finally {
      bar.done();
      await lineVerifier?.close();
    }
    io.stdout.write(
      json
        ? `${printableJson({ bundle: dir, ...report })}\n`
        : humanReport(dir, report, colours(io, io.stdout), values.since),
    );
    return report.ok ? EXIT_OK : EXIT_REFUSED;
  } catch (err) {
    return reportError(err, io, json);
  }
}
