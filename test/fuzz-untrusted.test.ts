/**
 * Seeded mutation fuzzing of every parser of untrusted input, from valid inputs the project itself makes (a real
 * ledger's exports, checkpoints, cosignatures, proofs, trust files): byte and character flips, truncation,
 * duplication, line drops and swaps, JSON values of another type, huge numbers, deep nesting, huge strings, control
 * and odd Unicode characters, `__proto__` / `constructor` keys. The contract for each input:
 *
 *   - a refusal is a coded error of the project (a HandoffLedgerError subclass with a code), never a raw
 *     TypeError / RangeError / SyntaxError, never an unhandled rejection;
 *   - no case runs longer than HANG_MS (async cases are also raced against it);
 *   - nothing tampered is accepted: a mutation that changes signed bytes never verifies (the oracles below);
 *   - no prototype is polluted;
 *   - huge inputs are refused or streamed in bounded memory.
 *
 * Besides random mutation, differentials (the four line verifiers, the fast canonical manifest reader and the schema
 * path, the three summary decoders, the strict base64 decoders and a reference) and one systematic pass: every field
 * of each JSON input replaced by each hostile value, or removed (the rare combinations, each tried once).
 *
 * The seed is fixed (SEED), so a failure replays; the case that failed is printed with its seed and index.
 * HL_FUZZ_SEED=<n> explores another seed, HL_FUZZ_SCALE=<k> runs k times the cases (a soak), HL_FUZZ_STATS=1 prints
 * what the cases came to per target (how deep the mutations reach: refusal codes, findings, accepted inputs).
 * test/reliability/hostile-properties.test.ts does the same with fast-check for ids, summaries, single envelopes and
 * the manifests file of a hand-built bundle; this file covers the rest: whole exported bundles (every file, full and
 * filtered, in memory and as a directory, and the verify CLI on them), checkpoints and signed notes, cosignatures,
 * verifier keys, inclusion and consistency proofs, add-checkpoint bodies, trust files, a witness's files, stored
 * summary bytes and model answers in each provider's dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { HandoffLedgerError } from '../store/errors.js';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { exportBundle } from '../src/ops/export.js';
import { openBundleDir } from '../src/ops/bundle-dir.js';
import { auditBundle } from '../src/ops/audit.js';
import { readTrustFile } from '../src/cli/trust-file.js';
import { verifyBundle, type BundleAuditReport, type VerifyBundleOptions } from '../manifests/audit/verify-chain.js';
import { memoryBundleReader, type BundleTreeFile } from '../manifests/audit/bundle.js';
import { AuditError } from '../manifests/audit/errors.js';
import { parseWitnessKeys } from '../manifests/audit/verify-witnesses.js';
import { parseEnvelope } from '../manifests/crypto/envelope.js';
import { decodeBase64, decodeBase64Either } from '../manifests/encoding/base64.js';
import { readCanonicalManifest } from '../manifests/format/manifest-read.js';
import { canonicalManifestText } from '../manifests/format/manifest-text.js';
import { manifestSchema, type Manifest } from '../manifests/format/manifest.js';
import { verifyManifestEnvelope } from '../manifests/crypto/verify-manifest.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { nobleSign, noblePublicKey, nobleVerifier } from '../manifests/crypto/ed25519.js';
import { createWebCryptoLineVerifier } from '../manifests/audit/verify-webcrypto.js';
import { createWorkerLineVerifier } from '../manifests/audit/verify-workers.node.js';
import type { LineVerifier } from '../manifests/audit/verify-line.js';
import { encodeVerifierKey, openNote, parseVerifierKey, signNote, type NoteSigner } from '../manifests/crypto/note.js';
import {
  checkCosignatures,
  cosignCheckpoint,
  encodeCosignerKey,
  parseCosignerKey,
} from '../manifests/crypto/cosignature.js';
import { formatCheckpoint, parseCheckpoint } from '../manifests/format/checkpoint.js';
import { checkpointVerifiers, parseTrustStore, type TrustStore } from '../manifests/format/trust.js';
import { EMPTY_ROOT, leafHash, nodeHash, verifyConsistency, verifyInclusion } from '../manifests/tlog/merkle.js';
import { consistencyRanges, inclusionRanges } from '../manifests/tlog/tree.js';
import { decideAddCheckpoint, formatAddCheckpoint, parseAddCheckpoint } from '../manifests/witness/add-checkpoint.js';
import { MAX_WITNESS_LOG_KEYS, parseWitnessLogs } from '../src/witness/logs.js';
import { originHash, WitnessState } from '../src/witness/state.js';
import { canDecodeStream, decodeSummary, decodeSummaryStream } from '../src/summary/summary.js';
import { storedSummaryProblem } from '../manifests/format/summary.js';
import { compact } from '../src/compaction/compact.js';
import { compactionRequest } from '../src/compaction/tool.js';
import type { ModelAdapter } from '../src/compaction/model.js';
import { validateSummary } from '../src/summary/summary.js';
import { anthropicAdapter } from '../src/adapters/anthropic.js';
import { geminiAdapter } from '../src/adapters/gemini.js';
import { openaiAdapter } from '../src/adapters/openai.js';
import { run as verifyCli } from '../src/cli/verify.js';
import { isTerminalSafe } from '../manifests/encoding/printable.js';
import { captureIo } from './support/capture-io.js';
import { mulberry32 } from './support/prng.mjs';
import { sampleSummary } from './support/tmp.js';

/** The seed of every case (change it to explore; a failure names the seed and case it came from). */
const SEED = Number(process.env.HL_FUZZ_SEED ?? 0x5eed34);
/** Cases per target: modest, so the file runs in well under 30 s. HL_FUZZ_SCALE multiplies them for a soak. */
const SCALE = Number(process.env.HL_FUZZ_SCALE ?? 1);
const n = (cases: number) => Math.max(1, Math.round(cases * SCALE));
/** A case slower than this is a hang (inputs are at most a few MB; generous, for a CI runner under load). */
const HANG_MS = 20_000;

type Rng = () => number;
const int = (rng: Rng, below: number) => Math.floor(rng() * below);
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[int(rng, xs.length)]!;

/** Characters that break parsers, splitters and escapers. */
const NASTY = [
  '\0',
  '\ud800',
  '\udfff',
  '"',
  '\\',
  '\n',
  '\n\n',
  '\r',
  '\u2028',
  '\ufeff',
  '\u202e',
  '\u2014 ',
  '\u0085',
  '\u00a0',
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  '+',
  '=',
  '/',
  '-',
  '_',
  ' ',
  '\t',
  '\x7f',
  '\x1b',
  'a',
  'Z',
  '0',
  '9',
  'é',
  '𝄞',
  '__proto__',
  'constructor',
];

const DEEP_ARRAY = '['.repeat(20_000) + ']'.repeat(20_000);
const DEEP_OBJECT = '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000);
const HUGE_STRING = JSON.stringify('A'.repeat(1_500_000));
const HUGE_DIGITS = '9'.repeat(5_000);

/** JSON texts to put where a value was, in kinds drawn alike (so the rare kinds are not drowned by the many). */
const RAW_VALUES: readonly (readonly string[])[] = [
  ['null', 'true', 'false', '""', '[]', '{}', '[null]'],
  ['0', '-0', '-1', '1.5', '1e400', '-1e400', '1e-400', '9007199254740993', '18446744073709551616', HUGE_DIGITS],
  ['"\\u0000"', '"\\ud800"', '"\\u202e"', '"x"', '"AAAA"', '"=="', '"__proto__"', '"a\\nb"'],
  [DEEP_ARRAY, DEEP_OBJECT, HUGE_STRING, '[1,2,3]', '["AAAA"]'],
  // Objects whose keys shadow what code reads off any value: String(v) and `${v}` throw on the first two.
  [
    '{"toString":1}',
    '{"toString":{},"valueOf":{}}',
    '{"__proto__":{"polluted":1}}',
    '{"constructor":{"prototype":{"polluted":1}}}',
    '{"toJSON":1}',
    '{"then":1}',
    '{"length":1e400}',
  ],
];
const ADDED_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'extra',
  'payload',
  'signatures',
  'proof',
  'leafIndex',
  'oldSize',
  'keys',
  'checkpointKeys',
];

const MARK = '\u0001fuzz-mark\u0001';

