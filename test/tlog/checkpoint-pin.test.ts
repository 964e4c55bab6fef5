/**
 * The pinned checkpoint's file: two fixed slots overwritten in place (src/ledger/checkpoint-pin.ts). A torn or
 * damaged newer slot leaves the older pin, which the log is still checked against; no intact slot is a coded
 * refusal; the previous version's `<hash>.note` is still read, and moved into a slot file.
 */
import {
  constants as fsConstants,
  cpSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { open as openFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import pgLib from 'pg';
import { describe, expect, it, vi } from 'vitest';
import type { Ledger } from '../../src/ledger/ledger.js';
import { CheckpointPinFile, encodePinSlot, MIN_SLOT, readPinnedNote } from '../../src/ledger/checkpoint-pin.js';
import { signNote, type NoteSigner } from '../../manifests/crypto/note.js';
import { formatCheckpoint, parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { openLedger } from '../../src/ledger/open.js';
import { fsck } from '../../src/ops/maintenance.js';
import { describePostgres } from '../support/postgres.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { embeddedNamedAsBefore, open, publishMany, refusal, scope } from './ledger-support.js';

function pinPath(root: string): string {
  const pins = readdirSync(join(root, 'checkpoints')).filter((n) => n.endsWith('.pin'));
  expect(pins).toHaveLength(1);
  return join(root, 'checkpoints', pins[0]!);
}

/** Both slots of a pin file: sequence number and note, or undefined for a slot that does not decode. */
function slots(path: string): Array<{ seq: number; note: string } | undefined> {
  const bytes = readFileSync(path);
  const size = bytes.length / 2;
  return [0, 1].map((i) => {
    const slot = bytes.subarray(i * size, (i + 1) * size);
    if (slot.subarray(0, 8).toString() !== 'hl-pin1\n') return undefined;
    const length = slot.readUInt32BE(16);
    return { seq: Number(slot.readBigUInt64BE(8)), note: slot.subarray(20, 20 + length).toString() };
  });
}

/** The slot holding the highest sequence number. */
function newerSlot(path: string): 0 | 1 {
  const [a, b] = slots(path);
  return (b?.seq ?? -1) > (a?.seq ?? -1) ? 1 : 0;
}

function overwrite(path: string, offset: number, bytes: Uint8Array): void {
  const file = readFileSync(path);
  file.set(bytes, offset);
  writeFileSync(path, file);
}

const signerOf = (ledger: Ledger) =>
  (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;

describe('a pin file other processes pin too', () => {
  it('keeps the larger tree when two pins are written at once', async () => {
    // Two CheckpointPinFile objects on one path stand for two processes: the lock between them is a file.
    const dir = tempDir();
    mkdirSync(join(dir, 'checkpoints'));
    const stem = join(dir, 'checkpoints', 'shared');
    const note = (size: number) => `origin\n${size}\nroot\n`;
    const sizeOf = (text: string) => Number(text.split('\n')[1]);
    const larger = (size: number) => (pinned: string) => sizeOf(pinned) > size;
    await (await CheckpointPinFile.open(stem)).file.write(note(1));
    const kept: number[] = [];
    for (let size = 2; size < 42; size += 2) {
      const [a, b] = await Promise.all([CheckpointPinFile.open(stem), CheckpointPinFile.open(stem)]);
      // The smaller tree's pin starts second, so without the lock it would be written last over the larger one.
      await Promise.all([a.file.write(note(size + 1), larger(size + 1)), b.file.write(note(size), larger(size))]);
      kept.push(sizeOf((await CheckpointPinFile.open(stem)).note!));
    }
    expect(kept).toEqual(Array.from({ length: 20 }, (_, i) => 2 * i + 3));
    expect(readdirSync(join(dir, 'checkpoints')).sort()).toEqual(['shared.pin']); // no lock left behind
  });

  it('keeps the larger tree another process pinned when a larger note grows the slots', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'checkpoints'));
    const stem = join(dir, 'checkpoints', 'shared');
    const note = (size: number, pad = 0) => `origin\n${size}\nroot\n${'x'.repeat(pad)}`;
    const sizeOf = (text: string) => Number(text.split('\n')[1]);
    const larger = (size: number) => (pinned: string) => sizeOf(pinned) > size;
    await (await CheckpointPinFile.open(stem)).file.write(note(1));
    // A opened the file at size 1; B pins size 5 since. A's next note (size 2) needs slots over 4 KiB.
    const a = (await CheckpointPinFile.open(stem)).file;
    const b = (await CheckpointPinFile.open(stem)).file;
    expect(await b.write(note(5), larger(5))).toBe(true);
    expect(await a.write(note(2, 5_000), larger(2))).toBe(false);
    expect(sizeOf((await CheckpointPinFile.open(stem)).note!)).toBe(5);
    // A note of a larger tree still grows the file, and carries the pin it found into the other slot.
    expect(await a.write(note(9, 5_000), larger(9))).toBe(true);
    const path = `${stem}.pin`;
    expect(statSync(path).size).toBe(2 * 2 * MIN_SLOT);
    expect(slots(path).map((s) => s && sizeOf(s.note))).toEqual([9, 5]);
  });

  it('fails with STORAGE_FAILED when the pin cannot be written (its directory is gone)', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'checkpoints'));
    const stem = join(dir, 'checkpoints', 'shared');
    for (const exclusive of [false, true]) {
      const { file } = await CheckpointPinFile.open(stem, { exclusive });
      rmSync(join(dir, 'checkpoints'), { recursive: true });
      await expect(file.write('origin\n1\nroot\n')).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
      mkdirSync(join(dir, 'checkpoints'));
    }
  });

  it('writes the slot of a pin whose flush failed again, not the slot beside it that holds the last durable pin', async () => {
    const stem = join(tempDir(), 'pin');
    const path = `${stem}.pin`;
    const a = (await CheckpointPinFile.open(stem)).file;
    await a.write('a1\n');
    await a.write('a2\n');
    const probe = await openFile(path, 'r');
    const handleProto = Object.getPrototypeOf(probe) as FileHandle;
    await probe.close();
    // The flush of a3's slot fails: the page cache shows that slot whole, yet it may never reach the disk.
    const datasync = vi
      .spyOn(handleProto, 'datasync')
      .mockRejectedValueOnce(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO', errno: -5 }));
    try {
      await expect(a.write('a3\n')).rejects.toMatchObject({ code: 'STORAGE_FAILED' });
    } finally {
      datasync.mockRestore();
    }
    // a2, the last pin made durable, must stay until a newer one is: a4 goes where a3 was. Before, a4 went beside a3,
    // over a2, and a crash during that write could leave no intact slot on the disk (a3's never flushed).
    await a.write('a4\n');
    expect(
      slots(path)
        .map((s) => s?.note)
        .sort(),
    ).toEqual(['a2\n', 'a4\n']);
    expect(await readPinnedNote(path)).toBe('a4\n');
    // From there on the pins alternate as ever.
    await a.write('a5\n');
    expect(
      slots(path)
        .map((s) => s?.note)
        .sort(),
    ).toEqual(['a4\n', 'a5\n']);
  });
});

