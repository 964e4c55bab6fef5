/** How every layer reports a value its zod schema refused: the first issue, as `path: message`. */
import type { z } from 'zod';
import { nearestName, shownValue, TERMINAL_ACTING } from '../../store/errors.js';

/** The longest path segment and message a report quotes: a hostile input's key can be megabytes long. */
export const MAX_SEGMENT_CHARS = 100;
export const MAX_MESSAGE_CHARS = 500;

/** Every character a terminal acts on (TERMINAL_ACTING: C0 such as ESC, DEL, C1, bidi overrides, separators…). */
const ACTING = new RegExp(`[${TERMINAL_ACTING}]`, 'gu');
const escapedChar = (c: string): string =>
  [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

/**
 * The text clipped; with `escaped`, nothing a terminal acts on left raw either (as a `\uXXXX` escape): zod quotes an
 * unknown key as it is, without escaping anything (`"${key}"`).
 */
const clip = (text: string, max: number, escaped: boolean): string => {
  const clipped = text.length > max ? `${text.slice(0, max)}…` : text;
  return escaped ? clipped.replace(ACTING, escapedChar) : clipped;
};

/** A key that a path names as it is: a plain name (`keys`, `notAfter`, `max-bytes`), not one that looks like an index. */
const PLAIN_KEY = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/**
 * One segment of an issue's path as a report names it: an array index and a plain name of at most MAX_SEGMENT_CHARS
 * as they are (`keys.0.notAfter`), any other key quoted as `shownValue` quotes a value, cut at MAX_SEGMENT_CHARS with
 * `…` after the quote (`logs."a: b".size`, `"\u001b[2J"`, `""`), with `escaped` or without: a key of a record from a
 * hostile file holding `: `, `.`, spaces or controls cannot pass for the path's or the message's structure, nor a key
 * `"0"` for an index.
 */
function pathSegment(segment: PropertyKey): string {
  if (
    typeof segment === 'number' ||
    (typeof segment === 'string' && segment.length <= MAX_SEGMENT_CHARS && PLAIN_KEY.test(segment))
  )
    return String(segment);
  return typeof segment === 'string'
    ? shownValue(segment, MAX_SEGMENT_CHARS)
    : clip(String(segment), MAX_SEGMENT_CHARS, true);
}

/** A schema node as zod 4 defines it: enough of `_zod.def` to walk to the object an issue's path is in. */
interface SchemaNode {
  _zod: {
    def: {
      type: string;
      shape?: Record<string, SchemaNode>;
      element?: SchemaNode;
      valueType?: SchemaNode;
      innerType?: SchemaNode;
      in?: SchemaNode;
    };
  };
}

/** What a wrapper (optional, nullable, default…) or a pipe's input is of, down to the schema that reads the value. */
function unwrapped(node: SchemaNode | undefined): SchemaNode | undefined {
  for (let depth = 0; node !== undefined && depth < 32; depth++) {
    const def = node._zod.def;
    const inner = def.innerType ?? (def.type === 'pipe' ? def.in : undefined);
    if (inner === undefined) return node;
    node = inner;
  }
  return node;
}

/** The field names of the object schema at `path` inside `schema`, or undefined when it is not an object schema. */
function fieldsAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] | undefined {
  let node = unwrapped(schema as unknown as SchemaNode);
  for (const segment of path) {
    const def = node?._zod.def;
    if (def?.type === 'object')
      node = Object.hasOwn(def.shape ?? {}, segment) ? def.shape![String(segment)] : undefined;
    else if (def?.type === 'array') node = def.element;
    else if (def?.type === 'record') node = def.valueType;
    else return undefined;
    node = unwrapped(node);
  }
  const def = node?._zod.def;
  return def?.type === 'object' && def.shape ? Object.keys(def.shape) : undefined;
}

/**
 * The first issue as `path: message`, each path segment (a key that is no plain name quoted: `pathSegment`) and the
 * message clipped (`…`): zod quotes an unknown key
 * whole, and a bundle's or trust file's keys are the auditor's input, so a finding would otherwise repeat a key of any
 * size (an 80 MB report from 2,000 findings of 40 KiB keys).
 *
 * `escaped`: what a terminal acts on in a key or segment it quotes (ESC, C1 controls, bidirectional overrides) as
 * `\uXXXX`, as `shownValue` quotes a caller's value in a refusal: for the library's own refusals (a summary's key a
 * model wrote, a key file's, a trust file's or a witness's logs file's, which operators and auditors write by hand)
 * and the auditor's findings about a bundle (a manifest's, bundle.json's), which the CLI and the page print through
 * `printableOnce`. Without it the text is as zod gives it (an unknown key in raw quotes: a key spelled `k\x1b` reads
 * as one holding ESC once the line is escaped).
 *
 * `schema` (with `escaped`): the schema that refused the value. An unknown key is then named as the options objects'
 * are, with the known field it is a slip of (`unknown field "nextstep" (did you mean 'nextSteps'?)`), not in zod's
 * words, which name no field the schema knows.
 */
export function describeZodError(
  error: z.ZodError,
  { escaped = false, schema }: { escaped?: boolean; schema?: z.ZodType } = {},
): string {
  const issue = error.issues[0];
  if (!issue) return '(root): invalid';
  const path = issue.path.map(pathSegment).join('.');
  const where = issue.path.length > 0 ? path : '(root)';
  if (escaped && schema !== undefined && issue.code === 'unrecognized_keys' && issue.keys.length > 0) {
    const fields = fieldsAt(schema, issue.path);
    if (fields !== undefined) {
      const name = issue.keys[0]!;
      const near = nearestName(name, fields);
      const hint = near === undefined ? '' : ` (did you mean '${near}'?)`;
      const more = issue.keys.length > 1 ? `, and ${issue.keys.length - 1} more unknown` : '';
      return `${where}: unknown field ${shownValue(name, MAX_SEGMENT_CHARS)}${hint}${more}`;
    }
  }
  // zod says a missing field "Invalid input: expected string, received undefined": name it missing instead.
  const field = issue.path.at(-1);
  if (issue.code === 'invalid_type' && typeof field === 'string' && / received undefined$/.test(issue.message)) {
    return `${where}: required field missing (expected ${issue.expected})`;
  }
  return `${where}: ${clip(issue.message, MAX_MESSAGE_CHARS, escaped)}`;
}
