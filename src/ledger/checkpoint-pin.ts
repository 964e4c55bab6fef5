/**
 * The pinned checkpoint on disk: `<root>/checkpoints/<blake3(origin)>.pin`, two fixed-size slots overwritten in
 * place. A pin writes the slot that does not hold the newest intact pin and fdatasyncs it: one flush, no new
 * file, rename or directory fsync (the file's size and name never change, so its data is all a crash can lose).
 * A crash in the middle of a pin tears at most the slot being written; its checksum fails and the other slot,
 * the previous pin, is read. A pin whose write or flush failed is written again into the same slot by the next pin,
 * never beside it: the slot beside holds the last pin made durable. "Acknowledged ⇒ pinned" holds because the
 * caller awaits `write` before returning.
 *
 * Slot layout (`slotSize` bytes; integers big-endian):
 *
 *     0   8  magic `hl-pin1\n`
 *     8   8  sequence number (u64): the intact slot with the highest one is the pin
 *    16   4  n, the note's length in bytes
 *    20   n  the signed note (UTF-8), then zero bytes up to the checksum
 *   -32  32  BLAKE3 of every byte of the slot before it
 *
 * The file is exactly two slots; `slotSize` is a power of two from 4 KiB to 64 KiB, fixed when the file is
 * created (durably: staging file, fsync, rename, directory fsync) and grown the same way for a note that does not
 * fit. A log that only this process writes while it is open (the embedded store's lock) opens the pin exclusive:
 * the file is opened once with `O_DSYNC` and a pin is one positioned write that returns when its data is durable
 * (the same flush as write + fdatasync, one round trip instead of five); a shared log's pin re-reads both slots
 * first, as another process of the root may have pinned, and reads, decides and writes under `<pin>.lock`
 * (./file-lock.ts), so that of two pins at the same moment the larger tree stays. A store written before the slots has
 * `<blake3(origin)>.note` (the note alone, replaced atomically): it is read when there is no slot file and replaced
 * by one on open, but for an open to diagnose (fsck), which reads it in place (DESIGN.md, on-disk layout).
 */
import { constants } from 'node:fs';
import { lstat, open, unlink, type FileHandle } from 'node:fs/promises';
import { digestBytesOf } from '../../store/hash/digest.js';
import { writeFileAtomic } from '../../store/fs/atomic-file.js';
import { ensurePrivateDir } from '../../store/fs/safe-dir.js';
import { nodeFsOps } from '../../store/fs/ops.js';
import { dirname } from 'node:path';
import { equalBytes } from '../../manifests/tlog/merkle.js';
import { LedgerError } from '../errors.js';
import { quoted, StoreError } from '../../store/errors.js';
import { fileFailure } from '../../store/fs/errno-text.js';
import { withFileLock } from './file-lock.js';

const MAGIC = new TextEncoder().encode('hl-pin1\n');
/** The magic of a pin file of any format version (this one writes 1): `hl-pin<version>\n`. */
const ANY_MAGIC = /^hl-pin(\d{1,6})\n/;

/**
 * A pin file written by a newer version of the library (its magic names a format version above 1) is refused as such,
 * not as damage: the advice for a damaged pin (move it aside, pin again) would give up the rollback protection it holds.
 * @throws LedgerError `RECORD_CORRUPT` naming the version
 */
function refuseNewerFormat(head: Uint8Array, path: string): void {
  const version = ANY_MAGIC.exec(new TextDecoder('latin1').decode(head.subarray(0, 16)))?.[1];
  if (version === undefined || Number(version) <= 1) return;
  throw new LedgerError(
    'RECORD_CORRUPT',
    `${quoted(path)} is a pinned-checkpoint file of format version ${version}, written by a newer version of handoff-ledger than this one (which reads version 1): open the store with that version; do not move the file aside (it holds the store's rollback protection)`,
  );
}
const HEADER = MAGIC.length + 8 + 4;
const CHECKSUM = 32;
export const MIN_SLOT = 4096;
export const MAX_SLOT = 64 * 1024;

