/**
 * Steps 1-5 with WebCrypto's Ed25519 (browsers, Deno, Node ≥ 20): `crypto.subtle.verify` is
 * asynchronous and runs off the calling thread, while `verifyManifestEnvelope` wants a synchronous
 * answer. So each batch runs the checklist once as if each line's signature were valid, recording the
 * check it asks for; WebCrypto answers all of them concurrently; lines whose checks all hold keep that
 * outcome, and only the others are run again, recording every candidate signature and replaying the
 * checklist with WebCrypto's answers (`webCryptoLineVerifier`). Isomorphic.
 *
 * Strictness: WebCrypto implementations differ on RFC 8032 edge cases; this verifier rejects S ≥ L,
 * non-canonical points and small-order public keys itself before asking WebCrypto, and the shared Wycheproof suite
 * (test/audit/verify-webcrypto.test.ts, and the browser test) holds it to the noble verifier's answers.
 */
import { isSmallOrderKey, pointIsCanonical, type SignatureVerifier } from '../crypto/ed25519.js';

export { pointIsCanonical };
import {
  checkLineTrust,
  verifyLineText,
  type LineOutcome,
  type LineVerifier,
  type LineVerifyContext,
} from './verify-line.js';

/** The group order L, little-endian, for the S < L check. */
const L = [
  0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

/** True iff the 32 little-endian bytes at `offset` are a number below L (a canonical scalar S). */
export function scalarIsCanonical(bytes: Uint8Array, offset: number): boolean {
  for (let i = 31; i >= 0; i--) {
    const b = bytes[offset + i]!;
    if (b !== L[i]) return b < L[i]!;
  }
  return false;
}

/** The two SubtleCrypto methods used (declared here: the isomorphic layers compile without the DOM library). */
export interface Subtle {
  importKey(
    format: 'raw',
    key: Uint8Array,
    algorithm: { name: 'Ed25519' },
    extractable: false,
    usages: ['verify'],
  ): Promise<unknown>;
  verify(algorithm: { name: 'Ed25519' }, key: unknown, signature: Uint8Array, data: Uint8Array): Promise<boolean>;
}

/** The platform's SubtleCrypto, or undefined where there is none (non-secure contexts). */
function platformSubtle(): Subtle | undefined {
  return (globalThis as { crypto?: { subtle?: Subtle } }).crypto?.subtle;
}

/**
 * An asynchronous strict Ed25519 check over WebCrypto; public keys are imported once each.
 * Resolves false (never rejects) for anything but a valid signature.
 */
export function webCryptoEd25519(
  subtle: Subtle,
): (sig: Uint8Array, msg: Uint8Array, pk: Uint8Array) => Promise<boolean> {
  const keys = new Map<string, Promise<unknown>>();
  // Consecutive lines are mostly signed by one key: the last one is found by comparing 32 bytes.
  let last: { pk: Uint8Array; key: Promise<unknown> } | undefined;
  const keyOf = (pk: Uint8Array) => {
    if (last && last.pk.every((b, i) => b === pk[i])) return last.key;
    const k = String.fromCharCode(...pk);
    let key = keys.get(k);
    if (!key) {
      key = subtle.importKey('raw', pk.slice(), { name: 'Ed25519' }, false, ['verify']);
      keys.set(k, key);
    }
    last = { pk: pk.slice(), key };
    return key;
  };
  return async (sig, msg, pk) => {
    if (sig.length !== 64 || pk.length !== 32) return false;
    if (!scalarIsCanonical(sig, 32) || !pointIsCanonical(pk) || !pointIsCanonical(sig.subarray(0, 32))) return false;
    // Refused by every backend; WebCrypto implementations accept them (BoringSSL does).
    if (isSmallOrderKey(pk)) return false;
    try {
      // WebCrypto copies the bytes it is given when called: no copy of ours is needed.
      return await subtle.verify({ name: 'Ed25519' }, await keyOf(pk), sig, msg);
    } catch {
      return false;
    }
  };
}

/**
 * Resolves to a WebCrypto-backed line verifier when the platform verifies Ed25519 correctly (checked
 * on RFC 8032 test 2), else to undefined so the caller keeps the portable in-thread verifier.
 * @throws AuditError `USAGE` for a trust that is no trust store (it made every valid manifest a finding that it does not
 *   verify)
 */
export async function createWebCryptoLineVerifier(
  trust: LineVerifyContext['trust'],
  subtle: Subtle | undefined = platformSubtle(),
): Promise<LineVerifier | undefined> {
  checkLineTrust(trust, 'createWebCryptoLineVerifier');
  if (!subtle) return undefined;
  const check = webCryptoEd25519(subtle);
  const hex = (s: string) => Uint8Array.from(s.match(/../g)!.map((b) => parseInt(b, 16)));
  const pk = hex('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c');
  const sig = hex(
    '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  );
  const bad = sig.slice();
  bad[5]! ^= 1;
  const works = (await check(sig, Uint8Array.of(0x72), pk).catch(() => false)) === true;
  if (!works || (await check(bad, Uint8Array.of(0x72), pk))) return undefined;
  return webCryptoLineVerifier(trust, check);
}

/**
 * The batch verifier over an asynchronous signature check. A first pass runs each line's checklist as if
 * its first signature check succeeded, recording that check; WebCrypto answers all of them concurrently.
 * A line whose recorded checks were all answered valid keeps its first-pass outcome: a replay with the
 * answers would take the same path through the same calls. Only the others (a failed check, where the
 * checklist would try further signatures or stop at SIGNATURE_INVALID) are run again as before: every
 * candidate signature recorded as invalid, answered, and the checklist replayed with those answers, which
 * alone decide their outcome. A valid bundle is therefore parsed once, not twice.
 */
export function webCryptoLineVerifier(
  trust: LineVerifyContext['trust'],
  check: (sig: Uint8Array, msg: Uint8Array, pk: Uint8Array) => Promise<boolean>,
): LineVerifier {
  return {
    // Two batches in flight: one is parsed while WebCrypto works through the other.
    concurrency: 2,
    async verifyLines(batch): Promise<LineOutcome[]> {
      // The first pass: each line's checks so far (one, unless a line asks again after a valid answer).
      let checks: Array<Promise<boolean>> = [];
      const optimist: SignatureVerifier = {
        name: 'webcrypto-first',
        verify(signature, message, publicKey) {
          checks.push(check(signature, message, publicKey));
          return true;
        },
      };
      const first = batch.map((l) => {
        checks = [];
        const outcome = verifyLineText(l.line, l.text, { trust, verifier: optimist });
        return { outcome, checks: checks.length === 0 ? undefined : Promise.all(checks) };
      });
      const valid = await Promise.all(first.map((f) => f.checks?.then((answers) => answers.every((a) => a))));
      const again: number[] = [];
      for (let i = 0; i < batch.length; i++) if (valid[i] === false) again.push(i);
      if (again.length === 0) return first.map((f) => f.outcome);
      const replayed = await replayLines(
        again.map((i) => batch[i]!),
        trust,
        check,
      );
      const outcomes = first.map((f) => f.outcome);
      again.forEach((i, k) => (outcomes[i] = replayed[k]!));
      return outcomes;
    },
    async close() {},
  };
}

/**
 * Record every signature check the checklist asks for (answering "invalid", so it asks for each
 * candidate), have WebCrypto answer them, and replay the checklist with those answers.
 */
async function replayLines(
  batch: Array<{ line: number; text: string }>,
  trust: LineVerifyContext['trust'],
  check: (sig: Uint8Array, msg: Uint8Array, pk: Uint8Array) => Promise<boolean>,
): Promise<LineOutcome[]> {
  // Keyed by line and call number: an envelope may carry several signatures under the trusted key id.
  const asked = new Map<string, Promise<boolean>>();
  let current = 0;
  let call = 0;
  const recorder: SignatureVerifier = {
    name: 'webcrypto-record',
    verify(signature, message, publicKey) {
      asked.set(`${current}:${call++}`, check(signature, message, publicKey));
      // "Invalid" makes the checklist ask for every candidate signature, as the replay may need each.
      return false;
    },
  };
  for (const l of batch) {
    [current, call] = [l.line, 0];
    verifyLineText(l.line, l.text, { trust, verifier: recorder });
  }
  const answers = new Map<string, boolean>();
  await Promise.all([...asked].map(async ([k, answer]) => answers.set(k, await answer)));
  const replay: SignatureVerifier = {
    name: 'webcrypto',
    verify: () => answers.get(`${current}:${call++}`) === true,
  };
  return batch.map((l) => {
    [current, call] = [l.line, 0];
    return verifyLineText(l.line, l.text, { trust, verifier: replay });
  });
}
