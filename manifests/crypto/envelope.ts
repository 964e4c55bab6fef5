/**
 * DSSE envelopes (secure-systems-lab/dsse protocol v1) carrying manifest payloads. Isomorphic.
 * The signature is Ed25519 over PAE(payloadType, payload); verifiers hash and verify the exact
 * payload bytes they were given and only then parse them — they never re-serialize.
 */
import {
  base64DecodedLength,
  decodeBase64Either,
  decodeCanonicalBase64Into,
  encodeBase64,
} from '../encoding/base64.js';
import { ManifestError } from '../errors.js';
import { checkBytesArgument, isUint8Array, shownValue } from '../../store/errors.js';

export interface EnvelopeSignature {
  /** DSSE: an optional, unauthenticated hint at the signing key. The library always writes it. */
  keyid?: string | undefined;
  sig: string;
}

export interface Envelope {
  payloadType: string;
  payload: string;
  signatures: EnvelopeSignature[];
}

/** Hard bound for one envelope's JSON text: a manifest is a few hundred bytes. */
export const MAX_ENVELOPE_BYTES = 64 * 1024;
const MAX_SIGNATURES = 8;

const encoder = new TextEncoder();

/** `DSSEv1 <len> <type> ` as bytes, per payload type: every manifest of a chain has the same one. */
const paePrefixes = new Map<string, Uint8Array>();

function paePrefix(payloadType: string): Uint8Array {
  let prefix = paePrefixes.get(payloadType);
  if (prefix === undefined) {
    prefix = encoder.encode(`DSSEv1 ${encoder.encode(payloadType).length} ${payloadType} `);
    if (paePrefixes.size >= 16) paePrefixes.clear(); // payload types come from input: keep the map small
    paePrefixes.set(payloadType, prefix);
  }
  return prefix;
}

/** The PAE bytes for a body of `bodyLength` bytes with all but the body written; the body starts at `bodyAt`. */
function paeFrame(payloadType: string, bodyLength: number): { message: Uint8Array; bodyAt: number } {
  const prefix = paePrefix(payloadType);
  const length = `${bodyLength} `; // ASCII digits and a space: one byte per character
  const message = new Uint8Array(prefix.length + length.length + bodyLength);
  message.set(prefix, 0);
  for (let i = 0; i < length.length; i++) message[prefix.length + i] = length.charCodeAt(i);
  return { message, bodyAt: prefix.length + length.length };
}

/**
 * DSSE pre-authentication encoding: `DSSEv1 <len> <type> <len> <body>` with byte lengths.
 * @throws ManifestError `INVALID_ARGUMENT` for a payload type that is no string or a payload that is no Uint8Array
 */
export function pae(payloadType: string, payload: Uint8Array): Uint8Array {
  checkPayloadArguments('pae', payloadType, payload);
  const { message, bodyAt } = paeFrame(payloadType, payload.length);
  message.set(payload, bodyAt);
  return message;
}

/**
 * The payload decoded straight into its PAE frame (one buffer, no copy), when its text is canonical standard
 * base64 and Node's decoder is at hand; `undefined` sends the caller down the portable path.
 */
function decodeIntoPae(payloadType: string, payload: string): { payload: Uint8Array; message: Uint8Array } | undefined {
  const length = base64DecodedLength(payload);
  if (length === undefined) return undefined;
  const { message, bodyAt } = paeFrame(payloadType, length);
  return decodeCanonicalBase64Into(payload, message, bodyAt)
    ? { payload: message.subarray(bodyAt), message }
    : undefined;
}

/** A signing key: local (JWK file) or injected (KMS/HSM). */
export interface Signer {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

/**
 * `payloadType` and `payload` as their types say: a payload type that is no string was signed as its text (`5`,
 * `undefined`), a payload that is no Uint8Array was a TypeError or RangeError from inside.
 */
function checkPayloadArguments(call: string, payloadType: unknown, payload: unknown): void {
  if (typeof payloadType !== 'string')
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `${call}: the payload type must be a string, not ${shownValue(payloadType)}`,
    );
  checkBytesArgument(payload, `${call}: the payload`, ManifestError);
}

/**
 * A DSSE envelope of `payload` signed by `signer`.
 * @throws ManifestError `INVALID_ARGUMENT` for a payload type that is no string, a payload that is no Uint8Array or a
 *   signer without a `sign` function and a string `keyId`; `KEY_INVALID` when the signer returns no 64-byte signature
 */
export async function signEnvelope(payloadType: string, payload: Uint8Array, signer: Signer): Promise<Envelope> {
  checkPayloadArguments('signEnvelope', payloadType, payload);
  const given = signer as { sign?: unknown; keyId?: unknown } | null | undefined;
  if (typeof given?.sign !== 'function' || typeof given.keyId !== 'string')
    throw new ManifestError(
      'INVALID_ARGUMENT',
      'signEnvelope: signer must be { keyId: string, publicKey: Uint8Array, sign(message): Uint8Array | Promise<Uint8Array> }',
    );
  const sig = await signer.sign(pae(payloadType, payload));
  if (!isUint8Array(sig) || sig.length !== 64) {
    throw new ManifestError('KEY_INVALID', `signer ${signer.keyId} returned a malformed signature`);
  }
  return { payloadType, payload: encodeBase64(payload), signatures: [{ keyid: signer.keyId, sig: encodeBase64(sig) }] };
}

/**
 * The stored text of an envelope (one line, no trailing newline).
 * @throws ManifestError `INVALID_ARGUMENT` for an envelope that is no object, or whose `payloadType` or `payload` is
 *   no text or `signatures` no list of `{ keyid?, sig }` texts: `{}` was written as the line `{}`, and a field that
 *   was not text left out of the line or written as something no reader takes
 */
