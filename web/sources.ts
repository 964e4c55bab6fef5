/**
 * Turning what the auditor picked or dropped into a bundle source: the files of a folder
 * (input[webkitdirectory] or a dropped directory, web/drop.ts) keyed by their path inside the bundle, or the
 * bundle `handoff-ledger audit-ui` serves (announced by a meta tag it adds, so a page opened any other
 * way makes no request at all).
 */
import {
  BUNDLE_BLOB_DIR,
  BUNDLE_CHECKPOINT_FILE,
  BUNDLE_HEADER_FILE,
  BUNDLE_MANIFESTS_FILE,
  BUNDLE_TREE_FILES,
  type BundleTreeFile,
} from '../manifests/audit/bundle.js';
import type { BundleSource } from './protocol.js';
import { counted, quoted } from '../manifests/encoding/printable.js';

export interface PickedBundle {
  name: string;
  source: BundleSource;
  /** What the page says it picked. */
  description: string;
}

const HEX64 = /^[0-9a-f]{64}$/;

/**
 * Builds a source from files and their paths relative to the picked folder's parent (`name/…`), and the
 * paths of the directories seen, where the way of reading lists them (a drop does; the folder picker lists
 * files only, so it cannot see an empty directory). A drop names its `folder`: it reads only the bundle's own files
 * (`readOfBundle`), so a folder of other files gives none.
 */
export function bundleFromFiles(
  files: Array<{ path: string; file: Blob }>,
  directories: readonly string[] = [],
  folder?: string,
): PickedBundle | string {
  const name = folder ?? files[0]?.path.split('/')[0];
  if (name === undefined) return 'the folder is empty';
  const inside = new Map<string, Blob>();
  for (const { path, file } of files) {
    const parts = path.split('/');
    if (parts[0] !== name) return 'pick one bundle folder';
    inside.set(parts.slice(1).join('/'), file);
  }
  // A directory where a tree file belongs is refused as `verify` refuses it (BUNDLE_INVALID: not a regular file), not
  // taken for an absent file, and when `verify` refuses it: checkpoint.note, which every check reads, when the folder
  // is chosen; another tree file's name when a check reads it (`notFiles`: a full bundle reads no proofs.jsonl or
  // heads.jsonl, and verify passes one with a directory there). A drop lists every directory; the folder picker lists
  // files only, so it sees one only by the files inside it (an empty one is then absent, as a symlink is).
  // (bundle.json or manifests.jsonl as a directory: absent, BUNDLE_INVALID either way.)
  const holding = new Set<string>();
  for (const path of inside.keys()) if (path.includes('/')) holding.add(path.slice(0, path.indexOf('/')));
  const notFiles = BUNDLE_TREE_FILES.filter((file) => directories.includes(`${name}/${file}`) || holding.has(file));
  if (notFiles.includes(BUNDLE_CHECKPOINT_FILE))
    return `BUNDLE_INVALID: ${BUNDLE_CHECKPOINT_FILE} in ${quoted(name)} is a directory, not a regular file`;
  const manifests = inside.get(BUNDLE_MANIFESTS_FILE);
  // verify's code for it (src/ops/bundle-dir.ts: BUNDLE_INVALID), as for the refusals above and a missing bundle.json.
  if (!manifests)
    return `BUNDLE_INVALID: the folder ${quoted(name)} has no ${BUNDLE_MANIFESTS_FILE}; it is not a bundle`;
  const header = inside.get(BUNDLE_HEADER_FILE);
  // As the CLI (src/ops/bundle-dir.ts): a blobs/ directory, even an empty one, says the bundle carries blobs.
  let blobs: Record<string, Blob> | undefined = directories.includes(`${name}/blobs`)
    ? (Object.create(null) as Record<string, Blob>)
    : undefined;
  for (const [path, file] of inside) {
    if (!path.startsWith('blobs/')) continue;
    blobs ??= Object.create(null) as Record<string, Blob>;
    const hex = path.slice(BUNDLE_BLOB_DIR.length + 1);
    if (path.startsWith(`${BUNDLE_BLOB_DIR}/`) && HEX64.test(hex)) blobs[hex] = file;
  }
  const tree: Partial<Record<BundleTreeFile, Blob>> = {};
  for (const file of BUNDLE_TREE_FILES) {
    const found = inside.get(file);
    if (found) tree[file] = found;
  }
  const count = blobs ? Object.keys(blobs).length : 0;
  return {
    name,
    source: {
      kind: 'files',
      manifests,
      tree,
      ...(header ? { header } : {}),
      ...(blobs ? { blobs } : {}),
      ...(notFiles.length > 0 ? { notFiles } : {}),
    },
    description: `bundle ${quoted(name)}: ${manifests.size.toLocaleString('en-US')} bytes of manifests${blobs ? `, ${counted(count, 'blob')}` : ''}${tree[BUNDLE_CHECKPOINT_FILE] ? `, cut at ${BUNDLE_CHECKPOINT_FILE}` : ''}`,
  };
}

