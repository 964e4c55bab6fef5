/**
 * Hand-written hostile inputs: huge numbers, deep nesting, prototype keys, invalid UTF-8,
 * NUL bytes, lone surrogates — each aimed at every parser that could meet it (summary validation and
 * decoding, manifest and envelope verification, trust stores, bundle headers and lines, the CLI).
 * Every case must end in a typed error with an expected code or a checked-correct result. The 100 MB
 * inputs are in hostile-limits.test.ts.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { openLedger } from '../../src/ledger/open.js';
import { publish as cliPublish } from '../../src/cli/core.js';
import { decodeSummary, validateSummary } from '../../src/summary/summary.js';
import { canonicalize } from '../../manifests/encoding/canonical.js';
import { parseEnvelope, serializeEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import { MANIFEST_PAYLOAD_TYPE } from '../../manifests/format/manifest.js';
import { parseTrustStore } from '../../manifests/format/trust.js';
import { parseBundleHeader, memoryBundleReader } from '../../manifests/audit/bundle.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { buildBundle, makeKey, trustOf } from '../support/bundle-builder.js';
import { captureIo } from '../support/capture-io.js';
import { tempDir } from '../support/tmp.js';
import { Judge } from './hostile-kit.js';
import { recordFigures } from './figures.js';
import { sizedSummary } from './store-support.js';

const judge = new Judge();
const started = Date.now();
const key = makeKey('host-a');
const opts = { trust: trustOf(key.trusted), verifier: nodeVerifier };
const bundle = await buildBundle({ key, chains: [{ session: 's-1', count: 2 }] });
const good = bundle.manifests[1]!;
/** The canonical text of a valid manifest, to splice hostile values into. */
const goodText = canonicalize(good.manifest);
const enc = new TextEncoder();
const valid = sizedSummary('corpus', 150);

function nested(depth: number, open = '[', close = ']', inner = ''): string {
  return open.repeat(depth) + inner + close.repeat(depth);
}
function deepObject(depth: number): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < depth; i++) v = { x: v };
  return v;
}
/** Signs arbitrary payload bytes with the trusted key: only the verifier's own checks stand in the way. */
async function signed(payload: string | Uint8Array): Promise<string> {
  return serializeEnvelope(
    await signEnvelope(MANIFEST_PAYLOAD_TYPE, typeof payload === 'string' ? enc.encode(payload) : payload, key.signer),
  );
}
const withField = (field: string, raw: string) =>
  goodText.replace(new RegExp(`"${field}":[^,}]+`), `"${field}":${raw}`);
const bytesOf = (...parts: Array<string | number[]>) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === 'string' ? [...enc.encode(p)] : p)));
const auditLine = async (line: Uint8Array) =>
  verifyBundle(memoryBundleReader({ manifests: Uint8Array.from([...line, 10]) }), opts);

async function cli(stdin: Uint8Array | string, extra: string[] = []) {
  const root = join(tempDir('hl-corpus-'), 'store');
  const cap = captureIo();
  const code = await cliPublish(
    ['--root', root, '--host', 'h', '--principal', 'p', '--session', 's', '--run', 'r', '--json', ...extra],
    {
      ...cap.io,
      stdin: Readable.from([typeof stdin === 'string' ? enc.encode(stdin) : stdin]),
    },
  );
  const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
  const resumed = await ledger.resume({ principal: 'p', session: 's' });
  await ledger.close();
  return { code, stderr: cap.stderr(), resumed };
}
/** The CLI refuses: exit 1 with `code` on stderr, and nothing is published. */
const cliRefuses = (code: string) => (r: Awaited<ReturnType<typeof cli>>) => {
  judge.tally.right(
    r.code === 1 && r.stderr.includes(code) && r.resumed === undefined,
    `CLI exit ${r.code}: ${r.stderr.trim()}`,
  );
};
const noFindingFree = (code: string) => (report: Awaited<ReturnType<typeof verifyBundle>>) => {
  judge.tally.right(
    !report.ok && report.counts.manifests === 0 && (report.counts.byCode as Record<string, number>)[code]! > 0,
    `audit: ${JSON.stringify(report.counts.byCode)}`,
  );
};

interface Case {
  target: string;
  name: string;
  run: () => unknown;
  codes?: string[];
  check?: (result: any) => void;
}
const refuse = (target: string, name: string, run: () => unknown, ...codes: string[]): Case => ({
  target,
  name,
  run,
  codes,
  check: () => judge.tally.right(false, `${name}: accepted`),
});