export interface PinSlot {
  index: 0 | 1;
  seq: number;
  note: string;
}

const encoder = new TextEncoder();

/** One slot's bytes: header, note, zero padding, checksum. */
export function encodePinSlot(seq: number, note: string, slotSize: number): Uint8Array {
  return encodeSlotOf(seq, encoder.encode(note), slotSize);
}

/** `encodePinSlot` of a note already encoded (`text`: its UTF-8 bytes, as a pin sized its slot by them). */
function encodeSlotOf(seq: number, text: Uint8Array, slotSize: number): Uint8Array {
  if (HEADER + text.length + CHECKSUM > slotSize)
    throw new RangeError(`a ${text.length}-byte note needs a larger slot`);
  const slot = new Uint8Array(slotSize);
  const view = new DataView(slot.buffer);
  slot.set(MAGIC, 0);
  view.setBigUint64(MAGIC.length, BigInt(seq));
  view.setUint32(MAGIC.length + 8, text.length);
  slot.set(text, HEADER);
  slot.set(checksumOf(slot.subarray(0, slotSize - CHECKSUM)), slotSize - CHECKSUM);
  return slot;
}

function checksumOf(bytes: Uint8Array): Uint8Array {
  return digestBytesOf(bytes);
}

/**
 * A note's text exactly as it was signed: a U+FEFF that begins it (an origin may begin with one) is kept, not taken for
 * a byte order mark and dropped, which made the note fail its own signature.
 */
const noteDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/**
 * The previous version's pin (`<stem>.note`, the note alone), as it is read: a leading U+FEFF kept (an origin may begin
 * with one); bytes that are not UTF-8 read as U+FFFD, and such a note fails its signature check (a coded refusal).
 */
const decodeLegacyNote = (bytes: Uint8Array): string => new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);

/** The slot's pin, or undefined when it is empty, torn or damaged (its checksum or fields do not hold). */
function decodeSlot(slot: Uint8Array, index: 0 | 1): PinSlot | undefined {
  const body = slot.subarray(0, slot.length - CHECKSUM);
  if (!equalBytes(slot.subarray(0, MAGIC.length), MAGIC)) return undefined;
  if (!equalBytes(checksumOf(body), slot.subarray(slot.length - CHECKSUM))) return undefined;
  const view = new DataView(slot.buffer, slot.byteOffset, slot.byteLength);
  const seq = view.getBigUint64(MAGIC.length);
  const length = view.getUint32(MAGIC.length + 8);
  if (seq > BigInt(Number.MAX_SAFE_INTEGER) || HEADER + length > body.length) return undefined;
  try {
    const note = noteDecoder.decode(slot.subarray(HEADER, HEADER + length));
    return { index, seq: Number(seq), note };
  } catch {
    return undefined;
  }
}

const isPowerOfTwo = (n: number) => n > 0 && (n & (n - 1)) === 0;

/**
 * Both slots of a pin file's bytes, the newest intact one first.
 * @throws LedgerError `RECORD_CORRUPT` when the file is not two slots or neither slot is intact
 */
export function decodePinFile(bytes: Uint8Array, path: string): { newest: PinSlot; slotSize: number } {
  refuseNewerFormat(bytes, path);
  const slotSize = bytes.length / 2;
  if (!Number.isInteger(slotSize) || !isPowerOfTwo(slotSize) || slotSize < MIN_SLOT || slotSize > MAX_SLOT)
    throw new LedgerError(
      'RECORD_CORRUPT',
      `${quoted(path)} is not a pinned-checkpoint file (${bytes.length} bytes, not two slots of 4–64 KiB); it was damaged or replaced`,
    );
  const slots = [decodeSlot(bytes.subarray(0, slotSize), 0), decodeSlot(bytes.subarray(slotSize), 1)].filter(
    (s): s is PinSlot => s !== undefined,
  );
  if (slots.length === 0)
    throw new LedgerError(
      'RECORD_CORRUPT',
      `${quoted(path)}: neither slot of the pinned checkpoint is intact (both fail their checksum); the rollback protection it gave is lost. Move the file aside to pin the log's current tree again`,
    );
  slots.sort((a, b) => b.seq - a.seq);
  return { newest: slots[0]!, slotSize };
}

