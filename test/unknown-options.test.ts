/**
 * A misspelt option name is refused, not ignored: `publish(…, { expectedprev })` published without the concurrency
 * guard the caller meant, `openLedger({ rooot })` opened the default root. Every public entry point that takes an
 * options object refuses a name it does not know with its layer's coded refusal (INVALID_ARGUMENT; the auditor's USAGE)
 * naming it (escaped) and the known name it is close to, before anything is made or written.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  auditBundle,
  compact,
  compactionRequest,
  createWorkerLineVerifier,
  exportBundle,
  fsck,
  gc,
  isHandoffLedgerError,
  Ledger,
  LedgerTelemetry,
  openBundleDir,
  openLedger,
  openPostgresBackends,
  shouldCompact,
  type ModelAdapter,
} from '../src/index.js';
import { memoryBundleReader, verifyBundle, verifyChain } from '../manifests/audit/index.js';
import { LevelManifestLog, PgManifestLog, verifyManifestEnvelope } from '../manifests/index.js';
import { FsBlobStore, loadHashBackend, PgBlobStore } from '../store/index.js';
import { readOptionFields, StoreError } from '../store/errors.js';
import { readPostgresOptions } from '../src/ledger/postgres-options.js';
import { readWitnessingOptions } from '../src/ledger/witnessing.js';
import { openaiAdapter } from '../src/adapters/openai.js';
import { anthropicAdapter } from '../src/adapters/anthropic.js';
import { geminiAdapter } from '../src/adapters/gemini.js';
import { aiSdkAdapter } from '../src/adapters/ai-sdk.js';
import { describePostgres, type PostgresHandle } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's1', run: 'r1' };

/** What `call` threw (or returned, if it did not throw). */
async function refusal(call: () => unknown): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  return 'no error';
}

/** `err` is the coded refusal of the unknown `name`, suggesting `meant` when given. */
function expectUnknown(err: unknown, name: string, meant?: string, code = 'INVALID_ARGUMENT'): void {
  expect(isHandoffLedgerError(err), String(err)).toBe(true);
  expect(err).toMatchObject({ code });
  const message = (err as Error).message;
  expect(message).toContain(`unknown option ${JSON.stringify(name)}`);
  if (meant === undefined) expect(message).not.toContain('did you mean');
  else expect(message).toContain(`(did you mean '${meant}'?)`);
}

describe('readOptionFields', () => {
  it('refuses an unknown name before reading any field, naming the near known one', () => {
    let read = 0;
    const options = {
      get expectedPrev() {
        read++;
        return null;
      },
      expectedprev: 'x',
    };
    const err = (() => {
      try {
        readOptionFields(options, ['expectedPrev', 'signal'], 'publish options', StoreError);
      } catch (e) {
        return e;
      }
    })();
    expectUnknown(err, 'expectedprev', 'expectedPrev');
    expect(read).toBe(0);
  });

  it('suggests by case or by at most two edits (a swap is one), and nothing for a name far from all', () => {
    const names = ['expectedPrev', 'signal', 'covers', 'root', 'by'];
    const cases: Array<[string, string | undefined]> = [
      ['EXPECTEDPREV', 'expectedPrev'],
      ['expectedPev', 'expectedPrev'],
      ['exepctedPrev', 'expectedPrev'],
      ['rooot', 'root'],
      ['sginal', 'signal'],
      ['cover', 'covers'],
      ['qz', undefined], // two edits from `by`, but nothing of it right
      ['timeout', undefined],
    ];
    for (const [name, meant] of cases) {
      try {
        readOptionFields({ [name]: 1 }, names, 'options', StoreError);
        throw new Error(`${name} taken`);
      } catch (err) {
        expectUnknown(err, name, meant);
      }
    }
  });

  it('names an unknown name escaped and shortened, counts the others, and ignores symbol keys', () => {
    const long = `a\u001b[31m${'x'.repeat(100)}`;
    let err: unknown;
    try {
      readOptionFields({ [long]: 1, other: 2, [Symbol('s')]: 3 }, ['signal'], 'options', StoreError);
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toBe(
      `options: unknown option ${JSON.stringify(long.slice(0, 40))}…, and 1 more unknown`,
    );
    expect(readOptionFields({ signal: undefined, [Symbol('s')]: 3 }, ['signal'], 'options', StoreError)).toEqual({});
    // Objects that are no options (a signer, a record) may carry more.
    expect(readOptionFields({ signal: 1, more: 2 }, ['signal'], 'options', StoreError, 'allowed')).toEqual({
      signal: 1,
    });
  });

  it('refuses a proxy whose keys cannot be listed with a coded error, its failure as the cause', () => {
    const failure = new Error('ownKeys');
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw failure;
        },
      },
    );
    let err: unknown;
    try {
      readOptionFields(proxy, ['signal'], 'options', StoreError);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'options: listing its fields failed' });
    expect((err as Error).cause).toBe(failure);
  });
});

