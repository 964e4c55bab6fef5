/**
 * DSSE envelopes (secure-systems-lab/dsse protocol v1) carrying manifest payloads. Isomorphic.
 * The signature is Ed25519 over PAE(payloadType, payload); verifiers hash and verify the exact
 * payload bytes they were given and only then parse them — they never re-serialize.
 */
import { decodeBase64, encodeBase64 } from '../encoding/base64.js';
import { ManifestError } from '../errors.js';

export interface EnvelopeSignature {
  keyid: string;
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

/** DSSE pre-authentication encoding: `DSSEv1 <len> <type> <len> <body>` with byte lengths. */
export function pae(payloadType: string, payload: Uint8Array): Uint8Array {
  const type = encoder.encode(payloadType);
  const head = encoder.encode(`DSSEv1 ${type.length} ${payloadType} ${payload.length} `);
  const out = new Uint8Array(head.length + payload.length);
  out.set(head, 0);
  out.set(payload, head.length);
  return out;
}

/** A signing key: local (JWK file) or injected (KMS/HSM). */
export interface Signer {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

export async function signEnvelope(payloadType: string, payload: Uint8Array, signer: Signer): Promise<Envelope> {
  const sig = await signer.sign(pae(payloadType, payload));
  if (!(sig instanceof Uint8Array) || sig.length !== 64) {
    throw new ManifestError('KEY_INVALID', `signer ${signer.keyId} returned a malformed signature`);
  }
  return { payloadType, payload: encodeBase64(payload), signatures: [{ keyid: signer.keyId, sig: encodeBase64(sig) }] };
}

/** The stored text of an envelope (one line, no trailing newline). */
export function serializeEnvelope(envelope: Envelope): string {
  return JSON.stringify({
    payloadType: envelope.payloadType,
    payload: envelope.payload,
    signatures: envelope.signatures,
  });
}

export interface ParsedEnvelope {
  envelope: Envelope;
  payload: Uint8Array;
  signatures: Array<{ keyid: string; sig: Uint8Array }>;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function exactKeys(v: Record<string, unknown>, keys: string[]): boolean {
  const own = Object.keys(v);
  return own.length === keys.length && keys.every((k) => Object.prototype.hasOwnProperty.call(v, k));
}

/**
 * Parses an envelope from untrusted text or a parsed value, defensively: anything malformed is
 * `ENVELOPE_INVALID`, never a raw `SyntaxError`. Does not check the payload type or signatures.
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
  if (!isPlainObject(value) || !exactKeys(value, ['payloadType', 'payload', 'signatures'])) {
    throw new ManifestError(
      'ENVELOPE_INVALID',
      'envelope must be an object with exactly payloadType, payload, signatures',
    );
  }
  const { payloadType, payload, signatures } = value;
  if (typeof payloadType !== 'string' || typeof payload !== 'string' || !Array.isArray(signatures)) {
    throw new ManifestError('ENVELOPE_INVALID', 'envelope fields have the wrong types');
  }
  if (signatures.length === 0 || signatures.length > MAX_SIGNATURES) {
    throw new ManifestError('ENVELOPE_INVALID', `envelope must carry 1-${MAX_SIGNATURES} signatures`);
  }
  const bytes = decodeBase64(payload);
  if (!bytes) throw new ManifestError('ENVELOPE_INVALID', 'payload is not canonical base64');
  const sigs = signatures.map((s, i) => {
    if (
      !isPlainObject(s) ||
      !exactKeys(s, ['keyid', 'sig']) ||
      typeof s.keyid !== 'string' ||
      typeof s.sig !== 'string'
    ) {
      throw new ManifestError('ENVELOPE_INVALID', `signature ${i} must be an object with exactly keyid and sig`);
    }
    const sig = decodeBase64(s.sig);
    if (!sig) throw new ManifestError('ENVELOPE_INVALID', `signature ${i} is not canonical base64`);
    return { keyid: s.keyid, sig };
  });
  return {
    envelope: { payloadType, payload, signatures: signatures as EnvelopeSignature[] },
    payload: bytes,
    signatures: sigs,
  };
}
