/**
 * Store maintenance: `fsck` (every manifest verifies, every referenced blob exists and matches, heads
 * consistent) and `gc` (removes blobs no manifest references, older than a grace period).
 */
import type { Digest } from '../../store/hash/digest.js';
import { StoreError } from '../../store/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import { parseEnvelope } from '../../manifests/crypto/envelope.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import type { Ledger } from '../ledger/ledger.js';
import type { ChainHead } from '../../manifests/log/log.js';
import type { TrustStore } from '../../manifests/format/trust.js';

export interface FsckFinding {
  code: string;
  session?: string;
  seq?: number;
  message: string;
}

export interface FsckReport {
  ok: boolean;
  chains: number;
  manifests: number;
  blobsChecked: number;
  findings: FsckFinding[];
  /** What fsck cannot check, because nothing signs it (printed with every report, clean or not). */
  notVerified: string;
}

/**
 * Grants are records of the log only: no signature covers them, so a writer of the database can grant a principal
 * another's session undetectably. A session's owner is checked (the principal of its signed seq 0).
 */
export const FSCK_NOT_VERIFIED =
  'grant and revocation records (unsigned: anyone who can write the database can change who may read a session)';

function codeOf(err: unknown): string {
  return err instanceof ManifestError || err instanceof StoreError ? err.code : 'ERROR';
}

