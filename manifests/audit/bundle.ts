/**
 * The export bundle format (version 1), isomorphic. A bundle is a directory:
 *
 *   bundle.json              header: format, version, exportedAt, host, counts, filters (unsigned)
 *   manifests.jsonl          one DSSE envelope per line, exactly as stored, in global log order, each `\n`-terminated
 *   blobs/blake3/<64hex>     optional: the summary blobs the manifests reference
 *   checkpoint.note          the signed C2SP checkpoint the bundle was cut at (manifests.jsonl = its first leaves,
 *                            or, filtered, some of them)
 *   proofs.jsonl             filtered bundles: per manifest line, `{ leafIndex, proof }` at the checkpoint's size
 *   consistency.json         optional (`export --since`): `{ oldSize, proof }` from an auditor's earlier checkpoint
 *   heads.jsonl              filtered bundles: per exported session (and the `--session` asked for), its head at
 *                            the checkpoint (or null: absent) with a proof into the checkpoint's session-heads root
 *
 * The header is unsigned: it is a description, never a source of trust. Keys are not part of a bundle;
 * auditors pass a pinned trust file. `BundleReader` abstracts the files, so a browser can verify text it
 * fetched and Node can read a directory (src/ops/bundle-dir.ts).
 */
import { z } from 'zod';
import { isDigest, type Digest } from '../../store/hash/digest.js';
import { AuditError, auditUsage } from './errors.js';
import { readOptionFieldsAs, shownValue, type NamesEveryField } from '../../store/errors.js';
import { idSchema } from '../format/ids.js';
import { timestampSchema } from '../format/manifest.js';
import { describeZodError } from '../format/zod-issue.js';
import { fileBytes } from '../encoding/file-bytes.js';

export const BUNDLE_FORMAT = 'handoff-ledger-bundle';
export const BUNDLE_VERSION = 1;
export const BUNDLE_HEADER_FILE = 'bundle.json';
export const BUNDLE_MANIFESTS_FILE = 'manifests.jsonl';
export const BUNDLE_CHECKPOINT_FILE = 'checkpoint.note';
export const BUNDLE_PROOFS_FILE = 'proofs.jsonl';
export const BUNDLE_CONSISTENCY_FILE = 'consistency.json';
export const BUNDLE_HEADS_FILE = 'heads.jsonl';
/** The tree files a bundle may carry (read whole, each bounded). */
export type BundleTreeFile =
  typeof BUNDLE_CHECKPOINT_FILE | typeof BUNDLE_PROOFS_FILE | typeof BUNDLE_CONSISTENCY_FILE | typeof BUNDLE_HEADS_FILE;
export const BUNDLE_TREE_FILES: readonly BundleTreeFile[] = [
  BUNDLE_CHECKPOINT_FILE,
  BUNDLE_PROOFS_FILE,
  BUNDLE_CONSISTENCY_FILE,
  BUNDLE_HEADS_FILE,
];
const MAX_TREE_FILE = 1024 * 1024;
/**
 * How much of a tree file a reader takes: proofs.jsonl (~64 hashes per manifest line) and heads.jsonl (one proof
 * per chain, each chain at least one line) grow with the manifests file, the others do not.
 */
export const maxTreeFileBytes = (name: BundleTreeFile, manifestsBytes: number): number =>
  name === BUNDLE_PROOFS_FILE || name === BUNDLE_HEADS_FILE
    ? Math.max(MAX_TREE_FILE, manifestsBytes * 4)
    : MAX_TREE_FILE;
/**
 * The longest line of proofs.jsonl or heads.jsonl a reader parses (UTF-16 units): an honest one is ~3 KB (a proof of
 * ≤ 63 hashes) or ~13 KB (a session-heads proof of ≤ 256 siblings); a longer one is a finding, never parsed.
 */
export const MAX_TREE_LINE = 64 * 1024;

/**
 * The lines of a tree file's text, each without its `\n` (a final line with none too), walked without splitting the
 * text into an array (a file of n newlines would make n strings at once: V8 aborts past ~134 million). A line longer
 * than `maxChars` is yielded as `undefined`, not cut out of the text.
 */
