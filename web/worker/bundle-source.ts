/**
 * `BundleReader`s for the browser: over the files of a picked or dropped folder, or over a bundle
 * served by `handoff-ledger audit-ui`. Both stream manifests.jsonl in chunks and never read more of a
 * blob than its signed size (plus one byte is enough to tell it is larger).
 */
import { AuditError } from '../../manifests/audit/errors.js';
import {
  BUNDLE_HEADER_FILE,
  BUNDLE_MANIFESTS_FILE,
  maxTreeFileBytes,
  bundleBlobPath,
  type BundleReader,
} from '../../manifests/audit/bundle.js';
import type { BundleSource } from '../protocol.js';

const MAX_HEADER_BYTES = 64 * 1024;
/**
 * A picked manifests.jsonl is read in slices of this size, each into its own ArrayBuffer: reading
 * `Blob.stream()`'s chunks cost Chromium's verification worker about twice as much (1.2 s against 0.6 s
 * for 100,000 manifests, profiled).
 */
const SLICE_BYTES = 1024 * 1024;
/** The CLI's bounds (src/ops/bundle-dir.ts): proofs.jsonl and heads.jsonl grow with the manifests, the others do not. */
const maxTreeBytes = maxTreeFileBytes;

async function* streamChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

function ioError(what: string, err: unknown): AuditError {
  return new AuditError('BUNDLE_IO', `cannot read ${what}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

function fileReader(source: Extract<BundleSource, { kind: 'files' }>): BundleReader {
  const reader: BundleReader = {
    async header() {
      if (!source.header) return undefined;
      if (source.header.size > MAX_HEADER_BYTES)
        throw new AuditError(
          'BUNDLE_INVALID',
          `${BUNDLE_HEADER_FILE} is ${source.header.size} bytes, over ${MAX_HEADER_BYTES}`,
        );
      return source.header.text().catch((err: unknown) => Promise.reject(ioError(BUNDLE_HEADER_FILE, err)));
    },
    async *manifests() {
      const file = source.manifests;
      for (let at = 0; at < file.size; at += SLICE_BYTES) {
        let slice: ArrayBuffer;
        try {
          slice = await file.slice(at, at + SLICE_BYTES).arrayBuffer();
        } catch (err) {
          throw ioError(BUNDLE_MANIFESTS_FILE, err);
        }
        yield new Uint8Array(slice);
      }
    },
    manifestsSize: async () => source.manifests.size,
    async treeFile(name) {
      const file = source.tree?.[name];
      if (!file) return undefined;
      const max = maxTreeBytes(name, source.manifests.size);
      if (file.size > max) throw new AuditError('BUNDLE_INVALID', `${name} is ${file.size} bytes, over ${max}`);
      return file.text().catch((err: unknown) => Promise.reject(ioError(name, err)));
    },
  };
  const blobs = source.blobs;
  if (blobs) {
    reader.readBlob = async (digest, maxBytes) => {
      const file = Object.hasOwn(blobs, digest.slice(7)) ? blobs[digest.slice(7)] : undefined;
      if (!file) return undefined;
      if (file.size > maxBytes) return { size: file.size };
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await file.arrayBuffer());
      } catch (err) {
        throw ioError(digest, err);
      }
      return { size: bytes.length, bytes };
    };
  }
  return reader;
}

async function get(url: string): Promise<Response | undefined> {
  let res: Response;
  try {
    res = await fetch(url, { cache: 'no-store' });
  } catch (err) {
    throw ioError(url, err);
  }
  if (res.status === 404) return undefined;
  if (!res.ok) throw new AuditError('BUNDLE_IO', `cannot read ${url}: HTTP ${res.status}`);
  return res;
}

function urlReader(source: Extract<BundleSource, { kind: 'url' }>): BundleReader {
  const at = (path: string) => `${source.base}${path}`;
  let size: number | undefined;
  const reader: BundleReader = {
    async header() {
      const res = await get(at(BUNDLE_HEADER_FILE));
      if (!res) return undefined;
      const text = await res.text();
      if (text.length > MAX_HEADER_BYTES)
        throw new AuditError('BUNDLE_INVALID', `${BUNDLE_HEADER_FILE} is over ${MAX_HEADER_BYTES} bytes`);
      return text;
    },
    async *manifests() {
      const res = await get(at(BUNDLE_MANIFESTS_FILE));
      if (!res?.body) throw new AuditError('BUNDLE_INVALID', `the bundle has no ${BUNDLE_MANIFESTS_FILE}`);
      try {
        yield* streamChunks(res.body);
      } catch (err) {
        throw ioError(BUNDLE_MANIFESTS_FILE, err);
      }
    },
    async manifestsSize() {
      if (size === undefined) {
        const res = await fetch(at(BUNDLE_MANIFESTS_FILE), { method: 'HEAD', cache: 'no-store' }).catch(
          () => undefined,
        );
        const n = Number(res?.headers.get('content-length'));
        size = Number.isSafeInteger(n) ? n : undefined;
      }
      return size;
    },
    async treeFile(name) {
      if (!source.tree.includes(name)) return undefined;
      const res = await get(at(name));
      if (!res) return undefined;
      const text = await res.text();
      const max = maxTreeBytes(name, (await reader.manifestsSize?.()) ?? 0);
      if (text.length > max) throw new AuditError('BUNDLE_INVALID', `${name} is over ${max} bytes`);
      return text;
    },
  };
  if (source.hasBlobs) {
    reader.readBlob = async (digest, maxBytes) => {
      const res = await get(at(bundleBlobPath(digest)));
      if (!res) return undefined;
      const declared = Number(res.headers.get('content-length'));
      if (Number.isSafeInteger(declared) && declared > maxBytes) {
        await res.body?.cancel();
        return { size: declared };
      }
      const bytes = new Uint8Array(await res.arrayBuffer());
      return bytes.length > maxBytes ? { size: bytes.length } : { size: bytes.length, bytes };
    };
  }
  return reader;
}

export function readerFor(source: BundleSource): BundleReader {
  return source.kind === 'files' ? fileReader(source) : urlReader(source);
}
