/**
 * A tiny WebAssembly assembler for the library's two byte loops (JSON escaping and unescaping): opcodes
 * as readable helpers, and one function to build and instantiate a module of one exported function
 * `(i32, i32, i32) → i32` over a memory with a data segment at address 0. No binary blob is shipped.
 */
const uleb = (n: number): number[] => {
  const out: number[] = [];
  do {
    out.push((n & 0x7f) | (n >>> 7 ? 0x80 : 0));
    n >>>= 7;
  } while (n);
  return out;
};
export const vec = (items: number[][]) => [...uleb(items.length), ...items.flat()];
const section = (id: number, bytes: number[]) => [id, ...uleb(bytes.length), ...bytes];

// Locals and constants.
export const get = (i: number) => [0x20, i];
export const set = (i: number) => [0x21, i];
export const i32 = (n: number) => [0x41, ...(n < 64 ? [n] : [(n & 0x7f) | 0x80, n >> 7])]; // signed LEB128 of 0..8191
export const [I32, V128] = [0x7f, 0x7b];
// i32 arithmetic and comparisons.
export const [eqz, eq, ne, ltU, gtU, leU, geU] = [0x45, 0x46, 0x47, 0x49, 0x4b, 0x4d, 0x4f];
export const [ctz, add, and, or, shl, shrU] = [0x68, 0x6a, 0x71, 0x72, 0x74, 0x76];
// Memory.
export const load8 = (offset: number) => [0x2d, 0, ...uleb(offset)];
export const store8 = (offset: number) => [0x3a, 0, ...uleb(offset)];
export const store32 = (offset: number) => [0x36, 2, ...uleb(offset)];
// Control.
export const [block, loop, ifVoid, orElse, end] = [[0x02, 0x40], [0x03, 0x40], [0x04, 0x40], [0x05], [0x0b]];
export const br = (depth: number) => [0x0c, depth];
export const brIf = (depth: number) => [0x0d, depth];
// Composites.
export const inc = (i: number, n: number) => [...get(i), ...i32(n), add, ...set(i)];
export const addTo = (i: number, j: number) => [...get(i), ...get(j), add, ...set(i)];
// WebAssembly SIMD (prefix 0xfd).
const simd = (op: number) => [0xfd, ...uleb(op)];
export const [v128Load, v128Store] = [
  [...simd(0x00), 0, 0],
  [...simd(0x0b), 0, 0],
];
export const [splat8, eq8, ltU8, or128, bitmask8] = [simd(0x0f), simd(0x23), simd(0x26), simd(0x50), simd(0x64)];

/** The locals a byte loop over [r, end) writing at w uses for the SIMD scan (`scanSplats`, `scanCleanBytes`). */
export interface ScanLocals {
  r: number;
  end: number;
  w: number;
  /** i32 scratch */
  m: number;
  /** v128 scratch */
  v: number;
  /** v128 registers holding '"', '\\' and 0x20 in every lane (set by `scanSplats`) */
  quote: number;
  backslash: number;
  space: number;
}

/** Sets the three splat registers of `scanCleanBytes`. */
export function scanSplats(l: ScanLocals): number[] {
  const splat = (c: number, local: number) => [...i32(c), ...splat8, ...set(local)];
  return [...splat(0x22, l.quote), ...splat(0x5c, l.backslash), ...splat(0x20, l.space)];
}

/**
 * The SIMD fast path, placed first inside `block { loop { … } }`. While 16 bytes remain: stores them at w;
 * when none is '"', '\\' or below 0x20, advances r and w by 16 and continues the loop; else advances both
 * to the first such byte (the clean prefix is already stored) and falls through with r at it. With fewer
 * than 16 bytes left: leaves the block when r reached end, else falls through (the byte at r may be any).
 */
