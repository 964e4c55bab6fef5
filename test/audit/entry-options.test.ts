/**
 * The Node auditing entry points given options their types do not allow, from JavaScript: `auditBundle` without
 * options, `createWorkerLineVerifier` without options or trust, a `threads` that is no whole number, a `verifier` of
 * another name. Each is the auditor's `USAGE`, as `verifyBundle` refuses the same, before any worker starts; they
 * were a TypeError, or workers started with no trust.
 */
import { describe, expect, it } from 'vitest';
import { auditBundle, createWorkerLineVerifier, isHandoffLedgerError } from '../../src/index.js';
import { memoryBundleReader } from '../../manifests/audit/bundle.js';
import { inlineLineVerifier, type LineOutcome, type LineVerifier } from '../../manifests/audit/verify-line.js';
import { createWebCryptoLineVerifier } from '../../manifests/audit/verify-webcrypto.js';
import { verifyBundle, verifyChain } from '../../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { buildBundle, jsonl, trustOf } from '../support/bundle-builder.js';

async function refusal(call: () => Promise<unknown>): Promise<unknown> {
  try {
    const made = await call();
    await (made as { close?: () => Promise<void> } | undefined)?.close?.();
  } catch (err) {
    return err;
  }
  return 'no error';
}

const throwing = Object.defineProperty({}, 'trust', {
  enumerable: true,
  get() {
    throw new Error('getter');
  },
});

describe('the auditing entry points refuse options that are not what their types say', () => {
  it('auditBundle without options, or with options that cannot be read: USAGE', async () => {
    const reader = memoryBundleReader({ manifests: '' });
    for (const options of [undefined, null, 5, throwing]) {
      const err = await refusal(() => auditBundle(reader, options as never));
      expect(isHandoffLedgerError(err), String(options)).toBe(true);
      expect(err, String(options)).toMatchObject({ name: 'AuditError', code: 'USAGE' });
    }
  });

  it('createWorkerLineVerifier without trust, with a threads or verifier its types do not allow: USAGE', async () => {
    const trust = trustOf();
    const bad: unknown[] = [
      undefined,
      null,
      {},
      { threads: 1 },
      throwing,
      { trust, threads: -1 },
      { trust, threads: 1.5 },
      { trust, threads: '2' },
      { trust, threads: NaN },
      { trust, verifier: 'bogus' },
      { trust, verifier: 5 },
    ];
    for (const [i, options] of bad.entries()) {
      const err = await refusal(() => createWorkerLineVerifier(options as never));
      expect(isHandoffLedgerError(err), `case ${i}`).toBe(true);
      expect(err, `case ${i}`).toMatchObject({ name: 'AuditError', code: 'USAGE' });
    }
    // What the types allow starts as ever (threads 0: one worker, as `cores - 1` on one core asks).
    for (const options of [
      { trust, threads: 0 },
      { trust, threads: 1, verifier: 'noble' as const },
    ]) {
      const pool = await createWorkerLineVerifier(options);
      await pool.close();
    }
  });
});