/**
 * A pin file's bytes (never through a symlink), or undefined when it does not exist; one larger than any pin file
 * (two slots of at most 64 KiB) is refused from its size, unread.
 */
async function readRegular(path: string): Promise<Uint8Array | undefined> {
  try {
    const st = await lstat(path);
    if (!st.isFile()) throw new LedgerError('KEY_FILE_UNSAFE', `${quoted(path)} is not a regular file`);
    // O_NONBLOCK: a FIFO put at the name after the lstat is not waited on (its stat below refuses it).
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = await handle.stat();
      if (!st.isFile()) throw new LedgerError('KEY_FILE_UNSAFE', `${quoted(path)} is not a regular file`);
      const { size } = st;
      if (size > 2 * MAX_SLOT) {
        // Larger than any pin of this format: a newer format's file is named as such (its first bytes only are read).
        const head = new Uint8Array(16);
        const { bytesRead } = await handle.read(head, 0, head.length, 0);
        refuseNewerFormat(head.subarray(0, bytesRead), path);
        throw new LedgerError(
          'RECORD_CORRUPT',
          `${quoted(path)} is ${size} bytes, larger than any pinned checkpoint file (two slots of at most ${MAX_SLOT} bytes)`,
        );
      }
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if ((err as NodeJS.ErrnoException).code === 'ELOOP')
      throw new LedgerError('KEY_FILE_UNSAFE', `${quoted(path)} is not a regular file`, { cause: err });
    throw err;
  }
}

export class CheckpointPinFile {
  private constructor(
    /** `<dir>/<blake3(origin)>.pin`. */
    readonly path: string,
    /** The file of the version before the slots, `<dir>/<blake3(origin)>.note`. */
    readonly legacyPath: string,
    private slotSize: number,
    /** The newest intact slot as this process last read or wrote it (undefined: no slot file yet). */
    private newest: PinSlot | undefined,
    /** Only this process pins while the file is open: its own last write is the newest pin (no re-read). */
    private readonly exclusive: boolean,
    /** Opened to diagnose (`readOnly`), which made no `checkpoints/`: the first pin makes it. */
    private readonly makesDir = false,
  ) {}

  /** The file kept open (`O_DSYNC`) by an exclusive pin between writes; closed by `close` or a re-created file. */
  private handle: FileHandle | undefined;
  /**
   * A shared pin whose write or flush failed: its slot may show whole in the page cache and yet not be on the disk
   * (after a failed fdatasync the kernel may drop the dirty pages), so the next pin writes that slot again while it
   * still holds this pin, not the slot beside it, which holds the last pin made durable (as an exclusive pin does).
   */
  private unflushed: PinSlot | undefined;
  private closed = false;

  /**
   * Reads the pinned note: the newest intact slot of `<stem>.pin`, else (a store of the previous version)
   * `<stem>.note`, which is then moved into a new slot file.
   * @throws LedgerError `KEY_FILE_UNSAFE` (a symlink or not a regular file), `RECORD_CORRUPT` (no intact slot);
   *   StoreError `STORAGE_FAILED` when the file cannot be read
   */
  static async open(
    stem: string,
    options: { exclusive?: boolean; readOnly?: boolean } = {},
  ): Promise<{ file: CheckpointPinFile; note: string | undefined; legacy: boolean }> {
    try {
      return await CheckpointPinFile.read(stem, options.exclusive ?? false, options.readOnly ?? false);
    } catch (err) {
      throw fileFailure(StoreError, `reading the pinned checkpoint ${quoted(`${stem}.pin`)}`, err);
    }
  }

