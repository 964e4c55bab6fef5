/**
 * The small files an auditor gives beside the bundle, each with its own picker and each placeable by a
 * drop: the pinned trust file (required) and an earlier checkpoint (optional, as `verify --since`). A
 * further kind (witness keys) is one more entry here, one more picker in index.html and one more field in
 * the worker's request. Bounds and error wording are the CLI's (src/cli/verify.ts, src/cli/export.ts).
 */

export type SideFileRole = 'trust' | 'since';

export interface SideFileKind {
  /** The id of its file input in index.html. */
  input: string;
  /** How the page names it ("trust file x.json", "no earlier checkpoint"). */
  noun: string;
  required: boolean;
  /** A dropped file with one of these name endings is this kind (lower case). */
  suffixes: readonly string[];
  /** The CLI's refusal of a file over its bound: code and message for a file named `name`. */
  tooLarge: { bytes: number; refusal: (name: string) => string };
}

export const SIDE_FILES: Readonly<Record<SideFileRole, SideFileKind>> = {
  trust: {
    input: 'trust-input',
    noun: 'trust file',
    required: true,
    suffixes: ['.json'],
    tooLarge: {
      bytes: 16 * 1024 * 1024,
      refusal: (n) => `TRUST_INVALID: trust file ${n} is over ${16 * 1024 * 1024} bytes`,
    },
  },
  since: {
    input: 'since-input',
    noun: 'earlier checkpoint',
    required: false,
    suffixes: ['.note'],
    tooLarge: { bytes: 64 * 1024, refusal: (n) => `USAGE: --since ${n}: over 64 KiB` },
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
  return `${JSON.stringify(name)} is not a folder, nor a ${kinds.join(' or ')}: use the pickers to choose it`;
}
