/**
 * Decodes the JSON of a large stored summary while its bytes stream in (resume of a summary of 128 KiB or more,
 * `STREAM_DECODE_FROM`), instead of decoding it to text and parsing that afterwards: each string's body goes
 * through the WebAssembly unescaper (manifests/encoding/json-unescape.ts) into one arena as the chunks arrive, and
 * becomes a JS string once, directly from UTF-8; what lies between the strings (the structure) is
 * collected with a placeholder per string and handed to JSON.parse at the end.
 *
 * Semantics are JSON.parse's on UTF-8 text, with three refusals where JSON.parse would accept: a lone
 * surrogate escape (a summary refuses lone surrogates anyway; with `loneSurrogates: 'replace'` it becomes U+FFFD, one
 * UTF-16 unit as the surrogate is, and `sawLoneSurrogate` says so), a byte order mark (never part of
 * canonical bytes), and nesting deeper than 512 levels (a summary nests 3). Bytes that are not UTF-8 are refused (as the fatal TextDecoder does).
 */
import { isAscii, isUtf8 } from 'node:buffer';
import { loadUnescaper, PIECE, UnescapeStatus, type Unescaper } from '../../manifests/encoding/json-unescape.js';

export class SummaryDecodeError extends Error {
  override readonly name = 'SummaryDecodeError';
}

/** The longest escape the decoder handles itself: a surrogate pair, \uXXXX\uXXXX. */
const LONGEST_ESCAPE = 12;

/**
 * Node makes the Latin-1 text of this many bytes or more (EXTERN_APEX in its src/string_bytes.cc) an external
 * string in malloc'd memory, which the allocator hands out again once it is freed; a shorter string over 128 KiB
 * is a V8 large object in freshly mapped memory, a page fault per 4 KiB page as it is copied in (on the shared
 * 2-core VM of benchmarks/README.md, ~3 ms for a string of 1 MB: more than reading and hashing it). Were the
 * constant to change, `asciiText` still returns the same strings, only slower.
 */
export const EXTERNAL_TEXT_FROM = 1_031_913;
/**
 * From here on a shorter ASCII string is a slice of an external one. The parent holds at most a ninth more than the
 * string: where the allocator does hand out fresh memory, the parent costs that many more page faults than a V8
 * large object would (a 1 MiB summary's text is ~98% of EXTERNAL_TEXT_FROM).
 */
const SLICED_TEXT_FROM = Math.ceil(EXTERNAL_TEXT_FROM * 0.9);

/**
 * The string of the ASCII bytes `buf[start, end)`, the fastest way Node offers: Latin-1 (the same characters),
 * and from SLICED_TEXT_FROM bytes on, when `buf` has EXTERNAL_TEXT_FROM bytes from `start`, a slice of the
 * external string over those (V8 shares the parent's characters instead of copying them; the bytes past `end`
 * are held by the parent, never visible in the string). Benchmarks' reference text uses it too.
 */
export function asciiText(buf: Buffer, start: number, end: number): string {
  const n = end - start;
  if (n >= SLICED_TEXT_FROM && n < EXTERNAL_TEXT_FROM && buf.length - start >= EXTERNAL_TEXT_FROM)
    return buf.toString('latin1', start, start + EXTERNAL_TEXT_FROM).slice(0, n);
  return buf.toString('latin1', start, end);
}

/** The buffer `asciiText` wants for text of `size` bytes at its start: room for an external parent when it helps. */
export function textBufferSize(size: number): number {
  return size >= SLICED_TEXT_FROM && size < EXTERNAL_TEXT_FROM ? EXTERNAL_TEXT_FROM : size;
}

/**
 * One arena is kept between decodes, up to this size. Memory a process has not touched before costs a
 * page fault per 4 KiB page when it is first written; a fresh arena for every 1 MiB resume cost more
 * than the rest of the decode (benchmarks/README.md). The strings are copied out of the arena, so a
 * finished decoder's arena can serve the next one.
 */
const KEEP_ARENA_BYTES = 4 * 1024 * 1024 + EXTERNAL_TEXT_FROM;
let spareArena: Buffer | undefined;

function takeArena(size: number): Buffer {
  const spare = spareArena;
  if (spare && spare.length >= size) {
    spareArena = undefined;
    return spare;
  }
  return Buffer.allocUnsafe(size);
}

function giveArena(arena: Buffer): void {
  if (arena.length <= KEEP_ARENA_BYTES && (!spareArena || spareArena.length < arena.length)) spareArena = arena;
}

