/**
 * Reading a bundle directory from disk (Node): the `BundleReader` the `verify` command hands to the
 * isomorphic verifier. Everything under the directory is untrusted: files are opened without
 * following symlinks, blobs larger than their signed size are never read, and only validated hex
 * digests become path components.
 */
import { constants, createReadStream } from 'node:fs';
import { lstat, open, realpath, type FileHandle } from 'node:fs/promises';
import { readUpTo } from '../../store/fs/bounded-read.js';
import { join, resolve } from 'node:path';
import { AuditError, auditUsage } from '../../manifests/audit/errors.js';
import { quoted, readOptionFieldsAs, shownValue } from '../../store/errors.js';
import { errnoText } from '../../store/fs/errno-text.js';
import { DEFAULT_MAX_MANIFESTS_BYTES } from '../../manifests/audit/auditor-options.js';
import {
  BUNDLE_TREE_FILES,
  maxTreeFileBytes,
  BUNDLE_HEADER_FILE,
  BUNDLE_MANIFESTS_FILE,
  BUNDLE_BLOB_DIR,
  bundleBlobPath,
  parseBundleHeader,
  symlinkedEntry,
  type BundleBlobLink,
  type BundleReader,
} from '../../manifests/audit/bundle.js';

// O_NONBLOCK: a FIFO planted in a bundle must not hang the auditor.
const READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const MAX_HEADER_BYTES = 64 * 1024;
export { DEFAULT_MAX_MANIFESTS_BYTES };

