/**
 * RFC 8785 JSON Canonicalization Scheme (JCS) for the values this library signs and stores:
 * null, booleans, finite numbers, well-formed strings, arrays and plain objects. Isomorphic.
 *
 * Strings need no other treatment than ECMAScript `JSON.stringify` gives them (RFC 8785 section 3.2.2.2);
 * a string that needs no escaping is emitted as it is. For bytes (`canonicalBytes`), long strings skip
 * `JSON.stringify` (~70 MB/s on text with newlines and quotes, slower than the disk) and the intermediate
 * JSON text: each is UTF-8 encoded in 1 MiB pieces and escaped by a small WebAssembly loop, straight
 * into the output buffer. Where WebAssembly is unavailable the JSON.stringify path serves.
 */
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;
/** Strings at least this long (in UTF-16 code units) are encoded straight into the output bytes. */
const LONG_STRING = 16 * 1024;

/** A long string that canonicalBytes encodes and escapes in place in its output buffer. */
class LongString {
  constructor(readonly value: string) {}
}

type Part = string | LongString;

function pushString(parts: Part[], s: string, deferLong: boolean): void {
  if (!s.isWellFormed()) throw new TypeError('JCS: string contains a lone surrogate');
  if (deferLong && s.length >= LONG_STRING) parts.push(new LongString(s));
  else parts.push(NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);
}

function pushValue(parts: Part[], value: unknown, depth: number, deferLong: boolean): void {
  if (depth > 64) throw new TypeError('JCS: nesting deeper than 64 levels');
  if (value === null) {
    parts.push('null');
  } else if (typeof value === 'string') {
    pushString(parts, value, deferLong);
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('JCS: non-finite number');
    parts.push(JSON.stringify(value)); // ECMAScript Number serialization, -0 as 0: RFC 8785 section 3.2.2.3
  } else if (typeof value === 'boolean') {
    parts.push(value ? 'true' : 'false');
  } else if (Array.isArray(value)) {
    parts.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) parts.push(',');
      pushValue(parts, value[i], depth + 1, deferLong);
    }
    parts.push(']');
  } else if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) throw new TypeError('JCS: only plain objects can be canonicalized');
    // RFC 8785 section 3.2.3: members sorted by their names as arrays of UTF-16 code units.
    const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
    parts.push('{');
    keys.forEach((k, i) => {
      if (i > 0) parts.push(',');
      pushString(parts, k, false);
      parts.push(':');
      pushValue(parts, (value as Record<string, unknown>)[k], depth + 1, deferLong);
    });
    parts.push('}');
  } else {
    throw new TypeError(`JCS: cannot canonicalize a ${typeof value}`);
  }
}

/**
 * The RFC 8785 canonical JSON text of `value`.
 * @throws TypeError for lone surrogates, non-finite numbers, non-plain objects, nesting deeper than 64
 */
export function canonicalize(value: unknown): string {
  const parts: Part[] = [];
  pushValue(parts, value, 0, false);
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
  pushValue(parts, value, 0, true);
  const esc = parts.some((p) => p instanceof LongString) ? escaper() : undefined;
  if (esc) return encodeParts(parts, esc);
  return encoder.encode(parts.map((p) => (typeof p === 'string' ? p : JSON.stringify(p.value))).join(''));
}

/**
 * The canonical bytes of `value` as a sequence of pieces (each at most a few MiB), for writers that
 * stream: a long string is encoded piece by piece as the consumer pulls, so encoding can overlap with
 * writing. The concatenation equals `canonicalBytes(value)`. Pieces are fresh arrays, free to keep.
 * @throws TypeError as `canonicalize` (before the first piece is produced)
 */
export function canonicalChunks(value: unknown): Iterable<Uint8Array> {
  const parts: Part[] = [];
  pushValue(parts, value, 0, true);
  const esc = escaper();
  if (!esc || !parts.some((p) => p instanceof LongString)) return [canonicalBytes(value)];
  return (function* () {
    let text = '';
    for (const p of parts) {
      if (typeof p === 'string') {
        text += p;
        continue;
      }
      yield encoder.encode(`${text}"`);
      text = '"';
      for (let read = 0; read < p.value.length; ) {
        const { read: r, written } = encoder.encodeInto(read === 0 ? p.value : p.value.substring(read), esc.src);
        read += r;
        yield esc.dst.slice(0, esc.escape(SRC, SRC + written, DST) - DST);
      }
    }
    yield encoder.encode(text);
  })();
}

// Second byte of the two-byte escapes; 0x75 ('u') marks a \u00XX escape; 0: the byte stays as it is. Bytes of
// multi-byte UTF-8 sequences are all >= 0x80, so escaping byte by byte is escaping character by character.
const ESCAPE = new Uint8Array(256);
for (let c = 0; c < 0x20; c++) ESCAPE[c] = 0x75;
ESCAPE[0x08] = 0x62; // \b
ESCAPE[0x09] = 0x74; // \t
ESCAPE[0x0a] = 0x6e; // \n
ESCAPE[0x0c] = 0x66; // \f
ESCAPE[0x0d] = 0x72; // \r
ESCAPE[0x22] = 0x22; // \"
ESCAPE[0x5c] = 0x5c; // \\

const PIECE = 1 << 20;
const SRC = 1024;
const DST = SRC + PIECE;

/** `escape(src, srcEnd, dst)` → dstEnd, over a memory holding ESCAPE at 0, hex digits at 256, SRC and DST. */
interface Escaper {
  escape(src: number, srcEnd: number, dst: number): number;
  src: Uint8Array;
  dst: Uint8Array;
}

