/**
 * Verdicts of `verifyManifestEnvelope` on exact envelope texts. A ledger's resume checks the head and
 * the entry before it on every call, and the same stored bytes give the same verdict as long as the
 * trust store and the signature backend are the same objects: the verdict is a pure function of the
 * three. Only successes are kept (a refusal is rare and cheap to repeat); a hit hands out a copy, so a
 * caller that changes the manifest it got cannot change what the next reader is told. `rememberSigned` adds
 * the caller's word for one signature it made itself (the ledger's own appends): the class is internal, not
 * exported by the package, for that word is trusted. Isomorphic.
 */
import type { TrustStore } from '../format/trust.js';
import { encodeBase64 } from '../encoding/base64.js';
import { nobleVerifier, type SignatureVerifier } from './ed25519.js';
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

/** What `rememberSigned` keeps of an envelope this process signed: its signature, and the key it is valid under. */
interface OwnSignature {
  sig: string;
  publicKey: Uint8Array;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * `verifier`, except that the one signature `own` names, under the key it names, is valid without the curve
 * arithmetic: the envelope text it is asked of is the very text that signature was made for (see `rememberSigned`).
 */
function trustingOwn(own: OwnSignature, verifier: SignatureVerifier): SignatureVerifier {
  return {
    name: verifier.name,
    verify: (signature, message, publicKey) =>
      (sameBytes(publicKey, own.publicKey) && encodeBase64(signature) === own.sig) ||
      verifier.verify(signature, message, publicKey),
  };
}

export class VerifiedManifestCache {
  private readonly verdicts = new Map<string, VerifiedManifest>();
  /** Envelopes this process signed and stored, not verified here yet (`rememberSigned`), most recent last. */
  private readonly own = new Map<string, OwnSignature>();
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
    const own = this.own.get(envelope);
    if (own) this.own.delete(envelope);
    const verified = verifyEnvelopeWith(
      envelope,
      own ? { ...options, verifier: trustingOwn(own, options.verifier ?? nobleVerifier) } : options,
    );
    this.verdicts.set(envelope, verified);
    if (this.verdicts.size > this.capacity) this.verdicts.delete(this.verdicts.keys().next().value!);
    return copyOf(verified);
  }

  /**
   * Records an envelope this process has just signed and stored: `envelope` is its exact stored text, `sig` the
   * base64 signature in it, which the signer made over that text's payload and which is valid under `publicKey` (a
   * key file's signer derives its public key from its private key; an injected signer's signature was verified
   * under the trusted key before the append). A later `verify` of this very text runs every check as before (parse,
   * payload type, the trusted key for its host, keyId and time under the trust store of that call, schema, canonical
   * form, id) and takes that one signature as valid when the trusted key it is checked under is `publicKey`: the
   * Ed25519 verification, most of a manifest's verification, is not made again of a signature this process made
   * (resume's first call after a publish: benchmarks/README.md, "Resume after a publish"). Any other text, another
   * signature or another key is verified as ever. The most recent `capacity` are kept; nothing is verified here.
   */
  rememberSigned(envelope: string, sig: string, publicKey: Uint8Array): void {
    if (this.verdicts.has(envelope)) return; // verified already: its verdict answers
    this.own.delete(envelope);
    this.own.set(envelope, { sig, publicKey: publicKey.slice() });
    if (this.own.size > this.capacity) this.own.delete(this.own.keys().next().value!);
  }

  get size(): number {
    return this.verdicts.size;
  }
}