/** Options of `openBundleDir`. */
export interface OpenBundleOptions {
  /** manifests.jsonl larger than this is refused before any of it is read (default 4 GiB). */
  maxManifestsBytes?: number | undefined;
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

/**
 * Why an open (O_NOFOLLOW, O_NONBLOCK) failed because of what stands at the name, not the reading: a symlink (ELOOP),
 * a socket (ENXIO), a device without a driver (ENODEV) — none is a file of the bundle.
 */
export const NOT_A_FILE: ReadonlySet<string> = new Set(['ELOOP', 'ENXIO', 'ENODEV']);

/**
 * A file or directory of the bundle that cannot be read: its path quoted and the failure by its errno code (`cannot read
 * "/b": ENOENT (no such file or directory)`), as every refusal of a file the CLI was given names it; never the errno's
 * own message, which repeats the path raw.
 */
function ioError(path: string, err: unknown): AuditError {
  return new AuditError('BUNDLE_IO', `cannot read ${quoted(path)}: ${errnoText(err)}`, { cause: err });
}

/**
 * Opens a file of the bundle (never through a link, never blocking on a FIFO) and refuses it unless it is a regular
 * file: `BUNDLE_INVALID` for anything else (a FIFO, a socket, a device, a directory), `BUNDLE_IO` for a link or a file
 * that cannot be opened. `undefined` when nothing is there and `absentOk`.
 */
async function openRegular(path: string, absentOk?: false): Promise<FileHandle>;
async function openRegular(path: string, absentOk: true): Promise<FileHandle | undefined>;
async function openRegular(path: string, absentOk = false): Promise<FileHandle | undefined> {
  let h;
  try {
    h = await open(path, READ);
  } catch (err) {
    if (absentOk && errno(err) === 'ENOENT') return undefined;
    // A symlinked tree file is BUNDLE_IO (audit-ui answers 403 for it, which the page reports as BUNDLE_IO too).
    if (errno(err) === 'ENXIO' || errno(err) === 'ENODEV')
      throw new AuditError('BUNDLE_INVALID', `${quoted(path)} is not a regular file`, { cause: err });
    // O_NOFOLLOW's ELOOP: the name is a link (the root is resolved, so no loop above it); ELOOP's own words ("too
    // many symbolic links") would send the auditor looking for a loop.
    if (errno(err) === 'ELOOP') throw new AuditError('BUNDLE_IO', symlinkedEntry(quoted(path)), { cause: err });
    throw ioError(path, err);
  }
  let regular: boolean;
  try {
    regular = (await h.stat()).isFile();
  } catch (err) {
    await h.close();
    throw ioError(path, err);
  }
  if (!regular) {
    await h.close();
    throw new AuditError('BUNDLE_INVALID', `${quoted(path)} is not a regular file`);
  }
  return h;
}

async function readSmallFile(path: string, max: number): Promise<string | undefined> {
  const h = await openRegular(path, true);
  if (!h) return undefined;
  try {
    const st = await h.stat();
    if (st.size > max) throw new AuditError('BUNDLE_INVALID', `${quoted(path)} is ${st.size} bytes, over ${max}`);
    const bytes = await readUpTo(h, max, st.size);
    if (bytes.length > max)
      throw new AuditError(
        'BUNDLE_INVALID',
        `${quoted(path)} is over ${max} bytes when read (its size said ${st.size})`,
      );
    return bytes.toString('utf8');
  } catch (err) {
    throw err instanceof AuditError ? err : ioError(path, err);
  } finally {
    await h.close();
  }
}

/**
 * Opens a bundle directory. The bundle carries blobs iff its header counts blobs or it has a
 * `blobs/` directory (or a symbolic link in its place); then every manifest's blob is checked (absent ones are
 * `BLOB_MISSING`; one behind a link is read as a `BundleBlobLink`, never through it).
 * manifests.jsonl is refused when over `maxManifestsBytes`, before a byte of it is read. A file with holes is read as
 * the bytes it holds, within the same bound: what a file system reports allocated (`st_blocks`) tells no hole from a
 * compressed or just-written block (ZFS reports both as fewer blocks than the size), so judging by it refused honest
 * bundles there.
 * @throws AuditError `USAGE` (a `dir` that is not a non-empty string, a `maxManifestsBytes` that is not a non-negative
 *   integer), `BUNDLE_IO` (directory unreadable), `BUNDLE_INVALID` (no bundle.json or manifests.jsonl, or one over the
 *   size bound)
 */
export async function openBundleDir(dir: string, options: OpenBundleOptions = {}): Promise<BundleReader> {
  if (typeof dir !== 'string' || dir === '')
    throw auditUsage('openBundleDir needs the path of a bundle directory (a non-empty string)');
  // Read once (a getter that throws, or a name it does not know: USAGE naming it).
  const { maxManifestsBytes } = readOptionFieldsAs(options, ['maxManifestsBytes'], 'openBundleDir options', auditUsage);
  const maxBytes = (maxManifestsBytes ?? DEFAULT_MAX_MANIFESTS_BYTES) as number;
  // A bound that is no byte count compares false with every size: the bundle would be read whatever its size.
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
    throw auditUsage(`maxManifestsBytes: a non-negative integer number of bytes, not ${shownValue(maxBytes)}`);
  // The directory the auditor named may be reached through a link of theirs (`latest -> b1`): it is resolved once;
  // nothing inside the bundle is followed.
  let root = resolve(dir);
  try {
    root = await realpath(root);
    const st = await lstat(root);
    if (!st.isDirectory()) throw new AuditError('BUNDLE_INVALID', `${quoted(root)} is not a directory`);
  } catch (err) {
    if (err instanceof AuditError) throw err;
    throw ioError(root, err);
  }
  const headerText = await readSmallFile(join(root, BUNDLE_HEADER_FILE), MAX_HEADER_BYTES);
  if (headerText === undefined)
    throw new AuditError('BUNDLE_INVALID', `${quoted(root)} has no ${BUNDLE_HEADER_FILE}; not a bundle`);
  const header = parseBundleHeader(headerText);
  const manifestsPath = join(root, BUNDLE_MANIFESTS_FILE);
  let manifestsSize: number;
  try {
    const st = await lstat(manifestsPath);
    // A link is said to be one (BUNDLE_IO), as when it is found at the read (`openRegular`) and for every other file
    // of the bundle: "not a regular file" would send the auditor to the file it points to.
    if (st.isSymbolicLink()) throw new AuditError('BUNDLE_IO', symlinkedEntry(quoted(manifestsPath)));
    if (!st.isFile()) throw new AuditError('BUNDLE_INVALID', `${quoted(manifestsPath)} is not a regular file`);
    if (st.size > maxBytes)
      throw new AuditError(
        'BUNDLE_INVALID',
        `${quoted(manifestsPath)} is ${st.size} bytes, over the bound of ${maxBytes} (raise it with --max-bundle-bytes)`,
      );
    manifestsSize = st.size;
  } catch (err) {
    if (err instanceof AuditError) throw err;
    if (errno(err) === 'ENOENT')
      throw new AuditError('BUNDLE_INVALID', `${quoted(root)} has no ${BUNDLE_MANIFESTS_FILE}`);
    throw ioError(manifestsPath, err);
  }
  const carriesBlobs = await hasBlobDir(root);

  const reader: BundleReader = {
    header: async () => headerText,
    treeFile: async (name) => {
      if (!BUNDLE_TREE_FILES.includes(name)) throw new TypeError(`not a bundle tree file: ${name}`);
      // proofs.jsonl and heads.jsonl are bounded by the manifests file itself (maxTreeFileBytes).
      return readSmallFile(join(root, name), maxTreeFileBytes(name, manifestsSize));
    },
    manifestsSize: async () => manifestsSize,
    async *manifests() {
      // Judged by what it opens, as the tree files are (`openRegular`): what stands at the name now may be other than
      // what the open of the bundle found there (a FIFO opened O_NONBLOCK without a writer reads as empty).
      const h = await openRegular(manifestsPath);
      const stream = createReadStream('', { fd: h, highWaterMark: 1024 * 1024 });
      let read = 0;
      try {
        for await (const chunk of stream) {
          // The file may grow after the size check: the bound holds for what is read, not for what was stat'ed.
          read += (chunk as Buffer).length;
          if (read > maxBytes)
            throw new AuditError(
              'BUNDLE_INVALID',
              `${quoted(manifestsPath)} grew past the bound of ${maxBytes} bytes while read`,
            );
          yield chunk as Buffer;
        }
      } catch (err) {
        throw err instanceof AuditError ? err : ioError(manifestsPath, err);
      } finally {
        stream.destroy();
      }
    },
  };
  if (header.counts.blobs !== undefined || carriesBlobs) {
    // O_NOFOLLOW guards the last component only: `blobs` and `blobs/blake3` must be directories of the bundle
    // itself, or a link would read files from elsewhere (they would still be hashed, but a bundle carrying no
    // blobs would report them checked). Either one a link, no blob is read, and the verifier is told it is a link.
    reader.readBlob = async (digest, maxBytes) => {
      const path = join(root, bundleBlobPath(digest));
      const dirs = await blobDirs(root);
      if (dirs === 'absent') return undefined;
      if (dirs !== 'real') return { link: dirs };
      let h;
      try {
        h = await open(path, READ);
      } catch (err) {
        // A symlink (O_NOFOLLOW's ELOOP: the directories above are the bundle's own) is said to be one; a socket or
        // anything else that is not a plain file in the bundle counts as absent (a FIFO or a directory opens, and is
        // judged by its stat below). A file that cannot be read (EACCES) is BUNDLE_IO.
        if (errno(err) === 'ELOOP') return { link: 'file' };
        if (errno(err) === 'ENOENT' || NOT_A_FILE.has(errno(err) ?? '')) return undefined;
        throw ioError(path, err);
      }
      try {
        const st = await h.stat();
        if (!st.isFile()) return undefined;
        if (st.size > maxBytes) return { size: st.size };
        // Read within the signed size whatever the stat said: more is a blob over it (its size, as far as read).
        const bytes = await readUpTo(h, maxBytes, st.size);
        if (bytes.length > maxBytes) return { size: Math.max(bytes.length, (await h.stat()).size) };
        return { size: bytes.length, bytes };
      } catch (err) {
        throw ioError(path, err);
      } finally {
        await h.close();
      }
    };
  }
  return reader;
}

/**
 * Whether the bundle at `root` has a `blobs/` of its own (the CLI's sign that it carries blobs): a directory, or a
 * symbolic link in its place (read through by nothing, and reported as one). Whatever stands inside it: an empty
 * `blobs/`, without `blobs/blake3/`, says so too (its blobs are then `BLOB_MISSING`), as the page takes a dropped one.
 */
export async function hasBlobDir(root: string): Promise<boolean> {
  const st = await lstat(join(root, 'blobs')).catch(() => undefined);
  return st !== undefined && (st.isDirectory() || st.isSymbolicLink());
}

/**
 * What stands at `blobs/` and `blobs/blake3/` of the bundle at `root`: `real` when both are directories of the bundle
 * itself; the first that is a symbolic link (O_NOFOLLOW guards a blob file's name alone, so through a linked one no
 * blob is read by verify or served by audit-ui); else `absent` (nothing there, or not a directory).
 */
export async function blobDirs(root: string): Promise<'real' | 'absent' | Exclude<BundleBlobLink['link'], 'file'>> {
  for (const dir of ['blobs', BUNDLE_BLOB_DIR] as const) {
    const st = await lstat(join(root, dir)).catch(() => undefined);
    if (st?.isSymbolicLink()) return dir;
    if (!st?.isDirectory()) return 'absent';
  }
  return 'real';
}
