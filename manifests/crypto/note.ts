/**
 * C2SP signed notes (github.com/C2SP/C2SP signed-note.md), Ed25519 only, byte-compatible with Go's
 * golang.org/x/mod/sumdb/note: a text of `\n`-terminated lines, a blank line, then one line per signature,
 * `— <key name> <base64(4-byte key hash ‖ 64-byte signature)>`. The key hash is the first four bytes of
 * SHA-256(key name ‖ "\n" ‖ 0x01 ‖ public key); the verifier key string is `<name>+<hash hex>+<base64(0x01 ‖ key)>`.
 * Isomorphic.
 */
import { sha256 } from './sha256.js';
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';
import { checkBytesArgument, isUint8Array, shownValue } from '../../store/errors.js';
import { isSignatureVerifier, nobleVerifier, type SignatureVerifier } from './ed25519.js';

/** The signed-note algorithm byte of Ed25519 keys. */
export const ALG_ED25519 = 0x01;
const SIG_PREFIX = '\u2014 ';
/** The most signature lines a note may carry (Go's note.Open refuses more). */
export const MAX_SIGNATURES = 100;
/** A checkpoint is a few hundred bytes; this bounds what a hostile note can make us scan. */
export const MAX_NOTE_BYTES = 1024 * 1024;

const encoder = new TextEncoder();

/** A key that can verify notes: its name, 4-byte key hash and raw 32-byte Ed25519 public key. */
export interface NoteVerifierKey {
  name: string;
  keyHash: number;
  publicKey: Uint8Array;
}

/** Signs note texts: a name, and an Ed25519 key (the signature covers the text bytes). */
export interface NoteSigner {
  readonly name: string;
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

export interface NoteSignature {
  name: string;
  keyHash: number;
  /** base64 of key hash ‖ signature, as on the line. */
  base64: string;
}

export interface OpenedNote {
  text: string;
  /** Signatures by known keys, all verified. */
  sigs: NoteSignature[];
  /** Signatures by keys not among the verifiers (kept, not checked). */
  unverified: NoteSignature[];
}

/** Go's unicode.IsSpace set, and `+`. */
const NAME_FORBIDDEN = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000+]/;

/** C0 controls: Go's note.isValidName allows them in a name, but no note text may carry one (`assertValidText`). */
const NAME_CONTROL = /[\u0000-\u001f]/;

/**
 * Names `isValidKeyName` found valid (strings: the same text is valid again). Every commit checks the signer's name and
 * formats the log's origin, each with four regular expressions; a few short names are remembered, no long one (a
 * hostile note's names are checked as ever and cost no memory kept).
 */
const validNames = new Set<string>();
const REMEMBERED_NAMES = 16;
const REMEMBERED_NAME_LENGTH = 256;

/**
 * Key names: non-empty, valid UTF-8, no Unicode space, no `+` (as Go's note.isValidName), and no C0 control: a name
 * is written in note text (the origin line, signature lines), which refuses them, so such a name could never sign.
 */
export function isValidKeyName(name: string): boolean {
  if (validNames.has(name)) return true;
  const valid =
    typeof name === 'string' &&
    name.length > 0 &&
    !NAME_FORBIDDEN.test(name) &&
    !NAME_CONTROL.test(name) &&
    isWellFormed(name);
  if (valid && name.length <= REMEMBERED_NAME_LENGTH) {
    if (validNames.size >= REMEMBERED_NAMES) validNames.clear();
    validNames.add(name);
  }
  return valid;
}

