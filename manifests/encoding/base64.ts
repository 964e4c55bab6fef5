/** Strict standard base64 (RFC 4648 section 4, padded) and base64url (unpadded) for small values. Isomorphic. */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DECODE = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) DECODE[ALPHABET.charCodeAt(i)] = i;
const URL = /^[A-Za-z0-9_-]*$/;

/** Standard padded base64: Node's encoder where there is one (one string, no per-character garbage), else the loop. */
export function encodeBase64(bytes: Uint8Array): string {
  if (nodeBuffer) return nodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  return encodeBase64Portable(bytes);
}

/** The portable encoder (browsers; differential-tested against Node's). */
export function encodeBase64Portable(bytes: Uint8Array): string {
  const parts: string[] = [];
  let chunk = '';
  const n = bytes.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    chunk += ALPHABET[v >> 18]! + ALPHABET[(v >> 12) & 63]! + ALPHABET[(v >> 6) & 63]! + ALPHABET[v & 63]!;
    if (chunk.length >= 8192) {
      parts.push(chunk);
      chunk = '';
    }
  }
  if (n - i === 1) {
    const v = bytes[i]! << 16;
    chunk += ALPHABET[v >> 18]! + ALPHABET[(v >> 12) & 63]! + '==';
  } else if (n - i === 2) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    chunk += ALPHABET[v >> 18]! + ALPHABET[(v >> 12) & 63]! + ALPHABET[(v >> 6) & 63]! + '=';
  }
  parts.push(chunk);
  return parts.join('');
}

type NodeBufferLike = Uint8Array & {
  toString(encoding: 'base64'): string;
  write(text: string, encoding: 'base64'): number;
};
const nodeBuffer = (
  globalThis as {
    Buffer?: {
      from(text: string, encoding: 'base64'): NodeBufferLike;
      from(buffer: ArrayBufferLike, byteOffset: number, length: number): NodeBufferLike;
    };
  }
).Buffer;
const PADDED = /^[A-Za-z0-9+/]*={0,2}$/;
/** From this length on, Node's native decoder serves (a manifest payload is a few hundred characters). */
const NATIVE_FROM = 64;

/**
 * Node's decoder is lenient, so the text is held to the canonical form first: alphabet characters,
 * padding only at the end, the unused low bits of the last character zero; then it decodes natively.
 */
function decodeBase64Native(text: string, pad: number, from: NonNullable<typeof nodeBuffer>): Uint8Array | undefined {
  if (!PADDED.test(text)) return undefined;
  if (pad > 0 && (DECODE[text.charCodeAt(text.length - 1 - pad)]! & (pad === 2 ? 15 : 3)) !== 0) return undefined;
  // A copy: Node decodes short texts into a shared pool, whose other bytes a caller must never reach.
  return new Uint8Array(from.from(text, 'base64'));
}

/**
 * Decodes canonical padded base64; returns `undefined` for anything else (so one payload has one encoding):
 * only alphabet characters, padding only at the end, and the unused low bits of the last character zero.
 */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (typeof text !== 'string' || text.length % 4 !== 0) return undefined;
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  if (nodeBuffer && text.length >= NATIVE_FROM) return decodeBase64Native(text, pad, nodeBuffer);
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    const last = i + 4 === text.length;
    const c0 = text.charCodeAt(i),
      c1 = text.charCodeAt(i + 1),
      c2 = text.charCodeAt(i + 2),
      c3 = text.charCodeAt(i + 3);
    const a = c0 < 128 ? DECODE[c0]! : -1;
    const b = c1 < 128 ? DECODE[c1]! : -1;
    if (a < 0 || b < 0) return undefined;
    if (last && pad === 2) {
      if ((b & 15) !== 0) return undefined;
      out[o++] = (a << 2) | (b >> 4);
      break;
    }
    const c = c2 < 128 ? DECODE[c2]! : -1;
    if (c < 0) return undefined;
    if (last && pad === 1) {
      if ((c & 3) !== 0) return undefined;
      out[o++] = (a << 2) | (b >> 4);
      out[o++] = ((b & 15) << 4) | (c >> 2);
      break;
    }
    const d = c3 < 128 ? DECODE[c3]! : -1;
    if (d < 0) return undefined;
    out[o++] = (a << 2) | (b >> 4);
    out[o++] = ((b & 15) << 4) | (c >> 2);
    out[o++] = ((c & 3) << 6) | d;
  }
  return out;
}

/**
 * Canonical padded standard base64 decodes to exactly the bytes that encode back to it, and nothing else
 * does, so one native decode and one native encode compared with the text replace the checks above (every
 * manifest's payload and signature pass here). `undefined` means only "not canonical standard base64".
 */
function decodeCanonicalNative(text: string, from: NonNullable<typeof nodeBuffer>): Uint8Array | undefined {
  const bytes = from.from(text, 'base64');
  // A copy: Node decodes short texts into a shared pool, whose other bytes a caller must never reach.
  return bytes.toString('base64') === text ? new Uint8Array(bytes) : undefined;
}

/** The byte length `text` decodes to if it is padded base64 (either alphabet), else `undefined`. */
export function base64DecodedLength(text: string): number | undefined {
  if (text.length % 4 !== 0) return undefined;
  return (text.length / 4) * 3 - (text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0);
}

/**
 * Where Node's Buffer is at hand: decodes `text` into `target` at `offset` and returns true when `text` is
 * canonical padded standard base64 of exactly `base64DecodedLength(text)` bytes that fit there (the same
 * round trip as above, without a buffer of its own); false otherwise, having maybe written there (the caller
 * then discards `target` and decodes with `decodeBase64Either`).
 */
export function decodeCanonicalBase64Into(text: string, target: Uint8Array, offset: number): boolean {
  const length = base64DecodedLength(text);
  if (!nodeBuffer || length === undefined || text.length < NATIVE_FROM || offset + length > target.length) return false;
  const view = nodeBuffer.from(target.buffer, target.byteOffset + offset, length);
  return view.write(text, 'base64') === length && view.toString('base64') === text;
}

const STANDARD_ONLY = /[+/]/;
const URL_ONLY = /[-_]/;

/**
 * Decodes padded base64 in either alphabet, as DSSE requires of verifiers (envelope.md: "either standard
 * or URL-safe encoding is allowed"); the same canonical rules as `decodeBase64` otherwise. A string that
 * mixes the two alphabets is neither encoding, so it is refused.
 */
export function decodeBase64Either(text: string): Uint8Array | undefined {
  if (typeof text !== 'string') return undefined;
  if (nodeBuffer && text.length >= NATIVE_FROM) {
    const canonical = decodeCanonicalNative(text, nodeBuffer);
    if (canonical) return canonical;
  }
  if (!URL_ONLY.test(text)) return decodeBase64(text);
  if (STANDARD_ONLY.test(text)) return undefined;
  return decodeBase64(text.replace(/-/g, '+').replace(/_/g, '/'));
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return encodeBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function decodeBase64Url(text: string): Uint8Array | undefined {
  if (typeof text !== 'string' || !URL.test(text) || text.length % 4 === 1) return undefined;
  const std = text.replace(/-/g, '+').replace(/_/g, '/');
  return decodeBase64(std + '='.repeat((4 - (std.length % 4)) % 4));
}
