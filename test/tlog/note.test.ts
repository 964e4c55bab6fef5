import { describe, expect, it } from 'vitest';
import { nobleSign, noblePublicKey } from '../../manifests/crypto/ed25519.js';
import {
  encodeVerifierKey,
  openNote,
  parseVerifierKey,
  signNote,
  type NoteSigner,
} from '../../manifests/crypto/note.js';
import { formatCheckpoint, parseCheckpoint } from '../../manifests/format/checkpoint.js';
import { decodeBase64 } from '../../manifests/encoding/base64.js';
import { ManifestError } from '../../manifests/errors.js';
import { parseTrustStore } from '../../manifests/format/trust.js';
import { readVector } from '../support/vectors.js';

interface NoteVector {
  Name: string;
  Skey: string;
  Vkey: string;
  Text: string;
  Signed: string;
  Comment: string;
}

const vectors = readVector<NoteVector[]>('note/signed-notes.json');
const sumdb = readVector<{ vkey: string; note: string; origin: string; size: number; root: string }>(
  'note/sumdb-checkpoint.json',
);

/** Go's private key string `PRIVATE+KEY+<name>+<hash>+<base64(0x01 ‖ seed)>`. */
function signerFromSkey(skey: string): NoteSigner & { seed: Uint8Array } {
  const [, , name, , b64] = skey.split('+') as [string, string, string, string, string];
  const seed = decodeBase64(b64)!.slice(1);
  return { name, seed, publicKey: noblePublicKey(seed), sign: (m) => nobleSign(m, seed) };
}

function expectCode(fn: () => unknown, code: string): void {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ManifestError);
    expect((err as ManifestError).code).toBe(code);
    return;
  }
  throw new Error(`expected ${code}`);
}

describe('signed notes', () => {
  it('has the vectors signed by Go', () => expect(vectors.length).toBe(4));

  vectors.forEach((v, i) => {
    it(`reproduces Go's verifier key and signed note byte for byte (vector ${i}, ${v.Comment})`, async () => {
      const signer = signerFromSkey(v.Skey);
      expect(encodeVerifierKey(signer.name, signer.publicKey), `vector ${i}`).toBe(v.Vkey);
      expect(await signNote(v.Text, [signer]), `vector ${i}`).toBe(v.Signed);
    });

    it(`opens Go's note and reads its checkpoint (vector ${i})`, () => {
      const opened = openNote(v.Signed, [parseVerifierKey(v.Vkey)]);
      expect(opened.text).toBe(v.Text);
      expect(opened.sigs).toHaveLength(1);
      const cp = parseCheckpoint(opened.text);
      expect(cp.origin).toBe(v.Name);
      expect(formatCheckpoint(cp)).toBe(v.Text);
    });
  });

  it('refuses a note whose text was changed (NOTE_SIGNATURE_INVALID)', () => {
    const v = vectors[1]!;
    expectCode(
      () => openNote(v.Signed.replace('\n7\n', '\n8\n'), [parseVerifierKey(v.Vkey)]),
      'NOTE_SIGNATURE_INVALID',
    );
  });

  it('refuses a note signed by no known key (NOTE_UNVERIFIED), keeping the unknown signature aside', () => {
    const [a, , c] = vectors;
    expectCode(() => openNote(a!.Signed, [parseVerifierKey(c!.Vkey)]), 'NOTE_UNVERIFIED');
  });

  it('refuses malformed notes (NOTE_MALFORMED)', () => {
    const v = vectors[0]!;
    const known = [parseVerifierKey(v.Vkey)];
    for (const bad of [
      v.Signed.replace('\n\n', '\n'), // no blank line
      v.Signed.slice(0, -1), // unterminated signature block
      v.Signed.replace('— ', '-- '), // wrong prefix
      v.Signed.replace('\n0\n', '\n0\u0007\n'), // control character
      v.Signed.replace(/ [A-Za-z0-9+/=]+\n$/, ' AAAA\n'), // signature too short
    ])
      expectCode(() => openNote(bad, known), 'NOTE_MALFORMED');
  });

  it('refuses verifier keys whose hash does not match (KEY_INVALID)', () => {
    const v = vectors[0]!;
    expectCode(() => parseVerifierKey(v.Vkey.replace('+ab1d5d4c+', '+ab1d5d4d+')), 'KEY_INVALID');
    expectCode(() => parseVerifierKey(v.Vkey.replace('handoff-ledger/example', 'other')), 'KEY_INVALID');
    for (const hash of ['ab1d5d4', 'ab1d5d4c0', 'ab1d5d4g', '+b1d5d4c', ' b1d5d4c'])
      expectCode(() => parseVerifierKey(v.Vkey.replace('+ab1d5d4c+', `+${hash}+`)), 'KEY_INVALID');
  });

  it("reads the key hash in either case, as Go's note.NewVerifier does (strconv.ParseUint, base 16)", () => {
    const v = vectors[0]!;
    expect(parseVerifierKey(v.Vkey.replace('+ab1d5d4c+', '+AB1D5D4C+'))).toEqual(parseVerifierKey(v.Vkey));
    // A trust store holds a checkpoint key as the ledger writes it (the keyring finds its own key by that text).
    const entry = { host: 'h', keyId: 'ed25519:00', notBefore: '2026-01-01T00:00:00.000Z' };
    const trust = (vkey: string) => ({ version: 1, keys: [], checkpointKeys: [{ ...entry, vkey }] });
    expect(parseTrustStore(trust(v.Vkey)).checkpointKeys).toHaveLength(1);
    expect(() => parseTrustStore(trust(v.Vkey.replace('+ab1d5d4c+', '+AB1D5D4C+')))).toThrow(
      expect.objectContaining({ code: 'TRUST_INVALID', message: expect.stringContaining('lowercase hex') }),
    );
  });
});

