/** Strict standard base64 (RFC 4648 section 4, padded) and base64url (unpadded) for small values. Isomorphic. */
const STD = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const URL = /^[A-Za-z0-9_-]*$/;

export function encodeBase64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** Decodes canonical padded base64; returns `undefined` for anything else (so one payload has one encoding). */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (typeof text !== 'string' || !STD.test(text)) return undefined;
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return encodeBase64(out) === text ? out : undefined;
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return encodeBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function decodeBase64Url(text: string): Uint8Array | undefined {
  if (typeof text !== 'string' || !URL.test(text) || text.length % 4 === 1) return undefined;
  const std = text.replace(/-/g, '+').replace(/_/g, '/');
  const out = decodeBase64(std + '='.repeat((4 - (std.length % 4)) % 4));
  return out && encodeBase64Url(out) === text ? out : undefined;
}
