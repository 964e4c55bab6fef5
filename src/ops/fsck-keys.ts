/**
 * fsck of the log's signing-key records (LevelDB `k!<keyId>`, PostgreSQL `signing_keys`): what orders appends
 * against rotation and revocation. Each record must parse, no manifest may be recorded as signed at or after the
 * window the record closed, the closed window must be where trust.json ends the key, and the newest manifest of
 * each key must be no newer than its record says. A key with no record at all is not judged: stores written by
 * 0.1.0 kept none (a record behind its manifests lets a rotation end the window
 * before one of them, and that manifest would stop verifying).
 */
import { throwIfCancelled } from '../errors.js';
import type { ManifestLog, SigningKeyRecord } from '../../manifests/log/log.js';
import { windowEndOf, type TrustStore } from '../../manifests/format/trust.js';
import { ManifestError } from '../../manifests/errors.js';
import { quoted, shellWord } from '../../manifests/encoding/printable.js';
import { shownValue } from '../../store/errors.js';
import type { FsckFinding } from './maintenance.js';

/**
 * @param storeTrust this store's own trust.json (not keys the caller added: the log closes only its windows)
 * @param newestSigned per key id, the newest `createdAt` among the verified manifests the chain walk read
 * @param trust every key the chains were verified under (the store's own and those the caller added): a revocation
 *   of another host's key there (a shared PostgreSQL log, each host's own root) exempts its record from
 *   KEY_SIGNED_AFTER_CLOSE as a revocation in trust.json does
 */
export async function fsckSigningKeys(
  log: ManifestLog,
  storeTrust: TrustStore,
  newestSigned: ReadonlyMap<string, string>,
  signal?: AbortSignal,
  trust: TrustStore = storeTrust,
): Promise<FsckFinding[]> {
  const findings: FsckFinding[] = [];
  // Unreadable records are reported once, as RECORD_CORRUPT, and judged neither for nor against anything else.
  const records = new Map<string, SigningKeyRecord>();
  const corrupt = (err: unknown) => {
    if (!(err instanceof ManifestError && (err.code === 'RECORD_CORRUPT' || err.code === 'INVALID_ARGUMENT')))
      throw err;
    findings.push({ code: 'RECORD_CORRUPT', message: err.message });
  };
  try {
    for await (const keyId of log.signingKeys.keyIds()) {
      throwIfCancelled(signal);
      try {
        const rec = await log.signingKeys.get(keyId);
        if (rec) records.set(keyId, rec);
      } catch (err) {
        corrupt(err);
      }
    }
  } catch (err) {
    corrupt(err);
  }
  const trusted = new Map(storeTrust.keys.map((k) => [k.keyId, k]));
  const revocations = new Set(
    trust.keys.filter((k) => k.revokedAt !== undefined).map((k) => `${k.keyId}\u0000${k.revokedAt}`),
  );
  for (const [keyId, rec] of records) {
    if (rec.lastSignedAt === undefined || rec.closedAt === undefined || rec.lastSignedAt < rec.closedAt) continue;
    // A revocation may be dated into the past on purpose: each manifest past it is already KEY_REVOKED. Another host's
    // key is revoked in the trust its keys were given in, not in this store's trust.json.
    if (trusted.get(keyId)?.revokedAt === rec.closedAt) continue;
    if (revocations.has(`${keyId}\u0000${rec.closedAt}`)) continue;
    findings.push({
      code: 'KEY_SIGNED_AFTER_CLOSE',
      message: `key ${quoted(keyId)}: the log records a manifest dated ${rec.lastSignedAt}, at or after its window end ${rec.closedAt}`,
    });
  }
  // A key without any record is not judged: stores written by 0.1.0 kept none (its rotations included).
  // A key listed for several hosts (docs/DESIGN.md "Keys and trust") is judged per listing, each finding naming
  // its listing's host: without it, two listings ended alike read as the same line twice.
  const listings = new Map<string, number>();
  for (const key of storeTrust.keys) listings.set(key.keyId, (listings.get(key.keyId) ?? 0) + 1);
  for (const key of storeTrust.keys) {
    const rec = records.get(key.keyId);
    if (!rec) continue;
    const end = windowEndOf(key);
    // A host id is at most 128 characters: quoted whole, so two listings never read alike.
    const trustSays =
      listings.get(key.keyId)! > 1
        ? `trust.json's listing for host ${shownValue(key.host, 128)} ends`
        : 'trust.json ends';
    if (rec.closedAt !== end)
      findings.push({
        code: 'KEY_WINDOW_MISMATCH',
        message:
          `key ${quoted(key.keyId)}: ${trustSays} its window ${end === undefined ? 'nowhere (it is current)' : `at ${end}`}, ` +
          `the log ${rec.closedAt === undefined ? 'has not closed it' : `closed it at ${rec.closedAt}`}` +
          // The log behind trust.json (a store restored from before the rotation or revocation): closing the log's
          // window there changes nothing auditors hold, and is the remedy (a revocation would revoke more).
          (end !== undefined && (rec.closedAt === undefined || rec.closedAt > end)
            ? ` (a store restored from before its rotation or revocation? \`keys close ${shellWord(key.keyId)}\` closes it in the log where trust.json ends it)`
            : ''),
      });
  }
  for (const [keyId, newest] of newestSigned) {
    const last = records.get(keyId)?.lastSignedAt;
    if (!records.has(keyId) || (last !== undefined && last >= newest)) continue;
    findings.push({
      code: 'KEY_RECORD_BEHIND',
      message: `key ${quoted(keyId)} signed a manifest dated ${newest}; the log records ${last === undefined ? 'none' : `its newest as ${last}`}`,
    });
  }
  return findings;
}
