/**
 * The summary schema in each model API's dialect: each form is what the provider's own SDK helper or
 * type takes, tells the model every rule (as a keyword or in words), and a strict answer normalised
 * back validates.
 */
import { describe, expect, it } from 'vitest';
import { toStrictJsonSchema } from 'openai/lib/transform';
import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions';
import type { ResponseFormatJSONSchema } from 'openai/resources/shared';
import type { FunctionTool, ResponseFormatTextJSONSchemaConfig } from 'openai/resources/responses/responses';
import type Anthropic from '@anthropic-ai/sdk';
import type { GenerateContentConfig } from '@google/genai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  normalizeStrictSummary,
  summarySchemaFor,
  SUMMARY_SCHEMA_FORMS,
  type SummarySchemaForm,
} from '../../src/summary/schema-forms.js';
import { summaryJsonSchema, validateSummary } from '../../src/summary/summary.js';

type Node = Record<string, unknown>;

/** Every schema node with its JSON pointer. */
function* nodes(node: Node, path = ''): Generator<[string, Node]> {
  yield [path || '/', node];
  for (const [name, child] of Object.entries((node.properties as Record<string, Node> | undefined) ?? {})) {
    yield* nodes(child, `${path}/properties/${name}`);
  }
  if (node.items) yield* nodes(node.items as Node, `${path}/items`);
}

/** Keywords each dialect documents (OpenAI structured outputs "supported schemas"; Gemini responseJsonSchema). */
const DOCUMENTED: Record<'openai-strict' | 'gemini', Set<string>> = {
  'openai-strict': new Set([
    'type',
    'properties',
    'required',
    'additionalProperties',
    'items',
    'description',
    'enum',
    'anyOf',
    'maxItems',
    'minItems',
  ]),
  gemini: new Set([
    'type',
    'properties',
    'required',
    'additionalProperties',
    'items',
    'description',
    'enum',
    'anyOf',
    'maxItems',
    'minItems',
    'title',
    'format',
    'minimum',
    'maximum',
  ]),
};

const valid = { task: 'Ship the parser', state: 'tests green', nextSteps: ['release'] };

