/**
 * The ledger's own keys and trust file: `<root>/keys/<blake3(host)>.jwk` (the current private key;
 * the host id is hashed, so an id never becomes a path) and `<root>/trust.json` (every key this store
 * has trusted, with validity windows). Rotation = new key + `notAfter` on the old one; revocation =
 * `revokedAt`. Old manifests keep verifying after a rotation; manifests signed at or after a
 * revocation stop verifying. A key that can no longer sign (revoked, rotated out) does not stop the
 * store from opening: reading, verifying, exporting and rotating still work; only signing refuses. A revoked
 * checkpoint key is replaced when the keys are loaded (see `ensureCheckpointTrusted`).
 */
import { accessSync, constants } from 'node:fs';
import { lstat, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { digestOf } from '../../store/hash/digest.js';
import { ensurePrivateDir, privateDirIfPresent } from '../../store/fs/safe-dir.js';
import { readBoundedFile } from '../../store/fs/bounded-read.js';
import { decodeBase64Url, encodeBase64Url } from '../../manifests/encoding/base64.js';
import type { Signer } from '../../manifests/crypto/envelope.js';
import {
  earlierTime,
  listedPublicKey,
  MAX_TRUST_FILE_BYTES,
  parseTrustStore,
  type TrustedCheckpointKey,
  type TrustStore,
  type TrustedKey,
  windowEndOf,
} from '../../manifests/format/trust.js';
import { encodeVerifierKey, type NoteSigner } from '../../manifests/crypto/note.js';
import { LedgerError, untilCancelled } from '../errors.js';
import { errorText, isUint8Array, shownValue, StoreError } from '../../store/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import { nodeFsOps } from '../../store/fs/ops.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { ownerProblem } from '../../store/fs/owner.js';
import { timestampSchema } from '../../manifests/format/manifest.js';
import { generateJwk, loadKeyFile, loadKeyFileIfPresent, keyFileIoFailure, writeKeyFile } from './local-signer.js';
import { writeFileAtomic } from '../../store/fs/atomic-file.js';
import { withFileLock, type FileLockOptions } from '../ledger/file-lock.js';
import { quoted, shellWord } from '../../manifests/encoding/printable.js';

export interface KeyringOptions {
  root: string;
  host: string;
  signer?: Signer;
  keyFile?: string;
  clock: () => Date;
  /** The log's checkpoint origin: the name the checkpoint key signs under. */
  origin: string;
  /** How the lock on trust.json waits (tests shorten it). */
  trustLock?: FileLockOptions;
  /**
   * Whether the log already knows a key (it signed there): with trust.json missing, listing such a key anew from
   * "now" would expire all it signed, so the keyring refuses instead. The store's own key file is refused then in any case.
   */
  signedBefore?: (keyId: string) => Promise<boolean>;
  /**
   * Where the log closed a key's window (a rotation or revocation), if it did: a key of this host that trust.json holds
   * current and the log closed makes a trust.json from before that rotation, whose new key may not have signed yet.
   */
  closedInLog?: (keyId: string) => Promise<string | undefined>;
  /**
   * Whether nothing was ever signed in this store (no entry, no signing-key record): only then is a missing trust.json
   * rebuilt for the host key (a first open that stopped between writing the key and trust.json). Any other key it
   * listed, of a rotation or of another host, could have signed, and would silently lose its window.
   */
  storeSignedNothing?: () => Promise<boolean>;
  /** Says what the operator should know of the keys this keyring listed (a second current key of this host). */
  notice?: (message: string) => void;
  /**
   * False: a host without a key file is refused (`refuseNewHostKey`), never given a new key, and a key file trust.json
   * does not list is refused, never listed. Default true.
   */
  createHostKey?: boolean;
  /**
   * An open that must write nothing (a diagnosing open of a store whose origin record is damaged, under the name
   * trust.json lists): whatever the keyring would write — a staged key to install or remove, a new host or checkpoint
   * key, a key to list in trust.json — is refused with this error instead.
   */
  writeNothing?: Error;
  /**
   * Key files a rotation staged and did not move into place (it stopped) stay where they are (a diagnosing open, fsck,
   * writes nothing to the root): one trust.json lists is the key read, in memory; one it does not list is not read.
   * They are named in `stagedLeft`. Default false: they are moved into place or removed under the trust lock.
   */
  leaveStaged?: boolean;
  /**
   * An open to diagnose (fsck), which writes nothing to the root: a missing `keys/` is not made (one there is judged as
   * ever), and a key the load would make (the host's, the checkpoint key) is refused `KEY_INVALID` instead, naming
   * the file missing; so is a key it would list in trust.json (a key file trust.json does not list, a revoked checkpoint
   * key it would replace). Default false: both are made and listed, as at a store's first open.
   */
  makeNoKeys?: boolean;
}

/**
 * What a diagnosing open (`makeNoKeys`) refuses with where the load would make a key: the key file missing, and
 * `keys/` with it when that is gone too. It makes neither (nor a lock file): the root is left as it was. The advice is
 * for the root fsck most often meets this on, one restored from a backup: the keys come from the newest backup of
 * them (README "Backups"), not the root's; a lost checkpoint key is made anew by any other open, which ends the lost
 * one's window itself (a revocation is for a copy that may exist, and fails the checkpoints of bundles exported before).
 */
function diagnosisMakesNoKey(
  kind: 'host' | 'checkpoint',
  path: string,
  keysDir: string,
  keysDirMissing: boolean,
): LedgerError {
  const what = kind === 'host' ? "this host's key file" : "this host's checkpoint key file";
  const missing = keysDirMissing
    ? `${quoted(keysDir)} is missing (so is ${what} ${quoted(path)})`
    : `${what} ${quoted(path)} is missing`;
  const restore = `restore ${keysDirMissing ? 'the directory' : 'the file'} from the newest backup of this root's keys (keys/ with trust.json: a root restored from a backup runs with the current keys, README "Backups")`;
  const lost =
    kind === 'host'
      ? `If the keys are lost: \`init\` or \`publish\` with this host makes new ones, and \`keys revoke <keyId>\` ends the lost one (README "Key rotation runbook")`
      : `If it is lost: any other command on this root (\`handoff-ledger checkpoint\`, which publishes nothing) makes a new checkpoint key and ends the lost one's window, then run fsck; its notice names the lost key, to revoke only if a copy of it may exist (a bundle exported before then verifies no more)`;
  return new LedgerError(
    'KEY_INVALID',
    `${missing}: a diagnosing open (fsck) makes no key nor key directory, for it writes nothing to the store it diagnoses; ${restore}. ${lost}`,
  );
}

/**
 * What a diagnosing open (`makeNoKeys`) refuses with where the load would list a key in trust.json (or make one in place
 * of a revoked checkpoint key): it writes nothing to the store it diagnoses.
 */
function diagnosisListsNoKey(what: string, trustPath: string, state: string): LedgerError {
  return new LedgerError(
    'KEY_INVALID',
    `${what} ${state} in ${quoted(trustPath)}: a diagnosing open (fsck) writes nothing to the store it diagnoses, trust.json included; an ordinary open lists the key (or makes a new one for a revoked one), as it finishes a first open or rotation that stopped; then run fsck`,
  );
}

/** Loading found something to write (a new key, a key to list) without holding the trust lock: load again under it. */
class NeedsTrustLock extends Error {}

const trustPathOf = (options: KeyringOptions) => join(options.root, 'trust.json');

/** The name a note verifier key is for (`<name>+<hash>+<key>`: a log origin holds no "+"). */
const verifierKeyName = (vkey: string): string => vkey.slice(0, vkey.indexOf('+'));

/**
 * The one name this root's trust.json lists the host's current checkpoint keys under (neither ended nor revoked), if
 * there is one: the origin of the log the root served. Only read, nothing written (a diagnosing open of a log whose
 * origin record is damaged goes on under it, and the keyring then lists no key anew).
 */
export async function listedCheckpointOrigin(root: string, host: string): Promise<string | undefined> {
  const read = await readTrustFile(join(root, 'trust.json'));
  const names = new Set(
    (read?.trust.checkpointKeys ?? [])
      .filter((k) => k.host === host && k.notAfter === undefined && k.revokedAt === undefined)
      .map((k) => verifierKeyName(k.vkey)),
  );
  return names.size === 1 ? [...names][0] : undefined;
}

/** The host's own key file in a root (the default key file of an open without `signer` or `keyFile`). */
export const hostKeyPath = (root: string, host: string): string =>
  join(root, 'keys', `${digestOf(new TextEncoder().encode(host)).slice(7)}.jwk`);

/**
 * Where a new key file waits beside its target until trust.json lists its key (`rotate`): a crash before trust.json
 * is written leaves the old key files in use, one after it leaves the new keys listed and staged (`settleStaged`).
 */
const stagedPathOf = (path: string) => `${path}.next`;

/**
 * Moves the staged key file over `path`, durably.
 * @throws StoreError `STORAGE_FAILED`
 */
async function installStaged(path: string): Promise<void> {
  try {
    await rename(stagedPathOf(path), path);
    await nodeFsOps.fsyncDir(dirname(path));
  } catch (err) {
    throw keyFileIoFailure(
      err,
      `trust.json lists the new key staged at ${quoted(stagedPathOf(path))}, which could not be moved to ${quoted(path)}; the next load of the keys moves it`,
    );
  }
}

/**
 * A key file a rotation staged beside `path` and did not move into place (it stopped): moved in when trust.json lists
 * its key (the rotation was written), removed when it does not (it stopped before). Only under the trust lock: without
 * it, the staged file may be another process's rotation under way, which holds the lock until it has moved its files.
 */
async function settleStaged(
  path: string,
  held: boolean,
  listed: (key: Signer) => boolean,
  options: { writeNothing?: Error | undefined; leaveStaged?: boolean | undefined },
  left: string[],
): Promise<Signer | undefined> {
  const staged = await loadKeyFileIfPresent(stagedPathOf(path));
  if (!staged) return undefined;
  if (options.writeNothing) throw options.writeNothing;
  if (options.leaveStaged === true) {
    // Left in place: what settling would make of it, in memory only (the key trust.json lists, or the file at `path`).
    left.push(stagedPathOf(path));
    return listed(staged) ? staged : undefined;
  }
  if (!held) throw new NeedsTrustLock();
  if (listed(staged)) await installStaged(path);
  else
    await unlink(stagedPathOf(path)).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        throw keyFileIoFailure(err, `cannot remove ${quoted(stagedPathOf(path))}, staged by a rotation that stopped`);
    });
  return undefined;
}

