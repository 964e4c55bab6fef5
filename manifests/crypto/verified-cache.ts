/**
 * Verdicts of `verifyManifestEnvelope` on exact envelope texts. A ledger's resume checks the head and
 * the entry before it on every call, and the same stored bytes give the same verdict as long as the
 * trust store and the signature backend are the same objects: the verdict is a pure function of the
 * three. Only successes are kept (a refusal is rare and cheap to repeat); a hit hands out a copy, so a
 * caller that changes the manifest it got cannot change what the next reader is told. Isomorphic.
 */
import type { TrustStore } from '../format/trust.js';
import type { SignatureVerifier } from './ed25519.js';
import { verifyEnvelopeWith, type VerifiedManifest, type VerifyManifestOptions } from './verify-manifest.js';

function copyOf(v: VerifiedManifest): VerifiedManifest {
  const m = v.manifest;
  return {
    id: v.id,
    manifest: {
      ...m,
      summary: { ...m.summary },
      ...(m.covers === undefined ? {} : { covers: { ...m.covers } }),
    },
    envelope: { ...v.envelope, signatures: v.envelope.signatures.map((s) => ({ ...s })) },
    payload: v.payload.slice(),
  };
}

export class VerifiedManifestCache {
  private readonly verdicts = new Map<string, VerifiedManifest>();
  private trust: TrustStore | undefined;
  private verifier: SignatureVerifier | undefined;

  /** @param capacity envelopes kept, least recently used dropped first */
  constructor(private readonly capacity = 1024) {}

  /**
   * `verifyManifestEnvelope(envelope, options)`, from the cache when this very text was verified under
   * this very trust store and verifier. @throws ManifestError as `verifyManifestEnvelope`
   */
  verify(envelope: string, options: VerifyManifestOptions): VerifiedManifest {
    if (options.trust !== this.trust || options.verifier !== this.verifier) {
      // Another trust store (a rotation or revocation made a new one): no earlier verdict carries over.
      this.verdicts.clear();
      this.trust = options.trust;
      this.verifier = options.verifier;
    }
    const known = this.verdicts.get(envelope);
    if (known) {
      this.verdicts.delete(envelope);
      this.verdicts.set(envelope, known);
      return copyOf(known);
    }
    const verified = verifyEnvelopeWith(envelope, options);
    this.verdicts.set(envelope, verified);
    if (this.verdicts.size > this.capacity) this.verdicts.delete(this.verdicts.keys().next().value!);
    return copyOf(verified);
  }

  get size(): number {
    return this.verdicts.size;
  }
}
