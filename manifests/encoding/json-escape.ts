/**
 * JSON string escaping of UTF-8 bytes by a small WebAssembly loop, for the long strings of canonical
 * bytes (manifests/encoding/canonical.ts). Two variants, both assembled here from readable opcodes (no binary
 * blob): a SIMD one that copies 16 clean bytes at a time and jumps straight to the next byte to escape,
 * and a byte-at-a-time one for engines without WebAssembly SIMD. Each must reproduce JSON.stringify's
 * escapes on a probe before it is used; where neither loads, callers fall back to JSON.stringify.
 */

import {
  and,
  block,
  br,
  brIf,
  end,
  eqz,
  geU,
  get,
  i32,
  I32,
  ifVoid,
  inc,
  instantiateKernel,
  selfTested,
  simdScanHead,
  load8,
  loop,
  ne,
  orElse,
  set,
  shrU,
  store8,
  vec,
} from './wasm-asm.js';

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

const [R, END, W, B, E, M] = [0, 1, 2, 3, 4, 5]; // params r, end, w; i32 locals b, e, m
const [V, QUOTE, BACKSLASH, SPACE] = [6, 7, 8, 9]; // v128 locals (SIMD variant only)

/**
 * Escapes the byte at r (r < end is the caller's check) and jumps back to the loop `depth` levels up:
 * b = mem[r++]; e = ESCAPE[b]; e == 0 ? emit b : emit '\\', then e, or 'u' '0' '0' hex(b >> 4) hex(b & 15).
 */
const escapeOne = (depth: number) => [
  ...get(R),
  ...load8(0),
  ...set(B),
  ...inc(R, 1),
  ...get(B),
  ...load8(0),
  ...set(E),
  ...get(E),
  eqz,
  ...ifVoid,
  ...get(W),
  ...get(B),
  ...store8(0),
  ...inc(W, 1),
  ...br(depth + 1),
  ...end,
  ...get(W),
  ...i32(0x5c),
  ...store8(0),
  ...get(E),
  ...i32(0x75),
  ne,
  ...ifVoid,
  ...get(W),
  ...get(E),
  ...store8(1),
  ...inc(W, 2),
  ...orElse,
  ...get(W),
  ...i32(0x75),
  ...store8(1),
  ...get(W),
  ...i32(0x30),
  ...store8(2),
  ...get(W),
  ...i32(0x30),
  ...store8(3),
  ...get(W),
  ...get(B),
  ...i32(4),
  shrU,
  ...load8(256),
  ...store8(4),
  ...get(W),
  ...get(B),
  ...i32(15),
  and,
  ...load8(256),
  ...store8(5),
  ...inc(W, 6),
  ...end,
  ...br(depth),
];

/** for (;;) { if (r >= end) break; escapeOne } */
function scalarBody(): number[] {
  return [
    ...vec([[3, I32]]),
    ...block,
    ...loop,
    ...get(R),
    ...get(END),
    geU,
    ...brIf(1),
    ...escapeOne(0),
    ...end,
    ...end,
    ...get(W),
    ...end,
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
  const l = { r: R, end: END, w: W, m: M, v: V, quote: QUOTE, backslash: BACKSLASH, space: SPACE };
  return [...simdScanHead(l, 3), ...escapeOne(0), ...end, ...end, ...get(W), ...end];
}

function instantiate(kind: EscaperKind): Escaper {
  const data = [...ESCAPE, ...encoder.encode('0123456789abcdef')];
  const code = kind === 'simd' ? simdBody() : scalarBody();
  const { memory, run } = instantiateKernel({ name: 'escape', code, data, memoryBytes: DST + DST_ROOM });
  const dst = new Uint8Array(memory, DST, DST_ROOM);
  return {
    kind,
    src: new Uint8Array(memory, SRC, PIECE),
    escape: (length: number) => dst.subarray(0, run(SRC, SRC + Math.max(0, Math.min(length, PIECE)), DST) - DST),
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
    esc = selfTested(() => instantiate(kind), selfTest);
    cache.set(kind, esc);
  }
  return esc ?? undefined;
}

/** Escapers returned by streams that finished, kept for the next stream. */
const idle: Escaper[] = [];
const KEEP_IDLE = 2;

/**
 * An escaper of the `auto` kind for one stream's exclusive use: its output stays valid until its owner
 * escapes again, so a stream can hand out views of it without a copy, however other encodings interleave.
 * Give it back with `releaseEscaper` when the stream ends. Undefined where no escaper loads.
 */
export function takeEscaper(): Escaper | undefined {
  const kind = loadEscaper()?.kind;
  if (kind === undefined) return undefined;
  return idle.pop() ?? instantiate(kind);
}

export function releaseEscaper(esc: Escaper): void {
  if (idle.length < KEEP_IDLE && !idle.includes(esc)) idle.push(esc);
}
