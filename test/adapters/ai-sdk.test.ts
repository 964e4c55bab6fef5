/**
 * The ai SDK adapter with the real `ai` SDK and its OpenAI (Chat Completions, Responses), Anthropic (Messages) and Google
 * (generateContent) providers against the fake provider.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { describe, expect, it } from 'vitest';
import { aiSdkAdapter } from '../../src/adapters/ai-sdk.js';
import { summarySchemaFor, type SummarySchemaForm } from '../../src/summary/schema-forms.js';
import type { JsonSchemaObject } from '../../src/summary/summary.js';
import { providerCases, strictSummary, summary } from './provider-cases.js';
import { chat, completion, functionCall, response } from './openai-replies.js';
import { startFakeProvider, type Reply } from '../support/fake-provider.js';
import { compactionRequest, extractSummary } from '../../src/compaction/tool.js';
import { validateSummary } from '../../src/summary/summary.js';
import { countingLedger } from '../support/counting-ledger.js';
import { compact } from '../../src/compaction/compact.js';
import type { ContentPart, LanguageModel, ToolSet } from 'ai';
import { unionTags } from './sdk-declarations.js';

const model = (url: string) => createOpenAI({ apiKey: 'test-key', baseURL: `${url}/v1` }).chat('gpt-test');

for (const mode of ['tool', 'structured'] as const) {
  providerCases(`aiSdkAdapter (OpenAI chat model, openai-strict, ${mode})`, {
    adapter: (url) => aiSdkAdapter({ model: model(url), schemaForm: 'openai-strict', maxRetries: 0 }),
    mode,
    answer: strictSummary,
    good: (a) => chat(mode, JSON.stringify(a), mode === 'tool' ? 'tool_calls' : 'stop'),
    truncated: (a) => chat(mode, JSON.stringify(a).slice(0, 40), 'length'),
    filtered: (a) => chat(mode, JSON.stringify(a), 'content_filter'),
    // The SDK's OpenAI provider reports a refusal as `content-filter`, which the SDK documents as a content filter:
    // read as the others read a content filter, SUMMARY_INCOMPLETE (nothing is published either way).
    refusalCode: 'SUMMARY_INCOMPLETE',
    refusal: () => ({
      body: completion({ role: 'assistant', content: null, refusal: "I can't help with that." }, 'stop'),
    }),
    empty: () => ({ body: completion({ role: 'assistant', content: '', refusal: null }, 'stop') }),
    httpError: () => ({
      status: 400,
      body: { error: { message: 'no such model', type: 'invalid_request_error', code: 'model_not_found' } },
    }),
    sentSchema: (r) =>
      mode === 'tool'
        ? (r.body.tools as Array<{ function: { parameters: unknown; strict?: boolean } }>)[0]!.function.parameters
        : (r.body.response_format as { json_schema: { schema: unknown } }).json_schema.schema,
    sentTools: (r) =>
      ((r.body.tools as Array<{ function: { name: string } }> | undefined) ?? []).map((t) => t.function.name),
    expectedSchema: summarySchemaFor('openai-strict'),
  });
}

describe('aiSdkAdapter', () => {
  it('marks the submit_handoff function strict and sends the json-schema form by default', async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(
        chat('tool', JSON.stringify(strictSummary), 'tool_calls'),
        chat('tool', JSON.stringify(summary), 'tool_calls'),
      );
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }] });
      await aiSdkAdapter({ model: model(provider.url), schemaForm: 'openai-strict', maxRetries: 0 })(request);
      const response = await aiSdkAdapter({ model: model(provider.url), maxRetries: 0 })(request);
      const [strictTool, plainTool] = provider.requests.map(
        (r) => (r.body.tools as Array<{ function: { parameters: unknown; strict?: boolean } }>)[0]!.function,
      );
      expect(strictTool!.strict).toBe(true);
      expect(plainTool!.parameters).toEqual(summarySchemaFor('json-schema'));
      expect(response.toolCalls?.[0]?.input).toEqual(summary);
    } finally {
      await provider.close();
    }
  });

  it('names another tool the model called instead of submit_handoff: SUMMARY_INVALID, as every dialect does', async () => {
    const provider = await startFakeProvider();
    try {
      const other = chat('tool', JSON.stringify({ path: '/etc/passwd' }), 'tool_calls');
      const call = (
        other.body as { choices: Array<{ message: { tool_calls: Array<{ function: { name: string } }> } }> }
      ).choices[0]!.message.tool_calls[0]!;
      call.function.name = 'write_file';
      provider.script(other);
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }] });
      const response = await aiSdkAdapter({ model: model(provider.url), maxRetries: 0 })(request);
      expect(response.toolCalls?.map((c) => c.name)).toEqual(['write_file']);
      expect(() => extractSummary(response)).toThrow(expect.objectContaining({ code: 'SUMMARY_INVALID' }));
    } finally {
      await provider.close();
    }
  });

  it('decodes a summary encoded twice only once in structured mode too (a submit_handoff call not offered)', async () => {
    const provider = await startFakeProvider();
    try {
      // Structured mode offers no tool; the model calls submit_handoff anyway, with the summary's JSON as a string.
      provider.script(chat('tool', JSON.stringify(JSON.stringify(summary)), 'tool_calls'));
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode: 'structured' });
      const response = await aiSdkAdapter({ model: model(provider.url), maxRetries: 0 })(request);
      // What compact does with the answer: a string is no summary.
      expect(typeof extractSummary(response)).toBe('string');
      expect(() => validateSummary(extractSummary(response))).toThrow(
        expect.objectContaining({ code: 'SUMMARY_INVALID' }),
      );
    } finally {
      await provider.close();
    }
  });
});

describe('aiSdkAdapter requests', () => {
  it('refuses an unknown schemaForm when the adapter is made (INVALID_ARGUMENT), not as a model failure later', () => {
    let err: unknown;
    try {
      aiSdkAdapter({ model: model('http://127.0.0.1:9'), schemaForm: 'openai' as never });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
  });

  it("leaves a tool-calling assistant turn's whitespace-only text out (providers refuse a blank text part)", async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(chat('tool', JSON.stringify(strictSummary), 'tool_calls'));
      const request = compactionRequest({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: '\n\n', toolCalls: [{ id: 'a', name: 'read', input: { path: 'a' } }] },
          { role: 'tool', toolCallId: 'a', content: 'ok' },
        ],
      });
      await aiSdkAdapter({ model: model(provider.url), schemaForm: 'openai-strict', maxRetries: 0 })(request);
      const sent = provider.requests[0]!.body.messages as Array<{
        role: string;
        content?: unknown;
        tool_calls?: unknown[];
      }>;
      const assistant = sent.find((m) => m.role === 'assistant')!;
      expect(assistant.tool_calls).toHaveLength(1);
      expect([null, undefined, '']).toContain(assistant.content); // not the blank text
    } finally {
      await provider.close();
    }
  });

  it('leaves turns that say nothing out and sends each tool input as an object, as the other dialects do', async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(chat('tool', JSON.stringify(strictSummary), 'tool_calls'));
      const calls = [
        { id: 'a', name: 'read', input: { path: 'src/a.ts' } },
        { id: 'b', name: 'read', input: '{"path": "src/b.ts"}' }, // a provider's arguments left unparsed
        { id: 'c', name: 'read', input: '{"path": "src/c.ts"' }, // cut short: not JSON
        { id: 'd', name: 'list', input: undefined },
      ];
      const request = compactionRequest({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: '' }, // a turn that was only reasoning (Anthropic and Gemini refuse it)
          { role: 'user', content: ' \n' },
          { role: 'assistant', content: 'reading', toolCalls: calls },
          ...calls.map((c) => ({ role: 'tool' as const, toolCallId: c.id, content: 'ok' })),
        ],
      });
      await aiSdkAdapter({ model: model(provider.url), schemaForm: 'openai-strict', maxRetries: 0 })(request);
      const sent = provider.requests[0]!.body.messages as Array<{
        role: string;
        content?: unknown;
        tool_calls?: Array<{ id: string; function: { arguments: string } }>;
      }>;
      // The compaction request's own instruction turn comes last; the transcript's empty turns are not sent.
      expect(
        sent.filter((m) => m.role !== 'system' && typeof m.content === 'string' && m.content.trim() === ''),
      ).toEqual([]);
      const assistant = sent.find((m) => m.role === 'assistant')!;
      expect(assistant.tool_calls!.map((c) => [c.id, JSON.parse(c.function.arguments)])).toEqual([
        ['a', { path: 'src/a.ts' }],
        ['b', { path: 'src/b.ts' }],
        ['c', { input: '{"path": "src/c.ts"' }],
        ['d', {}],
      ]);
    } finally {
      await provider.close();
    }
  });
});

describe('aiSdkAdapter with the default json-schema form and an OpenAI model', () => {
  it('does not ask for strict mode, which that schema does not meet (its patterns, its optional fields)', async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(chat('structured', JSON.stringify(summary), 'stop'));
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode: 'structured' });
      const response = await aiSdkAdapter({ model: model(provider.url), maxRetries: 0 })(request);
      const format = provider.requests[0]!.body.response_format as { json_schema?: { strict?: boolean } };
      expect(format.json_schema?.strict).not.toBe(true);
      expect(response.output).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});

describe('aiSdkAdapter and what OpenAI keeps', () => {
  it("sends store: false to OpenAI's Responses models (the provider's default), not to chat models", async () => {
    const provider = await startFakeProvider();
    try {
      const responsesReply = response([functionCall(JSON.stringify(summary))]);
      provider.script(responsesReply, chat('tool', JSON.stringify(summary), 'tool_calls'));
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }] });
      const openai = createOpenAI({ apiKey: 'test-key', baseURL: `${provider.url}/v1` });
      const viaResponses = await aiSdkAdapter({ model: openai('gpt-test'), maxRetries: 0 })(request);
      expect(viaResponses.toolCalls?.[0]?.input).toEqual(summary);
      await aiSdkAdapter({ model: openai.chat('gpt-test'), maxRetries: 0 })(request);
      expect(provider.requests.map((r) => [r.path, r.body.store])).toEqual([
        ['/v1/responses', false],
        ['/v1/chat/completions', undefined],
      ]);
    } finally {
      await provider.close();
    }
  });
});

describe('aiSdkAdapter: a Responses answer in phases', () => {
  const phasedMessage = (id: string, text: string, phase: string) => ({
    type: 'message',
    id,
    role: 'assistant',
    status: 'completed',
    phase,
    content: [{ type: 'output_text', text, annotations: [] }],
  });
  const responsesReply = (output: unknown[]) => response(output);

  it("reads the final_answer message only in structured mode: a commentary message's text is not glued to the JSON", async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(
        responsesReply([
          phasedMessage('msg_0', 'I will write the handoff summary now.', 'commentary'),
          phasedMessage('msg_1', JSON.stringify(strictSummary), 'final_answer'),
        ]),
      );
      const model = createOpenAI({ apiKey: 'test-key', baseURL: `${provider.url}/v1` }).responses('gpt-test');
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode: 'structured' });
      const response = await aiSdkAdapter({ model, schemaForm: 'openai-strict', maxRetries: 0 })(request);
      expect(provider.requests.map((r) => r.path)).toEqual(['/v1/responses']);
      expect(response.text).toBe(JSON.stringify(strictSummary));
      expect(extractSummary(response)).toEqual(summary);
    } finally {
      await provider.close();
    }
  });

  it('keeps every text part of an answer not in phases (one message, or several without a final_answer)', async () => {
    const provider = await startFakeProvider();
    try {
      const json = JSON.stringify(strictSummary);
      provider.script(
        responsesReply([
          { ...phasedMessage('msg_0', json.slice(0, 20), 'x'), phase: undefined },
          { ...phasedMessage('msg_1', json.slice(20), 'x'), phase: undefined },
        ]),
      );
      const model = createOpenAI({ apiKey: 'test-key', baseURL: `${provider.url}/v1` }).responses('gpt-test');
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode: 'structured' });
      const response = await aiSdkAdapter({ model, schemaForm: 'openai-strict', maxRetries: 0 })(request);
      expect(extractSummary(response)).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});

describe("aiSdkAdapter: a provider's raw reason its unified reason calls finished", () => {
  /**
   * A LanguageModel answering as the ai SDK's Anthropic provider does for a paused turn: its stop-reason table reads
   * Anthropic's `pause_turn` as `stop` (vercel/ai packages/anthropic/src/map-anthropic-stop-reason.ts), the raw reason
   * kept beside it. @ai-sdk/anthropic is not a dependency here: the SDK's mock model stands in for it, no network.
   */
  const paused = async (mode: 'tool' | 'structured') => {
    const { MockLanguageModelV3 } = await import('ai/test');
    const json = JSON.stringify(summary);
    return new MockLanguageModelV3({
      provider: 'anthropic.messages',
      modelId: 'claude-test',
      doGenerate: {
        content:
          mode === 'tool'
            ? [{ type: 'tool-call', toolCallId: 'toolu_1', toolName: 'submit_handoff', input: json }]
            : [{ type: 'text', text: json }],
        finishReason: { unified: 'stop', raw: 'pause_turn' },
        usage: {
          inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 20, text: 20, reasoning: 0 },
        },
        warnings: [],
      },
    });
  };

  it.each(['tool', 'structured'] as const)(
    "reads Anthropic's pause_turn as not finished (%s mode), as anthropicAdapter does: SUMMARY_INCOMPLETE naming it, nothing published",
    async (mode) => {
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: aiSdkAdapter({ model: await paused(mode), maxRetries: 0 }),
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e);
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
      expect((outcome as Error).message).toMatch(/"pause_turn"/);
      expect(ledger.published).toBe(0);
    },
  );
});

