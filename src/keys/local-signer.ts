/**
 * Host signing keys (docs/DESIGN.md, "Keys and trust"): Ed25519 JWK files (mode 0600, refused when readable
 * by others) or an injected `Signer` for KMS/HSM use. Signing uses node:crypto.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { decodeBase64Url } from '../../manifests/encoding/base64.js';
import type { Signer } from '../../manifests/crypto/envelope.js';
import { keyIdOf } from '../../manifests/format/trust.js';
import { HandoffLedgerError, LedgerError } from '../errors.js';
import { isErrnoError, shownValue, StoreError } from '../../store/errors.js';
import { writeFileAtomic } from '../../store/fs/atomic-file.js';
import { readBoundedFile } from '../../store/fs/bounded-read.js';
import { isPathName } from '../../store/fs/safe-dir.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';
import { ownerProblem } from '../../store/fs/owner.js';
import { quoted } from '../../manifests/encoding/printable.js';
import { errnoText } from '../../store/fs/errno-text.js';

/** The largest key file read (a JWK is a few hundred bytes). */
const MAX_KEY_FILE_BYTES = 64 * 1024;

const b64url32 = z.string().refine((s) => decodeBase64Url(s)?.length === 32, 'must be base64url of 32 bytes');
const jwkSchema = z.object({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: b64url32,
  d: b64url32,
  kid: z.string().optional(),
});

export type PrivateJwk = z.infer<typeof jwkSchema>;

/** A `Signer` backed by a private key held in this process. */
export class LocalSigner implements Signer {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  private readonly key: KeyObject;

  /**
   * @throws LedgerError `KEY_INVALID` for anything but an Ed25519 private JWK whose `x` is the public half of its `d`,
   *   one that throws as it is read (a getter, a revoked proxy: its error the cause) included
   */
  constructor(given: PrivateJwk) {
    let parsed: ReturnType<typeof jwkSchema.safeParse>;
    try {
      parsed = jwkSchema.safeParse(given);
    } catch (err) {
      throw new LedgerError('KEY_INVALID', 'not an Ed25519 private JWK: reading it failed (a getter or proxy threw)', {
        cause: err,
      });
    }
    if (!parsed.success)
      throw new LedgerError(
        'KEY_INVALID',
        `not an Ed25519 private JWK: ${describeZodError(parsed.error, { escaped: true })}`,
      );
    // The parsed copy, as checked: a getter of the given object is not read again.
    const jwk = parsed.data;
    try {
      this.key = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d }, format: 'jwk' });
    } catch (err) {
      throw new LedgerError('KEY_INVALID', 'the Ed25519 private key cannot be loaded', { cause: err });
    }
    // The JWK's x must be the public half of its d; a mismatched file would sign under a key nobody trusts.
    const x = (createPublicKey(this.key).export({ format: 'jwk' }) as { x: string }).x;
    if (x !== jwk.x) throw new LedgerError('KEY_INVALID', 'the JWK public key does not match its private key');
    this.publicKey = decodeBase64Url(x)!;
    this.keyId = keyIdOf(this.publicKey);
  }

  /**
   * @throws LedgerError `INVALID_ARGUMENT` for a message that is neither bytes (a `Uint8Array`, or another view of an
   *   ArrayBuffer, as Node's sign takes) nor a string (signed as its UTF-8 bytes, as Node's sign does): a number, an
   *   object, `undefined` were Node's plain TypeError
   */
  sign(message: Uint8Array): Uint8Array {
    if (!ArrayBuffer.isView(message) && typeof message !== 'string')
      throw new LedgerError('INVALID_ARGUMENT', `a message to sign is a Uint8Array, not ${shownValue(message)}`);
    return new Uint8Array(sign(null, message, this.key));
  }
}

/** The DER of an Ed25519 private key (PKCS#8) and of a public key (SPKI) up to their 32 bytes (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** The 32 bytes of an Ed25519 key's DER (`prefix`, then the key), base64url. */
function rawEd25519(der: Buffer, prefix: Buffer, what: string): string {
  if (der.length !== prefix.length + 32 || !der.subarray(0, prefix.length).equals(prefix))
    throw new Error(`node:crypto gave an Ed25519 ${what} key in a DER encoding other than RFC 8410's`);
  return der.subarray(prefix.length).toString('base64url');
}

/**
 * A new Ed25519 private key as a JWK (`kid`: its key id). The pair comes from generateKeyPairSync already encoded
 * (DER), never as key objects exported to JWK afterwards: Node (20.20 at least) deadlocked now and then on such an
 * export, for ever, when a garbage collection during it destroyed the job that generated the key, whose destructor
 * waits for the lock the export holds (`init`, `witness keygen` hung, printing nothing).
 */