  private static async read(
    stem: string,
    exclusive: boolean,
    readOnly: boolean,
  ): Promise<{ file: CheckpointPinFile; note: string | undefined; legacy: boolean }> {
    const path = `${stem}.pin`;
    const legacyPath = `${stem}.note`;
    const bytes = await readRegular(path);
    if (bytes !== undefined) {
      const { newest, slotSize } = decodePinFile(bytes, path);
      // A slot file beside a legacy note: a migration interrupted after the slot file was durable (left to diagnose).
      if (!readOnly && (await lstat(legacyPath).catch(() => undefined))?.isFile()) await removeDurably(legacyPath);
      return {
        file: new CheckpointPinFile(path, legacyPath, slotSize, newest, exclusive, readOnly),
        note: newest.note,
        legacy: false,
      };
    }
    const legacy = await readRegular(legacyPath);
    const file = new CheckpointPinFile(path, legacyPath, MIN_SLOT, undefined, exclusive, readOnly);
    if (legacy === undefined) return { file, note: undefined, legacy: false };
    return { file, note: decodeLegacyNote(legacy), legacy: true };
  }

  /**
   * Moves a legacy note into a new slot file (durably), then removes the legacy file: from now on the slot file
   * alone is the pin. Called by the guard once the note has verified.
   */
  async migrate(note: string, signal?: AbortSignal): Promise<void> {
    await this.write(note, undefined, signal);
    await removeDurably(this.legacyPath);
  }

  /**
   * Pins `note`: writes it to the slot that does not hold the newest intact pin and fdatasyncs. Resolves once
   * the note is durable. `supersedes`, for a file other processes pin too: when it says the newest pin on file
   * (re-read just before) already supersedes `note` — another process pinned a larger tree meanwhile — nothing
   * is written, so a slower process does not put an older checkpoint back over a newer one.
   * `signal` (an open's: `openLedger({ signal })`) ends the wait for a shared pin's lock that another process holds:
   * `CANCELLED`, nothing written and no lock taken; once the lock is taken it is not looked at.
   * @throws StoreError `STORAGE_FAILED` when the pin cannot be written; LedgerError `LOCKED` (a shared pin whose lock
   *   another process holds past the wait), `CANCELLED` (`signal` aborted during that wait), `INVALID_ARGUMENT` (a
   *   note over 64 KiB)
   * @returns false when nothing was written because the pin on file supersedes `note`
   */
  async write(note: string, supersedes?: (pinned: string) => boolean, signal?: AbortSignal): Promise<boolean> {
    // Closed with its ledger: a pin started after that would open the file again and keep it, after the store's
    // lock went to its next owner.
    if (this.closed) throw new LedgerError('CLOSED', `the pin ${quoted(this.path)} is closed`);
    try {
      // Opened to diagnose with no pin on file: the directory may be missing too (such an open makes no checkpoints/),
      // and the first pin makes it. Otherwise the open made it, and one gone since is a storage failure.
      if (this.makesDir && this.newest === undefined) await ensurePrivateDir(dirname(this.path), 'UNSAFE_PATH');
      if (this.exclusive) return await this.writeHeld(note, supersedes);
      // Other processes pin this file too: read, decide and write under one lock, or two pins at once would both
      // write the slot beside the same newest pin and the last written would stand, maybe the smaller tree. A pin
      // holds the lock for a write and a flush: one whose holder died is taken over at once on this host, after
      // 10 s untouched from another.
      return await withFileLock(this.path, 'the pinned checkpoint', () => this.writeHeld(note, supersedes), {
        staleMs: 10_000,
        signal,
      });
    } catch (err) {
      throw fileFailure(StoreError, `pinning the checkpoint in ${quoted(this.path)}`, err);
    }
  }

