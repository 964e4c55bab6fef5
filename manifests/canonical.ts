/**
 * RFC 8785 JSON Canonicalization Scheme (JCS) for the values this library signs and stores:
 * null, booleans, finite numbers, well-formed strings, arrays and plain objects.
 * Isomorphic. Strings that need no escaping are emitted as they are — which is exactly the JCS
 * (ECMAScript `JSON.stringify`) serialization of them — so a large summary is serialized in one
 * cheap scan instead of a character-by-character escape.
 */
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

function pushString(parts: string[], s: string): void {
  if (!s.isWellFormed()) throw new TypeError('JCS: string contains a lone surrogate');
  parts.push(NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);
}

function pushValue(parts: string[], value: unknown, depth: number): void {
  if (depth > 64) throw new TypeError('JCS: nesting deeper than 64 levels');
  if (value === null) {
    parts.push('null');
  } else if (typeof value === 'string') {
    pushString(parts, value);
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('JCS: non-finite number');
    parts.push(JSON.stringify(value)); // ECMAScript Number serialization, -0 as 0: RFC 8785 section 3.2.2.3
  } else if (typeof value === 'boolean') {
    parts.push(value ? 'true' : 'false');
  } else if (Array.isArray(value)) {
    parts.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) parts.push(',');
      pushValue(parts, value[i], depth + 1);
    }
    parts.push(']');
  } else if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) throw new TypeError('JCS: only plain objects can be canonicalized');
    // RFC 8785 section 3.2.3: members sorted by their names as arrays of UTF-16 code units.
    const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
    parts.push('{');
    keys.forEach((k, i) => {
      if (i > 0) parts.push(',');
      pushString(parts, k);
      parts.push(':');
      pushValue(parts, (value as Record<string, unknown>)[k], depth + 1);
    });
    parts.push('}');
  } else {
    throw new TypeError(`JCS: cannot canonicalize a ${typeof value}`);
  }
}

/** The RFC 8785 canonical JSON text of `value`. */
export function canonicalize(value: unknown): string {
  const parts: string[] = [];
  pushValue(parts, value, 0);
  return parts.join('');
}

const encoder = new TextEncoder();

/** The UTF-8 bytes of the canonical JSON text of `value`. */
export function canonicalBytes(value: unknown): Uint8Array {
  return encoder.encode(canonicalize(value));
}
