// Run by review-attacks.test.ts in a process with a 64 MiB heap: a full bundle whose checkpoint verifies (an honest
// checkpoint of one leaf) and 1,000,000 junk lines after it. Step 9 folds the lines' leaves into the tree's frontier
// as they stream past; keeping a hash per line would need well over the heap. Prints the report's counts and the
// findings by code. Uses the built library (dist/), like the CLI tests.
import { generateKeyPairSync, sign } from 'node:crypto';
import { verifyBundle } from '../../dist/manifests/audit/verify-chain.js';
import { nodeVerifier } from '../../dist/manifests/crypto/ed25519.node.js';
import { encodeVerifierKey, signNote } from '../../dist/manifests/crypto/note.js';
import { keyIdOf } from '../../dist/manifests/format/trust.js';
import { encodeBase64 } from '../../dist/manifests/encoding/base64.js';
import { leafHash } from '../../dist/manifests/tlog/merkle.js';

const origin = 'example.com/memory';
// The public key DER-encoded as it is made (its last 32 bytes the key): a JWK export of a generated key object can
// deadlock Node (src/keys/local-signer.ts, generateJwk).
const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
  publicKeyEncoding: { format: 'der', type: 'spki' },
});
const raw = publicKey.subarray(publicKey.length - 32);
const signer = { name: origin, publicKey: raw, sign: (m) => new Uint8Array(sign(null, m, privateKey)) };
const junk = Buffer.from('{"payload":"AAAA"}\n');
const root = leafHash(Buffer.from('AAAA', 'base64')); // the tree of one such leaf
const note = await signNote(`${origin}\n1\n${encodeBase64(root)}\n`, [signer]);
const trust = {
  version: 1,
  keys: [],
  checkpointKeys: [
    {
      host: 'host-a',
      keyId: keyIdOf(raw),
      vkey: encodeVerifierKey(origin, raw),
      notBefore: '2020-01-01T00:00:00.000Z',
    },
  ],
};
const lines = 1_000_000;
const batch = Buffer.concat(Array.from({ length: 1000 }, () => junk));
const reader = {
  header: async () => undefined,
  treeFile: async (name) => (name === 'checkpoint.note' ? note : undefined),
  async *manifests() {
    for (let i = 0; i < lines / 1000; i++) yield batch;
  },
};
const report = await verifyBundle(reader, { trust, verifier: nodeVerifier, maxFindings: 1000 });
process.stdout.write(JSON.stringify({ counts: report.counts, checkpoint: report.checkpoint?.size }));