export function generateJwk(): PrivateJwk {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
    privateKeyEncoding: { format: 'der', type: 'pkcs8' },
    publicKeyEncoding: { format: 'der', type: 'spki' },
  });
  let d: string;
  try {
    d = rawEd25519(privateKey, ED25519_PKCS8_PREFIX, 'private');
  } finally {
    privateKey.fill(0);
  }
  const x = rawEd25519(publicKey, ED25519_SPKI_PREFIX, 'public');
  // Loaded as every key file is: x checked against d.
  const signer = new LocalSigner({ kty: 'OKP', crv: 'Ed25519', x, d });
  return { kty: 'OKP', crv: 'Ed25519', x, d, kid: signer.keyId };
}

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';

/**
 * Reads a private key file as JSON, refusing one that is a symlink, owned by another user (not root), or
 * readable/writable by group or others.
 * @throws LedgerError `KEY_FILE_UNSAFE`, `KEY_INVALID` (not JSON); StoreError `STORAGE_FAILED` (it cannot be read);
 *   the `ENOENT` error itself when there is no such file (the caller says what that means)
 */
export async function readPrivateKeyFile(path: string): Promise<unknown> {
  // Opened once (O_NOFOLLOW: a symlink is refused; O_NONBLOCK: a FIFO is not waited on); judged and read through that
  // descriptor, so no file swapped in at the path after the checks is read.
  const bytes = await readBoundedFile(path, MAX_KEY_FILE_BYTES, {
    noFollow: true,
    notAFile: () => new LedgerError('KEY_FILE_UNSAFE', `key file ${quoted(path)} is not a regular file`),
    check: (st) => {
      const foreign = ownerProblem(`key file ${quoted(path)}`, st.uid);
      if (foreign) throw new LedgerError('KEY_FILE_UNSAFE', `${foreign}: another user could have planted it`);
      if ((st.mode & 0o077) !== 0) {
        throw new LedgerError(
          'KEY_FILE_UNSAFE',
          `key file ${quoted(path)} is accessible by group or others (mode ${(st.mode & 0o777).toString(8)}); run chmod 600 on it`,
        );
      }
    },
    // A key is a few hundred bytes: an enormous file is no key, and is not read (nor more than the bound of one that
    // grows while read).
    tooLarge: (size) =>
      new LedgerError(
        'KEY_INVALID',
        size === undefined
          ? `key file ${quoted(path)} grew over ${MAX_KEY_FILE_BYTES} bytes while read: not a key`
          : `key file ${quoted(path)} is ${size} bytes, over ${MAX_KEY_FILE_BYTES}: not a key`,
      ),
  }).catch((err: unknown) => {
    // A file that cannot be read is an I/O failure, not a key that is "not JSON".
    throw isMissing(err) ? err : keyFileIoFailure(err, `cannot read key file ${quoted(path)}`);
  });
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new LedgerError('KEY_INVALID', `key file ${quoted(path)} is not JSON`, { cause: err });
  }
}

/**
 * Loads a private key file (checked as `readPrivateKeyFile` does), or undefined when there is no such file.
 * @throws LedgerError `KEY_FILE_UNSAFE`, `KEY_INVALID`; StoreError `STORAGE_FAILED`
 */
export async function loadKeyFileIfPresent(path: string): Promise<LocalSigner | undefined> {
  let value: unknown;
  try {
    value = await readPrivateKeyFile(path);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  return new LocalSigner(value as PrivateJwk);
}

/**
 * Loads a private key file (checked as `readPrivateKeyFile` does).
 * @throws LedgerError `INVALID_ARGUMENT` (a path that is not a non-empty string, or holds a NUL), `KEY_FILE_UNSAFE`, `KEY_INVALID`
 *   (also: no such file); StoreError `STORAGE_FAILED`
 */
export async function loadKeyFile(path: string): Promise<LocalSigner> {
  // A NUL names no file (Node's fs refuses it with a plain TypeError).
  if (!isPathName(path))
    throw new LedgerError('INVALID_ARGUMENT', 'loadKeyFile needs the path of a key file (a non-empty string, no NUL)');
  const signer = await loadKeyFileIfPresent(path);
  if (!signer) throw new LedgerError('KEY_INVALID', `no such key file ${quoted(path)}`);
  return signer;
}

/**
 * An I/O failure (an `errno` error: EACCES, EIO, ENOSPC, …) of a key file or the trust file as the coded error the
 * README lists for it, `STORAGE_FAILED` with the original error as its cause, named by its code (`errnoText`: its message
 * would repeat the path raw, which `what` names quoted); any other error is returned as it is.
 */
export function keyFileIoFailure(err: unknown, what: string): unknown {
  if (err instanceof HandoffLedgerError || !isErrnoError(err)) return err;
  return new StoreError('STORAGE_FAILED', `${what}: ${errnoText(err)}`, { cause: err });
}

/**
 * Writes a key file atomically with mode 0600.
 * @throws StoreError `STORAGE_FAILED` when it cannot be written
 */
export async function writeKeyFile(path: string, jwk: PrivateJwk): Promise<void> {
  try {
    await writeFileAtomic(path, JSON.stringify(jwk) + '\n', 0o600);
  } catch (err) {
    throw keyFileIoFailure(err, `cannot write key file ${quoted(path)}`);
  }
}
