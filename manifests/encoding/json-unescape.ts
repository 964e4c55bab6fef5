/**
 * JSON string unescaping of UTF-8 bytes by a WebAssembly SIMD loop, for the long strings of a large
 * summary on resume (src/summary/decoder.ts). It copies 16 clean bytes at a time, decodes the escapes
 * canonical JSON contains (the two-character ones and \u00XX below 0x80), and stops at the closing
 * quote, at the end of its input (also before an escape cut off there), or at anything else — a raw
 * control character, an invalid escape, any other \u escape — which the caller handles (or refuses)
 * itself. It must pass a self-test against JSON.parse before it is used.
 */
import {
  add,
  br,
  brIf,
  end,
  eq,
  eqz,
  geU,
  get,
  gtU,
  i32,
  ifVoid,
  instantiateKernel,
  selfTested,
  simdScanHead,
  inc,
  load8,
  ltU,
  ne,
  or,
  set,
  shl,
  store32,
  store8,
} from './wasm-asm.js';

/** Bytes unescaped per call. */
export const PIECE = 1 << 20;
const OUT = 0; // r at 0, w at 4 (absolute addresses)
const UNESC = 256; // second character of an escape → the byte it stands for; 'u' → 'u'; 0: invalid
const HEX = 512; // hex digit → its value; 0xff: not a hex digit
const SRC = 1024;
const DST = SRC + PIECE + 64;

/** How a run ended. */
export const UnescapeStatus = {
  /** The input ran out (`read` may stop short of its end, before an escape cut off there). */
  NeedMore: 0,
  /** The closing quote was found; `read` counts it. */
  Closed: 1,
  /** `read` stops at a byte the loop does not decode: a raw control character or an escape it leaves to the caller. */
  Other: 2,
} as const;
export type UnescapeStatus = (typeof UnescapeStatus)[keyof typeof UnescapeStatus];

export interface Unescaper {
  /** Where the caller puts up to PIECE bytes of a string's body. */
  readonly src: Uint8Array;
  /** Unescapes `src[0, length)`; `out` is a view into the module's memory, valid until the next call. */
  run(length: number): { status: UnescapeStatus; read: number; out: Uint8Array };
}

const [R, END, W, B, E, M, S, H, L] = [0, 1, 2, 3, 4, 5, 6, 7, 8]; // params r, end, w; i32 locals
const [V, QUOTE, BACKSLASH, SPACE] = [9, 10, 11, 12]; // v128 locals

function body(): number[] {
  const exitWith = (status: number, depth: number) => [...i32(status), ...set(S), ...br(depth)];
  const l = { r: R, end: END, w: W, m: M, v: V, quote: QUOTE, backslash: BACKSLASH, space: SPACE };
  return [
    // Fast path: 16 bytes at a time while none is a quote, a backslash or a control character; the
    // input used up leaves the block with the status still NeedMore.
    ...simdScanHead(l, 6),
    ...get(R),
    ...load8(0),
    ...set(B),
    // The closing quote.
    ...get(B),
    ...i32(0x22),
    eq,
    ...ifVoid,
    ...inc(R, 1),
    ...exitWith(UnescapeStatus.Closed, 2),
    ...end,
    // An escape.
    ...get(B),
    ...i32(0x5c),
    eq,
    ...ifVoid,
    ...get(R),
    ...i32(1),
    add,
    ...get(END),
    geU,
    ...brIf(2), // cut off after the backslash: NeedMore
    ...get(R),
    ...load8(1),
    ...load8(UNESC),
    ...set(E),
    ...get(E),
    eqz,
    ...ifVoid,
    ...exitWith(UnescapeStatus.Other, 3),
    ...end,
    ...get(E),
    ...i32(0x75),
    ne,
    ...ifVoid,
    ...get(W),
    ...get(E),
    ...store8(0),
    ...inc(W, 1),
    ...inc(R, 2),
    ...br(2),
    ...end,
    // \u00XY with XY < 0x80; any other \u escape is the caller's.
    ...get(R),
    ...i32(6),
    add,
    ...get(END),
    gtU,
    ...brIf(2), // cut off: NeedMore
    ...get(R),
    ...load8(2),
    ...i32(0x30),
    ne,
    ...get(R),
    ...load8(3),
    ...i32(0x30),
    ne,
    or,
    ...ifVoid,
    ...exitWith(UnescapeStatus.Other, 3),
    ...end,
    ...get(R),
    ...load8(4),
    ...load8(HEX),
    ...set(H),
    ...get(R),
    ...load8(5),
    ...load8(HEX),
    ...set(L),
    ...get(H),
    ...i32(7),
    gtU,
    ...get(L),
    ...i32(15),
    gtU,
    or,
    ...ifVoid,
    ...exitWith(UnescapeStatus.Other, 3),
    ...end,
    ...get(W),
    ...get(H),
    ...i32(4),
    shl,
    ...get(L),
    or,
    ...store8(0),
    ...inc(W, 1),
    ...inc(R, 6),
    ...br(1),
    ...end,
    // A raw control character is not valid in a JSON string.
    ...get(B),
    ...i32(0x20),
    ltU,
    ...ifVoid,
    ...exitWith(UnescapeStatus.Other, 2),
    ...end,
    // Any other byte (only reached within the last 16 bytes of the input) is copied.
    ...get(W),
    ...get(B),
    ...store8(0),
    ...inc(W, 1),
    ...inc(R, 1),
    ...br(0),
    ...end,
    ...end,
    ...i32(OUT),
    ...get(R),
    ...store32(0),
    ...i32(OUT),
    ...get(W),
    ...store32(4),
    ...get(S),
    ...end,
  ];
}

