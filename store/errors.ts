/**
 * One error base for every layer. Each layer has a one-line subclass with a closed union of codes; the
 * `code` is the contract (semver applies to codes, not messages). Lower layers' errors pass through the
 * upper layers unchanged, so a caller tests `isHandoffLedgerError(err)` and then `err.code`.
 * The base lives in the lowest layer so that every layer can extend it without importing upwards.
 */
export interface ErrorOptions {
  cause?: unknown;
}

export abstract class HandoffLedgerError<Code extends string = string> extends Error {
  readonly code: Code;
  constructor(code: Code, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** A layer's error class, as the shared helpers below construct it. */
export type ErrorClass<Code extends string> = new (code: Code, message: string, options?: ErrorOptions) => Error;

export type StoreErrorCode =
  | 'INVALID_DIGEST'
  | 'INVALID_ARGUMENT'
  | 'BLOB_NOT_FOUND'
  | 'BLOB_INTEGRITY'
  | 'BLOB_TOO_LARGE'
  | 'UNSAFE_ROOT'
  | 'UNSAFE_PATH'
  | 'STORAGE_FAILED'
  | 'LOCKED'
  | 'FORMAT_UNSUPPORTED'
  | 'CANCELLED';

/** Errors of the blob-store layer. */
export class StoreError extends HandoffLedgerError<StoreErrorCode> {
  override readonly name = 'StoreError';
}

/** Is `err` an error of this library (any layer, the auditor included)? */
export function isHandoffLedgerError(err: unknown): err is HandoffLedgerError {
  return err instanceof HandoffLedgerError;
}

/**
 * Throws `CANCELLED` (of the calling layer's class) if the signal is aborted; called at every await point
 * of a write, so a cancelled operation stops before its next side effect.
 */
export function throwIfAborted(signal: AbortSignal | undefined, Class: ErrorClass<'CANCELLED'> = StoreError): void {
  if (signal?.aborted) throw new Class('CANCELLED', OPERATION_CANCELLED, { cause: signal.reason });
}

/** What a `CANCELLED` says where the wait it ended (a store's, a lock's) does not know the call it was made for. */
export const OPERATION_CANCELLED = 'operation cancelled';

/**
 * `err`, or, a `CANCELLED` that says only `operation cancelled`, one that names the call it ended (`resume
 * cancelled`): the same class, code and cause (the signal's reason), so a caller that told its timeout from its
 * user's stop by `err.cause` still does. Any other error, and a `CANCELLED` that already says more, as it is.
 */
export function namedCancel(err: unknown, call: string): unknown {
  if (!isHandoffLedgerError(err) || err.code !== 'CANCELLED' || err.message !== OPERATION_CANCELLED) return err;
  const Class = err.constructor as ErrorClass<'CANCELLED'>;
  return new Class('CANCELLED', `${call} cancelled`, { cause: err.cause });
}

/**
 * Refuses a `signal` option that is neither absent nor an AbortSignal: `INVALID_ARGUMENT` of the calling layer's class,
 * `prefix` naming the options where the message needs it (`postgres blob store: `).
 */
export function refuseNonSignal(
  signal: unknown,
  Class: ErrorClass<'INVALID_ARGUMENT'> = StoreError,
  prefix = '',
): asserts signal is AbortSignal | undefined {
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new Class('INVALID_ARGUMENT', `${prefix}signal must be an AbortSignal`);
}

/** An error of a system call as Node reports one: its `code` an errno name (`ENOENT`, `EACCES`, `EIO`, …). */
export interface ErrnoError extends Error {
  code: string;
  errno?: number;
  syscall?: string;
  path?: string;
}

/**
 * Is `err` the error of a system call (`err.code` an errno name such as `ENOENT`, `EACCES`): an I/O failure, not a
 * bug? The one test every layer applies (the CLI's `IO_FAILED`, a key file's `STORAGE_FAILED`, an atomic write's error).
 */
export function isErrnoError(err: unknown): err is ErrnoError {
  const code = (err as { code?: unknown } | undefined)?.code;
  return err instanceof Error && typeof code === 'string' && /^E[A-Z0-9]+$/.test(code);
}

/**
 * `true` exactly when `List` names every field of `T`: `const every: NamesEveryField<T, typeof LIST> = true` fails to
 * compile once a field is added to `T` and not to the list that `readOptionFields` reads.
 */
export type NamesEveryField<T, List extends ReadonlyArray<keyof T>> =
  Exclude<keyof T, List[number]> extends never ? true : never;

/**
 * The named fields of a caller's options object, each read once into a plain object: a getter or a proxy that throws
 * as a field is read is an option that cannot be read (`INVALID_ARGUMENT` of the calling layer's class, naming it, with
 * the failure as the cause), not an uncoded crash; and what the caller checks is what it then uses (a getter is not
 * asked again). `undefined` and `null` are no options (every field absent); anything else that is not an object (a
 * number, a string, a boolean, a symbol, a bigint) is `INVALID_ARGUMENT`.
 * A field it does not know (an own enumerable string key not in `names`: `expectedprev` for `expectedPrev`) is
 * `INVALID_ARGUMENT` too, before any field is read, naming it and the known name it is close to: ignored, a misspelled
 * option would leave out what the caller meant (a publish without its `expectedPrev` guard). `others: 'allowed'` is for
 * the objects that are no options (a signer, a record) and may carry more; symbol keys are never refused.
 */
export function readOptionFields<K extends string>(
  options: unknown,
  names: readonly K[],
  what: string,
  Class: ErrorClass<'INVALID_ARGUMENT'>,
  others: 'refused' | 'allowed' = 'refused',
): { [P in K]?: unknown } {
  return readOptionFieldsAs(options, names, what, (message, o) => new Class('INVALID_ARGUMENT', message, o), others);
}

/** `readOptionFields` for a layer whose refusal of bad options has another code (the auditor's `USAGE`). */
export function readOptionFieldsAs<K extends string>(
  options: unknown,
  names: readonly K[],
  what: string,
  refuse: (message: string, options?: ErrorOptions) => Error,
  others: 'refused' | 'allowed' = 'refused',
): { [P in K]?: unknown } {
  const out: { [P in K]?: unknown } = {};
  if (options === undefined || options === null) return out;
  // A number, string or boolean is no options object (a field meant for it passed in its place): not read as none.
  if (typeof options !== 'object' && typeof options !== 'function')
    throw refuse(`${what} must be an object (null or undefined: none), not ${typeWithArticle(options)}`);
  if (others === 'refused') refuseUnknownOptions(options, names, what, refuse);
  for (const name of names) {
    let value: unknown;
    try {
      value = (options as Record<string, unknown>)[name];
    } catch (err) {
      throw refuse(`${what}: reading its ${name} failed`, { cause: err });
    }
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * Refuses an options object that has a field `names` does not list (its own enumerable string keys; symbols are not
 * looked at), naming the first such field (escaped and shortened: `shownValue`) and the known name it is close to, if
 * one is (equal but for case, or at most two edits away): `publish options: unknown option "expectedprev" (did you
 * mean 'expectedPrev'?)`. A proxy whose keys cannot be listed is refused as well, with that failure as the cause.
 * @throws what `refuse` makes (the calling layer's `INVALID_ARGUMENT`, or the auditor's `USAGE`)
 */
export function refuseUnknownOptions(
  options: object,
  names: readonly string[],
  what: string,
  refuse: (message: string, options?: ErrorOptions) => Error,
): void {
  let keys: string[];
  try {
    keys = Object.keys(options);
  } catch (err) {
    throw refuse(`${what}: listing its fields failed`, { cause: err });
  }
  const unknown = keys.filter((key) => !names.includes(key));
  if (unknown.length === 0) return;
  const name = unknown[0]!;
  const near = nearestName(name, names);
  const hint = near === undefined ? '' : ` (did you mean '${near}'?)`;
  const more = unknown.length > 1 ? `, and ${unknown.length - 1} more unknown` : '';
  throw refuse(`${what}: unknown option ${shownValue(name)}${hint}${more}`);
}

/**
 * The known name `name` is a slip of: equal to it but for case, else the nearest at most two edits away. Also the CLI's
 * hint for an unknown option (`--hots`: did you mean '--host'?).
 */
export function nearestName(name: string, names: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const sameButCase = names.find((n) => n.toLowerCase() === lower);
  if (sameButCase !== undefined) return sameButCase;
  let best: string | undefined;
  let bestDistance = 3;
  for (const n of names) {
    // Two edits turn any two-letter name into any other: a suggestion needs more of the name to be right than wrong.
    const d = editDistance(lower, n.toLowerCase(), bestDistance);
    if (d < bestDistance && d < Math.min(name.length, n.length)) {
      best = n;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * Levenshtein distance with adjacent transpositions counted as one edit (`exepctedPrev`), or `limit` when it is at
 * least that (names whose lengths differ by `limit` or more are not compared: a megabyte key costs nothing).
 */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) >= limit) return limit;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row.push(d);
    }
    before = previous;
    previous = row;
  }
  return Math.min(previous[b.length]!, limit);
}

/**
 * Every character a terminal acts on or shows as nothing: controls (Cc: C0, DEL, C1), invisible format characters
 * (Cf: zero-width and bidi marks, embeddings, isolates, BOM, tags…), line and paragraph separators (Zl, Zp), and what
 * Unicode says a renderer shows as nothing (Default_Ignorable_Code_Point: variation selectors, which can carry hidden
 * bytes, Hangul fillers…). One list, here at the lowest layer, for `shownValue` and for the CLI's and the page's
 * printable text and JSON (manifests/encoding/printable.ts), so they cannot drift.
 */
export const TERMINAL_ACTING = '\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}\\p{Default_Ignorable_Code_Point}';

// What JSON.stringify leaves raw of those (it escapes C0 and lone surrogates itself). They can only occur inside JSON
// strings, where \u escapes (a surrogate pair for an astral one) mean the same character.
const RAW_IN_JSON = new RegExp(`(?![\\x00-\\x1f])[${TERMINAL_ACTING}]`, 'gu');
const jsonEscape = (c: string): string =>
  [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

/** JSON text with nothing a terminal acts on left raw: what JSON.stringify left raw, as JSON escapes (same meaning). */
export function escapeRawInJson(json: string): string {
  return json.replace(RAW_IN_JSON, jsonEscape);
}

// Lone surrogates too (a text cut inside a pair, as V8 cuts the input it quotes in a JSON.parse error): left raw, the
// printer (`printableOnce`) would show it as `\u{d800}`, another escape than the message's own `\ud800`.
const ACTING_TEXT = new RegExp(`[${TERMINAL_ACTING}\\p{Cs}]`, 'gu');

/**
 * Foreign text (a provider's error, as `errorText` renders it) as a refusal's message quotes it: every character a
 * terminal acts on as a `\uXXXX` escape, as `shownValue` and `describeZodError(…, { escaped: true })` leave them, and
 * the rest as it is (no quotes added, a backslash kept: text made so once is the same made so again).
 */
export function escapedText(text: string): string {
  return text.replace(ACTING_TEXT, jsonEscape);
}

/**
 * `text` as a message quotes a value: a JSON string with nothing a terminal acts on left raw (DEL, C1 controls, bidi
 * and invisible format characters as `\uXXXX`, as `shownValue` quotes a value, uncut). One terminal-safe line, which
 * the CLI's `printableOnce` prints as it is: `printable` of it would double its backslashes (`"\\u001b"`). Here, at
 * the lowest layer, so a refusal of every layer names a path so (manifests/encoding/printable.ts re-exports it).
 */
export function quoted(text: string): string {
  return escapeRawInJson(JSON.stringify(text));
}

/** A value's type as a refusal names it: its `typeof`, and `null` as `null` (not `object`). */
export const typeName = (value: unknown): string => (value === null ? 'null' : typeof value);

/**
 * A value's type as a sentence names it after `not` or `a value that is`: `undefined` and `null` as themselves, any
 * other type with its article (`a string`, `an object`, `a function`). `a ${typeof value}` read `a undefined`.
 */
export function typeWithArticle(value: unknown): string {
  const type = typeName(value);
  if (type === 'undefined' || type === 'null') return type;
  return `${type === 'object' ? 'an' : 'a'} ${type}`;
}

/**
 * A caller's value (or a stored one) as a refusal's message names it, without converting it: a string quoted (its
 * first `max` units and, when it goes on, `…` after the closing quote; a JSON string with nothing a terminal acts on left raw), a number, boolean, bigint, null or
 * undefined as itself, anything else by its type. `${value}` or `String(value)` of an object whose `toString` throws
 * (or a symbol, in a template) threw that error in place of the coded refusal.
 */
export function shownValue(value: unknown, max = 40): string {
  if (typeof value === 'string') {
    // Cut: `…` after the quote says so (a key shown cut short read as the whole key). A pair is not split.
    if (value.length <= max) return escapeRawInJson(JSON.stringify(value));
    const end = /[\uD800-\uDBFF]/.test(value[max - 1]!) ? max - 1 : max;
    return `${escapeRawInJson(JSON.stringify(value.slice(0, end)))}…`;
  }
  if (value === null || ['number', 'boolean', 'bigint', 'undefined'].includes(typeof value)) return String(value);
  return typeWithArticle(value);
}

/** The own `byteLength` getters of ArrayBuffer and SharedArrayBuffer: each throws for anything that is not one. */
const arrayBufferLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength')!.get!;
// A browser page that is not cross-origin isolated has no SharedArrayBuffer at all: then nothing is one.
const sharedBufferLength =
  typeof SharedArrayBuffer === 'function'
    ? Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength')!.get!
    : undefined;

const hasBrand = (getter: (() => unknown) | undefined, value: unknown): boolean => {
  if (getter === undefined) return false;
  try {
    getter.call(value);
    return true;
  } catch {
    return false;
  }
};

/**
 * Which buffer `value` is, of this realm or another, by its brand (an object that only names itself one with
 * `Symbol.toStringTag` is none): an `ArrayBuffer`, a `SharedArrayBuffer`, or neither (`undefined`).
 */
export function bufferKind(value: unknown): 'ArrayBuffer' | 'SharedArrayBuffer' | undefined {
  if (hasBrand(arrayBufferLength, value)) return 'ArrayBuffer';
  if (hasBrand(sharedBufferLength, value)) return 'SharedArrayBuffer';
  return undefined;
}

/**
 * The bytes of an ArrayBuffer or a SharedArrayBuffer (of any realm) as a Uint8Array over the same memory, else
 * `undefined`. A detached ArrayBuffer (transferred away) holds no bytes: empty (a Uint8Array over it would throw).
 */
export function bufferBytes(value: unknown): Uint8Array | undefined {
  const kind = bufferKind(value);
  if (kind === 'ArrayBuffer')
    return arrayBufferLength.call(value) === 0 ? new Uint8Array(0) : new Uint8Array(value as ArrayBuffer);
  return kind === 'SharedArrayBuffer' ? new Uint8Array(value as SharedArrayBuffer) : undefined;
}

/**
 * What a refusal of bytes names a value as: a buffer or a view by its kind (`an ArrayBuffer (a Uint8Array over it is
 * bytes: new Uint8Array(buffer))`, `a DataView`), so the caller is told what to pass, anything else as `shownValue`
 * names it.
 */
export function shownBytes(value: unknown): string {
  const kind = bufferKind(value);
  if (kind !== undefined)
    return `${kind === 'ArrayBuffer' ? 'an' : 'a'} ${kind} (a Uint8Array over it is bytes: new Uint8Array(buffer))`;
  if (ArrayBuffer.isView(value)) {
    const type = typedArrayName.call(value) as string | undefined;
    return `a ${type ?? 'DataView'}`;
  }
  return shownValue(value);
}

/**
 * An argument a primitive takes as bytes, as its type says: a Uint8Array (a Node Buffer is one), of `length` bytes
 * when given. Anything else (undefined, a string, an ArrayBuffer, an array of numbers) is `INVALID_ARGUMENT` naming
 * the argument: it was a TypeError or RangeError from inside (`Cannot read properties of undefined (reading
 * 'length')`, `offset is out of bounds`), or was hashed as something else (a string as zero bytes, or as its text).
 */
const typedArrayName = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Uint8Array.prototype),
  Symbol.toStringTag,
)!.get!;

/**
 * Whether `value` is a Uint8Array (a Node Buffer is one) of this realm or of another (a `vm` context's, a test
 * sandbox's, a worker's structured clone): by its brand (the typed array's name slot), not its prototype, which
 * `instanceof` checks and another realm's array does not have. An object that only says it is one
 * (`Symbol.toStringTag`) is not.
 */
export const isUint8Array = (value: unknown): value is Uint8Array => typedArrayName.call(value) === 'Uint8Array';

export function checkBytesArgument(
  value: unknown,
  name: string,
  Class: ErrorClass<'INVALID_ARGUMENT'>,
  length?: number,
): asserts value is Uint8Array {
  if (!isUint8Array(value))
    throw new Class('INVALID_ARGUMENT', `${name} must be a Uint8Array, not ${shownBytes(value)}`);
  if (length !== undefined && value.length !== length)
    throw new Class('INVALID_ARGUMENT', `${name} must be ${length} bytes, not ${value.length}`);
}

/**
 * A yes/no option as its type says: `true`, `false`, or absent (`undefined`, `null`: the default). Anything else (the
 * string `'false'` of an environment variable or a config file, a number) is `INVALID_ARGUMENT`: read by truthiness it
 * would mean yes, and read as `=== false` no, whatever was meant (`createHostKey: 'false'` made a host key).
 */
export function checkBooleanOption(
  value: unknown,
  name: string,
  Class: ErrorClass<'INVALID_ARGUMENT'>,
): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean')
    throw new Class(
      'INVALID_ARGUMENT',
      `${name} must be true or false (or undefined: the default), not ${typeWithArticle(value)}`,
    );
  return value;
}