export function scanCleanBytes(l: ScanLocals): number[] {
  return [
    ...get(l.r),
    ...i32(16),
    add,
    ...get(l.end),
    leU,
    ...ifVoid,
    ...get(l.r),
    ...v128Load,
    ...set(l.v),
    ...get(l.w),
    ...get(l.v),
    ...v128Store,
    ...get(l.v),
    ...get(l.quote),
    ...eq8,
    ...get(l.v),
    ...get(l.backslash),
    ...eq8,
    ...or128,
    ...get(l.v),
    ...get(l.space),
    ...ltU8,
    ...or128,
    ...bitmask8,
    ...set(l.m),
    ...get(l.m),
    eqz,
    ...ifVoid,
    ...inc(l.r, 16),
    ...inc(l.w, 16),
    ...br(2),
    ...end,
    ...get(l.m),
    ctz,
    ...set(l.m),
    ...addTo(l.r, l.m),
    ...addTo(l.w, l.m),
    ...orElse,
    ...get(l.r),
    ...get(l.end),
    geU,
    ...brIf(2),
    ...end,
  ];
}

/** The part of the WebAssembly API used here (the lib setting carries no WebAssembly types). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

export interface ModuleSpec {
  /** Name of the one exported function, `(i32, i32, i32) → i32`. */
  name: string;
  /** Body: local declarations, then the code, ending with `end`. */
  code: number[];
  /** Bytes placed at address 0. */
  data: number[];
  /** Memory to reserve, in bytes. */
  memoryBytes: number;
}

/**
 * The head of a SIMD byte loop: `locals` i32 locals and the four v128 ones of `l` declared, the splats set,
 * `block { loop {` opened and the 16-byte fast path (`scanCleanBytes`) placed first. The caller adds the
 * slow path for the byte at r and closes both with `end`.
 */
export function simdScanHead(l: ScanLocals, locals: number): number[] {
  return [
    ...vec([
      [locals, I32],
      [4, V128],
    ]),
    ...scanSplats(l),
    ...block,
    ...loop,
    ...scanCleanBytes(l),
  ];
}

/** An instantiated module: its memory and its one function. */
export interface Kernel {
  memory: ArrayBuffer;
  run: (src: number, srcEnd: number, dst: number) => number;
}

/**
 * Assembles and instantiates a module; its exports are the function and `memory`.
 * @throws where WebAssembly is unavailable or refuses the module (e.g. no SIMD)
 */
export function instantiateKernel(spec: ModuleSpec): Kernel {
  const exports = instantiateModule(spec);
  return {
    memory: (exports.memory as { buffer: ArrayBuffer }).buffer,
    run: exports[spec.name] as Kernel['run'],
  };
}

/**
 * `make()` if it succeeds and its result passes `test`, else null: how each loop is loaded, once, before use
 * (a module WebAssembly refuses and one that gets the probe wrong are both not used).
 */
export function selfTested<T>(make: () => T, test: (made: T) => boolean): T | null {
  try {
    const made = make();
    return test(made) ? made : null;
  } catch {
    return null;
  }
}

function instantiateModule(spec: ModuleSpec): Record<string, unknown> {
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  if (!wasm) throw new Error('no WebAssembly');
  const ascii = (s: string) => vec([...s].map((ch) => [ch.charCodeAt(0)]));
  const bytes = Uint8Array.from([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vec([[0x60, ...vec([[I32], [I32], [I32]]), ...vec([[I32]])]])), // (i32 i32 i32) → i32
    ...section(3, vec([[0]])),
    ...section(5, vec([[0x00, ...uleb(Math.ceil(spec.memoryBytes / 65536))]])),
    ...section(
      7,
      vec([
        [...ascii('memory'), 0x02, 0],
        [...ascii(spec.name), 0x00, 0],
      ]),
    ),
    ...section(10, vec([[...uleb(spec.code.length), ...spec.code]])),
    ...section(11, vec([[0x00, ...i32(0), ...end, ...uleb(spec.data.length), ...spec.data]])),
  ]);
  return new wasm.Instance(new wasm.Module(bytes)).exports;
}