/**
 * What an injected signer signs when the keyring takes it: no DSSE PAE ("DSSEv1 …") and no note text (which ends
 * with a newline and holds no NUL), so the signature can stand for nothing else.
 */
const SIGNER_TEST_MESSAGE = new TextEncoder().encode('handoff-ledger signer test\u0000');

/**
 * The caller's signer, its failures coded: whatever its `sign` throws or rejects with (a KMS unreachable, a quota, a
 * bug of its own) is `SIGNER_FAILED` with that error as the `cause`, so the caller tells it from a refusal of the
 * ledger's. What it answers is returned as it is: the envelope refuses what is no 64-byte signature (`KEY_INVALID`), the
 * ledger one that does not verify under the listed key. Its `keyId` and `publicKey` are read here, once: a getter that
 * throws is `KEY_INVALID`, its error the cause.
 * @throws LedgerError `KEY_INVALID`
 */
export function codedSigner(signer: Signer): Signer {
  // Read once, each on its own: a getter of the caller's that throws (a KMS client fetching its key lazily, a bug) is
  // KEY_INVALID with its error as the cause, as a signature that does not verify is, not a TypeError of its own.
  const keyId = signerField(signer, 'keyId');
  const publicKey = signerField(signer, 'publicKey', keyId);
  return {
    keyId,
    publicKey,
    async sign(message: Uint8Array): Promise<Uint8Array> {
      try {
        return await signer.sign(message);
      } catch (err) {
        throw new LedgerError(
          'SIGNER_FAILED',
          `the injected signer of key ${keyIdText(keyId)} failed (${errorText(err, SIGNER_ERROR_CHARS)}): nothing was signed with it; its error is the cause`,
          { cause: err },
        );
      }
    },
  };
}

/**
 * `signer[name]`, or LedgerError `KEY_INVALID` when reading it throws (the key named by `keyId` once that was read):
 * what it threw is named as errorText names an error and is the cause. openLedger read the field once and refused a
 * throw as INVALID_ARGUMENT; the keyring reads the caller's object again, at open and at each reload of the keys.
 */
function signerField<K extends 'keyId' | 'publicKey'>(signer: Signer, name: K, keyId?: unknown): Signer[K] {
  try {
    return signer[name];
  } catch (err) {
    const key = name === 'keyId' ? '' : ` of key ${keyIdText(keyId)}`;
    throw new LedgerError(
      'KEY_INVALID',
      `reading the injected signer's ${name}${key} failed (${errorText(err, SIGNER_ERROR_CHARS)}): the keys are not loaded with it; its error is the cause`,
      { cause: err },
    );
  }
}

/**
 * An injected signer's key id as its refusals name it: JSON-quoted and escaped (shownValue). openLedger checked it is
 * a string, but the signer is the caller's object, read again here: a getter may answer something else by now (a
 * Symbol, a BigInt, an object whose toString throws), which must not turn the coded refusal into a TypeError.
 */
const keyIdText = (keyId: unknown): string => shownValue(keyId, 200);

/**
 * How much of each part of what an injected signer threw `SIGNER_FAILED`'s message quotes (errorText: its message and
 * those of its causes, a KMS client's "request failed" with the network's reason, up to four deep): the error itself
 * is the cause.
 */
const SIGNER_ERROR_CHARS = 200;

/**
 * An injected signer whose signatures do not verify under its `publicKey` (a KMS key version that moved on, a
 * wrong key handed in) would sign manifests nobody can ever verify: refused before it signs any.
 * @throws LedgerError `KEY_INVALID` (also a `keyId` or `publicKey` that throws as it is read); `SIGNER_FAILED` when
 *   the signer's `sign` throws
 */
async function assertSignerVerifies(signer: Signer): Promise<void> {
  const coded = codedSigner(signer);
  const signature = await coded.sign(SIGNER_TEST_MESSAGE);
  // The key read once with the signer (codedSigner), not the caller's getter again.
  const publicKey = coded.publicKey as unknown;
  if (
    !isUint8Array(signature) ||
    !isUint8Array(publicKey) ||
    !nodeVerifier.verify(signature, SIGNER_TEST_MESSAGE, publicKey)
  )
    throw new LedgerError(
      'KEY_INVALID',
      `the signer's signatures do not verify under its publicKey (key ${keyIdText(coded.keyId)}): what it signed would never verify`,
    );
}

/**
 * A key of this host that trust.json holds current (no window end, not revoked) and the log closed (a rotation or
 * revocation ended it there), with where: beside a key file trust.json does not list, a trust.json from before that
 * rotation, whose new key may not have signed yet. A record that cannot be read is fsck's to name: it decides nothing.
 */
async function closedCurrentKey(
  trust: TrustStore,
  options: KeyringOptions,
): Promise<{ keyId: string; closedAt: string } | undefined> {
  if (!options.closedInLog) return undefined;
  for (const k of trust.keys) {
    if (k.host !== options.host || k.notAfter !== undefined || k.revokedAt !== undefined) continue;
    const closedAt = await options.closedInLog(k.keyId).catch(() => undefined);
    if (closedAt !== undefined) return { keyId: k.keyId, closedAt };
  }
  return undefined;
}

/**
 * What an operator reads when the host's key file holds a key trust.json does not list, for an open that lists none
 * (`createHostKey: false`): which case it is, as far as the store can tell, and what to do. A key that signed here is
 * this store's (trust.json is older than it); beside another current key of the host it is most likely a key file
 * copied from another store or host, which listing would make this store trust; with no key of the host listed, a first
 * open that stopped before listing it. The file and key are named JSON-quoted (the CLI escapes the whole line).
 */
