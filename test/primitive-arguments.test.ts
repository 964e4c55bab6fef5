/**
 * The exported primitives (BLAKE3 digests, DSSE signing, signed notes and checkpoints, the Merkle and session-heads
 * hashes, trust lookups, Ed25519 verification, the bundle header) given arguments their types do not allow, from
 * JavaScript: a coded refusal naming the argument, never a TypeError or RangeError from inside, and never a value
 * hashed or signed as something else. The verifiers answer false, as their contract says (never an exception).
 * canonicalize and canonicalBytes are documented to throw TypeError, as JSON.stringify does, and are left so
 * (encodeManifest is canonicalBytes); encodeVerifierKey refuses with a code as the other primitives do.
 */
import { describe, expect, it } from 'vitest';
import { runInNewContext } from 'node:vm';
import { escapedText } from '../store/errors.js';
import { printableOnce } from '../manifests/encoding/printable.js';
import {
  digestOf,
  formatDigest,
  FsBlobStore,
  loadHashBackend,
  type BlobStore,
  type Digest,
  type GetOptions,
} from '../store/index.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleBlobPath } from '../manifests/audit/bundle.js';
import {
  checkpointVerifiers,
  encodeVerifierKey,
  findTrustedKey,
  formatCheckpoint,
  keyIdOf,
  manifestId,
  nobleVerifier,
  nodeVerifier,
  noteKeyHash,
  openNote,
  pae,
  parseVerifierKey,
  serializeEnvelope,
  signEnvelope,
  signNote,
} from '../manifests/index.js';
import {
  leafHash,
  nodeHash,
  parseBundleHeader,
  rootFromInclusionProof,
  sessionHeadsRoot,
  storedSummaryProblem,
  verifyConsistency,
  verifyInclusion,
  verifySessionHead,
  witnessDigest,
} from '../manifests/audit/index.js';
import {
  cosignCheckpoint,
  cosignerKeyHash,
  checkCosignatures,
  encodeCosignerKey,
  parseCosignerKey,
} from '../manifests/crypto/cosignature.js';
import { fixedBlocks } from '../store/blocks.js';
import {
  nodeName,
  proveSessionHead,
  SessionHeadsUpdate,
  type HeadsNode,
  type HeadsNodeReader,
} from '../manifests/tlog/session-heads.js';
import { defaultRoot, exportBundle, LedgerTelemetry, LocalSigner, generateJwk, openLedger } from '../src/index.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { codedRefusal } from './support/coded-refusal.js';

const NOT_BYTES: unknown[] = [undefined, null, 5, 'abc', {}, [1, 2, 3], new ArrayBuffer(32)];

/** What `call` threw (awaited): its class name, code and message; fails for an uncoded error or none. */
const refusal = codedRefusal;

const signer = new LocalSigner(generateJwk());
const noteSigner = { name: 'log.example/a', publicKey: signer.publicKey, sign: (m: Uint8Array) => signer.sign(m) };

