/**
 * Parsing the embedded log's stored records. LevelDB holds them as JSON text that only this process writes, but
 * a disk error or a hand edit can leave anything there: every parse checks the shape it relies on and fails
 * with `RECORD_CORRUPT` naming the record's key, never with a raw `SyntaxError` or a later `TypeError`.
 */
import { ManifestError } from '../../errors.js';
import { escapedText, quoted } from '../../../store/errors.js';
import { isDigest, type Digest } from '../../../store/hash/digest.js';
import { decodeBase64 } from '../../encoding/base64.js';
import type { ChainHead, GrantRecord, LogEntry, SigningKeyRecord } from '../log.js';
import type { HeadsNode } from '../../tlog/session-heads.js';
import { isGrantTime } from '../abstract-log.js';

type Fields = Record<string, unknown>;

const isObject = (v: unknown): v is Fields => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

function corrupt(key: string, problem: string, cause?: unknown): ManifestError {
  // A key the log reads by name is built from validated ids and hex, but one a listing walks to (a grant's, an
  // entry's, written behind the log's back) can hold anything: what a terminal acts on is escaped (as text already
  // so: a key quoted above passes unchanged).
  return new ManifestError('RECORD_CORRUPT', `manifest log record ${escapedText(key)} is corrupt: ${problem}`, {
    cause,
  });
}

function parse<T>(key: string, raw: string, what: string, shaped: (v: Fields) => boolean): T {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    throw corrupt(key, 'not JSON', err);
  }
  if (!isObject(value) || !shaped(value)) throw corrupt(key, `not a ${what} record`);
  return value as T;
}

/**
 * An entry names the session and seq of its key (`e!<session>!<seq:12 hex>`), a head the session of its key, a grant
 * the principal and session of its key: PostgreSQL's rows are keyed by those very columns and cannot disagree with
 * themselves. A record that does (a hand edit, a record copied under another key) is `RECORD_CORRUPT`, not served as
 * another chain's entry or head (fsck's rebuild of the session-heads index then failed uncoded on two heads of one
 * session) or as another principal's grant.
 */
export function parseEntryRecord(key: string, raw: string): LogEntry {
  const entry = parse<LogEntry>(
    key,
    raw,
    'log entry',
    (v) =>
      isCount(v.position) &&
      isText(v.session) &&
      isCount(v.seq) &&
      isText(v.id) &&
      isText(v.principal) &&
      typeof v.envelope === 'string',
  );
  if (key !== `e!${entry.session}!${entry.seq.toString(16).padStart(12, '0')}`)
    throw corrupt(key, 'it names another session or seq than its key');
  return entry;
}

export function parseHeadRecord(key: string, raw: string): ChainHead {
  const head = parse<ChainHead>(
    key,
    raw,
    'chain head',
    (v) => isText(v.session) && isCount(v.seq) && isText(v.id) && isText(v.owner),
  );
  if (key !== `h!${head.session}`) throw corrupt(key, 'it names another session than its key');
  return head;
}

export function parseGrantRecord(key: string, raw: string): GrantRecord {
  const grant = parse<GrantRecord>(
    key,
    raw,
    'grant',
    (v) =>
      isText(v.principal) &&
      isText(v.session) &&
      (v.state === 'granted' || v.state === 'revoked') &&
      isGrantTime(v.at) &&
      (v.by === undefined || typeof v.by === 'string'),
  );
  if (key !== `g!${grant.principal}!${grant.session}`)
    throw corrupt(key, 'it names another principal or session than its key');
  return grant;
}

export function parseWatermarkRecord(key: string, raw: string): number {
  const mark = Number(raw);
  if (!/^\d+$/.test(raw) || !isCount(mark)) throw corrupt(key, 'not a sequence number');
  return mark;
}

/** `p!` records hold the key of an entry, under a key of 16 hex digits (the position). */
export function parsePositionRecord(key: string, raw: string): string {
  parsePositionKey(key);
  if (!/^e!.+![0-9a-f]{12}$/.test(raw)) throw corrupt(key, 'not the key of a log entry');
  return raw;
}