const cases: Case[] = [
  // Huge numbers.
  ...['1e308', '9007199254740993', '-1', '0.5', '1e400', '-0.0', '"0"'].map((n) =>
    refuse(
      'huge numbers',
      `manifest seq ${n}`,
      async () => verifyManifestEnvelope(await signed(withField('seq', n)), opts),
      'MANIFEST_INVALID',
    ),
  ),
  ...['1e308', '9007199254740993', '-1'].map((n) =>
    refuse(
      'huge numbers',
      `manifest summary.size ${n}`,
      async () => verifyManifestEnvelope(await signed(withField('size', n)), opts),
      'MANIFEST_INVALID',
    ),
  ),
  refuse(
    'huge numbers',
    'manifest createdAt year 275760',
    async () => verifyManifestEnvelope(await signed(withField('createdAt', '"+275760-09-13T00:00:00.000Z"')), opts),
    'MANIFEST_INVALID',
    'KEY_EXPIRED',
  ),
  refuse(
    'huge numbers',
    'summary nextSteps [1e308]',
    () => validateSummary({ ...valid, nextSteps: [1e308] }),
    'SUMMARY_INVALID',
  ),
  refuse(
    'huge numbers',
    'stored summary with 1e400',
    () => decodeSummary(enc.encode('{"task":"t","state":"s","nextSteps":[],"notes":1e400}')),
    'SUMMARY_INVALID',
  ),
  refuse(
    'huge numbers',
    'envelope with 9 signatures',
    () => parseEnvelope({ ...good.envelope, signatures: Array(9).fill(good.envelope.signatures[0]) }),
    'ENVELOPE_INVALID',
  ),
  refuse(
    'huge numbers',
    'trust store version 1e308',
    () => parseTrustStore('{"version":1e308,"keys":[]}'),
    'TRUST_INVALID',
  ),
  refuse(
    'huge numbers',
    'bundle header count 1e308',
    () =>
      parseBundleHeader(
        JSON.stringify({
          format: 'handoff-ledger-bundle',
          version: 1,
          exportedAt: good.manifest.createdAt,
          host: 'h',
          counts: { manifests: 1e308, chains: 0 },
          filters: {},
        }),
      ),
    'BUNDLE_INVALID',
  ),
  {
    target: 'huge numbers',
    name: 'CLI --max-bytes 1e308',
    run: () => cli(JSON.stringify(valid), ['--max-bytes', '1e308']),
    check: (r) => judge.tally.right(r.code === 2 && r.resumed === undefined, `exit ${r.code}`),
  },

  // Deep nesting.
  refuse(
    'deep nesting',
    'stored summary: 100k nested arrays',
    () => decodeSummary(enc.encode(nested(100_000))),
    'SUMMARY_INVALID',
  ),
  refuse(
    'deep nesting',
    'summary value: notes nested 100k deep',
    () => validateSummary({ ...valid, notes: deepObject(100_000) }),
    'SUMMARY_INVALID',
  ),
  refuse(
    'deep nesting',
    'summary value: unknown key nested 100k deep',
    () => validateSummary({ ...valid, extra: deepObject(100_000) }),
    'SUMMARY_INVALID',
  ),
  refuse(
    'deep nesting',
    'envelope text: 100k nested arrays (over the size bound)',
    () => parseEnvelope(nested(100_000)),
    'ENVELOPE_INVALID',
  ),
  refuse(
    'deep nesting',
    'envelope text: 30k nested arrays (under the size bound)',
    () => parseEnvelope(nested(30_000)),
    'ENVELOPE_INVALID',
  ),
  refuse(
    'deep nesting',
    'signed payload: covers nested 7k deep',
    async () =>
      verifyManifestEnvelope(
        await signed(goodText.slice(0, -1) + `,"covers":${nested(7_000, '{"a":', '}', '1')}}`),
        opts,
      ),
    'MANIFEST_INVALID',
  ),
  refuse('deep nesting', 'trust store: 100k nested arrays', () => parseTrustStore(nested(100_000)), 'TRUST_INVALID'),
  refuse(
    'deep nesting',
    'bundle header: 100k nested objects',
    () => parseBundleHeader(nested(100_000, '{"a":', '}', '1')),
    'BUNDLE_INVALID',
  ),
  {
    target: 'deep nesting',
    name: 'bundle line: 30k nested arrays',
    run: () => auditLine(enc.encode(nested(30_000))),
    check: noFindingFree('ENVELOPE_INVALID'),
  },
  {
    target: 'deep nesting',
    name: 'bundle line: 100k nested arrays',
    run: () => auditLine(enc.encode(nested(100_000))),
    check: noFindingFree('LINE_TOO_LONG'),
  },
  {
    target: 'deep nesting',
    name: 'CLI publish: 100k nested arrays on stdin',
    run: () => cli(nested(100_000)),
    check: cliRefuses('SUMMARY_INVALID'),
  },

  // Prototype keys.
  refuse(
    'prototype keys',
    'summary JSON with __proto__',
    () => validateSummary(JSON.parse(`{"__proto__":{"incomplete":true},${JSON.stringify(valid).slice(1)}`)),
    'SUMMARY_INVALID',
  ),
  refuse(
    'prototype keys',
    'summary JSON with constructor.prototype',
    () => validateSummary(JSON.parse(`{"constructor":{"prototype":{"polluted":1}},${JSON.stringify(valid).slice(1)}`)),
    'SUMMARY_INVALID',
  ),
  refuse(
    'prototype keys',
    'stored summary with __proto__',
    () => decodeSummary(enc.encode(`{"__proto__":{"x":1},${JSON.stringify(valid).slice(1)}`)),
    'SUMMARY_INVALID',
  ),
  {
    target: 'prototype keys',
    name: 'null-prototype summary object',
    run: () => validateSummary(Object.assign(Object.create(null), valid)),
    check: (r) => judge.tally.right(isDeepStrictEqual({ ...r.summary }, valid), 'null-prototype summary changed'),
  },
  {
    // DSSE: unrecognised fields are ignored, and a __proto__ field is one of them.
    target: 'prototype keys',
    name: 'envelope with an extra __proto__ key parses to its DSSE fields only',
    run: () => parseEnvelope(`{"__proto__":{"payloadType":"x"},${good.line.slice(1)}`),
    check: (r) =>
      judge.tally.right(
        isDeepStrictEqual(r.envelope, good.envelope) && Object.getPrototypeOf(r.envelope) === Object.prototype,
        'the __proto__ field leaked into the parsed envelope',
      ),
  },
  refuse(
    'prototype keys',
    'envelope fields only under __proto__',
    () => parseEnvelope(`{"__proto__":${good.line}}`),
    'ENVELOPE_INVALID',
  ),
  refuse(
    'prototype keys',
    'signed payload with __proto__',
    async () => verifyManifestEnvelope(await signed(`{"__proto__":{"seq":0},${goodText.slice(1)}`), opts),
    'MANIFEST_INVALID',
  ),
  refuse(
    'prototype keys',
    'trust store with __proto__ keys',
    () => parseTrustStore(`{"version":1,"keys":[],"__proto__":{"keys":[${JSON.stringify(key.trusted)}]}}`),
    'TRUST_INVALID',
  ),
  refuse(
    'prototype keys',
    'bundle header with __proto__',
    () => parseBundleHeader('{"__proto__":{"format":"handoff-ledger-bundle"}}'),
    'BUNDLE_INVALID',
  ),

  // Invalid UTF-8.
  ...[[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80]].flatMap((bad) => [
    refuse(
      'invalid UTF-8',
      `stored summary with ${bad.map((b) => b.toString(16))}`,
      () => decodeSummary(bytesOf('{"task":"', bad, '","state":"s","nextSteps":[]}')),
      'SUMMARY_INVALID',
    ),
    refuse(
      'invalid UTF-8',
      `signed payload with ${bad.map((b) => b.toString(16))}`,
      async () => verifyManifestEnvelope(await signed(bytesOf(goodText.slice(0, -1), ',"x":"', bad, '"}')), opts),
      'MANIFEST_INVALID',
    ),
    {
      target: 'invalid UTF-8',
      name: `bundle line with ${bad.map((b) => b.toString(16))}`,
      run: () => auditLine(bytesOf(good.line.slice(0, 20), bad, good.line.slice(20))),
      check: noFindingFree('LINE_NOT_JSON'),
    },
  ]),

  // Found by this suite (BUG-5, fixed): Buffer#toString replaced the bad bytes with U+FFFD and published.
  {
    target: 'invalid UTF-8',
    name: 'CLI publish with invalid UTF-8 inside a string',
    run: () => cli(bytesOf('{"task":"t', [0xff], '","state":"s","nextSteps":[]}')),
    check: cliRefuses('SUMMARY_INVALID'),
  },

  // NUL bytes.
  refuse(
    'NUL bytes',
    'host id with NUL',
    () => openLedger({ root: join(tempDir('hl-corpus-'), 's'), host: 'h\0' }),
    'INVALID_ID',
  ),
  refuse(
    'NUL bytes',
    'file path with NUL',
    () => validateSummary({ ...valid, files: [{ path: 'src/a\0.ts' }] }),
    'SUMMARY_INVALID',
  ),
  {
    target: 'NUL bytes',
    name: 'summary text with NUL round-trips',
    run: () => validateSummary({ ...valid, task: 'a\0b' }),
    check: (r) => judge.tally.right(decodeSummary(r.bytes).task === 'a\0b', 'NUL lost'),
  },
  refuse(
    'NUL bytes',
    'envelope text with a raw NUL',
    () => parseEnvelope(good.line.replace('"payload"', '"pay\0load"')),
    'ENVELOPE_INVALID',
  ),
  {
    target: 'NUL bytes',
    name: 'bundle line of NULs',
    run: () => auditLine(new Uint8Array(100)),
    check: noFindingFree('LINE_NOT_JSON'),
  },

  // Lone surrogates.
  ...['task', 'state', 'notes'].map((f) =>
    refuse(
      'lone surrogates',
      `summary ${f} with a lone surrogate`,
      () => validateSummary({ ...valid, [f]: 'x\ud800y' }),
      'SUMMARY_INVALID',
    ),
  ),
  refuse(
    'lone surrogates',
    'summary nextSteps with a lone surrogate',
    () => validateSummary({ ...valid, nextSteps: ['\udfff'] }),
    'SUMMARY_INVALID',
  ),
  refuse(
    'lone surrogates',
    'file note with a lone surrogate',
    () => validateSummary({ ...valid, files: [{ path: 'a', note: '\ud800' }] }),
    'SUMMARY_INVALID',
  ),
  refuse(
    'lone surrogates',
    'signed payload host with an escaped lone surrogate',
    async () => verifyManifestEnvelope(await signed(withField('host', '"h\\ud800"')), opts),
    'KEY_UNTRUSTED',
    'MANIFEST_INVALID',
  ),
  refuse(
    'lone surrogates',
    'envelope keyid with a lone surrogate',
    () =>
      verifyManifestEnvelope(
        { ...good.envelope, signatures: [{ keyid: '\ud800', sig: good.envelope.signatures[0]!.sig }] },
        opts,
      ),
    'SIGNATURE_INVALID',
  ),
  {
    target: 'lone surrogates',
    name: 'CLI publish with an escaped lone surrogate',
    run: () => cli(JSON.stringify({ ...valid, task: 'PLACEHOLDER' }).replace('PLACEHOLDER', '\\ud800')),
    check: cliRefuses('SUMMARY_INVALID'),
  },
];

