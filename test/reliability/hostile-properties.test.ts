/**
 * Hostile input, property-based: random and mutated ids, summaries, stored summary bytes,
 * manifests, envelopes and bundle lines. Each input may only yield a typed error (LedgerError,
 * StoreError, ManifestError with a code) or a correct result — never a raw exception, a hang, a forged
 * or altered answer, or a file outside the store root.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readdirSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import { type Ledger } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { parsePublishScope } from '../../src/ledger/scope.js';
import { decodeSummary, summarySchema, validateSummary } from '../../src/summary/summary.js';
import { canonicalBytes } from '../../manifests/encoding/canonical.js';
import { parseEnvelope, serializeEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import { MANIFEST_PAYLOAD_TYPE, manifestSchema } from '../../manifests/format/manifest.js';
import { verifyManifestEnvelope } from '../../manifests/crypto/verify-manifest.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { buildBundle, makeKey, trustOf, type TestBundle } from '../support/bundle-builder.js';
import { anyValue, bytesMutation, hostileString, idLike, Judge, textMutation } from './hostile-kit.js';
import { recordFigures, SOAK } from './figures.js';
import { sizedSummary } from './store-support.js';
import { tempDir } from '../support/tmp.js';

const judge = new Judge();

/** The value as JSON sees it: a key explicitly set to `undefined` is no key at all. */
const asJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

/** Payload bytes for a (possibly unserializable) value: canonical, plain JSON, or a stand-in. */
function encodePayload(value: unknown, canonical: boolean): Uint8Array {
  try {
    return canonical ? canonicalBytes(value) : new TextEncoder().encode(JSON.stringify(value) ?? 'undefined');
  } catch {
    return new TextEncoder().encode('{"unserializable":true}');
  }
}
const started = Date.now();
const runs = (n: number) => ({ numRuns: SOAK ? n * 10 : n });
const ID_ORACLE = (s: string) =>
  s.length >= 1 && s.length <= 128 && /^[A-Za-z0-9]/.test(s) && [...s].every((c) => /^[A-Za-z0-9._:@-]$/.test(c));
/** Half of all scopes drawn from this are fully valid, so the publish path is exercised too. */
const mostlyValidId = fc.oneof(
  { arbitrary: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,20}$/), weight: 4 },
  { arbitrary: idLike, weight: 1 },
);
const SUMMARY_CODES = ['SUMMARY_EMPTY', 'SUMMARY_INVALID', 'SUMMARY_INCOMPLETE', 'SUMMARY_TOO_LARGE'];

/** A valid summary with one hostile change: a field replaced, removed or added. */
const mutatedSummary: fc.Arbitrary<unknown> = fc
  .tuple(
    fc.constantFrom(
      'task',
      'state',
      'nextSteps',
      'decisions',
      'openQuestions',
      'files',
      'notes',
      'incomplete',
      '__proto__',
      'constructor',
      'extra',
    ),
    fc.oneof(
      anyValue,
      hostileString(),
      fc.array(hostileString(), { maxLength: 4 }),
      fc.array(fc.record({ path: hostileString(), note: hostileString() }), { maxLength: 3 }),
    ),
    fc.boolean(),
  )
  .map(([key, value, remove]) => {
    const s: Record<string, unknown> = { ...sizedSummary('prop', 150) };
    if (remove) delete s[key];
    else Object.defineProperty(s, key, { value, enumerable: true, writable: true, configurable: true });
    return s;
  });