export function* textLines(text: string, maxChars: number = MAX_TREE_LINE): Generator<string | undefined> {
  let at = 0;
  for (;;) {
    const nl = text.indexOf('\n', at);
    const end = nl < 0 ? text.length : nl;
    yield end - at > maxChars ? undefined : text.slice(at, end);
    if (nl < 0) return;
    at = nl + 1;
  }
}

/** Blobs live at `blobs/blake3/<64 hex>`: only validated hex digests become path components. */
export const BUNDLE_BLOB_DIR = 'blobs/blake3';
const MAX_HEADER_BYTES = 64 * 1024;

const count = z.int().min(0);

export const bundleHeaderSchema = z.strictObject({
  format: z.literal(BUNDLE_FORMAT),
  version: z.literal(BUNDLE_VERSION),
  exportedAt: timestampSchema,
  /** The host whose ledger was exported. */
  host: idSchema,
  counts: z.strictObject({
    manifests: count,
    chains: count,
    /** Present iff the bundle carries blobs. */
    blobs: count.optional(),
  }),
  filters: z.strictObject({
    principal: idSchema.optional(),
    session: idSchema.optional(),
  }),
});

export type BundleHeader = z.infer<typeof bundleHeaderSchema>;

/**
 * Parses a header from untrusted text. @throws AuditError `BUNDLE_INVALID`; `USAGE` for text that is no string (a
 *   parsed header: it was a TypeError, `text.startsWith is not a function`)
 */
export function parseBundleHeader(text: string): BundleHeader {
  if (typeof text !== 'string')
    throw auditUsage(
      `parseBundleHeader: text must be ${BUNDLE_HEADER_FILE}'s text, not ${shownValue(text)} (pass the text as read, not a parsed header)`,
    );
  if (text.length > MAX_HEADER_BYTES)
    throw new AuditError('BUNDLE_INVALID', `${BUNDLE_HEADER_FILE} is over ${MAX_HEADER_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    // A byte order mark is kept by the read (the file is the exporter's UTF-8, which writes none): named, for it is
    // invisible in an editor.
    const bom = text.startsWith('\uFEFF') ? ' (it begins with a byte order mark, U+FEFF)' : '';
    throw new AuditError('BUNDLE_INVALID', `${BUNDLE_HEADER_FILE} is not JSON${bom}`, { cause: err });
  }
  const parsed = bundleHeaderSchema.safeParse(value);
  if (!parsed.success) {
    throw new AuditError(
      'BUNDLE_INVALID',
      `${BUNDLE_HEADER_FILE}: ${describeZodError(parsed.error, { escaped: true, schema: bundleHeaderSchema })}`,
    );
  }
  return parsed.data;
}

/** The serialized header (what `export` writes). */
export function serializeBundleHeader(header: BundleHeader): string {
  return `${JSON.stringify(bundleHeaderSchema.parse(header), null, 2)}\n`;
}

/** A blob read from a bundle: `bytes` is absent when `size` exceeds the caller's bound (never read). */
export interface BundleBlob {
  size: number;
  bytes?: Uint8Array | undefined;
}

/**
 * A blob not read because a symbolic link stands on its way, which a reader never follows: at the blob's own file
 * (`file`: `blobs/blake3/<64 hex>`), or at `blobs` or `blobs/blake3` (then no blob of the bundle is read). The
 * verifier reports it `BLOB_MISSING`, saying it is a link (one finding for a linked directory, not one per blob).
 */
export interface BundleBlobLink {
  link: 'file' | 'blobs' | typeof BUNDLE_BLOB_DIR;
  /** None read (so a caller's `blob?.bytes` still reads as a blob without bytes). */
  size?: never;
  bytes?: never;
}

/**
 * What a reader says of a bundle entry that is a symbolic link, in `verify`'s words (`path` as the reader names it:
 * `verify` gives a tree file's full path, the blob checks and audit-ui the path inside the bundle).
 */
export function symlinkedEntry(path: string, kind: 'file' | 'directory' = 'file'): string {
  return (
    `${path} is a symbolic link: a bundle's files are read only as regular files in the bundle, never through a ` +
    `link (copy the ${kind} itself into the bundle, or export it again)`
  );
}

/** Where a link may stand on a blob's way (`BundleBlobLink['link']`): a reason outside this list is no reason. */
export const BUNDLE_BLOB_LINKS: ReadonlyArray<BundleBlobLink['link']> = ['file', 'blobs', BUNDLE_BLOB_DIR];

