/**
 * A file's contents as a caller may hold them: its text, or its bytes in any of the forms the platform gives them
 * (`readFileSync(file)`: a Buffer; `await (await fetch(url)).arrayBuffer()` or `await blob.arrayBuffer()`: an
 * ArrayBuffer; `new TextEncoder().encode(text)`: a Uint8Array; any other typed array or a DataView: what
 * `TextDecoder.decode` takes, `ArrayBuffer | ArrayBufferView` in the signatures). Isomorphic.
 */

/**
 * The bytes of `value` as a Uint8Array over the same memory (no copy) when it is an ArrayBuffer or an ArrayBufferView
 * (a Uint8Array or Buffer, another typed array, a DataView), else `undefined`. An ArrayBuffer of another realm (a
 * worker's, an iframe's, a `vm` context's) is one too.
 */
export function fileBytes(value: unknown): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer || Object.prototype.toString.call(value) === '[object ArrayBuffer]')
    return new Uint8Array(value as ArrayBuffer);
  return undefined;
}

// Fatal: bytes that are not UTF-8 are refused, never read with U+FFFD in place of what they held. A BOM is kept, as
// `readFileSync(file, 'utf8')` keeps it: the bytes read as that text does.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A file's bytes as its UTF-8 text, or `undefined` when they are not UTF-8. */
export function fileText(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}
