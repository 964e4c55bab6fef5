/**
 * Files for the auditor page's checkpoint tests, made by real ledgers: a full bundle (with blobs) cut at a
 * checkpoint of size 5, its trust file, and earlier checkpoints as an auditor keeps them — one the bundle
 * extends, one of a rewritten history (same keys and origin), one of another log — plus the CLI's
 * report on them, which the page must equal.
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';
import { cosignCheckpoint, encodeCosignerKey } from '../../manifests/crypto/cosignature.js';
import type { NoteSigner } from '../../manifests/crypto/note.js';
import { run as verifyCli } from '../../src/cli/verify.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { writeTrustFile } from './bundle-builder.js';
import { captureIo } from './capture-io.js';
import { sampleSummary } from './tmp.js';
import { noteSigner } from '../witness/support.js';

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

/**
 * `handoff-ledger verify DIR --trust T --json [--since NOTE] [more…]`: exit code, report (if it ran), stderr.
 */
export async function cliVerify(
  dir: string,
  trust: string,
  since?: string,
  more: string[] = [],
): Promise<{ code: number; report?: BundleAuditReport; stderr: string }> {
  const c = captureIo();
  const args = [dir, '--trust', trust, '--json', '--workers', '0', ...(since ? ['--since', since] : []), ...more];
  const code = await verifyCli(args, c.io);
  const out = JSON.parse(c.stdout()) as BundleAuditReport | { error: unknown };
  return { code, stderr: c.stderr(), ...('error' in out ? {} : { report: out }) };
}

/** A witness name with markup in it (valid: no space, no `+`): the page must show it as text. */
export const HOSTILE_WITNESS = 'witness.example/<img/src=x/onerror=globalThis.__pwned=1>';

export interface WitnessFiles {
  /** Both pinned witness keys, one per line, with a comment line. */
  keys: string;
  /** The bundle, its checkpoint cosigned by both pinned witnesses and by one nobody pinned. */
  cosigned: string;
  /** Cosigned by one pinned witness only. */
  one: string;
  /** One valid cosignature, and the other witness's cosignature of the rewritten history pasted on. */
  pasted: string;
  /** The time both witnesses say they cosigned at (POSIX seconds). */
  time: number;
}

/**
 * Copies of `f.bundle` whose checkpoint.note carries C2SP cosignatures made here (no witness server needed), and
 * the witness keys file an auditor pins: one witness named plainly, one named with markup.
 */
export async function writeWitnessFiles(base: string, f: CheckpointFiles): Promise<WitnessFiles> {
  const time = 1_764_547_200;
  const w1 = noteSigner('witness.example/w1', new Uint8Array(32).fill(41));
  const w2 = noteSigner(HOSTILE_WITNESS, new Uint8Array(32).fill(42));
  const stranger = noteSigner('witness.example/unpinned', new Uint8Array(32).fill(43));
  const textOf = (note: string) => note.slice(0, note.indexOf('\n\n') + 1);
  const note = readFileSync(join(f.bundle, 'checkpoint.note'), 'utf8');
  const cosign = (text: string, ...by: NoteSigner[]) =>
    Promise.all(by.map((w) => cosignCheckpoint(text, w, time))).then((lines) => lines.join(''));
  const copy = (name: string, extra: string) => {
    const dir = join(base, name);
    cpSync(f.bundle, dir, { recursive: true });
    writeFileSync(join(dir, 'checkpoint.note'), note + extra);
    return dir;
  };
  const keys = join(base, 'witnesses.txt');
  writeFileSync(
    keys,
    `# pinned witnesses\n${encodeCosignerKey(w1.name, w1.publicKey)}\n\n${encodeCosignerKey(w2.name, w2.publicKey)}\n`,
  );
  return {
    keys,
    time,
    cosigned: copy('cosigned', await cosign(textOf(note), w1, stranger, w2)),
    one: copy('one-cosignature', await cosign(textOf(note), w1)),
    pasted: copy(
      'pasted',
      (await cosign(textOf(note), w1)) + (await cosign(textOf(readFileSync(f.forked, 'utf8')), w2)),
    ),
  };
}