export function isWellFormed(s: string): boolean {
  // Lone surrogates cannot be encoded as UTF-8.
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

/**
 * A kind of Ed25519 signed-note key: its algorithm byte (0x01 for note signatures, 0x04 for C2SP
 * `cosignature/v1`, so that a key of one kind never verifies a signature of the other) and how messages name it.
 */
export interface Ed25519KeyKind {
  alg: number;
  /** "note key" in `invalid note key name "…"`. */
  nameNoun: string;
  /** "note verifier key" in `malformed note verifier key: …`. */
  keyNoun: string;
  /** "Ed25519 (0x01)" in `not an Ed25519 (0x01) key of 32 bytes`. */
  algNoun: string;
}

const NOTE_KEY: Ed25519KeyKind = {
  alg: ALG_ED25519,
  nameNoun: 'note key',
  keyNoun: 'note verifier key',
  algNoun: 'Ed25519 (0x01)',
};

/**
 * The last key hash computed, with a copy of the exact inputs it is of: a ledger signs every checkpoint note with one
 * key, and hashed its name and key afresh each time (SHA-256 and two fresh arrays per commit). Used only when the
 * algorithm, the name and every byte of the key are those (a rotated key, another name or kind is hashed anew).
 */
let lastKeyHash: { alg: number; name: string; publicKey: Uint8Array; hash: number } | undefined;

/** The key hash of an Ed25519 key of a kind: big-endian uint32 of SHA-256(name ‖ "\n" ‖ alg ‖ key)[0:4]. */
export function ed25519KeyHash(alg: number, name: string, publicKey: Uint8Array): number {
  const last = lastKeyHash;
  if (last !== undefined && last.alg === alg && last.name === name && equalKeyBytes(last.publicKey, publicKey))
    return last.hash;
  const hash = computeKeyHash(alg, name, publicKey);
  lastKeyHash = { alg, name, publicKey: Uint8Array.from(publicKey), hash };
  return hash;
}

function equalKeyBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function computeKeyHash(alg: number, name: string, publicKey: Uint8Array): number {
  const nameBytes = encoder.encode(name);
  const buf = new Uint8Array(nameBytes.length + 2 + publicKey.length);
  buf.set(nameBytes, 0);
  buf[nameBytes.length] = 0x0a;
  buf[nameBytes.length + 1] = alg;
  buf.set(publicKey, nameBytes.length + 2);
  const h = sha256(buf);
  return ((h[0]! << 24) | (h[1]! << 16) | (h[2]! << 8) | h[3]!) >>> 0;
}

/**
 * The signed-note key hash of an Ed25519 key: big-endian uint32 of SHA-256(name ‖ "\n" ‖ 0x01 ‖ key)[0:4].
 * @throws ManifestError `INVALID_ARGUMENT` for a name that is no string or a key that is no Uint8Array
 */
export function noteKeyHash(name: string, publicKey: Uint8Array): number {
  if (typeof name !== 'string')
    throw new ManifestError('INVALID_ARGUMENT', `noteKeyHash: the key name must be a string, not ${shownValue(name)}`);
  checkBytesArgument(publicKey, 'noteKeyHash: the Ed25519 public key', ManifestError);
  return ed25519KeyHash(ALG_ED25519, name, publicKey);
}

const hex8 = (n: number) => n.toString(16).padStart(8, '0');

/**
 * The verifier key string `<name>+<hash hex>+<base64(alg ‖ key)>` of a kind, for `call` (the exported function whose
 * refusal it is). A name that is no string or not a valid key name, or a key that is no Uint8Array of 32 bytes, from a
 * JavaScript caller, is `INVALID_ARGUMENT` naming it (it was a TypeError: `invalid note key name 5`).
 * @throws ManifestError `INVALID_ARGUMENT` for a bad name or key
 */
export function encodeEd25519Key(kind: Ed25519KeyKind, name: string, publicKey: Uint8Array, call: string): string {
  if (typeof name !== 'string')
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `${call}: the ${kind.nameNoun} name must be a string, not ${shownValue(name)}`,
    );
  if (!isValidKeyName(name))
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `${call}: ${shownValue(name)} is no ${kind.nameNoun} name (non-empty, no spaces, no "+", no control characters)`,
    );
  checkBytesArgument(publicKey, `${call}: the Ed25519 public key`, ManifestError, 32);
  const key = new Uint8Array(33);
  key[0] = kind.alg;
  key.set(publicKey, 1);
  return `${name}+${hex8(ed25519KeyHash(kind.alg, name, publicKey))}+${encodeBase64(key)}`;
}

/**
 * Parses a verifier key string of a kind; the algorithm byte must be the kind's and the hash must match the
 * name and key. @throws ManifestError `KEY_INVALID`
 */