export class StreamingJsonDecoder {
  private readonly unescaper: Unescaper;
  /**
   * Unescaped string bytes, all strings one after another (never more than the input's size); handed
   * back for the next decoder by `end` or `release`, after which this decoder takes no more bytes.
   */
  private arena: Buffer | undefined;
  private arenaEnd = 0;
  private stringStart = -1; // arena offset of the string being read, or -1 outside strings
  private readonly structure: string[] = [];
  private readonly strings: string[] = [];
  /** The tail of the last chunk that could not be used yet (a cut-off escape). */
  private carry: Uint8Array | undefined;
  private received = 0;
  private readonly replaceLoneSurrogates: boolean;
  /**
   * Whether the decoded value holds a string in which a lone surrogate escape was replaced by U+FFFD
   * (`loneSurrogates: 'replace'`), known once `end` returned: one only in a duplicate key's value that a later one
   * replaced counts not, as JSON.parse keeps none of it.
   */
  sawLoneSurrogate = false;
  /** The strings (by index) in which a lone surrogate escape was replaced. */
  private readonly loneStrings = new Set<number>();

  /**
   * @param size the exact number of bytes that will be pushed (sizes the arena)
   * @param options.loneSurrogates a lone surrogate escape is refused (`'refuse'`, the default), or replaced by U+FFFD
   *   and recorded in `sawLoneSurrogate` (`'replace'`: the caller judges it where JSON.parse's caller would)
   * @throws Error where the WebAssembly unescaper is unavailable (the caller then decodes as a whole)
   */
  constructor(
    readonly size: number,
    options: { loneSurrogates?: 'refuse' | 'replace' } = {},
  ) {
    this.replaceLoneSurrogates = options.loneSurrogates === 'replace';
    const u = loadUnescaper();
    if (!u) throw new Error('the WebAssembly unescaper is unavailable');
    this.unescaper = u;
    // Room past the input's size lets `asciiText` make a long string as a slice of an external one.
    this.arena = takeArena(size >= SLICED_TEXT_FROM ? size + EXTERNAL_TEXT_FROM : size);
  }

  /** True where streaming decoding can be used here. */
  static available(): boolean {
    return loadUnescaper() !== undefined;
  }

  /** Consumes the next bytes; `chunk` is not kept. @throws SummaryDecodeError */
  push(chunk: Uint8Array): void {
    if (!this.arena) throw new SummaryDecodeError('the decoder has ended');
    this.received += chunk.length;
    if (this.received > this.size) throw new SummaryDecodeError('more bytes than announced');
    let bytes = chunk;
    if (this.carry) {
      bytes = Buffer.concat([this.carry, chunk]);
      this.carry = undefined;
    }
    let pos = 0;
    while (pos < bytes.length) {
      if (this.stringStart < 0) {
        const quote = bytes.indexOf(0x22, pos);
        const stop = quote < 0 ? bytes.length : quote;
        if (stop > pos)
          this.structure.push(Buffer.from(bytes.buffer, bytes.byteOffset + pos, stop - pos).toString('latin1'));
        if (quote < 0) return;
        this.structure.push(`"${this.strings.length}"`);
        this.strings.push('');
        this.stringStart = this.arenaEnd;
        pos = quote + 1;
        continue;
      }
      pos = this.stringBody(bytes, pos);
    }
  }

  /** Unescapes string bytes from `pos`; returns where it stopped (the end of `bytes` once it needs more). */
  private stringBody(bytes: Uint8Array, pos: number): number {
    const u = this.unescaper;
    const n = Math.min(PIECE, bytes.length - pos);
    u.src.set(bytes.subarray(pos, pos + n));
    const { status, read, out } = u.run(n);
    this.append(out);
    pos += read;
    if (status === UnescapeStatus.Closed) {
      this.closeString();
      return pos;
    }
    if (status === UnescapeStatus.Other) return this.otherEscape(bytes, pos);
    if (read === n || pos + n - read < bytes.length) return pos; // used all, or the next piece starts where this stopped
    // An escape cut off at the end of the chunk: keep its bytes for the next one.
    this.carry = copyFrom(bytes, pos);
    return bytes.length;
  }

  private append(out: Uint8Array): void {
    this.arena!.set(out, this.arenaEnd);
    this.arenaEnd += out.length;
  }

  private closeString(): void {
    const body = this.arena!.subarray(this.stringStart, this.arenaEnd);
    // ASCII (most summaries): valid UTF-8 as it is, and Latin-1 makes the same string with a plain copy.
    if (isAscii(body)) this.strings[this.strings.length - 1] = asciiText(this.arena!, this.stringStart, this.arenaEnd);
    else if (isUtf8(body)) this.strings[this.strings.length - 1] = body.toString('utf8');
    else throw new SummaryDecodeError('a string is not valid UTF-8');
    this.stringStart = -1;
  }

