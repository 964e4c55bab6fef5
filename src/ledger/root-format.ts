/**
 * The root's format marker, `<root>/format.json`: which layout of files the root holds (blobs-v1/, manifests-v1/,
 * keys/, checkpoints/, trust.json: layout version 1). `openLedger` reads it before it writes or opens anything under
 * the root, and refuses a root of a layout this version does not read (a newer one, another format) or whose marker is
 * damaged. A root without one (every store made before the marker) is of layout version 1 and gets it at its next open
 * that is not diagnosing (docs/DESIGN.md, "The root's format marker").
 */
import { lstat, open } from 'node:fs/promises';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { createFileWhole } from '../../store/fs/atomic-file.js';
import { nodeFsOps } from '../../store/fs/ops.js';
import { quoted, shownValue, StoreError } from '../../store/errors.js';
import { fileFailure } from '../../store/fs/errno-text.js';
import { LedgerError } from '../errors.js';

/** The marker's name in the root. */
export const ROOT_FORMAT_FILE = 'format.json';
/** The format the marker names: a handoff-ledger root (its `format` field, the same in every later layout). */
export const ROOT_FORMAT = 'handoff-ledger-root';
/** The layout this version reads and writes. */
export const ROOT_FORMAT_VERSION = 1;
/** The largest marker read: this version's is 46 bytes; one larger is refused from its size, unread. */
export const MAX_ROOT_FORMAT_BYTES = 4096;

/** The marker's bytes as this version writes them. */
export function rootFormatText(): string {
  return `${JSON.stringify({ format: ROOT_FORMAT, version: ROOT_FORMAT_VERSION })}\n`;
}

/** What the root's marker says: `present: false` for a root without one (read as version 1). */
export interface RootFormat {
  present: boolean;
  version: number;
}

/** What to do about a damaged marker, said by every refusal of one. */
function damaged(path: string, why: string): LedgerError {
  return new LedgerError(
    'RECORD_CORRUPT',
    `${quoted(path)} is no format marker this version of handoff-ledger reads (${why}); nothing under the root was opened or changed. If a newer handoff-ledger wrote this root, upgrade handoff-ledger; otherwise the marker was damaged: restore it from a backup, or, for a root of layout version 1 (blobs-v1/, manifests-v1/), write ${rootFormatText().trim()} back`,
  );
}

/**
 * Reads `<root>/format.json` (never through a symlink, never waiting on a FIFO, at most MAX_ROOT_FORMAT_BYTES) and
 * judges it, writing nothing. A missing root or marker is layout version 1, not present.
 * @throws LedgerError `FORMAT_UNSUPPORTED` for a marker of a higher layout version or of another format,
 *   `RECORD_CORRUPT` for one that is not a regular file, is larger than MAX_ROOT_FORMAT_BYTES, or does not hold
 *   `{ "format": string, "version": positive integer }` as UTF-8 JSON; StoreError `STORAGE_FAILED` when it cannot be read
 */
export async function readRootFormat(root: string): Promise<RootFormat> {
  const path = join(root, ROOT_FORMAT_FILE);
  let bytes: Uint8Array;
  try {
    const st = await lstat(path);
    if (!st.isFile()) throw damaged(path, 'it is not a regular file');
    // O_NONBLOCK: a FIFO put at the name after the lstat is not waited on (its stat below refuses it).
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const at = await handle.stat();
      if (!at.isFile()) throw damaged(path, 'it is not a regular file');
      if (at.size > MAX_ROOT_FORMAT_BYTES)
        throw damaged(path, `it is ${at.size} bytes, larger than any marker (at most ${MAX_ROOT_FORMAT_BYTES})`);
      // Read to one byte past the bound: a file grown since its stat is refused as well, not read whole.
      const buffer = new Uint8Array(MAX_ROOT_FORMAT_BYTES + 1);
      let length = 0;
      for (;;) {
        const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
        if (bytesRead === 0) break;
        length += bytesRead;
        if (length === buffer.length)
          throw damaged(path, `it is larger than any marker (at most ${MAX_ROOT_FORMAT_BYTES} bytes)`);
      }
      bytes = buffer.subarray(0, length);
    } finally {
      await handle.close();
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { present: false, version: ROOT_FORMAT_VERSION };
    if (code === 'ELOOP') throw damaged(path, 'it is not a regular file');
    if (err instanceof LedgerError) throw err;
    throw fileFailure(StoreError, `reading ${quoted(path)}`, err);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw damaged(path, 'it is not UTF-8 text');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // JSON.parse's own message quotes the text; the start of it is shown escaped instead.
    throw damaged(path, `it is not JSON: it begins ${shownValue(text, 40)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw damaged(path, `it holds ${shownValue(value)}, not an object`);
  const { format, version } = value as { format?: unknown; version?: unknown };
  if (typeof format !== 'string') throw damaged(path, `its format is ${shownValue(format)}, not a string`);
  if (format !== ROOT_FORMAT)
    throw new LedgerError(
      'FORMAT_UNSUPPORTED',
      `${quoted(path)} names the format ${shownValue(format, 80)}, not ${ROOT_FORMAT}: this root was written by another program or by a newer handoff-ledger than this one; nothing under it was opened or changed. Upgrade handoff-ledger if a newer version made it, or give the root of a handoff-ledger store`,
    );
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1)
    throw damaged(path, `its version is ${shownValue(version)}, not a whole number from 1`);
  if (version > ROOT_FORMAT_VERSION)
    throw new LedgerError(
      'FORMAT_UNSUPPORTED',
      `${quoted(path)} says this root is of layout version ${version}, written by a newer handoff-ledger than this one, which reads layout version ${ROOT_FORMAT_VERSION}; nothing under it was opened or changed. Upgrade handoff-ledger to open it (never move the marker aside: this version would then write into a layout it does not know)`,
    );
  return { present: true, version };
}

/**
 * What creating a file in a root this process may read but not write answers (its directory not writable by this
 * user, a read-only mount, an immutable directory): the root stays unmarked, as it was read.
 */
const ROOT_NOT_WRITABLE = new Set(['EACCES', 'EPERM', 'EROFS']);

/**
 * Gives a root without a marker this version's (layout version 1): made whole or not at all (a staging file, synced,
 * hard-linked to the name: `createFileWhole`), never replacing a marker that stands there, then the root directory
 * synced. One another opener wrote meanwhile is judged as one found at open. A root this process may not write in
 * (EACCES, EPERM, EROFS) is left unmarked, as it was read (layout version 1): an open that only reads such a root
 * (resume, history, export) is not refused for the marker, which the first open that can write it makes.
 * @throws as `readRootFormat` for such a marker; StoreError `STORAGE_FAILED` when it cannot be written otherwise
 */
export async function writeRootFormat(root: string): Promise<void> {
  const path = join(root, ROOT_FORMAT_FILE);
  let made;
  try {
    made = await createFileWhole(path, rootFormatText(), { mode: 0o600, sync: true });
    if (made) {
      await made.close();
      await nodeFsOps.fsyncDir(root);
    }
  } catch (err) {
    // Not writable here: left unmarked, and a marker another opener wrote meanwhile is judged below all the same.
    if (!(made === undefined && ROOT_NOT_WRITABLE.has((err as NodeJS.ErrnoException).code ?? '')))
      throw fileFailure(StoreError, `writing ${quoted(path)}`, err);
  }
  if (!made) await readRootFormat(root);
}