export function parseEd25519Key(kind: Ed25519KeyKind, vkey: string): NoteVerifierKey {
  const bad = (why: string) => new ManifestError('KEY_INVALID', `malformed ${kind.keyNoun}: ${why}`);
  if (typeof vkey !== 'string' || vkey.length > 1024) throw bad('not a string of at most 1024 characters');
  // Split at the first two `+` only: the base64 key may contain `+` itself.
  const a = vkey.indexOf('+');
  const b = a < 0 ? -1 : vkey.indexOf('+', a + 1);
  if (b < 0) throw bad('expected <name>+<hash>+<key>');
  const [name, hash, b64] = [vkey.slice(0, a), vkey.slice(a + 1, b), vkey.slice(b + 1)];
  if (!isValidKeyName(name)) throw bad('invalid key name');
  // Either case, as Go's note.NewVerifier reads it (strconv.ParseUint, base 16: no sign, no prefix).
  if (!/^[0-9a-fA-F]{8}$/.test(hash)) throw bad('the key hash is not 8 hex digits');
  const key = decodeBase64(b64);
  if (!key || key.length !== 33 || key[0] !== kind.alg) throw bad(`not an ${kind.algNoun} key of 32 bytes`);
  const publicKey = key.slice(1);
  const keyHash = parseInt(hash, 16);
  if (ed25519KeyHash(kind.alg, name, publicKey) !== keyHash) throw bad('the key hash does not match the name and key');
  return { name, keyHash, publicKey };
}

/**
 * The verifier key string `<name>+<hash hex>+<base64(0x01 ‖ key)>`.
 * @throws ManifestError `INVALID_ARGUMENT` for a name that is no valid key name or a key that is no 32-byte Uint8Array
 */
export function encodeVerifierKey(name: string, publicKey: Uint8Array): string {
  return encodeEd25519Key(NOTE_KEY, name, publicKey, 'encodeVerifierKey');
}

/**
 * Parses a verifier key string; the hash must match the name and key.
 * @throws ManifestError `KEY_INVALID`
 */
export function parseVerifierKey(vkey: string): NoteVerifierKey {
  return parseEd25519Key(NOTE_KEY, vkey);
}

function assertValidText(text: string, what: string): void {
  if (!isWellFormed(text)) throw new ManifestError('NOTE_MALFORMED', `${what} is not valid UTF-8`);
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text))
    throw new ManifestError('NOTE_MALFORMED', `${what} contains a control character other than newline`);
}

/**
 * Signs a note text (non-empty, `\n`-terminated, no control characters but newline) with each signer.
 * @throws ManifestError `NOTE_MALFORMED`, `KEY_INVALID` (a signer that is none: no object, an invalid key name, no
 *   `sign` function, a public key that is not 32 bytes, or a signature that is not 64 bytes), `INVALID_ARGUMENT` for
 *   signers that are no array (nor other iterable)
 */
export async function signNote(text: string, signers: NoteSigner[]): Promise<string> {
  if (typeof text !== 'string' || !text.endsWith('\n'))
    throw new ManifestError('NOTE_MALFORMED', 'a note text must end with a newline');
  assertValidText(text, 'the note text');
  // Each signer judged before any signs (a TypeError once: `signers is not iterable`, `reading 'name'`).
  const iterable = signers as unknown as { [Symbol.iterator]?: unknown } | null | undefined;
  if (typeof iterable !== 'object' || iterable === null || typeof iterable[Symbol.iterator] !== 'function')
    throw new ManifestError('INVALID_ARGUMENT', `signNote: signers must be an array, not ${shownValue(signers)}`);
  const list = [...signers];
  for (const [i, signer] of list.entries()) {
    const given = signer as Partial<NoteSigner> | null | undefined;
    if (typeof given !== 'object' || given === null)
      throw new ManifestError('KEY_INVALID', `note signer ${i + 1} is not a signer: ${shownValue(given)}`);
    if (!isValidKeyName(given.name as string)) throw new ManifestError('KEY_INVALID', `invalid note key name`);
    if (typeof given.sign !== 'function' || !isUint8Array(given.publicKey) || given.publicKey.length !== 32)
      throw new ManifestError(
        'KEY_INVALID',
        `note signer ${given.name} must be { name, publicKey: 32 bytes, sign(message): Uint8Array | Promise<Uint8Array> }`,
      );
  }
  const message = encoder.encode(text);
  let sigs = '';
  for (const signer of list) {
    const sig = await signer.sign(message);
    if (!isUint8Array(sig) || sig.length !== 64)
      throw new ManifestError('KEY_INVALID', `note signer ${signer.name} returned a malformed signature`);
    const hash = noteKeyHash(signer.name, signer.publicKey);
    const body = new Uint8Array(68);
    new DataView(body.buffer).setUint32(0, hash);
    body.set(sig, 4);
    sigs += `${SIG_PREFIX}${signer.name} ${encodeBase64(body)}\n`;
  }
  return `${text}\n${sigs}`;
}

/**
 * Whether `k` is a key as `parseVerifierKey`, `checkpointVerifiers` and `parseWitnessKeys` give one: `{ name,
 * keyHash, publicKey }` with a 32-byte key. For the checks of a caller's keys before a note is read.
 */