describe('the byte-taking primitives refuse what is no Uint8Array: INVALID_ARGUMENT naming the argument', () => {
  const cases: Array<[string, (bad: never) => unknown, string, RegExp]> = [
    ['digestOf', (b) => digestOf(b), 'StoreError', /^digestOf: bytes must be a Uint8Array, not /],
    ['formatDigest', (b) => formatDigest(b), 'StoreError', /^formatDigest: the BLAKE3-256 digest must be a Uint8Array/],
    ['manifestId', (b) => manifestId(b), 'ManifestError', /^manifestId: the payload must be a Uint8Array/],
    ['keyIdOf', (b) => keyIdOf(b), 'ManifestError', /^keyIdOf: the public key must be a Uint8Array/],
    ['leafHash', (b) => leafHash(b), 'ManifestError', /^leafHash: the leaf must be a Uint8Array/],
    ['nodeHash left', (b) => nodeHash(b, new Uint8Array(32)), 'ManifestError', /^nodeHash: left must be a Uint8Array/],
    ['nodeHash right', (b) => nodeHash(new Uint8Array(32), b), 'ManifestError', /^nodeHash: right must be/],
    ['noteKeyHash', (b) => noteKeyHash('n', b), 'ManifestError', /^noteKeyHash: the Ed25519 public key must be a/],
    ['pae', (b) => pae('t', b), 'ManifestError', /^pae: the payload must be a Uint8Array/],
    ['signEnvelope', (b) => signEnvelope('t', b, signer), 'ManifestError', /^signEnvelope: the payload must be a/],
    // It threw a TypeError ('an Ed25519 key is 32 bytes').
    [
      'encodeVerifierKey',
      (b) => encodeVerifierKey('n', b),
      'ManifestError',
      /^encodeVerifierKey: the Ed25519 public key must be a Uint8Array/,
    ],
  ];
  it.each(cases)('%s', async (_name, call, name, message) => {
    for (const bad of NOT_BYTES)
      expect(await refusal(() => call(bad as never)), String(bad)).toMatchObject({
        name,
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(message) as string,
      });
  });

  it('digestOf hashes no string as its text (it did once WebAssembly was ready, and refused it before)', async () => {
    expect(await refusal(() => digestOf('abc' as never))).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(digestOf(new TextEncoder().encode('abc'))).toMatch(/^blake3:[0-9a-f]{64}$/);
    expect(digestOf(Buffer.from('abc'))).toBe(digestOf(new TextEncoder().encode('abc')));
  });

  it('lengths and names: a digest is 32 bytes, a verifier key of a 32-byte key and a valid name; a note key hash is of the key as given', async () => {
    expect(await refusal(() => formatDigest(new Uint8Array(31)))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'formatDigest: the BLAKE3-256 digest must be 32 bytes, not 31',
    });
    expect(await refusal(() => noteKeyHash(5 as never, signer.publicKey))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'noteKeyHash: the key name must be a string, not 5',
    });
    // encodeVerifierKey threw a TypeError for each of these (`invalid note key name 5`, `an Ed25519 key is 32 bytes`).
    for (const [name, key, message] of [
      [5, signer.publicKey, 'encodeVerifierKey: the note key name must be a string, not 5'],
      [null, signer.publicKey, 'encodeVerifierKey: the note key name must be a string, not null'],
      [{}, signer.publicKey, 'encodeVerifierKey: the note key name must be a string, not an object'],
      [
        'a b',
        signer.publicKey,
        'encodeVerifierKey: "a b" is no note key name (non-empty, no spaces, no "+", no control',
      ],
      ['', signer.publicKey, 'encodeVerifierKey: "" is no note key name'],
      ['n', new Uint8Array(31), 'encodeVerifierKey: the Ed25519 public key must be 32 bytes, not 31'],
    ] as const)
      expect(await refusal(() => encodeVerifierKey(name as never, key)), String(name)).toMatchObject({
        name: 'ManifestError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining(message) as string,
      });
    // What the types allow is taken as ever.
    expect(encodeVerifierKey('n', signer.publicKey)).toMatch(/^n\+[0-9a-f]{8}\+/);
    expect(typeof noteKeyHash('n', signer.publicKey)).toBe('number');
    expect(formatDigest(new Uint8Array(32))).toBe(`blake3:${'0'.repeat(64)}`);
    expect(nodeHash(leafHash(new Uint8Array(0)), leafHash(new Uint8Array(1)))).toHaveLength(32);
  });
});

describe("every hash backend's Hasher.update refuses a chunk that is no Uint8Array alike", () => {
  // The native backend's Hasher is the same wrapper as wasm's (singleUseHasher); its addon hashed a string and a number.
  it.each(['noble', 'wasm'] as const)('%s', async (name) => {
    const backend = await loadHashBackend(name);
    // noble threw a TypeError, wasm an Error ('Invalid data type!') and hashed a string as its text.
    for (const bad of NOT_BYTES) {
      const h = await backend.create();
      expect(await refusal(() => h.update(bad as never)), `${name} ${String(bad)}`).toMatchObject({
        name: 'StoreError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^Hasher\.update: the chunk must be a Uint8Array, not /) as string,
      });
    }
    const h = await backend.create();
    h.update(Buffer.from('ab'));
    h.update(new TextEncoder().encode('c'));
    expect(formatDigest(await h.digest())).toBe(digestOf(new TextEncoder().encode('abc')));
  });
});