describe('ids', () => {
  it('every string is either a valid id (exactly the documented alphabet) or INVALID_ID', async () => {
    await fc.assert(
      fc.asyncProperty(idLike, async (id) => {
        const valid = ID_ORACLE(id);
        await judge.judge(
          'ids',
          () => parsePublishScope({ principal: id, session: 'ok', run: 'ok' }),
          (s) => {
            judge.tally.right(valid && s.principal === id, `accepted ${JSON.stringify(id)}`);
          },
          valid ? [] : ['INVALID_ID'],
        );
      }),
      runs(3000),
    );
  });

  it('hostile ids through a real ledger: typed refusals or a resumable publish, and no file outside the store layout', async () => {
    const parent = tempDir('hl-hostile-');
    const root = join(parent, 'store');
    const ledger = await openLedger({ root, host: 'hostile-host', onNotice: () => {} });
    try {
      await fc.assert(
        fc.asyncProperty(mostlyValidId, mostlyValidId, mostlyValidId, async (principal, session, run) => {
          const scope = { principal, session, run };
          const valid = ID_ORACLE(principal) && ID_ORACLE(session) && ID_ORACLE(run);
          await judge.judge(
            'ids (publish + resume)',
            () => ledger.publish(scope, sizedSummary(`${principal}/${session}`)),
            async () => {
              judge.tally.right(valid, `published with invalid ids ${JSON.stringify(scope)}`);
            },
            valid ? ['UNAUTHORIZED'] : ['INVALID_ID'],
          );
          if (valid) {
            await judge.judge(
              'ids (publish + resume)',
              () => ledger.resume({ principal, session }),
              (r) => {
                judge.tally.right(r === undefined || r.manifest.session === session, 'resume returned another session');
              },
              ['UNAUTHORIZED'],
            );
          }
        }),
        runs(150),
      );
      judge.tally.right(
        isDeepStrictEqual(readdirSync(parent), ['store']),
        `files outside the root: ${readdirSync(parent)}`,
      );
      const layout = readdirSync(root).sort();
      judge.tally.right(
        layout.every((n) =>
          [
            'blobs-v1',
            'checkpoints',
            'format.json',
            'gc-aside',
            'keys',
            'manifests-v1',
            'quarantine',
            'tmp',
            'trust.json',
          ].includes(n),
        ),
        `unexpected entries in the root: ${layout}`,
      );
      for (const a of readdirSync(join(root, 'blobs-v1', 'blake3'))) {
        judge.tally.right(/^[0-9a-f]{2}$/.test(a), `non-hex shard ${a}`);
        for (const b of readdirSync(join(root, 'blobs-v1', 'blake3', a))) {
          judge.tally.right(/^[0-9a-f]{2}$/.test(b), `non-hex shard ${a}/${b}`);
          for (const f of readdirSync(join(root, 'blobs-v1', 'blake3', a, b)))
            judge.tally.right(/^[0-9a-f]{64}$/.test(f) && f.startsWith(a + b), `blob file ${f}`);
        }
      }
    } finally {
      await ledger.close();
    }
  });
});