describe("aiSdkAdapter and a Responses status the SDK's finish reason does not carry", () => {
  /**
   * The ai SDK's OpenAI provider derives the finish reason of a Responses model from `incomplete_details.reason` alone
   * (vercel/ai packages/openai/src/responses/map-openai-responses-finish-reason.ts): a response whose `status` is
   * `cancelled`, `queued` or `in_progress` came back `stop` (or `tool-calls`), so whatever it held was read as a
   * finished summary. openaiAdapter reads the status; so does this adapter, from the raw body the provider keeps.
   */
  const json = JSON.stringify(strictSummary);
  const textMessage = (text: string, status = 'completed') => ({
    type: 'message',
    id: 'msg_1',
    role: 'assistant',
    status,
    content: [{ type: 'output_text', text, annotations: [] }],
  });
  const outcomeOf = async (reply: Reply, mode: 'tool' | 'structured') => {
    const provider = await startFakeProvider();
    try {
      provider.script(reply);
      const model = createOpenAI({ apiKey: 'test-key', baseURL: `${provider.url}/v1` }).responses('gpt-test');
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: aiSdkAdapter({ model, schemaForm: 'openai-strict', maxRetries: 0 }),
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e);
      expect(provider.requests.map((r) => r.path)).toEqual(['/v1/responses']);
      expect(ledger.published).toBe(0);
      return outcome as Error & { code?: string };
    } finally {
      await provider.close();
    }
  };

  it.each(['cancelled', 'queued', 'in_progress'])(
    'reads a response of status %s as not finished, in both modes: SUMMARY_INCOMPLETE naming it, nothing published',
    async (status) => {
      for (const [mode, output] of [
        ['tool', [functionCall(json)]],
        ['structured', [textMessage(json)]],
        // Tool mode without the forced call (the SDK throws ToolChoiceViolationError): the text is the answer read.
        ['tool', [textMessage(json)]],
      ] as const) {
        const outcome = await outcomeOf(response([...output], status), mode);
        expect(outcome, `${mode} ${output[0]!.type}`).toMatchObject({
          name: 'LedgerError',
          code: 'SUMMARY_INCOMPLETE',
        });
        expect(outcome.message).toContain(`the provider's "${status}"`);
      }
    },
  );

  it('reads an incomplete response as not finished whatever its reason (the provider reads one it does not know beside a call as tool-calls)', async () => {
    const outcome = await outcomeOf(response([functionCall(json)], 'incomplete', 'server_shutdown'), 'tool');
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
    expect(outcome.message).toContain(`the provider's "server_shutdown"`);
  });

  it('reads an item not completed in a completed response as not finished, as openaiAdapter does', async () => {
    const call = await outcomeOf(response([{ ...functionCall(json), status: 'in_progress' }]), 'tool');
    expect(call).toMatchObject({ code: 'SUMMARY_INCOMPLETE' });
    expect(call.message).toContain(`the provider's "function_call in_progress"`);
    const message = await outcomeOf(response([textMessage(json, 'incomplete')]), 'structured');
    expect(message).toMatchObject({ code: 'SUMMARY_INCOMPLETE' });
    expect(message.message).toContain(`the provider's "message incomplete"`);
  });

  it("is MODEL_FAILED for a failed response without an error object (the SDK throws for one with it), as openaiAdapter's", async () => {
    for (const mode of ['tool', 'structured'] as const) {
      const output = mode === 'tool' ? functionCall(json) : textMessage(json);
      const outcome = await outcomeOf(response([output], 'failed'), mode);
      expect(outcome, mode).toMatchObject({ name: 'LedgerError', code: 'MODEL_FAILED' });
      expect(outcome.message).toContain('OpenAI response resp_1 failed');
    }
  });

  it('still reads a completed response as finished, in both modes', async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(response([functionCall(json)]), response([textMessage(json)]));
      const model = createOpenAI({ apiKey: 'test-key', baseURL: `${provider.url}/v1` }).responses('gpt-test');
      for (const mode of ['tool', 'structured'] as const) {
        const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode });
        const answer = await aiSdkAdapter({ model, schemaForm: 'openai-strict', maxRetries: 0 })(request);
        expect(extractSummary(answer), mode).toEqual(summary);
      }
    } finally {
      await provider.close();
    }
  });
});