function unlistedKeyAdvice(
  trust: TrustStore,
  options: KeyringOptions,
  trustPath: string,
  keyPath: string,
  keyId: string,
  signedHere: boolean | undefined,
  closed: { keyId: string; closedAt: string } | undefined,
): string {
  const host = options.host;
  const file = quoted(keyPath);
  const head = `${quoted(trustPath)} does not list key ${quoted(keyId)} of host ${quoted(host)}, read from ${file}`;
  if (signedHere === true)
    return `${head}, which signed manifests of this store: a trust.json from before its last rotation; restore the current one (a backup or \`keys export\` taken after the last rotation); this command lists no key`;
  if (closed !== undefined)
    return `${head}, and lists key ${quoted(closed.keyId)} of host ${quoted(host)} as current, which the log closed at ${closed.closedAt} (rotated or revoked): a trust.json from before its last rotation; restore the current one (a backup or \`keys export\` taken after the last rotation); this command lists no key`;
  const current = trust.keys.filter((k) => k.host === host && k.notAfter === undefined && k.revokedAt === undefined);
  if (current.length > 0) {
    const listed = current.map((k) => quoted(k.keyId)).join(', ');
    return `${head}, and lists ${listed} as this host's current key: a key file copied from another store or host over this host's own? Then put this host's own key file back at ${file} (from a backup); if it is lost, move ${file} aside and run \`init --host ${host}\`, which makes this host a new key, then revoke the lost one (\`keys revoke ${shellWord(current[0]!.keyId)}\`). Do not list the copy (\`init\` or \`publish\` with it in place would): this store would trust what it signs elsewhere. Or a trust.json from before its last rotation: restore the current one. This command lists no key`;
  }
  return `${head}: a key whose first open stopped before listing it (\`init --host ${host}\` lists it), or a trust.json from before its last rotation (restore the current one); a key file copied from another store or host is not to be listed: move ${file} aside, and \`init --host ${host}\` makes this host a key of its own. This command lists no key`;
}

/**
 * trust.json and its stamp, or undefined when there is none. It decides which signatures count: a planted link or a
 * file others can write is refused.
 */
async function readTrustFile(trustPath: string): Promise<{ trust: TrustStore; stamp: string } | undefined> {
  try {
    let stamp = 'missing';
    // Opened once (O_NOFOLLOW, O_NONBLOCK), judged and read through that descriptor: what is read is what was judged.
    const bytes = await readBoundedFile(trustPath, MAX_TRUST_FILE_BYTES, {
      noFollow: true,
      notAFile: () =>
        new LedgerError('KEY_FILE_UNSAFE', `${quoted(trustPath)} is not a regular file (symlink planted?)`),
      check: (st) => {
        stamp = stampOf(st); // the file read, before the read: a change after it shows as a change, never the other way
        const foreign = ownerProblem(quoted(trustPath), st.uid);
        if (foreign) throw new LedgerError('KEY_FILE_UNSAFE', `${foreign}: another user could rewrite it`);
        if ((st.mode & 0o022) !== 0)
          throw new LedgerError(
            'KEY_FILE_UNSAFE',
            `${quoted(trustPath)} is writable by group or others; run chmod 600 on it`,
          );
      },
      tooLarge: (size) =>
        new ManifestError(
          'TRUST_INVALID',
          size === undefined
            ? `${quoted(trustPath)} grew over ${MAX_TRUST_FILE_BYTES} bytes while read: not read`
            : `${quoted(trustPath)} is ${size} bytes, over ${MAX_TRUST_FILE_BYTES}: not read`,
        ),
    });
    return { trust: parseTrustStore(bytes.toString('utf8')), stamp };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      throw keyFileIoFailure(err, `cannot read ${quoted(trustPath)}`);
    return undefined;
  }
}

/**
 * For an open given a `keyFile` (and no signer), before it writes anything: the file is loaded as the keyring will load
 * it, so a path with no key file is `KEY_INVALID` ("no such key file") and an unusable one is refused with the code the
 * keyring gives it, with no store directory made. A key file a rotation staged beside it (`<keyFile>.next`) is left to
 * the keyring, which moves it into place (or removes it) under the trust lock (`settleStaged`): the key file may be
 * missing then, and the open must go on. Reads only.
 * @throws LedgerError `KEY_INVALID`, `KEY_FILE_UNSAFE`; StoreError `STORAGE_FAILED`
 */
export async function refuseMissingKeyFile(path: string): Promise<void> {
  if (await loadKeyFileIfPresent(stagedPathOf(path))) return;
  if (!(await loadKeyFileIfPresent(path))) throw new LedgerError('KEY_INVALID', `no such key file ${quoted(path)}`);
}

/**
 * For an open that must not make `host` a key of its own (`createHostKey: false`: the CLI's commands other than `init`
 * and `publish`): returns when the host's key file is there (or one a rotation staged and trust.json lists), else LedgerError `KEY_INVALID`
 * saying which hosts have keys in this root, or that the host's listed key file is missing, or that there is no store.
 * Reads only: an open refused here has written nothing.
 * @throws LedgerError `KEY_INVALID`, `KEY_FILE_UNSAFE` (trust.json); StoreError `STORAGE_FAILED`
 */
export async function refuseNewHostKey(root: string, host: string): Promise<void> {
  const path = hostKeyPath(root, host);
  try {
    await lstat(path);
    return; // the keyring judges the file itself
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw keyFileIoFailure(err, `cannot read ${quoted(path)}`);
  }
  const read = await readTrustFile(join(root, 'trust.json'));
  // A key file a rotation staged and trust.json lists: the keyring moves it into place (one it does not list, it removes).
  const staged = await loadKeyFileIfPresent(stagedPathOf(path));
  if (staged && read?.trust.keys.some((k) => k.host === host && k.keyId === staged.keyId)) return;
  if (!read)
    throw new LedgerError(
      'KEY_INVALID',
      `no store at ${quoted(root)} (no trust.json); \`init\` makes one (in the library, an open without createHostKey: false)`,
    );
  const shown = quoted(host);
  if (read.trust.keys.some((k) => k.host === host))
    throw new LedgerError(
      'KEY_INVALID',
      `host ${shown} is listed in trust.json but this root holds no key file of it (${quoted(path)}): lost, or held in a key file or signer of its own, which this open was not given (the CLI gives none; the library: keyFile, signer); this command makes no key. Restore it from the newest backup of this root's keys (keys/ with trust.json, README "Backups"); if it is lost: \`publish\` or \`init\` with this host (an open without createHostKey: false) makes a new one, and \`keys revoke <keyId>\` ends the lost one (README "Key rotation runbook")`,
    );
  const hosts = [...new Set(read.trust.keys.map((k) => k.host))].sort();
  throw new LedgerError(
    'KEY_INVALID',
    `host ${shown} has no signing key in ${quoted(root)} and this command makes none; hosts with keys here: ${hosts.map((h) => quoted(h)).join(', ') || 'none'} (choose one with --host, the library's host option), or \`init --host ${host}\` (an open without createHostKey: false) adds this host`,
  );
}

/** What tells one version of trust.json from the next (it is replaced by rename, so the inode changes too). */
const stampOf = (st: { ino: number; size: number; mtimeMs: number; ctimeMs: number } | undefined): string =>
  st ? `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}` : 'missing';

export class Keyring {
  /** trust.json as it was when this keyring read it (see `changedOnDisk`). */
  private stamp = 'missing';
  /** Counts the changes of the trust this keyring holds: whoever derives from it (verifier lists) redoes it then. */
  generation = 0;
  /** Whether this open wrote the host key file (none was there), for the notice of `ensureTrusted`. */
  private madeHostKey = false;

  private constructor(
    private readonly options: KeyringOptions,
    private readonly trustPath: string,
    private readonly keyPath: string | undefined,
    private current: Signer,
    private trust: TrustStore,
    private readonly checkpointPath: string,
    private checkpoint: Signer,
    /**
     * Whether this process holds the trust lock now (an open that had to write first, `exclusive`): every write of
     * trust.json or a key file needs it. Writes happen only in calls `exclusive` runs (rotate, revoke), never in a
     * read's reload: a read does not take this flag as its own (see `reload`).
     */
    private held: boolean,
  ) {}