/** The ledger's entry points on one backend: `open` opens a fresh ledger with `extra` options. */
function ledgerEntryPoints(name: string, extra: () => Record<string, unknown>): void {
  describe(name, () => {
    it('openLedger refuses a misspelt option (and one of its postgres, telemetry, witnesses), making nothing', async () => {
      const parent = tempDir();
      const root = join(parent, 'store');
      const cases: Array<[Record<string, unknown>, string, string | undefined]> = [
        [{ createHostkey: false }, 'createHostkey', 'createHostKey'],
        [{ telemetry: { identifier: 'omit' } }, 'identifier', 'identifiers'],
        [{ witnesses: { witnesses: [], timeoutMS: 5 } }, 'timeoutMS', 'timeoutMs'],
        [{ witnesses: { witnesses: [{ url: 'https://w.example/', vkeys: 'k' }] } }, 'vkeys', 'vkey'],
        [{ nonsense: 1 }, 'nonsense', undefined],
        [{ levelLog: { writebatch: undefined } }, 'writebatch', 'writeBatch'],
      ];
      const base = extra();
      if (base.postgres)
        cases.push([
          { postgres: { ...(base.postgres as object), connectionstring: 'x' } },
          'connectionstring',
          'connectionString',
        ]);
      for (const [options, unknown, meant] of cases)
        expectUnknown(
          await refusal(() => openLedger({ ...base, root, host: 'h', ...options } as never)),
          unknown,
          meant,
        );
      // `rooot` for `root`: the default root is not opened in its place.
      expectUnknown(await refusal(() => openLedger({ ...base, rooot: root, host: 'h' } as never)), 'rooot', 'root');
      expect(existsSync(root)).toBe(false);
      expect(readdirSync(parent)).toEqual([]);
    });

    it("a ledger's methods refuse a misspelt option, publishing nothing", async () => {
      const root = tempDir();
      const ledger = await openLedger({ ...extra(), root, host: 'h', onNotice: () => {} } as never);
      try {
        const first = await ledger.publish(scope, sampleSummary(1));
        // The guard meant: publish only onto `first`. Misspelt, it was ignored and this published a second entry.
        expectUnknown(
          await refusal(() => ledger.publish(scope, sampleSummary(2), { expectedprev: first.id } as never)),
          'expectedprev',
          'expectedPrev',
        );
        expectUnknown(
          await refusal(() => ledger.checkPublish(scope, { expectedPrev: first.id, sigal: undefined } as never)),
          'sigal',
          'signal',
        );
        expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id]);
        expectUnknown(await refusal(() => ledger.resume(scope, { singal: 1 } as never)), 'singal', 'signal');
        expectUnknown(await refusal(() => ledger.history(scope, { Signal: 1 } as never)), 'Signal', 'signal');
        expectUnknown(await refusal(() => ledger.inclusionProof(first.id, { sise: 1 } as never)), 'sise', 'size');
        expectUnknown(await refusal(() => ledger.consistencyProof(1, { Size: 1 } as never)), 'Size', 'size');
        expectUnknown(await refusal(() => ledger.grant('bob', 's1', { author: 'me' } as never)), 'author', undefined);
        expectUnknown(await refusal(() => ledger.revoke('bob', 's1', { By: 'me' } as never)), 'By', 'by');
        expectUnknown(await refusal(() => ledger.grants({ principle: 'bob' } as never)), 'principle', 'principal');
        expect(await ledger.grants()).toEqual([]);
        expectUnknown(await refusal(() => fsck(ledger, { checkblobs: true } as never)), 'checkblobs', 'checkBlobs');
        expectUnknown(await refusal(() => gc(ledger, { graceMs: 0, dryrun: true } as never)), 'dryrun', 'dryRun');
        const out = join(tempDir(), 'bundle');
        expectUnknown(
          await refusal(() => exportBundle(ledger, { out, withblobs: true } as never)),
          'withblobs',
          'withBlobs',
        );
        expect(existsSync(out)).toBe(false);
        const model: ModelAdapter = async () => {
          throw new Error('the model is not asked');
        };
        expectUnknown(
          await refusal(() =>
            compact({
              ledger,
              scope,
              model,
              transcript: [{ role: 'user', content: 'hi' }],
              expectedprev: first.id,
            } as never),
          ),
          'expectedprev',
          'expectedPrev',
        );
        expect((await ledger.history(scope)).map((e) => e.id)).toEqual([first.id]);
        // The blob store's options (the inline tier's read as the file tier's): a misspelt bound is no bound.
        expectUnknown(
          await refusal(() => ledger.blobs.get(first.digest, { maxbytes: 1 } as never)),
          'maxbytes',
          'maxBytes',
        );
        expectUnknown(
          await refusal(async () => {
            for await (const _ of ledger.blobs.chunks(first.digest, { maxByte: 1 } as never));
          }),
          'maxByte',
          'maxBytes',
        );
        expectUnknown(
          await refusal(() => ledger.blobs.put(new Uint8Array([1]), { maxbytes: 1 } as never)),
          'maxbytes',
          'maxBytes',
        );
        expectUnknown(
          await refusal(() => ledger.blobs.delete(first.digest, { storedBefore: 0 } as never)),
          'storedBefore',
          'storedBeforeMs',
        );
        expect(await ledger.blobs.has(first.digest)).toBe(true);
        expect((await ledger.blobs.get(first.digest, { maxBytes: 1 << 20, signal: undefined })).length).toBe(
          first.size,
        );
        // Every documented name is taken as ever.
        await ledger.publish(scope, sampleSummary(2), { expectedPrev: first.id, signal: undefined, covers: undefined });
        expect((await ledger.history(scope, { signal: undefined })).length).toBe(2);
      } finally {
        await ledger.close();
      }
    });
  });
}