describe('aiSdkAdapter: a tool the provider ran itself, what it gave back, what the answer cites', () => {
  /**
   * How the adapter reads each part of the ai SDK's content (result.content, a step's, an error's): `answer` (its text),
   * `reasoning` (left out), `call` (named to extractSummary: SUMMARY_INVALID unless it is the one submit_handoff; a call
   * the provider ran itself, `providerExecuted`, is named by its tool), `of a call` (a tool's result or error, an
   * approval it waits for: goes with its call, named by it; without it, refused as below), `refused` (named by its type,
   * SUMMARY_INVALID: a source the answer cites, a file the model made).
   * Typed by the SDK's union and held to its declarations at run time: a part type the SDK adds fails here until it is
   * read on purpose.
   */
  const PARTS_NAMED = {
    text: 'answer',
    reasoning: 'reasoning',
    'tool-call': 'call',
    'tool-result': 'of a call',
    'tool-error': 'of a call',
    'tool-approval-request': 'of a call',
    source: 'refused',
    file: 'refused',
  } as const;
  const PARTS: Record<ContentPart<ToolSet>['type'], 'answer' | 'reasoning' | 'call' | 'of a call' | 'refused'> =
    PARTS_NAMED; // named first: an older SDK may lack a key
  it("names every part type of the ai SDK's ContentPart (a new one is noticed here)", () => {
    expect(Object.keys(PARTS).sort()).toEqual([...new Set(unionTags('ai', 'ContentPart'))].sort());
  }, 60_000); // the compiler reads the SDK's declarations: seconds, not the default 5 s, on a shared machine

  /**
   * Each OpenAI Responses output item the SDK's OpenAI provider reads beside the answer, as the API returns it, and the
   * name the answer is refused with: the tool's name where the provider makes the item a call of it (with its result
   * where it has one), the item's type where it drops the item (mcp_list_tools), as openaiAdapter names it.
   */
  const ITEMS: Record<string, [Record<string, unknown>, string]> = {
    web_search_call: [
      { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'q' } },
      'web_search',
    ],
    file_search_call: [
      { type: 'file_search_call', id: 'fs_1', status: 'completed', queries: ['q'], results: null },
      'file_search',
    ],
    code_interpreter_call: [
      {
        type: 'code_interpreter_call',
        id: 'ci_1',
        status: 'completed',
        code: 'print(1)',
        container_id: 'cntr_1',
        outputs: [{ type: 'logs', logs: '1' }],
      },
      'code_interpreter',
    ],
    image_generation_call: [
      { type: 'image_generation_call', id: 'ig_1', status: 'completed', result: 'aGk=' },
      'image_generation',
    ],
    computer_call: [{ type: 'computer_call', id: 'cu_1', status: 'completed' }, 'computer_use'],
    mcp_call: [
      {
        type: 'mcp_call',
        id: 'mcp_1',
        status: 'completed',
        arguments: '{}',
        name: 'fetch_page',
        server_label: 'web',
        output: 'a page',
      },
      'mcp.fetch_page',
    ],
    mcp_list_tools: [
      {
        type: 'mcp_list_tools',
        id: 'mcpl_1',
        server_label: 'web',
        tools: [{ name: 'fetch_page', input_schema: {} }],
      },
      'mcp_list_tools',
    ],
    mcp_approval_request: [
      { type: 'mcp_approval_request', id: 'mcpr_1', server_label: 'web', name: 'fetch_page', arguments: '{}' },
      'mcp.fetch_page',
    ],
    apply_patch_call: [
      {
        type: 'apply_patch_call',
        id: 'ap_1',
        call_id: 'call_5',
        status: 'completed',
        operation: { type: 'delete_file', path: 'a.ts' },
      },
      'apply_patch',
    ],
    shell_call: [
      { type: 'shell_call', id: 'sh_1', call_id: 'call_6', status: 'completed', action: { commands: ['ls'] } },
      'shell',
    ],
    local_shell_call: [
      {
        type: 'local_shell_call',
        id: 'ls_1',
        call_id: 'call_7',
        status: 'completed',
        action: { type: 'exec', command: ['ls'], env: {} },
      },
      'local_shell',
    ],
    tool_search_call: [
      { type: 'tool_search_call', id: 'ts_1', execution: 'server', call_id: null, status: 'completed', arguments: {} },
      'tool_search',
    ],
  };
  const args = JSON.stringify(strictSummary);
  const messageOf = (annotations: unknown[]) => ({
    type: 'message',
    id: 'msg_1',
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text: args, annotations }],
  });
  const summaryItem = (mode: 'tool' | 'structured') => (mode === 'tool' ? functionCall(args) : messageOf([]));
  const responses = (url: string) => createOpenAI({ apiKey: 'test-key', baseURL: `${url}/v1` }).responses('gpt-test');

  async function outcomeOf(mode: 'tool' | 'structured', reply: Reply, of = responses) {
    const provider = await startFakeProvider();
    try {
      provider.script(reply);
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: aiSdkAdapter({ model: of(provider.url), schemaForm: 'openai-strict', maxRetries: 0 }),
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e as Error);
      return { outcome, published: ledger.published };
    } finally {
      await provider.close();
    }
  }

  it.each(
    ['structured', 'tool'].flatMap((mode) => Object.keys(ITEMS).map((type) => [mode, type])) as Array<
      ['tool' | 'structured', string]
    >,
  )(
    'refuses a %s answer beside a Responses %s item: SUMMARY_INVALID naming it, nothing published',
    async (mode, type) => {
      const [item, named] = ITEMS[type]!;
      const { outcome, published } = await outcomeOf(mode, response([item, summaryItem(mode)]));
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toContain(`the model called "${named}"`);
      expect(published).toBe(0);
    },
  );

  it.each(['url_citation', 'file_citation'])(
    'refuses a Responses answer whose message cites a %s (a source part): SUMMARY_INVALID naming it',
    async (kind) => {
      const annotation =
        kind === 'url_citation'
          ? { type: kind, url: 'https://example.com/', title: 'a page', start_index: 0, end_index: 4 }
          : { type: kind, file_id: 'file_1', filename: 'notes.txt', index: 0 };
      const { outcome, published } = await outcomeOf('structured', response([messageOf([annotation])]));
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toContain('the model called "source"');
      expect(published).toBe(0);
    },
  );

  it("refuses a chat model's answer that cites a web search (url_citation): SUMMARY_INVALID naming it", async () => {
    const citation = {
      type: 'url_citation',
      url_citation: { url: 'https://example.com/', title: 'a page', start_index: 0, end_index: 4 },
    };
    const body = completion({ role: 'assistant', content: args, refusal: null, annotations: [citation] }, 'stop');
    const { outcome, published } = await outcomeOf('structured', { body }, model);
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toContain('the model called "source"');
    expect(published).toBe(0);
  });

  it.each(['compaction', 'program', 'additional_tools', 'an_item_type_of_tomorrow'])(
    'publishes nothing beside a Responses %s item the provider does not know (it throws: MODEL_FAILED)',
    async (type) => {
      const { outcome, published } = await outcomeOf(
        'structured',
        response([{ type, id: 'x_1' }, summaryItem('structured')]),
      );
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'MODEL_FAILED' });
      expect(published).toBe(0);
    },
  );

  it.each(['structured', 'tool'] as const)('reads the %s answer beside the reasoning it leaves out', async (mode) => {
    const provider = await startFakeProvider();
    try {
      const reasoning = { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' };
      provider.script(response([reasoning, summaryItem(mode)]));
      const adapter = aiSdkAdapter({ model: responses(provider.url), schemaForm: 'openai-strict', maxRetries: 0 });
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode });
      expect(extractSummary(await adapter(request))).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});

