/**
 * The canonical (RFC 8785) text of a schema-valid manifest, written member by member in JCS order rather
 * than by the generic canonicalizer: verifiers re-derive it for every manifest they check (is the payload
 * the one canonical encoding of what it says?), and the generic path's sorting, parts list and UTF-8
 * encoding cost about as much as the rest of a manifest's checks together. Equal to `canonicalize(m)` for
 * every manifest the schema accepts (property-tested). Isomorphic.
 */
import type { Manifest } from './manifest.js';

// JSON.stringify of a well-formed string is its RFC 8785 form (section 3.2.2.2); of a safe integer, too.
const str = JSON.stringify;

/**
 * Members in RFC 8785 order (UTF-16 code units): covers, createdAt, host, keyId, kind, prev, principal, run,
 * seq, session, summary (digest, mediaType, size), v; in covers, transcriptDigest before transcriptThrough.
 */
export function canonicalManifestText(m: Manifest): string {
  let covers = '';
  if (m.covers !== undefined) {
    const digest =
      m.covers.transcriptDigest === undefined ? '' : `"transcriptDigest":${str(m.covers.transcriptDigest)},`;
    covers = `"covers":{${digest}"transcriptThrough":${str(m.covers.transcriptThrough)}},`;
  }
  return (
    `{${covers}"createdAt":${str(m.createdAt)},"host":${str(m.host)},"keyId":${str(m.keyId)},` +
    `"kind":${str(m.kind)},"prev":${m.prev === null ? 'null' : str(m.prev)},"principal":${str(m.principal)},` +
    `"run":${str(m.run)},"seq":${str(m.seq)},"session":${str(m.session)},` +
    `"summary":{"digest":${str(m.summary.digest)},"mediaType":${str(m.summary.mediaType)},"size":${str(m.summary.size)}},` +
    `"v":${str(m.v)}}`
  );
}