/** A corrupt stored record (`RECORD_CORRUPT`) becomes a finding, and fsck goes on with what it can still read. */
function recordProblem(err: unknown, findings: FsckFinding[], session?: string): void {
  if (!(err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
  findings.push({ code: err.code, ...(session !== undefined ? { session } : {}), message: err.message });
}

/**
 * Checks the whole store. Reads every manifest and every referenced blob; changes nothing. A chain whose records
 * are corrupt is reported (`RECORD_CORRUPT`) and the other chains are still checked.
 */
export async function fsck(
  ledger: Ledger,
  options: { signal?: AbortSignal; checkBlobs?: boolean } = {},
): Promise<FsckReport> {
  const findings: FsckFinding[] = [];
  const trust = ledger.trustStore();
  const checked = new Set<Digest>();
  let chains = 0;
  let manifests = 0;
  try {
    for await (const head of ledger.log.heads()) {
      chains++;
      try {
        manifests += await checkChain(ledger, head, trust, checked, findings, options);
      } catch (err) {
        recordProblem(err, findings, head.session);
      }
    }
  } catch (err) {
    recordProblem(err, findings);
  }
  let position = 0;
  try {
    for await (const entry of ledger.log.entries()) {
      if (entry.position !== position)
        findings.push({
          code: 'POSITION_GAP',
          session: entry.session,
          seq: entry.seq,
          message: `global position ${entry.position}, expected ${position}`,
        });
      position = entry.position + 1;
    }
  } catch (err) {
    recordProblem(err, findings);
  }
  return {
    ok: findings.length === 0,
    chains,
    manifests,
    blobsChecked: checked.size,
    findings,
    notVerified: FSCK_NOT_VERIFIED,
  };
}

/** One chain: every entry's signature, scope, id and link, its blob, its head and its owner. Returns the entries read. */
async function checkChain(
  ledger: Ledger,
  head: ChainHead,
  trust: TrustStore,
  checked: Set<Digest>,
  findings: FsckFinding[],
  options: { signal?: AbortSignal; checkBlobs?: boolean },
): Promise<number> {
  let manifests = 0;
  let prev: Digest | null = null;
  let seq = 0;
  for await (const entry of ledger.log.chain(head.session)) {
    options.signal?.throwIfAborted();
    manifests++;
    const at = { session: head.session, seq: entry.seq };
    if (entry.seq !== seq)
      findings.push({ code: 'SEQ_GAP', ...at, message: `expected seq ${seq}, found ${entry.seq}` });
    seq = entry.seq + 1;
    let verified;
    try {
      verified = verifyManifestEnvelope(entry.envelope, { trust, verifier: ledger.verifier });
    } catch (err) {
      findings.push({ code: codeOf(err), ...at, message: (err as Error).message });
      prev = entry.id;
      continue;
    }
    const m = verified.manifest;
    if (m.session !== head.session || m.seq !== entry.seq || m.principal !== entry.principal)
      findings.push({
        code: 'SCOPE_MISMATCH',
        ...at,
        message: `entry holds the manifest of ${m.session} seq ${m.seq} by ${m.principal}`,
      });
    // The owner record decides who may read the session; seq 0's signed principal is what it must say.
    if (m.seq === 0 && m.session === head.session && head.owner !== m.principal)
      findings.push({
        code: 'OWNER_MISMATCH',
        ...at,
        message: `the chain head names owner ${head.owner}; seq 0 was signed for ${m.principal}`,
      });
    if (verified.id !== entry.id)
      findings.push({ code: 'ID_MISMATCH', ...at, message: 'the stored id is not the hash of the payload' });
    if (m.prev !== prev)
      findings.push({ code: 'PREV_MISMATCH', ...at, message: 'prev does not name the previous entry' });
    prev = verified.id;
    if (options.checkBlobs !== false && !checked.has(m.summary.digest)) {
      checked.add(m.summary.digest);
      try {
        const bytes = await ledger.blobs.get(m.summary.digest, { maxBytes: Math.max(m.summary.size, 1) });
        if (bytes.length !== m.summary.size)
          findings.push({
            code: 'BLOB_SIZE',
            ...at,
            message: `blob is ${bytes.length} bytes, manifest says ${m.summary.size}`,
          });
      } catch (err) {
        findings.push({ code: codeOf(err), ...at, message: (err as Error).message });
      }
    }
  }
  if (seq !== head.seq + 1 || prev !== head.id) {
    findings.push({
      code: 'HEAD_MISMATCH',
      session: head.session,
      message: `head says seq ${head.seq} ${head.id}; the chain ends at seq ${seq - 1}`,
    });
  }
  return manifests;
}

export interface GcReport {
  scanned: number;
  referenced: number;
  removed: Digest[];
  keptYoung: number;
}

/**
 * Removes blobs that no manifest references and that were stored more than `graceMs` ago. A blob
 * of a publish in flight is younger than any sensible grace period, so it is never taken from under
 * the manifest about to reference it; a publish whose summary equals an old orphan refreshes its storage time
 * when it re-puts the bytes, and the delete itself re-checks that time. Every manifest counts as a reference,
 * verified or not.
 */
export async function gc(
  ledger: Ledger,
  options: { graceMs: number; dryRun?: boolean; now?: number },
): Promise<GcReport> {
  if (!Number.isFinite(options.graceMs) || options.graceMs < 0)
    throw new RangeError('graceMs must be a non-negative number');
  const referenced = new Set<string>();
  for await (const entry of ledger.log.entries()) {
    try {
      const payload = parseEnvelope(entry.envelope).payload;
      const digest = (JSON.parse(new TextDecoder().decode(payload)) as { summary?: { digest?: string } }).summary
        ?.digest;
      if (typeof digest === 'string') referenced.add(digest);
    } catch {
      // An unreadable manifest references nothing we can name; fsck reports it.
    }
  }
  const cutoff = (options.now ?? Date.now()) - options.graceMs;
  const removed: Digest[] = [];
  let scanned = 0;
  let keptYoung = 0;
  for await (const digest of ledger.blobs.list()) {
    scanned++;
    if (referenced.has(digest)) continue;
    const st = await ledger.blobs.stat(digest);
    if (!st) continue;
    if (st.storedAtMs > cutoff) {
      keptYoung++;
      continue;
    }
    // Judged again by the store itself at the delete: a publish that re-put these bytes since the stat keeps them.
    if (!options.dryRun && !(await ledger.blobs.delete(digest, { storedBeforeMs: cutoff + 1 }))) {
      keptYoung++;
      continue;
    }
    removed.push(digest);
  }
  return { scanned, referenced: referenced.size, removed, keptYoung };
}

/** Parses durations like `90s`, `30m`, `24h`, `7d`, `0`. */
export function parseDuration(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new RangeError(`not a duration: ${JSON.stringify(text)} (use e.g. 30m, 24h, 7d)`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[
    (m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'
  ];
  return Number(m[1]) * unit;
}