describe("verifyChain's and verifyBundle's shared options, as their types say: USAGE naming the option", () => {
  const valid = { concurrency: 1, verifyLines: async () => [], close: async () => {} };
  // A verifier without verify reported every valid manifest MANIFEST_INVALID; a line verifier without verifyLines and
  // an onProgress that is no function were TypeErrors; a scope that is no object was no scope.
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['verifier {}', { verifier: {} }, /'s verifier must be a SignatureVerifier/],
    ['verifier 5', { verifier: 5 }, /'s verifier must be a SignatureVerifier .*, not 5$/],
    ['lineVerifier {}', { lineVerifier: {} }, /'s lineVerifier must be a LineVerifier/],
    ['lineVerifier concurrency 0', { lineVerifier: { ...valid, concurrency: 0 } }, /'s lineVerifier must be/],
    ['scope 5', { scope: 5 }, /'s scope must be \{ session\?, principal\? \} of ids, not 5$/],
    ['scope session 5', { scope: { session: 5 } }, /'s scope must be/],
    ['maxFindings text', { maxFindings: '10' }, /'s maxFindings must be a whole number from 0, not "10"$/],
    ['batchSize 0', { batchSize: 0 }, /'s batchSize must be a whole number from 1, not 0$/],
    ['onProgress 5', { onProgress: 5 }, /'s onProgress must be a function, not 5$/],
  ];
  it.each(cases)('%s', async (_name, extra, message) => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    for (const [what, run] of [
      ['verifyChain', () => verifyChain(b.lines, { trust: b.trust, ...extra } as never)],
      [
        'verifyBundle',
        () => verifyBundle(memoryBundleReader({ manifests: jsonl(b.lines) }), { trust: b.trust, ...extra } as never),
      ],
    ] as const) {
      const err = await refusal(run);
      expect(isHandoffLedgerError(err), `${what}: ${String(err)}`).toBe(true);
      expect(err, what).toMatchObject({
        name: 'AuditError',
        code: 'USAGE',
        message: expect.stringMatching(new RegExp(`^${what}${message.source}`)) as string,
      });
    }
  });

  it('what the types allow is taken as ever', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const progress: number[] = [];
    const r = await verifyChain(b.lines, {
      trust: b.trust,
      verifier: nodeVerifier,
      lineVerifier: inlineLineVerifier({ trust: b.trust, verifier: nodeVerifier }),
      scope: { session: 's1' },
      maxFindings: 0,
      batchSize: 1,
      onProgress: (p) => progress.push(p.lines),
    });
    expect(r).toMatchObject({ ok: true, counts: { manifests: 2 } });
  });
});

describe("a line verifier's answer of another length than its batch: USAGE, no report", () => {
  // A report was made of outcomes given to other lines (one too few: a line left out; one too many: an outcome of a line
  // never sent), and an answer that is no list was a TypeError.
  const cases: Array<[string, (outcomes: LineOutcome[]) => unknown, string]> = [
    ['one too few', (o) => o.slice(1), 'it gave 1 for a batch of 2'],
    ['one too many', (o) => [...o, o[0]], 'it gave 3 for a batch of 2'],
    ['none at all', () => undefined, 'it gave undefined'],
  ];
  it.each(cases)('%s', async (_name, answer, said) => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const inline = inlineLineVerifier({ trust: b.trust, verifier: nodeVerifier });
    const lineVerifier: LineVerifier = {
      concurrency: 1,
      verifyLines: async (batch) => answer(await inline.verifyLines(batch)) as LineOutcome[],
      close: async () => {},
    };
    for (const [what, run] of [
      ['verifyChain', () => verifyChain(b.lines, { trust: b.trust, lineVerifier })],
      [
        'verifyBundle',
        () => verifyBundle(memoryBundleReader({ manifests: jsonl(b.lines) }), { trust: b.trust, lineVerifier }),
      ],
    ] as const) {
      const err = await refusal(run);
      expect(err, what).toMatchObject({ name: 'AuditError', code: 'USAGE' });
      expect((err as Error).message, what).toContain(
        `verifyLines must give one outcome a line, in their order: ${said}`,
      );
    }
  });
});

describe('the line verifiers refuse a context that is none (it made every valid manifest MANIFEST_INVALID)', () => {
  const cases: Array<[string, (trust: unknown) => Promise<unknown>, RegExp]> = [
    [
      'inlineLineVerifier(null)',
      async () => inlineLineVerifier(null as never),
      /^inlineLineVerifier needs \{ trust, verifier \}, not null$/,
    ],
    [
      'inlineLineVerifier, trust null',
      async () => inlineLineVerifier({ trust: null, verifier: nodeVerifier } as never),
      /^inlineLineVerifier's trust is not a trust store/,
    ],
    [
      'inlineLineVerifier, trust {}',
      async () => inlineLineVerifier({ trust: {}, verifier: nodeVerifier } as never),
      /^inlineLineVerifier's trust is not a trust store/,
    ],
    [
      'inlineLineVerifier, verifier {}',
      async (trust) => inlineLineVerifier({ trust, verifier: {} } as never),
      /^inlineLineVerifier's verifier must be a SignatureVerifier/,
    ],
    [
      'createWebCryptoLineVerifier, trust null',
      async () => createWebCryptoLineVerifier(null as never),
      /^createWebCryptoLineVerifier's trust is not a trust store/,
    ],
    [
      'createWebCryptoLineVerifier, keys that are no list',
      async () => createWebCryptoLineVerifier({ version: 1, keys: 'k' } as never),
      /^createWebCryptoLineVerifier's trust is not a trust store/,
    ],
    [
      'verifyChain, trust {}',
      async () => verifyChain([], { trust: {} } as never),
      /^verifyChain's trust is not a trust store/,
    ],
  ];
  it.each(cases)('%s', async (_name, make, message) => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 1 }] });
    const err = await refusal(() => make(b.trust));
    expect(isHandoffLedgerError(err), String(err)).toBe(true);
    expect(err).toMatchObject({ name: 'AuditError', code: 'USAGE', message: expect.stringMatching(message) as string });
  });

  it('a context the types allow verifies as before', async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    for (const lineVerifier of [
      inlineLineVerifier({ trust: b.trust, verifier: nodeVerifier }),
      await createWebCryptoLineVerifier(b.trust),
    ])
      expect(await verifyChain(b.lines, { trust: b.trust, lineVerifier })).toMatchObject({
        ok: true,
        counts: { manifests: 2 },
      });
  });
});