describe('hand-written hostile corpus', () => {
  it.each(cases.map((c) => [c.target, c.name, c] as const))('%s: %s', async (_t, _n, c) => {
    await judge.judge(c.target, c.run, c.check ?? (() => {}), c.codes);
  });

  it('leaves Object.prototype untouched after every prototype-key case', () => {
    expect(Object.keys(Object.prototype)).toEqual([]);
    expect(({} as Record<string, unknown>).incomplete).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('publish options from a hostile caller', () => {
  const scope = { principal: 'alice', session: 'covers', run: 'r' };
  // Found by this suite (BUG-1, fixed): covers went into the signed manifest unchecked, so one bad
  // argument published a head that no resume could ever verify again.
  it.each([
    ['transcriptThrough -1', { transcriptThrough: -1 }],
    ['transcriptThrough 1.5', { transcriptThrough: 1.5 }],
    ['transcriptThrough 1e308', { transcriptThrough: 1e308 }],
    ['an unknown key', { transcriptThrough: 1, evil: true }],
    ['a malformed transcriptDigest', { transcriptThrough: 1, transcriptDigest: 'not-a-digest' }],
    ['an object nested 100 deep', { transcriptThrough: 1, deep: deepObject(100) }],
  ])('refuses covers with %s as INVALID_ARGUMENT and the previous head still resumes', async (_what, covers) => {
    const ledger = await openLedger({ root: join(tempDir('hl-corpus-'), 'store'), host: 'h', onNotice: () => {} });
    try {
      const first = await ledger.publish(scope, valid);
      const err = await ledger.publish(scope, valid, { covers: covers as never }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((await ledger.resume(scope))?.id).toBe(first.id);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
    } finally {
      await ledger.close();
    }
  });
});

describe('stored summaries', () => {
  // Found by this suite (BUG-6, fixed): resume returned stored summaries that publish would refuse.
  it('decodeSummary refuses what validateSummary refuses (lone surrogate, incomplete, blank)', () => {
    for (const text of [
      '{"task":"\\ud800","state":"s","nextSteps":[]}',
      '{"incomplete":true,"nextSteps":[],"state":"s","task":"t"}',
      '{"nextSteps":[],"state":" ","task":" "}',
    ]) {
      expect(() => decodeSummary(enc.encode(text)), text).toThrow(expect.objectContaining({ name: 'LedgerError' }));
    }
  });
});

afterAll(async () => {
  expect(judge.untyped).toBe(0);
  await recordFigures({
    suite: 'hostile-corpus',
    title:
      'Hand-written hostile cases — huge numbers, deep nesting (to 100k levels), prototype keys, invalid UTF-8, NUL bytes, lone surrogates — against summaries, stored summary bytes, signed manifests, envelopes, trust stores, bundle headers and lines, and the CLI.',
    durationMs: Date.now() - started,
    inputs: judge.inputs.counts,
    losses: judge.tally.losses,
    wrongAnswers: judge.tally.wrongAnswers,
    details: judge.details(),
  });
});