  /** `write`, with the file this process's alone (exclusive) or its lock held. */
  private async writeHeld(note: string, supersedes?: (pinned: string) => boolean): Promise<boolean> {
    // Encoded once: its length sizes the slot, its bytes are what the slot holds.
    const text = encoder.encode(note);
    const needed = HEADER + text.length + CHECKSUM;
    // Whether a pin found on file (by this or another process) already stands over `note`.
    const standsOver = (pinned: string): boolean => pinned !== note && supersedes?.(pinned) === true;
    if (!this.exclusive && (this.newest === undefined || needed > this.slotSize)) {
      // No pin when this file was opened, or one that needs larger slots: another process of this root may have
      // pinned since, maybe a larger tree. Its file is pinned beside, or carried into the larger file, not replaced
      // unread (a file no slot of which is intact is replaced, as before).
      const bytes = await readRegular(this.path);
      if (bytes !== undefined) {
        try {
          const found = decodePinFile(bytes, this.path);
          this.newest = found.newest;
          this.slotSize = found.slotSize;
        } catch {
          // not a pin file this process can read: created anew below
        }
        if (this.newest && standsOver(this.newest.note)) return false;
      }
    }
    if (this.newest === undefined || needed > this.slotSize) return this.create(note, needed).then(() => true);
    if (this.exclusive) return this.writeExclusive(note, text).then(() => true);
    const handle = await open(this.path, constants.O_RDWR | constants.O_NOFOLLOW);
    try {
      // Another process of this root (PostgreSQL backend) may have pinned since: read both slots again, so this pin
      // goes beside the newest one whoever wrote it.
      // One byte more than two slots tells whether that process re-created the file with larger slots.
      const current = new Uint8Array(2 * this.slotSize + 1);
      const { bytesRead } = await handle.read(current, 0, current.length, 0);
      if (bytesRead > 2 * this.slotSize) {
        this.unflushed = undefined; // another process made a new file since: its slots are what stands
        const grown = decodePinFile(await handle.readFile(), this.path);
        this.slotSize = grown.slotSize;
        this.newest = grown.newest;
        if (standsOver(grown.newest.note)) return false;
        if (needed > this.slotSize) return this.create(note, needed).then(() => true);
      }
      let newest = this.newest;
      try {
        if (bytesRead === 2 * this.slotSize) newest = decodePinFile(current.subarray(0, bytesRead), this.path).newest;
      } catch {
        // Damaged since we read it: the slot we did not write last is the one to overwrite.
      }
      if (newest.note !== this.newest.note && standsOver(newest.note)) {
        this.newest = newest;
        return false;
      }
      const failed = this.unflushed;
      const again =
        failed !== undefined &&
        newest.index === failed.index &&
        newest.seq === failed.seq &&
        newest.note === failed.note;
      const index = again ? newest.index : newest.index === 0 ? 1 : 0;
      const seq = Math.max(newest.seq, this.newest.seq) + 1;
      this.unflushed = { index, seq, note };
      await this.writeSlot(handle, index, seq, text);
      // Overwritten in place: the size and name do not change, so the data is all that must reach the disk.
      await handle.datasync();
      this.unflushed = undefined;
      this.newest = { index, seq, note };
      return true;
    } finally {
      await handle.close();
    }
  }

  /**
   * An exclusive pin: the slot beside this process's own newest pin, in one write on a handle opened with
   * `O_DSYNC` (the write returns once its data is durable, as write + fdatasync would).
   */
  private async writeExclusive(note: string, text: Uint8Array): Promise<void> {
    const newest = this.newest!;
    this.handle ??= await open(this.path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_DSYNC);
    const index = newest.index === 0 ? 1 : 0;
    const seq = newest.seq + 1;
    try {
      await this.writeSlot(this.handle, index, seq, text);
    } catch (err) {
      // The slot may be torn: the next pin opens the file again and writes that slot again (its pair still holds).
      await this.dropHandle();
      throw err;
    }
    this.newest = { index, seq, note };
  }

  /**
   * Writes slot `index` in place: the pin `seq` holding the note whose UTF-8 bytes are `text` (durable only when the
   * handle makes it so).
   */
  private async writeSlot(handle: FileHandle, index: 0 | 1, seq: number, text: Uint8Array): Promise<void> {
    const slot = encodeSlotOf(seq, text, this.slotSize);
    let off = 0;
    while (off < slot.length)
      off += (await handle.write(slot, off, slot.length - off, index * this.slotSize + off)).bytesWritten;
  }

  /** Whether other processes pin this file too (a shared store: PostgreSQL), so its newest pin may be theirs. */
  get shared(): boolean {
    return !this.exclusive;
  }