describe('the pin file', () => {
  it('encodes a note once a pin (its length sizes the slot, its bytes fill it), in either mode, and reads it back', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'checkpoints'));
    for (const exclusive of [false, true]) {
      const stem = join(dir, 'checkpoints', exclusive ? 'own' : 'shared');
      const { file } = await CheckpointPinFile.open(stem, { exclusive });
      await file.write('origin\n1\nroot\n'); // the first pin creates the file
      const encode = vi.spyOn(TextEncoder.prototype, 'encode');
      try {
        const note = 'origin\n2\nr\u00f6\u00f6t\n';
        await file.write(note);
        expect(
          encode.mock.calls.filter(([text]) => text === note),
          exclusive ? 'exclusive' : 'shared',
        ).toHaveLength(1);
        expect(await readPinnedNote(`${stem}.pin`)).toBe(note);
      } finally {
        encode.mockRestore();
        await file.close();
      }
    }
  });

  it('keeps a note whose origin begins with U+FEFF as signed: the store reopens and publishes on', async () => {
    // A valid origin (U+FEFF is no space); a decoder that took it for a byte order mark dropped it, and the pinned
    // note no longer matched its signature: every open, fsck's too, was NOTE_SIGNATURE_INVALID.
    const root = tempDir();
    const origin = '\uFEFFexample.com/bom';
    // U+FEFF is printed escaped: a new log is no longer named so, a store named before the rule is.
    await embeddedNamedAsBefore(root, origin);
    let ledger = await open(root, { origin });
    await publishMany(ledger, 's1', 1);
    await ledger.close();
    ledger = await open(root, { origin });
    try {
      expect(await readPinnedNote(pinPath(root))).toBe((await ledger.checkpoint()).note);
      await publishMany(ledger, 's1', 1);
      expect((await ledger.checkpoint()).checkpoint).toMatchObject({ origin, size: 2 });
      expect((await fsck(ledger)).ok).toBe(true);
    } finally {
      await ledger.close();
    }
  });

  it('is two fixed slots overwritten in place: same file, same size, the slots alternate', async () => {
    const root = tempDir();
    const ledger = await open(root);
    try {
      await publishMany(ledger, 's1', 1);
      const path = pinPath(root);
      const before = statSync(path);
      expect(before.size).toBe(2 * MIN_SLOT);
      const seen: number[] = [];
      for (let i = 0; i < 3; i++) {
        await publishMany(ledger, 's1', 1);
        const now = statSync(path);
        expect([now.ino, now.size]).toEqual([before.ino, before.size]);
        seen.push(newerSlot(path));
        // The newest slot is the checkpoint the ledger returns; the other one is the pin before it.
        const [a, b] = slots(path);
        expect(Math.abs(a!.seq - b!.seq)).toBe(1);
      }
      expect(seen).toEqual([seen[0], 1 - seen[0]!, seen[0]]);
      expect(await readPinnedNote(path)).toBe((await ledger.checkpoint()).note);
    } finally {
      await ledger.close();
    }
  });

  it('uses the older pin when the newer slot is torn (partial bytes), and pins the next tree over the torn one', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const path = pinPath(root);
    const [a, b] = slots(path);
    const older = newerSlot(path) === 0 ? b! : a!;
    const torn = newerSlot(path);
    // A crash in the middle of a pin: the first half of a new slot landed, the rest is the old slot's bytes.
    overwrite(path, torn * MIN_SLOT, encodePinSlot(99, 'not a note\n', MIN_SLOT).subarray(0, MIN_SLOT / 2));
    expect(await readPinnedNote(path)).toBe(older.note);
    ledger = await open(root);
    try {
      // The older pin is one publish behind the log: open pins the log's tree, over the torn slot.
      expect(newerSlot(path)).toBe(torn);
      expect(slots(path)[torn]!.seq).toBe(older.seq + 1);
      expect(await readPinnedNote(path)).toBe((await ledger.checkpoint()).note);
      await publishMany(ledger, 's1', 1);
      expect(newerSlot(path)).toBe(1 - torn);
      expect(await readPinnedNote(path)).toBe((await ledger.checkpoint()).note);
    } finally {
      await ledger.close();
    }
  });

  it('checks the log against the older pin when the newer slot is garbage (FORK against it)', async () => {
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 3);
    const { checkpoint } = await ledger.checkpoint();
    // An older pin of another tree at the same size: a log that is not what this ledger pinned.
    const forked = await signNote(formatCheckpoint({ ...checkpoint, root: new Uint8Array(32).fill(7) }), [
      signerOf(ledger),
    ]);
    await ledger.close();
    const path = pinPath(root);
    const newer = newerSlot(path);
    const seq = slots(path)[newer]!.seq;
    overwrite(path, (1 - newer) * MIN_SLOT, encodePinSlot(seq - 1, forked, MIN_SLOT));
    overwrite(path, newer * MIN_SLOT + 100, new Uint8Array(300).fill(0xa5));
    const err = await refusal(open(root));
    expect(err.code).toBe('FORK');
    expect(err.evidence?.pinned).toBe(forked);
  });

  it("refuses to open when neither slot is intact (RECORD_CORRUPT), names a newer format's pin, and pins again once the file is moved aside", async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const path = pinPath(root);
    overwrite(path, 40, new Uint8Array(10).fill(1));
    overwrite(path, MIN_SLOT + 40, new Uint8Array(10).fill(1));
    const err = await refusal(open(root));
    expect(err.code).toBe('RECORD_CORRUPT');
    expect(err.message).toContain('neither slot');
    // A file that is not two slots at all (truncated, replaced) is the same refusal.
    writeFileSync(path, 'a note, not slots\n');
    expect((await refusal(open(root))).code).toBe('RECORD_CORRUPT');
    // Nor is one larger than two slots of 64 KiB: refused from its size, never read (3 GiB, sparse).
    truncateSync(path, 3 * 1024 ** 3);
    const huge = await refusal(open(root));
    expect([huge.code, huge.message]).toEqual(['RECORD_CORRUPT', expect.stringContaining('larger than any pinned')]);
    // A pin of a newer format (its magic names version 2), of this format's size or larger: named as a newer
    // version's file, not as damage to move aside (that would give up the rollback protection it holds).
    for (const size of [2 * MIN_SLOT, 3 * 1024 ** 2]) {
      writeFileSync(path, 'hl-pin2\n');
      truncateSync(path, size);
      const newer = await refusal(open(root));
      expect([newer.code, newer.message]).toEqual([
        'RECORD_CORRUPT',
        expect.stringContaining('of format version 2, written by a newer version of handoff-ledger'),
      ]);
      expect(newer.message).not.toContain('neither slot');
    }
    rmSync(path);
    ledger = await open(root);
    try {
      expect(await readPinnedNote(path)).toBe((await ledger.checkpoint()).note);
    } finally {
      await ledger.close();
    }
  });

  it('refuses a pin whose slots are intact but whose note is not what was signed (NOTE_SIGNATURE_INVALID) or no note (NOTE_MALFORMED)', async () => {
    const root = tempDir();
    const ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const path = pinPath(root);
    const [a, b] = slots(path);
    const note = slots(path)[newerSlot(path)]!.note;
    // The checkpoint's size line changed under its signature (a pin rolled back by hand), in both slots with checksums
    // that match: the slots are intact, the note's signature is not.
    const lines = note.split('\n');
    expect(lines[1]).toBe('2');
    const altered = [lines[0], '1', ...lines.slice(2)].join('\n');
    const rewrite = (text: string) => {
      overwrite(path, 0, encodePinSlot(a!.seq, text, MIN_SLOT));
      overwrite(path, MIN_SLOT, encodePinSlot(b!.seq, text, MIN_SLOT));
      expect(slots(path).map((s) => s?.note)).toEqual([text, text]);
    };
    rewrite(altered);
    await expect(open(root)).rejects.toMatchObject({ name: 'ManifestError', code: 'NOTE_SIGNATURE_INVALID' });
    rewrite('not a signed note\n');
    await expect(open(root)).rejects.toMatchObject({ name: 'ManifestError', code: 'NOTE_MALFORMED' });
    // Neither was replaced by the log's current tree: the pin is as it was damaged.
    expect(slots(path).map((s) => s?.note)).toEqual(['not a signed note\n', 'not a signed note\n']);
  });

  it('refuses a pin file that is a symlink or not a regular file (KEY_FILE_UNSAFE)', async () => {
    const root = tempDir();
    await (await open(root)).close();
    const path = pinPath(root);
    const elsewhere = join(tempDir(), 'pin');
    cpSync(path, elsewhere);
    rmSync(path);
    symlinkSync(elsewhere, path);
    expect((await refusal(open(root))).code).toBe('KEY_FILE_UNSAFE');
    rmSync(path);
    mkdirSync(path);
    expect((await refusal(open(root))).code).toBe('KEY_FILE_UNSAFE');
  });

  it('grows its slots (a new file, replaced atomically) for a note larger than a slot, keeping the previous pin', async () => {
    const stem = join(tempDir(), 'pin');
    const { file, note } = await CheckpointPinFile.open(stem);
    expect(note).toBeUndefined();
    await file.write('small\n');
    const large = `${'x'.repeat(10_000)}\n`;
    await file.write(large);
    expect(statSync(`${stem}.pin`).size).toBe(2 * 16 * 1024);
    expect(slots(`${stem}.pin`).map((s) => s?.note)).toEqual([large, 'small\n']);
    await file.write('after\n');
    expect(statSync(`${stem}.pin`).size).toBe(2 * 16 * 1024);
    expect((await CheckpointPinFile.open(stem)).note).toBe('after\n');
  });

  it('exclusive (an embedded store): one handle kept open between pins, in place, closed with the ledger', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const path = pinPath(root);
    /** Descriptors of this process open on the pin file. */
    const fdsOnPin = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === path;
        } catch {
          return false;
        }
      });
    const openOnPin = () => fdsOnPin().length;
    /** The kept handle's open flags (octal in fdinfo): O_DSYNC is what makes its one write a durable pin. */
    const dsync = (fd: string) =>
      (parseInt(/^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))![1]!, 8) &
        fsConstants.O_DSYNC) !==
      0;
    try {
      const ino = statSync(path).ino;
      for (let i = 0; i < 4; i++) {
        await publishMany(ledger, 's1', 1);
        expect(openOnPin()).toBe(1);
        expect(dsync(fdsOnPin()[0]!)).toBe(true);
        expect(await readPinnedNote(path)).toBe((await ledger.checkpoint()).note);
      }
      expect(statSync(path).ino).toBe(ino);
      expect(slots(path).every((s) => s !== undefined)).toBe(true);
    } finally {
      await ledger.close();
    }
    expect(openOnPin()).toBe(0);
    // What the kept handle wrote is the pin the next open reads.
    const again = await open(root);
    try {
      expect((await again.checkpoint()).note).toBe(await readPinnedNote(path));
      expect((await again.checkpoint()).checkpoint.size).toBe(4);
    } finally {
      await again.close();
    }
  });

  it('shared by two writers (processes of one root): each pin lands beside the newest, whoever wrote it', async () => {
    const stem = join(tempDir(), 'pin');
    const a = (await CheckpointPinFile.open(stem)).file;
    await a.write('a1\n');
    const b = (await CheckpointPinFile.open(stem)).file;
    // A pin in place is durable only by its fdatasync of the pin file (no O_DSYNC here): each write makes one, after
    // the slot is written. A kill keeps the page cache, so nothing else would see that flush go missing.
    const probe = await openFile(`${stem}.pin`, 'r');
    const handleProto = Object.getPrototypeOf(probe) as FileHandle;
    await probe.close();
    const real = handleProto.datasync;
    /** Each fdatasync: the file it flushed, and the notes that file held then (the pin written before its flush). */
    const synced: Array<{ path: string; notes: Array<string | undefined> }> = [];
    const datasync = vi.spyOn(handleProto, 'datasync').mockImplementation(function (this: FileHandle) {
      const path = readlinkSync(`/proc/self/fd/${this.fd}`);
      synced.push({ path, notes: slots(path).map((s) => s?.note) });
      return real.call(this);
    });
    try {
      for (const [writer, note] of [
        [b, 'b1\n'],
        [a, 'a2\n'],
        [a, 'a3\n'],
        [b, 'b2\n'],
      ] as const) {
        synced.length = 0;
        const before = await readPinnedNote(`${stem}.pin`);
        await writer.write(note);
        expect(synced).toEqual([{ path: `${stem}.pin`, notes: expect.arrayContaining([note]) }]);
        // The newest pin is the one just written, and the pin before it (by either writer) is still the other slot.
        expect(
          slots(`${stem}.pin`)
            .map((s) => s?.note)
            .sort(),
        ).toEqual([before, note].sort());
        expect(await readPinnedNote(`${stem}.pin`)).toBe(note);
      }
    } finally {
      datasync.mockRestore();
    }
    // One writer grows the slots for a large note; the other adopts the larger slots instead of writing past them.
    const large = `${'y'.repeat(6000)}\n`;
    await b.write(large);
    await a.write('a4\n');
    expect(statSync(`${stem}.pin`).size).toBe(2 * 8192);
    expect(
      slots(`${stem}.pin`)
        .map((s) => s?.note)
        .sort(),
    ).toEqual([large, 'a4\n'].sort());
    expect(await readPinnedNote(`${stem}.pin`)).toBe('a4\n');
  });
});

