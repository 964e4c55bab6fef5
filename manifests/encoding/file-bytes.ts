/**
 * A file's contents as a caller may hold them: its text, or its bytes in any of the forms the platform gives them
 * (`readFileSync(file)`: a Buffer; `await (await fetch(url)).arrayBuffer()` or `await blob.arrayBuffer()`: an
 * ArrayBuffer; `new TextEncoder().encode(text)`: a Uint8Array; any other typed array or a DataView: what
 * `TextDecoder.decode` takes, `ArrayBufferLike | ArrayBufferView` in the signatures, a SharedArrayBuffer too).
 * Isomorphic.
 */
import { bufferBytes, bufferKind, isUint8Array } from '../../store/errors.js';

/**
 * The bytes of `value` as a Uint8Array over the same memory (no copy) when it is an ArrayBuffer, a SharedArrayBuffer or
 * an ArrayBufferView (a Uint8Array or Buffer, another typed array, a DataView, over either buffer), else `undefined`.
 * One of another realm (a worker's, an iframe's, a `vm` context's) is one too; an object that only names itself one
 * (`Symbol.toStringTag`) is not. A detached ArrayBuffer (transferred away) holds no bytes: empty. Shared memory is
 * bytes as any other (the library's one rule), read as the call reads it.
 */
export function fileBytes(value: unknown): Uint8Array | undefined {
  if (isUint8Array(value)) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return bufferBytes(value);
}

// As `readFileSync(file, 'utf8')` reads a file, and so the CLI and the auditor's page read a trust or witness keys
// file: a byte that is not UTF-8 becomes U+FFFD (the text then refused or not as that text is), and a BOM is kept.
// One rule for one file's bytes, whoever reads them.
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** A file's bytes as its UTF-8 text, as the CLI and the page decode a trust or witness keys file. */
export function fileText(bytes: Uint8Array): string {
  // A browser whose TextDecoder predates shared memory in `decode` refuses a view of it: a copy is decoded there.
  return utf8.decode(bufferKind(bytes.buffer) === 'SharedArrayBuffer' ? bytes.slice() : bytes);
}