/**
 * The escape loop as a WebAssembly module, assembled here from readable opcodes (no binary blob).
 * Equivalent to: for each byte b of [r, end): e = ESCAPE[b]; e == 0 ? emit b : emit '\\', then e, or
 * 'u' '0' '0' hex(b >> 4) hex(b & 15) when e is 'u'. Tested byte for byte against JSON.stringify.
 */
function assembleEscaper(): Uint8Array {
  const uleb = (n: number): number[] => {
    const out: number[] = [];
    do {
      out.push((n & 0x7f) | (n >>> 7 ? 0x80 : 0));
      n >>>= 7;
    } while (n);
    return out;
  };
  const vec = (items: number[][]) => [...uleb(items.length), ...items.flat()];
  const section = (id: number, bytes: number[]) => [id, ...uleb(bytes.length), ...bytes];
  const [R, END, W, B, E] = [0, 1, 2, 3, 4]; // params r, end, w; locals b, e
  const get = (i: number) => [0x20, i];
  const set = (i: number) => [0x21, i];
  const i32 = (n: number) => [0x41, ...(n < 64 ? [n] : [(n & 0x7f) | 0x80, n >> 7])]; // signed LEB128 of 0..8191
  const [add, and, shrU, eqz, ne, geU] = [0x6a, 0x71, 0x76, 0x45, 0x47, 0x4f];
  const load8 = (offset: number) => [0x2d, 0, ...uleb(offset)];
  const store8 = (offset: number) => [0x3a, 0, ...uleb(offset)];
  const inc = (i: number, n: number) => [...get(i), ...i32(n), add, ...set(i)];
  const [block, loop, ifVoid, orElse, end] = [[0x02, 0x40], [0x03, 0x40], [0x04, 0x40], [0x05], [0x0b]];
  const br = (depth: number) => [0x0c, depth];
  const brIf = (depth: number) => [0x0d, depth];
  const code = [
    ...vec([[2, 0x7f]]),
    ...block, ...loop,
    ...get(R), ...get(END), geU, ...brIf(1),
    ...get(R), ...load8(0), ...set(B), ...inc(R, 1),
    ...get(B), ...load8(0), ...set(E),
    ...get(E), eqz, ...ifVoid, ...get(W), ...get(B), ...store8(0), ...inc(W, 1), ...br(1), ...end,
    ...get(W), ...i32(0x5c), ...store8(0),
    ...get(E), ...i32(0x75), ne, ...ifVoid,
    ...get(W), ...get(E), ...store8(1), ...inc(W, 2),
    ...orElse,
    ...get(W), ...i32(0x75), ...store8(1),
    ...get(W), ...i32(0x30), ...store8(2),
    ...get(W), ...i32(0x30), ...store8(3),
    ...get(W), ...get(B), ...i32(4), shrU, ...load8(256), ...store8(4),
    ...get(W), ...get(B), ...i32(15), and, ...load8(256), ...store8(5),
    ...inc(W, 6),
    ...end,
    ...br(0),
    ...end, ...end,
    ...get(W), ...end,
  ];
  const data = [...ESCAPE, ...encoder.encode('0123456789abcdef')];
  const pages = Math.ceil((DST + 6 * PIECE + 16) / 65536);
  const ascii = (s: string) => vec([...s].map((ch) => [ch.charCodeAt(0)]));
  return Uint8Array.from([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec([[0x60, ...vec([[0x7f], [0x7f], [0x7f]]), ...vec([[0x7f]])]])), // (i32 i32 i32) → i32
    ...section(3, vec([[0]])),
    ...section(5, vec([[0x00, ...uleb(pages)]])),
    ...section(7, vec([[...ascii('memory'), 0x02, 0], [...ascii('escape'), 0x00, 0]])),
    ...section(10, vec([[...uleb(code.length), ...code]])),
    ...section(11, vec([[0x00, ...i32(0), ...end, ...uleb(data.length), ...data]])),
  ]);
}

/** The part of the WebAssembly API used here (the lib setting carries no WebAssembly types). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

let cachedEscaper: Escaper | null | undefined;

/** The WebAssembly escaper, or undefined where WebAssembly is unavailable (then JSON.stringify serves). */
function escaper(): Escaper | undefined {
  if (cachedEscaper === undefined) {
    try {
      const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
      if (!wasm) throw new Error('no WebAssembly');
      const { exports } = new wasm.Instance(new wasm.Module(assembleEscaper()));
      const memory = exports.memory as { buffer: ArrayBuffer };
      cachedEscaper = {
        escape: exports.escape as Escaper['escape'],
        src: new Uint8Array(memory.buffer, SRC, PIECE),
        dst: new Uint8Array(memory.buffer, DST, 6 * PIECE + 16),
      };
    } catch {
      cachedEscaper = null;
    }
  }
  return cachedEscaper ?? undefined;
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
    else if (c >= 0xd800 && c < 0xdc00) (n += 4), i++;
    else n += 3;
  }
  return n;
}

/** Room for a string's escapes, estimated from samples at four places with a margin (a shortfall costs a copy). */
function escapeRoom(s: string, bytes: number): number {
  const WINDOW = 8192;
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
  return Math.min(5 * bytes, Math.ceil(((extra / Math.max(1, seen)) * s.length) * 1.5 + bytes / 64) + 64);
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
    for (let read = 0; read < seg.length; ) {
      const { read: r, written } = encoder.encodeInto(read === 0 ? seg : seg.substring(read), esc.src);
      read += r;
      put(esc.dst.subarray(0, esc.escape(SRC, SRC + written, DST) - DST));
    }
    put(QUOTE);
  }
  return out.subarray(0, pos);
}