  /**
   * Loads the keys and trust file; what must be written first (a new store's keys, a key not listed yet) is
   * written under the trust lock (`trust.json.lock`, ../ledger/file-lock.ts), after reading everything again under it.
   * @throws LedgerError `KEY_FILE_UNSAFE`, `KEY_INVALID` (also an injected signer whose signatures do not verify
   *   under its `publicKey`, a `keyFile` that does not exist), `LOCKED` (another process holds the trust lock too
   *   long); StoreError `STORAGE_FAILED` (a key file or trust.json that cannot be read or written); `CANCELLED` when
   *   `signal` aborts while an injected signer's test signature or the trust lock is awaited (nothing is written)
   */
  static async open(options: KeyringOptions, signal?: AbortSignal): Promise<Keyring> {
    // At open and at each reload (which opens again): a KMS key can change under a running process. The open's signal
    // ends the wait for a signer that never answers; its signature, should it come later, is not looked at.
    if (options.signer) await untilCancelled(assertSignerVerifies(options.signer), signal);
    try {
      return await Keyring.load(options, false);
    } catch (err) {
      if (!(err instanceof NeedsTrustLock)) throw err;
    }
    const ring = await withFileLock(
      trustPathOf(options),
      'trust.json',
      () => Keyring.load(options, true),
      // The open's signal ends the wait for another holder (a rotation elsewhere), never a load under the lock.
      { ...options.trustLock, signal },
    );
    // The lock is released here: this keyring holds it no longer (a later reload must not write as if it did).
    ring.held = false;
    return ring;
  }

  private static async load(options: KeyringOptions, held: boolean): Promise<Keyring> {
    const stagedLeft: string[] = [];
    const keysDir = join(options.root, 'keys');
    // A diagnosing open judges keys/ when it is there and makes none: key files under one that is missing are missing.
    const keysDirMissing =
      options.makeNoKeys === true
        ? (await privateDirIfPresent(keysDir, 'UNSAFE_PATH')) === undefined
        : (await ensurePrivateDir(keysDir, 'UNSAFE_PATH'), false);
    const trustPath = trustPathOf(options);
    const read = await readTrustFile(trustPath);
    let trustMissing = read === undefined;
    const trust = read?.trust ?? { version: 1, keys: [] };
    const stamp = read?.stamp ?? 'missing';
    // An injected signer signs through `codedSigner`: its own failures are `SIGNER_FAILED`.
    let signer = options.signer ? codedSigner(options.signer) : undefined;
    let keyPath: string | undefined;
    let madeHostKey = false;
    if (!signer) {
      keyPath = options.keyFile ?? hostKeyPath(options.root, options.host);
      const staged = await settleStaged(
        keyPath,
        held,
        (key) =>
          trust.keys.some(
            (k) => k.host === options.host && k.keyId === key.keyId && k.publicKey === encodeBase64Url(key.publicKey),
          ),
        options,
        stagedLeft,
      );
      signer = staged ?? (await loadKeyFileIfPresent(keyPath));
      if (!signer) {
        // A key file of the caller's is never made up: a wrong path would sign with a key nobody provisioned.
        if (options.keyFile) throw new LedgerError('KEY_INVALID', `no such key file ${quoted(keyPath)}`);
        // Checked before the open wrote anything (src/ledger/open.ts); here again, for a key file removed since.
        if (options.createHostKey === false) await refuseNewHostKey(options.root, options.host);
        if (options.writeNothing) throw options.writeNothing;
        if (options.makeNoKeys === true) throw diagnosisMakesNoKey('host', keyPath, keysDir, keysDirMissing);
        if (!held) throw new NeedsTrustLock();
        await writeKeyFile(keyPath, generateJwk());
        signer = await loadKeyFile(keyPath);
        madeHostKey = true;
        trustMissing = false;
      }
      // Re-listing the host key from "now" would expire everything it signed before: never rebuild trust.json silently.
      // A store in which nothing was ever signed loses nothing by it: that is a new store whose first open stopped
      // (a crash) between writing its key and its trust.json, and the key is listed from now as on a first open.
      if (trustMissing && !options.keyFile && (await options.storeSignedNothing?.()) !== true)
        throw new LedgerError(
          'KEY_INVALID',
          `${quoted(trustPath)} is missing but the host key exists; restore trust.json (from a backup, or a trust file an earlier \`keys export\` wrote)`,
        );
    }
    // An injected signer or a key file of the caller's: the same, once the log shows the key signed before.
    if (trustMissing && (await options.signedBefore?.(signer.keyId))) {
      // Judged under the trust lock (as every verdict on a missing or stale trust.json): read again there.
      if (!held) throw new NeedsTrustLock();
      throw new LedgerError(
        'KEY_INVALID',
        `${quoted(trustPath)} is missing but key ${quoted(signer.keyId)} signed manifests of this store; restore trust.json (from a backup, or a trust file an earlier \`keys export\` wrote)`,
      );
    }
    // An open that may not make this host a key (createHostKey: false) lists none either, and writes nothing before it
    // refuses: judged here, before a checkpoint key is made. Under the trust lock (a rotation in flight lists its key).
    if (
      options.createHostKey === false &&
      !options.signer &&
      options.keyFile === undefined &&
      !trust.keys.some((k) => k.host === options.host && k.keyId === signer.keyId)
    ) {
      if (!held) throw new NeedsTrustLock();
      if (trustMissing)
        // Only a store in which nothing was signed gets here (one that signed is refused above: restore trust.json).
        throw new LedgerError(
          'KEY_INVALID',
          `${quoted(trustPath)} is missing and nothing was signed in this store yet; this command lists no key: \`init --host ${options.host}\` lists it`,
        );
      throw new LedgerError(
        'KEY_INVALID',
        unlistedKeyAdvice(
          trust,
          options,
          trustPath,
          keyPath!,
          signer.keyId,
          await options.signedBefore?.(signer.keyId).catch(() => undefined),
          await closedCurrentKey(trust, options),
        ),
      );
    }
    // The checkpoint key is a key of its own: one key never signs two message formats.
    const checkpointPath = join(keysDir, `checkpoint-${digestOf(new TextEncoder().encode(options.host)).slice(7)}.jwk`);
    const stagedCheckpoint = await settleStaged(
      checkpointPath,
      held,
      (key) =>
        (trust.checkpointKeys ?? []).some(
          (k) => k.host === options.host && k.vkey === encodeVerifierKey(options.origin, key.publicKey),
        ),
      options,
      stagedLeft,
    );
    let checkpoint: Signer | undefined = stagedCheckpoint ?? (await loadKeyFileIfPresent(checkpointPath));
    if (!checkpoint) {
      if (options.writeNothing) throw options.writeNothing;
      if (options.makeNoKeys === true) {
        // No checkpoint key listed for this host either: a store written before checkpoint keys (format version 1
        // without checkpoints/), which its first ordinary open upgrades; no backup holds a key it never had.
        if (!keysDirMissing && !trustMissing && !(trust.checkpointKeys ?? []).some((k) => k.host === options.host))
          throw new LedgerError(
            'KEY_INVALID',
            `${quoted(checkpointPath)} is missing and ${quoted(trustPath)} lists no checkpoint key of this host: a store written before checkpoint keys, which its first ordinary open upgrades (makes the checkpoint key, lists it and builds the log's tree); a diagnosing open (fsck) writes no key. Open it once (\`init\` with this root and host, or any command but fsck), then run fsck`,
          );
        throw diagnosisMakesNoKey('checkpoint', checkpointPath, keysDir, keysDirMissing);
      }
      if (!held) throw new NeedsTrustLock();
      await writeKeyFile(checkpointPath, generateJwk());
      checkpoint = await loadKeyFile(checkpointPath);
    }
    const ring = new Keyring(options, trustPath, keyPath, signer, trust, checkpointPath, checkpoint, held);
    ring.stamp = stamp;
    ring.madeHostKey = madeHostKey;
    ring.stagedLeft = stagedLeft;
    await ring.ensureTrusted(signer);
    await ring.ensureCheckpointTrusted();
    return ring;
  }

