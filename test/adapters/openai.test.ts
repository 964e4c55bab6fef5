/** The OpenAI adapter with the real `openai` SDK against the fake provider: Responses and Chat Completions, tool and structured modes. */
import OpenAI from 'openai';
import { openaiAdapter } from '../../src/adapters/openai.js';
import { summarySchemaFor } from '../../src/summary/schema-forms.js';
import type { Reply } from '../support/fake-provider.js';
import { providerCases, strictSummary, summary } from './provider-cases.js';
import { chat, completion, functionCall, response } from './openai-replies.js';
import { describe, expect, it } from 'vitest';
import { startFakeProvider } from '../support/fake-provider.js';
import { compactionRequest, extractSummary } from '../../src/compaction/tool.js';
import { compact } from '../../src/compaction/compact.js';
import { countingLedger } from '../support/counting-ledger.js';
import type {
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseOutputText,
} from 'openai/resources/responses/responses';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions/completions';
import { elementTags, fieldNames, unionTags } from './sdk-declarations.js';

const client = (url: string) => new OpenAI({ apiKey: 'test-key', baseURL: `${url}/v1`, maxRetries: 0 });
const httpError = (): Reply => ({
  status: 400,
  body: { error: { message: 'no such model', type: 'invalid_request_error', code: 'model_not_found' } },
});

const message = (content: unknown[]) => ({
  type: 'message',
  id: 'msg_1',
  role: 'assistant',
  status: 'completed',
  content,
});
const outputText = (text: string) => ({ type: 'output_text', text, annotations: [] });
const refusalPart = { type: 'refusal', refusal: "I can't help with that." };

const body = (r: { body: Record<string, unknown> }) => r.body;

for (const mode of ['tool', 'structured'] as const) {
  providerCases(`openaiAdapter (Responses API, ${mode})`, {
    adapter: (url) => openaiAdapter({ client: client(url), model: 'gpt-test' }),
    mode,
    answer: strictSummary,
    good: (a) =>
      response([mode === 'tool' ? functionCall(JSON.stringify(a)) : message([outputText(JSON.stringify(a))])]),
    truncated: (a) =>
      response(
        [
          mode === 'tool'
            ? functionCall(JSON.stringify(a).slice(0, 40))
            : message([outputText(JSON.stringify(a).slice(0, 40))]),
        ],
        'incomplete',
        'max_output_tokens',
      ),
    filtered: (a) =>
      response(
        [mode === 'tool' ? functionCall(JSON.stringify(a)) : message([outputText(JSON.stringify(a))])],
        'incomplete',
        'content_filter',
      ),
    refusal: () => response([message([refusalPart])]),
    empty: () => response(mode === 'tool' ? [] : [message([outputText('')])]),
    httpError,
    sentSchema: (r) =>
      mode === 'tool'
        ? (body(r).tools as Array<{ parameters: unknown; strict: boolean }>)[0]!.parameters
        : (body(r).text as { format: { schema: unknown; strict: boolean } }).format.schema,
    sentTools: (r) => ((body(r).tools as Array<{ name: string }> | undefined) ?? []).map((t) => t.name),
    expectedSchema: summarySchemaFor('openai-strict'),
  });

  providerCases(`openaiAdapter (Chat Completions, ${mode})`, {
    adapter: (url) => openaiAdapter({ client: client(url), model: 'gpt-test', api: 'chat' }),
    mode,
    answer: strictSummary,
    good: (a) => chat(mode, JSON.stringify(a), mode === 'tool' ? 'tool_calls' : 'stop'),
    truncated: (a) => chat(mode, JSON.stringify(a).slice(0, 40), 'length'),
    filtered: (a) => chat(mode, JSON.stringify(a), 'content_filter'),
    refusal: () => ({
      body: completion({ role: 'assistant', content: null, refusal: "I can't help with that." }, 'stop'),
    }),
    empty: () => ({ body: completion({ role: 'assistant', content: '', refusal: null }, 'stop') }),
    httpError,
    sentSchema: (r) =>
      mode === 'tool'
        ? (body(r).tools as Array<{ function: { parameters: unknown } }>)[0]!.function.parameters
        : (body(r).response_format as { json_schema: { schema: unknown } }).json_schema.schema,
    sentTools: (r) =>
      ((body(r).tools as Array<{ function: { name: string } }> | undefined) ?? []).map((t) => t.function.name),
    expectedSchema: summarySchemaFor('openai-strict'),
  });
}

