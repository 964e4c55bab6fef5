/**
 * One rule for shared memory wherever the library takes bytes: it is bytes as any other. A Uint8Array over a
 * SharedArrayBuffer is taken wherever a Uint8Array is (digests, hashers, signing, verifying, tree hashes, the blob
 * store), and a SharedArrayBuffer wherever an ArrayBuffer is (a trust or witness keys file's bytes, memoryBundleReader's
 * manifests and blobs), read as the call reads it. A bare buffer where only a Uint8Array is taken is refused as ever,
 * now naming what it is and what to pass (it was `not an object`); a SharedArrayBuffer was refused where an
 * ArrayBuffer is taken, and parseTrustStore judged it as a parsed trust store ('version: expected 1').
 */
import { describe, expect, it } from 'vitest';
import { digestOf, formatDigest, FsBlobStore, loadHashBackend } from '../store/index.js';
import {
  emptyTrustStore,
  encodeVerifierKey,
  formatCheckpoint,
  keyIdOf,
  manifestId,
  nobleVerifier,
  nodeVerifier,
  noteKeyHash,
  pae,
  parseTrustStore,
  serializeEnvelope,
  signEnvelope,
} from '../manifests/index.js';
import { leafHash, memoryBundleReader, nodeHash, parseWitnessKeys, verifyBundle } from '../manifests/audit/index.js';
import { encodeCosignerKey } from '../manifests/crypto/cosignature.js';
import { generateJwk, LocalSigner } from '../src/index.js';
import { buildBundle, jsonl } from './support/bundle-builder.js';
import { tempDir } from './support/tmp.js';
import { codedRefusal } from './support/coded-refusal.js';

const shared = (bytes: Uint8Array): Uint8Array => {
  const view = new Uint8Array(new SharedArrayBuffer(bytes.length));
  view.set(bytes);
  return view;
};
const sharedBuffer = (bytes: Uint8Array): SharedArrayBuffer => shared(bytes).buffer as SharedArrayBuffer;
const encode = (text: string) => new TextEncoder().encode(text);

/** What `call` threw (awaited): its class name, code and message; fails for an uncoded error or none. */
const refusal = codedRefusal;

const signer = new LocalSigner(generateJwk());
const abc = encode('abc');

describe('a Uint8Array over a SharedArrayBuffer is bytes wherever a Uint8Array is', () => {
  const l = leafHash(abc);
  const sig = signer.sign(abc) as Uint8Array;
  const cases: Array<[string, (as: (u: Uint8Array) => Uint8Array) => unknown]> = [
    ['digestOf', (as) => digestOf(as(abc))],
    ['formatDigest', (as) => formatDigest(as(l))],
    ['manifestId', (as) => manifestId(as(abc))],
    ['keyIdOf', (as) => keyIdOf(as(signer.publicKey))],
    ['noteKeyHash', (as) => noteKeyHash('n', as(signer.publicKey))],
    ['encodeVerifierKey', (as) => encodeVerifierKey('n', as(signer.publicKey))],
    ['pae', (as) => [...pae('t', as(abc))]],
    ['signEnvelope', async (as) => serializeEnvelope(await signEnvelope('t', as(abc), signer))],
    ['LocalSigner.sign', (as) => [...(signer.sign(as(abc)) as Uint8Array)]],
    ['nobleVerifier', (as) => nobleVerifier.verify(as(sig), as(abc), as(signer.publicKey))],
    ['nodeVerifier', (as) => nodeVerifier.verify(as(sig), as(abc), as(signer.publicKey))],
    ['leafHash', (as) => [...leafHash(as(abc))]],
    ['nodeHash', (as) => [...nodeHash(as(l), as(l))]],
    ['formatCheckpoint', (as) => formatCheckpoint({ origin: 'o', size: 1, root: as(l), extensions: [] })],
    [
      'Hasher.update (noble, wasm)',
      async (as) => {
        const out: string[] = [];
        for (const name of ['noble', 'wasm'] as const) {
          const h = await (await loadHashBackend(name)).create();
          h.update(as(abc));
          out.push(formatDigest(await h.digest()));
        }
        return out;
      },
    ],
  ];
  it.each(cases)('%s', async (_name, call) => {
    const local = await call((u) => u);
    expect(await call(shared)).toEqual(local);
    expect(local).not.toBe(false);
  });

  it('a blob store stores one, and chunks of one, as the bytes they hold', async () => {
    const { store } = await FsBlobStore.open(tempDir(), { hash: await loadHashBackend('auto') });
    const bytes = encode('a summary held in shared memory');
    expect(await store.put(shared(bytes))).toEqual({ digest: digestOf(bytes), size: bytes.length });
    const chunks = (async function* () {
      yield shared(bytes.subarray(0, 5));
      yield shared(bytes.subarray(5));
    })();
    expect(await store.put(chunks)).toEqual({ digest: digestOf(bytes), size: bytes.length });
  });
});

