/**
 * Terminal-safe text: the CLI's lines, and the auditor page's, which shows the same words (isomorphic). Whatever a
 * report or message carries from a manifest, a bundle, a trust file or a stored record is data: a control character
 * in it could move the cursor, erase lines and print a fake verdict. Every human-readable line the CLI writes goes
 * through `printable`, which escapes C0/C1 controls, DEL, line and paragraph separators, bidirectional and invisible
 * format characters and lone surrogates as `\xNN` / `\u{N}` (and the backslash itself, so an escape in the output
 * cannot be forged by the input).
 */

// C0 (but tab), DEL, C1; soft hyphen; zero-width and bidi marks; line/paragraph separators; bidi embeddings and
// isolates; word joiner…invisible operators; BOM; interlinear annotation; lone surrogates.
const UNSAFE =
  /[\\\x00-\x08\x0a-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function escapeChar(c: string): string {
  if (c === '\\') return '\\\\';
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/** One line of output with every unsafe character escaped (a newline in the data is escaped too). */
export function printable(text: string): string {
  return text.replace(UNSAFE, escapeChar);
}

/** Several lines, each made printable, each ended by a newline. */
export function printableLines(lines: string[]): string {
  return lines.map((l) => `${printable(l)}\n`).join('');
}

/** True when `text` holds no character `printable` would escape other than the backslash (newlines allowed). */
export function isTerminalSafe(text: string): boolean {
  return text.split('\n').every((line) => line.replaceAll('\\', '') === printable(line.replaceAll('\\', '')));
}

/**
 * Text that tools verify byte for byte (a signed note): written exactly when it is terminal-safe, else line by line
 * escaped (only an origin chosen to carry such characters, or a tampered store, puts them there; `--json` still
 * gives the exact note, JSON-escaped).
 */
export function printableExact(text: string): string {
  if (isTerminalSafe(text)) return text;
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
  return printableLines(lines);
}

// What JSON.stringify leaves raw that a terminal acts on: DEL, C1, bidi and invisible format characters,
// separators. They can only occur inside JSON strings, where a \u escape means the same character.
const UNSAFE_IN_JSON =
  /[\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]/g;

/** JSON text (pretty-printed) equal in meaning to `JSON.stringify(value)`, with nothing a terminal acts on left raw. */
export function printableJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    UNSAFE_IN_JSON,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