describe('openaiAdapter: one call of submit_handoff', () => {
  it('asks the Responses API for no parallel tool calls, and does not send the field to Chat Completions', async () => {
    // Chat Completions refuses `parallel_tool_calls` for the o-series reasoning models (400 unsupported_parameter):
    // sent there, every compaction with such a model would be MODEL_FAILED.
    const provider = await startFakeProvider();
    try {
      provider.script(
        response([functionCall(JSON.stringify(strictSummary))]),
        chat('tool', JSON.stringify(strictSummary), 'tool_calls'),
      );
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }] });
      await openaiAdapter({ client: client(provider.url), model: 'gpt-test' })(request);
      await openaiAdapter({ client: client(provider.url), model: 'o4-mini', api: 'chat' })(request);
      expect(
        provider.requests.map((r) => [r.path, 'parallel_tool_calls' in r.body, r.body.parallel_tool_calls]),
      ).toEqual([
        ['/v1/responses', true, false],
        ['/v1/chat/completions', false, undefined],
      ]);
    } finally {
      await provider.close();
    }
  });

  it.each(['responses', 'chat'] as const)(
    'refuses an answer that calls submit_handoff twice (%s): SUMMARY_INVALID, nothing published',
    async (api) => {
      const provider = await startFakeProvider();
      try {
        const args = JSON.stringify(strictSummary);
        provider.script(
          api === 'chat'
            ? {
                body: completion(
                  {
                    role: 'assistant',
                    content: null,
                    refusal: null,
                    tool_calls: ['call_1', 'call_2'].map((id) => ({
                      id,
                      type: 'function',
                      function: { name: 'submit_handoff', arguments: args },
                    })),
                  },
                  'tool_calls',
                ),
              }
            : response([functionCall(args), { ...functionCall(args), id: 'fc_2', call_id: 'call_2' }]),
        );
        const ledger = countingLedger();
        const err = await compact({
          ledger,
          scope: { principal: 'alice', session: 's1', run: 'r1' },
          model: openaiAdapter({ client: client(provider.url), model: 'gpt-test', api }),
          transcript: [{ role: 'user', content: 'hi' }],
        }).catch((e: unknown) => e);
        expect(err).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
        expect((err as Error).message).toMatch(/submit_handoff 2 times/);
        expect(ledger.published).toBe(0);
      } finally {
        await provider.close();
      }
    },
  );
});

describe('openaiAdapter: tool calls of the transcript', () => {
  it('sends each call with arguments: a raw string as it came, a missing input as {} (both APIs)', async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(
        response([functionCall(JSON.stringify(strictSummary))]),
        chat('tool', JSON.stringify(strictSummary), 'tool_calls'),
      );
      const calls = [
        { id: 'a', name: 'read', input: { path: 'src/a.ts' } },
        { id: 'b', name: 'read', input: '{"path": "src/b.ts"' }, // a provider's arguments left unparsed (cut short)
        { id: 'c', name: 'list', input: undefined },
      ];
      const request = compactionRequest({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: '', toolCalls: calls },
          ...calls.map((c) => ({ role: 'tool' as const, toolCallId: c.id, content: 'ok' })),
        ],
      });
      await openaiAdapter({ client: client(provider.url), model: 'gpt-test' })(request);
      await openaiAdapter({ client: client(provider.url), model: 'gpt-test', api: 'chat' })(request);
      const expected = ['{"path":"src/a.ts"}', '{"path": "src/b.ts"', '{}'];
      const responsesInput = provider.requests[0]!.body.input as Array<{ type?: string; arguments?: string }>;
      expect(responsesInput.filter((i) => i.type === 'function_call').map((i) => i.arguments)).toEqual(expected);
      const chatMessages = provider.requests[1]!.body.messages as Array<{
        tool_calls?: Array<{ function: { arguments?: string } }>;
      }>;
      const sent = chatMessages.flatMap((m) => m.tool_calls ?? []).map((c) => c.function.arguments);
      expect(sent).toEqual(expected);
    } finally {
      await provider.close();
    }
  });
});

describe('openaiAdapter: a response the provider failed', () => {
  it('throws the provider error (compact reports MODEL_FAILED with it), not a summary cut short', async () => {
    const provider = await startFakeProvider();
    try {
      const failed = response([], 'failed');
      (failed.body as Record<string, unknown>).error = { code: 'server_error', message: 'the model crashed' };
      provider.script(failed);
      const model = openaiAdapter({ client: client(provider.url), model: 'gpt-test' });
      const err = await model(compactionRequest({ messages: [{ role: 'user', content: 'hi' }] })).catch((e) => e);
      expect(err).toBeInstanceOf(Error);
      expect(String(err.message)).toMatch(/server_error: the model crashed/);
      expect(err.error).toMatchObject({ code: 'server_error' });
    } finally {
      await provider.close();
    }
  });
});

