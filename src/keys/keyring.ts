/**
 * The ledger's own keys and trust file: `<root>/keys/<blake3(host)>.jwk` (the current private key;
 * the host id is hashed, so an id never becomes a path) and `<root>/trust.json` (every key this store
 * has trusted, with validity windows). Rotation = new key + `notAfter` on the old one; revocation =
 * `revokedAt`. Old manifests keep verifying after a rotation; manifests signed at or after a
 * revocation stop verifying.
 */
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { digestOf } from '../../store/hash/digest.js';
import { ensurePrivateDir } from '../../store/fs/safe-dir.js';
import { encodeBase64Url } from '../../manifests/encoding/base64.js';
import type { Signer } from '../../manifests/crypto/envelope.js';
import { findTrustedKey, parseTrustStore, type TrustStore, type TrustedKey } from '../../manifests/format/trust.js';
import { LedgerError } from '../errors.js';
import { generateJwk, loadKeyFile, writeKeyFile } from './local-signer.js';
import { writeFileAtomic } from '../../store/fs/atomic-file.js';

export interface KeyringOptions {
  root: string;
  host: string;
  signer?: Signer;
  keyFile?: string;
  clock: () => Date;
}

export class Keyring {
  private constructor(
    private readonly options: KeyringOptions,
    private readonly trustPath: string,
    private readonly keyPath: string | undefined,
    private current: Signer,
    private trust: TrustStore,
  ) {}

  static async open(options: KeyringOptions): Promise<Keyring> {
    const keysDir = join(options.root, 'keys');
    await ensurePrivateDir(keysDir, 'UNSAFE_PATH');
    const trustPath = join(options.root, 'trust.json');
    let trust: TrustStore = { version: 1, keys: [] };
    try {
      // trust.json decides which signatures count: refuse a planted link or a file others can write.
      const st = await lstat(trustPath);
      if (!st.isFile())
        throw new LedgerError('KEY_FILE_UNSAFE', `${trustPath} is not a regular file (symlink planted?)`);
      if ((st.mode & 0o022) !== 0)
        throw new LedgerError('KEY_FILE_UNSAFE', `${trustPath} is writable by group or others; run chmod 600 on it`);
      trust = parseTrustStore(await readFile(trustPath, 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    let signer = options.signer;
    let keyPath: string | undefined;
    if (!signer) {
      keyPath = options.keyFile ?? join(keysDir, `${digestOf(new TextEncoder().encode(options.host)).slice(7)}.jwk`);
      try {
        signer = await loadKeyFile(keyPath);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || options.keyFile) throw err;
        await writeKeyFile(keyPath, generateJwk());
        signer = await loadKeyFile(keyPath);
      }
    }
    const ring = new Keyring(options, trustPath, keyPath, signer, trust);
    await ring.ensureTrusted(signer);
    return ring;
  }

  get signer(): Signer {
    return this.current;
  }

  /** This store's trust file contents (what `keys export` hands to auditors). */
  trustStore(): TrustStore {
    return structuredClone(this.trust);
  }

  private now(): string {
    return this.options.clock().toISOString();
  }

  /** Lists the signer's key for this host if it is not listed yet; refuses a key that is no longer valid. */
  private async ensureTrusted(signer: Signer): Promise<void> {
    const listed = this.trust.keys.find((k) => k.host === this.options.host && k.keyId === signer.keyId);
    if (!listed) {
      await this.save({
        ...this.trust,
        keys: [
          ...this.trust.keys,
          {
            host: this.options.host,
            keyId: signer.keyId,
            publicKey: encodeBase64Url(signer.publicKey),
            notBefore: this.now(),
          },
        ],
      });
      return;
    }
    if (listed.publicKey !== encodeBase64Url(signer.publicKey)) {
      throw new LedgerError('KEY_INVALID', `trust.json lists key ${signer.keyId} with another public key`);
    }
    const lookup = findTrustedKey(this.trust, this.options.host, signer.keyId, this.now());
    if (!lookup.ok)
      throw new LedgerError('KEY_INVALID', `the host key cannot sign now: ${lookup.message}; rotate the key`);
  }

  private async save(trust: TrustStore): Promise<void> {
    await writeFileAtomic(this.trustPath, JSON.stringify(trust, null, 2) + '\n', 0o600);
    this.trust = trust;
  }

  /**
   * Rotates the host key: a new key file replaces the old one, the old key gets `notAfter` = now and
   * the new one `notBefore` = now. Not available with an injected signer (rotate it in the KMS).
   */
  async rotate(): Promise<Signer> {
    if (!this.keyPath)
      throw new LedgerError('KEY_INVALID', 'cannot rotate an injected signer; rotate it where it lives');
    const at = this.now();
    const old = this.current;
    const jwk = generateJwk();
    const keys: TrustedKey[] = this.trust.keys.map((k) =>
      k.host === this.options.host && k.keyId === old.keyId && k.notAfter === undefined ? { ...k, notAfter: at } : k,
    );
    keys.push({ host: this.options.host, keyId: jwk.kid!, publicKey: jwk.x, notBefore: at });
    // Trust first, then the key file: a crash in between leaves the old key file, still valid until `at`... and
    // the ensureTrusted check on the next open reports it plainly instead of signing with an expired key.
    await this.save({ ...this.trust, keys });
    await writeKeyFile(this.keyPath, jwk);
    this.current = await loadKeyFile(this.keyPath);
    return this.current;
  }

  /** Marks a key revoked from `at` (default now): manifests it signed at or after `at` no longer verify. */
  async revoke(keyId: string, at: string = this.now()): Promise<void> {
    if (!this.trust.keys.some((k) => k.keyId === keyId))
      throw new LedgerError('KEY_INVALID', `no trusted key ${keyId}`);
    await this.save({
      ...this.trust,
      keys: this.trust.keys.map((k) => (k.keyId === keyId ? { ...k, revokedAt: at } : k)),
    });
  }
}

/** Union of trust stores (the store's own file plus keys of other hosts given by the caller). */
export function mergeTrust(...stores: Array<TrustStore | undefined>): TrustStore {
  const keys: TrustedKey[] = [];
  for (const s of stores)
    for (const k of s?.keys ?? []) if (!keys.some((x) => x.host === k.host && x.keyId === k.keyId)) keys.push(k);
  return { version: 1, keys };
}