/** A JSON text with one value replaced, removed, added beside, or changed in type; undefined if it is not JSON. */
function mutateJson(rng: Rng, text: string): string | undefined {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch {
    return undefined;
  }
  const holder: Record<string, unknown> = { root };
  const places: Array<{ parent: Record<string, unknown> | unknown[]; key: string | number }> = [
    { parent: holder, key: 'root' },
  ];
  const walk = (v: unknown, depth: number) => {
    if (depth > 30 || typeof v !== 'object' || v === null) return;
    if (Array.isArray(v)) v.forEach((x, i) => (places.push({ parent: v, key: i }), walk(x, depth + 1)));
    else
      for (const k of Object.keys(v)) {
        places.push({ parent: v as Record<string, unknown>, key: k });
        walk((v as Record<string, unknown>)[k], depth + 1);
      }
  };
  walk(root, 0);
  // Half the time an object's member (a named field: what code reads), else any place (array elements too, which
  // would otherwise be nearly every place of a file that lists many keys or hashes).
  const members = places.filter((p) => !Array.isArray(p.parent) && p.parent !== holder);
  const { parent, key } = pick(rng, members.length > 0 && rng() < 0.5 ? members : places);
  const set = (p: object, k: string | number, value: unknown) =>
    Object.defineProperty(p, k, { value, enumerable: true, writable: true, configurable: true });
  const raw = pick(rng, pick(rng, RAW_VALUES));
  switch (int(rng, 4)) {
    case 0:
      set(parent, key, MARK);
      break;
    case 1:
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else if (parent !== holder) delete (parent as Record<string, unknown>)[key];
      else set(parent, key, MARK);
      break;
    case 2: {
      const v = (parent as Record<string | number, unknown>)[key];
      const target = typeof v === 'object' && v !== null ? v : parent;
      if (Array.isArray(target)) target.splice(int(rng, target.length + 1), 0, MARK);
      else set(target, pick(rng, ADDED_KEYS), MARK);
      break;
    }
    default: {
      const v = (parent as Record<string | number, unknown>)[key];
      const changed =
        typeof v === 'string'
          ? /^[0-9]+$/.test(v)
            ? Number(v)
            : [v]
          : typeof v === 'number'
            ? pick(rng, [String(v), v + 1, v - 1, -v, v * 2 ** 53, v + 0.5, [v]])
            : Array.isArray(v)
              ? Object.fromEntries(v.map((x, i) => [String(i), x]))
              : typeof v === 'object' && v !== null
                ? Object.values(v)
                : v === null
                  ? {}
                  : String(v);
      set(parent, key, changed);
    }
  }
  try {
    return JSON.stringify(holder.root)?.split(JSON.stringify(MARK)).join(raw);
  } catch {
    return undefined; // nested too deep for JSON.stringify (a value an earlier mutation made)
  }
}

/**
 * Every JSON text made from `text` by one substitution: each named field (and the whole value, and each array's first
 * element) replaced by each value of RAW_VALUES, or removed. Deterministic: the rare combinations random mutation
 * would seldom reach (an object whose `toString` is not a function in a field a message prints) are each tried once.
 */
function everySubstitution(text: string): string[] {
  const root: unknown = JSON.parse(text);
  const out: string[] = [];
  const paths: Array<Array<string | number>> = [[]];
  const walk = (v: unknown, path: Array<string | number>, depth: number) => {
    if (depth > 8 || typeof v !== 'object' || v === null) return;
    if (Array.isArray(v)) {
      if (v.length > 0) {
        paths.push([...path, 0]);
        walk(v[0], [...path, 0], depth + 1);
      }
    } else
      for (const k of Object.keys(v)) {
        paths.push([...path, k]);
        walk((v as Record<string, unknown>)[k], [...path, k], depth + 1);
      }
  };
  walk(root, [], 0);
  for (const path of paths)
    for (const raw of [...RAW_VALUES.flat(), undefined]) {
      const copy = { root: JSON.parse(text) as unknown };
      let parent: Record<string | number, unknown> = copy;
      let key: string | number = 'root';
      for (const k of path) [parent, key] = [parent[key] as Record<string | number, unknown>, k];
      if (raw === undefined) {
        if (path.length === 0) continue;
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete parent[key];
      } else Object.defineProperty(parent, key, { value: MARK, enumerable: true, writable: true, configurable: true });
      out.push(
        JSON.stringify(copy.root)
          .split(JSON.stringify(MARK))
          .join(raw ?? ''),
      );
    }
  return out;
}

/** A run of base64 (or hex) characters in the text, one of its characters changed to another of the alphabet. */
function mutateBase64(rng: Rng, text: string): string | undefined {
  const runs = [...text.matchAll(/[A-Za-z0-9+/_-]{8,}={0,2}/g)];
  if (runs.length === 0) return undefined;
  const m = pick(rng, runs);
  const at = m.index + int(rng, m[0].replace(/=+$/, '').length);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  let c = pick(rng, [...alphabet]);
  while (c === text[at]) c = pick(rng, [...alphabet]);
  return text.slice(0, at) + c + text.slice(at + 1);
}

/** The lines of a `\n`-separated text, mutated as lines: dropped, duplicated, swapped, one mutated as JSON. */
function mutateLines(rng: Rng, text: string): string {
  const lines = text.split('\n');
  const a = int(rng, lines.length);
  const b = int(rng, lines.length);
  switch (int(rng, 4)) {
    case 0:
      lines.splice(a, 1);
      break;
    case 1:
      lines.splice(b, 0, lines[a]!);
      break;
    case 2:
      [lines[a], lines[b]] = [lines[b]!, lines[a]!];
      break;
    default:
      lines[a] = mutateJson(rng, lines[a]!) ?? mutateBase64(rng, lines[a]!) ?? lines[a]! + pick(rng, NASTY);
  }
  return lines.join('\n');
}

/** One mutation of a text, of any kind. */
function mutateOnce(rng: Rng, text: string): string {
  const i = int(rng, text.length + 1);
  switch (int(rng, 13)) {
    case 11:
    case 12:
      return rng() < 0.2
        ? pick(rng, ['null', '[]', '{}', '0', '""', 'true', `[${text}]`, `{"x":${text}}`])
        : (mutateJson(rng, text) ?? mutateLines(rng, text));
    case 0:
      return text.slice(0, i) + pick(rng, NASTY) + text.slice(i + 1);
    case 1:
      return text.slice(0, i) + pick(rng, NASTY) + text.slice(i);
    case 2:
      return text.slice(0, i) + text.slice(i + 1 + int(rng, 40));
    case 3:
      return text.slice(0, i);
    case 4: {
      const j = int(rng, text.length + 1);
      return text.slice(0, Math.max(i, j)) + text.slice(Math.min(i, j));
    }
    case 5: {
      const c = text.charCodeAt(i) ^ (1 << int(rng, 16));
      return text.slice(0, i) + String.fromCharCode(Number.isNaN(c) ? 0 : c) + text.slice(i + 1);
    }
    case 6:
    case 7:
      return mutateBase64(rng, text) ?? text.slice(0, i);
    case 8:
      return mutateLines(rng, text);
    default:
      return mutateJson(rng, text) ?? mutateLines(rng, text);
  }
}

/** One to three mutations; never the text itself. */
function mutate(rng: Rng, text: string): string {
  let out = text;
  const times = 1 + int(rng, 3);
  for (let k = 0; k < times || out === text; k++) out = mutateOnce(rng, out);
  return out;
}

/** A byte-level mutation of bytes (flip, invalid UTF-8, delete, truncate). */
function mutateBytes(rng: Rng, bytes: Uint8Array): Uint8Array {
  const i = int(rng, bytes.length + 1);
  const splice = (del: number, ins: number[]) =>
    Uint8Array.from([...bytes.subarray(0, i), ...ins, ...bytes.subarray(i + del)]);
  switch (int(rng, 4)) {
    case 0:
      return splice(1, [(bytes[i] ?? 0) ^ (1 << int(rng, 8))]);
    case 1:
      return splice(
        0,
        pick(rng, [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0], [0x0a], [0xef, 0xbb, 0xbf]]),
      );
    case 2:
      return splice(1 + int(rng, 30), []);
    default:
      return bytes.slice(0, i);
  }
}

// ------------------------------------------------------------------------------------------------------------------
// The judge

const defects: string[] = [];
/** What the cases came to, per target (printed with HL_FUZZ_STATS=1: how deep the mutations reach). */
const stats = new Map<string, Map<string, number>>();
const tally = (target: string, outcome: string) => {
  const t = stats.get(target) ?? new Map<string, number>();
  stats.set(target, t.set(outcome, (t.get(outcome) ?? 0) + 1));
};
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
process.on('unhandledRejection', onUnhandled);

const prototypesClean = () =>
  Object.keys(Object.prototype).length === 0 &&
  ({} as Record<string, unknown>).polluted === undefined &&
  Object.keys(Array.prototype).length === 0;

const describeError = (err: unknown) =>
  `${(err as Error)?.name ?? typeof err}: ${String((err as Error)?.message ?? err).slice(0, 200)}`;

/** Whether an error is one of the project's coded errors. */
const isCoded = (err: unknown): err is HandoffLedgerError =>
  err instanceof HandoffLedgerError && typeof err.code === 'string' && err.code.length > 0;