  /** With `leaveStaged`: the staged key files the last load left in place (a rotation that stopped). */
  stagedLeft: string[] = [];

  get signer(): Signer {
    return this.current;
  }

  /**
   * Whether the signer is the caller's (`signer` option: a KMS or HSM), whose key can move on while this process runs.
   * A key file's signer holds its private key, and its public key is derived from it: its signatures cannot drift.
   */
  get signerInjected(): boolean {
    return this.options.signer !== undefined && this.options.signer !== null;
  }

  /**
   * Signs checkpoints of the log, under the log's origin. A key trust.json lists as revoked (another process revoked
   * it since this one loaded its keys) signs nothing: ManifestError `KEY_REVOKED`, until the keys are loaded again.
   */
  get checkpointSigner(): NoteSigner & { keyId: string } {
    const key = this.checkpoint;
    const sign = (message: Uint8Array) => {
      const listed = (this.trust.checkpointKeys ?? []).find(
        (k) => k.host === this.options.host && k.keyId === key.keyId && k.revokedAt !== undefined,
      );
      if (listed)
        throw new ManifestError(
          'KEY_REVOKED',
          `the checkpoint key ${quoted(key.keyId)} is revoked (at ${listed.revokedAt}) and signs no checkpoint; rotate the keys (keys rotate)`,
        );
      return key.sign(message);
    };
    return { name: this.options.origin, keyId: key.keyId, publicKey: key.publicKey, sign };
  }

  /** The note verifier key string of the current checkpoint key. */
  get checkpointVerifierKey(): string {
    return encodeVerifierKey(this.options.origin, this.checkpoint.publicKey);
  }

  /**
   * Lists the checkpoint key if it is not listed yet, and replaces a revoked one. Revoked, it could sign no checkpoint,
   * and the store could neither open (opening pins the log's tree, signed again when another key signed the pin) nor
   * rotate: another host of the root revoked this host's key (its checkpoint keys go with it), or a rotation after a
   * revocation stopped before its new key files were in place. The host key stays as it is (publish refuses a revoked
   * one until `keys rotate`); the new checkpoint key is listed from now (checkpoints carry no time) and written in the
   * order a rotation writes, and the revoked one gets `notAfter` = now.
   */
  private async ensureCheckpointTrusted(): Promise<void> {
    const vkey = this.checkpointVerifierKey;
    const checkpointKeys = this.trust.checkpointKeys ?? [];
    const listed = checkpointKeys.find((k) => k.host === this.options.host && k.vkey === vkey);
    // A key another host's listing revokes (its file copied here: a keys/ directory restored from the wrong host) is
    // replaced as this host's own revoked one is: listed anew for this host, unrevoked, every checkpoint it signs would
    // verify again (a revocation of one host's listing does not reach another's: `revokedCheckpointListings`). So is
    // one this host listed before that revocation (the copy made earlier), and this host's listing is revoked from the
    // same time: left current, it alone kept the revoked key a verifier of every checkpoint it signs.
    const revokedElsewhereAt = checkpointKeys
      .filter((k) => k.vkey === vkey || k.keyId === this.checkpoint.keyId)
      .reduce<string | undefined>((t, k) => earlierTime(t, k.revokedAt), undefined);
    const revokedForAnother = revokedElsewhereAt !== undefined;
    if (listed && listed.revokedAt === undefined && !revokedForAnother) return;
    if (this.options.writeNothing) throw this.options.writeNothing;
    if (this.options.makeNoKeys === true)
      throw diagnosisListsNoKey(
        `this host's checkpoint key ${quoted(this.checkpoint.keyId)} (${quoted(this.checkpointPath)})`,
        this.trustPath,
        listed
          ? listed.revokedAt !== undefined
            ? 'is listed revoked'
            : 'is listed revoked for another host'
          : 'is not listed for this log',
      );
    // The key file's key listed under another origin (this root served another log before: a new database, or the
    // log removed and the pin moved aside): one key id cannot be listed twice, so a key of its own is made for this
    // log, as for a revoked one, and the other log's entry ends now.
    const elsewhere = listed
      ? undefined
      : checkpointKeys.find((k) => k.host === this.options.host && k.keyId === this.checkpoint.keyId);
    const at = this.now();
    if (!listed && !elsewhere && !revokedForAnother) {
      const entry: TrustedCheckpointKey = {
        host: this.options.host,
        keyId: this.checkpoint.keyId,
        vkey,
        notBefore: at,
      };
      // A checkpoint key is only ever held in its file under keys/ (no keyFile, no injected signer): another current
      // one of this host means that file was lost and this key made anew. Its window ends now (checkpoints carry no
      // time, so what it signed before still verifies), and the operator is told what a copy of it could still do.
      const lost = checkpointKeys.filter(
        (k) =>
          k.host === this.options.host &&
          k.keyId !== this.checkpoint.keyId &&
          k.notAfter === undefined &&
          k.revokedAt === undefined &&
          verifierKeyName(k.vkey) === this.options.origin,
      );
      const kept = checkpointKeys.map((k) => (lost.includes(k) ? { ...k, notAfter: at } : k));
      await this.save({ ...this.trust, checkpointKeys: [...kept, entry] });
      for (const k of lost)
        this.options.notice?.(
          `the checkpoint key file of host ${quoted(this.options.host)} was missing (${quoted(this.checkpointPath)}): a new checkpoint key ${quoted(entry.keyId)} is listed, and the lost one, ${quoted(k.keyId)}, ended now; a copy of the lost file could still sign checkpoints of this log that verify: if one may exist, revoke it (\`keys revoke ${shellWord(k.keyId)}\`), then export again: a bundle exported before carries a checkpoint it signed, which then verifies no more`,
        );
      return;
    }
    if (!this.held) throw new NeedsTrustLock();
    const jwk = generateJwk();
    await writeKeyFile(stagedPathOf(this.checkpointPath), jwk);
    const entry: TrustedCheckpointKey = {
      host: this.options.host,
      keyId: jwk.kid!,
      vkey: encodeVerifierKey(this.options.origin, decodeBase64Url(jwk.x)!),
      notBefore: at,
    };
    const replaced = listed ?? elsewhere;
    const ended = checkpointKeys.map((k) => {
      if (k !== replaced) return k;
      const end = k.notAfter === undefined ? { ...k, notAfter: at } : k;
      return revokedElsewhereAt === undefined ? end : revokedFrom(end, revokedElsewhereAt);
    });
    await this.save({ ...this.trust, checkpointKeys: [...ended, entry] });
    await installStaged(this.checkpointPath);
    this.checkpoint = await loadKeyFile(this.checkpointPath);
  }

  /** This store's trust file contents (what `keys export` hands to auditors). */
  trustStore(): TrustStore {
    return structuredClone(this.trust);
  }

  private now(): string {
    return this.options.clock().toISOString();
  }