/**
 * What is said of a blob behind a link, in `verify`'s words: its own file's path, or the linked directory (the same
 * for every blob of the bundle). The verifier's finding and audit-ui's 404 both say it.
 */
export function linkedBlobText(digest: Digest, link: BundleBlobLink['link']): string {
  return link === 'file' ? symlinkedEntry(bundleBlobPath(digest)) : symlinkedEntry(link, 'directory');
}

/**
 * The header audit-ui sets on its 404 for a blob behind a link (`BundleBlobLink`'s `link`: the page's reader of a
 * served bundle gives the verifier the same reason `verify`'s reader gives).
 */
export const BLOB_LINK_HEADER = 'x-handoff-ledger-link';

/**
 * Read access to one bundle. Implementations throw `AuditError` `BUNDLE_IO` when a file cannot be read.
 */
export interface BundleReader {
  /** The text of bundle.json, or `undefined` when the bundle has none (bare manifests.jsonl text). */
  header(): Promise<string | undefined>;
  /** The bytes of manifests.jsonl, in chunks of any size. */
  manifests(): AsyncIterable<Uint8Array>;
  /** Total size of manifests.jsonl in bytes, when known (for progress). */
  manifestsSize?(): Promise<number | undefined>;
  /**
   * Present iff the bundle carries blobs. Returns `undefined` for an absent blob, a `BundleBlobLink` for one behind a
   * symbolic link (not followed); reads no bytes of a blob larger than `maxBytes`.
   */
  readBlob?(digest: Digest, maxBytes: number): Promise<BundleBlob | BundleBlobLink | undefined>;
  /** The text of a tree file, or `undefined` when the bundle has none (bundles from before checkpoints). */
  treeFile?(name: BundleTreeFile): Promise<string | undefined>;
}

/** The path of a blob inside a bundle. @throws TypeError for anything but a blake3 digest */
export function bundleBlobPath(digest: string): string {
  if (!isDigest(digest)) throw new TypeError('bundle blob path needs a blake3:<64 hex> digest');
  return `${BUNDLE_BLOB_DIR}/${digest.slice(7)}`;
}

/** A bundle's files in memory, for `memoryBundleReader`. */
export interface MemoryBundleInput {
  /**
   * bundle.json's text as read (not a parsed `BundleHeader`: `verifyBundle` parses it with `parseBundleHeader`, and
   * refuses text that is not a header as `BUNDLE_INVALID`); absent, the bundle is read as one without a header.
   */
  header?: string | undefined;
  /**
   * manifests.jsonl's text or bytes: an ArrayBuffer (`await response.arrayBuffer()`) or a SharedArrayBuffer, a
   * Uint8Array or Node Buffer, any other typed array or a DataView (read over the same memory, not copied).
   */
  manifests: string | ArrayBufferLike | ArrayBufferView;
  /**
   * A digest's bytes, in any of the forms `manifests` takes them (a Uint8Array or Buffer, an ArrayBuffer, another
   * typed array or a DataView); given, the bundle is one with blobs.
   */
  blobs?: ReadonlyMap<string, ArrayBufferLike | ArrayBufferView> | undefined;
  /** A tree file's text (`checkpoint.note`, `proofs.jsonl`, …). */
  treeFiles?: Partial<Record<BundleTreeFile, string>> | undefined;
}

/** Every field of MemoryBundleInput: `memoryBundleReader` reads these once and refuses any other name. */
const MEMORY_BUNDLE_FIELDS = ['header', 'manifests', 'blobs', 'treeFiles'] as const satisfies ReadonlyArray<
  keyof MemoryBundleInput
>;
const everyMemoryBundleField: NamesEveryField<MemoryBundleInput, typeof MEMORY_BUNDLE_FIELDS> = true;
void everyMemoryBundleField;

/**
 * A blob of `memoryBundleReader`'s `blobs` as bytes (over the same memory), `undefined` for none (not in the Map).
 * @throws AuditError `USAGE` for a value that is no bytes
 */