/** A Messages API answer, as the Anthropic API sends it. */
function messageReply(content: unknown[], stopReason: string): Reply {
  return {
    body: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 20 },
    },
  };
}

/** A generateContent answer, as the Gemini API sends it: one candidate of `parts`, its other fields `fields`. */
function generatedReply(parts: unknown[], finishReason = 'STOP', fields: Record<string, unknown> = {}): Reply {
  return {
    body: {
      candidates: [{ content: { role: 'model', parts }, finishReason, index: 0, ...fields }],
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 20, totalTokenCount: 30 },
      modelVersion: 'gemini-test',
    },
  };
}

/**
 * The form's schema, once the schema a provider sent in its own conversion of it is checked to hold what the form holds:
 * the summary's fields, the required ones.
 */
function arrivesAs(sent: unknown, form: SummarySchemaForm): JsonSchemaObject {
  type Shape = { type?: unknown; properties: Record<string, unknown>; required?: unknown };
  const expected = summarySchemaFor(form);
  const [got, want] = [sent as Shape, expected as Shape];
  expect([got.type, Object.keys(got.properties), got.required]).toEqual([
    want.type,
    Object.keys(want.properties),
    want.required,
  ]);
  return expected;
}

const anthropicModel = (url: string) => createAnthropic({ apiKey: 'test-key', baseURL: `${url}/v1` })('claude-test');
const googleModel = (url: string) =>
  createGoogleGenerativeAI({ apiKey: 'test-key', baseURL: `${url}/v1beta` })('gemini-test');

