/**
 * JSON string escaping of UTF-8 bytes by a small WebAssembly loop, for the long strings of canonical
 * bytes (manifests/canonical.ts). Two variants, both assembled here from readable opcodes (no binary
 * blob): a SIMD one that copies 16 clean bytes at a time and jumps straight to the next byte to escape,
 * and a byte-at-a-time one for engines without WebAssembly SIMD. Each must reproduce JSON.stringify's
 * escapes on a probe before it is used; where neither loads, callers fall back to JSON.stringify.
 */

// Second byte of the two-byte escapes; 0x75 ('u') marks a \u00XX escape; 0: the byte stays as it is. Bytes of
// multi-byte UTF-8 sequences are all >= 0x80, so escaping byte by byte is escaping character by character.
export const ESCAPE = new Uint8Array(256);
for (let c = 0; c < 0x20; c++) ESCAPE[c] = 0x75;
ESCAPE[0x08] = 0x62; // \b
ESCAPE[0x09] = 0x74; // \t
ESCAPE[0x0a] = 0x6e; // \n
ESCAPE[0x0c] = 0x66; // \f
ESCAPE[0x0d] = 0x72; // \r
ESCAPE[0x22] = 0x22; // \"
ESCAPE[0x5c] = 0x5c; // \\

/** Bytes escaped per call. */
export const PIECE = 1 << 20;
const SRC = 1024;
const DST = SRC + PIECE;
/** Each byte becomes at most 6 (\u00XX); the SIMD loop may store 16 bytes past its last output byte. */
const DST_ROOM = 6 * PIECE + 16;

export type EscaperKind = 'simd' | 'scalar';

export interface Escaper {
  readonly kind: EscaperKind;
  /** Where the caller puts up to PIECE bytes of UTF-8 to escape. */
  readonly src: Uint8Array;
  /** Escapes `src[0, length)`; the result is a view into the module's memory, valid until the next call. */
  escape(length: number): Uint8Array;
}

const encoder = new TextEncoder();

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
const get = (i: number) => [0x20, i];
const set = (i: number) => [0x21, i];
const i32 = (n: number) => [0x41, ...(n < 64 ? [n] : [(n & 0x7f) | 0x80, n >> 7])]; // signed LEB128 of 0..8191
const [add, and, shrU, eqz, ne, geU, leU, ctz] = [0x6a, 0x71, 0x76, 0x45, 0x47, 0x4f, 0x4d, 0x68];
const load8 = (offset: number) => [0x2d, 0, ...uleb(offset)];
const store8 = (offset: number) => [0x3a, 0, ...uleb(offset)];
const inc = (i: number, n: number) => [...get(i), ...i32(n), add, ...set(i)];
const addTo = (i: number, j: number) => [...get(i), ...get(j), add, ...set(i)];
const [block, loop, ifVoid, orElse, end] = [[0x02, 0x40], [0x03, 0x40], [0x04, 0x40], [0x05], [0x0b]];
const br = (depth: number) => [0x0c, depth];
const brIf = (depth: number) => [0x0d, depth];
// WebAssembly SIMD (prefix 0xfd).
const simd = (op: number) => [0xfd, ...uleb(op)];
const [v128Load, v128Store] = [[...simd(0x00), 0, 0], [...simd(0x0b), 0, 0]];
const [splat8, eq8, ltU8, or128, bitmask8] = [simd(0x0f), simd(0x23), simd(0x26), simd(0x50), simd(0x64)];

const [R, END, W, B, E, M] = [0, 1, 2, 3, 4, 5]; // params r, end, w; i32 locals b, e, m
const [V, QUOTE, BACKSLASH, SPACE] = [6, 7, 8, 9]; // v128 locals (SIMD variant only)

/**
 * Escapes the byte at r (r < end is the caller's check) and jumps back to the loop `depth` levels up:
 * b = mem[r++]; e = ESCAPE[b]; e == 0 ? emit b : emit '\\', then e, or 'u' '0' '0' hex(b >> 4) hex(b & 15).
 */
const escapeOne = (depth: number) => [
  ...get(R), ...load8(0), ...set(B), ...inc(R, 1),
  ...get(B), ...load8(0), ...set(E),
  ...get(E), eqz, ...ifVoid, ...get(W), ...get(B), ...store8(0), ...inc(W, 1), ...br(depth + 1), ...end,
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
  ...br(depth),
];

