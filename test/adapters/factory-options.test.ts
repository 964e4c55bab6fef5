/**
 * An adapter factory given options its types do not allow (from JavaScript: nothing, null, a getter that throws, no
 * client or model, a misspelt `api`) refuses them where the Harness wires it, with a coded error, not a TypeError there
 * or a model failure at its first compaction (a misspelt `api: 'Chat'` silently used the Responses API).
 */
import { describe, expect, it } from 'vitest';
import { isHandoffLedgerError } from '../../src/index.js';
import { openaiAdapter } from '../../src/adapters/openai.js';
import { anthropicAdapter } from '../../src/adapters/anthropic.js';
import { geminiAdapter } from '../../src/adapters/gemini.js';
import { aiSdkAdapter } from '../../src/adapters/ai-sdk.js';

const FACTORIES: Array<[string, (options: never) => unknown, boolean]> = [
  ['openaiAdapter', openaiAdapter as never, true],
  ['anthropicAdapter', anthropicAdapter as never, true],
  ['geminiAdapter', geminiAdapter as never, true],
  ['aiSdkAdapter', aiSdkAdapter as never, false],
];

/** A local fake of each provider's client: the one method its adapter calls, nothing else (never called here). */
const unused = () => Promise.reject(new Error('not called'));
const FAKE_CLIENTS: Record<string, object> = {
  openaiAdapter: { responses: { create: unused } },
  anthropicAdapter: { messages: { create: unused } },
  geminiAdapter: { models: { generateContent: unused } },
};
const openaiBoth = { responses: { create: unused }, chat: { completions: { create: unused } } };

function refusal(call: () => unknown): unknown {
  try {
    call();
  } catch (err) {
    return err;
  }
  return 'no error';
}

