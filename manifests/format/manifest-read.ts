/**
 * The verifiers' fast path for a manifest payload: one anchored pattern that matches exactly the canonical
 * (RFC 8785) text of a schema-valid manifest, as every writer makes it, and reads its members out of it.
 * Verifying a manifest otherwise parses the payload with JSON.parse, runs the zod schema on the value and
 * re-derives the canonical text to compare; for a well-formed payload those three steps cost about as much
 * as the rest of the per-manifest work around the signature check, and allocate most of its garbage.
 *
 * Contract (differential- and property-tested against JSON.parse + `manifestSchema` + `canonicalManifestText`):
 * when `readCanonicalManifest` returns a manifest, the slow path accepts the same text and yields an equal
 * manifest (same members, same order); when it returns `undefined`, the caller runs the slow path, which
 * decides what is wrong (or that the payload is valid after all, e.g. a keyId with a `"` that JSON escapes).
 * It never refuses on its own, so no finding's code or wording depends on it. Isomorphic.
 */
import type { Digest } from '../../store/hash/digest.js';
import type { Manifest } from './manifest.js';
import { SUMMARY_MEDIA_TYPE } from './manifest-core.js';

const ID = '([A-Za-z0-9][A-Za-z0-9._:@-]{0,127})';
const DIGEST = '(blake3:[0-9a-f]{64})';
/** A safe non-negative integer in canonical form has at most 16 digits; the value is checked after. */
const INT = '(0|[1-9][0-9]{0,15})';
/** keyIdSchema's printable ASCII, less `"` and `\`, which the canonical text escapes (left to the slow path). */
const KEY_ID = '([\\x21\\x23-\\x5b\\x5d-\\x7e]{1,256})';
const TIMESTAMP = '([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z)';
const MEDIA_TYPE = SUMMARY_MEDIA_TYPE.replace(/[.+]/g, '\\$&');

// Members in RFC 8785 order, as canonicalManifestText writes them.
const CANONICAL_MANIFEST = new RegExp(
  '^\\{' +
    `(?:"covers":\\{(?:"transcriptDigest":"${DIGEST}",)?"transcriptThrough":${INT}\\},)?` +
    `"createdAt":"${TIMESTAMP}","host":"${ID}","keyId":"${KEY_ID}","kind":"compaction",` +
    `"prev":(?:null|"${DIGEST}"),"principal":"${ID}","run":"${ID}","seq":${INT},"session":"${ID}",` +
    `"summary":\\{"digest":"${DIGEST}","mediaType":"${MEDIA_TYPE}","size":${INT}\\},"v":1\\}$`,
);

function safeInt(digits: string): number | undefined {
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * The manifest whose canonical text `text` is, when it is one the schema accepts; `undefined` for anything
 * else (which the caller then checks the slow way). Members come out in the schema's order, as zod's output.
 */
export function readCanonicalManifest(text: string): Manifest | undefined {
  const m = CANONICAL_MANIFEST.exec(text);
  if (m === null) return undefined;
  const [, coversDigest, coversThrough, createdAt, host, keyId, prev, principal, run, seqText, session] = m;
  const [digest, sizeText] = [m[11]!, m[12]!];
  const seq = safeInt(seqText!);
  const size = safeInt(sizeText);
  if (seq === undefined || size === undefined) return undefined;
  // timestampSchema: the shape above, and a real instant that prints back the same.
  const instant = Date.parse(createdAt!);
  if (Number.isNaN(instant) || new Date(instant).toISOString() !== createdAt) return undefined;
  // The schema's refinement: prev is null exactly when seq is 0.
  if ((seq === 0) !== (prev === undefined)) return undefined;
  let covers: Manifest['covers'];
  if (coversThrough !== undefined) {
    const through = safeInt(coversThrough);
    if (through === undefined) return undefined;
    covers =
      coversDigest === undefined
        ? { transcriptThrough: through }
        : { transcriptThrough: through, transcriptDigest: coversDigest as Digest };
  }
  return {
    v: 1,
    kind: 'compaction',
    host: host!,
    principal: principal!,
    session: session!,
    run: run!,
    seq,
    prev: prev === undefined ? null : (prev as Digest),
    summary: { digest: digest as Digest, size, mediaType: SUMMARY_MEDIA_TYPE },
    // zod's output order puts covers between summary and createdAt.
    ...(covers === undefined ? {} : { covers }),
    createdAt: createdAt!,
    keyId: keyId!,
  };
}