describe('DSSE signing', () => {
  it('a payload type that is no string is refused, not signed as its text', async () => {
    for (const type of [undefined, null, 5, {}])
      for (const call of [
        () => pae(type as never, new Uint8Array(1)),
        () => signEnvelope(type as never, new Uint8Array(1), signer),
      ])
        expect(await refusal(call), String(type)).toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: expect.stringMatching(/^(pae|signEnvelope): the payload type must be a string, not /) as string,
        });
  });

  it('a signer without sign or keyId is INVALID_ARGUMENT; a serialized envelope is an object of its fields', async () => {
    for (const bad of [undefined, null, 5, {}, { keyId: 'k' }, { sign: () => new Uint8Array(64) }])
      expect(
        await refusal(() => signEnvelope('t', new Uint8Array(1), bad as never)),
        JSON.stringify(bad),
      ).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^signEnvelope: signer must be \{ keyId: string/) as string,
      });
    for (const bad of [undefined, null, 5])
      expect(await refusal(() => serializeEnvelope(bad as never)), String(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `serializeEnvelope: the envelope must be an object, not ${String(bad)}`,
      });
    const envelope = await signEnvelope('t', new Uint8Array(1), signer);
    expect(JSON.parse(serializeEnvelope(envelope))).toEqual(envelope);
    // {} was written as the line `{}`; a field that was no text left out of the line or written as no reader takes it.
    for (const [bad, name] of [
      [{}, 'payloadType'],
      [{ ...envelope, payloadType: 5 }, 'payloadType'],
      [{ ...envelope, payload: new Uint8Array(1) }, 'payload'],
      [{ ...envelope, signatures: undefined }, 'signatures'],
      [{ ...envelope, signatures: [null] }, 'signatures\\[0\\]'],
      [{ ...envelope, signatures: [{ keyid: 'k', sig: new Uint8Array(64) }] }, 'signatures\\[0\\]'],
    ] as const)
      expect(await refusal(() => serializeEnvelope(bad as never)), JSON.stringify(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(new RegExp(`^serializeEnvelope: the envelope\\.${name} must be `)) as string,
      });
    // DSSE's keyid is optional.
    const { keyid: _keyid, ...unnamed } = envelope.signatures[0]!;
    expect(JSON.parse(serializeEnvelope({ ...envelope, signatures: [unnamed] }))).toEqual({
      ...envelope,
      signatures: [unnamed],
    });
  });
});

describe('signed notes and checkpoints: their documented codes', () => {
  it('signNote: signers that are no list INVALID_ARGUMENT, a signer that is none KEY_INVALID', async () => {
    for (const bad of [undefined, null, 5, {}])
      expect(await refusal(() => signNote('a\n', bad as never)), String(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^signNote: signers must be an array, not /) as string,
      });
    for (const bad of [
      undefined,
      null,
      { ...noteSigner, sign: undefined },
      { ...noteSigner, publicKey: undefined },
      { ...noteSigner, publicKey: new Uint8Array(31) },
    ])
      expect(await refusal(() => signNote('a\n', [noteSigner, bad as never])), String(bad)).toMatchObject({
        code: 'KEY_INVALID',
      });
    // An array or another iterable of signers signs as before.
    const note = await signNote('a\n', [noteSigner]);
    expect(await signNote('a\n', new Set([noteSigner]) as never)).toBe(note);
    expect(note).toMatch(/^a\n\n— log\.example\/a /);
  });

  it('formatCheckpoint: no object, or extensions that are no list of text, CHECKPOINT_INVALID', async () => {
    const good = { origin: 'log.example/a', size: 1, root: new Uint8Array(32), extensions: [] as string[] };
    for (const bad of [
      undefined,
      null,
      { ...good, extensions: undefined },
      { ...good, extensions: 'x' },
      // The bytes of a Uint8Array extension were written as their numbers: `0,0,0`.
      { ...good, extensions: [new Uint8Array(3)] },
      { ...good, extensions: [5] },
    ])
      expect(await refusal(() => formatCheckpoint(bad as never)), JSON.stringify(bad)).toMatchObject({
        code: 'CHECKPOINT_INVALID',
      });
    expect(formatCheckpoint({ ...good, extensions: ['x y'] })).toBe(
      `log.example/a\n1\n${Buffer.alloc(32).toString('base64')}\nx y\n`,
    );
  });

  it('parseBundleHeader: text that is no string (a parsed header) is USAGE; text that is no header BUNDLE_INVALID', async () => {
    for (const bad of [undefined, null, {}, { format: 'handoff-ledger-bundle' }])
      expect(await refusal(() => parseBundleHeader(bad as never)), String(bad)).toMatchObject({
        name: 'AuditError',
        code: 'USAGE',
        message: expect.stringMatching(/^parseBundleHeader: text must be bundle\.json's text, not /) as string,
      });
    expect(await refusal(() => parseBundleHeader('{}'))).toMatchObject({ code: 'BUNDLE_INVALID' });
  });
});

