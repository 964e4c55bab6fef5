/**
 * The invariants the crash suite checks after every kill, on the store the killed child left behind:
 * every acknowledged publish is present with its exact content, every manifest verifies (in the ledger
 * and in the offline auditor), chains are contiguous, blobs exist and match, recovery clears staging.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { readPinnedNote } from '../../src/ledger/checkpoint-pin.js';
import { parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { decodeSummary } from '../../src/summary/summary.js';
import { verifyChain } from '../../manifests/audit/verify-chain.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import type { Manifest } from '../../manifests/format/manifest.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { crashSummary, SESSIONS } from './crash-summary.mjs';
import { stagingFiles, Tally } from './store-support.js';

/** One receipt line written by a child after its publish resolved. */
export interface Ack {
  session: string;
  principal: string;
  seq: number;
  id: string;
  digest: string;
  size: number;
  marker: string;
  fill: number;
}

export interface CrashFigures {
  stagingRemovedAtReopen: number;
  manifestsVerified: number;
  blobsVerified: number;
  /** Of them, summaries stored inline in the log (committed in the manifest's own batch). */
  inlineBlobsVerified: number;
  auditedManifests: number;
  longestChain: number;
}

/** Figures before any kill: every count at 0. */
export function noCrashFigures(): CrashFigures {
  return {
    stagingRemovedAtReopen: 0,
    manifestsVerified: 0,
    blobsVerified: 0,
    inlineBlobsVerified: 0,
    auditedManifests: 0,
    longestChain: 0,
  };
}

export const CRASH_HOST = 'crash-host';
export const CRASH_MAX_BYTES = 16 * 1024 * 1024;

export function openCrashStore(root: string): Promise<Ledger> {
  return openLedger({ root, host: CRASH_HOST, maxSummaryBytes: CRASH_MAX_BYTES, onNotice: () => {} });
}

function scopeOf(session: string) {
  return { principal: `owner-${session.slice('session-'.length)}`, session };
}

/** Checks one acknowledged publish against the verified entry found at its seq. */
async function checkAck(
  ledger: Ledger,
  ack: Ack,
  at: { id: string; manifest: Manifest } | undefined,
  tally: Tally,
  fig: CrashFigures,
): Promise<void> {
  tally.present(at !== undefined, `ack ${ack.marker} (${ack.session} seq ${ack.seq}) is missing`);
  tally.present(
    at!.id === ack.id,
    `ack ${ack.marker}: seq ${ack.seq} of ${ack.session} is ${at!.id}, the receipt said ${ack.id}`,
  );
  const m = at!.manifest;
  tally.right(
    m.summary.digest === ack.digest && m.summary.size === ack.size && m.principal === ack.principal,
    `ack ${ack.marker}: manifest fields differ from the receipt`,
  );
  const bytes = await ledger.blobs.get(ack.digest);
  fig.blobsVerified++;
  tally.right(
    isDeepStrictEqual(decodeSummary(bytes), crashSummary(ack.marker, ack.fill)),
    `ack ${ack.marker}: stored summary is not the one published`,
  );
}

/** The size of the tree the store's pin file names (its newest intact slot); throws when it has none. */
async function pinnedSize(root: string): Promise<number> {
  const dir = join(root, 'checkpoints');
  const pins = readdirSync(dir).filter((n) => n.endsWith('.pin'));
  if (pins.length !== 1) throw new Error(`expected one pin file in ${dir}, found ${pins.join(', ') || 'none'}`);
  const note = await readPinnedNote(join(dir, pins[0]!));
  return parseCheckpoint(note.slice(0, note.indexOf('\n\n') + 1)).size;
}

/**
 * Reopens the store (recovery), then checks the receipts acknowledged since the last check — each entry
 * verified on its own, its blob re-hashed — and that every touched session's head resumes. Whole chains
 * are verified by `checkWholeStore`, so this stays proportional to the new receipts.
 */