ledgerEntryPoints('embedded', () => ({}));

describePostgres('PostgreSQL', (pg: PostgresHandle) => {
  ledgerEntryPoints('PostgreSQL', () => ({
    postgres: { connectionString: pg.connectionString, schema: 'unknown_opts' },
  }));

  it("openLedger refuses postgres.hash (not an option of its postgres: the ledger's hash is the store's), making nothing", async () => {
    const parent = tempDir();
    const root = join(parent, 'store');
    for (const hash of ['noble', 'no-such-backend'])
      expect(
        await refusal(() =>
          openLedger({
            root,
            host: 'h',
            postgres: { connectionString: pg.connectionString, schema: 'postgres_hash', hash },
          } as never),
        ),
      ).toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('postgres.hash'),
      });
    expect(readdirSync(parent)).toEqual([]);
    // Undefined is no value given, as for every option.
    const ledger = await openLedger({
      root,
      host: 'h',
      onNotice: () => {},
      postgres: { connectionString: pg.connectionString, schema: 'postgres_hash', hash: undefined } as never,
    });
    await ledger.close();
  });

  it('openPostgresBackends refuses a misspelt option before it connects', async () => {
    expectUnknown(
      await refusal(() => openPostgresBackends({ connectionString: pg.connectionString, maxconnections: 2 } as never)),
      'maxconnections',
      'maxConnections',
    );
  });
});

it('new Ledger(…) from a caller is a coded refusal, not a TypeError of its first field', () => {
  for (const init of [{}, undefined, null, { keyring: {} }])
    expect(
      (() => {
        try {
          new Ledger(init as never);
        } catch (err) {
          return err;
        }
      })(),
    ).toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
});

