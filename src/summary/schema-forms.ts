/**
 * The summary schema in each model API's dialect, all derived from the one zod schema (summary.ts).
 * A dialect that cannot express a rule gets it in words in the field's description, so the model is
 * still told; the library validates the answer in any case (`validateSummary`).
 *
 * - `json-schema`: draft 2020-12 with every rule JSON Schema can express (lengths, counts, the path
 *   pattern, non-blank task and state). Anthropic tools and any validator take it.
 * - `anthropic`: the same without `$schema`, as a tool's `input_schema`.
 * - `openai-strict`: OpenAI strict structured outputs and strict function calling: every property
 *   required, optional ones nullable, no length or pattern keywords. Answers come back with `null`s;
 *   `normalizeStrictSummary` turns them back into absent fields before validation.
 * - `gemini`: Gemini's `responseJsonSchema` subset: no `$schema`, lengths or patterns, but
 *   `additionalProperties: false` kept (the SDK's OpenAPI `Schema` conversion would drop it).
 */
import {
  deepFreeze,
  NON_BLANK_PATTERN,
  RELATIVE_PATH,
  summaryJsonSchema,
  summarySchema,
  type JsonSchemaObject,
} from './summary.js';
import { LedgerError } from '../errors.js';
import { shownValue } from '../../store/errors.js';

export type SummarySchemaForm = 'json-schema' | 'anthropic' | 'openai-strict' | 'gemini';

export const SUMMARY_SCHEMA_FORMS: readonly SummarySchemaForm[] = Object.freeze([
  'json-schema',
  'anthropic',
  'openai-strict',
  'gemini',
]);

type Node = Record<string, unknown>;

const PATTERN_WORDS: Record<string, string> = {
  [NON_BLANK_PATTERN]: 'must not be blank',
  [RELATIVE_PATH.source]: 'no leading "/" or drive letter, no ".." segment, no backslash or NUL',
};

/** The words for the keywords a dialect drops, appended to the node's description. */
function ruleWords(node: Node, dropped: readonly string[]): string[] {
  const words: string[] = [];
  for (const keyword of dropped) {
    const value = node[keyword];
    if (value === undefined) continue;
    if (keyword === 'maxLength') words.push(`at most ${String(value)} characters`);
    else if (keyword === 'minLength') words.push(value === 1 ? 'not empty' : `at least ${String(value)} characters`);
    else if (keyword === 'pattern') words.push(PATTERN_WORDS[value as string] ?? `must match ${String(value)}`);
    else words.push(`${keyword}: ${JSON.stringify(value)}`);
  }
  return words;
}

interface Dialect {
  /** Keywords the dialect does not accept; their rules move into the description. */
  drop: readonly string[];
  /** OpenAI strict: all properties required, optional ones nullable. */
  allRequired: boolean;
}

const DIALECTS: Record<Exclude<SummarySchemaForm, 'json-schema'>, Dialect> = {
  anthropic: { drop: [], allRequired: false },
  // OpenAI's strict subset documents pattern, but not every regex feature the path rule needs (lookahead).
  'openai-strict': { drop: ['maxLength', 'minLength', 'pattern'], allRequired: true },
  gemini: { drop: ['maxLength', 'minLength', 'pattern'], allRequired: false },
};

function nullable(node: Node): Node {
  const type = node.type;
  const description = typeof node.description === 'string' ? `${node.description} (null if none)` : '(null if none)';
  return { ...node, type: Array.isArray(type) ? [...type, 'null'] : [type, 'null'], description };
}

function rewrite(node: Node, dialect: Dialect): Node {
  const out: Node = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema' || dialect.drop.includes(key)) continue;
    if (key === 'properties') {
      const properties: Node = {};
      for (const [name, child] of Object.entries(value as Record<string, Node>)) {
        properties[name] = rewrite(child, dialect);
      }
      out.properties = properties;
    } else if (key === 'items') {
      out.items = rewrite(value as Node, dialect);
    } else {
      out[key] = value;
    }
  }
  const words = ruleWords(node, dialect.drop);
  if (words.length > 0) {
    const base = typeof node.description === 'string' ? `${node.description}; ` : '';
    out.description = `${base}${words.join('; ')}`;
  }
  if (dialect.allRequired && out.type === 'object' && out.properties) {
    const required = new Set((out.required as string[] | undefined) ?? []);
    const properties = out.properties as Record<string, Node>;
    for (const name of Object.keys(properties)) {
      if (!required.has(name)) properties[name] = nullable(properties[name]!);
    }
    out.required = Object.keys(properties);
  }
  return out;
}

const forms = new Map<SummarySchemaForm, JsonSchemaObject>([['json-schema', summaryJsonSchema]]);

/**
 * The summary schema in the dialect of one model API (see the file comment for what each one is).
 * The result is frozen and shared; pass it as is to the SDK (`response_format`, a tool's
 * `input_schema`/`parameters`, Gemini's `responseJsonSchema`).
 * @throws LedgerError `INVALID_ARGUMENT` for an unknown form
 * @example
 * const tool = { name: 'submit_handoff', description, input_schema: summarySchemaFor('anthropic') };
 */
export function summarySchemaFor(form: SummarySchemaForm): JsonSchemaObject {
  if (typeof form !== 'string')
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `a summary schema form is a name (${SUMMARY_SCHEMA_FORMS.join(', ')}), not ${shownValue(form)}`,
    );
  let schema = forms.get(form);
  if (!schema) {
    const dialect = DIALECTS[form as Exclude<SummarySchemaForm, 'json-schema'>];
    if (!dialect || !Object.hasOwn(DIALECTS, form))
      throw new LedgerError('INVALID_ARGUMENT', `unknown summary schema form ${shownValue(form)}`);
    schema = deepFreeze(rewrite(summaryJsonSchema, dialect)) as JsonSchemaObject;
    forms.set(form, schema);
  }
  return schema;
}

/** The summary fields (top level and per file) a strict answer may carry as `null` for "absent". */
const OPTIONAL_FIELDS = Object.keys(summarySchema.shape).filter(
  (k) => summarySchema.shape[k as keyof typeof summarySchema.shape].safeParse(undefined).success,
);
const OPTIONAL_FILE_FIELDS = ['note'];

function withoutNulls(value: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === null && fields.includes(key)) continue;
    // defineProperty: a "__proto__" key stays an own property, so validation still refuses it.
    Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** A JSON object (not null, not an array). */
export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Turns an answer to the `openai-strict` form back into a summary: a `null` in an optional field means
 * the field is absent. Only those fields change; any other `null` stays and fails validation, and a
 * value that is not an object is returned as it is (validation reports it).
 * @throws LedgerError `SUMMARY_INVALID` for a value that throws as it is read (a getter, a revoked proxy: the cause), as
 *   the summary's validation refuses one
 */
export function normalizeStrictSummary(value: unknown): unknown {
  try {
    return normalized(value);
  } catch (err) {
    throw new LedgerError('SUMMARY_INVALID', 'summary: reading it failed (a getter or proxy of it threw: the cause)', {
      cause: err,
    });
  }
}

function normalized(value: unknown): unknown {
  if (!isRecord(value)) return value;
  const out = withoutNulls(value, OPTIONAL_FIELDS);
  if (Array.isArray(out.files)) {
    out.files = out.files.map((f: unknown) => (isRecord(f) ? withoutNulls(f, OPTIONAL_FILE_FIELDS) : f));
  }
  return out;
}
