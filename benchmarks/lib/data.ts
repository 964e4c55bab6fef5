/**
 * Benchmark summaries: realistic text of an exact canonical size, fresh for every operation.
 *
 * The bulk of a large summary is prose and code excerpts, so the text has a newline every ~80
 * characters, quotes, backslashes and tabs: every one of those needs a JSON escape, which keeps the
 * encoder off its "nothing to escape" shortcut. `ascii` text is the main case; `mixed` adds ~1% of
 * non-ASCII characters (V8 then holds the string as UTF-16, twice the memory).
 */
import { validateSummary, type Summary } from '../../src/summary/summary.js';

export type TextKind = 'ascii' | 'mixed';

const WORDS = (
  'the summary ledger publish resume chain verify handoff compaction digest blake3 session principal host ' +
  'manifest envelope signature refactor module invoice tax rules tests green pending review migrate schema ' +
  'index cache durable fsync rename directory worker thread batch commit latency throughput median spread'
).split(' ');
const CODE = ['"quoted"', 'C:\\Users\\dev\\src', 'fn("x")', '\ttabbed', 'a\\b', '{"k": "v"}'];
const NON_ASCII = ['café', 'naïve', '→', '—', 'Größe', '✓'];

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 64 Ki-character block of text; the big string is this block repeated and cut to size. */
function textBlock(kind: TextKind): string {
  const next = rng(kind === 'ascii' ? 1 : 2);
  let out = '';
  let line = 0;
  while (out.length < 64 * 1024) {
    const r = next();
    const word =
      r < 0.05
        ? CODE[Math.floor(next() * CODE.length)]!
        : kind === 'mixed' && r < 0.06
          ? NON_ASCII[Math.floor(next() * NON_ASCII.length)]!
          : WORDS[Math.floor(next() * WORDS.length)]!;
    out += word;
    line += word.length + 1;
    if (line > 80) {
      out += next() < 0.1 ? '.\n\n' : '\n';
      line = 0;
    } else out += ' ';
  }
  return out.slice(0, 64 * 1024);
}

const encoder = new TextEncoder();
/** Bytes a character takes in canonical JSON (escapes included). */
function jsonBytes(ch: string): number {
  return encoder.encode(JSON.stringify(ch)).length - 2;
}

interface Block {
  text: string;
  /** Canonical bytes of the whole block and of each prefix of it (by code unit). */
  total: number;
  prefix: Uint32Array;
}

const blocks = new Map<TextKind, Block>();
function block(kind: TextKind): Block {
  let b = blocks.get(kind);
  if (!b) {
    const text = textBlock(kind).replace(/[\ud800-\udfff]/g, 'x');
    const prefix = new Uint32Array(text.length + 1);
    for (let i = 0; i < text.length; i++) prefix[i + 1] = prefix[i]! + jsonBytes(text[i]!);
    b = { text, total: prefix[text.length]!, prefix };
    blocks.set(kind, b);
  }
  return b;
}

/** Bodies up to this many bytes are built once per size and shared (strings are immutable). */
const SHARED_BODY_MAX = 64 * 1024;
const sharedBodies = new Map<string, string>();

/**
 * A flat string `head` + text whose canonical JSON body is exactly `bytes` long: fresh for large sizes, and
 * built once per size for small ones, so that a loop timing small publishes does not time the benchmark's own
 * text building (~45 µs per 4 KiB summary here, a sixth of a publish's main-thread time). Every summary still
 * differs by its marker; the ledger copies, escapes and hashes the shared text every time as it would a new one.
 */
function bodyOfBytes(head: string, bytes: number, kind: TextKind): string {
  if (bytes > SHARED_BODY_MAX) return freshBodyOfBytes(head, bytes, kind);
  const key = `${kind}:${bytes}:${head}`;
  let body = sharedBodies.get(key);
  if (body === undefined) sharedBodies.set(key, (body = freshBodyOfBytes(head, bytes, kind)));
  return body;
}

function freshBodyOfBytes(head: string, bytes: number, kind: TextKind): string {
  const b = block(kind);
  bytes -= head.length;
  const whole = Math.floor(bytes / b.total);
  let rest = bytes - whole * b.total;
  let cut = 0;
  while (cut < b.text.length && b.prefix[cut + 1]! <= rest) cut++;
  rest -= b.prefix[cut]!;
  const rope = head + b.text.repeat(whole) + b.text.slice(0, cut) + 'x'.repeat(rest);
  // A flat string, as a Harness gets from JSON.parse or a decoder: V8 may otherwise leave the
  // concatenation a rope and flatten it (a 64 MiB copy) inside the first timed operation that reads it.
  return Buffer.from(rope, 'utf8').toString('utf8');
}

function fixedPart(marker: string): Summary {
  return {
    task: `Benchmark the ledger (${marker})`,
    state: '',
    nextSteps: [
      'Compare publish with the raw durable write',
      'Compare resume with raw read and hash',
      'Record the medians',
    ],
    decisions: ['Interleave the cases so drift hits them all alike'],
    files: [{ path: 'benchmarks/run.ts', note: 'entry point' }],
  };
}

/** Canonical bytes of the fixed fields, by marker length (markers are plain ASCII, so the length decides). */
const overheads = new Map<number, number>();

/**
 * A valid summary whose canonical encoding is exactly `bytes` long, unique by `marker`.
 * @throws RangeError when `bytes` is below the size of the fixed fields (~400 bytes)
 */
export function makeSummary(bytes: number, marker: string, kind: TextKind = 'ascii'): Summary {
  const summary = fixedPart(marker);
  const overhead =
    overheads.get(marker.length) ??
    validateSummary({ ...summary, state: 'x' }, Number.MAX_SAFE_INTEGER).bytes.length - 1;
  overheads.set(marker.length, overhead);
  if (bytes < overhead + 1) throw new RangeError(`a summary needs at least ${overhead + 1} bytes`);
  summary.state = bodyOfBytes('x', bytes - overhead, kind); // the leading 'x': never blank, even at the minimum size
  return summary;
}

/** A marker unique within this process: fixed width, so every summary of one size has one length. */
let counter = 0;
export function nextMarker(): string {
  return `${process.pid.toString(36)}-${(counter++).toString(36).padStart(8, '0')}`;
}