describe("the README's option names are all known", () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

  it("every name of openLedger's option table opens a ledger", async () => {
    const table = readme.slice(readme.indexOf('| option | meaning |'));
    const rows = table.slice(0, table.indexOf('\n\n')).split('\n').slice(2);
    const names = rows.flatMap((row) => [...row.split('|')[1]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!));
    expect(names).toContain('host');
    expect(names.length).toBeGreaterThan(15);
    const root = tempDir();
    const options = { ...Object.fromEntries(names.map((n) => [n, undefined])), root, host: 'h', onNotice: () => {} };
    const ledger = await openLedger(options as never);
    await ledger.close();
  });

  it('every `postgres.X` and `witnesses.X` the README names is an option of its object', () => {
    // Options are camelCase (`witnesses.txt` is a file the README names).
    const named = (prefix: string) =>
      [...readme.matchAll(new RegExp(`\`${prefix}\\.([a-z]+[A-Z]\\w*)\``, 'g'))].map((m) => m[1]!);
    const postgres = named('postgres');
    expect(postgres).toContain('lockTimeoutMs');
    for (const name of postgres) readPostgresOptions({ connectionString: 'postgresql:///x', [name]: undefined });
    const witnesses = named('witnesses');
    expect(witnesses).toContain('closeWaitMs');
    for (const name of witnesses) readWitnessingOptions({ witnesses: [], [name]: undefined });
  });

  it('openLedger given the witness list itself as `witnesses` says the shape it takes, not an unknown option "0"', async () => {
    // `witnesses: { witnesses: [url…] }` nests the list: passing the list straight is the mistake to expect.
    const parent = tempDir();
    const err = await refusal(() =>
      openLedger({ root: join(parent, 'store'), host: 'h', witnesses: ['http://127.0.0.1:1'] as never }),
    );
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((err as Error).message).toBe('witnesses must be { witnesses: [...] } (WitnessingOptions), not an array');
    expect(readdirSync(parent)).toEqual([]);
  });
});

