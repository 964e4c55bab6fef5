/**
 * Store maintenance: `fsck` (every manifest verifies, every referenced blob exists and matches, heads
 * consistent, the Merkle tree is the tree of the entries) and `gc` (removes blobs no manifest references, older than a grace period).
 */
import type { Digest } from '../../store/hash/digest.js';
import { StoreError } from '../../store/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import { parseEnvelope } from '../../manifests/crypto/envelope.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import type { Ledger } from '../ledger/ledger.js';
import { fsckTree } from './fsck-tree.js';

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
}

function codeOf(err: unknown): string {
  return err instanceof ManifestError || err instanceof StoreError ? err.code : 'ERROR';
}

/** Checks the whole store. Reads every manifest and every referenced blob; changes nothing. */
export async function fsck(
  ledger: Ledger,
  options: { signal?: AbortSignal; checkBlobs?: boolean } = {},
): Promise<FsckReport> {
  const findings: FsckFinding[] = [];
  const trust = ledger.trustStore();
  const checked = new Set<Digest>();
  let chains = 0;
  let manifests = 0;
  for await (const head of ledger.log.heads()) {
    chains++;
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
      if (m.session !== head.session || m.seq !== entry.seq)
        findings.push({
          code: 'SCOPE_MISMATCH',
          ...at,
          message: `entry holds the manifest of ${m.session} seq ${m.seq}`,
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
  }
  let position = 0;
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
  // The tree over the global order must be exactly the tree of the entries.
  findings.push(...(await fsckTree(ledger.log, options.signal)));
  return { ok: findings.length === 0, chains, manifests, blobsChecked: checked.size, findings };
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
 * the manifest about to reference it. Every manifest counts as a reference, verified or not.
 */
export async function gc(
  ledger: Ledger,
  options: { graceMs: number; dryRun?: boolean; now?: number },
): Promise<GcReport> {
  return ledger.telemetry.run(
    'gc',
    { host: ledger.host },
    () => collect(ledger, options),
    (r) => ({
      attributes: {
        'handoff_ledger.blobs_scanned': r.scanned,
        'handoff_ledger.blobs_removed': r.removed.length,
        'handoff_ledger.blobs_kept_young': r.keptYoung,
        'handoff_ledger.dry_run': options.dryRun === true,
      },
    }),
  );
}

async function collect(
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
    if (!options.dryRun) await ledger.blobs.delete(digest);
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