for (const mode of ['tool', 'structured'] as const) {
  providerCases(`aiSdkAdapter (Anthropic model, anthropic form, ${mode})`, {
    adapter: (url) => aiSdkAdapter({ model: anthropicModel(url), schemaForm: 'anthropic', maxRetries: 0 }),
    mode,
    answer: summary,
    // Tool mode: the forced submit_handoff tool; structured mode: the Messages API's structured output
    // (`output_config.format`), answered as text.
    good: (a) =>
      mode === 'tool'
        ? messageReply([{ type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: a }], 'tool_use')
        : messageReply([{ type: 'text', text: JSON.stringify(a) }], 'end_turn'),
    truncated: (a) =>
      mode === 'tool'
        ? messageReply([{ type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: a }], 'max_tokens')
        : messageReply([{ type: 'text', text: JSON.stringify(a).slice(0, 40) }], 'max_tokens'),
    // The SDK's Anthropic provider reads the stop reason `refusal` as `content-filter` (README).
    refusalCode: 'SUMMARY_INCOMPLETE',
    refusal: () => messageReply([], 'refusal'),
    empty: () => messageReply([], 'end_turn'),
    httpError: () => ({
      status: 404,
      body: { type: 'error', error: { type: 'not_found_error', message: 'no such model' } },
    }),
    sentSchema: (r) => {
      expect(r.path).toBe('/v1/messages');
      // Structured mode: the provider moves what the API's structured output does not take (lengths, counts,
      // patterns) into the descriptions (its conversion, not the adapter's).
      return mode === 'tool'
        ? (r.body.tools as Array<{ input_schema: unknown }>)[0]!.input_schema
        : arrivesAs((r.body.output_config as { format: { schema: unknown } }).format.schema, 'anthropic');
    },
    sentTools: (r) => ((r.body.tools as Array<{ name: string }> | undefined) ?? []).map((t) => t.name),
    expectedSchema: summarySchemaFor('anthropic'),
  });

  providerCases(`aiSdkAdapter (Google model, gemini form, ${mode})`, {
    adapter: (url) => aiSdkAdapter({ model: googleModel(url), schemaForm: 'gemini', maxRetries: 0 }),
    mode,
    answer: summary,
    good: (a) =>
      mode === 'tool'
        ? generatedReply([{ functionCall: { name: 'submit_handoff', args: a } }])
        : generatedReply([{ text: JSON.stringify(a) }]),
    truncated: (a) => generatedReply([{ text: JSON.stringify(a).slice(0, 40) }], 'MAX_TOKENS'),
    filtered: (a) => generatedReply([{ text: JSON.stringify(a) }], 'SAFETY'),
    // The SDK's Google provider reads a blocked prompt as `content-filter` (README).
    refusalCode: 'SUMMARY_INCOMPLETE',
    refusal: () => ({ body: { promptFeedback: { blockReason: 'PROHIBITED_CONTENT' }, modelVersion: 'gemini-test' } }),
    empty: () => generatedReply([]),
    httpError: () => ({ status: 404, body: { error: { code: 404, message: 'no such model', status: 'NOT_FOUND' } } }),
    sentSchema: (r) => {
      expect(r.path).toBe('/v1beta/models/gemini-test:generateContent');
      // The provider converts the JSON Schema to the API's OpenAPI Schema (its conversion: additionalProperties is
      // dropped), in both modes.
      return arrivesAs(
        mode === 'tool'
          ? (r.body.tools as Array<{ functionDeclarations: Array<{ parameters: unknown }> }>)[0]!
              .functionDeclarations[0]!.parameters
          : (r.body.generationConfig as { responseSchema: unknown }).responseSchema,
        'gemini',
      );
    },
    sentTools: (r) =>
      ((r.body.tools as Array<{ functionDeclarations: Array<{ name: string }> }> | undefined) ?? []).flatMap((t) =>
        t.functionDeclarations.map((d) => d.name),
      ),
    expectedSchema: summarySchemaFor('gemini'),
  });
}