  /**
   * The newest intact pin on file now, whoever wrote it (undefined: no pin file yet), read without the lock: a pin
   * writes the slot beside the newest and a larger file replaces it atomically, so a read sees one whole pin or the
   * other. For a shared pin (an exclusive one's newest is this process's own last write).
   * @throws LedgerError `KEY_FILE_UNSAFE`, `RECORD_CORRUPT`; StoreError `STORAGE_FAILED`
   */
  async readNewest(): Promise<string | undefined> {
    if (this.closed) throw new LedgerError('CLOSED', `the pin ${quoted(this.path)} is closed`);
    try {
      const bytes = await readRegular(this.path);
      return bytes === undefined ? undefined : decodePinFile(bytes, this.path).newest.note;
    } catch (err) {
      throw fileFailure(StoreError, `reading the pinned checkpoint ${quoted(this.path)}`, err);
    }
  }

  /** Closes the file an exclusive pin keeps open, for good (the ledger's close): a later `write` is `CLOSED`. */
  async close(): Promise<void> {
    this.closed = true;
    await this.dropHandle();
  }

  /** Closes the file an exclusive pin keeps open; the next pin opens it again. */
  private async dropHandle(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close();
  }

  /** A new slot file (the first pin, or a note too large for the current slots), replaced atomically. */
  private async create(note: string, needed: number): Promise<void> {
    // The kept handle names the file being replaced.
    await this.dropHandle();
    let slotSize = Math.max(this.slotSize, MIN_SLOT);
    while (slotSize < needed) slotSize *= 2;
    if (slotSize > MAX_SLOT)
      throw new LedgerError('INVALID_ARGUMENT', `a ${needed}-byte checkpoint note does not fit a pin slot (64 KiB)`);
    const seq = (this.newest?.seq ?? 0) + 1;
    const bytes = new Uint8Array(2 * slotSize);
    bytes.set(encodePinSlot(seq, note, slotSize), 0);
    // The previous pin stays in the other slot, so a torn first overwrite still leaves it.
    if (this.newest) bytes.set(encodePinSlot(this.newest.seq, this.newest.note, slotSize), slotSize);
    await writeFileAtomic(this.path, bytes, 0o600);
    this.unflushed = undefined;
    this.slotSize = slotSize;
    this.newest = { index: 0, seq, note };
  }
}

async function removeDurably(path: string): Promise<void> {
  await unlink(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
  await nodeFsOps.fsyncDir(dirname(path));
}

/**
 * The newest pinned note of a slot file, for an open's look at a root's pin before it has a log, and for tests; read
 * as the guard reads it (never through a symlink, a FIFO not waited on, no larger than a pin file).
 * @throws LedgerError `NOT_FOUND` (no such file), `KEY_FILE_UNSAFE`, `RECORD_CORRUPT`; an errno error
 */
export async function readPinnedNote(path: string): Promise<string> {
  const bytes = await readRegular(path);
  if (bytes === undefined) throw new LedgerError('NOT_FOUND', `${quoted(path)}: no pinned checkpoint`);
  return decodePinFile(bytes, path).newest.note;
}

/**
 * The newest pinned note of a log's pin, `<stem>.pin`, or of the previous version's `<stem>.note` when there is no slot
 * file (the note read as `CheckpointPinFile` reads it, unverified), and the path of the file it came from.
 * @throws LedgerError `NOT_FOUND` (neither file), `KEY_FILE_UNSAFE`, `RECORD_CORRUPT`; an errno error
 */
export async function readPinOf(stem: string): Promise<{ path: string; note: string }> {
  const path = `${stem}.pin`;
  const bytes = await readRegular(path);
  if (bytes !== undefined) return { path, note: decodePinFile(bytes, path).newest.note };
  const legacyPath = `${stem}.note`;
  const legacy = await readRegular(legacyPath);
  if (legacy === undefined) throw new LedgerError('NOT_FOUND', `${quoted(path)}: no pinned checkpoint`);
  return { path: legacyPath, note: decodeLegacyNote(legacy) };
}