export async function checkAfterKill(root: string, acks: Ack[], tally: Tally, fig: CrashFigures): Promise<void> {
  const staged = stagingFiles(root).length;
  // The pin as the kill left it (before this open pins again): an intact slot whose tree holds every acknowledged
  // publish, since a publish is acknowledged only once a checkpoint of a tree with it is pinned.
  const pinned = await pinnedSize(root);
  const ledger = await openCrashStore(root);
  try {
    for (const ack of acks) {
      const position = (await ledger.log.entry(ack.session, ack.seq))?.position;
      tally.present(
        position !== undefined && position < pinned,
        `ack ${ack.marker} (${ack.session} seq ${ack.seq}, position ${position}) is not in the pinned tree of size ${pinned}`,
      );
    }
    tally.right(
      ledger.recovery.stagingRemoved === staged,
      `recovery removed ${ledger.recovery.stagingRemoved} staging files, ${staged} were there`,
    );
    tally.right(stagingFiles(root).length === 0, 'staging files left after recovery');
    tally.right(
      ledger.recovery.headProblems.length === 0,
      `recovery found head problems: ${JSON.stringify(ledger.recovery.headProblems)}`,
    );
    fig.stagingRemovedAtReopen += ledger.recovery.stagingRemoved;
    const trust = ledger.trustStore();
    for (const ack of acks) {
      const entry = await ledger.log.entry(ack.session, ack.seq);
      tally.present(entry?.id === ack.id, `ack ${ack.marker} (${ack.session} seq ${ack.seq}) is missing or replaced`);
      const v = verifyManifestEnvelope(entry!.envelope, { trust, verifier: nodeVerifier });
      fig.manifestsVerified++;
      tally.right(
        v.id === ack.id && v.manifest.seq === ack.seq && v.manifest.session === ack.session,
        `ack ${ack.marker}: stored envelope is another manifest`,
      );
      await checkAck(ledger, ack, v, tally, fig);
    }
    for (const session of new Set(acks.map((a) => a.session))) {
      const resumed = await ledger.resume(scopeOf(session));
      const newest = Math.max(...acks.filter((a) => a.session === session).map((a) => a.seq));
      tally.present(
        resumed !== undefined && resumed.seq >= newest,
        `${session}: resume returns seq ${resumed?.seq}, seq ${newest} was acknowledged`,
      );
      fig.manifestsVerified += 2;
    }
  } finally {
    await ledger.close();
  }
}

/**
 * The full check at the end of a store's life: every chain verified from seq 0, every blob re-hashed
 * and decoded, every acknowledged receipt present, and the offline auditor agreeing on the whole log.
 * Returns how many manifests are committed (acknowledged or not).
 */
export async function checkWholeStore(root: string, acks: Ack[], tally: Tally, fig: CrashFigures): Promise<number> {
  const ledger = await openCrashStore(root);
  try {
    tally.right(stagingFiles(root).length === 0, 'staging files left after recovery');
    let committed = 0;
    for (let s = 0; s < SESSIONS; s++) {
      const session = `session-${s}`;
      const chain = await ledger.history(scopeOf(session));
      chain.forEach((e, i) => tally.right(e.manifest.seq === i, `${session}: seq ${e.manifest.seq} at position ${i}`));
      committed += chain.length;
      fig.manifestsVerified += chain.length;
      fig.longestChain = Math.max(fig.longestChain, chain.length);
      for (const e of chain) {
        decodeSummary(await ledger.blobs.get(e.manifest.summary.digest));
        fig.blobsVerified++;
        if (await ledger.log.inlineBlobs?.stat(e.manifest.summary.digest)) fig.inlineBlobsVerified++;
      }
      for (const ack of acks.filter((a) => a.session === session))
        await checkAck(ledger, ack, chain[ack.seq], tally, fig);
    }
    const envelopes: string[] = [];
    for await (const e of ledger.log.entries()) envelopes.push(e.envelope);
    const report = await verifyChain(envelopes, { trust: ledger.trustStore(), verifier: nodeVerifier });
    tally.right(report.ok, `offline audit findings: ${JSON.stringify(report.findings.slice(0, 3))}`);
    tally.right(
      report.counts.manifests === committed,
      `offline audit saw ${report.counts.manifests} manifests, chains hold ${committed}`,
    );
    fig.auditedManifests += report.counts.manifests;
    return committed;
  } finally {
    await ledger.close();
  }
}