describe('session heads and trust lookups', () => {
  it('sessionHeadsRoot: heads that are none are INVALID_ARGUMENT, not a TypeError or a root of nothing', async () => {
    const head = { session: 's1', head: { seq: 0, id: `blake3:${'a'.repeat(64)}` } };
    for (const bad of [undefined, null, 5, {}])
      expect(await refusal(() => sessionHeadsRoot(bad as never)), String(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^sessionHeadsRoot: heads must be an iterable/) as string,
      });
    // A head that was a number hashed as {"id":undefined,"seq":undefined}.
    for (const bad of [null, 5, { session: 's1' }, { session: 's1', head: 5 }, { ...head, head: { seq: -1, id: 'x' } }])
      expect(await refusal(() => sessionHeadsRoot([head, bad] as never)), JSON.stringify(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^sessionHeadsRoot: heads\[1\] must be \{ session: string/) as string,
      });
    expect(sessionHeadsRoot([head])).toEqual(sessionHeadsRoot(new Map([[0, head]]).values()));
  });

  it('findTrustedKey and checkpointVerifiers: a store that is none is TRUST_INVALID, as mergeTrust says', async () => {
    for (const bad of [undefined, null, 5, { version: 1 }, { version: 1, keys: 'x' }])
      expect(
        await refusal(() => findTrustedKey(bad as never, 'h', 'ed25519:00', '2026-01-01T00:00:00.000Z')),
        JSON.stringify(bad),
      ).toMatchObject({ code: 'TRUST_INVALID' });
    for (const bad of [undefined, null, 5, { version: 1, keys: [], checkpointKeys: 'x' }])
      expect(await refusal(() => checkpointVerifiers(bad as never)), JSON.stringify(bad)).toMatchObject({
        code: 'TRUST_INVALID',
      });
    expect(findTrustedKey({ version: 1, keys: [] }, 'h', 'k', '2026-01-01T00:00:00.000Z')).toMatchObject({
      ok: false,
      code: 'KEY_UNTRUSTED',
    });
    expect(checkpointVerifiers({ version: 1, keys: [] })).toEqual([]);
  });

  it('findTrustedKey: a host, key id or time that is no text is INVALID_ARGUMENT naming it, not a TypeError', async () => {
    const store = { version: 1 as const, keys: [] };
    const at = '2026-01-01T00:00:00.000Z';
    for (const bad of [undefined, null, 5, {}]) {
      expect(await refusal(() => findTrustedKey(store, bad as never, 'k', at))).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^findTrustedKey: host must be text, not /) as string,
      });
      expect(await refusal(() => findTrustedKey(store, 'h', bad as never, at))).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^findTrustedKey: keyId must be text, not /) as string,
      });
      expect(await refusal(() => findTrustedKey(store, 'h', 'k', bad as never))).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^findTrustedKey: at must be text, not /) as string,
      });
    }
  });
});