describe("the stores' own openers and the manifest layer", () => {
  // No server listens here: an opener that went on to connect would fail STORAGE_FAILED, not refuse the name.
  const nowhere = 'postgresql://nobody@/db?host=/nonexistent-handoff-ledger-socket-dir';

  it('FsBlobStore.open and LevelManifestLog.open refuse a misspelt option, making nothing', async () => {
    const parent = tempDir();
    const root = join(parent, 'store');
    const hash = await loadHashBackend('noble');
    // A misspelt leaveLeftovers: an open meant to diagnose would have cleared the staging files it must leave.
    expectUnknown(
      await refusal(() => FsBlobStore.open(root, { hash, leaveLeftover: true } as never)),
      'leaveLeftover',
      'leaveLeftovers',
    );
    expectUnknown(
      await refusal(() => LevelManifestLog.open(join(root, 'manifests-v1'), { writebatch: undefined } as never)),
      'writebatch',
      'writeBatch',
    );
    expect(readdirSync(parent)).toEqual([]);
    // Every documented name is taken as ever.
    const { store } = await FsBlobStore.open(root, {
      hash,
      maxBlobBytes: undefined,
      fs: undefined,
      hashThread: false,
      keepStagingMs: 0,
      leaveLeftovers: false,
    });
    await store.close();
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'), { writeBatch: undefined });
    await log.close();
  });

  it('FsBlobStore.open and PgBlobStore.open refuse a hash that is no backend, making nothing, connecting to nothing', async () => {
    // FsBlobStore: null threw a TypeError from its constructor, a backend's name failed the first put; PgBlobStore
    // made its schema and failed the first put STORAGE_FAILED.
    const parent = tempDir();
    for (const hash of [null, undefined, {}, 'native', { name: 'x' }]) {
      expect(await refusal(() => FsBlobStore.open(join(parent, 'store'), { hash } as never))).toMatchObject({
        name: 'StoreError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('hash must be a BLAKE3 backend'),
      });
      expect(await refusal(() => PgBlobStore.open({ connectionString: nowhere, hash } as never))).toMatchObject({
        name: 'StoreError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('hash must be a BLAKE3 backend'),
      });
    }
    expect(readdirSync(parent)).toEqual([]);
  });

  it('PgBlobStore.open and PgManifestLog.open refuse a misspelt option before they connect', async () => {
    const hash = await loadHashBackend('noble');
    expectUnknown(
      await refusal(() => PgBlobStore.open({ connectionString: nowhere, hash, maxblobBytes: 1 } as never)),
      'maxblobBytes',
      'maxBlobBytes',
    );
    expectUnknown(
      await refusal(() => PgManifestLog.open({ connectionString: nowhere, Schema: 'other' } as never)),
      'Schema',
      'schema',
    );
    // Spelt right, they do connect (and fail to: there is no server).
    expect(await refusal(() => PgManifestLog.open({ connectionString: nowhere, schema: 'other' }))).toMatchObject({
      code: 'STORAGE_FAILED',
    });
  });

  it('PgManifestLog.storedOrigin reads its options as open does (a misspelt one was ignored, null a TypeError)', async () => {
    expectUnknown(
      await refusal(() => PgManifestLog.storedOrigin({ connectionString: nowhere, Schema: 'other' } as never)),
      'Schema',
      'schema',
    );
    for (const bad of [null, undefined, 5])
      expect(await refusal(() => PgManifestLog.storedOrigin(bad as never)), String(bad)).toMatchObject({
        name: 'ManifestError',
        code: 'INVALID_ARGUMENT',
      });
    expect(
      await refusal(() => PgManifestLog.storedOrigin({ connectionString: nowhere, schema: 'other' })),
    ).toMatchObject({
      code: 'STORAGE_FAILED',
    });
  });

  it('verifyManifestEnvelope refuses a misspelt option (INVALID_ARGUMENT) and options without a trust store', async () => {
    const trust = { version: 1 as const, keys: [] };
    const verify = (options: unknown) => refusal(() => verifyManifestEnvelope('{}', options as never));
    const misspelt = await verify({ trust, verifer: undefined });
    expectUnknown(misspelt, 'verifer', 'verifier');
    expect(misspelt).toMatchObject({ name: 'ManifestError' });
    expect(await verify({ Trust: trust })).toMatchObject({ name: 'ManifestError', code: 'INVALID_ARGUMENT' });
    expect(await verify(undefined)).toMatchObject({ name: 'ManifestError', code: 'INVALID_ARGUMENT' });
    // Spelt right, the envelope itself is judged.
    expect(await verify({ trust, verifier: undefined })).toMatchObject({ code: 'ENVELOPE_INVALID' });
  });

  it('memoryBundleReader refuses a misspelt field (USAGE): `manifest` read no manifests at all', async () => {
    expectUnknown(
      await refusal(() => memoryBundleReader({ manifest: 'x' } as never)),
      'manifest',
      'manifests',
      'USAGE',
    );
    expectUnknown(
      await refusal(() => memoryBundleReader({ manifests: '', blob: new Map() } as never)),
      'blob',
      'blobs',
      'USAGE',
    );
    expect(await refusal(() => memoryBundleReader({} as never))).toMatchObject({ code: 'USAGE' });
    // No input is told what it lacks; any other non-object is readOptionFieldsAs's refusal, which names its type.
    for (const none of [null, undefined])
      expect(await refusal(() => memoryBundleReader(none as never))).toMatchObject({
        code: 'USAGE',
        message: 'memoryBundleReader needs { manifests } (the text or bytes of manifests.jsonl)',
      });
    for (const [given, type] of [
      [7, 'number'],
      ['{}', 'string'],
      [true, 'boolean'],
    ] as const)
      expect(await refusal(() => memoryBundleReader(given as never))).toMatchObject({
        code: 'USAGE',
        message: `memoryBundleReader input must be an object (null or undefined: none), not a ${type}`,
      });
    const reader = memoryBundleReader({ header: undefined, manifests: '', blobs: undefined, treeFiles: undefined });
    expect(await reader.header()).toBeUndefined();
  });

  it('memoryBundleReader refuses a header that is no text, blobs that are no Map, treeFiles that are no object (USAGE)', async () => {
    // A parsed header read as a bundle.json that is no JSON (BUNDLE_INVALID, a bundle fault), a plain object of blobs as
    // a TypeError at the first blob read: the caller's mistake is said as one, at once.
    const header = { version: 1, host: 'h' };
    expect(await refusal(() => memoryBundleReader({ header, manifests: '' } as never))).toMatchObject({
      code: 'USAGE',
      message: expect.stringContaining("header must be bundle.json's text, not an object"),
    });
    for (const header of [null, 7, ['x']])
      expect(await refusal(() => memoryBundleReader({ header, manifests: '' } as never))).toMatchObject({
        code: 'USAGE',
      });
    const blobs = { ['blake3:' + '0'.repeat(64)]: new Uint8Array(1) };
    expect(await refusal(() => memoryBundleReader({ manifests: '', blobs } as never))).toMatchObject({
      code: 'USAGE',
      message: 'memoryBundleReader input: blobs must be a Map of digest to bytes, not an object',
    });
    expect(
      await refusal(() => memoryBundleReader({ manifests: '', treeFiles: 'checkpoint.note' } as never)),
    ).toMatchObject({
      code: 'USAGE',
      message: expect.stringContaining('treeFiles must be an object of file name to text, not "checkpoint.note"'),
    });
    // Given right, each is served.
    const reader = memoryBundleReader({ header: '{}', manifests: '', blobs: new Map(), treeFiles: {} });
    expect(await reader.header()).toBe('{}');
  });
});