/**
 * Runs one case: `run` may return a result (then `accept` says whether it is a right one: a string names the defect)
 * or throw a coded error (one of `codes`, when given). Anything else is recorded as a defect.
 */
async function judge<T>(
  target: string,
  index: number,
  run: () => T | Promise<T>,
  accept: (result: T) => string | undefined = () => undefined,
  codes?: readonly string[],
  bound = HANG_MS,
): Promise<void> {
  const where = `${target} #${index} (seed ${SEED})`;
  const t0 = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const result = await Promise.race([
      Promise.resolve().then(run),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`HANG: no answer in ${bound} ms`)), bound);
      }),
    ]);
    const kind = target.replace(/ #.*| \(.*/, '');
    const report = result as { ok?: unknown; findings?: Array<{ code: string }> } | undefined;
    if (report && typeof report === 'object' && Array.isArray(report.findings))
      tally(kind, report.ok ? 'ok' : `findings: ${[...new Set(report.findings.map((f) => f.code))].sort().join(' ')}`);
    else if (report && typeof report === 'object' && 'ok' in report) tally(kind, `ok: ${String(report.ok)}`);
    else if (report && typeof report === 'object' && 'status' in report)
      tally(kind, `status ${String((report as { status: unknown }).status)}`);
    else tally(kind, 'accepted');
    const wrong = accept(result);
    if (wrong !== undefined) defects.push(`${where}: accepted: ${wrong}`);
  } catch (err) {
    tally(target.replace(/ #.*| \(.*/, ''), isCoded(err) ? `refused: ${err.code}` : 'raw error');
    if (!isCoded(err)) defects.push(`${where}: not a coded error: ${describeError(err)}`);
    else if (codes && !codes.includes(err.code))
      defects.push(`${where}: unexpected code ${err.code}: ${describeError(err)}`);
  } finally {
    clearTimeout(timer);
  }
  const ms = performance.now() - t0;
  if (ms > bound) defects.push(`${where}: took ${Math.round(ms)} ms`);
  if (!prototypesClean()) {
    defects.push(`${where}: a prototype was polluted`);
    for (const k of Object.keys(Object.prototype)) delete (Object.prototype as Record<string, unknown>)[k];
  }
}

/** Fails the test with every defect its cases found (and clears them for the next test). */
function expectNoDefects(): void {
  const found = defects.splice(0);
  const rejected = unhandled.splice(0).map((r) => `unhandled rejection: ${describeError(r)}`);
  expect([...found, ...rejected].slice(0, 25)).toEqual([]);
}

// ------------------------------------------------------------------------------------------------------------------
// Valid inputs, made by the project

const ORIGIN = 'example.com/fuzzed';
const TS = 1_767_225_600; // the witness's cosignature time

interface BundleFiles {
  header: string;
  manifests: string;
  tree: Partial<Record<BundleTreeFile, string>>;
  blobs: Map<string, Uint8Array>;
}

let base: string;
let ledger: Ledger;
let trust: TrustStore;
let trustText: string;
let earlier: string;
let full: BundleFiles;
let filtered: BundleFiles;
let witnessSigner: NoteSigner;
let witnessVkey: string;
let witnesses: VerifyBundleOptions['witnesses'];

function readBundleDir(dir: string): BundleFiles {
  const opt = (name: string) => {
    try {
      return readFileSync(join(dir, name), 'utf8');
    } catch {
      return undefined;
    }
  };
  const tree: BundleFiles['tree'] = {};
  for (const name of ['checkpoint.note', 'proofs.jsonl', 'consistency.json', 'heads.jsonl'] as const) {
    const t = opt(name);
    if (t !== undefined) tree[name] = t;
  }
  const blobs = new Map<string, Uint8Array>();
  const blobDir = join(dir, 'blobs', 'blake3');
  for (const f of (() => {
    try {
      return readdirSync(blobDir);
    } catch {
      return [];
    }
  })())
    blobs.set(`blake3:${f}`, readFileSync(join(blobDir, f)));
  return { header: opt('bundle.json')!, manifests: opt('manifests.jsonl')!, tree, blobs };
}

/** A checkpoint note with the pinned witness's cosignature line added. */
async function cosigned(note: string): Promise<string> {
  const body = note.slice(0, note.indexOf('\n\n') + 1);
  return note + (await cosignCheckpoint(body, witnessSigner, TS));
}

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'hl-fuzz-'));
  chmodSync(base, 0o700);
  ledger = await openLedger({ root: join(base, 'store'), host: 'h1', origin: ORIGIN, onNotice: () => {} });
  const publish = (session: string, marker: number) =>
    ledger.publish({ principal: 'alice', session, run: 'r' }, sampleSummary(`${session}-${marker}`));
  await publish('s1', 0);
  await publish('s2', 0);
  earlier = (await ledger.checkpoint()).note;
  await publish('s1', 1);
  await publish('s2', 1);
  await publish('s1', 2);
  await publish('s3', 0);
  trust = ledger.trustStore();
  trustText = `${JSON.stringify(trust, null, 2)}\n`;
  await exportBundle(ledger, { out: join(base, 'full'), withBlobs: true });
  await exportBundle(ledger, { out: join(base, 'filtered'), session: 's1', withBlobs: true, since: earlier });
  full = readBundleDir(join(base, 'full'));
  filtered = readBundleDir(join(base, 'filtered'));
  const seed = new Uint8Array(32).fill(0x42);
  witnessSigner = { name: 'witness.example/w1', publicKey: noblePublicKey(seed), sign: (m) => nobleSign(m, seed) };
  witnessVkey = encodeCosignerKey(witnessSigner.name, witnessSigner.publicKey);
  witnesses = { keys: [parseCosignerKey(witnessVkey)], quorum: 1 };
  const webcrypto = await createWebCryptoLineVerifier(trust);
  expect(webcrypto).toBeDefined();
  workerPool = await createWorkerLineVerifier({ trust, threads: 2 });
  otherVerifiers = [
    ['noble', () => ({ verifier: nobleVerifier })],
    ['webcrypto lines', () => ({ lineVerifier: webcrypto! })],
    ['worker threads', () => ({ lineVerifier: workerPool! })],
  ];
  full.tree['checkpoint.note'] = await cosigned(full.tree['checkpoint.note']!);
  filtered.tree['checkpoint.note'] = await cosigned(filtered.tree['checkpoint.note']!);
});

afterAll(async () => {
  if (process.env.HL_FUZZ_STATS === '1')
    for (const [target, outcomes] of stats)
      console.log(
        `${target}:`,
        [...outcomes]
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => `${v} ${k}`)
          .join('; '),
      );
  process.off('unhandledRejection', onUnhandled);
  await workerPool?.close();
  await ledger?.close();
  rmSync(base, { recursive: true, force: true });
  // A rejection left unhandled after the last test's check is judged here (vitest reports none while this listens).
  expect(unhandled.map(describeError)).toEqual([]);
});

// ------------------------------------------------------------------------------------------------------------------
// Oracles

const payloadsOf = (manifests: string | Uint8Array) => {
  const text = typeof manifests === 'string' ? manifests : new TextDecoder().decode(manifests);
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      try {
        return JSON.stringify(parseEnvelope(l).payload);
      } catch {
        return 'unparsable';
      }
    });
};

const bodyOf = (note: string) => note.slice(0, note.indexOf('\n\n') + 1);

type Variant = { name: string; files: () => BundleFiles; options: () => VerifyBundleOptions };
const VARIANTS: Variant[] = [
  {
    name: 'full',
    files: () => full,
    options: () => ({ trust, verifier: nodeVerifier, expect: 'full', since: earlier, witnesses, requireBlobs: true }),
  },
  {
    name: 'filtered',
    files: () => filtered,
    options: () => ({
      trust,
      verifier: nodeVerifier,
      expect: 'filtered',
      since: earlier,
      witnesses,
      requireBlobs: true,
    }),
  },
];

/** What an ok report of a mutated bundle must still be: the original's manifests, blobs and checkpoint. */
function okOnlyIfSame(original: BundleFiles, mutated: BundleFiles, report: BundleAuditReport): string | undefined {
  if (!report.ok) return undefined;
  if (!isDeepStrictEqual(payloadsOf(mutated.manifests), payloadsOf(original.manifests)))
    return 'an ok report for other manifests than were signed';
  for (const [digest, bytes] of original.blobs) {
    const b = mutated.blobs.get(digest);
    if (!b || !isDeepStrictEqual(Uint8Array.from(b), Uint8Array.from(bytes)))
      return `an ok report with blob ${digest} changed or missing`;
  }
  const note = mutated.tree['checkpoint.note'];
  if (note === undefined || bodyOf(note) !== bodyOf(original.tree['checkpoint.note']!))
    return 'an ok report against another checkpoint';
  return undefined;
}