describe('aiSdkAdapter with the Anthropic and Google providers: the work of a tool beside the summary', () => {
  type Mode = 'tool' | 'structured';
  const json = JSON.stringify(summary);

  /**
   * What the adapter names for `reply` (one call of it), and what compact makes of the same reply: the first shows the
   * answer is refused for the right thing, the second that it is refused, and nothing published.
   */
  async function judged(model: (url: string) => LanguageModel, form: SummarySchemaForm, mode: Mode, reply: Reply) {
    const provider = await startFakeProvider();
    try {
      provider.script(reply, reply);
      const adapter = aiSdkAdapter({ model: model(provider.url), schemaForm: form, maxRetries: 0 });
      const named = await adapter(compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode })).then(
        (r) => (r.toolCalls ?? []).map((c) => c.name),
        (e: unknown) => e,
      );
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: adapter,
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e as Error);
      return { named, outcome, published: ledger.published };
    } finally {
      await provider.close();
    }
  }

  /**
   * Blocks of a Messages API answer beside the summary, as the API sends them, and the name anthropicAdapter refuses
   * each with (SUMMARY_INVALID), or `null` where the SDK refuses the answer itself (MODEL_FAILED: its Anthropic
   * provider's schema does not know `container_upload`; the SDK finds no call for a server tool's result). The provider
   * makes the others provider-executed calls (`web_search`), results and sources, but drops a server tool it does not
   * know and turns a `compaction` block into text of the answer: the adapter reads those from the raw body.
   */
  const BLOCKS: Record<string, [unknown[], string | null]> = {
    web_search: [
      [
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'handoff' } },
        {
          type: 'web_search_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: [
            { type: 'web_search_result', url: 'https://example.invalid/a', title: 'a', encrypted_content: 'x' },
          ],
        },
      ],
      'web_search',
    ],
    'web_search_tool_result without its call': [
      [
        {
          type: 'web_search_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: [
            { type: 'web_search_result', url: 'https://example.invalid/a', title: 'a', encrypted_content: 'x' },
          ],
        },
      ],
      null,
    ],
    web_fetch: [
      [
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_fetch', input: { url: 'https://example.invalid/a' } },
        {
          type: 'web_fetch_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: {
            type: 'web_fetch_result',
            url: 'https://example.invalid/a',
            retrieved_at: '2026-12-07T00:00:00Z',
            content: {
              type: 'document',
              title: 'a',
              source: { type: 'text', media_type: 'text/plain', data: 'a page' },
            },
          },
        },
      ],
      'web_fetch',
    ],
    code_execution: [
      [
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'code_execution', input: { code: 'print(1)' } },
        {
          type: 'code_execution_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: { type: 'code_execution_result', stdout: '1', stderr: '', return_code: 0, content: [] },
        },
      ],
      'code_execution',
    ],
    bash_code_execution: [
      [
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'bash_code_execution', input: { command: 'cat notes.md' } },
        {
          type: 'bash_code_execution_tool_result',
          tool_use_id: 'srvtoolu_1',
          content: { type: 'bash_code_execution_result', stdout: 'notes', stderr: '', return_code: 0, content: [] },
        },
      ],
      'bash_code_execution',
    ],
    mcp_tool_use: [
      [
        { type: 'mcp_tool_use', id: 'mcptoolu_1', name: 'fetch_page', server_name: 'web', input: {} },
        { type: 'mcp_tool_result', tool_use_id: 'mcptoolu_1', is_error: false, content: [{ type: 'text', text: 'a' }] },
      ],
      'fetch_page',
    ],
    'a server tool the provider does not know': [
      [{ type: 'server_tool_use', id: 'srvtoolu_1', name: 'a_server_tool_of_tomorrow', input: {} }],
      'a_server_tool_of_tomorrow',
    ],
    container_upload: [[{ type: 'container_upload', file_id: 'file_1' }], null],
    compaction: [[{ type: 'compaction', content: 'What the API kept of an earlier context.' }], 'compaction'],
  };
  const summaryBlock = (mode: Mode) =>
    mode === 'tool'
      ? { type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: summary }
      : { type: 'text', text: json };

  it.each((['tool', 'structured'] as const).flatMap((mode) => Object.keys(BLOCKS).map((k) => [mode, k] as const)))(
    'refuses a %s answer beside Anthropic %s, as anthropicAdapter does: nothing published',
    async (mode, key) => {
      const [blocks, native] = BLOCKS[key]!;
      const reply = messageReply([...blocks, summaryBlock(mode)], mode === 'tool' ? 'tool_use' : 'end_turn');
      const { named, outcome, published } = await judged(anthropicModel, 'anthropic', mode, reply);
      if (native === null) {
        expect(outcome).toMatchObject({ name: 'LedgerError', code: 'MODEL_FAILED' });
      } else {
        expect(named).toContain(native);
        expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      }
      expect(published).toBe(0);
    },
  );

  it('refuses an Anthropic answer whose text cites a search result (a source part): SUMMARY_INVALID', async () => {
    const citation = {
      type: 'web_search_result_location',
      url: 'https://example.invalid/a',
      title: 'a',
      encrypted_index: 'x',
      cited_text: 'retries',
    };
    const reply = messageReply([{ type: 'text', text: json, citations: [citation] }], 'end_turn');
    const { named, outcome, published } = await judged(anthropicModel, 'anthropic', 'structured', reply);
    expect(named).toContain('source');
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect(published).toBe(0);
  });

  it.each(['tool', 'structured'] as const)(
    "reads the %s answer beside Anthropic's thinking blocks, which it leaves out",
    async (mode) => {
      const thinking = [
        { type: 'thinking', thinking: 'The summary should say {', signature: 'sig' },
        { type: 'redacted_thinking', data: 'opaque' },
      ];
      const reply = messageReply([...thinking, summaryBlock(mode)], mode === 'tool' ? 'tool_use' : 'end_turn');
      const { named, published } = await judged(anthropicModel, 'anthropic', mode, reply);
      expect(named).toEqual(mode === 'tool' ? ['submit_handoff'] : []);
      expect(published).toBe(1);
    },
  );

  /**
   * Parts of a generateContent answer beside the summary, as the API sends them, each named by its field as
   * geminiAdapter names it (SUMMARY_INVALID). The SDK's provider makes code execution and server tools
   * provider-executed calls and inline data a file, and drops the rest (a function's result, file data, a transcription,
   * a field it does not know): the adapter reads every part from the raw body. A code execution's or a server tool's
   * result without its call (`RESULTS`) the SDK refuses itself: it finds no call for it (MODEL_FAILED).
   */
  const PARTS: Record<string, Record<string, unknown>> = {
    executableCode: { executableCode: { language: 'PYTHON', code: 'print(open("notes.md").read())' } },
    codeExecutionResult: { codeExecutionResult: { outcome: 'OUTCOME_OK', output: 'the notes' } },
    toolCall: { toolCall: { id: 'tc_1', toolType: 'GOOGLE_SEARCH_WEB', args: { queries: ['handoff'] } } },
    toolResponse: { toolResponse: { id: 'tc_1', toolType: 'GOOGLE_SEARCH_WEB', response: { results: [] } } },
    functionResponse: { functionResponse: { id: 'fc_1', name: 'read_file', response: { output: 'x' } } },
    inlineData: { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } },
    fileData: { fileData: { mimeType: 'text/plain', fileUri: 'https://example.invalid/f.txt' } },
    audioTranscription: { audioTranscription: { text: 'the summary, spoken' } },
    aPartTheSdkDoesNotKnow: { aPartTheSdkDoesNotKnow: { made: 'by a tool' } },
  };
  /** The grounding a candidate may carry: a search's (which the provider makes sources of) and fetched pages'. */
  const GROUNDINGS: Record<string, Record<string, unknown>> = {
    groundingMetadata: {
      groundingMetadata: {
        webSearchQueries: ['handoff ledger'],
        groundingChunks: [{ web: { uri: 'https://example.invalid/a', title: 'a' } }],
        groundingSupports: [{ segment: { startIndex: 0, endIndex: 10 }, groundingChunkIndices: [0] }],
      },
    },
    'groundingMetadata without chunks': { groundingMetadata: { webSearchQueries: ['handoff ledger'] } },
    urlContextMetadata: {
      urlContextMetadata: {
        urlMetadata: [
          { retrievedUrl: 'https://example.invalid/a', urlRetrievalStatus: 'URL_RETRIEVAL_STATUS_SUCCESS' },
        ],
      },
    },
  };
  const RESULTS: ReadonlySet<string> = new Set(['codeExecutionResult', 'toolResponse']);
  const summaryPart = (mode: Mode) =>
    mode === 'tool' ? { functionCall: { name: 'submit_handoff', args: summary } } : { text: json };

  it.each((['tool', 'structured'] as const).flatMap((mode) => Object.keys(PARTS).map((k) => [mode, k] as const)))(
    'refuses a %s answer beside a Gemini %s part, as geminiAdapter does: nothing published',
    async (mode, field) => {
      const part = PARTS[field]!;
      for (const parts of [
        [part, summaryPart(mode)],
        [summaryPart(mode), part],
        // A thought part is left out for its text only: the work of a tool in it is refused all the same.
        [{ ...part, thought: true }, summaryPart(mode)],
      ]) {
        const { named, outcome, published } = await judged(googleModel, 'gemini', mode, generatedReply(parts));
        if (RESULTS.has(field)) {
          expect(outcome, JSON.stringify(parts)).toMatchObject({ name: 'LedgerError', code: 'MODEL_FAILED' });
        } else {
          expect(named, JSON.stringify(parts)).toContain(field);
          expect(outcome, JSON.stringify(parts)).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
        }
        expect(published).toBe(0);
      }
    },
  );

  it.each((['tool', 'structured'] as const).flatMap((mode) => Object.keys(GROUNDINGS).map((k) => [mode, k] as const)))(
    'refuses a %s answer grounded in what the request did not ask for (Gemini %s): SUMMARY_INVALID naming it',
    async (mode, key) => {
      const reply = generatedReply([summaryPart(mode)], 'STOP', GROUNDINGS[key]!);
      const { named, outcome, published } = await judged(googleModel, 'gemini', mode, reply);
      expect(named).toContain(key.split(' ')[0]);
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect(published).toBe(0);
    },
  );

  it.each(['tool', 'structured'] as const)(
    'reads the %s answer beside an empty grounding, a recitation citation, thought parts and their signatures',
    async (mode) => {
      for (const [parts, fields] of [
        [[summaryPart(mode)], { groundingMetadata: {}, urlContextMetadata: { urlMetadata: [] } }],
        [[summaryPart(mode)], { groundingMetadata: { webSearchQueries: [], groundingChunks: [] } }],
        [
          [summaryPart(mode)],
          {
            citationMetadata: {
              citations: [{ startIndex: 0, endIndex: 20, uri: 'https://github.com/example/repo', license: 'mit' }],
            },
          },
        ],
        [
          [
            { text: 'Working out what the summary holds {', thought: true, thoughtSignature: 'c2lnbmF0dXJl' },
            { thought: true, thoughtSignature: 'c2lnbmF0dXJl' },
            { ...summaryPart(mode), thoughtSignature: 'c2lnbmF0dXJl' },
          ],
          {},
        ],
      ] as Array<[unknown[], Record<string, unknown>]>) {
        const { named, published } = await judged(googleModel, 'gemini', mode, generatedReply(parts, 'STOP', fields));
        expect(named, JSON.stringify([parts, fields])).toEqual(mode === 'tool' ? ['submit_handoff'] : []);
        expect(published, JSON.stringify([parts, fields])).toBe(1);
      }
    },
  );
});

