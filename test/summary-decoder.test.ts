/**
 * The streaming JSON decoder of large summaries (src/summary/decoder.ts) against JSON.parse: the same
 * value for every JSON text and every way of cutting it into chunks, and a refusal wherever JSON.parse
 * would refuse (plus the two documented stricter cases: lone surrogate escapes, a byte order mark).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  asciiText,
  EXTERNAL_TEXT_FROM,
  SummaryDecodeError,
  StreamingJsonDecoder,
  textBufferSize,
} from '../src/summary/decoder.js';
import { loadUnescaper, UnescapeStatus } from '../manifests/encoding/json-unescape.js';
import { canonicalBytes } from '../manifests/encoding/canonical.js';
import { decodeSummary, decodeSummaryStream, summaryText } from '../src/summary/summary.js';
import { storedSummaryProblem } from '../manifests/format/summary.js';

const enc = new TextEncoder();

/** Decodes `bytes` pushed in pieces cut at `cuts` (sorted offsets). */
function decode(bytes: Uint8Array, cuts: number[] = []): unknown {
  const d = new StreamingJsonDecoder(bytes.length);
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    d.push(bytes.slice(at, cut)); // a copy, so the decoder cannot lean on the caller's buffer
    at = cut;
  }
  return d.end();
}

/** A JSON string literal of `s` with each UTF-16 unit either raw or escaped (\uXXXX in either case, or a short escape). */
function literal(s: string, choices: number[]): string {
  let out = '"';
  let k = 0;
  for (const ch of s) {
    const c = choices[k++ % choices.length]!;
    const raw = JSON.stringify(ch).slice(1, -1);
    if (c % 3 === 0 || raw.length > ch.length) {
      out += raw; // JSON.stringify's own form (short escapes, \u00XX for control characters)
    } else {
      for (let i = 0; i < ch.length; i++) {
        const hex = ch.charCodeAt(i).toString(16).padStart(4, '0');
        out += `\\u${c % 3 === 1 ? hex : hex.toUpperCase()}`;
      }
    }
  }
  return `${out}"`;
}

const text = fc.string({
  unit: fc.oneof(
    fc.constantFrom('"', '\\', '\n', '\u0000', '\u001f', '/', 'é', '😀', '\u2028', '\u00ff'),
    fc.string({ unit: 'binary', maxLength: 1 }),
  ),
  maxLength: 60,
});

describe('the WebAssembly unescaper', () => {
  it('loads here and decodes what it takes on, stopping where the caller must act', () => {
    const u = loadUnescaper()!;
    const run = (s: string) => {
      const { written } = enc.encodeInto(s, u.src);
      const r = u.run(written);
      return { status: r.status, read: r.read, out: Buffer.from(r.out).toString() };
    };
    expect(run('plain"rest')).toEqual({ status: UnescapeStatus.Closed, read: 6, out: 'plain' });
    expect(run('a\\n\\t\\"\\\\\\/\\u0041\\u001f"')).toEqual({
      status: UnescapeStatus.Closed,
      read: 24,
      out: 'a\n\t"\\/A\u001f',
    });
    expect(run('ab\\u00e9"')).toMatchObject({ status: UnescapeStatus.Other, read: 2, out: 'ab' }); // \u00e9 is the caller's
    expect(run('ab\\x"')).toMatchObject({ status: UnescapeStatus.Other, read: 2 });
    expect(run('ab\u0001"')).toMatchObject({ status: UnescapeStatus.Other, read: 2 });
    expect(run('ab\\u00')).toMatchObject({ status: UnescapeStatus.NeedMore, read: 2, out: 'ab' }); // cut off: keep for later
    expect(run('ab\\')).toMatchObject({ status: UnescapeStatus.NeedMore, read: 2 });
    expect(run('x'.repeat(40))).toMatchObject({ status: UnescapeStatus.NeedMore, read: 40 });
    expect(u.run(-2000)).toMatchObject({ status: UnescapeStatus.NeedMore, read: 0 });
    expect(u.run(-2000).out.length).toBe(0);
  });
});

