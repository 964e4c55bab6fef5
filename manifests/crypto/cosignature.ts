/**
 * C2SP tlog-cosignature, Ed25519 `cosignature/v1` (github.com/C2SP/C2SP tlog-cosignature.md): a witness's
 * timestamped signature over a checkpoint, carried as one more signed-note line
 * `— <witness name> base64(key hash ‖ u64 big-endian timestamp ‖ 64-byte signature)`. The signed message is
 * `cosignature/v1\ntime <unix seconds>\n` followed by the whole checkpoint body (extension lines included).
 * The key hash is SHA-256(name ‖ "\n" ‖ 0x04 ‖ key)[0:4]: the 0x04 algorithm byte keeps a witness key from
 * ever verifying a plain note signature (0x01), and the other way round. Isomorphic.
 */
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';
import { isUint8Array, shownValue } from '../../store/errors.js';
import { isSignatureVerifier, nobleVerifier, type SignatureVerifier } from './ed25519.js';
import {
  ed25519KeyHash,
  encodeEd25519Key,
  isKeyOfNoteShape,
  isValidKeyName,
  parseEd25519Key,
  type Ed25519KeyKind,
  type NoteSigner,
} from './note.js';

/** The signed-note algorithm byte of Ed25519 `cosignature/v1` keys. */
export const ALG_COSIGNATURE_V1 = 0x04;
const SIG_PREFIX = '\u2014 ';
/** What this witness signs with: JavaScript numbers are exact up to 2^53, which is enough for seconds. */
const MAX_TIMESTAMP = Number.MAX_SAFE_INTEGER;
/** What a cosignature may carry (the spec's cap, 2^63 − 1): verified exactly, from the 64-bit value. */
const MAX_SPEC_TIMESTAMP = 2n ** 63n - 1n;

const encoder = new TextEncoder();

/** A pinned witness: its name, key hash (0x04) and raw Ed25519 public key. */
export interface CosignerKey {
  name: string;
  keyHash: number;
  publicKey: Uint8Array;
}

/** A verified cosignature: which witness, and the time it says it signed at (POSIX seconds). */
export interface Cosignature {
  name: string;
  keyHash: number;
  /** POSIX seconds: exact up to 2^53 − 1, the nearest number above (the spec allows up to 2^63 − 1). */
  timestamp: number;
  /** The same in decimal, exact whatever its size. */
  timestampText: string;
}

const hex8 = (n: number) => n.toString(16).padStart(8, '0');

const COSIGNER_KEY: Ed25519KeyKind = {
  alg: ALG_COSIGNATURE_V1,
  nameNoun: 'witness',
  keyNoun: 'witness verifier key',
  algNoun: 'Ed25519 cosignature/v1 (0x04)',
};

/** The key hash of an Ed25519 cosigner key: big-endian uint32 of SHA-256(name ‖ "\n" ‖ 0x04 ‖ key)[0:4]. */
export function cosignerKeyHash(name: string, publicKey: Uint8Array): number {
  return ed25519KeyHash(ALG_COSIGNATURE_V1, name, publicKey);
}

/**
 * The witness verifier key string `<name>+<hash hex>+<base64(0x04 ‖ key)>`.
 * @throws ManifestError `INVALID_ARGUMENT` for a name that is no valid key name or a key that is no 32-byte Uint8Array
 */
export function encodeCosignerKey(name: string, publicKey: Uint8Array): string {
  return encodeEd25519Key(COSIGNER_KEY, name, publicKey, 'encodeCosignerKey');
}

/**
 * Parses a witness verifier key string (algorithm 0x04); the hash must match the name and key.
 * @throws ManifestError `KEY_INVALID`
 */
export function parseCosignerKey(vkey: string): CosignerKey {
  return parseEd25519Key(COSIGNER_KEY, vkey);
}

/** The bytes a `cosignature/v1` signature covers. */
export function cosignedMessage(checkpointText: string, timestamp: number | bigint): Uint8Array {
  return encoder.encode(`cosignature/v1\ntime ${timestamp}\n${checkpointText}`);
}

function assertCheckpointText(text: string): void {
  // The spec's message is the whole note body; fewer than three lines cannot be a checkpoint.
  if (typeof text !== 'string' || !text.endsWith('\n') || text.split('\n').length < 4)
    throw new ManifestError('NOTE_MALFORMED', 'a cosigned text must be a checkpoint body (three or more lines)');
}

/**
 * Cosigns a checkpoint body at `timestamp` (POSIX seconds, > 0): returns the signature line, `\n`-terminated.
 * @throws ManifestError `NOTE_MALFORMED`, `KEY_INVALID`
 */
