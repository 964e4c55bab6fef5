/**
 * The signed-note key hash is remembered for the last key it was computed for (a ledger signs every checkpoint note with
 * one key): hashed once for repeated notes of that key, and afresh for any other key, name or kind, or for a key whose
 * bytes changed in place after the call.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';

const calls = vi.hoisted(() => ({ n: 0 }));
vi.mock('../../manifests/crypto/sha256.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../manifests/crypto/sha256.js')>();
  return {
    ...real,
    sha256: (data: Uint8Array) => {
      calls.n++;
      return real.sha256(data);
    },
  };
});

const { noteKeyHash, signNote, encodeVerifierKey, parseVerifierKey, openNote, isValidKeyName } =
  await import('../../manifests/crypto/note.js');
const { cosignerKeyHash } = await import('../../manifests/crypto/cosignature.js');
const { sha256Portable } = await import('../../manifests/crypto/sha256.js');
const { nobleSign, noblePublicKey } = await import('../../manifests/crypto/ed25519.js');

/** The key hash computed independently: SHA-256(name ‖ "\n" ‖ alg ‖ key)[0:4], big-endian. */
function reference(alg: number, name: string, key: Uint8Array): number {
  const h = sha256Portable(new Uint8Array([...new TextEncoder().encode(name), 0x0a, alg, ...key]));
  return new DataView(h.buffer, h.byteOffset).getUint32(0);
}

const seedA = new Uint8Array(32).fill(1);
const seedB = new Uint8Array(32).fill(2);
const signerOf = (name: string, seed: Uint8Array) => ({
  name,
  publicKey: noblePublicKey(seed),
  sign: (m: Uint8Array) => nobleSign(m, seed),
});

describe('note key hash memo', () => {
  beforeEach(() => {
    calls.n = 0;
  });

  it('hashes a signer name and key once for repeated notes, and gives the same signed notes', async () => {
    const signer = signerOf('example.com/log', seedA);
    const first = await signNote('origin\n1\n\n', [signer]);
    const before = calls.n;
    const again = await signNote('origin\n2\n\n', [signer]);
    expect(calls.n).toBe(before);
    const vkey = parseVerifierKey(encodeVerifierKey(signer.name, signer.publicKey));
    expect(vkey.keyHash).toBe(reference(0x01, signer.name, signer.publicKey));
    expect(openNote(first, [vkey]).sigs).toHaveLength(1);
    expect(openNote(again, [vkey]).sigs).toHaveLength(1);
  });

  it('hashes a rotated key, another name and another kind afresh, and a key changed in place after the call', () => {
    const a = noblePublicKey(seedA);
    const b = noblePublicKey(seedB);
    expect(noteKeyHash('log', a)).toBe(reference(0x01, 'log', a));
    // A rotation: the same name, another key.
    expect(noteKeyHash('log', b)).toBe(reference(0x01, 'log', b));
    expect(noteKeyHash('log', a)).toBe(reference(0x01, 'log', a));
    expect(noteKeyHash('other', a)).toBe(reference(0x01, 'other', a));
    expect(cosignerKeyHash('other', a)).toBe(reference(0x04, 'other', a));
    expect(noteKeyHash('other', a)).toBe(reference(0x01, 'other', a));
    // The caller's array changed in place after it was hashed: its new bytes are hashed.
    const key = Uint8Array.from(a);
    expect(noteKeyHash('log', key)).toBe(reference(0x01, 'log', a));
    key[0]! ^= 1;
    expect(noteKeyHash('log', key)).toBe(reference(0x01, 'log', key));
    expect(noteKeyHash('log', key.subarray(0, 31))).toBe(reference(0x01, 'log', key.subarray(0, 31)));
  });

  it('remembers short valid key names only: a repeated one is not matched again, an invalid or long one always is', () => {
    const test = vi.spyOn(RegExp.prototype, 'test');
    try {
      const name = `memo-${Math.random()}.example/log`;
      expect(isValidKeyName(name)).toBe(true);
      const after = test.mock.calls.length;
      expect(after).toBeGreaterThan(0);
      expect(isValidKeyName(name)).toBe(true);
      expect(test.mock.calls.length).toBe(after);
      for (const bad of ['', 'a b', 'a+b', 'a\u0001b', '\ud800x', 'x\u2028']) {
        const before = test.mock.calls.length;
        expect(isValidKeyName(bad), JSON.stringify(bad)).toBe(false);
        expect(isValidKeyName(bad), JSON.stringify(bad)).toBe(false);
        if (bad !== '') expect(test.mock.calls.length).toBeGreaterThan(before);
      }
      const long = 'l'.repeat(257);
      expect(isValidKeyName(long)).toBe(true);
      const before = test.mock.calls.length;
      expect(isValidKeyName(long)).toBe(true);
      expect(test.mock.calls.length).toBeGreaterThan(before);
      // Non-strings, as a hostile caller might pass: never valid.
      for (const odd of [undefined, null, 1, {}]) expect(isValidKeyName(odd as unknown as string)).toBe(false);
    } finally {
      test.mockRestore();
    }
  });
});
