/**
 * Builds valid bundles for the audit tests without a ledger: manifests are encoded with the library's
 * own encoder, signed into DSSE envelopes, and laid out in global order (chains interleaved).
 * Signing uses node:crypto (fast) with keys derived from fixed seeds, so every run builds the same keys.
 */
import { createPrivateKey, sign as nodeSign, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import { encodeBase64Url } from '../../manifests/encoding/base64.js';
import { canonicalBytes } from '../../manifests/encoding/canonical.js';
import { noblePublicKey } from '../../manifests/crypto/ed25519.js';
import { serializeEnvelope, signEnvelope, type Envelope, type Signer } from '../../manifests/crypto/envelope.js';
import {
  manifestId,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Manifest,
} from '../../manifests/format/manifest.js';
import { keyIdOf, type TrustedKey, type TrustStore } from '../../manifests/format/trust.js';
import {
  BUNDLE_FORMAT,
  bundleBlobPath,
  memoryBundleReader,
  serializeBundleHeader,
  type BundleHeader,
  type BundleReader,
} from '../../manifests/audit/bundle.js';

export const T0 = Date.parse('2026-01-01T00:00:00.000Z');
export const at = (secondsAfterT0: number) => new Date(T0 + secondsAfterT0 * 1000).toISOString();

export interface TestKey {
  host: string;
  keyId: string;
  publicKey: Uint8Array;
  signer: Signer;
  /** Its trust-store entry (valid from long before T0, no expiry) — tests adjust it. */
  trusted: TrustedKey;
}

/** A deterministic Ed25519 key for `host`; `n` picks the seed. */
export function makeKey(host: string, n = 1): TestKey {
  const seed = new Uint8Array(32).fill(n & 0xff);
  seed[0] = (n >> 8) & 0xff;
  const publicKey = noblePublicKey(seed);
  const keyId = keyIdOf(publicKey);
  const key: KeyObject = createPrivateKey({
    key: { kty: 'OKP', crv: 'Ed25519', d: encodeBase64Url(seed), x: encodeBase64Url(publicKey) },
    format: 'jwk',
  });
  return {
    host,
    keyId,
    publicKey,
    signer: { keyId, publicKey, sign: (msg) => new Uint8Array(nodeSign(null, msg, key)) },
    trusted: { host, keyId, publicKey: encodeBase64Url(publicKey), notBefore: '2020-01-01T00:00:00.000Z' },
  };
}

export function trustOf(...entries: TrustedKey[]): TrustStore {
  return { version: 1, keys: entries };
}

export interface Signed {
  payload: Uint8Array;
  id: Digest;
  envelope: Envelope;
  /** The envelope as one line of manifests.jsonl (no newline). */
  line: string;
}

/** Signs any payload value (valid manifest or not) exactly as publish would. */
export async function signPayload(value: unknown, key: TestKey, payloadType = MANIFEST_PAYLOAD_TYPE): Promise<Signed> {
  const payload = canonicalBytes(value);
  const envelope = await signEnvelope(payloadType, payload, key.signer);
  return { payload, id: manifestId(payload), envelope, line: serializeEnvelope(envelope) };
}

export interface BuiltManifest extends Signed {
  manifest: Manifest;
  blob: Uint8Array;
}

/** A valid summary's canonical bytes, distinct per (session, seq). */
export function summaryBytes(session: string, seq: number): Uint8Array {
  return canonicalBytes({ task: `task of ${session}`, state: `state ${seq}`, nextSteps: [`step ${seq + 1}`] });
}

/** Extends one session's chain: seq, prev and createdAt follow from the previous manifest. */
export class ChainBuilder {
  readonly built: BuiltManifest[] = [];
  constructor(
    readonly key: TestKey,
    readonly scope: { principal: string; session: string; run?: string },
  ) {}

  /** Appends the next manifest; `signWith` signs it with another key (its keyId goes into the manifest). */
  async next(
    overrides: Partial<Manifest> = {},
    o: { blob?: Uint8Array; signWith?: TestKey } = {},
  ): Promise<BuiltManifest> {
    const seq = this.built.length;
    const key = o.signWith ?? this.key;
    const bytes = o.blob ?? summaryBytes(this.scope.session, seq);
    const manifest: Manifest = {
      v: 1,
      kind: 'compaction',
      host: this.key.host,
      principal: this.scope.principal,
      session: this.scope.session,
      run: this.scope.run ?? 'run-1',
      seq,
      prev: this.built.at(-1)?.id ?? null,
      summary: { digest: digestOf(bytes), size: bytes.length, mediaType: SUMMARY_MEDIA_TYPE },
      createdAt: at(seq),
      keyId: key.keyId,
      ...overrides,
    };
    const signed = await signPayload(manifest, key);
    const out = { ...signed, manifest, blob: bytes };
    this.built.push(out);
    return out;
  }
}

export interface TestBundle {
  key: TestKey;
  trust: TrustStore;
  /** Every manifest in global order. */
  manifests: BuiltManifest[];
  lines: string[];
  blobs: Map<string, Uint8Array>;
  chains: Map<string, ChainBuilder>;
}

/** Builds `chains` (each `count` manifests), interleaved round-robin as concurrent sessions would be. */
export async function buildBundle(spec: {
  chains: Array<{ session: string; principal?: string; count: number }>;
  key?: TestKey;
}): Promise<TestBundle> {
  const key = spec.key ?? makeKey('host-a');
  const builders = spec.chains.map(
    (c) => new ChainBuilder(key, { session: c.session, principal: c.principal ?? 'alice' }),
  );
  const manifests: BuiltManifest[] = [];
  const longest = Math.max(...spec.chains.map((c) => c.count));
  for (let i = 0; i < longest; i++) {
    for (let c = 0; c < builders.length; c++) if (i < spec.chains[c]!.count) manifests.push(await builders[c]!.next());
  }
  return {
    key,
    trust: trustOf(key.trusted),
    manifests,
    lines: manifests.map((m) => m.line),
    blobs: new Map(manifests.map((m) => [m.manifest.summary.digest, m.blob])),
    chains: new Map(builders.map((b) => [b.scope.session, b])),
  };
}

export interface LayoutOptions {
  /** Header manifest count; default: the number of lines (an attacker rewrites the unsigned header too). */
  count?: number;
  /** Header chain and blob counts; default: the sessions the lines name, and the blobs given. */
  chainCount?: number;
  blobCount?: number;
  filters?: BundleHeader['filters'];
  blobs?: Map<string, Uint8Array>;
  /** Raw file text; default: every line plus `\n`. */
  text?: string;
  host?: string;
}

function sessionOf(line: string): string | undefined {
  try {
    const payload = JSON.parse(line).payload as string;
    return JSON.parse(Buffer.from(payload, 'base64').toString('utf8')).session;
  } catch {
    return undefined;
  }
}

export function headerFor(lines: string[], o: LayoutOptions = {}): BundleHeader {
  const sessions = new Set(lines.map(sessionOf).filter((s) => s !== undefined));
  return {
    format: BUNDLE_FORMAT,
    version: 1,
    exportedAt: at(100_000),
    host: o.host ?? 'host-a',
    counts: {
      manifests: o.count ?? lines.length,
      chains: o.chainCount ?? sessions.size,
      ...(o.blobs ? { blobs: o.blobCount ?? o.blobs.size } : {}),
    },
    filters: o.filters ?? {},
  };
}

export function jsonl(lines: string[]): string {
  return lines.map((l) => `${l}\n`).join('');
}

/** An in-memory reader over (possibly mutated) lines. */
export function readerOf(lines: string[], o: LayoutOptions = {}): BundleReader {
  return memoryBundleReader({
    header: serializeBundleHeader(headerFor(lines, o)),
    manifests: o.text ?? jsonl(lines),
    ...(o.blobs ? { blobs: o.blobs } : {}),
  });
}

/** Writes a bundle directory as `export` would lay it out. */
export async function writeBundleDir(dir: string, lines: string[], o: LayoutOptions = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'bundle.json'), serializeBundleHeader(headerFor(lines, o)));
  await writeFile(join(dir, 'manifests.jsonl'), o.text ?? jsonl(lines));
  if (o.blobs) {
    await mkdir(join(dir, 'blobs', 'blake3'), { recursive: true });
    for (const [digest, bytes] of o.blobs) await writeFile(join(dir, bundleBlobPath(digest)), bytes);
  }
}

export async function writeTrustFile(path: string, trust: TrustStore): Promise<void> {
  await writeFile(path, JSON.stringify(trust));
}

/** The signed session of every manifest in the bundle written at `out`, in order. */
export function bundleSessions(out: string): string[] {
  return readFileSync(join(out, 'manifests.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => (JSON.parse(Buffer.from(JSON.parse(l).payload, 'base64').toString()) as { session: string }).session);
}
