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
  it("takes the file's bytes as its text: a Buffer, an ArrayBuffer (fetch's arrayBuffer()), any ArrayBufferView", () => {
    const text = `# pinned\n${vkey('w.example/a', 1)}\r\n${vkey('w.example/b', 2)}\n`;
    const expected = parseWitnessKeys(text);
    expect(expected).toHaveLength(2);
    const utf8 = new TextEncoder().encode(text);
    // A view that does not start at its buffer's start (a pooled Buffer's, a subarray) is read from its own offset.
    const padded = new Uint8Array(utf8.length + 8).fill(0x41);
    padded.set(utf8, 5);
    const inside = padded.subarray(5, 5 + utf8.length);
    for (const [what, bytes] of [
      ['Buffer', Buffer.from(text)],
      ['Uint8Array', utf8],
      ['ArrayBuffer', utf8.slice().buffer],
      ['subarray', inside],
      ['DataView', new DataView(padded.buffer, 5, utf8.length)],
    ] as const)
      expect(parseWitnessKeys(bytes), what).toEqual(expected);
  });

  it('refuses what is neither text nor bytes with KEY_INVALID saying so, never a TypeError; reads bytes as the CLI reads the file', () => {
    const line = vkey('w.example/a', 1);
    // A number, a list of lines: it threw TypeError 'text.split is not a function'.
    for (const text of [undefined, null, 5, [line], { text: line }]) {
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
    // As `verify --witness-keys` reads the file (readFileSync(file, 'utf8')): a byte that is not UTF-8 is U+FFFD, so a
    // comment holding one is a comment, and a key line holding one is refused naming its line, by either.
    const comment = Buffer.concat([Buffer.from('# caf'), Buffer.from([0xe9]), Buffer.from(`\n${line}\n`)]);
    expect(parseWitnessKeys(comment)).toEqual(parseWitnessKeys(comment.toString('utf8')));
    expect(parseWitnessKeys(comment)).toHaveLength(1);
    for (const bytes of [new Uint8Array([0xff, 0x0a]), new Uint8Array([0xc3]).buffer])
      expect(() => parseWitnessKeys(bytes)).toThrow(
        expect.objectContaining({
          code: 'KEY_INVALID',
          message: expect.stringMatching(/^witness keys line 1: /) as string,
        }),
      );
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
