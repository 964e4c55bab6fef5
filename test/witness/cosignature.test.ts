import { describe, expect, it } from 'vitest';
import {
  checkCosignatures,
  cosignCheckpoint,
  cosignedMessage,
  cosignerKeyHash,
  encodeCosignerKey,
  parseCosignerKey,
} from '../../manifests/crypto/cosignature.js';
import { nobleSign, noblePublicKey } from '../../manifests/crypto/ed25519.js';
import { decodeBase64, encodeBase64 } from '../../manifests/encoding/base64.js';
import { encodeVerifierKey, openNote, parseVerifierKey, signNote } from '../../manifests/crypto/note.js';
import { readVector } from '../support/vectors.js';

interface Vector {
  comment: string;
  name: string;
  seed: string;
  publicKey: string;
  vkey: string;
  timestamp: number;
  text: string;
  message: string;
  note: string;
  line: string;
}

const vectors = readVector<Vector[]>('cosignature/ed25519-cosignature-v1.json');
const signerOf = (name: string, seed: Uint8Array) => ({
  name,
  publicKey: noblePublicKey(seed),
  sign: (m: Uint8Array) => nobleSign(m, seed),
});

describe('cosignature/v1 (transparency-dev/formats vectors)', () => {
  it('has vectors', () => expect(vectors.length).toBeGreaterThanOrEqual(3));
  vectors.forEach((v, i) => {
    const seed = decodeBase64(v.seed)!;
    it(`vector ${i} (${v.comment}): same verifier key, message and signature line byte for byte`, async () => {
      expect(encodeCosignerKey(v.name, noblePublicKey(seed)), `vector ${i}`).toBe(v.vkey);
      expect(new TextDecoder().decode(cosignedMessage(v.text, v.timestamp)), `vector ${i}`).toBe(v.message);
      expect(await cosignCheckpoint(v.text, signerOf(v.name, seed), v.timestamp), `vector ${i}`).toBe(v.line);
    });
    it(`vector ${i}: verifies against the pinned key and reports its timestamp`, () => {
      const r = checkCosignatures(v.note, [parseCosignerKey(v.vkey)]);
      expect(r.invalid).toEqual([]);
      expect(r.valid.map((c) => [c.name, c.timestamp])).toEqual([[v.name, v.timestamp]]);
    });
  });

  it('reports a cosignature by a pinned key that does not verify over another checkpoint', () => {
    const v = vectors[0]!;
    const other = v.note.replace('20852163', '20852164');
    const r = checkCosignatures(other, [parseCosignerKey(v.vkey)]);
    expect(r.valid).toEqual([]);
    expect(r.invalid[0]?.reason).toMatch(/does not verify/);
  });

  it('ignores cosignatures by unknown keys and the log signature', async () => {
    const v = vectors[1]!;
    const logSeed = new Uint8Array(32).fill(9);
    const signed = await signNote(v.text, [signerOf('handoff-ledger.local/test', logSeed)]);
    const note = signed + v.line;
    expect(checkCosignatures(note, [parseCosignerKey(vectors[0]!.vkey)])).toEqual({ valid: [], invalid: [] });
    // The log's note verifier still opens the note: the cosignature line is an unknown key to it.
    const opened = openNote(note, [
      parseVerifierKey(encodeVerifierKey('handoff-ledger.local/test', noblePublicKey(logSeed))),
    ]);
    expect(opened.unverified.map((s) => s.name)).toEqual([v.name]);
  });

  it('never accepts a plain note key (0x01) as a witness key, nor a witness key as a note key', () => {
    const v = vectors[0]!;
    const pub = decodeBase64(v.publicKey)!;
    expect(() => parseCosignerKey(encodeVerifierKey(v.name, pub))).toThrow(
      expect.objectContaining({ code: 'KEY_INVALID' }),
    );
    expect(() => parseVerifierKey(v.vkey)).toThrow(expect.objectContaining({ code: 'KEY_INVALID' }));
  });

  it('counts a cosignature at time 0 another witness made (tlog-cosignature caps the time at 2^63 - 1 only)', () => {
    const v = vectors[0]!;
    const seed = decodeBase64(v.seed)!;
    const line = (t: bigint) => {
      const body = new Uint8Array(4 + 8 + 64);
      const view = new DataView(body.buffer);
      view.setUint32(0, cosignerKeyHash(v.name, noblePublicKey(seed)));
      view.setBigUint64(4, t);
      body.set(nobleSign(cosignedMessage(v.text, t), seed), 12);
      return `\u2014 ${v.name} ${encodeBase64(body)}\n`;
    };
    const key = parseCosignerKey(v.vkey);
    expect(checkCosignatures(`${v.text}\n${line(0n)}`, [key]).valid).toMatchObject([{ timestamp: 0 }]);
    expect(checkCosignatures(`${v.text}\n${line(2n ** 63n)}`, [key]).invalid).toMatchObject([
      { reason: expect.stringMatching(/out of range/) },
    ]);
  });

  it('refuses a zero timestamp and a text that is not a checkpoint', async () => {
    const v = vectors[0]!;
    const s = signerOf(v.name, decodeBase64(v.seed)!);
    await expect(cosignCheckpoint(v.text, s, 0)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(cosignCheckpoint('a\nb\n', s, 1)).rejects.toMatchObject({ code: 'NOTE_MALFORMED' });
  });
});