describe('summaries', () => {
  it('validateSummary: any value is refused with a SUMMARY_* code or encoded canonically and decodes to itself', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(anyValue, mutatedSummary), async (value) => {
        await judge.judge(
          'summaries (validate)',
          () => validateSummary(value),
          ({ summary, bytes }) => {
            judge.tally.right(summarySchema.safeParse(value).success, 'accepted a value the schema refuses');
            judge.tally.right(
              isDeepStrictEqual(decodeSummary(bytes), asJson(summary)),
              'canonical bytes do not decode to the summary',
            );
            judge.tally.right(
              isDeepStrictEqual(canonicalBytes(JSON.parse(new TextDecoder().decode(bytes))), bytes),
              'encoding is not canonical',
            );
          },
          SUMMARY_CODES,
        );
      }),
      runs(2000),
    );
  });

  // Bytes that parse but break a content rule get that rule's code (SUMMARY_EMPTY, SUMMARY_INCOMPLETE), as the
  // auditor's step 7 reports them; size is the store's limit, not the decoder's, so never SUMMARY_TOO_LARGE.
  it('decodeSummary: random and mutated stored bytes are refused with a SUMMARY_* code or are a schema-valid summary', async () => {
    const good = validateSummary(sizedSummary('bytes', 300)).bytes;
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 400 }), bytesMutation(good)), async (bytes) => {
        await judge.judge(
          'summaries (stored bytes)',
          () => decodeSummary(bytes),
          (s) => {
            judge.tally.right(summarySchema.safeParse(s).success, 'decoded a summary the schema refuses');
          },
          ['SUMMARY_INVALID', 'SUMMARY_EMPTY', 'SUMMARY_INCOMPLETE'],
        );
      }),
      runs(1000),
    );
  });

  describe('through a real ledger', () => {
    let ledger: Ledger;
    beforeAll(async () => {
      ledger = await openLedger({
        root: join(tempDir('hl-hostile-'), 'store'),
        host: 'hostile-host',
        onNotice: () => {},
      });
    });
    afterAll(async () => ledger.close());

    it('publish either refuses with a typed code (head unchanged) or publishes exactly what resume returns', async () => {
      const scope = { principal: 'alice', session: 'hostile', run: 'r' };
      await fc.assert(
        fc.asyncProperty(mutatedSummary, async (value) => {
          const before = await ledger.resume(scope);
          await judge.judge(
            'summaries (publish + resume)',
            () => ledger.publish(scope, value),
            async (receipt) => {
              const r = await ledger.resume(scope);
              judge.tally.right(
                r?.id === receipt.id && isDeepStrictEqual(r.summary, asJson(validateSummary(value).summary)),
                'resume differs from what was published',
              );
            },
            SUMMARY_CODES,
          );
          const now = await ledger.resume(scope);
          const seq = (x: typeof now) => x?.seq ?? -1;
          // Refused: the head is exactly what it was. Published: exactly one step further.
          judge.tally.right(
            seq(now) === seq(before) + 1 || (seq(now) === seq(before) && now?.id === before?.id),
            'head changed other than by one publish',
          );
        }),
        runs(120),
      );
    });
  });
});

