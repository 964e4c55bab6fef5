/**
 * A file's contents as a caller may hold them: its text, or its bytes in any of the forms the platform gives them
 * (`readFileSync(file)`: a Buffer; `await (await fetch(url)).arrayBuffer()` or `await blob.arrayBuffer()`: an
 * ArrayBuffer; `new TextEncoder().encode(text)`: a Uint8Array; any other typed array or a DataView: what
 * `TextDecoder.decode` takes, `ArrayBuffer | ArrayBufferView` in the signatures). Isomorphic.
 */
import { isUint8Array } from '../../store/errors.js';

/** ArrayBuffer's own `byteLength` getter: it throws for anything that is no ArrayBuffer (of any realm). */
const arrayBufferLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength')!.get!;

/** Whether `value` is an ArrayBuffer of any realm, by its brand: an object that only says so (`Symbol.toStringTag`) is not. */
function isArrayBuffer(value: unknown): value is ArrayBuffer {
  try {
    arrayBufferLength.call(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * The bytes of `value` as a Uint8Array over the same memory (no copy) when it is an ArrayBuffer or an ArrayBufferView
 * (a Uint8Array or Buffer, another typed array, a DataView), else `undefined`. One of another realm (a worker's, an
 * iframe's, a `vm` context's) is one too; an object that only names itself one (`Symbol.toStringTag`) is not. A
 * detached ArrayBuffer (transferred away) holds no bytes: empty. A SharedArrayBuffer is not a file's bytes (a view of
 * one is a view).
 */
export function fileBytes(value: unknown): Uint8Array | undefined {
  if (isUint8Array(value)) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (isArrayBuffer(value)) return arrayBufferLength.call(value) === 0 ? new Uint8Array(0) : new Uint8Array(value);
  return undefined;
}

// As `readFileSync(file, 'utf8')` reads a file, and so the CLI and the auditor's page read a trust or witness keys
// file: a byte that is not UTF-8 becomes U+FFFD (the text then refused or not as that text is), and a BOM is kept.
// One rule for one file's bytes, whoever reads them.
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** A file's bytes as its UTF-8 text, as the CLI and the page decode a trust or witness keys file. */
export function fileText(bytes: Uint8Array): string {
  return utf8.decode(bytes);
}