describe('a SharedArrayBuffer is taken wherever an ArrayBuffer is', () => {
  it("parseTrustStore and parseWitnessKeys read one as the file's bytes (refused, or judged as a parsed store)", async () => {
    const trust = { ...emptyTrustStore(), keys: [] };
    const text = JSON.stringify(trust);
    expect(parseTrustStore(encode(text).slice().buffer)).toEqual(parseTrustStore(text));
    expect(parseTrustStore(sharedBuffer(encode(text)))).toEqual(parseTrustStore(text));
    expect(parseTrustStore(shared(encode(text)))).toEqual(parseTrustStore(text));
    const keys = `${encodeCosignerKey('w.example', signer.publicKey)}\n`;
    expect(parseWitnessKeys(sharedBuffer(encode(keys)))).toEqual(parseWitnessKeys(keys));
    expect(parseWitnessKeys(shared(encode(keys)))).toEqual(parseWitnessKeys(keys));
  });

  it("memoryBundleReader's manifests and blobs in one verify as the same bytes do", async () => {
    const b = await buildBundle({ chains: [{ session: 's1', count: 2 }] });
    const options = { trust: b.trust, verifier: nodeVerifier, requireBlobs: true };
    const text = jsonl(b.lines);
    const expected = await verifyBundle(memoryBundleReader({ manifests: text, blobs: b.blobs }), options);
    expect(expected).toMatchObject({ ok: true, counts: { blobsChecked: 2 } });
    const blobs = new Map([...b.blobs].map(([digest, bytes]) => [digest, sharedBuffer(bytes)]));
    const r = await verifyBundle(memoryBundleReader({ manifests: sharedBuffer(encode(text)), blobs }), options);
    expect({ ok: r.ok, counts: r.counts, findings: r.findings }).toEqual({
      ok: expected.ok,
      counts: expected.counts,
      findings: expected.findings,
    });
  });
});

describe('where only a Uint8Array is taken, a bare buffer or another view is refused naming what it is', () => {
  const cases: Array<[string, unknown, string]> = [
    [
      'SharedArrayBuffer',
      new SharedArrayBuffer(3),
      'a SharedArrayBuffer (a Uint8Array over it is bytes: new Uint8Array(buffer))',
    ],
    ['ArrayBuffer', new ArrayBuffer(3), 'an ArrayBuffer (a Uint8Array over it is bytes: new Uint8Array(buffer))'],
    ['DataView', new DataView(new ArrayBuffer(3)), 'a DataView'],
    ['Uint16Array', new Uint16Array(3), 'a Uint16Array'],
  ];
  it.each(cases)('%s', async (_name, bad, shown) => {
    expect(await refusal(() => digestOf(bad as never))).toEqual({
      name: 'StoreError',
      code: 'INVALID_ARGUMENT',
      message: `digestOf: bytes must be a Uint8Array, not ${shown}`,
    });
    expect(await refusal(() => leafHash(bad as never))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: `leafHash: the leaf must be a Uint8Array, not ${shown}`,
    });
    const { store } = await FsBlobStore.open(tempDir(), { hash: await loadHashBackend('noble') });
    expect(await refusal(() => store.put(bad as never))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(`not ${shown}`) as string,
    });
  });
});