describe('manifests and envelopes', () => {
  const key = makeKey('host-a');
  const trust = trustOf(key.trusted);
  const opts = { trust, verifier: nodeVerifier };
  let bundle: TestBundle;
  beforeAll(async () => {
    bundle = await buildBundle({
      key,
      chains: [
        { session: 's-1', count: 4 },
        { session: 's-2', principal: 'bob', count: 3 },
      ],
    });
  });

  it('signed mutated manifests verify only when the payload is a strict v1 manifest, and then as exactly that manifest', async () => {
    const base = bundle.manifests[1]!.manifest as unknown as Record<string, unknown>;
    const arb = fc.tuple(
      fc.constantFrom(...Object.keys(base), 'extra', '__proto__'),
      fc.oneof(anyValue, hostileString()),
      fc.boolean(),
      fc.boolean(),
    );
    await fc.assert(
      fc.asyncProperty(arb, async ([field, value, remove, canonical]) => {
        const m: Record<string, unknown> = { ...base };
        if (remove) delete m[field];
        else Object.defineProperty(m, field, { value, enumerable: true, writable: true, configurable: true });
        const payload = encodePayload(m, canonical);
        const text = serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, key.signer));
        await judge.judge(
          'manifests (signed, mutated)',
          () => verifyManifestEnvelope(text, opts),
          (v) => {
            const parsed = JSON.parse(new TextDecoder().decode(payload));
            judge.tally.right(
              manifestSchema.safeParse(parsed).success && isDeepStrictEqual(v.manifest, parsed),
              'verified a manifest that is not the signed strict payload',
            );
          },
          ['MANIFEST_INVALID', 'KEY_UNTRUSTED', 'KEY_EXPIRED', 'KEY_REVOKED', 'SIGNATURE_INVALID'],
        );
      }),
      runs(800),
    );
  });

  it('mutated envelope text never verifies to another payload than the one that was signed', async () => {
    const original = bundle.manifests[2]!;
    const arb = fc.oneof(
      textMutation(original.line),
      hostileString(200),
      fc.jsonValue().map((v) => JSON.stringify(v)),
    );
    await fc.assert(
      fc.asyncProperty(arb, async (text) => {
        await judge.judge(
          'envelopes (text)',
          () => verifyManifestEnvelope(text, opts),
          (v) => {
            judge.tally.right(
              v.id === original.id && isDeepStrictEqual(v.payload, original.payload),
              `a mutated envelope verified as ${v.id}`,
            );
          },
        );
      }),
      runs(2000),
    );
  });

  it('parseEnvelope on arbitrary values: ENVELOPE_INVALID or exactly the three fields', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(anyValue, fc.record({ payloadType: anyValue, payload: anyValue, signatures: anyValue })),
        async (value) => {
          await judge.judge(
            'envelopes (values)',
            () => parseEnvelope(value),
            (p) => {
              judge.tally.right(
                Object.keys(p.envelope).length === 3 && p.signatures.length >= 1,
                'parsed a malformed envelope',
              );
            },
            ['ENVELOPE_INVALID'],
          );
        },
      ),
      runs(1000),
    );
  });

  it('mutated bundles never make the auditor throw or accept a chain that was not signed as such', async () => {
    const text = bundle.lines.map((l) => `${l}\n`).join('');
    const bytes = new TextEncoder().encode(text);
    const lineOps = fc
      .array(fc.tuple(fc.constantFrom('drop', 'dup', 'swap', 'junk'), fc.nat(20), fc.nat(20), hostileString(60)), {
        maxLength: 4,
      })
      .map((ops) => {
        const lines = [...bundle.lines];
        for (const [op, i, j, junk] of ops) {
          const a = i % (lines.length || 1);
          const b = j % (lines.length || 1);
          if (op === 'drop') lines.splice(a, 1);
          else if (op === 'dup' && lines[a] !== undefined) lines.splice(b, 0, lines[a]!);
          else if (op === 'swap' && lines[a] !== undefined && lines[b] !== undefined)
            [lines[a], lines[b]] = [lines[b]!, lines[a]!];
          else lines.splice(a, 0, junk.replace(/\n/g, ''));
        }
        return new TextEncoder().encode(lines.map((l) => `${l}\n`).join(''));
      });
    const ids = new Map(bundle.manifests.map((m) => [`${m.manifest.session}#${m.manifest.seq}`, m.id]));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          lineOps,
          bytesMutation(bytes),
          textMutation(text).map((t) => new TextEncoder().encode(t)),
        ),
        async (input) => {
          await judge.judge(
            'bundle lines',
            () => verifyBundle(memoryBundleReader({ manifests: input }), opts),
            (report) => {
              for (const c of report.chains) {
                judge.tally.right(
                  ids.get(`${c.session}#${c.headSeq}`) === c.head,
                  `chain ${c.session} reported head ${c.head} at seq ${c.headSeq}`,
                );
              }
              if (isDeepStrictEqual(input, bytes)) judge.tally.right(report.ok, 'the untouched bundle has findings');
              if (report.ok)
                judge.tally.right(
                  report.chains.every((c) => c.entries === c.headSeq + 1),
                  'ok report with a chain not starting at seq 0',
                );
            },
          );
        },
      ),
      runs(500),
    );
  });
});

afterAll(async () => {
  expect(judge.untyped).toBe(0);
  await recordFigures({
    suite: 'hostile-properties',
    title:
      'fast-check: random and mutated ids, summaries, stored summary bytes, signed manifests, envelope texts and values, and bundles (lines dropped, duplicated, swapped, junk, byte and text mutations). Only typed errors or checked-correct results are allowed; a raw exception counts as a wrong answer.',
    durationMs: Date.now() - started,
    inputs: judge.inputs.counts,
    losses: judge.tally.losses,
    wrongAnswers: judge.tally.wrongAnswers,
    details: judge.details(),
  });
});