export function serializeEnvelope(envelope: Envelope): string {
  if (typeof envelope !== 'object' || envelope === null)
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `serializeEnvelope: the envelope must be an object, not ${shownValue(envelope)}`,
    );
  const { payloadType, payload, signatures } = envelope as Partial<Record<keyof Envelope, unknown>>;
  const refuse = (name: string, wanted: string, value: unknown) =>
    new ManifestError('INVALID_ARGUMENT', `serializeEnvelope: ${name} must be ${wanted}, not ${shownValue(value)}`);
  if (typeof payloadType !== 'string') throw refuse('the envelope.payloadType', 'text', payloadType);
  if (typeof payload !== 'string') throw refuse('the envelope.payload', 'base64 text', payload);
  if (!Array.isArray(signatures)) throw refuse('the envelope.signatures', 'a list of { keyid?, sig }', signatures);
  signatures.forEach((sig: unknown, i) => {
    const s = sig as { keyid?: unknown; sig?: unknown } | null;
    if (
      typeof s !== 'object' ||
      s === null ||
      (s.keyid !== undefined && typeof s.keyid !== 'string') ||
      typeof s.sig !== 'string'
    )
      throw refuse(`the envelope.signatures[${i}]`, '{ keyid?, sig } of text', sig);
  });
  return JSON.stringify({ payloadType, payload, signatures });
}

export interface ParsedEnvelope {
  /** The envelope's DSSE fields only; fields this version does not know are left out. */
  envelope: Envelope;
  payload: Uint8Array;
  /** The decoded signatures; `keyid` is the hint, absent also where the envelope gives it empty (see `parseEnvelope`). */
  signatures: Array<{ keyid?: string | undefined; sig: Uint8Array }>;
  /** PAE(payloadType, payload), when parsing built it (then `payload` is a view into it). */
  message?: Uint8Array | undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An own field only: a `__proto__` key (an own property after JSON.parse) must not lend its contents. */
function field(v: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(v, key) ? v[key] : undefined;
}

function parseSignature(s: unknown, i: number): { signature: EnvelopeSignature; sig: Uint8Array } {
  if (!isPlainObject(s)) throw new ManifestError('ENVELOPE_INVALID', `signature ${i} is not an object`);
  const keyid = field(s, 'keyid');
  const sig = field(s, 'sig');
  if (typeof sig !== 'string' || (keyid !== undefined && typeof keyid !== 'string')) {
    throw new ManifestError('ENVELOPE_INVALID', `signature ${i} needs a string sig and, if present, a string keyid`);
  }
  const bytes = decodeBase64Either(sig);
  if (!bytes) throw new ManifestError('ENVELOPE_INVALID', `signature ${i} is not canonical padded base64`);
  const signature: EnvelopeSignature = keyid === undefined ? { sig } : { keyid, sig };
  return { signature, sig: bytes };
}

/**
 * Parses an envelope from untrusted text or a parsed value, defensively: anything malformed is
 * `ENVELOPE_INVALID`, never a raw `SyntaxError`. Does not check the payload type or signatures.
 *
 * Input follows the DSSE envelope spec (envelope.md), which is looser than what the library writes:
 * payload and signatures in either base64 alphabet (padded, canonical), `keyid` optional (an empty one is read as
 * absent, as the spec says an unset field must be), and fields it
 * does not recognise ignored ("consumers MUST ignore unrecognized fields"). The signed payload itself is
 * still held to the canonical manifest encoding by `verifyManifestEnvelope`.
 */
export function parseEnvelope(input: string | unknown): ParsedEnvelope {
  let value: unknown = input;
  if (typeof input === 'string') {
    if (input.length > MAX_ENVELOPE_BYTES) {
      throw new ManifestError(
        'ENVELOPE_INVALID',
        `envelope text is ${input.length} characters, over ${MAX_ENVELOPE_BYTES}`,
      );
    }
    try {
      value = JSON.parse(input);
    } catch (err) {
      throw new ManifestError('ENVELOPE_INVALID', 'envelope is not valid JSON', { cause: err });
    }
  }
  if (!isPlainObject(value)) throw new ManifestError('ENVELOPE_INVALID', 'envelope must be a JSON object');
  const payloadType = field(value, 'payloadType');
  const payload = field(value, 'payload');
  const signatures = field(value, 'signatures');
  if (typeof payloadType !== 'string' || typeof payload !== 'string' || !Array.isArray(signatures)) {
    throw new ManifestError(
      'ENVELOPE_INVALID',
      'envelope needs a string payloadType and payload and a signatures array',
    );
  }
  if (signatures.length === 0 || signatures.length > MAX_SIGNATURES) {
    throw new ManifestError('ENVELOPE_INVALID', `envelope must carry 1-${MAX_SIGNATURES} signatures`);
  }
  const framed = decodeIntoPae(payloadType, payload);
  const bytes = framed?.payload ?? decodeBase64Either(payload);
  if (!bytes) throw new ManifestError('ENVELOPE_INVALID', 'payload is not canonical padded base64');
  const parsed = signatures.map(parseSignature);
  return {
    envelope: { payloadType, payload, signatures: parsed.map((p) => p.signature) },
    payload: bytes,
    // envelope.md: "An unset field MUST be treated the same as set-but-empty": an empty keyid is no hint either.
    signatures: parsed.map((p) => ({
      ...(p.signature.keyid === undefined || p.signature.keyid === '' ? {} : { keyid: p.signature.keyid }),
      sig: p.sig,
    })),
    ...(framed ? { message: framed.message } : {}),
  };
}