const FILES = [
  'header',
  'manifests',
  'checkpoint.note',
  'proofs.jsonl',
  'consistency.json',
  'heads.jsonl',
  'blob',
] as const;

/** The bundle with one of its files mutated. */
function mutateBundle(rng: Rng, b: BundleFiles): BundleFiles {
  const out: BundleFiles = { header: b.header, manifests: b.manifests, tree: { ...b.tree }, blobs: new Map(b.blobs) };
  const which = pick(
    rng,
    FILES.filter(
      (f) => f === 'header' || f === 'manifests' || (f === 'blob' ? b.blobs.size > 0 : b.tree[f] !== undefined),
    ),
  );
  if (which === 'header') out.header = mutate(rng, b.header);
  else if (which === 'manifests') out.manifests = mutate(rng, b.manifests);
  else if (which === 'blob') {
    const [digest, bytes] = pick(rng, [...b.blobs]);
    if (rng() < 0.2) out.blobs.delete(digest);
    else
      out.blobs.set(
        digest,
        rng() < 0.5 ? mutateBytes(rng, bytes) : new TextEncoder().encode(mutate(rng, new TextDecoder().decode(bytes))),
      );
  } else {
    const text = b.tree[which];
    if (text === undefined || rng() < 0.1) delete out.tree[which];
    else out.tree[which] = mutate(rng, text);
  }
  return out;
}

const found = (r: BundleAuditReport) => r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

/** Line verifiers and signature backends that must agree with the in-thread node:crypto one on every bundle. */
let otherVerifiers: Array<[string, () => Partial<VerifyBundleOptions>]>;
let workerPool: LineVerifier | undefined;

const readerOf = (f: BundleFiles) =>
  memoryBundleReader({ header: f.header, manifests: f.manifests, treeFiles: f.tree, blobs: f.blobs });

// ------------------------------------------------------------------------------------------------------------------
// The targets

describe('exported bundles (in memory): verifyBundle and auditBundle', () => {
  it('the untouched bundles verify (the oracles start from valid inputs)', async () => {
    for (const v of VARIANTS) {
      const r = await verifyBundle(readerOf(v.files()), v.options());
      expect(r.findings).toEqual([]);
      expect(r.ok).toBe(true);
      expect(r.checkpoint?.witnesses?.signedBy).toHaveLength(1);
    }
    expect(filtered.tree['proofs.jsonl']).toBeDefined();
    expect(filtered.tree['heads.jsonl']).toBeDefined();
    expect(filtered.tree['consistency.json']).toBeDefined();
    expect(full.blobs.size).toBeGreaterThan(0);
  });

  for (const v of VARIANTS) {
    it(`${v.name}: mutated files are findings or coded refusals, and an ok report is the signed bundle`, async () => {
      const rng = mulberry32(SEED ^ (v.name === 'full' ? 1 : 2));
      for (let i = 0; i < n(100); i++) {
        const mutated = mutateBundle(rng, v.files());
        const audit = i % 2 === 0 ? verifyBundle : auditBundle;
        // Now and then the auditor's own earlier checkpoint (--since, a file they were handed) is mutated too: one that
        // does not verify is the auditor's USAGE error, never a raw one.
        const since = rng() < 0.15 ? mutate(rng, earlier) : earlier;
        let reference: string[] | undefined;
        await judge(
          `${v.name} bundle`,
          i,
          () => audit(readerOf(mutated), { ...v.options(), since }),
          (r) => ((reference = found(r)), okOnlyIfSame(v.files(), mutated, r)),
          ['BUNDLE_INVALID', 'BUNDLE_IO', 'USAGE'],
        );
        // The same bundle through another line verifier (and signature backend): the same findings, line for line.
        const [name, other] = otherVerifiers[i % otherVerifiers.length]!;
        await judge(
          `${v.name} bundle, ${name}`,
          i,
          () => verifyBundle(readerOf(mutated), { ...v.options(), since, ...other() }),
          (r) =>
            reference === undefined || isDeepStrictEqual(found(r), reference)
              ? okOnlyIfSame(v.files(), mutated, r)
              : `findings differ from the in-thread node:crypto verifier's: ${found(r).join(' ')} / ${reference.join(' ')}`,
          ['BUNDLE_INVALID', 'BUNDLE_IO', 'USAGE'],
        );
      }
      expectNoDefects();
    });
  }

  it('huge and deep inputs: refused or streamed, in bounded time and memory', async () => {
    const v = VARIANTS[1]!;
    const f = v.files();
    const line = f.manifests.split('\n')[0]!;
    const cases: Array<[string, BundleFiles]> = [
      ['one 8 MB line', { ...f, manifests: `${'x'.repeat(8 * 1024 * 1024)}\n` }],
      ['a line of deep nesting', { ...f, manifests: `${DEEP_ARRAY}\n${f.manifests}` }],
      ['a million empty lines', { ...f, manifests: '\n'.repeat(1_000_000) }],
      ['a line repeated 3,000 times', { ...f, manifests: `${line}\n`.repeat(3_000) }],
      ['a 2 MB checkpoint', { ...f, tree: { ...f.tree, 'checkpoint.note': 'a\n'.repeat(1024 * 1024) } }],
      ['a 1 MB proofs line', { ...f, tree: { ...f.tree, 'proofs.jsonl': `{"proof":${HUGE_STRING}}\n` } }],
      ['300,000 proofs lines', { ...f, tree: { ...f.tree, 'proofs.jsonl': '{}\n'.repeat(300_000) } }],
      ['deep heads', { ...f, tree: { ...f.tree, 'heads.jsonl': `${DEEP_OBJECT}\n` } }],
      ['deep consistency', { ...f, tree: { ...f.tree, 'consistency.json': DEEP_ARRAY } }],
      ['a 100 KB header', { ...f, header: `{"x":"${'h'.repeat(100 * 1024)}"}` }],
    ];
    for (const [i, [name, files]] of cases.entries()) {
      const before = process.memoryUsage().heapUsed;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 2);
      // Bounded more loosely than a case of ordinary size: these are megabytes, on a machine that may be busy.
      await judge(
        `huge: ${name}`,
        i,
        () => verifyBundle(readerOf(files), v.options()),
        (r) => (r.ok ? 'a huge mutated bundle verified' : undefined),
        undefined,
        3 * HANG_MS,
      );
      clearInterval(sampler);
      peak = Math.max(peak, process.memoryUsage().heapUsed);
      if (peak - before > 512 * 1024 * 1024)
        defects.push(`huge: ${name}: heap grew by ${Math.round((peak - before) / 2 ** 20)} MB`);
    }
    expectNoDefects();
  });
});

