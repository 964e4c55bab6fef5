/**
 * Terminal-safe text: the CLI's lines, and the auditor page's, which shows the same words (isomorphic). Whatever a
 * report or message carries from a manifest, a bundle, a trust file or a stored record is data: a control character
 * in it could move the cursor, erase lines and print a fake verdict. Every human-readable line the CLI writes goes
 * through `printable`, which escapes C0/C1 controls, DEL, line and paragraph separators, bidirectional and invisible
 * format characters and lone surrogates as `\xNN` / `\u{N}` (and the backslash itself, so an escape in the output
 * cannot be forged by the input).
 */

import { escapeRawInJson, TERMINAL_ACTING } from '../../store/errors.js';

// Every character a terminal acts on or shows as nothing but the tab (TERMINAL_ACTING: controls, format characters,
// separators, default-ignorables; one list with shownValue's and printableJson's, so they cannot drift), and lone
// surrogates (Cs: with the `u` flag only an unpaired unit is one).
const CONTROL = new RegExp(`(?!\\t)[${TERMINAL_ACTING}\\p{Cs}]`, 'u');
const UNSAFE = new RegExp(`\\\\|${CONTROL.source}`, 'gu');
// What `printableOnce` escapes: `printable`'s characters but the backslash (the tab too is left as it is).
const UNSAFE_IN_LINE = new RegExp(CONTROL.source, 'gu');

function escapeChar(c: string): string {
  if (c === '\\') return '\\\\';
  const code = c.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/** One line of output with every unsafe character escaped (a newline in the data is escaped too). */
export function printable(text: string): string {
  return text.replace(UNSAFE, escapeChar);
}

/**
 * One line for a terminal, escaped once: every character `printable` escapes but the backslash and the tab (a line
 * break, a control or format character left raw) escaped as `printable` escapes it, the rest as it is. Text made so
 * once passes unchanged again (never escaped twice), and a value quoted in it (`quoted`, `shownValue`: a JSON string,
 * its backslashes escaped) keeps its escapes as they were written, whatever else the line holds: escaping a whole line
 * that held one raw control again, as this did, doubled every backslash of its quotes (`"a\\u001b"`). As with
 * `escapedOnce` in `printableRow`, an escape in its output is unforgeable where the text quotes what came from outside;
 * a value put in raw (an errno message's path) that holds the six characters `\u001b` prints as a quoted ESC would,
 * beside a raw control character or not. Nothing a terminal acts on passes raw.
 */
export function printableOnce(text: string): string {
  return text.replace(UNSAFE_IN_LINE, escapeChar);
}

/**
 * `text` as a message quotes a value: a JSON string with nothing a terminal acts on left raw (store/errors.ts, so that
 * every layer quotes so). One terminal-safe line, which `printableOnce` prints as it is.
 */
export { quoted } from '../../store/errors.js';

/** Several lines, each made printable, each ended by a newline. */
export function printableLines(lines: string[]): string {
  return lines.map((l) => `${printable(l)}\n`).join('');
}

/** Several lines each escaped once (`printableOnce`: their quoted values as they are), each ended by a newline. */
export function printableOnceLines(lines: readonly string[]): string {
  return lines.map((l) => `${printableOnce(l)}\n`).join('');
}

/** A field of `printableRow` that is escaped once already (a message quoting values with `quoted`): see `escapedOnce`. */
export interface EscapedOnce {
  readonly escapedOnce: string;
}

/**
 * `text` as a field of `printableRow` that is escaped once already: its backslashes are left as they are (the escapes of
 * the values it quotes with `quoted` or `shownValue`, which `printable` would double: `"\\u001b"`), and only what
 * would still break the row or act on a terminal is escaped, as `printable` escapes it: a tab (`\x09`: no column of
 * its own), a line break, a control or format character left raw. As with `printableOnce`, an escape in it is
 * unforgeable where the text quotes what came from outside and its own words hold no backslash: a quoted value holds
 * no raw tab or control (JSON escapes them) and writes a backslash of its own doubled, so each `\xNN` outside its
 * quotes is one this escaping wrote.
 */
export const escapedOnce = (text: string): EscapedOnce => ({ escapedOnce: text });

// What a field escaped once must still have escaped: everything `printable` escapes but the backslash, the tab
// (a column) and the newline (a row) included.
const UNSAFE_IN_FIELD = new RegExp(`[${TERMINAL_ACTING}\\p{Cs}]`, 'gu');

/**
 * One row of tab-separated fields, ended by a newline: each field made printable with its tabs escaped too (`\x09`),
 * so a field of stored free text (who decided a grant, a key id, a finding's message) cannot add columns; a field
 * given as `escapedOnce(text)` keeps its backslashes and has the rest escaped so.
 */
export function printableRow(fields: Array<string | EscapedOnce>): string {
  const field = (f: string | EscapedOnce): string =>
    typeof f === 'string' ? printable(f).replace(/\t/g, '\\x09') : f.escapedOnce.replace(UNSAFE_IN_FIELD, escapeChar);
  return `${fields.map(field).join('\t')}\n`;
}

/** True when `text` holds no character `printable` would escape other than the backslash (newlines allowed). */
export function isTerminalSafe(text: string): boolean {
  return text.split('\n').every((line) => !CONTROL.test(line));
}

/**
 * Text that tools verify byte for byte (a signed note): written exactly when it is terminal-safe and has no backslash,
 * else line by line escaped (only an origin chosen to carry such characters, or a tampered store, puts them there;
 * `--json` still gives the exact note, JSON-escaped). Never two texts alike: the escaped form doubles every
 * backslash (a raw `\x00` cannot pass for an escaped NUL), and a text without a final newline ends with the line
 * `\ (no newline at end)`, which no escaped line can be.
 */
export function printableExact(text: string): string {
  if (isTerminalSafe(text) && !text.includes('\\')) return text;
  const whole = text.endsWith('\n');
  const lines = (whole ? text.slice(0, -1) : text).split('\n');
  return printableLines(lines) + (whole ? '' : '\\ (no newline at end)\n');
}

/** JSON text (pretty-printed) equal in meaning to `JSON.stringify(value)`, with nothing a terminal acts on left raw. */
export function printableJson(value: unknown): string {
  return escapeRawInJson(JSON.stringify(value, null, 2));
}

/**
 * `word` as one POSIX shell word, for a command a message suggests: as it is when it holds only characters no shell
 * treats specially, else single-quoted (a `'` inside as `'\''`), so a pasted command runs nothing else.
 */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_.:/@%+=,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * Whether `word` can be shown in a message as a shell word to paste: it holds nothing a terminal acts on
 * (`printableOnce` would print such a character escaped, and the escape pasted is other text), no tab (pasted into a
 * shell, it completes), no line break and no backslash (shown beside the message's quoted values, whose escapes are
 * backslashes, it could read as one). Else the message names the value quoted (`quoted`) instead.
 */
export function isPastable(word: string): boolean {
  return isTerminalSafe(word) && !/[\t\n\\]/.test(word);
}

/** `word` as one shell word a message can give to be pasted (`shellWord`), when `isPastable`; else undefined. */
export function pastableShellWord(word: string): string | undefined {
  return isPastable(word) ? shellWord(word) : undefined;
}

/** `1 manifest`, `2 manifests`, `0 manifests`: a count and its noun, singular only for one. */
export function counted(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
