/**
 * RFC 8785 JSON Canonicalization Scheme (JCS) for the values this library signs and stores:
 * null, booleans, finite numbers, well-formed strings, arrays and plain objects. Isomorphic.
 *
 * Strings need no other treatment than ECMAScript `JSON.stringify` gives them (RFC 8785 section 3.2.2.2);
 * a string that needs no escaping is emitted as it is. For bytes (`canonicalBytes`), long strings skip
 * `JSON.stringify` (~120 MB/s here on text with newlines and quotes, with its UTF-8 encoding) and the intermediate
 * JSON text: each is UTF-8 encoded in 1 MiB pieces and escaped by a small WebAssembly loop
 * (manifests/encoding/json-escape.ts), straight into the output buffer. Where WebAssembly is unavailable the
 * JSON.stringify path serves.
 */
import { typeWithArticle } from '../../store/errors.js';
import { ESCAPE, loadEscaper, releaseEscaper, takeEscaper, type Escaper } from './json-escape.js';

const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;
/** Strings at least this long (in UTF-16 code units) are encoded straight into the output bytes. */
const LONG_STRING = 16 * 1024;
/**
 * `canonicalBytes` escapes strings from this long (UTF-16 code units) up to LONG_STRING with the WebAssembly loop too,
 * each copied out of its memory once: for a summary's few KiB of text with newlines and quotes that is ~2 µs where
 * `JSON.stringify` and the UTF-8 encoding of its result take ~7 (benchmarks/README.md, 2026-12-05 afternoon).
 */
const MID_STRING = 1024;
/** Where `canonicalChunks` cuts a run of short parts into a piece of its own (UTF-16 units, ~1-3 MiB of bytes). */
const TEXT_PIECE = 1024 * 1024;

/** A long string that canonicalBytes encodes and escapes in place in its output buffer. */
class LongString {
  constructor(readonly value: string) {}
}

type Part = string | LongString;

/** From which length (UTF-16 code units) a string is left to the byte encoders as a LongString; Infinity: never. */
type DeferFrom = number;

function pushString(parts: Part[], s: string, deferFrom: DeferFrom): void {
  if (!s.isWellFormed()) throw new TypeError('JCS: string contains a lone surrogate');
  if (s.length >= deferFrom) parts.push(new LongString(s));
  else parts.push(NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);
}

function pushValue(parts: Part[], value: unknown, depth: number, deferFrom: DeferFrom): void {
  if (depth > 64) throw new TypeError('JCS: nesting deeper than 64 levels');
  if (value === null) {
    parts.push('null');
  } else if (typeof value === 'string') {
    pushString(parts, value, deferFrom);
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('JCS: non-finite number');
    parts.push(JSON.stringify(value)); // ECMAScript Number serialization, -0 as 0: RFC 8785 section 3.2.2.3
  } else if (typeof value === 'boolean') {
    parts.push(value ? 'true' : 'false');
  } else if (Array.isArray(value)) {
    parts.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) parts.push(',');
      pushValue(parts, value[i], depth + 1, deferFrom);
    }
    parts.push(']');
  } else if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      throw new TypeError('JCS: only plain objects can be canonicalized');
    // RFC 8785 section 3.2.3: members sorted by their names as arrays of UTF-16 code units.
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    parts.push('{');
    let first = true;
    for (const k of keys) {
      const v = record[k];
      if (v === undefined) continue;
      if (!first) parts.push(',');
      first = false;
      pushString(parts, k, Infinity);
      parts.push(':');
      pushValue(parts, v, depth + 1, deferFrom);
    }
    parts.push('}');
  } else {
    throw new TypeError(`JCS: cannot canonicalize ${typeWithArticle(value)}`);
  }
}

/**
 * The RFC 8785 canonical JSON text of `value`.
 * @throws TypeError for lone surrogates, non-finite numbers, non-plain objects, nesting deeper than 64
 */
export function canonicalize(value: unknown): string {
  const parts: Part[] = [];
  pushValue(parts, value, 0, Infinity);
  return parts.join('');
}

const encoder = new TextEncoder();

/**
 * The UTF-8 bytes of the canonical JSON text of `value` (byte for byte `canonicalize`, encoded).
 * The result may be a view on a slightly larger buffer (room set aside for escapes and not used).
 * @throws TypeError as `canonicalize`
 */
export function canonicalBytes(value: unknown): Uint8Array {
  const parts: Part[] = [];
  pushValue(parts, value, 0, MID_STRING);
  let longest = 0;
  for (const p of parts) if (typeof p !== 'string' && p.value.length > longest) longest = p.value.length;
  if (longest === 0) return encoder.encode(parts.join(''));
  const esc = loadEscaper();
  if (!esc) return encoder.encode(parts.map((p) => (typeof p === 'string' ? p : JSON.stringify(p.value))).join(''));
  return longest < LONG_STRING ? encodeShortParts(parts, esc) : encodeParts(parts, esc);
}

/** encodeShortParts' working buffer, reused (the encoding is synchronous); one grown past SCRATCH_KEPT is not kept. */
let scratch = new Uint8Array(64 * 1024);
const SCRATCH_KEPT = 256 * 1024;

/**
 * Encodes parts whose deferred strings are all shorter than LONG_STRING (at most ~48 KiB of UTF-8 each, well within
 * one escaper piece) into a working buffer, each string escaped in the escaper's memory and copied from there; the
 * result is one copy of the bytes written, sized exactly.
 */