describe('exported bundles (directories): openBundleDir and auditBundle', () => {
  function writeDir(dir: string, f: BundleFiles): void {
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, 'bundle.json'), f.header);
    writeFileSync(join(dir, 'manifests.jsonl'), f.manifests);
    for (const [name, text] of Object.entries(f.tree)) writeFileSync(join(dir, name), text);
    if (f.blobs.size > 0) {
      mkdirSync(join(dir, 'blobs', 'blake3'), { recursive: true });
      for (const [digest, bytes] of f.blobs) writeFileSync(join(dir, 'blobs', 'blake3', digest.slice(7)), bytes);
    }
  }

  it('mutated files on disk: coded refusals or findings, an ok report only for the signed bundle', async () => {
    const rng = mulberry32(SEED ^ 3);
    const root = mkdtempSync(join(base, 'dirs-'));
    const trustPath = join(root, 'trust.json');
    const sincePath = join(root, 'since.note');
    const witnessKeysPath = join(root, 'witnesses.txt');
    writeFileSync(trustPath, trustText);
    writeFileSync(sincePath, earlier);
    writeFileSync(witnessKeysPath, `${witnessVkey}\n`);
    for (let i = 0; i < n(40); i++) {
      const v = VARIANTS[i % 2]!;
      const mutated = mutateBundle(rng, v.files());
      const dir = join(root, String(i));
      writeDir(dir, mutated);
      await judge(
        `bundle dir (${v.name})`,
        i,
        async () => auditBundle(await openBundleDir(dir), v.options()),
        (r) => okOnlyIfSame(v.files(), mutated, r),
        ['BUNDLE_INVALID', 'BUNDLE_IO'],
      );
      // The CLI on the same directory: an exit code of its own (never 70, an internal error), and every line it
      // writes terminal-safe (what a bundle carries is data: a control character could forge the verdict's line).
      const c = captureIo();
      const args = [
        dir,
        '--trust',
        trustPath,
        '--since',
        sincePath,
        '--witness-keys',
        witnessKeysPath,
        '--quorum',
        '1',
      ];
      if (i % 3 === 0) args.push('--json');
      await judge(
        `verify CLI (${v.name})`,
        i,
        () => verifyCli([...args, '--workers', '0', '--expect', v.name], c.io),
        (code) => {
          if (code === 70) return `internal error: ${c.stderr().slice(0, 300)}`;
          const wrong = code === 0 ? okOnlyIfSame(v.files(), mutated, { ok: true } as BundleAuditReport) : undefined;
          if (wrong !== undefined) return `exit 0: ${wrong}`;
          if (!isTerminalSafe(c.stdout()) || !isTerminalSafe(c.stderr()))
            return `wrote a control character: ${JSON.stringify((c.stdout() + c.stderr()).slice(0, 300))}`;
          return undefined;
        },
      );
    }
    expectNoDefects();
  });

  it('the verify CLI on strings of hostile characters in every field of an envelope line: every line it writes is terminal-safe', async () => {
    const root = mkdtempSync(join(base, 'cli-'));
    const trustPath = join(root, 'trust.json');
    writeFileSync(trustPath, trustText);
    const f = VARIANTS[0]!.files();
    const [first, ...rest] = f.manifests.split('\n');
    // The string-valued substitutions (a field given a string of controls, bidi marks, separators), and a payload
    // type that carries some of each as findings echo it.
    const lines = [
      ...everySubstitution(first!).filter((t) => /\\u|\\n/.test(t)),
      first!.replace(/"payloadType":"[^"]*"/, '"payloadType":"x\\u202e\\u009b[2J\\u0085\\u2028y\\u001b[31m"'),
    ];
    for (const [i, line] of lines.entries()) {
      const dir = join(root, String(i));
      writeDir(dir, { ...f, manifests: [line, ...rest].join('\n') });
      for (const json of [false, true]) {
        const c = captureIo();
        await judge(
          `verify CLI, hostile strings${json ? ' (--json)' : ''}`,
          i,
          () => verifyCli([dir, '--trust', trustPath, '--workers', '0', ...(json ? ['--json'] : [])], c.io),
          (code) =>
            code === 70
              ? `internal error: ${c.stderr().slice(0, 300)}`
              : !isTerminalSafe(c.stdout()) || !isTerminalSafe(c.stderr())
                ? `wrote a control character: ${JSON.stringify((c.stdout() + c.stderr()).slice(0, 300))}`
                : undefined,
        );
      }
    }
    expectNoDefects();
  });

  it('files that are not files: links, directories, FIFOs, devices — coded refusals or findings, never a hang', async () => {
    const root = mkdtempSync(join(base, 'odd-'));
    const names = [
      'bundle.json',
      'manifests.jsonl',
      'checkpoint.note',
      'proofs.jsonl',
      'heads.jsonl',
      'consistency.json',
    ];
    let i = 0;
    for (const name of names) {
      for (const kind of ['symlink to /dev/zero', 'directory', 'fifo', 'symlink loop', 'blob dir link'] as const) {
        const dir = join(root, String(i));
        writeDir(dir, filtered);
        const at = join(dir, name);
        rmSync(at, { force: true });
        if (kind === 'symlink to /dev/zero') symlinkSync('/dev/zero', at);
        else if (kind === 'directory') mkdirSync(at);
        else if (kind === 'fifo') execFileSync('mkfifo', [at]);
        else if (kind === 'symlink loop') symlinkSync(at, at);
        else {
          writeFileSync(
            at,
            name === 'bundle.json' ? filtered.header : (filtered.tree[name as BundleTreeFile] ?? filtered.manifests),
          );
          rmSync(join(dir, 'blobs'), { recursive: true });
          symlinkSync(join(base, 'full', 'blobs'), join(dir, 'blobs'));
        }
        await judge(
          `odd file: ${name} as ${kind}`,
          i++,
          async () => auditBundle(await openBundleDir(dir), VARIANTS[1]!.options()),
          (r) => (r.ok ? 'a bundle with a file that is not a file verified' : undefined),
          ['BUNDLE_INVALID', 'BUNDLE_IO'],
        );
      }
    }
    expectNoDefects();
  });
});

describe('manifest envelopes (DSSE)', () => {
  it('mutated envelope lines: coded refusals, and a verified one is the payload that was signed', async () => {
    const rng = mulberry32(SEED ^ 4);
    const lines = full.manifests.split('\n').filter((l) => l !== '');
    for (let i = 0; i < n(800); i++) {
      const original = pick(rng, lines);
      const text = mutate(rng, original);
      const input: unknown =
        i % 5 === 0
          ? (() => {
              try {
                return JSON.parse(text);
              } catch {
                return text;
              }
            })()
          : text;
      await judge(
        'envelope',
        i,
        () => verifyManifestEnvelope(input, { trust, verifier: nodeVerifier }),
        (v) =>
          JSON.stringify(v.payload) === JSON.stringify(parseEnvelope(original).payload)
            ? undefined
            : `a mutated envelope verified as ${v.id}`,
      );
    }
    expectNoDefects();
  });
});

describe('manifest payloads: the fast canonical reader against the schema path', () => {
  it('mutated payload texts: readCanonicalManifest reads a manifest only when JSON.parse + schema + canonical form give the same', async () => {
    const rng = mulberry32(SEED ^ 14);
    const payloads = full.manifests
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => new TextDecoder().decode(parseEnvelope(l).payload));
    const slow = (text: string): Manifest | undefined => {
      try {
        const parsed = manifestSchema.safeParse(JSON.parse(text));
        return parsed.success && canonicalManifestText(parsed.data as Manifest) === text
          ? (parsed.data as Manifest)
          : undefined;
      } catch {
        return undefined;
      }
    };
    for (const p of payloads) expect(readCanonicalManifest(p)).toEqual(slow(p));
    for (let i = 0; i < n(2000); i++) {
      const text = mutate(rng, pick(rng, payloads));
      await judge(
        'canonical reader',
        i,
        () => readCanonicalManifest(text),
        (fast) => {
          if (fast === undefined) return undefined;
          const expected = slow(text);
          return expected !== undefined && isDeepStrictEqual(Object.entries(fast), Object.entries(expected))
            ? undefined
            : `read ${JSON.stringify(text)} as a manifest the schema path does not give`;
        },
        [],
      );
    }
    expectNoDefects();
  });
});

