/**
 * The witness key file: an Ed25519 private JWK (the project's key-file format, mode 0600, checked as host
 * keys are) with the witness's name beside it, since a cosignature line carries the name and its key hash
 * commits to it. The verifier key (`<name>+<hash>+<base64(0x04 ‖ key)>`) is what log operators and
 * auditors pin.
 */
import { z } from 'zod';
import { encodeCosignerKey } from '../../manifests/crypto/cosignature.js';
import { isValidKeyName, type NoteSigner } from '../../manifests/crypto/note.js';
import { printable } from '../../manifests/encoding/printable.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';
import { basename, dirname, join } from 'node:path';
import { lstat, readdir, unlink } from 'node:fs/promises';
import { createFileWhole } from '../../store/fs/atomic-file.js';
import { nodeFsOps } from '../../store/fs/ops.js';
import { LedgerError } from '../errors.js';
import { quoted } from '../../store/errors.js';
import { generateJwk, LocalSigner, readPrivateKeyFile, type PrivateJwk } from '../keys/local-signer.js';

const witnessKeyFileSchema = z.object({
  name: z.string().max(256).refine(isValidKeyName, 'must be a note key name (no spaces, no "+")'),
});

export interface WitnessKey {
  signer: NoteSigner;
  /** The C2SP cosignature/v1 verifier key to pin. */
  vkey: string;
}

function witnessKeyOf(name: string, jwk: PrivateJwk): WitnessKey {
  const local = new LocalSigner(jwk);
  const signer: NoteSigner = { name, publicKey: local.publicKey, sign: (m) => local.sign(m) };
  return { signer, vkey: encodeCosignerKey(name, local.publicKey) };
}

/**
 * Creates a witness key file (refusing to overwrite one: EEXIST) and returns the key.
 * @throws LedgerError `INVALID_ARGUMENT` for a bad name: not a note key name, or one that is not printed as it is
 */
export async function createWitnessKeyFile(path: string, name: string): Promise<WitnessKey> {
  if (!isValidKeyName(name) || name.length > 256)
    throw new LedgerError('INVALID_ARGUMENT', 'a witness name is a note key name: no spaces, no "+"');
  // The verifier key is printed (keygen, serve) for operators and auditors to copy: a name printed escaped (a C1
  // control, an invisible or format character such as U+200B, a backslash) would give a key that does not parse
  // back (KEY_INVALID: its hash is of the real name). Such a name is refused while it can still be changed.
  if (printable(name) !== name)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      'a witness name must print as it is (no control, invisible or format character, no backslash): its verifier key is copied from what keygen prints',
    );
  const jwk = generateJwk();
  // Written whole and synced under a temporary name, then linked to `path`, which fails where a file stands: a
  // second keygen never replaces a key whose cosignatures others already pin, and a crash or a failed write never
  // leaves a partial key file there (which would neither load nor be replaced).
  // What a keygen killed before its link left beside this very path (a whole private key under a staging name):
  // removed when over a minute old (a keygen of this path running now is younger).
  await removeOwnLeftovers(path, Date.now() - 60_000);
  const file = await createFileWhole(path, `${JSON.stringify({ name, ...jwk })}\n`, { sync: true });
  if (!file)
    throw Object.assign(new Error(`EEXIST (file already exists), link ${quoted(path)}`), {
      code: 'EEXIST',
      syscall: 'link',
      path,
    });
  await file.close();
  await nodeFsOps.fsyncDir(dirname(path));
  return witnessKeyOf(name, jwk);
}

/** Removes `createFileWhole`'s staging files of `path` (`<name>.<16 hex>.tmp`, regular files) changed before `before`. */
async function removeOwnLeftovers(path: string, before: number): Promise<void> {
  const prefix = `${basename(path)}.`;
  let names: string[];
  try {
    names = await readdir(dirname(path));
  } catch {
    return;
  }
  for (const n of names) {
    if (!n.startsWith(prefix) || !/^[0-9a-f]{16}\.tmp$/.test(n.slice(prefix.length))) continue;
    const at = join(dirname(path), n);
    const st = await lstat(at).catch(() => undefined);
    if (st?.isFile() && st.mtimeMs < before) await unlink(at).catch(() => {});
  }
}

/** Loads a witness key file. @throws LedgerError `KEY_FILE_UNSAFE`, `KEY_INVALID` */
export async function loadWitnessKeyFile(path: string): Promise<WitnessKey> {
  const value = await readPrivateKeyFile(path);
  const named = witnessKeyFileSchema.safeParse(value);
  if (!named.success)
    throw new LedgerError(
      'KEY_INVALID',
      `witness key file ${quoted(path)}: ${describeZodError(named.error, { escaped: true })}`,
    );
  return witnessKeyOf(named.data.name, value as PrivateJwk);
}