function encodeShortParts(parts: Part[], esc: Escaper): Uint8Array {
  let buf = scratch;
  let pos = 0;
  const room = (n: number) => {
    if (pos + n <= buf.length) return;
    const bigger = new Uint8Array(Math.max(pos + n, 2 * buf.length));
    bigger.set(buf.subarray(0, pos));
    buf = bigger;
  };
  const putText = (text: string) => {
    room(3 * text.length); // UTF-8 takes at most 3 bytes per UTF-16 code unit
    pos += encoder.encodeInto(text, buf.subarray(pos)).written;
  };
  let text = '';
  for (const p of parts) {
    if (typeof p === 'string') {
      text += p;
      continue;
    }
    putText(`${text}"`);
    text = '"';
    const { written } = encoder.encodeInto(p.value, esc.src); // whole: a well-formed string of < 16 Ki units fits
    const escaped = esc.escape(written);
    room(escaped.length);
    buf.set(escaped, pos);
    pos += escaped.length;
  }
  putText(text);
  if (buf !== scratch && buf.length <= SCRATCH_KEPT) scratch = buf;
  return buf.slice(0, pos);
}

/**
 * The canonical bytes of `value` as a sequence of pieces (each at most a few MiB), for writers that
 * stream: a long string is encoded piece by piece as the consumer pulls, so encoding can overlap with
 * writing. The concatenation equals `canonicalBytes(value)`. A piece may be a view into the escaper's
 * memory: it is valid until the next piece is pulled (copy it to keep it).
 * @throws TypeError as `canonicalize` (before the first piece is produced)
 */
export function canonicalChunks(value: unknown): Iterable<Uint8Array> {
  const parts: Part[] = [];
  pushValue(parts, value, 0, LONG_STRING);
  if (!loadEscaper()) return [canonicalBytes(value)];
  if (!parts.some((p) => p instanceof LongString) && parts.reduce((n, p) => n + (p as string).length, 0) < TEXT_PIECE)
    return [canonicalBytes(value)];
  return (function* () {
    // An escaper of this generator's own: its pieces are views of its memory, valid until the next pull
    // whatever other encodings run meanwhile (a consumer may await between pulls), and never copied here.
    const esc = takeEscaper()!;
    try {
      let text = '';
      for (const p of parts) {
        if (typeof p === 'string') {
          text += p;
          // Many strings each shorter than LONG_STRING: still pieces of at most about TEXT_PIECE.
          if (text.length >= TEXT_PIECE) {
            yield encoder.encode(text);
            text = '';
          }
          continue;
        }
        yield encoder.encode(`${text}"`);
        text = '"';
        for (let read = 0; read < p.value.length;) {
          const { read: r, written } = encoder.encodeInto(read === 0 ? p.value : p.value.substring(read), esc.src);
          read += r;
          yield esc.escape(written);
        }
      }
      yield encoder.encode(text);
    } finally {
      releaseEscaper(esc);
    }
  })();
}

const nodeBuffer = (globalThis as { Buffer?: { byteLength(s: string, encoding: 'utf8'): number } }).Buffer;

/** UTF-8 length of a well-formed string. */
function utf8Length(s: string): number {
  if (nodeBuffer) return nodeBuffer.byteLength(s, 'utf8');
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Room for a string's escapes, estimated from 2,048-character samples at four places with a margin (a shortfall costs a copy). */
function escapeRoom(s: string, bytes: number): number {
  const WINDOW = 2048;
  let extra = 0;
  let seen = 0;
  for (const at of [0, 0.33, 0.66, 1]) {
    const start = Math.max(0, Math.min(s.length - WINDOW, Math.floor(s.length * at)));
    const stop = Math.min(s.length, start + WINDOW);
    for (let i = start; i < stop; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80 && ESCAPE[c] !== 0) extra += ESCAPE[c] === 0x75 ? 5 : 1;
    }
    seen += stop - start;
  }
  return Math.min(5 * bytes, Math.ceil((extra / Math.max(1, seen)) * s.length * 1.5 + bytes / 64) + 64);
}

/** Encodes parts into one buffer: short parts as text, long strings piece by piece through the escaper. */
function encodeParts(parts: Part[], esc: Escaper): Uint8Array {
  const plan: Array<Uint8Array | string> = [];
  let capacity = 0;
  let text = '';
  for (const p of [...parts, '']) {
    if (typeof p === 'string' && p !== '') {
      text += p;
      continue;
    }
    if (text.length > 0) {
      const b = encoder.encode(text);
      plan.push(b);
      capacity += b.length;
      text = '';
    }
    if (p instanceof LongString) {
      const bytes = utf8Length(p.value);
      plan.push(p.value);
      capacity += 2 + bytes + escapeRoom(p.value, bytes);
    }
  }
  let out = new Uint8Array(capacity);
  let pos = 0;
  const put = (bytes: Uint8Array) => {
    if (pos + bytes.length > out.length) {
      // The room was underestimated: grow by half again (rare; costs one copy).
      const bigger = new Uint8Array(Math.max(pos + bytes.length, Math.ceil(out.length * 1.5)));
      bigger.set(out.subarray(0, pos));
      out = bigger;
    }
    out.set(bytes, pos);
    pos += bytes.length;
  };
  const QUOTE = Uint8Array.of(0x22);
  for (const seg of plan) {
    if (seg instanceof Uint8Array) {
      put(seg);
      continue;
    }
    put(QUOTE);
    for (let read = 0; read < seg.length;) {
      const { read: r, written } = encoder.encodeInto(read === 0 ? seg : seg.substring(read), esc.src);
      read += r;
      put(esc.escape(written));
    }
    put(QUOTE);
  }
  return out.subarray(0, pos);
}