  /**
   * Lists the signer's key for this host if it is not listed yet. A listed key that can no longer sign is
   * kept as it is: publish refuses to sign with it (KEY_REVOKED / KEY_EXPIRED), everything else works.
   * @throws LedgerError `KEY_INVALID` when the key is not listed but signed in this store before
   */
  private async ensureTrusted(signer: Signer): Promise<void> {
    const listed = this.trust.keys.find((k) => k.host === this.options.host && k.keyId === signer.keyId);
    if (!listed) {
      if (this.options.writeNothing) throw this.options.writeNothing;
      if (this.options.makeNoKeys === true)
        throw diagnosisListsNoKey(`this host's key ${quoted(signer.keyId)}`, this.trustPath, 'is not listed');
      // Listed from now, a key that signed before would expire all it signed: a trust.json from before the last
      // rotation (a backup restored) lacks the current key. It is never listed anew silently. (A key listed for
      // another host id signed under that one, whose listing still verifies it.)
      // Judged only on files read under the trust lock (listing needs it too): read without it, trust.json may be
      // older than the key file another process of this root just rotated in.
      if (!this.held) throw new NeedsTrustLock();
      const elsewhere = this.trust.keys.some((k) => k.keyId === signer.keyId);
      if (!elsewhere && (await this.options.signedBefore?.(signer.keyId)))
        throw new LedgerError(
          'KEY_INVALID',
          `${quoted(this.trustPath)} does not list key ${quoted(signer.keyId)} of host ${quoted(this.options.host)}, which signed manifests of this store: a trust.json from before its last rotation; restore the current one (a backup or \`keys export\` taken after the last rotation); nothing was listed`,
        );
      // The rotation's new key may not have signed yet (a backup taken, and restored, right after it): the log then
      // knows nothing of it, but it closed the key trust.json still holds current. Listed from now beside that one, the
      // new key would leave the closed key's window open in trust.json (and in every `keys export` of it) — the
      // window the rotation meant to end. Judged for this host's own key file only, read as it was (not made anew): a
      // rotation puts its new key there only once trust.json lists it, so there this pair is a trust.json older than
      // the key file.
      const ownKeyFile = this.keyPath !== undefined && this.options.keyFile === undefined && !this.madeHostKey;
      const closed = !elsewhere && ownKeyFile ? await closedCurrentKey(this.trust, this.options) : undefined;
      if (closed !== undefined)
        throw new LedgerError(
          'KEY_INVALID',
          `${quoted(this.trustPath)} does not list key ${quoted(signer.keyId)} of host ${quoted(this.options.host)}, and lists key ${quoted(closed.keyId)} of host ${quoted(this.options.host)} as current, which the log closed at ${closed.closedAt} (rotated or revoked): a trust.json from before its last rotation; restore the current one (a backup or \`keys export\` taken after the last rotation); nothing was listed`,
        );
      // Keys of this host trust.json holds current: a key file lost (and this key made anew), or a key held where this
      // open was not given it (a `keyFile`, an injected signer). Which one, only the operator knows: both stay listed,
      // and the notice says how to end the other one.
      const current = this.trust.keys.filter(
        (k) => k.host === this.options.host && k.notAfter === undefined && k.revokedAt === undefined,
      );
      // A key revoked in another listing (another host id it signed under, or another key id: an injected signer names
      // its key as it likes, and a manifest names the key id it was signed under) is listed revoked from the same time:
      // a revocation ends every listing of the key, and one made after it must not take the key back as current (the
      // root's trust.json, and each `keys export` of it, would trust what the revoked key signs for this host, under the
      // new key id). It then signs nothing here (KEY_REVOKED: rotate), as any revoked host key.
      const sameKey = sameKeyListings(this.trust, signer);
      const revokedAt = sameKey.reduce<string | undefined>((t, k) => earlierTime(t, k.revokedAt), undefined);
      // Unrevoked, the key is never listed under a second key id: a revocation or rotation ends the listings of one key
      // id (the log keeps one window per key id), and the listing under the other would go on trusting what the key
      // signs (after a revocation: what a thief signs, naming that id). Nor is a checkpoint key listed to sign
      // manifests: one key never signs two message formats.
      const alias = revokedAt === undefined ? sameKey.find((k) => k.keyId !== signer.keyId || 'vkey' in k) : undefined;
      if (alias !== undefined)
        throw new LedgerError(
          'KEY_INVALID',
          'vkey' in alias
            ? `the signer's public key (key ${quoted(signer.keyId)}) is checkpoint key ${quoted(alias.keyId)} of host ${quoted(alias.host)} in ${quoted(this.trustPath)}: a checkpoint key signs no manifest; give this host a key of its own; nothing was listed`
            : `${quoted(this.trustPath)} lists the signer's public key as key ${quoted(alias.keyId)} of host ${quoted(alias.host)}, and this open signs with it as key ${quoted(signer.keyId)}: one key is listed under one key id (a revocation or rotation of the one would leave the other trusting what the key signs); give the signer the key id ${quoted(alias.keyId)}; nothing was listed`,
        );
      await this.save({
        ...this.trust,
        keys: [
          ...this.trust.keys,
          {
            host: this.options.host,
            keyId: signer.keyId,
            publicKey: encodeBase64Url(signer.publicKey),
            notBefore: this.now(),
            ...(revokedAt !== undefined ? { revokedAt } : {}),
          },
        ],
      });
      if (revokedAt !== undefined)
        this.options.notice?.(
          `this open signs with key ${quoted(signer.keyId)}, which trust.json lists revoked (from ${revokedAt}) for another host or under another key id: it is listed for host ${quoted(this.options.host)} revoked from then too, and signs nothing; rotate the host key (\`keys rotate\`)`,
        );
      for (const k of current)
        this.options.notice?.(
          `trust.json lists key ${quoted(k.keyId)} of host ${quoted(this.options.host)} as current, and this open signs with another key, ${quoted(signer.keyId)}, now listed beside it${this.keyPath === undefined || this.options.keyFile !== undefined ? '' : this.madeHostKey ? ` (made anew: no key file at ${quoted(this.keyPath)})` : ` (read from ${quoted(this.keyPath)}, a key file trust.json did not list: one copied from another store or host? then put this host's own file back and revoke ${quoted(signer.keyId)})`}: if ${quoted(k.keyId)} is lost, revoke it (\`keys revoke ${shellWord(k.keyId)}\`); if it is held in a key file or signer of its own, open with that`,
        );
      return;
    }
    if (listed.publicKey !== encodeBase64Url(signer.publicKey)) {
      throw new LedgerError('KEY_INVALID', `trust.json lists key ${quoted(signer.keyId)} with another public key`);
    }
  }

  /**
   * What to do about a host key that can no longer sign, for publish's refusal: when the key came from this host's
   * key file and trust.json lists a newer current key of this host, that file was most likely restored from a backup
   * taken before the rotation (rotating again would leave the newer key listed current with no file): say to restore
   * the current file. Otherwise: rotate.
   */
  signingAdvice(): string {
    const signer = this.current;
    const own = this.trust.keys.find((k) => k.host === this.options.host && k.keyId === signer.keyId);
    const ended = own?.notAfter ?? own?.revokedAt;
    const newer = this.trust.keys.find(
      (k) =>
        k.host === this.options.host &&
        k.keyId !== signer.keyId &&
        k.notAfter === undefined &&
        k.revokedAt === undefined &&
        ended !== undefined &&
        k.notBefore >= ended,
    );
    if (this.keyPath === undefined || this.options.keyFile !== undefined || newer === undefined)
      return 'rotate the host key';
    return (
      `the key file ${quoted(this.keyPath)} holds it, and trust.json lists ${quoted(newer.keyId)} ` +
      `(from ${newer.notBefore}) as this host's current key: a key file restored from before that rotation? Restore ` +
      'the current one (a backup taken after the rotation); rotate only if it is lost, then revoke it'
    );
  }

  /**
   * Where trust.json ends key `keyId`'s window for `host` (default this keyring's host): its listing's `notAfter`, or
   * `revokedAt` when earlier; undefined while current, or when trust.json does not list the key for that host. A key
   * may be listed for several hosts, each listing with its own window (a manifest's key is looked up for the
   * manifest's host): another host's listing never stands for this one's.
   */
  windowEnd(keyId: string, host: string = this.options.host): string | undefined {
    const key = this.trust.keys.find((k) => k.host === host && k.keyId === keyId);
    return key === undefined ? undefined : windowEndOf(key);
  }

  /**
   * Every listing of key `keyId` in trust.json (one per host it is listed for), with where each ends its window
   * (`windowEnd`; undefined while current): the log keeps one window per key id, which a revocation or `keys close`
   * holds against all of them.
   */
  windowEnds(keyId: string): Array<{ host: string; end: string | undefined }> {
    return this.trust.keys.filter((k) => k.keyId === keyId).map((k) => ({ host: k.host, end: windowEndOf(k) }));
  }

  /** When the current key's window opens: nothing it signs may be dated earlier (its manifests would not verify). */
  signsFrom(): string | undefined {
    return this.trust.keys.find((k) => k.host === this.options.host && k.keyId === this.current.keyId)?.notBefore;
  }

  private async save(trust: TrustStore): Promise<void> {
    if (this.options.writeNothing) throw this.options.writeNothing;
    // Read-modify-write of a file other processes write too: only under the trust lock (see `exclusive`).
    if (!this.held) throw new NeedsTrustLock('trust.json is written only under the trust lock');
    const text = JSON.stringify(trust, null, 2) + '\n';
    // Never a file the next open would refuse (TRUST_INVALID): a bug here must not lock every process out.
    parseTrustStore(text);
    try {
      await writeFileAtomic(this.trustPath, text, 0o600);
    } catch (err) {
      throw keyFileIoFailure(err, `cannot write ${quoted(this.trustPath)}`);
    }
    // The file as this process wrote it, under the trust lock (no other writer): not a change the next read reloads for.
    // Taken before the trust is replaced, which happens with the stamp and the generation at once (no wait between): a
    // read's reload that ends during the lstat then still meets the old generation, keeps what it read, and is
    // overwritten here; one that ends later meets the new generation and drops what it read.
    const written = await lstat(this.trustPath).catch(() => undefined);
    this.trust = trust;
    this.stamp = stampOf(written);
    this.generation++;
  }

  /**
   * Re-reads trust.json and the key files: another process sharing this root may have rotated or revoked. Outside the
   * trust lock, what it read is dropped when the keys this keyring holds changed meanwhile (this process rotated,
   * revoked or loaded them again under the lock): then it holds newer keys than the files showed when read, and putting
   * the older ones back would take back a revocation this process made (an embedded store reads trust.json no more).
   * `unlessChanged` says so explicitly (a read's reload); every reload here behaves so. `signal` ends the load's waits
   * (the trust lock another process holds, an injected signer's test signature): LedgerError `CANCELLED`.
   */
  async reload(options: { unlessChanged?: boolean; signal?: AbortSignal | undefined } = {}): Promise<void> {
    return this.reloadKeys(options, false);
  }

  /**
   * `reload`, `underLock` only from `exclusive`, which holds the trust lock for it. A read of this process that loads
   * the keys again while a rotation of this process holds the lock is not under it, however `held` reads then: it
   * waits for the lock (`Keyring.open`) rather than settle the rotation's staged key files under its feet.
   */
  private async reloadKeys(
    options: { unlessChanged?: boolean; signal?: AbortSignal | undefined },
    underLock: boolean,
  ): Promise<void> {
    const generation = this.generation;
    if (underLock && this.options.signer) await assertSignerVerifies(this.options.signer);
    // Outside the lock, `signal` ends the waits of the load (another holder of the trust lock, an injected signer's
    // test signature): CANCELLED, nothing taken.
    const fresh = underLock ? await Keyring.load(this.options, true) : await Keyring.open(this.options, options.signal);
    // Read outside the lock while this keyring changed (a rotation or revocation of this process, a load under the
    // lock): what it holds is newer than what was read.
    if (!underLock && this.generation !== generation) return;
    this.current = fresh.current;
    this.trust = fresh.trust;
    this.checkpoint = fresh.checkpoint;
    this.stamp = fresh.stamp;
    this.generation++;
  }

  /**
   * Has trust.json changed since this keyring read it (another process sharing the root rotated or revoked)?
   * One lstat; the caller reloads.
   */
  async changedOnDisk(): Promise<boolean> {
    return stampOf(await lstat(this.trustPath).catch(() => undefined)) !== this.stamp;
  }

  /**
   * Reads trust.json alone again, for a read that judges signatures when loading the key files again refused
   * (`KEY_INVALID`): the read still judges by the trust as it is now. A file gone meanwhile leaves the trust read
   * before.
   * @throws LedgerError `KEY_FILE_UNSAFE`, ManifestError `TRUST_INVALID`
   */
  async reloadTrust(): Promise<void> {
    const generation = this.generation;
    const read = await readTrustFile(this.trustPath);
    // A rotation or revocation of this process finished meanwhile: what it holds is newer than this read.
    if (!read || this.generation !== generation) return;
    this.trust = read.trust;
    this.stamp = read.stamp;
    this.generation++;
  }

  /**
   * Runs `fn` holding the trust lock, after re-reading the keys under it: a rotation or revocation made by
   * another process sharing this root has ended, and `fn` changes trust.json as it is now (`rotate`, `revoke`
   * only run in here).
   * @throws LedgerError `LOCKED` when another process holds the lock longer than the wait allows; `CANCELLED` when
   *   `signal` aborts while that wait lasts (an open's signal: nothing is run; not looked at once the lock is taken)
   */
  async exclusive<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return withFileLock(
      this.trustPath,
      'trust.json',
      async () => {
        this.held = true;
        try {
          await this.reloadKeys({}, true);
          return await fn();
        } finally {
          this.held = false;
        }
      },
      { ...this.options.trustLock, signal },
    );
  }