describe('checkpoint body', () => {
  it('refuses leading zeros, empty lines, and a root that is not 32 bytes (CHECKPOINT_INVALID)', () => {
    const root = '47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=';
    for (const bad of [`o\n07\n${root}\n`, `o\n7\n${root}\n\n`, `o\n7\nAAAA\n`, `o\n7\n`, `\n7\n${root}\n`])
      expectCode(() => parseCheckpoint(bad), 'CHECKPOINT_INVALID');
    expect(parseCheckpoint(`o\n7\n${root}\next\n`).extensions).toEqual(['ext']);
  });
});

describe('checkpoints of other C2SP logs', () => {
  it('opens and parses a checkpoint of sum.golang.org: an origin with spaces, signed by a key named otherwise', () => {
    const opened = openNote(sumdb.note, [parseVerifierKey(sumdb.vkey)]);
    expect(opened.sigs.map((s) => s.name)).toEqual(['sum.golang.org']);
    const c = parseCheckpoint(opened.text);
    expect(c).toMatchObject({ origin: 'go.sum database tree', size: sumdb.size, extensions: [] });
    expect(c.root).toEqual(decodeBase64(sumdb.root));
  });

  it('reads any non-empty origin line (spaces, "+", no length cap), never an empty one or one with a control', () => {
    const root = 'mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=';
    for (const origin of ['a b', 'x+y', 'é log', 'o'.repeat(1000)])
      expect(parseCheckpoint(`${origin}\n1\n${root}\n`).origin).toBe(origin);
    for (const origin of ['', 'a\tb', 'a\rb', 'a\u0000b', '\ud800'])
      expectCode(() => parseCheckpoint(`${origin}\n1\n${root}\n`), 'CHECKPOINT_INVALID');
    // The ledger's own checkpoints keep the key-name form (its checkpoint key is named after its origin).
    expectCode(
      () => formatCheckpoint({ origin: 'a b', size: 0, root: new Uint8Array(32), extensions: [] }),
      'CHECKPOINT_INVALID',
    );
  });
});