/**
 * The token a store's or log's own `open` passes to its constructor. TypeScript marks those constructors private, but
 * JavaScript calls them: `new FsBlobStore(root, options)` made a store that skipped the root's checks (its private
 * directory, its device and inode), `new LevelManifestLog(db, write)` a log that skipped the format marker and the lock.
 * @internal
 */
export const OPENING: unique symbol = Symbol('handoff-ledger open');

/**
 * Refuses a constructor called other than by the class's own `open` (`token` is not {@link OPENING}):
 * `INVALID_ARGUMENT` naming the open to call instead.
 * @internal
 */
export function refuseOutsideOpen(
  token: unknown,
  Class: ErrorClass<'INVALID_ARGUMENT'>,
  name: string,
  open: string,
): void {
  if (token !== OPENING) throw new Class('INVALID_ARGUMENT', `${name} is not made with new: open one with ${open}`);
}

/**
 * The storage-failure error of a layer: an error of this library passes through unchanged (it already says
 * what failed), anything else (an errno, a driver error) becomes `STORAGE_FAILED` with it as the cause.
 */
export function storageFailure(Class: ErrorClass<'STORAGE_FAILED'>, what: string, err: unknown): Error {
  if (err instanceof HandoffLedgerError) return err;
  return new Class('STORAGE_FAILED', `${what} failed: ${errorText(err)}`, { cause: err });
}

