// Run by review-attacks.test.ts in a process with a 64 MiB heap: verifies ~180 MiB of valid lines padded with
// whitespace and 50,000 plain duplicates, streamed from memory (one buffer per kind, reused), and prints the
// report's counts. Uses the built library (dist/), like the CLI tests.
import { generateKeyPairSync } from 'node:crypto';
import { verifyBundle } from '../../dist/manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../dist/manifests/crypto/ed25519.node.js';
import { signEnvelope, serializeEnvelope } from '../../dist/manifests/crypto/envelope.js';
import { encodeManifest, MANIFEST_PAYLOAD_TYPE, SUMMARY_MEDIA_TYPE } from '../../dist/manifests/format/manifest.js';
import { keyIdOf } from '../../dist/manifests/format/trust.js';
import { encodeBase64Url } from '../../dist/manifests/encoding/base64.js';
import { sign } from 'node:crypto';

// The public key DER-encoded as it is made (its last 32 bytes the key): a JWK export of a generated key object can
// deadlock Node (src/keys/local-signer.ts, generateJwk).
const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
  publicKeyEncoding: { format: 'der', type: 'spki' },
});
const raw = publicKey.subarray(publicKey.length - 32);
const keyId = keyIdOf(raw);
const signer = { keyId, publicKey: raw, sign: (m) => new Uint8Array(sign(null, m, privateKey)) };
const manifest = {
  v: 1,
  kind: 'compaction',
  host: 'host-a',
  principal: 'alice',
  session: 's1',
  run: 'r',
  seq: 0,
  prev: null,
  summary: { digest: `blake3:${'ab'.repeat(32)}`, size: 10, mediaType: SUMMARY_MEDIA_TYPE },
  createdAt: '2026-01-01T00:00:00.000Z',
  keyId,
};
const line = serializeEnvelope(await signEnvelope(MANIFEST_PAYLOAD_TYPE, encodeManifest(manifest), signer));
const padded = Buffer.from(`${' '.repeat(60_000)}${line}\n`);
const plain = Buffer.from(`${line}\n`);
const trust = {
  version: 1,
  keys: [{ host: 'host-a', keyId, publicKey: encodeBase64Url(raw), notBefore: '2020-01-01T00:00:00.000Z' }],
};
const reader = {
  header: async () => undefined,
  async *manifests() {
    yield plain;
    for (let i = 0; i < 3_000; i++) yield padded; // ~180 MiB
    for (let i = 0; i < 50_000; i++) yield plain;
  },
};
const report = await verifyBundle(reader, { trust, verifier: nodeVerifier, maxFindings: 1000 });
process.stdout.write(JSON.stringify({ counts: report.counts }));
