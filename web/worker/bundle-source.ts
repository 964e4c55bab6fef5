/**
 * `BundleReader`s for the browser: over the files of a picked or dropped folder, or over a bundle
 * served by `handoff-ledger audit-ui`. Both stream manifests.jsonl in chunks and never read more of a
 * blob than its signed size (plus one byte is enough to tell it is larger).
 */
import { AuditError } from '../../manifests/audit/errors.js';
import { readBodyUpTo } from '../../store/bounded-body.js';
import { errorText, escapedText, quoted } from '../../store/errors.js';
import {
  BLOB_LINK_HEADER,
  BUNDLE_BLOB_LINKS,
  BUNDLE_HEADER_FILE,
  BUNDLE_MANIFESTS_FILE,
  maxTreeFileBytes,
  bundleBlobPath,
  parseBundleHeader,
  type BundleBlobLink,
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

/**
 * Text as the CLI reads it (readFile 'utf8'): a byte order mark is kept, so a file that starts with one is
 * refused as `verify` refuses it, not silently accepted (Blob.text() and Response.text() drop it).
 */
const utf8 = (bytes: ArrayBuffer | Uint8Array) => new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);

const noHeader = () => new AuditError('BUNDLE_INVALID', `the bundle has no ${BUNDLE_HEADER_FILE}; not a bundle`);

/**
 * The CLI's rule (src/ops/bundle-dir.ts): a bundle carries blobs iff its header counts blobs or it has a
 * blobs/ directory. A reader without blobs whose header counts them gets a `readBlob` that finds none, so
 * every blob is BLOB_MISSING, as `verify` reports it. An unparseable header is left to verifyBundle.
 */
function requireCountedBlobs(reader: BundleReader, headerText: string): void {
  if (reader.readBlob) return;
  let counted: boolean;
  try {
    counted = parseBundleHeader(headerText).counts.blobs !== undefined;
  } catch {
    return;
  }
  if (counted) reader.readBlob = async () => undefined;
}

/**
 * Reads a served answer's body, at most `max` bytes: one whose content-length is over `max` is its declared size
 * before any byte is read, else it is read chunk by chunk and stopped as soon as it passes `max` (`over`: the bytes
 * seen so far), never a whole oversized body in memory. A body that breaks off is `BUNDLE_IO` naming `what`.
 */
async function boundedBody(
  res: Response,
  what: string,
  max: number,
): Promise<{ bytes: Uint8Array } | { over: number; declared: boolean }> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isSafeInteger(declared) && declared > max) {
    await res.body?.cancel().catch(() => {});
    return { over: declared, declared: true };
  }
  // One byte past `max` is enough to tell the body is over it: read no further (the passing chunk at most).
  let read;
  try {
    read = await readBodyUpTo(res.body, max + 1);
  } catch (err) {
    throw ioError(what, err);
  }
  return read.seen > max ? { over: read.seen, declared: false } : { bytes: read.bytes };
}

/**
 * Reads a served file's text, at most `max` bytes: refused by its content-length before any byte is read,
 * else read chunk by chunk and refused as soon as it passes `max` (never a whole oversized body in memory:
 * past V8's string limit a browser's Response.text() gives '' instead of failing).
 */
async function boundedText(res: Response, name: string, max: number): Promise<string> {
  const read = await boundedBody(res, name, max);
  if ('bytes' in read) return utf8(read.bytes);
  throw new AuditError(
    'BUNDLE_INVALID',
    read.declared ? `${name} is ${read.over} bytes, over ${max}` : `${name} is over ${max} bytes`,
  );
}

async function fileText(file: Blob, name: string): Promise<string> {
  try {
    return utf8(await file.arrayBuffer());
  } catch (err) {
    throw ioError(name, err);
  }
}

/**
 * `BUNDLE_IO` for a read that failed: what it read (a bundle file's name, a blob's digest, a served file's URL) quoted,
 * as the page quotes a side file's name and `verify` a bundle's path (`cannot read "bundle.json": …`), and the browser's
 * reason with what a terminal acts on escaped, once (`escapedText`).
 */
function ioError(what: string, err: unknown): AuditError {
  return new AuditError('BUNDLE_IO', `cannot read ${quoted(what)}: ${escapedText(errorText(err))}`, { cause: err });
}