/**
 * An error as one line of text for a message or a notice: its message with those of its causes that add to it (up to
 * four deep), joined by `: `. A driver's "Database failed to open" says why only in its cause ("IO error: …/LOCK:
 * Permission denied"), fetch's "fetch failed" likewise ("connect ECONNREFUSED 127.0.0.1:9", "unexpected redirect"),
 * so what an operator reads names the reason. An error without a message is named by its `code` (a name whose every
 * address refused is an AggregateError with an empty message and `code` ECONNREFUSED); a thrown string is itself, a
 * number, boolean, bigint or symbol as itself, a value that says nothing by its class or type (`Error`, `an object`). Each part is cut at `max` characters (`…`), so an error that quotes what it was
 * given (a witness's answer, a file's bytes) adds no megabytes to a message. Never throws: a `message` getter that
 * throws, or an object whose `toString` would, is no part. The text is not escaped: a message that reaches a terminal
 * is escaped where it is printed (`printable`).
 */
export function errorText(err: unknown, max = 1000): string {
  const parts: string[] = [];
  let at: unknown = err;
  for (let depth = 0; depth < 4 && at !== undefined && at !== null; depth++) {
    const own = ownText(at);
    const text = own.length > max ? `${own.slice(0, max)}…` : own;
    if (text !== '' && !parts.some((p) => p.includes(text))) parts.push(text);
    at = fieldOf(at, 'cause');
  }
  if (parts.length > 0) return parts.join(': ');
  // Nothing said at all: the error's class (`Error`), else what shownValue says of the value.
  const name = err instanceof Error ? fieldOf(err, 'name') : undefined;
  return typeof name === 'string' && name !== '' ? name.slice(0, max) : shownValue(err);
}

/** One error's own words: its message, else its code; a primitive thrown as itself; else nothing. */
function ownText(at: unknown): string {
  if (typeof at === 'string') return at;
  if (['number', 'boolean', 'bigint', 'symbol'].includes(typeof at)) return String(at);
  const message = fieldOf(at, 'message');
  if (typeof message === 'string' && message !== '') return message;
  const code = fieldOf(at, 'code');
  return typeof code === 'string' ? code : '';
}

/** A field of a thrown value, or undefined when it has none or reading it throws (a getter, a revoked proxy). */
function fieldOf(at: unknown, name: 'message' | 'code' | 'cause' | 'name'): unknown {
  if ((typeof at !== 'object' && typeof at !== 'function') || at === null) return undefined;
  try {
    return (at as Record<string, unknown>)[name];
  } catch {
    return undefined;
  }
}