export function isKeyOfNoteShape(k: unknown): boolean {
  const key = k as Partial<NoteVerifierKey> | null;
  return (
    typeof key === 'object' &&
    key !== null &&
    typeof key.name === 'string' &&
    Number.isSafeInteger(key.keyHash) &&
    isUint8Array(key.publicKey) &&
    key.publicKey.length === 32
  );
}

/**
 * The caller's known keys and verifier, looked at before the note is read: keys that are no list of `{ name, keyHash,
 * publicKey }` (as `parseVerifierKey` and `checkpointVerifiers` give them) or a verifier without `verify` are
 * `INVALID_ARGUMENT`. Each was a TypeError once a signature line was read (`known.find is not a function`), and a key
 * without its 32 bytes failed a note its key signed as `NOTE_SIGNATURE_INVALID`.
 */
function checkKnownKeys(known: unknown, verifier: unknown): void {
  if (!Array.isArray(known) || !known.every(isKeyOfNoteShape))
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `openNote: the known keys must be a list of { name, keyHash, publicKey } (read them with parseVerifierKey or checkpointVerifiers), not ${Array.isArray(known) ? 'a list holding another value' : shownValue(known)}`,
    );
  if (!isSignatureVerifier(verifier))
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `openNote: the verifier must be a SignatureVerifier { verify(signature, message, publicKey) }, not ${shownValue(verifier)}`,
    );
}

/**
 * Opens a signed note: parses it strictly and verifies every signature by a known key (Go's note.Open
 * rules: unknown keys are set aside, a bad signature by a known key fails the note, at least one known
 * signature is required, repeated signatures are ignored).
 * @throws ManifestError `NOTE_MALFORMED`, `NOTE_SIGNATURE_INVALID`, `NOTE_UNVERIFIED`; `INVALID_ARGUMENT` for known
 *   keys that are no list of keys or a verifier that is none
 */
export function openNote(
  note: string,
  known: NoteVerifierKey[],
  verifier: SignatureVerifier = nobleVerifier,
): OpenedNote {
  checkKnownKeys(known, verifier);
  const malformed = (why: string) => new ManifestError('NOTE_MALFORMED', `malformed note: ${why}`);
  if (typeof note !== 'string') throw malformed('not text');
  if (note.length > MAX_NOTE_BYTES) throw malformed(`over ${MAX_NOTE_BYTES} bytes`);
  assertValidText(note, 'the note');
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw malformed('no blank line before the signatures');
  const text = note.slice(0, split + 1);
  let block = note.slice(split + 2);
  if (block.length === 0 || !block.endsWith('\n')) throw malformed('the signature block must end with a newline');
  const message = encoder.encode(text);
  const out: OpenedNote = { text, sigs: [], unverified: [] };
  const seen = new Set<string>();
  const seenUnverified = new Set<string>();
  let count = 0;
  while (block.length > 0) {
    const nl = block.indexOf('\n');
    let line = block.slice(0, nl);
    block = block.slice(nl + 1);
    if (!line.startsWith(SIG_PREFIX)) throw malformed('a signature line must start with "— "');
    line = line.slice(SIG_PREFIX.length);
    const space = line.indexOf(' ');
    const name = space < 0 ? line : line.slice(0, space);
    const b64 = space < 0 ? '' : line.slice(space + 1);
    const sig = decodeBase64(b64);
    if (!sig || !isValidKeyName(name) || b64 === '' || sig.length < 5) throw malformed('bad signature line');
    if (++count > MAX_SIGNATURES) throw malformed(`more than ${MAX_SIGNATURES} signatures`);
    const keyHash = new DataView(sig.buffer, sig.byteOffset).getUint32(0);
    const key = known.find((k) => k.name === name && k.keyHash === keyHash);
    if (!key) {
      if (!seenUnverified.has(line)) out.unverified.push({ name, keyHash, base64: b64 });
      seenUnverified.add(line);
      continue;
    }
    const id = `${name}+${hex8(keyHash)}`;
    if (seen.has(id)) continue;
    seen.add(id);
    if (!verifier.verify(sig.subarray(4), message, key.publicKey))
      throw new ManifestError('NOTE_SIGNATURE_INVALID', `the signature by ${id} does not verify`);
    out.sigs.push({ name, keyHash, base64: b64 });
  }
  if (out.sigs.length === 0) throw new ManifestError('NOTE_UNVERIFIED', 'the note carries no signature by a known key');
  return out;
}
