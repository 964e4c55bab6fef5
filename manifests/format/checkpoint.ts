/**
 * C2SP tlog-checkpoint bodies (github.com/C2SP/C2SP tlog-checkpoint.md): the origin (the log's unique
 * name), the tree size in decimal, the base64 RFC 6962 root hash, then optional extension lines; every line
 * `\n`-terminated and none empty. A checkpoint is the text of a signed note (manifests/crypto/note.ts).
 * Isomorphic.
 */
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';
import { isValidKeyName, isWellFormed } from '../crypto/note.js';
import { HASH_SIZE } from '../tlog/merkle.js';
import { isTerminalSafe } from '../encoding/printable.js';
import { isUint8Array } from '../../store/errors.js';

export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  extensions: string[];
}

const invalid = (why: string) => new ManifestError('CHECKPOINT_INVALID', `malformed checkpoint: ${why}`);

/**
 * The origins this project gives its own logs (`OpenLedgerOptions.origin`): key names too, since the ledger names its
 * checkpoint key after its origin (no spaces, no `+`), at most 256 characters. Checkpoints written by this project.
 */
export function isValidOrigin(origin: string): boolean {
  return isValidKeyName(origin) && origin.length <= 256;
}

/**
 * The origins a new log may be given (`OpenLedgerOptions.origin`, `ManifestLog.origin(proposed)` when none is stored): a
 * valid origin (`isValidOrigin`) that the CLI prints as it is, so the `keys vkey` line can be copied into a witness's
 * logs file: no character `printable` escapes (C1 controls and DEL, bidi and other invisible format characters such as
 * U+202E, line and paragraph separators, default-ignorable characters) and no backslash (printed doubled). A log named
 * before this rule keeps its name: only a name not stored yet is held to it.
 */
export function isNewOrigin(origin: string): boolean {
  return isValidOrigin(origin) && isTerminalSafe(origin) && !origin.includes('\\');
}

/** What `isValidOrigin` holds an origin to, in the words of every refusal of one (the open's, the log's, fsck's). */
export const ORIGIN_RULE = 'a non-empty name of at most 256 characters without spaces, "+" or control characters';

/** Why `isNewOrigin` refuses a valid origin (the refusal's message names it). */
export const NEW_ORIGIN_RULE =
  "a new log's origin may not hold a character the CLI prints escaped (a control, a bidi or other invisible format character such as U+202E, a line or paragraph separator, a backslash), so that its `keys vkey` line can be copied as it is";

/**
 * What C2SP tlog-checkpoint requires of the origin line of a checkpoint read from anyone: not empty. Spaces and `+`
 * are only advised against, and "clients MUST NOT assume that the origin is following this format" (Go's checksum
 * database signs "go.sum database tree" with the key "sum.golang.org"); no C0 control and valid UTF-8, as the text
 * of a signed note must be.
 */
export function isCheckpointOrigin(origin: string): boolean {
  return typeof origin === 'string' && origin.length > 0 && !/[\u0000-\u001f]/.test(origin) && isWellFormed(origin);
}

/** The checkpoint body. @throws ManifestError `CHECKPOINT_INVALID` */
export function formatCheckpoint(c: Checkpoint): string {
  // No object, or extensions that are no list of text: a TypeError once (`c.extensions is not iterable`), and the
  // bytes of a Uint8Array extension were written as `0,0,0`.
  if (typeof c !== 'object' || c === null) throw invalid('not a checkpoint object');
  if (!Array.isArray(c.extensions) || !c.extensions.every((e) => typeof e === 'string'))
    throw invalid('the extensions must be an array of lines of text');
  if (!isValidOrigin(c.origin)) throw invalid('the origin must be a non-empty name without spaces or "+"');
  if (!Number.isSafeInteger(c.size) || c.size < 0) throw invalid('the size must be a non-negative integer');
  if (!isUint8Array(c.root) || c.root.length !== HASH_SIZE) throw invalid('the root must be 32 bytes');
  for (const e of c.extensions)
    if (e.length === 0 || e.includes('\n')) throw invalid('extension lines must be non-empty single lines');
  return [c.origin, String(c.size), encodeBase64(c.root), ...c.extensions].map((l) => `${l}\n`).join('');
}

/** Parses a checkpoint body (the text of an opened note). @throws ManifestError `CHECKPOINT_INVALID` */
export function parseCheckpoint(text: string): Checkpoint {
  if (typeof text !== 'string' || !text.endsWith('\n')) throw invalid('the text must end with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) throw invalid('expected origin, size and root hash lines');
  if (lines.some((l) => l.length === 0)) throw invalid('empty line');
  const [origin, size, root, ...extensions] = lines as [string, string, string, ...string[]];
  if (!isCheckpointOrigin(origin)) throw invalid('bad origin line');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size)))
    throw invalid('the size is not a decimal integer without leading zeros');
  const hash = decodeBase64(root);
  if (!hash || hash.length !== HASH_SIZE) throw invalid('the root hash is not base64 of 32 bytes');
  return { origin, size: Number(size), root: hash, extensions };
}