describe('a pin shared by processes of one root', () => {
  it('is not put back to an older tree: a writer whose note the pin on file supersedes writes nothing', async () => {
    const stem = join(tempDir(), 'pin');
    const a = (await CheckpointPinFile.open(stem)).file;
    await a.write('size 1\n');
    const b = (await CheckpointPinFile.open(stem)).file;
    const larger = (pinned: string, mine: string) => Number(pinned.split(' ')[1]) > Number(mine.split(' ')[1]);
    expect(await a.write('size 5\n', (p) => larger(p, 'size 5\n'))).toBe(true);
    // b read the tree at size 2 before a pinned size 5: its pin would move the file back; it writes nothing.
    expect(await b.write('size 2\n', (p) => larger(p, 'size 2\n'))).toBe(false);
    expect(await readPinnedNote(`${stem}.pin`)).toBe('size 5\n');
    // A larger tree of b's own is written beside a's, as before; so is any note when no predicate is given.
    expect(await b.write('size 6\n', (p) => larger(p, 'size 6\n'))).toBe(true);
    expect(await readPinnedNote(`${stem}.pin`)).toBe('size 6\n');
    expect(await a.write('size 3\n')).toBe(true);
    expect(await readPinnedNote(`${stem}.pin`)).toBe('size 3\n');
  });
});

