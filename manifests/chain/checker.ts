/**
 * Checks a stored chain entry by entry: the one walk behind the ledger's history and resume and fsck.
 * Per entry, in order: the signed manifest verifies (verify-manifest.ts), the entry is stored where and
 * as its manifest says (entry rules), and it links to the entry before (./link-rules.ts). Isomorphic.
 */
import type { Digest } from '../../store/hash/digest.js';
import { shownValue } from '../../store/errors.js';
import { ManifestError, type ManifestErrorCode } from '../errors.js';
import { verifyEnvelopeWith, type VerifiedManifest, type VerifyManifestOptions } from '../crypto/verify-manifest.js';
import type { LogEntry } from '../log/log.js';
import type { VerifiedManifestCache } from '../crypto/verified-cache.js';
import { checkLink, type ChainLink, type LinkRuleCode } from './link-rules.js';

/**
 * Store-only rules (a bundle has no stored fields to compare): `SCOPE_MISMATCH` the entry is stored under
 * another session than its manifest's; `SEQ_MISMATCH` under another seq; `PRINCIPAL_MISMATCH` with another
 * principal than the signed one; `ID_MISMATCH` under an id that is not the hash of its payload.
 */
export type EntryRuleCode = 'SCOPE_MISMATCH' | 'SEQ_MISMATCH' | 'PRINCIPAL_MISMATCH' | 'ID_MISMATCH';

/** Why a signed manifest did not verify: the same codes the auditor reports for steps 1-5. */
export type ManifestRuleCode = Extract<
  ManifestErrorCode,
  | 'ENVELOPE_INVALID'
  | 'PAYLOAD_TYPE'
  | 'KEY_UNTRUSTED'
  | 'KEY_EXPIRED'
  | 'KEY_REVOKED'
  | 'SIGNATURE_INVALID'
  | 'MANIFEST_INVALID'
>;

export type ChainCheckCode = ManifestRuleCode | EntryRuleCode | LinkRuleCode;

export interface ChainCheckFinding {
  code: ChainCheckCode;
  message: string;
}

export interface CheckedEntry {
  /** Present when the signed manifest verified. */
  verified?: VerifiedManifest;
  /** The verification error itself, for readers that refuse with it. */
  error?: ManifestError;
  /** Every rule the entry breaks (empty: it passed). */
  findings: ChainCheckFinding[];
}

/** The rules between a stored entry and the manifest it holds. */
export function checkStoredEntry(entry: LogEntry, v: VerifiedManifest, session: string): ChainCheckFinding | undefined {
  const m = v.manifest;
  // The signed fields are schema-checked ids and counts; the stored ones are whatever the log holds (a hand edit, a
  // log of the caller's): quoted as data, shortened, nothing a terminal acts on left raw.
  if (entry.session !== session)
    return { code: 'SCOPE_MISMATCH', message: `the entry is stored under session ${shownValue(entry.session)}` };
  if (m.session !== session)
    return { code: 'SCOPE_MISMATCH', message: `the entry holds a manifest of session ${m.session}` };
  if (m.seq !== entry.seq)
    return {
      code: 'SEQ_MISMATCH',
      message: `the entry at seq ${shownValue(entry.seq)} holds the manifest of seq ${m.seq}`,
    };
  if (m.principal !== entry.principal)
    return {
      code: 'PRINCIPAL_MISMATCH',
      message: `the entry records principal ${shownValue(entry.principal)}, the manifest is signed for ${m.principal}`,
    };
  if (v.id !== entry.id) return { code: 'ID_MISMATCH', message: 'the stored id is not the hash of the payload' };
  return undefined;
}

/** Walks one session's stored chain in seq order; feed it every entry, from `startsAt` (default 0). */
export class ChainChecker {
  private parent: ChainLink | undefined;

  /** `options.cache`: verdicts kept across checkers (a ledger re-reads the same entries on every resume). */
  constructor(
    private readonly session: string,
    private readonly options: VerifyManifestOptions & { cache?: VerifiedManifestCache },
    private readonly startsAt = 0,
  ) {}

  check(entry: LogEntry): CheckedEntry {
    let verified: VerifiedManifest;
    try {
      verified = this.options.cache
        ? this.options.cache.verify(entry.envelope, this.options)
        : verifyEnvelopeWith(entry.envelope, this.options);
    } catch (err) {
      if (!(err instanceof ManifestError)) throw err;
      // The next entry is linked against what the store says this one is: one bad manifest, one finding.
      this.parent = { seq: entry.seq, id: entry.id, prev: null };
      return { error: err, findings: [{ code: err.code as ManifestRuleCode, message: err.message }] };
    }
    const findings: ChainCheckFinding[] = [];
    const stored = checkStoredEntry(entry, verified, this.session);
    if (stored) findings.push(stored);
    const m = verified.manifest;
    const link: ChainLink = { seq: m.seq, id: verified.id as Digest, prev: m.prev, createdAt: m.createdAt };
    const broken = checkLink(this.parent, link, this.startsAt);
    if (broken) findings.push({ code: broken.code, message: broken.message });
    this.parent = link;
    return { verified, findings };
  }
}
