/**
 * The witness key file (src/witness/key.ts): created whole or not at all, never replacing one that stands.
 */
import { readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import fsp from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { main } from '../../src/cli/main.js';
import { createWitnessKeyFile, loadWitnessKeyFile } from '../../src/witness/key.js';
import { captureIo } from '../support/capture-io.js';
import { tempDir } from '../support/tmp.js';

type HandleProto = { writeFile: (...args: unknown[]) => Promise<void> };
let restore: (() => void) | undefined;
afterEach(() => restore?.());

describe('witness keygen (the key file)', () => {
  it('creates a loadable key file, and refuses (EEXIST) to replace one, leaving it as it was', async () => {
    const dir = tempDir();
    const path = join(dir, 'w.key');
    const key = await createWitnessKeyFile(path, 'witness.example/w1');
    expect((await loadWitnessKeyFile(path)).vkey).toBe(key.vkey);
    const before = readFileSync(path, 'utf8');
    await expect(createWitnessKeyFile(path, 'witness.example/w1')).rejects.toMatchObject({ code: 'EEXIST' });
    expect(readFileSync(path, 'utf8')).toBe(before);
    expect(readdirSync(dir)).toEqual(['w.key']);
  });

  it("removes an old staging file of its own path a killed keygen left (a whole private key), and no one else's", async () => {
    const dir = tempDir();
    const path = join(dir, 'w.key');
    const mine = `${path}.0123456789abcdef.tmp`;
    const fresh = `${path}.fedcba9876543210.tmp`; // a keygen of this path running now
    const other = join(dir, 'other.key.0123456789abcdef.tmp');
    for (const p of [mine, fresh, other]) writeFileSync(p, '{"d":"a private key"}', { mode: 0o600 });
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const p of [mine, other]) utimesSync(p, hourAgo, hourAgo);
    await createWitnessKeyFile(path, 'witness.example/w1');
    expect(readdirSync(dir).sort()).toEqual(['other.key.0123456789abcdef.tmp', 'w.key', 'w.key.fedcba9876543210.tmp']);
  });

  it('refuses a name no note could carry (a C0 control), writing no file', async () => {
    const dir = tempDir();
    await expect(createWitnessKeyFile(join(dir, 'w.key'), 'w.example/\u001b[2J')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a name that would print escaped (its printed verifier key would not parse back), writing no file', async () => {
    const dir = tempDir();
    for (const name of ['witness.example/w\u200b1', 'w.example/\u202eevil', 'w.example/\u009b2J', 'w.example\\w1'])
      await expect(createWitnessKeyFile(join(dir, 'w.key'), name)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('print as it is'),
      });
    expect(readdirSync(dir)).toEqual([]);
    const c = captureIo();
    const code = await main(
      ['witness', 'keygen', '--name', 'witness.example/w\u200b1', '--out', join(dir, 'w.key')],
      c.io,
    );
    expect(code).toBe(1);
    expect(c.stderr()).toMatch(/^handoff-ledger: INVALID_ARGUMENT: a witness name must print as it is/);
    expect(readdirSync(dir)).toEqual([]);
    // A name keygen takes prints as it is: the line it prints is the verifier key.
    for (const [i, name] of ['witness.example/w1', 'zeugin.beispiel/wé', '証人/1'].entries()) {
      const ok = captureIo();
      expect(await main(['witness', 'keygen', '--name', name, '--out', join(dir, `ok${i}.key`)], ok.io)).toBe(0);
      expect(parseCosignerKey(ok.stdout().trim()).name).toBe(name);
    }
  });

  it('leaves no key file, partial or empty, and no temporary file when the write fails', async () => {
    const probe = await fsp.open(process.execPath, 'r');
    const proto = Object.getPrototypeOf(probe) as HandleProto;
    await probe.close();
    const real = proto.writeFile;
    proto.writeFile = async function (this: unknown) {
      await real.apply(this, ['{"crv":"Ed25']); // part of it lands, then the disk is full
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    };
    restore = () => (proto.writeFile = real);
    const dir = tempDir();
    await expect(createWitnessKeyFile(join(dir, 'w.key'), 'witness.example/w1')).rejects.toMatchObject({
      code: 'ENOSPC',
    });
    expect(readdirSync(dir)).toEqual([]);
    restore();
    // A later keygen is not blocked by a leftover.
    await createWitnessKeyFile(join(dir, 'w.key'), 'witness.example/w1');
    expect(readdirSync(dir)).toEqual(['w.key']);
  });

  it('creates the key in place on a filesystem without hard links, still refusing to replace one', async () => {
    const link = fsp.link;
    fsp.link = async () => {
      throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
    };
    syncBuiltinESMExports();
    restore = () => {
      fsp.link = link;
      syncBuiltinESMExports();
    };
    const dir = tempDir();
    const path = join(dir, 'w.key');
    const key = await createWitnessKeyFile(path, 'witness.example/w1');
    expect((await loadWitnessKeyFile(path)).vkey).toBe(key.vkey);
    await expect(createWitnessKeyFile(path, 'witness.example/w1')).rejects.toMatchObject({ code: 'EEXIST' });
    expect(readdirSync(dir)).toEqual(['w.key']);
  });
});