describe('aiSdkAdapter given a model id string or a v2 model: the raw body read as for any model object', () => {
  const json = JSON.stringify(summary);
  const beside = (mode: 'tool' | 'structured') =>
    generatedReply([
      mode === 'tool' ? { functionCall: { name: 'submit_handoff', args: summary } } : { text: json },
      { functionResponse: { id: 'fc_1', name: 'read_file', response: { output: 'x' } } },
    ]);
  const good = (mode: 'tool' | 'structured') =>
    generatedReply([mode === 'tool' ? { functionCall: { name: 'submit_handoff', args: summary } } : { text: json }]);

  async function compactThrough(model: LanguageModel, mode: 'tool' | 'structured') {
    const ledger = countingLedger();
    const outcome = await compact({
      ledger,
      scope: { principal: 'alice', session: 's1', run: 'r1' },
      model: aiSdkAdapter({ model, schemaForm: 'gemini', maxRetries: 0 }),
      transcript: [{ role: 'user', content: 'hi' }],
      mode,
    }).catch((e: unknown) => e as Error);
    return { outcome, published: ledger.published };
  }

  it.each(['tool', 'structured'] as const)(
    "resolves a model id string through the SDK's global provider, as the SDK does, and reads its body (%s mode)",
    async (mode) => {
      const provider = await startFakeProvider();
      const globals = globalThis as { AI_SDK_DEFAULT_PROVIDER?: unknown };
      const before = globals.AI_SDK_DEFAULT_PROVIDER;
      try {
        globals.AI_SDK_DEFAULT_PROVIDER = createGoogleGenerativeAI({
          apiKey: 'test-key',
          baseURL: `${provider.url}/v1beta`,
        });
        provider.script(beside(mode), good(mode));
        const refused = await compactThrough('gemini-test', mode);
        expect(refused.outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
        expect((refused.outcome as Error).message).toContain('"functionResponse"');
        expect(refused.published).toBe(0);
        // A summary alone is read through the id as through the model object.
        expect((await compactThrough('gemini-test', mode)).published).toBe(1);
        expect(provider.requests.map((r) => r.path)).toEqual([
          '/v1beta/models/gemini-test:generateContent',
          '/v1beta/models/gemini-test:generateContent',
        ]);
      } finally {
        globals.AI_SDK_DEFAULT_PROVIDER = before;
        await provider.close();
      }
    },
  );

  /**
   * A model of the SDK's former specification (`v2`, as the ai SDK 5's providers make them), which the SDK still takes:
   * it answers with the parts and the raw body given, as a v2 provider does (finish reason a string, usage flat).
   */
  const v2Model = (content: unknown[], body: unknown) =>
    ({
      specificationVersion: 'v2',
      provider: 'anthropic.messages',
      modelId: 'claude-test',
      supportedUrls: {},
      doGenerate: () =>
        Promise.resolve({
          content,
          finishReason: content.some((p) => (p as { type: string }).type === 'tool-call') ? 'tool-calls' : 'stop',
          usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 },
          warnings: [],
          response: { id: 'msg_1', body },
        }),
      doStream: () => Promise.reject(new Error('not streamed')),
    }) as unknown as LanguageModel;

  it.each(['tool', 'structured'] as const)(
    "reads the raw body of a v2 model as a v3 model's (%s mode): a compaction block its provider made text is refused",
    async (mode) => {
      const compaction = { type: 'compaction', content: 'What the API kept of an earlier context.' };
      const [part, block] =
        mode === 'tool'
          ? [
              { type: 'tool-call', toolCallId: 'toolu_1', toolName: 'submit_handoff', input: json },
              { type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: summary },
            ]
          : [
              { type: 'text', text: json },
              { type: 'text', text: json },
            ];
      const body = (content: unknown[]) => ({ id: 'msg_1', type: 'message', role: 'assistant', content });
      const refused = await compactThrough(v2Model([part], body([compaction, block])), mode);
      expect(refused.outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((refused.outcome as Error).message).toContain('"compaction"');
      expect(refused.published).toBe(0);
      // The same answer without the block is read.
      expect((await compactThrough(v2Model([part], body([block])), mode)).published).toBe(1);
    },
  );
});