describe('StreamingJsonDecoder agrees with JSON.parse', () => {
  it('on canonical bytes of random values, cut anywhere', () => {
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.boolean(),
        fc.constant(null),
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        tie('arr'),
        tie('obj'),
      ),
      arr: fc.array(tie('node'), { maxLength: 4 }),
      obj: fc.dictionary(text, tie('node'), { maxKeys: 4 }),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 1e9 }), (v, seed) => {
        const bytes = canonicalBytes(v);
        const cuts = [
          ...new Set([seed % (bytes.length + 1), (seed >> 7) % (bytes.length + 1), (seed >> 14) % (bytes.length + 1)]),
        ].sort((a, b) => a - b);
        expect(decode(bytes, cuts)).toEqual(JSON.parse(new TextDecoder().decode(bytes)));
      }),
      { numRuns: 400 },
    );
  });

  it('on strings written with every kind of escape (\\uXXXX in both cases, surrogate pairs), whitespace between tokens', () => {
    fc.assert(
      fc.property(
        fc.array(text, { minLength: 1, maxLength: 4 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 7 }),
        (strings, choices) => {
          const json = `{ "list" : [ ${strings.map((s) => literal(s, choices)).join(' ,\n\t')} ] , ${literal('k"ey', choices)}: true }`;
          const bytes = enc.encode(json);
          const want = JSON.parse(json);
          for (let cut = 0; cut <= bytes.length; cut += Math.max(1, Math.floor(bytes.length / 13))) {
            expect(decode(bytes, [cut])).toEqual(want);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('on a long string of prose with escapes (the WebAssembly loop, pieces of 1 MiB), cut in odd places', () => {
    const s = 'line "one"\n\tC:\\dir → ok 😀 \u0001 é\n'.repeat(90_000);
    const bytes = canonicalBytes({ state: s, task: 't', nextSteps: ['a'] });
    expect(decode(bytes, [1, 17, 1_048_577, 2_000_003, bytes.length - 3])).toEqual({
      state: s,
      task: 't',
      nextSteps: ['a'],
    });
  });

  it('copies what it carries over: the source may reuse one buffer for every chunk (store/blob-store.ts allows it)', () => {
    // Every escape the decoder can find cut at a chunk's end: short, \uXXXX, a surrogate pair.
    const s = 'x'.repeat(50) + '\n' + 'y'.repeat(50) + '\u0001' + 'z'.repeat(50) + '😀 end';
    const json = `{"a":${JSON.stringify(s)},"b":"\\ud83d\\ude00"}`;
    const bytes = enc.encode(json);
    const want = JSON.parse(json);
    for (let size = 1; size <= 14; size++) {
      const shared = Buffer.alloc(size);
      const d = new StreamingJsonDecoder(bytes.length);
      for (let at = 0; at < bytes.length; at += size) {
        const n = Math.min(size, bytes.length - at);
        shared.fill(0x5c); // what a reused buffer held before does not matter
        shared.set(bytes.subarray(at, at + n));
        d.push(shared.subarray(0, n));
      }
      expect(d.end(), `chunks of ${size}`).toEqual(want);
    }
  });

  it('keeps duplicate keys as JSON.parse does (the last wins, at the first one\'s place) and "__proto__" as an own key', () => {
    for (const json of ['{"a":1,"b":2,"a":3}', '{"__proto__":{"x":1},"y":"z"}', '{"2":"b","1":"a","x":["2","1"]}']) {
      const got = decode(enc.encode(json)) as object;
      expect(got).toEqual(JSON.parse(json));
      expect(Object.keys(got)).toEqual(Object.keys(JSON.parse(json)));
      expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
    }
  });
});

describe('StreamingJsonDecoder refuses what is not UTF-8 JSON, wherever the chunks are cut', () => {
  const bad: Array<[string, Uint8Array]> = [
    ['invalid UTF-8 inside a string', Uint8Array.from([...enc.encode('{"a":"x'), 0xff, 0xfe, ...enc.encode('"}')])],
    [
      'a truncated UTF-8 sequence inside a string',
      Uint8Array.from([...enc.encode('{"a":"x'), 0xe2, 0x82, ...enc.encode('"}')]),
    ],
    ['a raw control character in a string', enc.encode('{"a":"x\ny"}')],
    ['an invalid escape', enc.encode('{"a":"x\\qy"}')],
    ['a \\u escape with a non-hex digit', enc.encode('{"a":"x\\u00g1"}')],
    ['a lone high surrogate escape', enc.encode('{"a":"x\\ud83dy"}')],
    ['a lone low surrogate escape', enc.encode('{"a":"\\ude00"}')],
    ['an unterminated string', enc.encode('{"a":"xyz')],
    ['an escape cut off by the end', enc.encode('{"a":"x\\u00')],
    ['a byte order mark', Uint8Array.from([0xef, 0xbb, 0xbf, ...enc.encode('{"a":"x"}')])],
    ['garbage between tokens', enc.encode('{"a":"x"} !')],
    ['non-ASCII between tokens', Uint8Array.from([...enc.encode('{"a":'), 0xc3, 0xa9, ...enc.encode('1}')])],
    ['an unclosed object', enc.encode('{"a":"x"')],
    ['nesting deeper than 512 levels', enc.encode(`${'['.repeat(600)}"x"${']'.repeat(600)}`)],
  ];
  it.each(bad)('%s', (_, bytes) => {
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(() => decode(bytes, [cut]), `cut at ${cut}`).toThrow(
        expect.objectContaining({ name: expect.stringMatching(/SummaryDecodeError|SyntaxError/) }),
      );
    }
  });

  it('refuses more or fewer bytes than announced', () => {
    const d = new StreamingJsonDecoder(5);
    expect(() => d.push(enc.encode('"abcdef"'))).toThrow(SummaryDecodeError);
    const e = new StreamingJsonDecoder(10);
    e.push(enc.encode('"abc"'));
    expect(() => e.end()).toThrow(SummaryDecodeError);
  });
});

describe('StreamingJsonDecoder hands its arena on to the next decoder', () => {
  const long = (seed: number) => `${'prose "q" \\ é 😀 \u0001 '.repeat(400)}${seed}`;

  it('decodes values one after another, interleaved, after refused and abandoned ones, each as JSON.parse does', () => {
    const json = fc.oneof(
      fc.record({ state: text, n: fc.integer() }).map((v) => canonicalBytes(v)),
      fc.nat(1000).map((n) => canonicalBytes({ state: long(n), list: [long(n + 1), 'x'] })),
      fc.constantFrom(enc.encode('{"a":"x\ny"}'), enc.encode('{"a":"x\\qy"}'), enc.encode('{"a":"xyz')),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(json, fc.nat(), fc.constantFrom('end', 'release', 'drop')), { maxLength: 6 }),
        (runs) => {
          // Every decoder is made first and fed in turns, so several hold an arena at once.
          const live = runs.map(([bytes, cut, how]) => ({
            bytes,
            cut: cut % (bytes.length + 1),
            how,
            d: new StreamingJsonDecoder(bytes.length),
          }));
          const got: unknown[] = [];
          const refused = new Set<number>();
          for (const [i, r] of live.entries()) {
            try {
              r.d.push(r.bytes.slice(0, r.cut));
            } catch {
              refused.add(i);
            }
          }
          for (const [i, r] of live.entries()) {
            if (r.how === 'release') r.d.release();
            if (r.how !== 'end' || refused.has(i)) continue;
            try {
              r.d.push(r.bytes.slice(r.cut));
              got[i] = r.d.end();
            } catch {
              refused.add(i);
            }
          }
          // A value decoded earlier is not changed by later decoders writing into the arena it came from.
          for (const [i, r] of live.entries()) {
            if (r.how !== 'end') continue;
            let want: unknown;
            try {
              want = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(r.bytes));
            } catch {
              expect(refused.has(i), `run ${i}`).toBe(true);
              continue;
            }
            expect(refused.has(i), `run ${i}`).toBe(false);
            expect(got[i], `run ${i}`).toEqual(want);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('keeps a decoded value intact while the next decoder fills the same arena', () => {
    const first = canonicalBytes({ state: long(1) });
    const d1 = new StreamingJsonDecoder(first.length);
    d1.push(first);
    const v1 = d1.end();
    const second = canonicalBytes({ state: 'z'.repeat(first.length - 20) });
    const d2 = new StreamingJsonDecoder(second.length);
    d2.push(second);
    expect(d2.end()).toEqual({ state: 'z'.repeat(first.length - 20) });
    expect(v1).toEqual({ state: long(1) });
  });

  it('takes no bytes once ended or released', () => {
    const d = new StreamingJsonDecoder(4);
    d.push(enc.encode('"ab"'));
    expect(d.end()).toBe('ab');
    expect(() => d.push(enc.encode('x'))).toThrow(SummaryDecodeError);
    expect(() => d.end()).toThrow(SummaryDecodeError);
    const e = new StreamingJsonDecoder(4);
    e.push(enc.encode('"a'));
    e.release();
    e.release(); // a second release is a no-op, not a second hand-back
    expect(() => e.push(enc.encode('b"'))).toThrow(SummaryDecodeError);
  });
});

describe('asciiText: the fastest string of ASCII bytes is the Latin-1 string', () => {
  it('at lengths around the slice and external bounds, with and without room past the end, at any start', () => {
    const lengths = [
      0,
      1,
      13,
      70_000,
      928_721,
      928_722,
      600_001,
      EXTERNAL_TEXT_FROM - 1,
      EXTERNAL_TEXT_FROM,
      1_100_000,
    ];
    for (const n of lengths) {
      for (const start of [0, 5]) {
        for (const room of [0, textBufferSize(n) - n, EXTERNAL_TEXT_FROM]) {
          const buf = Buffer.alloc(start + n + room, 0x7a); // bytes past the end that must not show
          for (let i = 0; i < n; i++) buf[start + i] = 0x20 + ((i * 31 + n) % 95);
          const want = buf.toString('latin1', start, start + n);
          const got = asciiText(buf, start, start + n);
          expect(got.length, `${n} at ${start}, room ${room}`).toBe(n);
          expect(got === want, `${n} at ${start}, room ${room}`).toBe(true);
          buf.fill(0x21); // the string is its own: later writes to the buffer do not change it
          expect(got === want, `${n} at ${start}, room ${room}, after a write`).toBe(true);
        }
      }
    }
  });

  it('the decoder makes long ASCII strings (sliced and external sizes) with escapes exactly as JSON.parse', () => {
    for (const units of [200_000, 600_000, 950_000, 1_020_000, 1_040_000]) {
      const s = 'plain "quoted" \\ tab\t line\n ctl\u0001 '.repeat(Math.ceil(units / 40)).slice(0, units);
      const bytes = canonicalBytes({ state: s, task: 't', nextSteps: [s.slice(0, 1000)] });
      const want = JSON.parse(new TextDecoder().decode(bytes));
      expect(decode(bytes, [1_048_576 - 7])).toEqual(want);
      expect(decode(bytes)).toEqual(want);
    }
  });
});

describe('a stored summary with a lone surrogate escape', () => {
  /** The code a decode fails with, or 'ok'. */
  const verdict = async (f: () => unknown) => {
    try {
      await f();
      return 'ok';
    } catch (err) {
      return (err as { code?: string }).code;
    }
  };
  const pad = 'x'.repeat(200_000); // past STREAM_DECODE_FROM: what resume decodes streamed
  const cases: Array<[string, string]> = [
    ['SUMMARY_INCOMPLETE', `{"incomplete":true,"nextSteps":[],"notes":"\\ud800${pad}","state":"s","task":"t"}`],
    ['SUMMARY_EMPTY', `{"nextSteps":[],"notes":"\\udc00${pad}","state":" ","task":"t"}`],
    ['SUMMARY_INVALID', `{"nextSteps":[],"state":"\\ud800","task":"t"}`], // a lone surrogate is not blank
    ['SUMMARY_INVALID', `{"nextSteps":[],"notes":"${pad}\\ud83d","state":"s","task":"t"}`],
    ['SUMMARY_INVALID', `{"nextSteps":[],"notes":"a\\ud83d\\n\\udc00\\ud83d\\ude00","state":"s","task":"t"}`],
    ['SUMMARY_INVALID', `{"nextSteps":[],"state":"s","task":"t","\\ud800":1}`], // an unknown key: the schema
    ['ok', `{"nextSteps":[],"notes":"\\ud83d\\ude00${pad}","state":"s","task":"t"}`],
    // In a duplicate key's value that a later one replaces: JSON.parse keeps none of it, and neither may the stream.
    ['ok', `{"nextSteps":[],"notes":"${pad}","state":"s","task":"\\ud800","task":"t"}`],
    [
      'ok',
      `{"files":[{"path":"a","note":"\\udc00","note":"n"}],"nextSteps":[],"notes":"${pad}","state":"s","task":"t"}`,
    ],
    // The one that stays carries it: refused.
    ['SUMMARY_INVALID', `{"nextSteps":[],"notes":"${pad}","state":"s","task":"t","task":"\\ud800"}`],
  ];

  it.each(cases)(
    'gets %s from the whole-buffer decode, the streamed one (cut anywhere) and the auditor',
    async (code, text) => {
      const bytes = enc.encode(text);
      expect(await verdict(() => decodeSummary(bytes))).toBe(code);
      expect(storedSummaryProblem(bytes)?.split(':')[0] ?? 'ok').toBe(code);
      for (const step of [1, 7, 4096, 65536, bytes.length]) {
        async function* chunks() {
          for (let i = 0; i < bytes.length; i += step) yield bytes.slice(i, i + step);
        }
        expect(await verdict(() => decodeSummaryStream(chunks(), bytes.length)), `chunks of ${step}`).toBe(code);
      }
    },
  );
});

/**
 * Differential: the whole-buffer decode makes its text with `summaryText`, a fast path for ASCII bytes (Latin-1 copy)
 * beside the fatal UTF-8 decoder it replaces there. The same text, or the same refusal, for any bytes, through any view.
 */
describe('summaryText: the text of stored bytes as the fatal UTF-8 decoder makes it', () => {
  const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  /** The text, or 'refused'. */
  const outcome = (f: () => string): string => {
    try {
      return f();
    } catch {
      return 'refused';
    }
  };
  const same = (bytes: Uint8Array) =>
    expect(outcome(() => summaryText(bytes))).toBe(outcome(() => fatal.decode(bytes)));
  /** `bytes` as a view inside a larger buffer (other bytes before and after it), as a LevelDB read may hand out. */
  const inside = (bytes: Uint8Array, before: number, after: number, fill: number) => {
    const big = new Uint8Array(before + bytes.length + after).fill(fill);
    big.set(bytes, before);
    return big.subarray(before, before + bytes.length);
  };
  const ascii = fc.uint8Array({ max: 0x7f, maxLength: 300 });
  const anyBytes = fc.uint8Array({ maxLength: 300 });
  const utf8 = fc.string({ unit: 'binary', maxLength: 100 }).map((s) => enc.encode(s));

  it('on ASCII, UTF-8 and arbitrary bytes, alone and as views inside larger buffers', () => {
    fc.assert(
      fc.property(
        fc.oneof(ascii, anyBytes, utf8),
        fc.nat({ max: 9 }),
        fc.nat({ max: 9 }),
        fc.constantFrom(0x41, 0xff, 0x00),
        (bytes, before, after, fill) => {
          same(bytes);
          same(inside(bytes, before, after, fill));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('keeps a byte order mark (so JSON.parse refuses it), refuses a lone continuation byte or a cut sequence', () => {
    for (const bytes of [
      Uint8Array.of(0xef, 0xbb, 0xbf, 0x7b, 0x7d),
      Uint8Array.of(0x7b, 0x80, 0x7d),
      Uint8Array.of(0x22, 0xc3),
      Uint8Array.of(0xed, 0xa0, 0x80), // an encoded surrogate: not UTF-8
      Uint8Array.of(0x7f, 0x00, 0x41),
      new Uint8Array(0),
    ])
      same(bytes);
    expect(summaryText(Uint8Array.of(0xef, 0xbb, 0xbf, 0x7b, 0x7d))).toBe('\ufeff{}');
  });

  it('on long texts (a byte past 0x7f at the start, the middle or the end of 64 KiB)', () => {
    const long = enc.encode(`{"nextSteps":[],"state":"${'abc\\n'.repeat(16_000)}","task":"t"}`);
    same(long);
    for (const at of [0, 1, 32_768, long.length - 2, long.length - 1]) {
      for (const byte of [0x80, 0xc3, 0xff]) {
        const edited = long.slice();
        edited[at] = byte;
        same(edited);
      }
    }
    const mixed = enc.encode(`{"nextSteps":[],"state":"${'é😀x'.repeat(8_000)}","task":"t"}`);
    same(mixed);
    same(inside(mixed, 3, 5, 0x41));
  });

  it('gives decodeSummary the verdicts of the auditor (which decodes with the fatal decoder) on valid and edited summaries', () => {
    const verdict = (bytes: Uint8Array): string => {
      try {
        decodeSummary(bytes);
        return 'ok';
      } catch (err) {
        return (err as { code?: string }).code ?? 'uncoded';
      }
    };
    fc.assert(
      fc.property(
        fc.record({
          task: fc.string({ maxLength: 40 }),
          state: fc.string({ unit: 'binary', maxLength: 40 }),
          nextSteps: fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }),
        }),
        fc.nat(),
        fc.nat({ max: 255 }),
        fc.boolean(),
        (summary, where, byte, edit) => {
          const bytes = canonicalBytes(summary).slice();
          if (edit) bytes[where % bytes.length] = byte;
          expect(verdict(bytes)).toBe(storedSummaryProblem(bytes)?.split(':')[0] ?? 'ok');
          if (verdict(bytes) === 'ok') expect(decodeSummary(bytes)).toEqual(JSON.parse(fatal.decode(bytes)));
        },
      ),
      { numRuns: 1000 },
    );
  });
});