describe('the first pin of a root shared by processes', () => {
  it('is pinned beside when another process made the file after this one opened it, not replaced', async () => {
    const stem = join(tempDir(), 'pin');
    const a = (await CheckpointPinFile.open(stem)).file;
    const b = (await CheckpointPinFile.open(stem)).file; // both opened before any pin
    await a.write('a1\n');
    expect(await b.write('b1\n')).toBe(true);
    expect(
      slots(`${stem}.pin`)
        .map((s) => s?.note)
        .sort(),
    ).toEqual(['a1\n', 'b1\n']);
    expect(await readPinnedNote(`${stem}.pin`)).toBe('b1\n');
  });
});

describePostgres('a pin shared by two ledgers of one root (PostgreSQL)', (pg) => {
  it('keeps the larger tree another ledger pinned while this one signed an older one; both go on pinning', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: 'pin_race' };
    const a = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    const b = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    try {
      const path = pinPath(root);
      const sizeOf = (note: string) => parseCheckpoint(`${note.split('\n\n')[0]!}\n`).size;
      const sizeOnFile = async () => sizeOf(await readPinnedNote(path));
      await a.publish(scope('a'), sampleSummary('a0'));
      // b's pin of the tree its append makes (2) waits until a has appended three more and pinned them (5).
      const bPin = (b as unknown as { checkpoints: { pin: CheckpointPinFile } }).checkpoints.pin;
      const write = bPin.write.bind(bPin);
      let held = false;
      bPin.write = async (note, supersedes) => {
        if (!held && sizeOf(note) === 2) {
          held = true;
          for (let i = 1; i <= 3; i++) await a.publish(scope('a'), sampleSummary(`a${i}`));
          expect(await sizeOnFile()).toBe(5);
        }
        return write(note, supersedes);
      };
      await b.publish(scope('b'), sampleSummary('b0'));
      expect(held).toBe(true);
      expect(await sizeOnFile()).toBe(5); // not put back to b's tree of 2
      // b checks the log against its own pin as before, and pins the next tree it sees.
      await b.publish(scope('b'), sampleSummary('b1'));
      expect(await sizeOnFile()).toBe(6);
      await a.publish(scope('a'), sampleSummary('a4'));
      expect(await sizeOnFile()).toBe(7);
      expect((await fsck(a)).ok).toBe(true);
    } finally {
      await b.close();
      await a.close();
    }
    const again = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    expect((await again.resume(scope('b')))?.seq).toBe(1);
    await again.close();
  });

  it('takes a proof read refused LOCKED (the tree table locked past lock_timeout) as LOCKED, not a fork', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: 'pin_locked', lockTimeoutMs: 300 };
    const a = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    const b = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    const locker = new pgLib.Client({ connectionString: pg.connectionString });
    await locker.connect();
    try {
      await a.publish(scope('a'), sampleSummary('a0'));
      await b.publish(scope('b'), sampleSummary('b0')); // b pins the tree of 2: a, which pinned 1, must prove it
      // a's consistency proof from its pin is read while another connection holds the tree's table (as VACUUM FULL
      // does): the read waits lock_timeout and fails LOCKED. The lock is taken before the read starts.
      const log = a.log;
      const treeNodes = log.treeNodes.bind(log);
      let reads = 0;
      log.treeNodes = async (ids) => {
        reads++;
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE pin_locked.tree_nodes IN ACCESS EXCLUSIVE MODE');
        try {
          return await treeNodes(ids);
        } finally {
          await locker.query('ROLLBACK');
        }
      };
      const err = await a.checkpoint().then(
        () => undefined,
        (e: unknown) => e as { code?: string },
      );
      expect(reads).toBe(1);
      expect(err?.code).toBe('LOCKED');
      expect(a.checkpointFailure).toBeUndefined();
      log.treeNodes = treeNodes;
      expect((await a.checkpoint()).checkpoint.size).toBe(2);
      await a.publish(scope('a'), sampleSummary('a1'));
    } finally {
      await locker.end();
      await b.close();
      await a.close();
    }
  });
});

