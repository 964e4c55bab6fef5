/**
 * Files for the auditor page's checkpoint tests, made by real ledgers: a full bundle (with blobs) cut at a
 * checkpoint of size 5, its trust file, and earlier checkpoints as an auditor keeps them — one the bundle
 * extends, one of a rewritten history (same keys and origin), one of another log — plus the CLI's
 * report on them, which the page must equal.
 */
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { writeTrustFile } from './bundle-builder.js';
import { captureIo } from './capture-io.js';
import { sampleSummary } from './tmp.js';

export const ORIGIN = 'example.com/audited';

export interface CheckpointFiles {
  bundle: string;
  /** `export --session s1` of the same log: inclusion proofs and heads.jsonl. */
  sessionBundle: string;
  trust: string;
  /** The log's checkpoint at size 2: the bundle extends it. */
  earlier: string;
  /** A checkpoint of the same origin and keys over another history. */
  forked: string;
  /** Another log's checkpoint, signed by a key the trust file does not pin. */
  foreign: string;
}

const publish = (l: Ledger, session: string, marker: number) =>
  l.publish({ principal: 'alice', session, run: 'r' }, sampleSummary(marker));

async function checkpointNote(ledger: Ledger, path: string): Promise<string> {
  writeFileSync(path, (await ledger.checkpoint()).note);
  return path;
}

/** Writes the files under `base` (an existing private directory). */
export async function writeCheckpointFiles(base: string): Promise<CheckpointFiles> {
  const at = (name: string) => join(base, name);
  const ledger = await openLedger({ root: at('store'), host: 'h1', origin: ORIGIN });
  let earlier: string;
  try {
    await publish(ledger, 's1', 0);
    await publish(ledger, 's2', 0);
    earlier = await checkpointNote(ledger, at('earlier.note'));
    await publish(ledger, 's1', 1);
    await publish(ledger, 's2', 1);
    await publish(ledger, 's1', 2);
    await exportBundle(ledger, { out: at('audit-2026-11'), withBlobs: true });
    await exportBundle(ledger, { out: at('audit-s1'), session: 's1' });
    await writeTrustFile(at('trust.json'), ledger.trustStore());
  } finally {
    await ledger.close();
  }
  // A log shown to an earlier auditor and then rewritten.
  mkdirSync(at('fork'), { mode: 0o700 });
  cpSync(join(at('store'), 'keys'), join(at('fork'), 'keys'), { recursive: true });
  cpSync(join(at('store'), 'trust.json'), join(at('fork'), 'trust.json'));
  const fork = await openLedger({ root: at('fork'), host: 'h1', origin: ORIGIN });
  let forked: string;
  try {
    await publish(fork, 'other', 0);
    await publish(fork, 'other', 1);
    forked = await checkpointNote(fork, at('forked.note'));
  } finally {
    await fork.close();
  }
  const other = await openLedger({ root: at('other'), host: 'h2', origin: 'example.org/other' });
  let foreign: string;
  try {
    await publish(other, 'x', 0);
    foreign = await checkpointNote(other, at('foreign.note'));
  } finally {
    await other.close();
  }
  return {
    bundle: at('audit-2026-11'),
    sessionBundle: at('audit-s1'),
    trust: at('trust.json'),
    earlier,
    forked,
    foreign,
  };
}

/** `handoff-ledger verify DIR --trust T --json [--since NOTE]`: exit code, report (if it ran), stderr. */
export async function cliVerify(
  dir: string,
  trust: string,
  since?: string,
): Promise<{ code: number; report?: BundleAuditReport; stderr: string }> {
  const c = captureIo();
  const args = [dir, '--trust', trust, '--json', '--workers', '0', ...(since ? ['--since', since] : [])];
  const code = await verifyCli(args, c.io);
  const out = JSON.parse(c.stdout()) as BundleAuditReport | { error: unknown };
  return { code, stderr: c.stderr(), ...('error' in out ? {} : { report: out }) };
}
