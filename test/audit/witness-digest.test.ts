/** witnessDigest: order-free over the keys, refuses keys built by hand that are none; the signers line stays short. */
import { describe, expect, it } from 'vitest';
import { parseWitnessKeys, witnessDigest } from '../../manifests/audit/verify-witnesses.js';
import { describeSigners } from '../../manifests/audit/report-text.js';
import { encodeCosignerKey, type CosignerKey } from '../../manifests/crypto/cosignature.js';
import type { BundleAuditReport } from '../../manifests/audit/verify-chain.js';

const vkey = (name: string, fill: number) => encodeCosignerKey(name, new Uint8Array(32).fill(fill));

const code = (keys: unknown): string | undefined => {
  try {
    witnessDigest(keys as CosignerKey[]);
  } catch (err) {
    return (err as { code?: string }).code ?? `uncoded ${(err as Error).name}`;
  }
  return undefined;
};

describe('witnessDigest', () => {
  it('is the same for the keys in any order or repeated, and another for a key more, fewer or renamed', () => {
    const [a, b, c] = [vkey('w.example/a', 1), vkey('w.example/b', 2), vkey('w.example/c', 3)];
    const of = (...lines: string[]) => witnessDigest(parseWitnessKeys(lines.join('\n')));
    expect(of(a, b)).toMatch(/^blake3:[0-9a-f]{64}$/);
    expect(of(b, a)).toBe(of(a, b));
    expect(witnessDigest([...parseWitnessKeys(a), ...parseWitnessKeys(`${b}\n${a}`)])).toBe(of(a, b));
    expect(of(a, b, c)).not.toBe(of(a, b));
    expect(of(a)).not.toBe(of(a, b));
    expect(of(a, vkey('w.example/other', 2))).not.toBe(of(a, b));
    expect(witnessDigest([])).not.toBe(of(a));
  });

  it('refuses what is no list of witness keys with KEY_INVALID, never a TypeError', () => {
    const [good] = parseWitnessKeys(vkey('w.example/a', 1));
    for (const keys of [
      null,
      'keys',
      [null],
      [7],
      [{ ...good!, name: 1 }],
      [{ ...good!, keyHash: -1 }],
      [{ ...good!, keyHash: 1.5 }],
      [{ ...good!, publicKey: 'x' }],
      [{ ...good!, publicKey: new Uint8Array(33) }],
    ])
      expect(code(keys), JSON.stringify(keys)).toBe('KEY_INVALID');
    expect(code([good])).toBeUndefined();
  });
});

describe('parseWitnessKeys', () => {
  it('refuses what is not text with KEY_INVALID saying so, never a TypeError (a file read without an encoding)', () => {
    const line = vkey('w.example/a', 1);
    expect(parseWitnessKeys(`${line}\n`)).toHaveLength(1);
    // readFileSync(file) without 'utf8' gives a Buffer: it threw TypeError 'text.split is not a function'.
    for (const text of [Buffer.from(`${line}\n`), new Uint8Array(3), undefined, null, 5, [line]]) {
      let thrown: unknown;
      try {
        parseWitnessKeys(text as never);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, String(text)).toMatchObject({
        name: 'ManifestError',
        code: 'KEY_INVALID',
        message: expect.stringMatching(/^witness keys: not text/) as string,
      });
    }
  });
});

describe('describeSigners', () => {
  it('names at most three keys of each kind and says how many more', () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ host: 'h1', keyId: `ed25519:${i}`, count: i + 1 }));
    const r = { checked: { signers: { manifests: many, checkpoints: [] } } } as unknown as BundleAuditReport;
    expect(describeSigners(r)).toBe(
      'signers: 5 manifest keys (h1 ed25519:0 ×1, h1 ed25519:1 ×2, h1 ed25519:2 ×3, and 2 more), 0 checkpoint keys',
    );
  });
});