  /**
   * Checks that a rotation can write what it writes, before anything is changed (the ledger calls it before it
   * ends the old key's window in the log: a rotation refused after that would leave the key in place unable to sign).
   * @throws LedgerError `KEY_INVALID` for an injected signer (rotate it in the KMS); StoreError `STORAGE_FAILED`
   *   when a directory the new key files or trust.json go to cannot be written (a key file of the caller's in a
   *   directory provisioned read-only, a read-only filesystem)
   */
  assertRotatable(): void {
    if (!this.keyPath)
      throw new LedgerError('KEY_INVALID', 'cannot rotate an injected signer; rotate it where it lives');
    for (const dir of new Set([dirname(this.keyPath), dirname(this.checkpointPath), dirname(this.trustPath)])) {
      try {
        accessSync(dir, constants.W_OK); // one system call, synchronous: the ledger calls this without awaiting
      } catch (err) {
        throw keyFileIoFailure(
          err,
          `cannot rotate: the new key files are written in ${quoted(dir)}; nothing was changed`,
        );
      }
    }
  }

  /**
   * Where the current key's window may end: now, or just after the latest of `signedAt` (the newest createdAt
   * it signed) and its own `notBefore` when that is later (same millisecond, or a clock that stepped back).
   */
  windowEndAfter(signedAt: Array<string | undefined>): string {
    const floors = [...signedAt, this.signsFrom()].filter((t): t is string => t !== undefined);
    return new Date(Math.max(...floors.map((t) => Date.parse(t) + 1), Date.parse(this.now()))).toISOString();
  }