  /** An escape or byte the loop leaves to us, at `pos`: any \uXXXX (a surrogate pair as one), or a refusal. */
  private otherEscape(bytes: Uint8Array, pos: number): number {
    if (bytes[pos] !== 0x5c) throw new SummaryDecodeError('a control character inside a string');
    if (bytes.length - pos < LONGEST_ESCAPE && this.received < this.size) {
      this.carry = copyFrom(bytes, pos);
      return bytes.length;
    }
    const unit = hex4(bytes, pos);
    if (unit >= 0xd800 && unit < 0xdc00) {
      const low = bytes[pos + 6] === 0x5c && bytes[pos + 7] === 0x75 ? hex4(bytes, pos + 6) : -1;
      if (low >= 0xdc00 && low < 0xe000) {
        this.append(Buffer.from(String.fromCharCode(unit, low), 'utf8'));
        return pos + 12;
      }
    }
    if (unit >= 0xd800 && unit < 0xe000) {
      if (!this.replaceLoneSurrogates)
        throw new SummaryDecodeError(`a lone ${unit < 0xdc00 ? 'high' : 'low'} surrogate escape`);
      this.loneStrings.add(this.strings.length - 1);
      this.append(REPLACEMENT_CHARACTER);
      return pos + 6; // what follows a lone high surrogate is read as it would be on its own
    }
    this.append(Buffer.from(String.fromCharCode(unit), 'utf8'));
    return pos + 6;
  }

  /** Hands the arena back for the next decoder (a decoder given up on); this one takes no more bytes. */
  release(): void {
    if (this.arena) giveArena(this.arena);
    this.arena = undefined;
  }

  /** The decoded value, once every byte was pushed; ends the decoder. @throws SummaryDecodeError, SyntaxError */
  end(): unknown {
    if (!this.arena) throw new SummaryDecodeError('the decoder has ended');
    this.release(); // every string was copied out of it as it closed
    if (this.received !== this.size)
      throw new SummaryDecodeError(`${this.received} bytes pushed, ${this.size} announced`);
    if (this.stringStart >= 0 || this.carry) throw new SummaryDecodeError('the input ends inside a string');
    const found = { lone: this.loneStrings, hit: false };
    const value = restore(JSON.parse(this.structure.join('')), this.strings, 0, found);
    this.sawLoneSurrogate = found.hit;
    return value;
  }
}

/** The value of the \uXXXX escape at `pos`. @throws SummaryDecodeError for anything else */
/**
 * A copy of `bytes` from `pos`. A chunk is valid only until the next one is pulled (store/blob-store.ts), and a
 * Buffer's `slice` is a view into it, so what is carried over to the next push must be copied.
 */
function copyFrom(bytes: Uint8Array, pos: number): Uint8Array {
  return new Uint8Array(bytes.subarray(pos));
}

/** U+FFFD in UTF-8: what a lone surrogate escape becomes with `loneSurrogates: 'replace'`. */
const REPLACEMENT_CHARACTER = Buffer.from('\ufffd', 'utf8');

function hex4(bytes: Uint8Array, pos: number): number {
  if (bytes[pos] !== 0x5c || bytes[pos + 1] !== 0x75 || pos + 6 > bytes.length)
    throw new SummaryDecodeError('an invalid escape in a string');
  let v = 0;
  for (let i = pos + 2; i < pos + 6; i++) {
    const c = bytes[i]!;
    const d =
      c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (d < 0) throw new SummaryDecodeError('an invalid \\u escape in a string');
    v = v * 16 + d;
  }
  return v;
}

/** Deeper than any summary; a bound that turns hostile nesting into a decode error, not a stack overflow. */
const MAX_DEPTH = 512;

/**
 * Puts the strings back where their placeholders ("<index>") stand, as keys and as values. `found.hit` is set when a
 * string of `found.lone` is in the result: a duplicate key's earlier value, which the later one replaces (as in
 * JSON.parse), is not.
 */
function restore(
  value: unknown,
  strings: string[],
  depth: number,
  found: { lone: ReadonlySet<number>; hit: boolean },
): unknown {
  if (typeof value === 'string') {
    if (found.lone.has(Number(value))) found.hit = true;
    return strings[Number(value)];
  }
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) throw new SummaryDecodeError(`nesting deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(value)) return value.map((v) => restore(v, strings, depth + 1, found));
  // Each member judged on its own first: only the members that stay (the last of duplicate keys) count.
  const members = new Map<string, { value: unknown; lone: boolean }>();
  for (const [k, v] of Object.entries(value)) {
    const inner = { lone: found.lone, hit: found.lone.has(Number(k)) };
    members.set(strings[Number(k)]!, { value: restore(v, strings, depth + 1, inner), lone: inner.hit });
  }
  const out: Record<string, unknown> = {};
  for (const [key, member] of members) {
    if (member.lone) found.hit = true;
    // defineProperty: a key "__proto__" stays an own property, as JSON.parse makes it.
    Object.defineProperty(out, key, { value: member.value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