describe('compactionRequest', () => {
  it.each([Number.NaN, Infinity, -5, 0, 2.5])(
    'refuses maxOutputTokens %s with INVALID_ARGUMENT (NaN and Infinity would be sent as null: no limit)',
    (maxOutputTokens) => {
      expect(() => compactionRequest({ messages: [{ role: 'user', content: 'hi' }], maxOutputTokens })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    },
  );
});

describe('openaiAdapter and what OpenAI keeps', () => {
  it('sends store: false with every Responses request (the transcript is not kept as a stored response)', async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(response([functionCall(JSON.stringify(strictSummary))]));
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }] });
      await openaiAdapter({ client: client(provider.url), model: 'gpt-test' })(request);
      expect(provider.requests.map((r) => [r.path, r.body.store])).toEqual([['/v1/responses', false]]);
    } finally {
      await provider.close();
    }
  });
});

describe('openaiAdapter: a Responses answer in phases', () => {
  it("reads the final_answer message only: a commentary message's text before it is not part of the summary", async () => {
    const provider = await startFakeProvider();
    try {
      provider.script(
        response([
          { ...message([outputText('I will write the handoff summary now.')]), id: 'msg_0', phase: 'commentary' },
          { ...message([outputText(JSON.stringify(strictSummary))]), phase: 'final_answer' },
        ]),
      );
      const model = openaiAdapter({ client: client(provider.url), model: 'gpt-test' });
      const answer = await model(
        compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode: 'structured' }),
      );
      expect(extractSummary(answer)).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});

describe("openaiAdapter: README's Responses statuses without a finished answer", () => {
  it.each(['in_progress', 'queued', 'cancelled'])(
    'reads status %s as not finished: SUMMARY_INCOMPLETE, however whole the submit_handoff call looks',
    async (status) => {
      const provider = await startFakeProvider();
      try {
        provider.script(response([functionCall(JSON.stringify(strictSummary))], status));
        const model = openaiAdapter({ client: client(provider.url), model: 'gpt-test' });
        const answer = await model(compactionRequest({ messages: [{ role: 'user', content: 'hi' }] }));
        expect(answer.finishReason).toBe('other');
        expect(answer.toolCalls?.[0]?.input).toEqual(summary);
        expect(() => extractSummary(answer)).toThrow(expect.objectContaining({ code: 'SUMMARY_INCOMPLETE' }));
      } finally {
        await provider.close();
      }
    },
  );
});

describe('openaiAdapter: an answer that also calls a tool of another kind, or holds an item not finished', () => {
  /** One compaction through the adapter (`api`, `mode`) against `reply`: its error, and how many publishes it made. */
  async function compactOnce(api: 'responses' | 'chat', mode: 'tool' | 'structured', reply: Reply) {
    const provider = await startFakeProvider();
    try {
      provider.script(reply);
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: openaiAdapter({ client: client(provider.url), model: 'gpt-test', api }),
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e);
      return { outcome, published: ledger.published };
    } finally {
      await provider.close();
    }
  }
  const args = JSON.stringify(strictSummary);

  it('refuses a Chat Completions answer with a custom tool call beside submit_handoff: SUMMARY_INVALID naming it', async () => {
    // The SDK's types: a tool call is `function` or `custom` ({ custom: { name, input } }); the custom one was dropped
    // unread and the answer published as if submit_handoff had been the only call.
    const { outcome, published } = await compactOnce('chat', 'tool', {
      body: completion(
        {
          role: 'assistant',
          content: null,
          refusal: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'submit_handoff', arguments: args } },
            { id: 'call_2', type: 'custom', custom: { name: 'apply_patch', input: '*** Begin Patch' } },
          ],
        },
        'tool_calls',
      ),
    });
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toMatch(/called "apply_patch"/);
    expect(published).toBe(0);
  });

  it('refuses a Chat Completions answer with the deprecated message.function_call (finish_reason function_call): SUMMARY_INVALID naming it', async () => {
    // The table reads finish_reason function_call as a finished call, whose call is message.function_call (not
    // tool_calls): it was dropped unread, and the JSON text beside it published as the summary.
    const { outcome, published } = await compactOnce('chat', 'structured', {
      body: completion(
        {
          role: 'assistant',
          content: args,
          refusal: null,
          function_call: { name: 'write_file', arguments: '{"path":"a.ts"}' },
        },
        'function_call',
      ),
    });
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toMatch(/called "write_file"/);
    expect(published).toBe(0);
  });

  it('refuses a Responses answer with a custom_tool_call item beside submit_handoff: SUMMARY_INVALID naming it', async () => {
    const custom = { type: 'custom_tool_call', id: 'ctc_1', call_id: 'call_2', name: 'apply_patch', input: 'x' };
    const { outcome, published } = await compactOnce('responses', 'tool', response([functionCall(args), custom]));
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toMatch(/called "apply_patch"/);
    expect(published).toBe(0);
  });

  it.each(['responses', 'chat'] as const)(
    'refuses a finished submit_handoff call whose arguments are not JSON (%s): SUMMARY_INVALID, nothing published',
    async (api) => {
      const broken = `${args.slice(0, -1)},"notes":}`;
      const { outcome, published } = await compactOnce(
        api,
        'tool',
        api === 'chat' ? chat('tool', broken, 'tool_calls') : response([functionCall(broken)]),
      );
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toMatch(/submit_handoff input is not JSON/);
      expect(published).toBe(0);
    },
  );

  it.each(['incomplete', 'in_progress'])(
    'reads a completed response whose submit_handoff item has status %s as not finished: SUMMARY_INCOMPLETE',
    async (status) => {
      const { outcome, published } = await compactOnce(
        'responses',
        'tool',
        response([{ ...functionCall(args), status }]),
      );
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
      expect(published).toBe(0);
    },
  );

  it('reads a completed response whose answer message has status incomplete as not finished: SUMMARY_INCOMPLETE', async () => {
    const { outcome, published } = await compactOnce(
      'responses',
      'structured',
      response([{ ...message([outputText(args)]), status: 'incomplete' }]),
    );
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
    expect(published).toBe(0);
  });
});

