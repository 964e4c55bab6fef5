/**
 * Reading a drop: each dropped folder is a bundle (walked into `name/…` paths, as input[webkitdirectory]
 * gives them), each dropped file a side file for the page to place by its name (trust file, earlier
 * checkpoint). Chromium reads dropped folders through `getAsFileSystemHandle`; its older entries API
 * fails with EncodingError on a page opened from file://, which is how auditors open this page. Other
 * browsers have only the entries API, which works for them there.
 */
import { bundleFromFiles, readOfBundle, type PickedBundle } from './sources.js';
import { quoted } from '../manifests/encoding/printable.js';

/** The files of a dropped folder, and the paths of its directories (so an empty blobs/ is seen, as the CLI sees it). */
interface Found {
  files: Array<{ path: string; file: Blob }>;
  directories: string[];
  /** How many entries the walk listed, read or not (none: the folder is empty). */
  entries: number;
}

/** The parts of the File System Access API a drop needs (not in TypeScript's DOM library for every target). */
interface Handle {
  kind: 'file' | 'directory';
  name: string;
  getFile?(): Promise<File>;
  values?(): AsyncIterable<Handle>;
}
type ItemWithHandle = DataTransferItem & { getAsFileSystemHandle?(): Promise<Handle | null> };

/**
 * Walks what `verify` would read of a dropped folder and nothing else (`readOfBundle`): every entry is listed where
 * the walk goes, but only the bundle's own files are read and only `blobs/` and `blobs/blake3/` entered. A file the
 * CLI never opens (notes, a copy of another tree, a name the browser cannot read back) must not refuse the folder,
 * and a deep or wide tree beside the bundle must not be walked.
 */
async function walkHandle(handle: Handle, inside: string, path: string, out: Found): Promise<void> {
  for await (const child of handle.values!()) {
    out.entries++;
    const at = inside ? `${inside}/${child.name}` : child.name;
    const use = readOfBundle(at, child.kind);
    if (use === 'skip') continue;
    const childPath = `${path}/${child.name}`;
    if (child.kind === 'file') out.files.push({ path: childPath, file: await child.getFile!() });
    else {
      out.directories.push(childPath);
      if (use === 'enter') await walkHandle(child, at, childPath, out);
    }
  }
}

async function readAll(dir: FileSystemDirectoryEntry): Promise<FileSystemEntry[]> {
  const reader = dir.createReader();
  const out: FileSystemEntry[] = [];
  for (;;) {
    const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) return out;
    out.push(...batch);
  }
}

/** `walkHandle` through the entries API. */
async function walkEntry(dir: FileSystemDirectoryEntry, inside: string, path: string, out: Found): Promise<void> {
  for (const child of await readAll(dir)) {
    out.entries++;
    if (!child.isFile && !child.isDirectory) continue;
    const at = inside ? `${inside}/${child.name}` : child.name;
    const use = readOfBundle(at, child.isFile ? 'file' : 'directory');
    if (use === 'skip') continue;
    const childPath = `${path}/${child.name}`;
    if (child.isFile) {
      const file = await new Promise<File>((resolve, reject) => (child as FileSystemFileEntry).file(resolve, reject));
      out.files.push({ path: childPath, file });
    } else {
      out.directories.push(childPath);
      if (use === 'enter') await walkEntry(child as FileSystemDirectoryEntry, at, childPath, out);
    }
  }
}

export interface Dropped {
  /** The dropped folder as a bundle, or why it is not one (or could not be read). */
  bundle?: PickedBundle | string;
  /** Dropped files, for the page to place by name. */
  files: File[];
}

/** Reads a drop. Must be called from the drop event itself: its items are gone once the handler returns. */
export function readDrop(items: DataTransferItemList): Promise<Dropped> {
  // Everything is taken from the items now, synchronously; only the reading below waits.
  const taken = [...items]
    .filter((item) => item.kind === 'file')
    .map((item) => ({
      handle: (item as ItemWithHandle).getAsFileSystemHandle?.().catch(() => null) ?? Promise.resolve(null),
      entry: item.webkitGetAsEntry(),
      file: item.getAsFile(),
    }));
  return (async () => {
    const result: Dropped = { files: [] };
    const folders: Array<{ handle: Handle | null; entry: FileSystemEntry | null }> = [];
    for (const { handle: pending, entry, file } of taken) {
      const handle = await pending;
      const isDirectory = handle ? handle.kind === 'directory' : entry?.isDirectory === true;
      if (isDirectory) folders.push({ handle, entry });
      else if (file) result.files.push(file);
    }
    // As the folder picker takes one folder: two bundles in one drop are refused, not one of them chosen silently.
    if (folders.length > 1) return { ...result, bundle: 'drop one bundle folder' };
    for (const { handle, entry } of folders) {
      const found: Found = { files: [], directories: [], entries: 0 };
      // The folder's own name starts every path, as input[webkitdirectory] gives them.
      const name = handle?.name ?? entry!.name;
      try {
        if (handle) await walkHandle(handle, '', name, found);
        else await walkEntry(entry as FileSystemDirectoryEntry, '', name, found);
      } catch (err) {
        result.bundle = `cannot read the dropped folder ${quoted(name)} in this browser (${(err as Error)?.name ?? 'Error'}); choose it with the bundle folder picker instead`;
        continue;
      }
      result.bundle =
        found.entries === 0 ? 'the folder is empty' : bundleFromFiles(found.files, found.directories, name);
    }
    return result;
  })();
}