function blobBytes(digest: unknown, value: unknown): Uint8Array | undefined {
  if (value === undefined) return undefined;
  const bytes = fileBytes(value);
  if (bytes === undefined)
    throw auditUsage(
      `memoryBundleReader input: blobs' ${shownValue(digest, 80)} must be the blob's bytes (a Uint8Array, an ArrayBuffer, another typed array or a DataView), not ${shownValue(value)}`,
    );
  return bytes;
}

/**
 * A reader over values already in memory: fetched text in a browser, or test fixtures.
 * @throws AuditError `USAGE` for input that is no object, a field of a name it does not know (`manifest`, `blob`: an
 *   empty bundle, or one without its blobs, in place of the one meant) or one that throws as it is read, and
 *   `manifests` that are neither text nor bytes, a `header` that is no text (a parsed header), `blobs` that are no
 *   Map or hold a value that is no bytes (text, null), `treeFiles` that are no object or hold a value that is no text.
 *   A blob given as an ArrayBuffer or a DataView read as `undefined bytes` (BLOB_SIZE), one given as text failed the
 *   audit with a StoreError of digestOf, a tree file given as bytes read as a malformed checkpoint: the caller's
 *   slip reported as the bundle's fault.
 */
export function memoryBundleReader(given: MemoryBundleInput): BundleReader {
  // No input at all is told what it lacks; any other non-object is refused by readOptionFieldsAs, naming its type.
  if (given === null || given === undefined)
    throw auditUsage('memoryBundleReader needs { manifests } (the text or bytes of manifests.jsonl)');
  // Each field read once, as the auditor's options are (readAuditOptions): what is checked is what the reader serves.
  const input = readOptionFieldsAs(
    given,
    MEMORY_BUNDLE_FIELDS,
    'memoryBundleReader input',
    auditUsage,
  ) as MemoryBundleInput;
  const manifestBytes = typeof input.manifests === 'string' ? undefined : fileBytes(input.manifests);
  if (typeof input.manifests !== 'string' && manifestBytes === undefined)
    throw auditUsage(
      `memoryBundleReader input: manifests must be the text or bytes of manifests.jsonl, not ${shownValue(input.manifests)}`,
    );
  // Refused here, not later as a bundle fault: a parsed header would have read as a bundle.json that is no JSON
  // (BUNDLE_INVALID), a plain object of blobs as a TypeError at the first blob read.
  if (input.header !== undefined && typeof input.header !== 'string')
    throw auditUsage(
      `memoryBundleReader input: header must be bundle.json's text, not ${shownValue(input.header)} (pass the text as read, not a parsed header)`,
    );
  if (input.blobs !== undefined && typeof (input.blobs as { get?: unknown } | null)?.get !== 'function')
    throw auditUsage(
      `memoryBundleReader input: blobs must be a Map of digest to bytes, not ${shownValue(input.blobs)}`,
    );
  if (input.treeFiles !== undefined && (typeof input.treeFiles !== 'object' || input.treeFiles === null))
    throw auditUsage(
      `memoryBundleReader input: treeFiles must be an object of file name to text, not ${shownValue(input.treeFiles)}`,
    );
  for (const [name, text] of Object.entries(input.treeFiles ?? {}))
    if (text !== undefined && typeof text !== 'string')
      throw auditUsage(
        `memoryBundleReader input: treeFiles[${shownValue(name)}] must be the file's text, not ${shownValue(text)}`,
      );
  // A Map's every value is looked at now, before any is read; one that only has `get` is, as each is read.
  const blobMap = input.blobs as
    { get(digest: string): unknown; entries?: () => Iterable<[unknown, unknown]> } | undefined;
  if (typeof blobMap?.entries === 'function') for (const [digest, value] of blobMap.entries()) blobBytes(digest, value);
  const bytes = manifestBytes ?? new TextEncoder().encode(input.manifests as string);
  const reader: BundleReader = {
    header: async () => input.header,
    async *manifests() {
      yield bytes;
    },
    manifestsSize: async () => bytes.length,
    treeFile: async (name) => input.treeFiles?.[name],
  };
  if (blobMap) {
    reader.readBlob = async (digest, maxBytes) => {
      const b = blobBytes(digest, blobMap.get(digest));
      if (!b) return undefined;
      return b.length > maxBytes ? { size: b.length } : { size: b.length, bytes: b };
    };
  }
  return reader;
}
