/**
 * The v1 manifest: the signed statement that publishes one compaction (docs/DESIGN.md, "Manifest v1").
 * Isomorphic. Parsing is strict (unknown keys rejected); the id is BLAKE3 of the exact payload bytes.
 */
import { z } from 'zod';
import { isDigest, type Digest } from '../../store/hash/digest.js';
import { canonicalBytes } from '../encoding/canonical.js';
import { idSchema } from './ids.js';
import { isManifestTimestamp, KEY_ID_PATTERN, SUMMARY_MEDIA_TYPE } from './manifest-core.js';

export { MANIFEST_PAYLOAD_TYPE, SUMMARY_MEDIA_TYPE, manifestId } from './manifest-core.js';

const digestSchema = z.string().refine(isDigest, 'must be blake3:<64 lowercase hex>');
export const timestampSchema = z.string().refine(isManifestTimestamp, 'must be an ISO-8601 UTC time with milliseconds');
export const keyIdSchema = z.string().regex(KEY_ID_PATTERN, 'must be 1-256 printable ASCII characters');

/** What a compaction summarized: the transcript up to this position, optionally with its digest. */
export const coversSchema = z.strictObject({
  transcriptThrough: z.int().min(0),
  transcriptDigest: digestSchema.optional(),
});
export type Covers = { transcriptThrough: number; transcriptDigest?: Digest | undefined };

export const manifestSchema = z
  .strictObject({
    v: z.literal(1),
    kind: z.literal('compaction'),
    host: idSchema,
    principal: idSchema,
    session: idSchema,
    run: idSchema,
    seq: z.int().min(0),
    prev: digestSchema.nullable(),
    summary: z.strictObject({
      digest: digestSchema,
      size: z.int().min(0),
      mediaType: z.literal(SUMMARY_MEDIA_TYPE),
    }),
    covers: coversSchema.optional(),
    createdAt: timestampSchema,
    keyId: keyIdSchema,
  })
  .refine((m) => (m.seq === 0) === (m.prev === null), {
    message: 'prev must be null exactly when seq is 0',
    path: ['prev'],
  });

export type Manifest = z.infer<typeof manifestSchema> & { prev: Digest | null };

/**
 * The canonical payload bytes of a manifest (what is signed and hashed). It checks no schema (`verifyManifestEnvelope`
 * does). @throws TypeError as `canonicalBytes`, for a value RFC 8785 cannot encode
 */
export function encodeManifest(manifest: Manifest): Uint8Array {
  return canonicalBytes(manifest);
}
