/**
 * Reading a drop: each dropped folder is a bundle (walked into `name/…` paths, as input[webkitdirectory]
 * gives them), each dropped file a side file for the page to place by its name (trust file, earlier
 * checkpoint). Chromium reads dropped folders through `getAsFileSystemHandle`; its older entries API
 * fails with EncodingError on a page opened from file://, which is how auditors open this page. Other
 * browsers have only the entries API, which works for them there.
 */
import { bundleFromFiles, type PickedBundle } from './sources.js';

/** The files of a dropped folder, and the paths of its directories (so an empty blobs/ is seen, as the CLI sees it). */
interface Found {
  files: Array<{ path: string; file: Blob }>;
  directories: string[];
}

/** The parts of the File System Access API a drop needs (not in TypeScript's DOM library for every target). */
interface Handle {
  kind: 'file' | 'directory';
  name: string;
  getFile?(): Promise<File>;
  values?(): AsyncIterable<Handle>;
}
type ItemWithHandle = DataTransferItem & { getAsFileSystemHandle?(): Promise<Handle | null> };

async function walkHandle(handle: Handle, prefix: string, out: Found): Promise<void> {
  const path = prefix ? `${prefix}/${handle.name}` : handle.name;
  if (handle.kind === 'file') out.files.push({ path, file: await handle.getFile!() });
  else {
    out.directories.push(path);
    for await (const child of handle.values!()) await walkHandle(child, path, out);
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

async function walkEntry(entry: FileSystemEntry, prefix: string, out: Found): Promise<void> {
  const path = prefix ? `${prefix}/${entry.name}` : entry.name;
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    out.files.push({ path, file });
  } else if (entry.isDirectory) {
    out.directories.push(path);
    for (const child of await readAll(entry as FileSystemDirectoryEntry)) await walkEntry(child, path, out);
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
      const found: Found = { files: [], directories: [] };
      try {
        if (handle) await walkHandle(handle, '', found);
        else await walkEntry(entry!, '', found);
      } catch (err) {
        result.bundle = `cannot read the dropped folder ${JSON.stringify(handle?.name ?? entry?.name ?? '')} in this browser (${(err as Error)?.name ?? 'Error'}); choose it with the bundle folder picker instead`;
        continue;
      }
      result.bundle = bundleFromFiles(found.files, found.directories);
    }
    return result;
  })();
}