/** for (;;) { if (r >= end) break; escapeOne } */
function scalarBody(): number[] {
  return [
    ...vec([[3, 0x7f]]),
    ...block, ...loop,
    ...get(R), ...get(END), geU, ...brIf(1),
    ...escapeOne(0),
    ...end, ...end,
    ...get(W), ...end,
  ];
}

/**
 * for (;;) {
 *   if (r + 16 <= end) {
 *     v = load16(r); store16(w, v); m = bitmask(v == '"' | v == '\\' | v < 0x20);
 *     if (m == 0) { r += 16; w += 16; continue; }
 *     m = ctz(m); r += m; w += m;          // the clean prefix is already stored; mem[r] needs escaping
 *   } else if (r >= end) break;
 *   escapeOne
 * }
 */
function simdBody(): number[] {
  const splatConst = (c: number, local: number) => [...i32(c), ...splat8, ...set(local)];
  return [
    ...vec([[3, 0x7f], [4, 0x7b]]),
    ...splatConst(0x22, QUOTE), ...splatConst(0x5c, BACKSLASH), ...splatConst(0x20, SPACE),
    ...block, ...loop,
    ...get(R), ...i32(16), add, ...get(END), leU, ...ifVoid,
    ...get(R), ...v128Load, ...set(V),
    ...get(W), ...get(V), ...v128Store,
    ...get(V), ...get(QUOTE), ...eq8, ...get(V), ...get(BACKSLASH), ...eq8, ...or128, ...get(V), ...get(SPACE), ...ltU8, ...or128,
    ...bitmask8, ...set(M),
    ...get(M), eqz, ...ifVoid, ...inc(R, 16), ...inc(W, 16), ...br(2), ...end,
    ...get(M), ctz, ...set(M), ...addTo(R, M), ...addTo(W, M),
    ...orElse,
    ...get(R), ...get(END), geU, ...brIf(2),
    ...end,
    ...escapeOne(0),
    ...end, ...end,
    ...get(W), ...end,
  ];
}

function assemble(code: number[]): Uint8Array {
  const data = [...ESCAPE, ...encoder.encode('0123456789abcdef')];
  const pages = Math.ceil((DST + DST_ROOM) / 65536);
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

function instantiate(kind: EscaperKind): Escaper {
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  if (!wasm) throw new Error('no WebAssembly');
  const { exports } = new wasm.Instance(new wasm.Module(assemble(kind === 'simd' ? simdBody() : scalarBody())));
  const memory = exports.memory as { buffer: ArrayBuffer };
  const run = exports.escape as (src: number, srcEnd: number, dst: number) => number;
  const dst = new Uint8Array(memory.buffer, DST, DST_ROOM);
  return {
    kind,
    src: new Uint8Array(memory.buffer, SRC, PIECE),
    escape: (length: number) => dst.subarray(0, run(SRC, SRC + Math.min(length, PIECE), DST) - DST),
  };
}

/** Every ASCII byte and some multi-byte characters, in runs long and short, around 16-byte boundaries. */
const PROBE = (() => {
  let s = '';
  for (let c = 0; c < 128; c++) s += String.fromCharCode(c) + 'x'.repeat(c % 19);
  return `${s}é→😀\u2028${'clean run of sixteen+ bytes '.repeat(3)}"\\"`;
})();

/** The variant's output on the probe equals JSON.stringify's (quotes aside), or it is not used. */
function selfTest(esc: Escaper): boolean {
  const { written } = encoder.encodeInto(PROBE, esc.src);
  const got = esc.escape(written);
  const want = encoder.encode(JSON.stringify(PROBE).slice(1, -1));
  return got.length === want.length && got.every((b, i) => b === want[i]);
}

const cache = new Map<EscaperKind, Escaper | null>();

/**
 * The escaper of the given kind, or of the fastest kind that loads and passes its self-test ('auto').
 * Undefined where none does (no WebAssembly, or no SIMD for 'simd').
 */
export function loadEscaper(kind: EscaperKind | 'auto' = 'auto'): Escaper | undefined {
  if (kind === 'auto') return loadEscaper('simd') ?? loadEscaper('scalar');
  let esc = cache.get(kind);
  if (esc === undefined) {
    try {
      esc = instantiate(kind);
      if (!selfTest(esc)) esc = null;
    } catch {
      esc = null;
    }
    cache.set(kind, esc);
  }
  return esc ?? undefined;
}
