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
    const client = {};
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
      expect(typeof openaiAdapter({ client: {} as never, model: 'm', api: api as never })).toBe('function');
  });

  it('aiSdkAdapter takes a LanguageModel object as its model', () => {
    expect(typeof aiSdkAdapter({ model: { specificationVersion: 'v2' } as never })).toBe('function');
  });
});