describe("openNote and checkpointVerifiers: the caller's keys, verifier and options", () => {
  const body = formatCheckpoint({
    origin: 'log.example/a',
    size: 1,
    root: leafHash(new Uint8Array(1)),
    extensions: [],
  });
  const key = parseVerifierKey(encodeVerifierKey(noteSigner.name, noteSigner.publicKey));

  it('openNote refuses known keys that are no list of keys, or a verifier that is none (TypeErrors once a line was read)', async () => {
    const note = await signNote(body, [noteSigner]);
    expect(openNote(note, [key]).text).toBe(body);
    for (const bad of [undefined, null, 5, 'log.example/a', {}, [null], [{ ...key, publicKey: undefined }]])
      expect(await refusal(() => openNote(note, bad as never)), JSON.stringify(bad)).toMatchObject({
        name: 'ManifestError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(
          /^openNote: the known keys must be a list of \{ name, keyHash, publicKey \}/,
        ) as string,
      });
    for (const bad of [null, 5, {}, { verify: 'yes' }])
      expect(await refusal(() => openNote(note, [key], bad as never)), JSON.stringify(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^openNote: the verifier must be a SignatureVerifier/) as string,
      });
  });

  it('checkpointVerifiers refuses an origin that is no text (it matched no key) and options that are none', async () => {
    const trust = {
      version: 1 as const,
      keys: [],
      checkpointKeys: [
        {
          host: 'h',
          keyId: keyIdOf(noteSigner.publicKey),
          vkey: encodeVerifierKey(noteSigner.name, noteSigner.publicKey),
          notBefore: '2026-01-01T00:00:00.000Z',
        },
      ],
    };
    expect(checkpointVerifiers(trust, 'log.example/a')).toEqual([key]);
    for (const bad of [null, 5, {}])
      expect(await refusal(() => checkpointVerifiers(trust, bad as never)), JSON.stringify(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^checkpointVerifiers: origin must be a log's name \(text\)/) as string,
      });
    // null options were a TypeError; a withRevoked of 'false' was read as no.
    expect(checkpointVerifiers(trust, undefined, null as never)).toEqual([key]);
    for (const bad of [5, 'x', { withRevoked: 'true' }, { withrevoked: true }])
      expect(
        await refusal(() => checkpointVerifiers(trust, undefined, bad as never)),
        JSON.stringify(bad),
      ).toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
  });
});

describe('LedgerTelemetry', () => {
  it('refuses a version that is no text (it was handed on to the providers), and options that are none', async () => {
    for (const bad of [5, null, {}, true])
      expect(await refusal(() => new LedgerTelemetry({}, bad as never)), String(bad)).toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^LedgerTelemetry: version must be text/) as string,
      });
    for (const bad of [5, 'x'])
      expect(await refusal(() => new LedgerTelemetry(bad as never)), String(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    expect(new LedgerTelemetry(null as never, '1.0.0')).toBeInstanceOf(LedgerTelemetry);
    expect(new LedgerTelemetry()).toBeInstanceOf(LedgerTelemetry);
  });
});

describe('defaultRoot', () => {
  it('refuses an env that is no object, or a root variable that is no text (null was a TypeError, 5 the home root)', async () => {
    for (const bad of [5, 'HANDOFF_LEDGER_ROOT=/x', true])
      expect(await refusal(() => defaultRoot(bad as never)), String(bad)).toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^defaultRoot: env must be an object of environment variables/) as string,
      });
    for (const env of [{ HANDOFF_LEDGER_ROOT: 5 }, { XDG_STATE_HOME: {} }])
      expect(await refusal(() => defaultRoot(env as never)), JSON.stringify(env)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(
          /^defaultRoot: env\.(HANDOFF_LEDGER_ROOT|XDG_STATE_HOME) must be text, not /,
        ) as string,
      });
    expect(defaultRoot({ HANDOFF_LEDGER_ROOT: '/srv/ledger' })).toBe('/srv/ledger');
    expect(defaultRoot({ HANDOFF_LEDGER_ROOT: '', XDG_STATE_HOME: '/state' })).toBe(join('/state', 'handoff-ledger'));
    expect(defaultRoot(null as never)).toBe(defaultRoot());
  });
});

describe('storedSummaryProblem', () => {
  it('refuses what is no bytes (it said `not UTF-8 JSON`, of JSON text too) and judges bytes in any form alike', async () => {
    const json = JSON.stringify({ task: 't', state: 's', nextSteps: [] });
    const bytes = new TextEncoder().encode(json);
    const verdict = storedSummaryProblem(bytes);
    for (const bad of [undefined, null, 5, json, JSON.parse(json) as unknown, [1, 2]])
      expect(await refusal(() => storedSummaryProblem(bad as never)), String(bad)).toMatchObject({
        name: 'ManifestError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(
          /^storedSummaryProblem: the stored summary must be its bytes \(a Uint8Array\), not /,
        ) as string,
      });
    expect(storedSummaryProblem(bytes.slice().buffer as never)).toBe(verdict);
    expect(storedSummaryProblem(Buffer.from(json))).toBe(verdict);
    expect(storedSummaryProblem(new TextEncoder().encode('{'))).toBe(
      'SUMMARY_INVALID: stored summary is not UTF-8 JSON',
    );
  });
});