describe('the auditor and the adapters', () => {
  const trust = { keys: [] };
  it('verifyBundle, auditBundle, verifyChain, openBundleDir, createWorkerLineVerifier: USAGE', async () => {
    const reader = { header: async () => undefined, manifests: async function* () {} };
    expectUnknown(
      await refusal(() => verifyBundle(reader as never, { trust, requireblobs: true } as never)),
      'requireblobs',
      'requireBlobs',
      'USAGE',
    );
    expectUnknown(
      await refusal(() => auditBundle(reader as never, { trust, telemtry: {} } as never)),
      'telemtry',
      'telemetry',
      'USAGE',
    );
    expectUnknown(
      await refusal(() => verifyChain([], { trust, maxfindings: 5 } as never)),
      'maxfindings',
      'maxFindings',
      'USAGE',
    );
    expectUnknown(
      await refusal(() => openBundleDir(tempDir(), { maxManifestBytes: 5 } as never)),
      'maxManifestBytes',
      'maxManifestsBytes',
      'USAGE',
    );
    expectUnknown(
      await refusal(() => createWorkerLineVerifier({ trust, thread: 2 } as never)),
      'thread',
      'threads',
      'USAGE',
    );
  });

  it('verifyBundle reads each option once: a getter that throws is USAGE, not an uncoded error', async () => {
    const reader = { header: async () => undefined, manifests: async function* () {} };
    let reads = 0;
    const options = {
      trust,
      get expect() {
        reads++;
        return reads === 1 ? 'full' : 'nonsense';
      },
    };
    const report = await verifyBundle(reader as never, options as never);
    expect(report.checked.expect).toBe('full');
    expect(reads).toBe(1);
    const throwing = {
      trust,
      get maxFindings(): number {
        throw new Error('getter');
      },
    };
    expect(await refusal(() => verifyBundle(reader as never, throwing as never))).toMatchObject({
      code: 'USAGE',
      message: 'verifyBundle options: reading its maxFindings failed',
    });
  });

  it('new LedgerTelemetry refuses a misspelt option', async () => {
    expectUnknown(
      await refusal(() => new LedgerTelemetry({ tracerprovider: {} } as never)),
      'tracerprovider',
      'tracerProvider',
    );
  });

  it('shouldCompact and compactionRequest refuse a misspelt option (a misspelt ratio was the default)', async () => {
    expectUnknown(
      await refusal(() => shouldCompact({ usedTokens: 60, contextWindow: 100, Ratio: 0.5 } as never)),
      'Ratio',
      'ratio',
    );
    expect(shouldCompact({ usedTokens: 60, contextWindow: 100, ratio: 0.5 })).toBe(true);
    expectUnknown(
      await refusal(() =>
        compactionRequest({ messages: [{ role: 'user', content: 'hi' }], maxOutputToken: 5 } as never),
      ),
      'maxOutputToken',
      'maxOutputTokens',
    );
  });

  it('every adapter factory refuses a misspelt option', async () => {
    const client = {};
    expectUnknown(await refusal(() => openaiAdapter({ client, model: 'm', API: 'chat' } as never)), 'API', 'api');
    expectUnknown(
      await refusal(() => anthropicAdapter({ client, model: 'm', maxToken: 5 } as never)),
      'maxToken',
      'maxTokens',
    );
    expectUnknown(await refusal(() => geminiAdapter({ client, modle: 'm', model: 'm' } as never)), 'modle', 'model');
    expectUnknown(
      await refusal(() => aiSdkAdapter({ model: 'm', schemaform: 'strict' } as never)),
      'schemaform',
      'schemaForm',
    );
  });
});