describe("openaiAdapter: every output item type of the SDK's ResponseOutputItem", () => {
  /**
   * How the adapter reads each item a Responses answer may hold: `answer` (a message: its text), `reasoning` (the
   * model's thinking, not part of the answer: left out), `call` (a call of a function or custom tool the request
   * offers: named to extractSummary, SUMMARY_INVALID unless it is the one submit_handoff), `refused` (a tool the API ran
   * itself or leaves to the caller, its result, tools made available part way, or the context the API compacted itself:
   * none of which the summary turn asks for; named by its type, SUMMARY_INVALID). Typed by the SDK's union, and held to
   * its declarations below at run time: an item type the SDK adds fails here until it is read on purpose.
   */
  // Each table is named first and typed by the SDK's union after: every member of the installed SDK must be in it, and
  // an older SDK (the lowest of the peer range, whose declarations test/adapter-peer-ranges.test.ts checks this file
  // against) may lack some of its keys.
  const HOW_NAMED = {
    message: 'answer',
    reasoning: 'reasoning',
    function_call: 'call',
    custom_tool_call: 'call',
    function_call_output: 'refused',
    custom_tool_call_output: 'refused',
    file_search_call: 'refused',
    web_search_call: 'refused',
    computer_call: 'refused',
    computer_call_output: 'refused',
    program: 'refused',
    program_output: 'refused',
    tool_search_call: 'refused',
    tool_search_output: 'refused',
    additional_tools: 'refused',
    compaction: 'refused',
    image_generation_call: 'refused',
    code_interpreter_call: 'refused',
    local_shell_call: 'refused',
    local_shell_call_output: 'refused',
    shell_call: 'refused',
    shell_call_output: 'refused',
    apply_patch_call: 'refused',
    apply_patch_call_output: 'refused',
    mcp_call: 'refused',
    mcp_list_tools: 'refused',
    mcp_approval_request: 'refused',
    mcp_approval_response: 'refused',
  } as const;
  const HOW: Record<ResponseOutputItem['type'], 'answer' | 'reasoning' | 'call' | 'refused'> = HOW_NAMED;

  it("names every item type of the SDK's ResponseOutputItem (a new one is noticed here)", () => {
    const types = unionTags('openai/resources/responses/responses', 'ResponseOutputItem');
    expect(types.length).toBeGreaterThan(10);
    expect(Object.keys(HOW).sort()).toEqual([...new Set(types)].sort());
  }, 60_000); // the compiler reads the SDK's declarations: seconds, not the default 5 s, on a shared machine

  /** An item of `type` as the API returns it, with what makes it a call (an id, a call_id, a name) where it has one. */
  const itemOf = (type: string): Record<string, unknown> => ({
    type,
    id: `${type}_1`,
    call_id: 'call_9',
    status: 'completed',
    ...(type.startsWith('mcp_') ? { name: 'fetch_page', server_label: 'web', arguments: '{}' } : {}),
  });
  const args = JSON.stringify(strictSummary);
  /** The summary as `mode` answers it: a submit_handoff call, or a message of its JSON. */
  const summaryItem = (mode: 'tool' | 'structured') =>
    mode === 'tool' ? functionCall(args) : message([outputText(args)]);

  async function outcomeOf(mode: 'tool' | 'structured', output: unknown[]) {
    const provider = await startFakeProvider();
    try {
      provider.script(response(output));
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: openaiAdapter({ client: client(provider.url), model: 'gpt-test' }),
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e as Error);
      return { outcome, published: ledger.published };
    } finally {
      await provider.close();
    }
  }

  const refused = Object.keys(HOW).filter((t) => HOW[t as ResponseOutputItem['type']] === 'refused');
  it.each(
    ['structured', 'tool'].flatMap((mode) => [
      ...refused.map((type) => [mode, type]),
      [mode, 'an_item_type_of_tomorrow'],
    ]) as Array<['tool' | 'structured', string]>,
  )('refuses a %s answer beside a %s item: SUMMARY_INVALID naming the item, nothing published', async (mode, type) => {
    // The item first, as the API orders a tool's work before the answer written after it.
    const { outcome, published } = await outcomeOf(mode, [itemOf(type), summaryItem(mode)]);
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toContain(`the model called "${type}"`);
    expect(published).toBe(0);
  });

  /** Each kind of content part of a message, and of what its text cites, likewise. */
  const PARTS_NAMED = {
    output_text: 'answer',
    refusal: 'refusal',
  } as const;
  const PARTS: Record<ResponseOutputMessage['content'][number]['type'], 'answer' | 'refusal'> = PARTS_NAMED;
  const CITES_NAMED = {
    url_citation: 'refused',
    file_citation: 'refused',
    container_file_citation: 'refused',
    file_path: 'refused',
  } as const;
  const CITES: Record<ResponseOutputText['annotations'][number]['type'], 'refused'> = CITES_NAMED;

  it("names every content part of the SDK's ResponseOutputMessage and every annotation of its text (a new one is noticed here)", () => {
    const RESPONSES = 'openai/resources/responses/responses';
    expect(Object.keys(PARTS).sort()).toEqual(elementTags(RESPONSES, 'ResponseOutputMessage', 'content').sort());
    expect(Object.keys(CITES).sort()).toEqual(elementTags(RESPONSES, 'ResponseOutputText', 'annotations').sort());
  }, 60_000); // the compiler reads the SDK's declarations: seconds, not the default 5 s, on a shared machine

  it.each([...Object.keys(CITES), 'a_citation_of_tomorrow'])(
    'refuses a summary message whose text cites a %s: SUMMARY_INVALID naming it, nothing published',
    async (type) => {
      const cited = { ...outputText(args), annotations: [{ type, url: 'https://example.com/', file_id: 'file_1' }] };
      const { outcome, published } = await outcomeOf('structured', [message([cited])]);
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toContain(`the model called "${type}"`);
      expect(published).toBe(0);
    },
  );

  it('refuses a summary message beside a content part it does not know, naming its type', async () => {
    const { outcome, published } = await outcomeOf('structured', [
      message([{ type: 'output_audio', data: 'aGk=' }, outputText(args)]),
    ]);
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toContain('the model called "output_audio"');
    expect(published).toBe(0);
  });

  it('refuses an answer beside an item without a type, as an item it does not know', async () => {
    const { outcome, published } = await outcomeOf('structured', [{ id: 'x_1' }, summaryItem('structured')]);
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toContain('the model called "an output item without a type"');
    expect(published).toBe(0);
  });

  it.each(['structured', 'tool'] as const)('reads the %s answer beside the reasoning it leaves out', async (mode) => {
    const provider = await startFakeProvider();
    try {
      const reasoning = { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' };
      provider.script(response([reasoning, summaryItem(mode)]));
      const model = openaiAdapter({ client: client(provider.url), model: 'gpt-test' });
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode });
      expect(extractSummary(await model(request))).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});

describe("openaiAdapter: every field of the SDK's Chat Completions message", () => {
  const CHAT = 'openai/resources/chat/completions/completions';
  /**
   * How the adapter reads each field of a Chat Completions answer: `answer` (its text), `refusal` (MODEL_REFUSED),
   * `call` (named to extractSummary, SUMMARY_INVALID unless it is the one submit_handoff), `refused` (named by its type
   * as a call of another tool is: `url_citation`, the web search of OpenAI's search models), `not read` (the role; the
   * spoken answer of an audio request, which the adapter never makes: with it the text is null, no summary). Typed by
   * the SDK's interface and held to its declarations at run time: a field the SDK adds fails here until it is read on
   * purpose.
   */
  const FIELDS_NAMED = {
    content: 'answer',
    refusal: 'refusal',
    role: 'not read',
    annotations: 'refused',
    audio: 'not read',
    function_call: 'call',
    tool_calls: 'call',
  } as const;
  const FIELDS: Record<keyof ChatCompletionMessage, 'answer' | 'refusal' | 'call' | 'refused' | 'not read'> =
    FIELDS_NAMED;
  /** Each kind of tool call, and of annotation, likewise. */
  const CALLS_NAMED = { function: 'call', custom: 'call' } as const;
  const CALLS: Record<ChatCompletionMessageToolCall['type'], 'call'> = CALLS_NAMED;
  const ANNOTATIONS_NAMED = { url_citation: 'refused' } as const;
  const ANNOTATIONS: Record<ChatCompletionMessage.Annotation['type'], 'refused'> = ANNOTATIONS_NAMED;

  it("names every field of the SDK's ChatCompletionMessage, each kind of its tool calls and annotations (a new one is noticed here)", () => {
    expect(Object.keys(FIELDS).sort()).toEqual(fieldNames(CHAT, 'ChatCompletionMessage').sort());
    expect(Object.keys(CALLS).sort()).toEqual(unionTags(CHAT, 'ChatCompletionMessageToolCall').sort());
    expect(Object.keys(ANNOTATIONS).sort()).toEqual(elementTags(CHAT, 'ChatCompletionMessage', 'annotations').sort());
  }, 60_000); // the compiler reads the SDK's declarations: seconds, not the default 5 s, on a shared machine

  const args = JSON.stringify(strictSummary);
  const citation = {
    type: 'url_citation',
    url_citation: { url: 'https://example.com/', title: 'a page', start_index: 0, end_index: 4 },
  };
  /** The summary as `mode` answers it in a Chat Completions message, with `extra` fields. */
  const answerOf = (mode: 'tool' | 'structured', extra: Record<string, unknown>) =>
    completion(
      {
        ...(chat(mode, args, 'stop').body as ReturnType<typeof completion>).choices[0]!.message,
        ...extra,
      },
      mode === 'tool' ? 'tool_calls' : 'stop',
    );

  async function outcomeOf(mode: 'tool' | 'structured', body: unknown) {
    const provider = await startFakeProvider();
    try {
      provider.script({ body });
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: openaiAdapter({ client: client(provider.url), model: 'gpt-4o-search-preview', api: 'chat' }),
        transcript: [{ role: 'user', content: 'hi' }],
        mode,
      }).catch((e: unknown) => e as Error);
      return { outcome, published: ledger.published };
    } finally {
      await provider.close();
    }
  }

  it.each(['structured', 'tool'] as const)(
    'refuses a %s answer that cites what the model searched the web for (url_citation): SUMMARY_INVALID naming it',
    async (mode) => {
      const { outcome, published } = await outcomeOf(mode, answerOf(mode, { annotations: [citation] }));
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toContain('the model called "url_citation"');
      expect(published).toBe(0);
    },
  );

  it('names a tool call of a type it does not know by its type, beside the submit_handoff call', async () => {
    const unknownCall = { id: 'call_2', type: 'web_search', web_search: { query: 'q' } };
    const body = answerOf('tool', {});
    const message = body.choices[0]!.message as { tool_calls: unknown[] };
    message.tool_calls.push(unknownCall);
    const { outcome, published } = await outcomeOf('tool', body);
    expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
    expect((outcome as Error).message).toContain('the model called "web_search"');
    expect(published).toBe(0);
  });

  it.each(['structured', 'tool'] as const)('reads a %s answer whose annotations are empty', async (mode) => {
    const provider = await startFakeProvider();
    try {
      provider.script({ body: answerOf(mode, { annotations: [] }) });
      const model = openaiAdapter({ client: client(provider.url), model: 'gpt-test', api: 'chat' });
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode });
      expect(extractSummary(await model(request))).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});
