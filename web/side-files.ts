/**
 * The small files an auditor gives beside the bundle, each with its own picker and each placeable by a
 * drop: the pinned trust files (required: one, or one per host of a shared store), an earlier checkpoint (optional, as `verify --since`) and pinned
 * witness keys (optional, as `verify --witness-keys`, with the quorum input beside them). A further kind is
 * one more entry here, one more picker in index.html and one more field in the worker's request. Bounds and
 * error wording are the CLI's (src/cli/verify.ts, src/cli/export.ts, manifests/audit/verify-witnesses.ts).
 */

import { quoted } from '../manifests/encoding/printable.js';

/** verify-witnesses.ts's MAX_WITNESS_KEYS_BYTES, not imported: that module would bring the verifier into the page's own script. */
const MAX_WITNESS_KEYS_BYTES = 16 * 1024 * 1024;

export type SideFileRole = 'trust' | 'since' | 'witnesses';

export interface SideFileKind {
  /**
   * The id of its file input in index.html (hidden: its button `ROLE-choose` opens it, and `ROLE-chosen` under the
   * button says what is chosen).
   */
  input: string;
  /** How the page names it ("trust file x.json", "no earlier checkpoint"). */
  noun: string;
  required: boolean;
  /**
   * Whether the auditor may give several at once, all taken (the trust files of a shared store's hosts, merged as
   * `verify --trust a.json --trust b.json` merges them); else one: its picker has no `multiple`, and two dropped
   * together are refused.
   */
  several: boolean;
  /** A dropped file with one of these name endings is this kind (lower case). */
  suffixes: readonly string[];
  /** The CLI's refusal of a file over its bound: code and message for a file named `name`. */
  tooLarge: { bytes: number; refusal: (name: string) => string };
  /**
   * The CLI's refusal of a file it cannot read (gone or changed since it was chosen, no permission): code and message,
   * the file's names (the files audit-ui was given for one it serves) quoted as the CLI quotes a path.
   */
  unreadable: (names: readonly string[], reason: string) => string;
}

export const SIDE_FILES: Readonly<Record<SideFileRole, SideFileKind>> = {
  trust: {
    input: 'trust-input',
    noun: 'trust file',
    required: true,
    several: true,
    suffixes: ['.json'],
    tooLarge: {
      bytes: 16 * 1024 * 1024,
      refusal: (n) => `TRUST_INVALID: trust file ${quoted(n)} is over ${16 * 1024 * 1024} bytes`,
    },
    unreadable: (n, reason) => `TRUST_INVALID: cannot read trust file ${n.map(quoted).join(', ')}: ${reason}`,
  },
  since: {
    input: 'since-input',
    noun: 'earlier checkpoint',
    required: false,
    several: false,
    suffixes: ['.note'],
    tooLarge: { bytes: 64 * 1024, refusal: (n) => `USAGE: --since ${quoted(n)}: over 64 KiB` },
    unreadable: (n, reason) => `USAGE: --since ${n.map(quoted).join(', ')}: ${reason}`,
  },
  witnesses: {
    input: 'witness-keys-input',
    noun: 'witness keys',
    required: false,
    several: false,
    // The docs' name is witnesses.txt: one cosignature/v1 verifier key per line.
    suffixes: ['.txt', '.vkeys'],
    tooLarge: {
      bytes: MAX_WITNESS_KEYS_BYTES,
      refusal: (n) => `USAGE: --witness-keys ${quoted(n)}: input is larger than ${MAX_WITNESS_KEYS_BYTES} bytes`,
    },
    unreadable: (n, reason) => `USAGE: --witness-keys ${n.map(quoted).join(', ')}: ${reason}`,
  },
};

export const SIDE_FILE_ROLES = Object.keys(SIDE_FILES) as SideFileRole[];

/** The kind of a dropped file, by its name; `undefined` when it is none the page takes. */
export function roleOfDroppedFile(name: string): SideFileRole | undefined {
  const lower = name.toLowerCase();
  return SIDE_FILE_ROLES.find((role) => SIDE_FILES[role].suffixes.some((s) => lower.endsWith(s)));
}

/** What a dropped file that is no side file gets told. */
export function unplacedFile(name: string): string {
  const kinds = SIDE_FILE_ROLES.map((r) => `${SIDE_FILES[r].noun} (${SIDE_FILES[r].suffixes.join(', ')})`);
  return `${quoted(name)} is not a folder, nor a ${kinds.join(' or ')}: use the pickers to choose it`;
}
