/**
 * A trust file the CLI was given (`verify --trust`, `audit-ui --trust`, HANDOFF_LEDGER_TRUST): read as one reads a
 * configuration file (following symlinks; a regular file only, bounded while reading) and parsed as a trust store.
 * Below io.ts, which reads HANDOFF_LEDGER_TRUST with it.
 */
import { AuditError } from '../../manifests/audit/errors.js';
import type { ManifestError } from '../../manifests/errors.js';
import {
  MAX_TRUST_FILE_BYTES,
  mergeTrust,
  parseTrustStore,
  sameKeyRevoked,
  type TrustStore,
} from '../../manifests/format/trust.js';
import { readBoundedFile } from '../../store/fs/bounded-read.js';
import { quoted } from '../../manifests/encoding/printable.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { ownerProblem } from '../../store/fs/owner.js';
import type { Stats } from 'node:fs';

/**
 * A trust file the store's ledger trusts beside trust.json (`anchor`: HANDOFF_LEDGER_TRUST, whose keys make resume
 * return what they sign) is held to trust.json's rule: another user than this one or root owns it, or group or others
 * may write it, and they could list a key of their own.
 * @throws AuditError `TRUST_INVALID`
 */
function refuseUnsafeAnchor(path: string, st: Stats): void {
  const foreign = ownerProblem(`trust file ${quoted(path)}`, st.uid);
  if (foreign) throw new AuditError('TRUST_INVALID', `${foreign}: another user could list keys in it`);
  if ((st.mode & 0o022) !== 0)
    throw new AuditError(
      'TRUST_INVALID',
      `trust file ${quoted(path)} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}): they could list keys in it; run chmod 644 on it`,
    );
}

/**
 * Reads and parses a trust file, and returns its text too (audit-ui serves that text to the page). `anchor`: one the
 * store's ledger trusts (HANDOFF_LEDGER_TRUST), refused as trust.json is when another user owns it or group or others
 * may write it.
 * @throws AuditError `TRUST_INVALID`
 */
export async function readTrustFile(
  path: string,
  options: { anchor?: boolean } = {},
): Promise<{ trust: TrustStore; text: string }> {
  let text: string;
  try {
    // One descriptor, opened without blocking: a FIFO (or `--trust <(…)`, a pipe), a device or a directory is
    // `cannot read trust file "…": not a regular file` at once, never waited on for a writer or read endlessly.
    const bytes = await readBoundedFile(path, MAX_TRUST_FILE_BYTES, {
      notAFile: () => new Error('not a regular file'),
      // Judged on the descriptor read, as the store's own trust.json is (src/keys/keyring.ts).
      ...(options.anchor === true ? { check: (st: Stats) => refuseUnsafeAnchor(path, st) } : {}),
      tooLarge: () =>
        new AuditError('TRUST_INVALID', `trust file ${quoted(path)} is over ${MAX_TRUST_FILE_BYTES} bytes`),
    });
    text = bytes.toString('utf8');
  } catch (err) {
    if (err instanceof AuditError) throw err;
    throw new AuditError('TRUST_INVALID', `cannot read trust file ${quoted(path)}: ${errnoText(err)}`, { cause: err });
  }
  try {
    return { trust: parseTrustStore(text), text };
  } catch (err) {
    throw new AuditError('TRUST_INVALID', `trust file ${quoted(path)}: ${(err as ManifestError).message}`, {
      cause: err,
    });
  }
}

/**
 * Reads the trust files an auditor gave (`--trust` once per file: the exports of a shared store's hosts) and merges
 * them (`mergeTrust`): a key listed in several gets the most restrictive window of its listings, every listing of one
 * public key (whatever its host, key id or kind) takes the earliest revocation any listing of it carries, and one key
 * id listed with two public keys is refused. One file is returned with its own text, its store under the same rule for
 * revocations (`sameKeyRevoked`: a file listing a key under two key ids, one revoked, trusts neither after the
 * revocation); several as their union, as JSON.
 * @throws AuditError `TRUST_INVALID`
 */
export async function readTrustFiles(paths: readonly string[]): Promise<{ trust: TrustStore; text: string }> {
  const read = [];
  for (const path of paths) read.push(await readTrustFile(path));
  // One file keeps its own text (audit-ui serves it to the page, which reads it so too); its store follows the rule.
  if (read.length === 1) return { trust: sameKeyRevoked(read[0]!.trust), text: read[0]!.text };
  let trust: TrustStore;
  try {
    trust = mergeTrust(...read.map((r) => r.trust));
  } catch (err) {
    throw new AuditError(
      'TRUST_INVALID',
      `trust files ${paths.map(quoted).join(', ')}: ${(err as ManifestError).message}`,
      {
        cause: err,
      },
    );
  }
  return { trust, text: `${JSON.stringify(trust, null, 2)}\n` };
}
