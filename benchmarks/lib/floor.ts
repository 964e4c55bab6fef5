/**
 * The floor of an inline publish on the embedded store, shared by the sizes and concurrency suites: a bare LevelDB
 * (what the log's synced batches go to) and a file of two 4 KiB slots opened with O_DSYNC, overwritten in turn as
 * the embedded store's pin overwrites its slots (src/ledger/checkpoint-pin.ts, `writeExclusive`).
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Level } from 'level';

export interface PinFloor {
  db: Level<string, Uint8Array>;
  /** The pin's flush: the other 4 KiB slot overwritten in place; durable when it resolves (O_DSYNC). */
  pin(): Promise<void>;
  close(): Promise<void>;
}

/** Opens the floor's database `<name>-level` and slot file `<name>-slots` in `dir`. */
export async function openPinFloor(dir: string, name: string): Promise<PinFloor> {
  const db = new Level<string, Uint8Array>(join(dir, `${name}-level`), { valueEncoding: 'view' });
  await db.open();
  const path = join(dir, `${name}-slots`);
  const slots = await open(path, constants.O_CREAT | constants.O_RDWR | constants.O_DSYNC, 0o600);
  const slot = new Uint8Array(4096).fill(0x2a);
  await slots.write(slot, 0, slot.length, 0);
  await slots.write(slot, 0, slot.length, slot.length);
  let writes = 0;
  return {
    db,
    async pin() {
      await slots.write(slot, 0, slot.length, (writes++ % 2) * slot.length);
    },
    async close() {
      await Promise.allSettled([slots.close(), db.close()]);
    },
  };
}