/** The position a `p!` key names: 16 lowercase hex digits, or `RECORD_CORRUPT` naming the key (shown as data). */
export function parsePositionKey(key: string): number {
  if (!/^p![0-9a-f]{16}$/.test(key)) throw corrupt(quoted(key), 'not the key of a log position');
  const position = parseInt(key.slice(2), 16);
  if (!Number.isSafeInteger(position)) throw corrupt(key, 'a position beyond the largest safe integer');
  return position;
}

/** `t!<hex>` records hold an inline blob's size and storage time. */
export function parseInlineMetaRecord(key: string, raw: string): { size: number; storedAtMs: number } {
  return parse(key, raw, 'inline blob', (v) => isCount(v.size) && isCount(v.storedAtMs));
}

/** The digest an inline blob's `t!` key names. */
export function parseInlineKey(key: string): Digest {
  const hex = key.slice(2);
  if (!/^[0-9a-f]{64}$/.test(hex)) throw corrupt(quoted(key), 'not the key of an inline blob');
  return `blake3:${hex}`;
}

const isTime = (v: unknown): v is string => typeof v === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(v);

/**
 * A signing key's record with its fields in the order of `SigningKeyRecord` (keyId, lastSignedAt, closedAt), the absent
 * ones left out: as PostgreSQL's rows read, whichever of the two was written first (a window closed before the key
 * signed anything) and whatever order a stored record lists them in.
 */
export function signingKeyRecord(keyId: string, lastSignedAt?: string, closedAt?: string): SigningKeyRecord {
  return {
    keyId,
    ...(lastSignedAt !== undefined ? { lastSignedAt } : {}),
    ...(closedAt !== undefined ? { closedAt } : {}),
  };
}

/** `k!<keyId>` records hold a signing key's newest signed createdAt and its closed window end. */
export function parseSigningKeyRecord(key: string, raw: string): SigningKeyRecord {
  const r = parse<SigningKeyRecord>(
    key,
    raw,
    'signing key',
    (v) =>
      isText(v.keyId) &&
      `k!${v.keyId}` === key &&
      (v.lastSignedAt === undefined || isTime(v.lastSignedAt)) &&
      (v.closedAt === undefined || isTime(v.closedAt)),
  );
  return signingKeyRecord(r.keyId, r.lastSignedAt, r.closedAt);
}

const isDecimal = (raw: string) => /^(0|[1-9]\d{0,15})$/.test(raw) && Number.isSafeInteger(Number(raw));

/** `n!<level>!<index>` records hold a perfect subtree's hash: 32 bytes in standard base64. */
export function parseTreeNodeRecord(key: string, raw: string): Uint8Array {
  const hash = decodeBase64(raw);
  if (!hash || hash.length !== 32) throw corrupt(key, 'not a 32-byte tree node hash in base64');
  return hash;
}

/** `n!size` holds the number of leaves in the tree; `i!<id>` the global position of a manifest id: decimal counts. */
export function parseCountRecord(key: string, raw: string): number {
  if (!isDecimal(raw)) throw corrupt(key, 'not a decimal count');
  return Number(raw);
}

/** An `i!<id>` record, as listed (`ManifestLog.idPositions`): the manifest id its key names and the position it holds. */
export function parseIdPositionRecord(key: string, raw: string): { id: Digest; position: number } {
  const id = key.slice(2);
  if (!isDigest(id)) throw corrupt(quoted(key), 'not the key of a manifest id');
  return { id, position: parseCountRecord(key, raw) };
}

/** `x!<depth>!<prefix>` records hold a session-heads index node: `i <hash>` (interior) or `l <key> <value>` (leaf). */
export function parseHeadsNodeRecord(key: string, raw: string): HeadsNode {
  const parts = raw.split(' ');
  const bytes = parts.slice(1).map(decodeBase64);
  if (!bytes.every((b) => b?.length === 32)) throw corrupt(key, 'not a session-heads node of 32-byte base64 fields');
  if (parts[0] === 'i' && bytes.length === 1) return { leaf: false, hash: bytes[0]! };
  if (parts[0] === 'l' && bytes.length === 2) return { leaf: true, key: bytes[0]!, value: bytes[1]! };
  throw corrupt(key, 'not a session-heads node ("i <hash>" or "l <key> <value>")');
}