/**
 * What the walk of a dropped folder does with the entry at `path` inside it (`/`-separated) of `kind`: `read` the
 * files `verify` opens (bundle.json, manifests.jsonl, the tree files, `blobs/blake3/<64 hex>`), `enter` `blobs/` and
 * `blobs/blake3/`, `list` any other directory at the top (a tree file's name as a directory is refused as `verify`
 * refuses it), and `skip` the rest, neither read nor entered, as `verify` never opens them.
 */
export function readOfBundle(path: string, kind: 'file' | 'directory'): 'read' | 'enter' | 'list' | 'skip' {
  if (kind === 'directory') {
    if (path === 'blobs' || path === BUNDLE_BLOB_DIR) return 'enter';
    return path.includes('/') ? 'skip' : 'list';
  }
  if (path === BUNDLE_HEADER_FILE || path === BUNDLE_MANIFESTS_FILE) return 'read';
  if ((BUNDLE_TREE_FILES as readonly string[]).includes(path)) return 'read';
  return path.startsWith(`${BUNDLE_BLOB_DIR}/`) && HEX64.test(path.slice(BUNDLE_BLOB_DIR.length + 1)) ? 'read' : 'skip';
}

export function filesOfInput(list: FileList): Array<{ path: string; file: Blob }> {
  return [...list].map((file) => ({ path: file.webkitRelativePath || file.name, file }));
}

export interface Preload {
  bundle?: { name: string; base: string; hasBlobs: boolean; tree?: BundleTreeFile[] };
  /** `audit-ui --trust`: where the trust is served (the files given, merged as `verify` merges them), their names. */
  trust?: { url: string; names: string[] };
  /** `audit-ui --since`: where the earlier checkpoint is served, and its file's name. */
  since?: { url: string; name: string };
  /** `audit-ui --witness-keys --quorum`: where the keys are served, the file's name and the quorum. */
  witnessKeys?: { url: string; name: string; quorum: number };
  /** `audit-ui --require-blobs --expect --principal --session --max-bundle-bytes`: the auditor's settings, preset. */
  requireBlobs?: boolean;
  expect?: 'full' | 'filtered';
  principal?: string;
  session?: string;
  maxBundleBytes?: number;
}

/** The preload `handoff-ledger audit-ui` announces in `<meta name="handoff-ledger-preload">`, if any. */
export function preloadOf(doc: Document): Preload | undefined {
  const meta = doc.querySelector('meta[name="handoff-ledger-preload"]');
  if (!meta || (location.protocol !== 'http:' && location.protocol !== 'https:')) return undefined;
  try {
    return JSON.parse(meta.getAttribute('content') ?? '') as Preload;
  } catch {
    return undefined;
  }
}

export function bundleFromPreload(p: NonNullable<Preload['bundle']>): PickedBundle {
  return {
    name: p.name,
    source: { kind: 'url', base: new URL(p.base, location.href).href, hasBlobs: p.hasBlobs, tree: p.tree ?? [] },
    description: `bundle ${quoted(p.name)}, served by handoff-ledger audit-ui`,
  };
}