describe("the previous version's pin (<hash>.note)", () => {
  /** Turns a store's pin into what the previous version kept: the newest note alone in `<hash>.note`. */
  async function downgradePin(root: string): Promise<{ note: string; legacy: string }> {
    const path = pinPath(root);
    const note = await readPinnedNote(path);
    const legacy = path.replace(/\.pin$/, '.note');
    rmSync(path);
    writeFileSync(legacy, note, { mode: 0o600 });
    return { note, legacy };
  }

  it('is read, checked against the log, and moved into a slot file', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const { note } = await downgradePin(root);
    ledger = await open(root);
    try {
      const files = readdirSync(join(root, 'checkpoints'));
      expect(files).toEqual([expect.stringMatching(/\.pin$/)]);
      expect(await readPinnedNote(join(root, 'checkpoints', files[0]!))).toBe(note);
      await publishMany(ledger, 's1', 1);
      expect((await ledger.checkpoint()).checkpoint.size).toBe(3);
    } finally {
      await ledger.close();
    }
  });

  it('keeps a leading U+FEFF of its origin: read as signed and moved into a slot file', async () => {
    const root = tempDir();
    const origin = '\uFEFFexample.com/bom';
    // U+FEFF is printed escaped: a new log is no longer named so, a store named before the rule is.
    await embeddedNamedAsBefore(root, origin);
    let ledger = await open(root, { origin });
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const { note } = await downgradePin(root);
    ledger = await open(root, { origin });
    try {
      expect(await readPinnedNote(pinPath(root))).toBe(note);
      await publishMany(ledger, 's1', 1);
      expect((await ledger.checkpoint()).checkpoint.size).toBe(3);
    } finally {
      await ledger.close();
    }
  });

  it('still protects against a rollback (ROLLBACK against the old note)', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 1);
    await ledger.close();
    const copy = join(tempDir(), 'db');
    cpSync(join(root, 'manifests-v1'), copy, { recursive: true });
    ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const { note } = await downgradePin(root);
    rmSync(join(root, 'manifests-v1'), { recursive: true, force: true });
    cpSync(copy, join(root, 'manifests-v1'), { recursive: true });
    const err = await refusal(open(root));
    expect(err.code).toBe('ROLLBACK');
    expect(err.evidence?.pinned).toBe(note);
  });

  it('is refused when it is a symlink (KEY_FILE_UNSAFE)', async () => {
    const root = tempDir();
    await (await open(root)).close();
    const { note, legacy } = await downgradePin(root);
    const elsewhere = join(tempDir(), 'old.note');
    writeFileSync(elsewhere, note);
    rmSync(legacy);
    symlinkSync(elsewhere, legacy);
    expect((await refusal(open(root))).code).toBe('KEY_FILE_UNSAFE');
  });

  it('left beside a slot file (a migration cut short) is removed; the slot file is the pin', async () => {
    const root = tempDir();
    let ledger = await open(root);
    await publishMany(ledger, 's1', 2);
    await ledger.close();
    const path = pinPath(root);
    const pinned = await readPinnedNote(path);
    writeFileSync(path.replace(/\.pin$/, '.note'), 'whatever an interrupted migration left\n');
    ledger = await open(root);
    try {
      expect(readdirSync(join(root, 'checkpoints'))).toEqual([path.split('/').at(-1)]);
      expect((await ledger.checkpoint()).note).toBe(pinned);
    } finally {
      await ledger.close();
    }
  });
});