describe('checkCosignatures', () => {
  it('pinned keys that are none are KEY_INVALID, a verifier that is none INVALID_ARGUMENT, before a line is read', async () => {
    const witness = { name: 'w.example', publicKey: signer.publicKey, sign: (m: Uint8Array) => signer.sign(m) };
    const body = formatCheckpoint({
      origin: 'log.example/a',
      size: 1,
      root: leafHash(new Uint8Array(1)),
      extensions: [],
    });
    const note = `${body}\n${await cosignCheckpoint(body, witness, 1_767_225_600)}`;
    const key = parseCosignerKey(encodeCosignerKey(witness.name, witness.publicKey));
    expect(checkCosignatures(note, [key]).valid).toHaveLength(1);
    // A list that was none failed as `witnesses.find is not a function`; a key without its bytes reported the
    // witness's valid cosignature as one that does not verify.
    for (const bad of [
      undefined,
      null,
      5,
      {},
      'w.example',
      [null],
      [{ ...key, publicKey: undefined }],
      [{ ...key, name: 5 }],
    ])
      expect(await refusal(() => checkCosignatures(note, bad as never)), JSON.stringify(bad)).toMatchObject({
        name: 'ManifestError',
        code: 'KEY_INVALID',
        message: expect.stringMatching(
          /^checkCosignatures: the pinned witness keys must be a list of \{ name, keyHash/,
        ) as string,
      });
    for (const bad of [null, 5, {}, { verify: true }])
      expect(await refusal(() => checkCosignatures(note, [key], bad as never)), JSON.stringify(bad)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^checkCosignatures: the verifier must be a SignatureVerifier/) as string,
      });
    // A note that is no text has no cosignature (hostile input, never an exception), whatever its keys.
    expect(checkCosignatures(5 as never, [key])).toEqual({ valid: [], invalid: [] });
  });
});

describe('the Ed25519 verifiers', () => {
  it('answer false for a signature, message or key that is no bytes, as for a bad signature: never an exception', () => {
    const message = new Uint8Array([1, 2, 3]);
    const signature = signer.sign(message) as Uint8Array;
    for (const v of [nobleVerifier, nodeVerifier]) {
      expect(v.verify(signature, message, signer.publicKey), v.name).toBe(true);
      for (const bad of [...NOT_BYTES, Array.from({ length: 64 }, () => 0), Array.from({ length: 32 }, () => 0)]) {
        expect(v.verify(bad as never, message, signer.publicKey), `${v.name} signature ${String(bad)}`).toBe(false);
        expect(v.verify(signature, bad as never, signer.publicKey), `${v.name} message ${String(bad)}`).toBe(false);
        expect(v.verify(signature, message, bad as never), `${v.name} key ${String(bad)}`).toBe(false);
      }
    }
  });
});

