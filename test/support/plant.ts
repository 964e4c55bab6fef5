/**
 * Plants a manifest in an embedded ledger's log behind its back, signed by a key of the caller's (the host's own,
 * to test what resume checks beyond the signature): it becomes the head of alice's session sess-1.
 */
import type { Ledger } from '../../src/ledger/ledger.js';
import type { LevelManifestLog } from '../../manifests/log/level/log.js';
import type { Digest } from '../../store/hash/digest.js';
import { serializeEnvelope, signEnvelope } from '../../manifests/crypto/envelope.js';
import { encodeManifest, manifestId, MANIFEST_PAYLOAD_TYPE, type Manifest } from '../../manifests/format/manifest.js';
import type { LocalSigner } from '../../src/keys/local-signer.js';

export const SUMMARY_MEDIA_TYPE = 'application/vnd.handoff-ledger.summary.v1+json' as const;
export const entryKey = (session: string, seq: number) => `e!${session}!${seq.toString(16).padStart(12, '0')}`;

/** Writes the manifest at `seq` of sess-1 (its payload bytes optionally rewritten after encoding) and makes it the head. */
export async function plantHead(
  ledger: Ledger,
  signer: LocalSigner,
  m: {
    seq: number;
    prev: Digest | null;
    summary: Manifest['summary'];
    rewrite?: (payload: Uint8Array) => Uint8Array;
  },
): Promise<void> {
  const forged: Manifest = {
    v: 1,
    kind: 'compaction',
    host: 'host-a',
    principal: 'alice',
    session: 'sess-1',
    run: 'run-x',
    seq: m.seq,
    prev: m.prev,
    summary: m.summary,
    createdAt: new Date().toISOString(),
    keyId: signer.keyId,
  } as Manifest;
  const payload = (m.rewrite ?? ((p) => p))(encodeManifest(forged));
  const envelope = serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, signer));
  const id = manifestId(payload);
  const db = (ledger.log as LevelManifestLog).raw;
  const record = { position: m.seq, session: 'sess-1', seq: m.seq, id, principal: 'alice', envelope };
  await db.put(entryKey('sess-1', m.seq), JSON.stringify(record));
  await db.put('h!sess-1', JSON.stringify({ session: 'sess-1', seq: m.seq, id, owner: 'alice' }));
}