describe('publishing and the pin', () => {
  it('acknowledges a publish only once a tree holding it is pinned; the next append does not wait for that pin', async () => {
    const root = tempDir();
    const ledger = await open(root);
    const write = CheckpointPinFile.prototype.write;
    try {
      await publishMany(ledger, 's0', 1);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const pinned: string[] = [];
      const spy = vi.spyOn(CheckpointPinFile.prototype, 'write').mockImplementation(async function (
        this: CheckpointPinFile,
        note: string,
      ) {
        await gate;
        const written = await write.call(this, note);
        pinned.push(note);
        return written;
      });
      const settled: string[] = [];
      const first = ledger.publish(scope('s1'), sampleSummary('s1')).finally(() => settled.push('s1'));
      await expect.poll(() => spy.mock.calls.length, { timeout: 30_000 }).toBe(1);
      // s1 is appended and its pin is being written: s2's append goes ahead meanwhile ...
      const second = ledger.publish(scope('s2'), sampleSummary('s2')).finally(() => settled.push('s2'));
      const outcomes = Promise.allSettled([first, second]);
      await expect.poll(async () => (await ledger.log.head('s2'))?.seq, { timeout: 30_000 }).toBe(0);
      // ... but neither is acknowledged before a tree holding it is pinned.
      expect(settled).toEqual([]);
      expect(pinned).toEqual([]);
      release();
      const [a, b] = await outcomes;
      expect([a.status, b.status]).toEqual(['fulfilled', 'fulfilled']);
      const { checkpoint, note } = await ledger.checkpoint();
      expect(checkpoint.size).toBe(3);
      expect(pinned.at(-1)).toBe(note);
      expect(await readPinnedNote(pinPath(root))).toBe(note);
    } finally {
      vi.restoreAllMocks();
      await ledger.close();
    }
  });
});