describe('adapter factories refuse options that are not what their types say', () => {
  it.each(FACTORIES)('%s: INVALID_ARGUMENT at the factory call', (name, factory, hasClient) => {
    const client = FAKE_CLIENTS[name] ?? {};
    const throwing = Object.defineProperty(hasClient ? { client, model: 'm' } : { model: 'm' }, 'model', {
      enumerable: true,
      get() {
        throw new Error('getter');
      },
    });
    const bad: unknown[] = [undefined, null, 5, 'gpt-5', throwing, { client, model: '' }, { client, model: 5 }];
    if (hasClient) bad.push({ model: 'm' }, { client: null, model: 'm' });
    for (const options of bad) {
      const err = refusal(() => factory(options as never));
      expect(isHandoffLedgerError(err), `${name} ${String(options)}`).toBe(true);
      expect(err, `${name} ${String(options)}`).toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    expect(refusal(() => factory(throwing as never))).toMatchObject({
      message: `${name} options: reading its model failed`,
    });
    // What the types allow is taken as ever.
    expect(typeof factory((hasClient ? { client, model: 'm' } : { model: 'm' }) as never)).toBe('function');
  });

  it("openaiAdapter: an api other than 'responses' or 'chat' is refused, not sent to the Responses API", () => {
    for (const [i, api] of [
      'Chat',
      'completions',
      5,
      {},
      Symbol('chat'),
      {
        toString: () => {
          throw new Error('no text');
        },
      },
    ].entries())
      expect(
        refusal(() => openaiAdapter({ client: {} as never, model: 'm', api: api as never })),
        `case ${i}`,
      ).toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    for (const api of [undefined, null, 'responses', 'chat'] as const)
      expect(typeof openaiAdapter({ client: openaiBoth as never, model: 'm', api: api as never })).toBe('function');
  });

  it("anthropicAdapter's maxTokens and timeoutMs, aiSdkAdapter's maxRetries: whole numbers in range, else refused", () => {
    // maxTokens NaN or Infinity went out as max_tokens: null, a string as a string (every compaction refused by the
    // API, its transcript sent each time); timeoutMs 0 or past the longest Node timer aborted every request at once,
    // after sending it; a negative or fractional maxRetries made every compaction MODEL_FAILED.
    const anthropic = (extra: object) => () =>
      anthropicAdapter({
        client: FAKE_CLIENTS.anthropicAdapter as never,
        model: 'm',
        ...(extra as Record<string, never>),
      });
    const ai = (extra: object) => () => aiSdkAdapter({ model: 'm', ...(extra as Record<string, never>) } as never);
    const untextable = {
      toString: () => {
        throw new Error('no text');
      },
    };
    const badCount = [Number.NaN, Infinity, 0, -1, 2.5, '4096', untextable, 2 ** 53];
    for (const maxTokens of badCount)
      expect(refusal(anthropic({ maxTokens })), `maxTokens ${typeof maxTokens}`).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^anthropicAdapter: maxTokens must be a whole number from 1, not /),
      });
    for (const timeoutMs of [...badCount, 2 ** 31])
      expect(refusal(anthropic({ timeoutMs })), `timeoutMs ${typeof timeoutMs}`).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^anthropicAdapter: timeoutMs must be a whole number from 1 to 2147483647/),
      });
    for (const maxRetries of [Number.NaN, Infinity, -1, 1.5, '2', untextable])
      expect(refusal(ai({ maxRetries })), `maxRetries ${typeof maxRetries}`).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^aiSdkAdapter: maxRetries must be a whole number from 0, not /),
      });
    // What the types allow is taken as ever, null as absent.
    for (const extra of [{ maxTokens: 1 }, { maxTokens: 64_000, timeoutMs: 2 ** 31 - 1 }, { maxTokens: null }])
      expect(typeof anthropic(extra)()).toBe('function');
    for (const maxRetries of [0, 5, null, undefined]) expect(typeof ai({ maxRetries })()).toBe('function');
  });

  it('a client without the method its adapter calls is refused at the factory call, naming it (was a TypeError at the first compaction)', async () => {
    const cases: Array<[string, () => unknown, string]> = [
      ['openaiAdapter', () => openaiAdapter({ client: {} as never, model: 'm' }), 'responses.create()'],
      // A client with the Responses API only, asked for Chat Completions, and the other way round.
      [
        'openaiAdapter',
        () => openaiAdapter({ client: FAKE_CLIENTS.openaiAdapter as never, model: 'm', api: 'chat' }),
        'chat.completions.create()',
      ],
      [
        'openaiAdapter',
        () => openaiAdapter({ client: { chat: { completions: { create: unused } } } as never, model: 'm' }),
        'responses.create()',
      ],
      [
        'openaiAdapter',
        () => openaiAdapter({ client: { responses: { create: 'x' } } as never, model: 'm' }),
        'responses.create()',
      ],
      [
        'anthropicAdapter',
        () => anthropicAdapter({ client: { messages: {} } as never, model: 'm' }),
        'messages.create()',
      ],
      [
        'anthropicAdapter',
        () => anthropicAdapter({ client: FAKE_CLIENTS.geminiAdapter as never, model: 'm' }),
        'messages.create()',
      ],
      [
        'geminiAdapter',
        () => geminiAdapter({ client: { models: null } as never, model: 'm' }),
        'models.generateContent()',
      ],
      [
        'geminiAdapter',
        () => geminiAdapter({ client: FAKE_CLIENTS.openaiAdapter as never, model: 'm' }),
        'models.generateContent()',
      ],
    ];
    for (const [name, call, method] of cases) {
      const err = refusal(call);
      expect(isHandoffLedgerError(err), `${name} ${method}`).toBe(true);
      expect(err, `${name} ${method}`).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(
          new RegExp(`^${name}: the client has no ${method.replace(/[.()]/g, '\\$&')}, which`),
        ),
      });
    }
    // A getter on the way that throws: refused, its error the cause.
    const throwing = Object.defineProperty({}, 'messages', {
      get() {
        throw new Error('lazy resource failed');
      },
    });
    expect(refusal(() => anthropicAdapter({ client: throwing as never, model: 'm' }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: "anthropicAdapter: reading the client's messages.create() failed",
      cause: { message: 'lazy resource failed' },
    });
    // Duck-typed, no stricter: a method on the prototype (an SDK's resource class), a getter (a wrapper), a Proxy, a
    // function object as a resource; the method looked up at each call, as before.
    class Messages {
      create() {
        return Promise.resolve({ content: [], stop_reason: 'end_turn' });
      }
    }
    const viaGetter = {
      get messages() {
        return new Messages();
      },
    };
    const proxied = new Proxy({}, { get: (_t, key) => (key === 'models' ? { generateContent: unused } : undefined) });
    const fnResource = Object.assign(() => undefined, { create: unused });
    expect(typeof anthropicAdapter({ client: { messages: new Messages() } as never, model: 'm' })).toBe('function');
    expect(typeof anthropicAdapter({ client: viaGetter as never, model: 'm' })).toBe('function');
    expect(typeof geminiAdapter({ client: proxied as never, model: 'm' })).toBe('function');
    expect(typeof openaiAdapter({ client: { responses: fnResource } as never, model: 'm' })).toBe('function');
    expect(
      typeof openaiAdapter({ client: { chat: { completions: { create: unused } } } as never, model: 'm', api: 'chat' }),
    ).toBe('function');
  });

  it('the real SDK clients are taken (no request is made)', async () => {
    const { default: OpenAI } = await import('openai');
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const { GoogleGenAI } = await import('@google/genai');
    const openai = new OpenAI({ apiKey: 'k', baseURL: 'http://127.0.0.1:9' });
    for (const api of ['responses', 'chat'] as const)
      expect(typeof openaiAdapter({ client: openai, model: 'm', api })).toBe('function');
    expect(
      typeof anthropicAdapter({ client: new Anthropic({ apiKey: 'k', baseURL: 'http://127.0.0.1:9' }), model: 'm' }),
    ).toBe('function');
    expect(typeof geminiAdapter({ client: new GoogleGenAI({ apiKey: 'k' }), model: 'm' })).toBe('function');
  });

  it('aiSdkAdapter takes a LanguageModel object as its model', () => {
    expect(typeof aiSdkAdapter({ model: { specificationVersion: 'v2' } as never })).toBe('function');
  });
});