describe("another realm's Uint8Array (a vm context's, a test sandbox's) is bytes: by its brand, not its prototype", () => {
  const foreign = (bytes: Uint8Array): Uint8Array =>
    runInNewContext('new Uint8Array(b)', { b: Array.from(bytes) }) as Uint8Array;
  const abc = new TextEncoder().encode('abc');

  it('the verifiers verify a valid signature held in foreign arrays (they answered false: no bytes)', () => {
    const message = new Uint8Array([1, 2, 3]);
    const signature = signer.sign(message) as Uint8Array;
    expect(foreign(message) instanceof Uint8Array).toBe(false);
    for (const v of [nobleVerifier, nodeVerifier]) {
      expect(v.verify(foreign(signature), foreign(message), foreign(signer.publicKey)), v.name).toBe(true);
      const tampered = foreign(signature);
      tampered[5]! ^= 1;
      expect(v.verify(tampered, foreign(message), foreign(signer.publicKey)), v.name).toBe(false);
    }
  });

  it('digests, tree hashes, PAE and every Hasher take them, with the same results as for local arrays', async () => {
    expect(digestOf(foreign(abc))).toBe(digestOf(abc));
    expect(leafHash(foreign(abc))).toEqual(leafHash(abc));
    const l = leafHash(abc);
    expect(nodeHash(foreign(l), foreign(l))).toEqual(nodeHash(l, l));
    expect(pae('t', foreign(abc))).toEqual(pae('t', abc));
    for (const name of ['noble', 'wasm'] as const) {
      const h = await (await loadHashBackend(name)).create();
      h.update(foreign(abc));
      expect(formatDigest(await h.digest()), name).toBe(digestOf(abc));
    }
  });

  it('an object that only names itself a Uint8Array is not one', async () => {
    const fake = { [Symbol.toStringTag]: 'Uint8Array', length: 3, 0: 1, 1: 2, 2: 3 };
    expect(await refusal(() => digestOf(fake as never))).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(nodeVerifier.verify(fake as never, abc, signer.publicKey)).toBe(false);
  });

  it('a blob store stores a foreign Uint8Array, and foreign chunks, as the local bytes (they were iterated as numbers)', async () => {
    const { store } = await FsBlobStore.open(tempDir(), { hash: await loadHashBackend('auto') });
    const small = new TextEncoder().encode('a summary, as a vm context hands it over');
    // Past one flush-behind step (8 MiB): the stream path, cut into blocks.
    const large = new Uint8Array(8 * 1024 * 1024 + 5).map((_, i) => (i * 31) & 0xff);
    const foreignLarge = runInNewContext('new Uint8Array(n)', { n: large.length }) as Uint8Array;
    foreignLarge.set(large);
    expect(foreignLarge instanceof Uint8Array).toBe(false);
    for (const [local, other] of [
      [small, foreign(small)],
      [large, foreignLarge],
    ] as const) {
      const stored = await store.put(other);
      expect(stored).toEqual({ digest: digestOf(local), size: local.length });
      expect(Buffer.compare(await store.get(stored.digest), local)).toBe(0);
    }
    const chunks = (async function* () {
      yield foreign(small.subarray(0, 7));
      yield foreign(small.subarray(7));
    })();
    expect(await store.put(chunks)).toEqual({ digest: digestOf(small), size: small.length });
    expect(await refusal(() => store.put(foreign(small), { maxBytes: 3 }))).toMatchObject({ code: 'BLOB_TOO_LARGE' });
  });

  it("export writes a blob a source's store returns as a foreign Uint8Array as its bytes (it was iterated)", async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'host-a' });
    try {
      const receipt = await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary());
      const bytes = await ledger.blobs.get(receipt.digest);
      const blobs = { get: async (d: Digest, o?: GetOptions) => foreign(await ledger.blobs.get(d, o)) };
      const out = join(tempDir(), 'bundle');
      const source = { host: ledger.host, log: ledger.log, blobs: blobs as unknown as BlobStore };
      const result = await exportBundle(source, { out, withBlobs: true });
      expect(result.unavailableBlobs).toEqual([]);
      expect(readFileSync(join(out, bundleBlobPath(receipt.digest)))).toEqual(Buffer.from(bytes));
    } finally {
      await ledger.close();
    }
  });

  it("the block cutter (PostgreSQL's rows) cuts a foreign Uint8Array as bytes: it was iterated as numbers, into no block", async () => {
    const bytes = Uint8Array.from({ length: 10 }, (_, i) => i);
    const blocks: number[][] = [];
    for await (const b of fixedBlocks(foreign(bytes), [new Uint8Array(4), new Uint8Array(4)])) blocks.push([...b]);
    expect(blocks).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
  });

  it('a ledger publishes with a signer whose key and signatures are foreign (openLedger refused it, the keyring too)', async () => {
    const inner = new LocalSigner(generateJwk());
    let signed = 0;
    const kms = {
      keyId: 'kms:projects/p/keys/host-a/1',
      publicKey: foreign(inner.publicKey),
      sign: async (m: Uint8Array) => {
        signed++;
        return foreign(inner.sign(m));
      },
    };
    const ledger = await openLedger({ root: tempDir(), host: 'host-a', signer: kms });
    try {
      const scope = { principal: 'alice', session: 's', run: 'r' };
      await ledger.publish(scope, sampleSummary());
      expect(signed).toBeGreaterThanOrEqual(2); // the keyring's test signature, then the manifest's
      const resumed = await ledger.resume(scope);
      expect(resumed?.manifest.keyId).toBe(kms.keyId);
      expect(resumed?.summary).toEqual(sampleSummary());
    } finally {
      await ledger.close();
    }
  });

  it('the Merkle and session-heads verifiers take foreign hashes, roots and leaves (they answered "not bytes")', async () => {
    const leaves = [1, 2, 3, 4, 5].map((i) => leafHash(Uint8Array.of(i)));
    const n = (a: Uint8Array, b: Uint8Array) => nodeHash(a, b);
    const root4 = n(n(leaves[0]!, leaves[1]!), n(leaves[2]!, leaves[3]!));
    const root5 = n(root4, leaves[4]!);
    // Leaf 2 of 5: its sibling leaf 3, the pair (0,1), then leaf 4.
    const inclusion = [leaves[3]!, n(leaves[0]!, leaves[1]!), leaves[4]!];
    expect(verifyInclusion(2, 5, leaves[2]!, inclusion, root5)).toEqual({ ok: true });
    expect(verifyInclusion(2, 5, foreign(leaves[2]!), inclusion.map(foreign), foreign(root5))).toEqual({ ok: true });
    expect(rootFromInclusionProof(2, 5, foreign(leaves[2]!), inclusion.map(foreign))).toEqual({
      ok: true,
      root: root5,
    });
    expect(verifyInclusion(2, 5, foreign(leaves[2]!), inclusion.map(foreign), foreign(root4)).ok).toBe(false);
    // 4 → 5: the old tree is a perfect subtree, so the proof is leaf 4 alone.
    expect(verifyConsistency(4, 5, [foreign(leaves[4]!)], foreign(root4), foreign(root5))).toEqual({ ok: true });
    expect(verifyConsistency(5, 5, [], foreign(root5), foreign(root5))).toEqual({ ok: true });
    expect(verifyConsistency(4, 5, [foreign(leaves[4]!)], foreign(root5), foreign(root5)).ok).toBe(false);

    const nodes = new Map<string, HeadsNode>();
    const read: HeadsNodeReader = async (paths) => paths.map((p) => nodes.get(nodeName(p)));
    const update = new SessionHeadsUpdate(read);
    const head = { seq: 3, id: `blake3:${'3'.repeat(64)}` };
    await update.set('s', head);
    for (const c of await update.changes()) nodes.set(nodeName(c.path), c.node);
    const root = await update.root();
    const { proof } = await proveSessionHead(read, 's');
    expect(verifySessionHead(root, 's', head, proof)).toEqual({ ok: true });
    expect(verifySessionHead(foreign(root), 's', head, proof)).toEqual({ ok: true });
    expect(verifySessionHead(foreign(root), 's', { ...head, seq: 4 }, proof).ok).toBe(false);
  });

  it('a checkpoint with a foreign root, verifier keys and pinned witness keys of foreign public keys format', () => {
    const root = leafHash(abc);
    const checkpoint = { origin: 'log.example/a', size: 3, root, extensions: [] };
    expect(formatCheckpoint({ ...checkpoint, root: foreign(root) })).toBe(formatCheckpoint(checkpoint));
    expect(encodeVerifierKey('log.example/a', foreign(signer.publicKey))).toBe(
      encodeVerifierKey('log.example/a', signer.publicKey),
    );
    const key = { name: 'w.example', keyHash: cosignerKeyHash('w.example', signer.publicKey) };
    expect(witnessDigest([{ ...key, publicKey: foreign(signer.publicKey) }])).toBe(
      witnessDigest([{ ...key, publicKey: signer.publicKey }]),
    );
  });
});

describe('escapedText', () => {
  it('escapes a lone surrogate (a text cut inside a pair), as the printer would escape the whole message otherwise', () => {
    const cut = `x\u001ba${'😀'.repeat(2)}${'😀'.slice(0, 1)}`;
    const shown = escapedText(cut);
    expect(shown).toBe('x\\u001ba😀😀\\ud83d');
    expect(printableOnce(`SUMMARY_INVALID: ${shown}`)).toBe(`SUMMARY_INVALID: ${shown}`);
  });
});