export async function cosignCheckpoint(checkpointText: string, signer: NoteSigner, timestamp: number): Promise<string> {
  assertCheckpointText(checkpointText);
  if (!isValidKeyName(signer.name)) throw new ManifestError('KEY_INVALID', 'invalid witness name');
  // Never 0 from this witness: a time of 0 would claim nothing about when the tree was seen (verifiers accept one).
  if (!Number.isSafeInteger(timestamp) || timestamp < 1 || timestamp > MAX_TIMESTAMP)
    throw new ManifestError('INVALID_ARGUMENT', 'a cosignature timestamp is a positive number of seconds');
  const sig = await signer.sign(cosignedMessage(checkpointText, timestamp));
  if (!isUint8Array(sig) || sig.length !== 64)
    throw new ManifestError('KEY_INVALID', `witness signer ${signer.name} returned a malformed signature`);
  const body = new Uint8Array(4 + 8 + 64);
  const view = new DataView(body.buffer);
  view.setUint32(0, cosignerKeyHash(signer.name, signer.publicKey));
  view.setBigUint64(4, BigInt(timestamp));
  body.set(sig, 12);
  return `${SIG_PREFIX}${signer.name} ${encodeBase64(body)}\n`;
}

/** What reading a note's signature lines against pinned witness keys found. */
export interface CosignatureCheck {
  /** Valid cosignatures by pinned witnesses, one per witness (the first valid one). */
  valid: Cosignature[];
  /** Lines that name a pinned witness (name and key hash) but do not verify. */
  invalid: Array<{ name: string; keyHash: number; reason: string }>;
}

/**
 * The caller's pinned keys and verifier, looked at before a line is read: keys that are no list of `{ name, keyHash,
 * publicKey }` (as `parseWitnessKeys` gives them) are `KEY_INVALID`, as `witnessDigest` refuses them, a verifier
 * without `verify` `INVALID_ARGUMENT`. Keys that were none failed as `witnesses.find is not a function` once a line
 * named a witness, and a key without its 32 bytes reported that witness's good cosignature as one that does not verify.
 */
function checkPinned(witnesses: unknown, verifier: unknown): void {
  if (!Array.isArray(witnesses) || !witnesses.every(isKeyOfNoteShape))
    throw new ManifestError(
      'KEY_INVALID',
      'checkCosignatures: the pinned witness keys must be a list of { name, keyHash, publicKey } (read them with parseWitnessKeys)',
    );
  if (!isSignatureVerifier(verifier))
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `checkCosignatures: the verifier must be a SignatureVerifier { verify(signature, message, publicKey) }, not ${shownValue(verifier)}`,
    );
}

/**
 * Checks the cosignatures of a signed note against pinned witness keys. Lines by other keys (the log's own
 * signature, unknown witnesses) are ignored, as the spec demands; the note must already be well formed
 * (open it with `openNote` first). Never throws on hostile lines: a bad one by a pinned key is reported, and a note
 * that is no text has no cosignature.
 * @throws ManifestError `KEY_INVALID` for pinned keys that are none, `INVALID_ARGUMENT` for a verifier that is none
 */
export function checkCosignatures(
  note: string,
  witnesses: CosignerKey[],
  verifier: SignatureVerifier = nobleVerifier,
): CosignatureCheck {
  checkPinned(witnesses, verifier);
  const out: CosignatureCheck = { valid: [], invalid: [] };
  const split = typeof note === 'string' ? note.lastIndexOf('\n\n') : -1;
  if (split < 0) return out;
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2).split('\n');
  const done = new Set<string>();
  for (const raw of lines) {
    if (!raw.startsWith(SIG_PREFIX)) continue;
    const line = raw.slice(SIG_PREFIX.length);
    const space = line.indexOf(' ');
    if (space < 0) continue;
    const name = line.slice(0, space);
    const sig = decodeBase64(line.slice(space + 1));
    if (!sig || sig.length < 4) continue;
    const keyHash = new DataView(sig.buffer, sig.byteOffset).getUint32(0);
    const key = witnesses.find((k) => k.name === name && k.keyHash === keyHash);
    const id = `${name}+${hex8(keyHash)}`;
    if (!key || done.has(id)) continue;
    const reason = verifyOne(text, sig, key, verifier);
    if (typeof reason === 'bigint') {
      done.add(id);
      out.valid.push({ name, keyHash, timestamp: Number(reason), timestampText: reason.toString() });
    } else out.invalid.push({ name, keyHash, reason });
  }
  return out;
}

/** The timestamp of a valid cosignature, or why it is not one. */
function verifyOne(text: string, sig: Uint8Array, key: CosignerKey, verifier: SignatureVerifier): bigint | string {
  if (sig.length !== 4 + 8 + 64) return `a cosignature/v1 is ${4 + 8 + 64} bytes, not ${sig.length}`;
  const t = new DataView(sig.buffer, sig.byteOffset).getBigUint64(4);
  // tlog-cosignature bounds the time above only (2^63 - 1): another witness's cosignature at time 0 counts.
  if (t > MAX_SPEC_TIMESTAMP) return `timestamp ${t} is out of range`;
  if (!verifier.verify(sig.subarray(12), cosignedMessage(text, t), key.publicKey))
    return 'the Ed25519 signature does not verify';
  return t;
}