function tables(): number[] {
  const data = new Uint8Array(SRC);
  for (const [ch, byte] of [
    ['"', 0x22],
    ['\\', 0x5c],
    ['/', 0x2f],
    ['b', 0x08],
    ['f', 0x0c],
    ['n', 0x0a],
    ['r', 0x0d],
    ['t', 0x09],
    ['u', 0x75],
  ] as const) {
    data[UNESC + ch.charCodeAt(0)] = byte;
  }
  data.fill(0xff, HEX, HEX + 256);
  for (let d = 0; d < 16; d++) {
    data[HEX + d.toString(16).charCodeAt(0)] = d;
    data[HEX + d.toString(16).toUpperCase().charCodeAt(0)] = d;
  }
  return [...data];
}

function instantiate(): Unescaper {
  const kernel = instantiateKernel({ name: 'unescape', code: body(), data: tables(), memoryBytes: DST + PIECE + 64 });
  const { memory } = kernel;
  const unescape = kernel.run as (src: number, srcEnd: number, dst: number) => UnescapeStatus;
  const words = new Int32Array(memory, OUT, 2);
  const dst = new Uint8Array(memory, DST, PIECE + 16);
  return {
    src: new Uint8Array(memory, SRC, PIECE),
    run(length) {
      const status = unescape(SRC, SRC + Math.max(0, Math.min(length, PIECE)), DST);
      return { status, read: words[0]! - SRC, out: dst.subarray(0, words[1]! - DST) };
    },
  };
}

const encoder = new TextEncoder();

/** Canonical escapes at every offset around 16-byte blocks, then the closing quote. */
const PROBE = (() => {
  let s = '';
  for (let c = 0; c < 128; c++) s += String.fromCharCode(c) + 'x'.repeat(c % 19);
  return `${s}é→😀\u2028${'clean run of sixteen+ bytes / '.repeat(3)}"\\"`;
})();

function selfTest(u: Unescaper): boolean {
  const escaped = JSON.stringify(PROBE);
  const { written } = encoder.encodeInto(`${escaped.slice(1)}trailing`, u.src);
  const { status, read, out } = u.run(written);
  const want = encoder.encode(PROBE);
  return (
    status === UnescapeStatus.Closed &&
    read === encoder.encode(escaped).length - 1 &&
    out.length === want.length &&
    out.every((b, i) => b === want[i])
  );
}

let cached: Unescaper | null | undefined;

/** The unescaper, or undefined where WebAssembly (with SIMD) is unavailable or it fails its self-test. */
export function loadUnescaper(): Unescaper | undefined {
  if (cached === undefined) cached = selfTested(instantiate, selfTest);
  return cached ?? undefined;
}