describe('summarySchemaFor', () => {
  it('gives json-schema as summaryJsonSchema itself, with the path pattern and non-blank task and state', () => {
    const schema = summarySchemaFor('json-schema');
    expect(schema).toBe(summaryJsonSchema);
    expect(schema.properties.task).toMatchObject({ pattern: '\\S' });
    expect(schema.properties.state).toMatchObject({ pattern: '\\S' });
    const file = (schema.properties.files!.items as { properties: Record<string, Node> }).properties.path!;
    expect(file).toMatchObject({ minLength: 1, maxLength: 4096, pattern: expect.any(String) });
  });

  it('gives the anthropic form as json-schema without $schema, typed as the SDK Tool input_schema', () => {
    const tool: Anthropic.Tool = {
      name: 'submit_handoff',
      description: 'd',
      input_schema: summarySchemaFor('anthropic'),
    };
    expect(tool.input_schema).not.toHaveProperty('$schema');
    const { $schema: _, ...rest } = summaryJsonSchema;
    expect(tool.input_schema).toEqual(rest);
  });

  it('gives an openai-strict form that toStrictJsonSchema accepts unchanged', () => {
    const schema = summarySchemaFor('openai-strict');
    expect(toStrictJsonSchema(structuredClone(schema) as never)).toEqual(schema);
    const chat: ResponseFormatJSONSchema = {
      type: 'json_schema',
      json_schema: { name: 'handoff_summary', strict: true, schema },
    };
    const text: ResponseFormatTextJSONSchemaConfig = {
      type: 'json_schema',
      name: 'handoff_summary',
      strict: true,
      schema,
    };
    const fn: FunctionTool = { type: 'function', name: 'submit_handoff', strict: true, parameters: schema };
    const chatFn: ChatCompletionFunctionTool = {
      type: 'function',
      function: { name: 'submit_handoff', strict: true, parameters: schema },
    };
    expect([chat.json_schema.schema, text.schema, fn.parameters, chatFn.function.parameters]).toEqual([
      schema,
      schema,
      schema,
      schema,
    ]);
  });

  it('lists every property as required and closes every object in the openai-strict form', () => {
    for (const [path, node] of nodes(summarySchemaFor('openai-strict'))) {
      if (node.type !== 'object') continue;
      expect(node.required, path).toEqual(Object.keys(node.properties as Node));
      expect(node.additionalProperties, path).toBe(false);
    }
  });

  it('gives a gemini form for responseJsonSchema that keeps additionalProperties: false', () => {
    const config: GenerateContentConfig = {
      responseMimeType: 'application/json',
      responseJsonSchema: summarySchemaFor('gemini'),
    };
    const schema = config.responseJsonSchema as Node;
    expect(schema.additionalProperties).toBe(false);
    expect(((schema.properties as Record<string, Node>).files!.items as Node).additionalProperties).toBe(false);
  });

  it.each(['openai-strict', 'gemini'] as const)('uses only keywords %s documents', (form) => {
    for (const [path, node] of nodes(summarySchemaFor(form))) {
      for (const key of Object.keys(node)) expect(DOCUMENTED[form].has(key), `${path}: ${key}`).toBe(true);
    }
  });

  it.each(['openai-strict', 'gemini'] as const)('moves the rules %s cannot express into descriptions', (form) => {
    const props = summarySchemaFor(form).properties;
    expect(props.task!.description).toMatch(/must not be blank/);
    expect(props.task!.description).toMatch(/at most 67108864 characters/);
    const path = ((props.files!.items as Node).properties as Record<string, Node>).path!;
    expect(path.description).toMatch(/no "\.\." segment, no backslash/);
    expect(path.description).toMatch(/at most 4096 characters/);
  });

  it('returns the same frozen object each time', () => {
    for (const form of SUMMARY_SCHEMA_FORMS) {
      expect(summarySchemaFor(form)).toBe(summarySchemaFor(form));
      expect(Object.isFrozen(summarySchemaFor(form).properties)).toBe(true);
    }
  });

  it('refuses an unknown form, inherited names included, with INVALID_ARGUMENT', () => {
    for (const inherited of ['toString', 'constructor', '__proto__', 'hasOwnProperty'])
      expect(() => summarySchemaFor(inherited as SummarySchemaForm), inherited).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    expect(() => summarySchemaFor('cohere' as SummarySchemaForm)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it("names an unknown form as shownValue names a caller's value: bounded, nothing a terminal acts on left raw", () => {
    // A form read from a config file or the environment (aiSdkAdapter's schemaForm): the one-byte CSI, DEL, a
    // right-to-left override, then a megabyte, went into the message whole and raw (JSON.stringify leaves them).
    const form = `\u009b2J\u007f\u202e${'x'.repeat(1_000_000)}`;
    const err = (() => {
      try {
        summarySchemaFor(form as SummarySchemaForm);
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(err!.message).not.toMatch(/[\u007f-\u009f\u202e]/);
    expect(err!.message.length).toBeLessThan(200);
    expect(err!.message).toContain('"\\u009b2J\\u007f\\u202exxx');
  });
});

describe('normalizeStrictSummary', () => {
  const strictAnswer = {
    ...valid,
    decisions: null,
    openQuestions: ['which registry?'],
    files: [
      { path: 'src/a.ts', note: null },
      { path: 'src/b.ts', note: 'entry' },
    ],
    notes: null,
    incomplete: null,
  };

  it('refuses a value that throws as it is read with SUMMARY_INVALID (the cause kept), as validation does', () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const getter = Object.defineProperty({ ...strictAnswer }, 'files', {
      enumerable: true,
      get() {
        throw new Error('getter');
      },
    });
    for (const value of [proxy, getter]) {
      let thrown: unknown;
      try {
        normalizeStrictSummary(value);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((thrown as Error).cause).toBeInstanceOf(Error);
    }
  });

  it('turns the nulls of optional fields into absent fields, so a strict answer validates', () => {
    expect(() => validateSummary(strictAnswer)).toThrow(expect.objectContaining({ code: 'SUMMARY_INVALID' }));
    expect(validateSummary(normalizeStrictSummary(strictAnswer)).summary).toEqual({
      ...valid,
      openQuestions: ['which registry?'],
      files: [{ path: 'src/a.ts' }, { path: 'src/b.ts', note: 'entry' }],
    });
  });

  it('leaves a null in a required field, which validation then refuses', () => {
    for (const field of ['task', 'state', 'nextSteps']) {
      const v = normalizeStrictSummary({ ...valid, [field]: null });
      expect(v).toHaveProperty(field, null);
      expect(() => validateSummary(v)).toThrow(expect.objectContaining({ code: 'SUMMARY_INVALID' }));
    }
    expect(() => validateSummary(normalizeStrictSummary({ ...valid, files: [{ path: null }] }))).toThrow(
      expect.objectContaining({ code: 'SUMMARY_INVALID' }),
    );
  });

  it('keeps a __proto__ field as an own field, which validation refuses', () => {
    const v = normalizeStrictSummary(JSON.parse(`{"__proto__":{"x":1},${JSON.stringify(valid).slice(1)}`));
    expect(Object.prototype.hasOwnProperty.call(v, '__proto__')).toBe(true);
    expect(() => validateSummary(v)).toThrow(expect.objectContaining({ code: 'SUMMARY_INVALID' }));
  });

  it('returns what is not an object as it is', () => {
    for (const v of [null, 'text', 3, [valid]]) expect(normalizeStrictSummary(v)).toBe(v);
  });
});

describe('the JSON Schema and validateSummary', () => {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  const check = ajv.compile(summaryJsonSchema);
  const withPath = (path: unknown) => ({ ...valid, files: [{ path }] });
  const corpus: Array<[string, unknown]> = [
    ['the minimal summary', valid],
    [
      'every field',
      {
        ...valid,
        decisions: ['a'],
        openQuestions: ['b'],
        files: [{ path: 'a/b.ts', note: 'n' }],
        notes: 'x',
        incomplete: false,
      },
    ],
    ['a path with dots inside a name', withPath('a/..b/c..')],
    ['a path with a dot segment', withPath('./a/./b')],
    ['a path with a colon later', withPath('src/a:b')],
    ['a path with a newline then dots', withPath('a\n/..x')],
    ['a path ending in "..\\n"', withPath('a/..\n')],
    ['text with an astral character', { ...valid, task: 'ship 🚀' }],
    ['an absolute path', withPath('/etc/passwd')],
    ['a parent path', withPath('../secret')],
    ['a ".." segment inside', withPath('a/../b')],
    ['a ".." segment at the end', withPath('a/..')],
    ['a ".." segment after a newline', withPath('a\n/../b')],
    ['a drive path', withPath('C:/x')],
    ['a lower-case drive', withPath('c:x')],
    ['a backslash', withPath('a\\b')],
    ['a NUL', withPath('a\0b')],
    ['an empty path', withPath('')],
    ['a path of 4097 characters', withPath('a'.repeat(4097))],
    ['a blank task', { ...valid, task: ' \n\t' }],
    ['an empty state', { ...valid, state: '' }],
    ['a task of non-breaking spaces', { ...valid, task: '\u00a0\u2003\ufeff' }],
    ['an unknown field', { ...valid, extra: 1 }],
    ['an unknown file field', { ...valid, files: [{ path: 'a', size: 1 }] }],
    ['a missing nextSteps', { task: 't', state: 's' }],
    ['a null decisions', { ...valid, decisions: null }],
    ['a number for a step', { ...valid, nextSteps: [1] }],
    ['1001 next steps', { ...valid, nextSteps: Array(1001).fill('x') }],
    ['a step of 65537 characters', { ...valid, nextSteps: ['x'.repeat(65537)] }],
    ['incomplete as a string', { ...valid, incomplete: 'yes' }],
  ];

  it.each(corpus)('agree on %s', (_, summary) => {
    let library = true;
    try {
      validateSummary(summary);
    } catch {
      library = false;
    }
    expect(check(summary), JSON.stringify(check.errors)).toBe(library);
  });

  it('the corpus has both verdicts (so agreement means something)', () => {
    const verdicts = corpus.map(([, s]) => check(s));
    expect(verdicts.filter(Boolean).length).toBeGreaterThanOrEqual(8);
    expect(verdicts.filter((v) => !v).length).toBeGreaterThanOrEqual(20);
  });
});