function fileReader(source: Extract<BundleSource, { kind: 'files' }>): BundleReader {
  const reader: BundleReader = {
    async header() {
      if (!source.header) throw noHeader();
      if (source.header.size > MAX_HEADER_BYTES)
        throw new AuditError(
          'BUNDLE_INVALID',
          `${BUNDLE_HEADER_FILE} is ${source.header.size} bytes, over ${MAX_HEADER_BYTES}`,
        );
      const text = await fileText(source.header, BUNDLE_HEADER_FILE);
      requireCountedBlobs(reader, text);
      return text;
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
      // A directory at the name, refused as `verify` refuses it once a check reads it (src/ops/bundle-dir.ts).
      if (source.notFiles?.includes(name))
        throw new AuditError('BUNDLE_INVALID', `${name} is a directory, not a regular file`);
      const file = source.tree?.[name];
      if (!file) return undefined;
      const max = maxTreeBytes(name, source.manifests.size);
      if (file.size > max) throw new AuditError('BUNDLE_INVALID', `${name} is ${file.size} bytes, over ${max}`);
      return fileText(file, name);
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

/**
 * audit-ui's 404 for a blob behind a symbolic link names the link's place (BLOB_LINK_HEADER): the reason verify's
 * reader gives the verifier, which says it is a link. Any other value is no reason: absent.
 */
function linkOfBlob(res: Response): BundleBlobLink | undefined {
  const link = res.headers.get(BLOB_LINK_HEADER);
  const known = BUNDLE_BLOB_LINKS.find((l) => l === link);
  return known === undefined ? undefined : { link: known };
}

/** The most of a refusal's body read for its words (500 characters are shown: at most 4 bytes each). */
const WORDS_BYTES = 2048;

/**
 * The first `max` bytes of an answer's body as text (audit-ui's words for a refusal), the rest never read: a body
 * that breaks off gives what came before it.
 */
async function firstWords(res: Response, max: number): Promise<string> {
  const { bytes } = await readBodyUpTo(res.body, max, { untilBreak: true });
  // As Response.text() decodes it (a byte order mark dropped): these are audit-ui's words, not a bundle's file.
  return new TextDecoder().decode(bytes);
}

async function get(url: string): Promise<Response | undefined>;
async function get<T>(url: string, absent: (res: Response) => T | undefined): Promise<Response | T | undefined>;
async function get<T>(url: string, absent?: (res: Response) => T | undefined): Promise<Response | T | undefined> {
  let res: Response;
  try {
    res = await fetch(url, { cache: 'no-store' });
  } catch (err) {
    throw ioError(url, err);
  }
  if (res.status === 404) {
    const why = absent?.(res);
    await res.body?.cancel().catch(() => {});
    return why;
  }
  // 422: audit-ui found something at the name that is not a bundle's file (not a regular file), which
  // `verify` refuses as BUNDLE_INVALID; anything else it could not read (a symlink, no permission) is BUNDLE_IO.
  // The URL quoted, as every name of a file the page reads; the server's words (which quote what they name) with what
  // a terminal acts on escaped, once.
  const why = async () => escapedText((await firstWords(res, WORDS_BYTES)).slice(0, 500).trim());
  if (res.status === 422)
    throw new AuditError('BUNDLE_INVALID', `${quoted(url)}: ${(await why()) || 'not a file of the bundle'}`);
  // 403: audit-ui's words say what stands there (a symbolic link, no permission), as verify's message does.
  if (res.status === 403) {
    const said = await why();
    throw new AuditError('BUNDLE_IO', `cannot read ${quoted(url)}: HTTP 403${said ? `: ${said}` : ''}`);
  }
  if (!res.ok) throw new AuditError('BUNDLE_IO', `cannot read ${quoted(url)}: HTTP ${res.status}`);
  return res;
}

/** Past `max` bytes of manifests.jsonl: `verify`'s refusal, in the page's words for raising the bound. */
export function overBound(size: number, max: number): AuditError {
  return new AuditError(
    'BUNDLE_INVALID',
    `${BUNDLE_MANIFESTS_FILE} is ${size} bytes, over the bound of ${max} (raise it with the page's ?max-bundle-bytes= or audit-ui --max-bundle-bytes)`,
  );
}

function urlReader(source: Extract<BundleSource, { kind: 'url' }>, maxManifestsBytes: number): BundleReader {
  const at = (path: string) => `${source.base}${path}`;
  let size: number | undefined;
  const reader: BundleReader = {
    async header() {
      const res = await get(at(BUNDLE_HEADER_FILE));
      if (!res) throw noHeader();
      const text = await boundedText(res, BUNDLE_HEADER_FILE, MAX_HEADER_BYTES);
      requireCountedBlobs(reader, text);
      return text;
    },
    async *manifests() {
      const res = await get(at(BUNDLE_MANIFESTS_FILE));
      if (!res?.body) throw new AuditError('BUNDLE_INVALID', `the bundle has no ${BUNDLE_MANIFESTS_FILE}`);
      const declared = Number(res.headers.get('content-length') ?? NaN);
      if (Number.isSafeInteger(declared) && declared > maxManifestsBytes) {
        await res.body.cancel().catch(() => {});
        throw overBound(declared, maxManifestsBytes);
      }
      // Counted as it streams too: a file that grew after the server measured it is refused past the bound.
      let read = 0;
      try {
        for await (const chunk of streamChunks(res.body)) {
          read += chunk.byteLength;
          if (read > maxManifestsBytes) throw overBound(read, maxManifestsBytes);
          yield chunk;
        }
      } catch (err) {
        throw err instanceof AuditError ? err : ioError(BUNDLE_MANIFESTS_FILE, err);
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
      const max = maxTreeBytes(name, (await reader.manifestsSize?.()) ?? 0);
      const res = await get(at(name));
      if (!res) return undefined;
      return boundedText(res, name, max);
    },
  };
  if (source.hasBlobs) {
    reader.readBlob = async (digest, maxBytes) => {
      const res = await get(at(bundleBlobPath(digest)), linkOfBlob);
      if (!res) return undefined;
      if ('link' in res) return res;
      // At most one byte (one chunk) past its signed size, as verify reads one; an answer broken off is BUNDLE_IO.
      const read = await boundedBody(res, digest, maxBytes);
      return 'bytes' in read ? { size: read.bytes.length, bytes: read.bytes } : { size: read.over };
    };
  }
  return reader;
}

/**
 * The reader of a picked, dropped or served bundle. `maxManifestsBytes` bounds a served manifests.jsonl as it streams
 * (the worker refuses one whose size is known to be over it before reading, as `verify` does).
 */
export function readerFor(source: BundleSource, maxManifestsBytes = Number.MAX_SAFE_INTEGER): BundleReader {
  return source.kind === 'files' ? fileReader(source) : urlReader(source, maxManifestsBytes);
}
