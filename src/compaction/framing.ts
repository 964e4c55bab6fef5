/**
 * How text of unknown origin is shown to a model inside a message the library frames (the resumed handoff, a tool
 * result sent as text): every line of it indented, and ids and paths quoted, so none of it starts a line of its own.
 */

/** Every mandatory line break of Unicode's line breaking (UAX #14: BK, CR, LF, NL) and the C0 separators. */
export const LINE_BREAK = /\r\n|[\n\v\f\r\x1c-\x1e\x85\u2028\u2029]/g;

/**
 * A value as it is shown: every line after its first indented by two spaces. No line of the value starts at the
 * line's beginning, so it cannot forge a header, a section, an item or a footer of the message around it (and the
 * rendering stays one-to-one: each line break is followed by exactly the two spaces added here).
 */
export function indented(value: string): string {
  return value.replace(LINE_BREAK, (lineBreak) => `${lineBreak}  `);
}

/**
 * A string as a JSON string that `JSON.parse` gives back as it was, on one line. JSON.stringify leaves NEL, LINE
 * SEPARATOR and PARAGRAPH SEPARATOR as they are, and `indented` would add two spaces after each (a value shown
 * otherwise than it is stored); escaped, the quoted value holds no line break at all.
 */
export function quoted(value: string): string {
  return JSON.stringify(value).replace(
    /[\x85\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