describe('base64: the strict decoders every parser above relies on', () => {
  it('mutated base64 texts: decodeBase64 and decodeBase64Either give bytes exactly for the canonical padded encoding', async () => {
    const rng = mulberry32(SEED ^ 19);
    const canonical = (text: string): Uint8Array | undefined => {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
      const bytes = Buffer.from(text, 'base64');
      return bytes.toString('base64') === text ? Uint8Array.from(bytes) : undefined;
    };
    const same = (a: Uint8Array | undefined, b: Uint8Array | undefined) =>
      a === undefined || b === undefined ? a === b : Buffer.compare(a, b) === 0;
    for (let i = 0; i < n(3000); i++) {
      // Short (the portable loop) and long (Node's decoder behind the canonical checks) texts.
      const bytes = Uint8Array.from({ length: int(rng, 2) === 0 ? int(rng, 40) : 40 + int(rng, 200) }, () =>
        int(rng, 256),
      );
      let text = Buffer.from(bytes).toString('base64');
      if (rng() < 0.3) text = text.replace(/\+/g, '-').replace(/\//g, '_');
      const k = int(rng, 4);
      for (let m = 0; m < k; m++) {
        const at = int(rng, text.length + 1);
        const c = pick(rng, ['=', '==', 'A', 'B', '/', '+', '-', '_', ' ', '\n', '\0', 'é', '\ud800', '']);
        text = int(rng, 2) === 0 ? text.slice(0, at) + c + text.slice(at + 1) : text.slice(0, at) + c + text.slice(at);
      }
      const std = canonical(text);
      const either =
        /[-_]/.test(text) && !/[+/]/.test(text) ? canonical(text.replace(/-/g, '+').replace(/_/g, '/')) : std;
      await judge(
        'base64',
        i,
        () => ({ a: decodeBase64(text), b: decodeBase64Either(text) }),
        (r) =>
          same(r.a, std) && same(r.b, either)
            ? undefined
            : `${JSON.stringify(text)}: decodeBase64 ${r.a && Buffer.from(r.a).toString('hex')}, either ${r.b && Buffer.from(r.b).toString('hex')}`,
      );
    }
    expectNoDefects();
  });
});

describe('signed notes, checkpoints and cosignatures', () => {
  it('mutated checkpoint notes: NOTE_*/CHECKPOINT_INVALID, and an opened one is the signed text', async () => {
    const rng = mulberry32(SEED ^ 5);
    const note = full.tree['checkpoint.note']!;
    const keys = checkpointVerifiers(trust);
    for (let i = 0; i < n(1000); i++) {
      const text = mutate(rng, note);
      await judge(
        'checkpoint note',
        i,
        () => {
          const opened = openNote(text, keys, nodeVerifier);
          return { opened, checkpoint: parseCheckpoint(opened.text) };
        },
        ({ opened }) => (opened.text === bodyOf(note) ? undefined : 'a mutated note opened with another text'),
        ['NOTE_MALFORMED', 'NOTE_UNVERIFIED', 'NOTE_SIGNATURE_INVALID', 'CHECKPOINT_INVALID'],
      );
    }
    expectNoDefects();
  });

  it('mutated cosigned notes: checkCosignatures never throws, and a valid cosignature is the one made', async () => {
    const rng = mulberry32(SEED ^ 6);
    const note = full.tree['checkpoint.note']!;
    for (let i = 0; i < n(1000); i++) {
      const text = mutate(rng, note);
      await judge(
        'cosignatures',
        i,
        () => checkCosignatures(text, witnesses!.keys, nodeVerifier),
        (r) =>
          r.valid.length === 0 ||
          (bodyOf(text) === bodyOf(note) && r.valid.every((c) => c.timestampText === String(TS)))
            ? undefined
            : 'a cosignature verified over another text or time',
        [],
      );
    }
    expectNoDefects();
  });

  it('mutated verifier keys and witness keys files: KEY_INVALID, or the key that was written', async () => {
    const rng = mulberry32(SEED ^ 7);
    const noteVkey = trust.checkpointKeys![0]!.vkey;
    const original = parseVerifierKey(noteVkey);
    const cosigner = parseCosignerKey(witnessVkey);
    const file = `# witnesses\n${witnessVkey}\n\n${encodeCosignerKey('w2', noblePublicKey(new Uint8Array(32).fill(9)))}\n`;
    for (let i = 0; i < n(1000); i++) {
      const a = mutate(rng, noteVkey);
      await judge(
        'note verifier key',
        i,
        () => parseVerifierKey(a),
        (k) =>
          k.name === original.name && isDeepStrictEqual(k.publicKey, original.publicKey) ? undefined : 'another key',
        ['KEY_INVALID'],
      );
      const b = mutate(rng, witnessVkey);
      await judge(
        'witness verifier key',
        i,
        () => parseCosignerKey(b),
        (k) =>
          k.name === cosigner.name && isDeepStrictEqual(k.publicKey, cosigner.publicKey) ? undefined : 'another key',
        ['KEY_INVALID'],
      );
      const c = mutate(rng, file);
      await judge(
        'witness keys file',
        i,
        () => parseWitnessKeys(c),
        () => undefined,
        ['KEY_INVALID'],
      );
    }
    expectNoDefects();
  });

  it('mutated checkpoint bodies: CHECKPOINT_INVALID or a checkpoint that formats back to the same text', async () => {
    const rng = mulberry32(SEED ^ 8);
    const body = bodyOf(full.tree['checkpoint.note']!);
    for (let i = 0; i < n(1500); i++) {
      const text = mutate(rng, body);
      await judge(
        'checkpoint body',
        i,
        () => parseCheckpoint(text),
        (c) => {
          // Origins read from others may be any non-empty line (C2SP); the rest must read back exactly.
          const back = [c.origin, String(c.size), Buffer.from(c.root).toString('base64'), ...c.extensions]
            .map((l) => `${l}\n`)
            .join('');
          return back === text ? undefined : `parsed to a checkpoint that is not the text: ${JSON.stringify(text)}`;
        },
        ['CHECKPOINT_INVALID'],
      );
    }
    expectNoDefects();
  });
});

describe('Merkle proofs and add-checkpoint bodies', () => {
  const leaves = Array.from({ length: 23 }, (_, i) => new TextEncoder().encode(`leaf-${i}`));
  const mth = (ls: Uint8Array[]): Uint8Array => {
    if (ls.length === 0) return EMPTY_ROOT;
    if (ls.length === 1) return leafHash(ls[0]!);
    const k = 2 ** Math.floor(Math.log2(ls.length - 1));
    return nodeHash(mth(ls.slice(0, k)), mth(ls.slice(k)));
  };

  /** A list of hashes with one change: a byte flipped, a hash dropped, duplicated, swapped, added, or cut short. */
  function mutateHashes(rng: Rng, hashes: Uint8Array[]): Uint8Array[] {
    const out: Uint8Array[] = hashes.map((h) => Uint8Array.from(h));
    const a = int(rng, out.length + 1);
    const b = int(rng, out.length);
    switch (int(rng, 6)) {
      case 0:
        if (out[b]) out[b]![int(rng, 32)]! ^= 1 << int(rng, 8);
        else out.push(new Uint8Array(32));
        break;
      case 1:
        out.splice(b, 1);
        break;
      case 2:
        if (out[b]) out.splice(a, 0, out[b]!);
        else out.push(new Uint8Array(32));
        break;
      case 3:
        if (out[a] && out[b] && !isDeepStrictEqual(out[a], out[b])) [out[a], out[b]] = [out[b]!, out[a]!];
        else out.push(new Uint8Array(32).fill(1));
        break;
      case 4:
        out.splice(a, 0, leafHash(new Uint8Array([int(rng, 256)])));
        break;
      default:
        if (out[b]) out[b] = out[b]!.subarray(0, int(rng, 32));
        else out.push(new Uint8Array(31));
    }
    return out;
  }

  /** A hash changed: a bit flipped, or cut short. */
  const changeHash = (rng: Rng, h: Uint8Array): Uint8Array => {
    if (rng() < 0.2) return h.slice(0, int(rng, 32));
    const out = Uint8Array.from(h);
    out[int(rng, 32)]! ^= 1 << int(rng, 8);
    return out;
  };

  it('inclusion proofs with a changed hash, leaf, root or index never verify, and the verifier never throws', async () => {
    const rng = mulberry32(SEED ^ 9);
    for (let i = 0; i < n(1000); i++) {
      const size = 1 + int(rng, leaves.length);
      const index = int(rng, size);
      const ls = leaves.slice(0, size);
      const proof = inclusionRanges(index, size).map(([s, e]) => mth(ls.slice(s, e)));
      const root = mth(ls);
      const leaf = leafHash(ls[index]!);
      expect(verifyInclusion(index, size, leaf, proof, root)).toEqual({ ok: true });
      const what = int(rng, 5);
      const args: [number | bigint, number | bigint, Uint8Array, Uint8Array[], Uint8Array] =
        what === 0
          ? [index, size, leaf, mutateHashes(rng, proof), root]
          : what === 1
            ? [
                pick(rng, [index + 1, index - 1, index ^ 1, -1, 2 ** 53, NaN, 0.5, 2n ** 64n, -1n]),
                size,
                leaf,
                proof,
                root,
              ]
            : what === 2
              ? [index, size, changeHash(rng, leaf), proof, root]
              : what === 3
                ? [index, size, leaf, proof, changeHash(rng, root)]
                : [index, pick(rng, [-1, NaN, 2 ** 53, 1.5, 0, 2n ** 64n]), leaf, proof, root];
      const changed = !isDeepStrictEqual(args, [index, size, leaf, proof, root]);
      await judge(
        'inclusion proof',
        i,
        () => verifyInclusion(...args),
        (r) =>
          r.ok && changed
            ? `verified with ${['a changed proof', 'another index', 'another leaf', 'another root', 'another size'][what]}`
            : undefined,
        [],
      );
    }
    expectNoDefects();
  });

  it('consistency proofs with a changed hash, root or size never verify, and the verifier never throws', async () => {
    const rng = mulberry32(SEED ^ 10);
    for (let i = 0; i < n(1000); i++) {
      const size2 = 2 + int(rng, leaves.length - 1);
      const size1 = 1 + int(rng, size2 - 1);
      const proof = consistencyRanges(size1, size2).map(([s, e]) => mth(leaves.slice(s, e)));
      const root1 = mth(leaves.slice(0, size1));
      const root2 = mth(leaves.slice(0, size2));
      expect(verifyConsistency(size1, size2, proof, root1, root2)).toEqual({ ok: true });
      const what = int(rng, 4);
      const args: [number, number, Uint8Array[], Uint8Array, Uint8Array] =
        what === 0
          ? [size1, size2, mutateHashes(rng, proof), root1, root2]
          : what === 1
            ? [size1, size2, proof, changeHash(rng, root1), root2]
            : what === 2
              ? [size1, size2, proof, root1, changeHash(rng, root2)]
              : [pick(rng, [size1 + 1, size1 - 1, 0, -1, NaN, size2 + 1]), size2, proof, root1, root2];
      const changed = !isDeepStrictEqual(args, [size1, size2, proof, root1, root2]);
      await judge(
        'consistency proof',
        i,
        () => verifyConsistency(...args),
        (r) =>
          r.ok && changed
            ? `verified with ${['a changed proof', 'another old root', 'another new root', 'another old size'][what]}`
            : undefined,
        [],
      );
    }
    expectNoDefects();
  });

  it('mutated add-checkpoint bodies: a 400 (INVALID_ARGUMENT) or a decision; a 200 only for the signed tree', async () => {
    const rng = mulberry32(SEED ^ 11);
    const seed = new Uint8Array(32).fill(0x17);
    const log: NoteSigner = {
      name: 'log.example/fuzz',
      publicKey: noblePublicKey(seed),
      sign: (m) => nobleSign(m, seed),
    };
    const logKeys = [parseVerifierKey(encodeVerifierKey(log.name, log.publicKey))];
    const oldSize = 9;
    const newSize = 21;
    const body = formatCheckpoint({
      origin: log.name,
      size: newSize,
      root: mth(leaves.slice(0, newSize)),
      extensions: [],
    });
    const note = await signNote(body, [log]);
    const request = formatAddCheckpoint({
      oldSize,
      proof: consistencyRanges(oldSize, newSize).map(([s, e]) => mth(leaves.slice(s, e))),
      note,
    });
    const stored = { size: oldSize, root: mth(leaves.slice(0, oldSize)) };
    expect(decideAddCheckpoint(parseAddCheckpoint(request), logKeys, stored).status).toBe(200);
    for (let i = 0; i < n(800); i++) {
      const text = mutate(rng, request);
      await judge(
        'add-checkpoint',
        i,
        () => decideAddCheckpoint(parseAddCheckpoint(text), logKeys, stored),
        (d) => (d.status !== 200 || d.text === body ? undefined : 'cosignable decision for another tree'),
        ['INVALID_ARGUMENT'],
      );
    }
    expectNoDefects();
  });
});

describe('trust files', () => {
  it('mutated trust.json text and values: TRUST_INVALID, and an accepted one still audits without throwing', async () => {
    const rng = mulberry32(SEED ^ 12);
    for (let i = 0; i < n(600); i++) {
      const text = mutate(rng, trustText);
      const input: unknown =
        i % 3 === 0
          ? (() => {
              try {
                return JSON.parse(text);
              } catch {
                return text;
              }
            })()
          : text;
      await judge(
        'trust store',
        i,
        async () => {
          const t = parseTrustStore(input);
          // A trust store that no longer vouches for the auditor's earlier checkpoint (its key left out or changed)
          // refuses that checkpoint (USAGE) before the bundle is read: the auditor's input, not the bundle, is wrong.
          if (i % 4 === 0)
            await verifyBundle(readerOf(filtered), { ...VARIANTS[1]!.options(), trust: t }).catch((err: unknown) => {
              if (
                !(err instanceof AuditError) ||
                err.code !== 'USAGE' ||
                !/^since: the earlier checkpoint does not verify: /.test(err.message)
              )
                throw err;
            });
          return t;
        },
        () => undefined,
        ['TRUST_INVALID'],
      );
    }
    expectNoDefects();
  });

  it('mutated trust files on disk (readTrustFile): TRUST_INVALID', async () => {
    const rng = mulberry32(SEED ^ 13);
    const dir = mkdtempSync(join(base, 'trust-'));
    for (let i = 0; i < n(100); i++) {
      const path = join(dir, `t${i}.json`);
      writeFileSync(path, i % 4 === 0 ? mutateBytes(rng, new TextEncoder().encode(trustText)) : mutate(rng, trustText));
      await judge(
        'trust file',
        i,
        () => readTrustFile(path),
        () => undefined,
        ['TRUST_INVALID'],
      );
    }
    expectNoDefects();
  });
});

describe("a witness's files: the logs it serves, its stored trees, its key binding", () => {
  const vkeyOf = (name: string, fill: number) => encodeVerifierKey(name, noblePublicKey(new Uint8Array(32).fill(fill)));

  it('mutated logs files (parseWitnessLogs): INVALID_ARGUMENT, or the logs as written', async () => {
    const rng = mulberry32(SEED ^ 15);
    const logs = JSON.stringify({
      logs: [
        { origin: 'log.example/a', keys: [vkeyOf('log.example/a', 1)] },
        { origin: 'log.example/b', keys: [vkeyOf('log.example/b', 2), vkeyOf('log.example/b', 3)] },
      ],
    });
    // One log over the number of keys a log may list: refused with a message naming it, whatever it is named.
    const crowded = JSON.stringify({
      logs: [
        {
          origin: 'log.example/c',
          keys: Array.from({ length: MAX_WITNESS_LOG_KEYS + 1 }, () => vkeyOf('log.example/c', 4)),
        },
      ],
    });
    expect(parseWitnessLogs(logs).size).toBe(2);
    for (let i = 0; i < n(800); i++) {
      const text = mutate(rng, i % 2 === 0 ? logs : crowded);
      await judge(
        'witness logs file',
        i,
        () => parseWitnessLogs(text),
        () => undefined,
        ['INVALID_ARGUMENT'],
      );
    }
    expectNoDefects();
  });

  it('mutated stored trees and key bindings (WitnessState): RECORD_CORRUPT or WITNESS_KEY_MISMATCH, or the tree stored', async () => {
    const rng = mulberry32(SEED ^ 16);
    const dir = join(mkdtempSync(join(base, 'witness-')), 'state');
    const vkey = encodeCosignerKey('witness.example/w1', witnessSigner.publicKey);
    const record = (origin: string) =>
      `${JSON.stringify({ origin, size: 5, root: Buffer.alloc(32, 7).toString('base64'), note: full.tree['checkpoint.note'], timestamp: TS })}\n`;
    let state = await WitnessState.open(dir, vkey);
    try {
      for (let i = 0; i < n(150); i++) {
        const origin = `log.example/${i}`;
        writeFileSync(join(dir, 'logs', `${originHash(origin)}.json`), mutate(rng, record(origin)));
        await judge(
          'witness stored tree',
          i,
          () => state.get(origin),
          (t) =>
            t === undefined || (Number.isSafeInteger(t.size) && t.root.length === 32 && typeof t.note === 'string')
              ? undefined
              : 'a damaged stored tree was served',
          ['RECORD_CORRUPT'],
        );
      }
    } finally {
      await state.close();
    }
    const binding = `${JSON.stringify({ version: 1, vkey })}\n`;
    for (let i = 0; i < n(40); i++) {
      writeFileSync(join(dir, 'witness.json'), mutate(rng, binding));
      await judge(
        'witness key binding',
        i,
        async () => {
          state = await WitnessState.open(dir, vkey);
          await state.close();
        },
        () => undefined,
        ['RECORD_CORRUPT', 'WITNESS_KEY_MISMATCH'],
      );
    }
    expectNoDefects();
  });
});

describe('every JSON input, one field at a time: each field replaced by each hostile value, or removed', () => {
  it('bundle files (header, an envelope line, a proofs line, a heads line, consistency.json)', async () => {
    const v = VARIANTS[1]!;
    const f = v.files();
    const firstLine = (text: string) => text.slice(0, text.indexOf('\n'));
    const restOf = (text: string) => text.slice(text.indexOf('\n'));
    const targets: Array<[string, string, (t: string) => BundleFiles]> = [
      ['header', f.header, (t) => ({ ...f, header: t })],
      ['envelope line', firstLine(f.manifests), (t) => ({ ...f, manifests: t + restOf(f.manifests) })],
      [
        'proofs line',
        firstLine(f.tree['proofs.jsonl']!),
        (t) => ({ ...f, tree: { ...f.tree, 'proofs.jsonl': t + restOf(f.tree['proofs.jsonl']!) } }),
      ],
      [
        'heads line',
        firstLine(f.tree['heads.jsonl']!),
        (t) => ({ ...f, tree: { ...f.tree, 'heads.jsonl': t + restOf(f.tree['heads.jsonl']!) } }),
      ],
      ['consistency.json', f.tree['consistency.json']!, (t) => ({ ...f, tree: { ...f.tree, 'consistency.json': t } })],
    ];
    for (const [name, text, put] of targets) {
      const cases = everySubstitution(text);
      for (const [i, t] of cases.entries()) {
        const mutated = put(t);
        await judge(
          `${name}, one field`,
          i,
          () => verifyBundle(readerOf(mutated), v.options()),
          (r) => okOnlyIfSame(f, mutated, r),
          ['BUNDLE_INVALID'],
        );
      }
    }
    expectNoDefects();
  });

  it('trust files, witness logs files, stored witness trees and key bindings', async () => {
    for (const [i, t] of everySubstitution(trustText).entries())
      await judge(
        'trust store, one field',
        i,
        () => parseTrustStore(t),
        () => undefined,
        ['TRUST_INVALID'],
      );
    const vkey = (name: string, fill: number) => encodeVerifierKey(name, noblePublicKey(new Uint8Array(32).fill(fill)));
    const logs = JSON.stringify({ logs: [{ origin: 'log.example/a', keys: [vkey('log.example/a', 1)] }] });
    const crowded = JSON.stringify({
      logs: [
        {
          origin: 'log.example/c',
          keys: Array.from({ length: MAX_WITNESS_LOG_KEYS + 1 }, () => vkey('log.example/c', 4)),
        },
      ],
    });
    for (const [i, t] of [...everySubstitution(logs), ...everySubstitution(crowded)].entries())
      await judge(
        'witness logs file, one field',
        i,
        () => parseWitnessLogs(t),
        () => undefined,
        ['INVALID_ARGUMENT'],
      );
    const dir = join(mkdtempSync(join(base, 'witness-one-')), 'state');
    const wkey = encodeCosignerKey('witness.example/w1', witnessSigner.publicKey);
    const record = (origin: string) =>
      JSON.stringify({ origin, size: 5, root: Buffer.alloc(32, 7).toString('base64'), note: 'x\n', timestamp: TS });
    let state = await WitnessState.open(dir, wkey);
    try {
      for (const [i, t] of everySubstitution(record('log.example/0')).entries()) {
        const origin = `log.example/${i}`;
        writeFileSync(join(dir, 'logs', `${originHash(origin)}.json`), t.replace('log.example/0', origin));
        await judge(
          'witness stored tree, one field',
          i,
          () => state.get(origin),
          () => undefined,
          ['RECORD_CORRUPT'],
        );
      }
    } finally {
      await state.close();
    }
    for (const [i, t] of everySubstitution(JSON.stringify({ version: 1, vkey: wkey })).entries()) {
      writeFileSync(join(dir, 'witness.json'), t);
      await judge(
        'witness key binding, one field',
        i,
        async () => {
          state = await WitnessState.open(dir, wkey);
          await state.close();
        },
        () => undefined,
        ['RECORD_CORRUPT', 'WITNESS_KEY_MISMATCH'],
      );
    }
    expectNoDefects();
  });
});

describe('stored summary bytes: the ledger, its streamed decoder and the auditor give one verdict', () => {
  it('mutated summary blobs: the same code (or the same summary) from decodeSummary, decodeSummaryStream and storedSummaryProblem', async () => {
    const rng = mulberry32(SEED ^ 17);
    const blobs = [...full.blobs.values()];
    const verdict = async (run: () => unknown): Promise<string> => {
      try {
        return `ok ${JSON.stringify(await run())}`;
      } catch (err) {
        return isCoded(err) ? err.code : `raw ${describeError(err)}`;
      }
    };
    // A large summary too, its long strings full of escapes: the streamed decoder's SIMD unescaper runs on those.
    const long = (k: number) =>
      Array.from(
        { length: k },
        (_, j) => `line ${j}: "quoted" \\ back\tslash \u0001 é 😀 \u2028 ${'x'.repeat(j % 40)}\n`,
      ).join('');
    blobs.push(validateSummary({ ...sampleSummary('large'), notes: long(600), decisions: [long(50), long(70)] }).bytes);
    const cases = [
      ...Array.from({ length: n(250) }, () => {
        const b = pick(rng, blobs);
        return rng() < 0.4 ? mutateBytes(rng, b) : new TextEncoder().encode(mutate(rng, new TextDecoder().decode(b)));
      }),
      ...everySubstitution(new TextDecoder().decode(blobs[0]!)).map((t) => new TextEncoder().encode(t)),
    ];
    for (const [i, bytes] of cases.entries()) {
      await judge(
        'summary bytes',
        i,
        async () => {
          const whole = await verdict(() => decodeSummary(bytes));
          const streamed = canDecodeStream()
            ? await verdict(() =>
                decodeSummaryStream(
                  (async function* () {
                    // Cut at a few random places: an escape, a UTF-8 sequence or a string split between chunks.
                    const cuts = [0, ...Array.from({ length: 3 }, () => int(rng, bytes.length + 1)), bytes.length];
                    cuts.sort((a, b) => a - b);
                    for (let c = 1; c < cuts.length; c++) yield bytes.subarray(cuts[c - 1], cuts[c]);
                  })(),
                  bytes.length,
                ),
              )
            : whole;
          const audited = storedSummaryProblem(bytes);
          return { whole, streamed, audited: audited === undefined ? 'ok' : audited.slice(0, audited.indexOf(':')) };
        },
        (r) =>
          r.whole === r.streamed && (r.whole.startsWith('ok') ? r.audited === 'ok' : r.audited === r.whole)
            ? undefined
            : `verdicts differ: decodeSummary ${r.whole.slice(0, 80)}, streamed ${r.streamed.slice(0, 80)}, auditor ${r.audited}`,
      );
    }
    expectNoDefects();
  });
});

describe("model answers in each provider's dialect (what an adapter reads back from a provider)", () => {
  it('mutated provider responses: compact publishes a valid summary or refuses with a code, never a raw error', async () => {
    const rng = mulberry32(SEED ^ 18);
    const summary = sampleSummary('fuzz');
    const args = JSON.stringify(summary);
    const dialects: Array<[string, unknown, (reply: () => unknown) => ModelAdapter]> = [
      [
        'openai chat',
        {
          id: 'chatcmpl_1',
          object: 'chat.completion',
          choices: [
            {
              index: 0,
              finish_reason: 'tool_calls',
              message: {
                role: 'assistant',
                content: null,
                refusal: null,
                tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'submit_handoff', arguments: args } }],
              },
            },
          ],
        },
        (reply) =>
          openaiAdapter({
            client: { chat: { completions: { create: async () => reply() } } } as never,
            model: 'm',
            api: 'chat',
          }),
      ],
      [
        'openai responses',
        {
          id: 'resp_1',
          status: 'completed',
          error: null,
          output: [{ type: 'function_call', call_id: 'call_1', name: 'submit_handoff', arguments: args }],
        },
        (reply) => openaiAdapter({ client: { responses: { create: async () => reply() } } as never, model: 'm' }),
      ],
      [
        'anthropic',
        {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          stop_reason: 'tool_use',
          content: [{ type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: summary }],
        },
        (reply) => anthropicAdapter({ client: { messages: { create: async () => reply() } } as never, model: 'm' }),
      ],
      [
        'gemini',
        { candidates: [{ finishReason: 'STOP', content: { role: 'model', parts: [{ text: args }] } }] },
        (reply) => geminiAdapter({ client: { models: { generateContent: async () => reply() } } as never, model: 'm' }),
      ],
    ];
    const receipt = { id: `blake3:${'a'.repeat(64)}`, seq: 0, digest: `blake3:${'b'.repeat(64)}`, size: 1 } as const;
    const published: unknown[] = [];
    const ledger = {
      publish: async (_scope: unknown, s: unknown) => {
        published.push(s);
        return receipt;
      },
    };
    const scope = { principal: 'alice', session: 's1', run: 'r' };
    const transcript = [{ role: 'user' as const, content: 'summarize' }];
    const request = compactionRequest({ messages: transcript });
    const FINISH_REASONS = ['stop', 'tool_calls', 'length', 'content_filter', 'refusal', 'other'];
    const text0 = (v: unknown) => JSON.stringify(v);
    for (const [name, base, adapter] of dialects) {
      const good = await compact({ ledger, scope, model: adapter(() => structuredClone(base)), transcript });
      expect(good.summary, name).toEqual(summary);
      // The adapter's own answer (what it read back) says why the model stopped in the documented words only: a
      // provider's finish reason it does not know is 'other', whatever its name ("constructor", "__proto__", …).
      const reasons = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'not_a_reason'];
      for (const [i, reason] of reasons.entries()) {
        const reply = JSON.parse(
          text0(base)
            .replace(/"finish_reason":"[^"]*"/, `"finish_reason":${JSON.stringify(reason)}`)
            .replace(/"stop_reason":"[^"]*"/, `"stop_reason":${JSON.stringify(reason)}`)
            .replace(/"finishReason":"[^"]*"/, `"finishReason":${JSON.stringify(reason)}`)
            .replace(/"status":"[^"]*"/, `"status":${JSON.stringify(reason)}`),
        ) as unknown;
        await judge(
          `${name} finish reason`,
          i,
          () => adapter(() => reply)(request),
          (r) =>
            FINISH_REASONS.includes(r.finishReason as string)
              ? undefined
              : `finish reason ${JSON.stringify(reason)} read as ${typeof r.finishReason} ${String(r.finishReason).slice(0, 40)}`,
        );
      }
      const text = JSON.stringify(base);
      for (let i = 0; i < n(200); i++) {
        const mutated = mutate(rng, text);
        let reply: unknown;
        try {
          reply = JSON.parse(mutated);
        } catch {
          reply = mutated; // a body the SDK handed over as it came
        }
        await judge(
          `${name} answer`,
          i,
          () => compact({ ledger, scope, model: adapter(() => reply), transcript }),
          (r) =>
            validateSummary(r.summary).summary && isDeepStrictEqual(published.at(-1), r.summary)
              ? undefined
              : 'published a summary that does not validate',
        );
      }
    }
    expectNoDefects();
  });
});
