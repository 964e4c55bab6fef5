/**
 * The pin read at open is verified with the store's checkpoint keys. An open that reads trust.json just before
 * another process sharing the root rotates the keys, and the pin just after that process pinned with its new
 * checkpoint key, waits for the rotation to end and reads the keys again. A pin no listed key signed is refused.
 * (Only PostgreSQL stores share a root between processes: one process owns an embedded store.)
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { openLedger, type OpenLedgerOptions } from '../src/ledger/open.js';
import { Keyring } from '../src/keys/keyring.js';
import { generateJwk, LocalSigner } from '../src/keys/local-signer.js';
import { CheckpointPinFile } from '../src/ledger/checkpoint-pin.js';
import { signNote } from '../manifests/crypto/note.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

/** Signs the pinned checkpoint of `root` again, by a key no trust file lists, in place of the store's signature. */
async function repinByStranger(root: string): Promise<void> {
  const pin = readdirSync(join(root, 'checkpoints')).find((n) => n.endsWith('.pin'))!;
  const { file, note } = await CheckpointPinFile.open(join(root, 'checkpoints', pin.slice(0, -'.pin'.length)));
  const text = note!.slice(0, note!.indexOf('\n\n') + 1);
  const stranger = new LocalSigner(generateJwk());
  const name = text.slice(0, text.indexOf('\n'));
  await file.write(await signNote(text, [{ name, publicKey: stranger.publicKey, sign: (m) => stranger.sign(m) }]));
  await file.close();
}

async function refusesStrangersPin(extra: Partial<OpenLedgerOptions>): Promise<void> {
  const root = tempDir();
  const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {}, ...extra });
  await ledger.publish(scope, sampleSummary(0));
  await ledger.close();
  await repinByStranger(root);
  await expect(openLedger({ root, host: 'host-a', onNotice: () => {}, ...extra })).rejects.toMatchObject({
    code: 'NOTE_UNVERIFIED',
  });
}

describe('a pin signed by a key no trust file lists (embedded)', () => {
  it('is refused at open: NOTE_UNVERIFIED', () => refusesStrangersPin({}));
});

describePostgres('open while a process sharing the root rotates its keys (PostgreSQL)', (pg) => {
  it('a pin signed by a key no trust file lists is refused at open: NOTE_UNVERIFIED (trust.json unchanged)', () =>
    refusesStrangersPin({ postgres: { connectionString: pg.connectionString, schema: 'open_stranger' } }));

  it('reads the keys again and opens, where the pin was signed by the rotated checkpoint key', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: 'open_rotation' };
    const first = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
    await first.publish(scope, sampleSummary(0));
    const open = Keyring.open.bind(Keyring);
    // The second open has read trust.json; the first process rotates and pins with its new checkpoint key now.
    const spy = vi.spyOn(Keyring, 'open').mockImplementationOnce(async (options) => {
      const keyring = await open(options);
      await first.rotateKey();
      await first.publish(scope, sampleSummary(1));
      return keyring;
    });
    try {
      const second = await openLedger({ root, host: 'host-a', postgres, onNotice: () => {} });
      try {
        expect(spy).toHaveBeenCalled();
        expect(second.keyId).toBe(first.keyId); // the rotated key, read again
        expect((await second.resume(scope))?.seq).toBe(1);
        await second.publish(scope, sampleSummary(2));
        expect((await first.resume(scope))?.seq).toBe(2);
      } finally {
        await second.close();
      }
    } finally {
      spy.mockRestore();
      await first.close();
    }
  }, 60_000);
});