  /**
   * Rotates the host key: a new key file replaces the old one, the old key gets `notAfter` = `at` and the
   * new one `notBefore` = `at`, where `at` comes from `windowEndAfter`, or is where the log closed the window already
   * (a rotation that stopped after that step): the ledger closes the window in the log first, so that no process
   * appends a manifest of the old key dated at or after it.
   * Not available with an injected signer (rotate it in the KMS).
   * @throws StoreError `STORAGE_FAILED` when a key file or trust.json cannot be written (see `assertRotatable`)
   */
  async rotate(at: string): Promise<Signer> {
    this.assertRotatable();
    const old = this.current;
    const jwk = generateJwk();
    // The old key's window ends here, and so does that of a revoked key of this host still open (a lost host key
    // `keys revoke` ended beside the key in use, which stays listed from its notBefore on): this rotation takes the
    // checkpoint key that lay beside it (below), and a window left open would overlap every later checkpoint key,
    // each rotation then revoking the one it rotates out (every checkpoint signed since refused by the auditors).
    // Never before its revocation: what it signed until then keeps the window it had.
    const keys: TrustedKey[] = this.trust.keys.map((k) =>
      k.host !== this.options.host || k.notAfter !== undefined
        ? k
        : k.keyId === old.keyId
          ? { ...k, notAfter: at }
          : k.revokedAt !== undefined
            ? { ...k, notAfter: Date.parse(k.revokedAt) > Date.parse(at) ? k.revokedAt : at }
            : k,
    );
    keys.push({ host: this.options.host, keyId: jwk.kid!, publicKey: jwk.x, notBefore: at });
    // The checkpoint key rotates with the host key.
    const cjwk = generateJwk();
    // A revoked host key takes the checkpoint key it rotates out with it (see `revoke`), and so does any other revoked
    // key of this host whose window overlaps that checkpoint key's: `revoke` left the current checkpoint key to this
    // rotation (a lost host key revoked after `init` listed a new one beside it lay in keys/ beside this checkpoint key).
    const oldRevokedAt = this.trust.keys.find((k) => k.host === this.options.host && k.keyId === old.keyId)?.revokedAt;
    const checkpointKeys = (this.trust.checkpointKeys ?? []).map((k) => {
      if (k.host !== this.options.host || k.keyId !== this.checkpoint.keyId) return k;
      const ended = k.notAfter === undefined ? { ...k, notAfter: at } : k;
      const revokedAt = this.trust.keys
        .filter((h) => h.host === this.options.host && h.revokedAt !== undefined && overlaps(h, k))
        .reduce<string | undefined>((t, h) => earlierTime(t, h.revokedAt), oldRevokedAt);
      return revokedAt === undefined ? ended : revokedFrom(ended, revokedAt);
    });
    checkpointKeys.push({
      host: this.options.host,
      keyId: cjwk.kid!,
      vkey: encodeVerifierKey(this.options.origin, decodeBase64Url(cjwk.x)!),
      notBefore: at,
    });
    // The new key files are staged beside their targets, trust.json lists the new keys, then the files move into place.
    // A crash before trust.json is written leaves the old pair in use (the next open removes the staged files); one
    // after it leaves the new pair listed and staged, and the next open moves it into place (`settleStaged`). Written
    // the other way round, a crash left trust.json ending (and, after a revocation, revoking) the keys still in place.
    const staged = [this.keyPath!, this.checkpointPath];
    try {
      await writeKeyFile(stagedPathOf(this.keyPath!), jwk);
      await writeKeyFile(stagedPathOf(this.checkpointPath), cjwk);
    } catch (err) {
      await Promise.all(staged.map((p) => unlink(stagedPathOf(p)).catch(() => {})));
      const why = errorText(err);
      throw new StoreError(
        'STORAGE_FAILED',
        `the rotation stopped before trust.json was written, the old keys stay in place; the log has ended the old key's window, so rotate again once this is fixed: ${why}`,
        { cause: err },
      );
    }
    await this.save({ ...this.trust, keys, checkpointKeys });
    for (const path of staged) await installStaged(path);
    this.current = await loadKeyFile(this.keyPath!);
    this.checkpoint = await loadKeyFile(this.checkpointPath);
    return this.current;
  }

  /** Validates a revocation (see `revoke`) and returns its instant. */
  checkRevocation(keyId: string, at: string = this.now()): string {
    if (typeof keyId !== 'string')
      throw new LedgerError('INVALID_ARGUMENT', `a key id is a string (keys list), not ${shownValue(keyId)}`);
    if (!timestampSchema.safeParse(at).success)
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `revocation time ${shownValue(at)} is not an ISO-8601 UTC time with milliseconds (e.g. 2026-11-30T10:00:30.000Z)`,
      );
    const checkpointKeys = this.trust.checkpointKeys ?? [];
    if (!this.trust.keys.some((k) => k.keyId === keyId) && !checkpointKeys.some((k) => k.keyId === keyId))
      throw new LedgerError('KEY_INVALID', `no trusted key ${keyIdText(keyId)}`);
    // Revoked, the key this store signs its checkpoints with would sign no checkpoint until replaced: rotating
    // replaces it, and revokes it when its host key is revoked.
    if (keyId === this.checkpoint.keyId)
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `${quoted(keyId)} is the checkpoint key this store signs with: revoke the host key and rotate (keys rotate), which revokes it`,
      );
    return at;
  }

  /**
   * The other manifest-signing key ids listing the public key `keyId` names (only an older version listed one key under
   * two ids): `revoke` revokes their listings too, and the log closes each one's window with it.
   */
  sameKeyIds(keyId: string): string[] {
    const publicKeys = this.publicKeysOf(keyId);
    return [
      ...new Set(
        this.trust.keys
          .filter((k) => k.keyId !== keyId && publicKeys.has(listedPublicKey(k) ?? ''))
          .map((k) => k.keyId),
      ),
    ];
  }

  /** The public keys the listings of `keyId` name (manifest and checkpoint listings), as `listedPublicKey` spells them. */
  private publicKeysOf(keyId: string): Set<string> {
    const listings = [...this.trust.keys, ...(this.trust.checkpointKeys ?? [])].filter((k) => k.keyId === keyId);
    return new Set(listings.map(listedPublicKey).filter((p): p is string => p !== undefined));
  }

  /** Is `keyId` a manifest-signing key of this trust file (not a checkpoint key)? */
  isManifestKey(keyId: string): boolean {
    return this.trust.keys.some((k) => k.keyId === keyId);
  }

  /**
   * Marks a key revoked from `at` (default now): manifests it signed at or after `at` no longer verify. Every listing of
   * its public key is, under any key id (`sameKeyIds`: the caller closes those ids' windows in the log first). Returns
   * the revocation time that holds (an earlier one stays).
   * @throws LedgerError `INVALID_ARGUMENT` when `at` is not an ISO-8601 UTC time with milliseconds (what
   *   trust.json holds; anything else would make the file unloadable), `KEY_INVALID` for an unknown key
   */
  async revoke(keyId: string, at: string = this.now()): Promise<string> {
    this.checkRevocation(keyId, at);
    const checkpointKeys = this.trust.checkpointKeys ?? [];
    // Every listing of the key (one per host it is listed for) is revoked, and every listing of its public key under
    // another key id (only an older version wrote one; the caller closes those ids' windows in the log too).
    const publicKeys = this.publicKeysOf(keyId);
    const same = (k: TrustedKey | TrustedCheckpointKey) =>
      k.keyId === keyId || publicKeys.has(listedPublicKey(k) ?? '');
    const manifestKeys = this.trust.keys.filter(same);
    // The host key's checkpoint keys go with it: they lie in the same keys/ directory, and a checkpoint carries no
    // time to hold against a window. The current one goes at the next rotation (`rotate`), which replaces it. Those of
    // each host the key is listed for, whose windows overlap that listing's.
    const paired = (k: TrustedCheckpointKey) =>
      k.keyId !== this.checkpoint.keyId && manifestKeys.some((m) => k.host === m.host && overlaps(k, m));
    await this.save({
      ...this.trust,
      keys: this.trust.keys.map((k) => (same(k) ? revokedFrom(k, at) : k)),
      checkpointKeys: checkpointKeys.map((k) =>
        k.keyId === keyId || (k.keyId !== this.checkpoint.keyId && same(k)) || paired(k) ? revokedFrom(k, at) : k,
      ),
    });
    const listed = [...this.trust.keys, ...(this.trust.checkpointKeys ?? [])].find((k) => k.keyId === keyId);
    return listed?.revokedAt ?? at;
  }
}

/**
 * Every listing of `key` in `trust`, whatever host it is listed for: its key id, or its public key under another key id
 * (a key file's key id is derived from its public key, an injected signer's is whatever the signer says; a checkpoint
 * key's public key is read from its verifier key).
 */
function sameKeyListings(
  trust: TrustStore,
  key: { keyId: string; publicKey: Uint8Array },
): Array<TrustedKey | TrustedCheckpointKey> {
  const publicKey = encodeBase64Url(key.publicKey);
  const same = (k: TrustedKey | TrustedCheckpointKey) => k.keyId === key.keyId || listedPublicKey(k) === publicKey;
  return [...trust.keys.filter(same), ...(trust.checkpointKeys ?? []).filter(same)];
}

/** `key` revoked from `at`, or as it is when already revoked no later: a revocation only ever moves earlier. */
function revokedFrom<K extends { revokedAt?: string }>(key: K, at: string): K {
  const revokedAt = earlierTime(key.revokedAt, at);
  return revokedAt === key.revokedAt ? key : { ...key, revokedAt };
}

/** Do two key windows share an instant? (Also how `keys revoke` tells which checkpoint key a rotation will revoke.) */
export function overlaps(
  a: { notBefore: string; notAfter?: string },
  b: { notBefore: string; notAfter?: string },
): boolean {
  const end = (k: { notAfter?: string }) => (k.notAfter === undefined ? Infinity : Date.parse(k.notAfter));
  return Date.parse(a.notBefore) < end(b) && Date.parse(b.notBefore) < end(a);
}
