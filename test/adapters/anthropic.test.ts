/** The Anthropic adapter with the real `@anthropic-ai/sdk` against the fake provider: the forced submit_handoff tool. */
import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlock } from '@anthropic-ai/sdk/resources/messages/messages';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { anthropicAdapter, anthropicSubmitHandoffTool } from '../../src/adapters/anthropic.js';
import { summarySchemaFor } from '../../src/summary/schema-forms.js';
import type { Reply } from '../support/fake-provider.js';
import { providerCases, summary } from './provider-cases.js';

function message(content: unknown[], stopReason: string): Reply {
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
const toolUse = (input: unknown) => ({ type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input });

for (const mode of ['tool', 'structured'] as const) {
  providerCases(`anthropicAdapter (${mode} mode: forced submit_handoff)`, {
    adapter: (url) =>
      anthropicAdapter({
        client: new Anthropic({ apiKey: 'test-key', baseURL: url, maxRetries: 0 }),
        model: 'claude-test',
      }),
    mode,
    answer: summary,
    good: (a) => message([toolUse(a)], 'tool_use'),
    truncated: (a) => message([toolUse(a)], 'max_tokens'),
    refusal: () => message([], 'refusal'),
    empty: () => message([], 'end_turn'),
    httpError: () => ({
      status: 404,
      body: { type: 'error', error: { type: 'not_found_error', message: 'no such model' } },
    }),
    sentSchema: (r) => (r.body.tools as Array<{ input_schema: unknown }>)[0]!.input_schema,
    sentTools: (r) => (r.body.tools as Array<{ name: string }>).map((t) => t.name),
    expectedSchema: summarySchemaFor('anthropic'),
    expectedTools: ['submit_handoff'],
  });
}

describe('anthropicSubmitHandoffTool', () => {
  it('is the Messages API tool shape (input_schema, type object)', () => {
    expect(anthropicSubmitHandoffTool).toEqual({
      name: 'submit_handoff',
      description: expect.stringContaining('handoff summary'),
      input_schema: summarySchemaFor('anthropic'),
    });
    expect(anthropicSubmitHandoffTool.input_schema.type).toBe('object');
  });
});

type Block = { type: string; id?: string; tool_use_id?: string; content?: unknown; text?: string };
type Sent = { role: string; content: string | Block[] };

/** The `messages` the adapter sends for a compaction request of `messages` (to the fake provider). */
async function sent(
  messages: Parameters<typeof import('../../src/compaction/tool.js').compactionRequest>[0]['messages'],
) {
  const { startFakeProvider } = await import('../support/fake-provider.js');
  const { compactionRequest } = await import('../../src/compaction/tool.js');
  const provider = await startFakeProvider();
  try {
    provider.script(message([toolUse(summary)], 'tool_use'));
    const model = anthropicAdapter({
      client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
      model: 'claude-test',
    });
    await model(compactionRequest({ messages }));
    return provider.requests[0]!.body.messages as Sent[];
  } finally {
    await provider.close();
  }
}

describe('anthropicAdapter requests', () => {
  it('sends the system prompt apart, forces the tool with one call, and sets max_tokens', async () => {
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const provider = await startFakeProvider();
    try {
      provider.script(message([toolUse(summary)], 'tool_use'));
      const model = anthropicAdapter({
        client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
        model: 'claude-test',
      });
      const { compactionRequest } = await import('../../src/compaction/tool.js');
      await model(
        compactionRequest({
          messages: [
            { role: 'system', content: 'be brief' },
            { role: 'user', content: 'hi' },
          ],
        }),
      );
      const body = provider.requests[0]!.body;
      expect(provider.requests[0]!.path).toBe('/v1/messages');
      expect(body).toMatchObject({
        system: 'be brief',
        max_tokens: 8192,
        tool_choice: { type: 'tool', name: 'submit_handoff', disable_parallel_tool_use: true },
      });
      expect((body.messages as Array<{ role: string }>).map((m) => m.role)).toEqual(['user', 'user']);
    } finally {
      await provider.close();
    }
  });

  it('sends a large max_tokens (the SDK refuses one over ~21,000 without a timeout) and no turn that says nothing', async () => {
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const provider = await startFakeProvider();
    try {
      provider.script(message([toolUse(summary)], 'tool_use'));
      // A client with a timeout of its own keeps it (the adapter passes the client's when it is given none).
      const model = anthropicAdapter({
        client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0, timeout: 120_000 }),
        model: 'claude-test',
      });
      const { compactionRequest } = await import('../../src/compaction/tool.js');
      const answer = await model(
        compactionRequest({
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: '' }, // a turn that was only reasoning
            { role: 'user', content: 'go on' },
            { role: 'assistant', content: ' \n' },
          ],
          maxOutputTokens: 32_000,
        }),
      );
      expect(answer.toolCalls?.[0]?.input).toEqual(summary);
      const body = provider.requests[0]!.body;
      expect(body.max_tokens).toBe(32_000);
      const sent = body.messages as Array<{ role: string; content: unknown }>;
      expect(sent.some((m) => typeof m.content === 'string' && m.content.trim() === '')).toBe(false);
      expect(sent.map((m) => m.role)).toEqual(['user', 'user', 'user']);
    } finally {
      await provider.close();
    }
  });

  it('sends an assistant turn that calls tools without its whitespace-only text, each tool input as an object', async () => {
    const calls = [
      { id: 'a', name: 'read', input: { path: 'src/a.ts' } },
      { id: 'b', name: 'read', input: '{"path": "src/b.ts"}' }, // a provider's arguments left unparsed
      { id: 'c', name: 'read', input: '{"path": "src/c.ts"' }, // cut short: not JSON
      { id: 'd', name: 'list', input: undefined },
    ];
    const messages = await sent([
      { role: 'user', content: 'hi' },
      // Claude writes whitespace before a tool call; the API refuses a whitespace-only text block.
      { role: 'assistant', content: '\n\n', toolCalls: calls },
      ...calls.map((c) => ({ role: 'tool' as const, toolCallId: c.id, content: 'ok' })),
    ]);
    expect(messages[1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'a', name: 'read', input: { path: 'src/a.ts' } },
        { type: 'tool_use', id: 'b', name: 'read', input: { path: 'src/b.ts' } },
        { type: 'tool_use', id: 'c', name: 'read', input: { input: '{"path": "src/c.ts"' } },
        { type: 'tool_use', id: 'd', name: 'list', input: {} },
      ],
    });
  });
});

describe('anthropicAdapter: tool results as the Messages API takes them', () => {
  /** The API's rule: every tool_use id of assistant message i is answered by a tool_result in message i + 1. */
  function unanswered(messages: Sent[]): string[] {
    const missing: string[] = [];
    messages.forEach((m, i) => {
      if (m.role !== 'assistant' || typeof m.content === 'string') return;
      const next = messages[i + 1]?.content;
      const answered = new Set(
        typeof next === 'string' || next === undefined
          ? []
          : next.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id),
      );
      for (const b of m.content) if (b.type === 'tool_use' && !answered.has(b.id)) missing.push(`${i}: ${b.id}`);
    });
    return missing;
  }

  const parallel = {
    role: 'assistant' as const,
    content: '',
    toolCalls: [
      { id: 'toolu_a', name: 'read', input: { path: 'a' } },
      { id: 'toolu_b', name: 'shell', input: { cmd: 'touch b' } },
    ],
  };

  it('sends the results of one turn’s parallel calls in one user message, in order; a later user turn stays apart', async () => {
    const messages = await sent([
      { role: 'user', content: 'read a, touch b' },
      parallel,
      { role: 'tool', toolCallId: 'toolu_a', content: 'A' },
      { role: 'tool', toolCallId: 'toolu_b', content: 'B' },
      { role: 'user', content: 'thanks' },
    ]);
    expect(unanswered(messages)).toEqual([]);
    expect(messages[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_a', content: 'A' },
        { type: 'tool_result', tool_use_id: 'toolu_b', content: 'B' },
      ],
    });
    expect(messages[3]).toEqual({ role: 'user', content: 'thanks' });
  });

  it('sends a tool input given as JSON text whose escapes make a lone surrogate with U+FFFD in its place', async () => {
    // The text is well formed (its escape is ASCII), the object it parses to is not: the API refuses the escape JSON
    // makes of a lone surrogate (400, "no low surrogate in string").
    const messages = await sent([
      { role: 'user', content: 'search' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'toolu_s', name: 'search', input: '{"q":"cut \\ud83d","\\udc00k":["\\ud83d\\ude00"]}' }],
      },
      { role: 'tool', toolCallId: 'toolu_s', content: 'none' },
    ]);
    const use = (messages[1]!.content as Array<Block & { input?: unknown }>).find((b) => b.type === 'tool_use');
    expect(use?.input).toEqual({ q: 'cut \ufffd', '\ufffdk': ['\u{1f600}'] });
  });

  it('answers every call of a parallel turn in the next message when compaction starts right after it', async () => {
    const messages = await sent([{ role: 'user', content: 'read a, touch b' }, parallel]);
    expect(unanswered(messages)).toEqual([]);
    expect((messages[2]!.content as Block[]).map((b) => [b.type, b.tool_use_id])).toEqual([
      ['tool_result', 'toolu_a'],
      ['tool_result', 'toolu_b'],
    ]);
  });

  it('sends every tool_use id as the API takes it (^[a-zA-Z0-9_-]+$), each result under its call’s id', async () => {
    // The Messages API refuses any other id (400 "tool_use.id: String should match pattern"); a transcript's ids may
    // be another provider's (`functions.read_file:0`) or the Harness's own. One already of the form, here the one an
    // id of another form would be sent as, goes as it is, and no two calls share an id.
    const ids = ['functions.read_file:0', 'call|1', 'toolu_functions_read_file_0', 'toolu_ok-1', ''];
    const calls = ids.map((id, i) => ({ id, name: 'read', input: { path: `f${i}` } }));
    const messages = await sent([
      { role: 'user', content: 'read them' },
      { role: 'assistant', content: '', toolCalls: calls },
      ...ids.slice(0, 3).map((id, i) => ({ role: 'tool' as const, toolCallId: id, content: `F${i}` })),
    ]);
    expect(unanswered(messages)).toEqual([]);
    const uses = (messages[1]!.content as Block[]).filter((b) => b.type === 'tool_use');
    const results = (messages[2]!.content as Block[]).filter((b) => b.type === 'tool_result');
    const sentIds = uses.map((b) => b.id!);
    expect(
      sentIds.every((id) => /^[a-zA-Z0-9_-]+$/.test(id)),
      sentIds.join(' '),
    ).toBe(true);
    expect(new Set(sentIds).size).toBe(ids.length);
    expect(sentIds[2]).toBe('toolu_functions_read_file_0');
    expect(sentIds[3]).toBe('toolu_ok-1');
    // Each result, the real ones and the ones compactionRequest answered, under its call's id, in the calls' order.
    expect(results.map((b) => b.tool_use_id)).toEqual(sentIds);
    expect(results.slice(0, 3).map((b) => b.content)).toEqual(['F0', 'F1', 'F2']);
  });

  it('sends a tool result that holds nothing without content (the API refuses an empty or blank text)', async () => {
    const messages = await sent([
      { role: 'user', content: 'touch a and b' },
      parallel,
      { role: 'tool', toolCallId: 'toolu_a', content: '' },
      { role: 'tool', toolCallId: 'toolu_b', content: ' \n' },
    ]);
    expect(messages[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_a' },
        { type: 'tool_result', tool_use_id: 'toolu_b' },
      ],
    });
  });
});

describe("anthropicAdapter: README's stop reasons without a finished answer", () => {
  it.each([
    ['model_context_window_exceeded', 'length'],
    ['pause_turn', 'other'],
  ] as const)(
    'reads stop_reason %s as %s: SUMMARY_INCOMPLETE, however whole the submit_handoff call looks',
    async (stopReason, finishReason) => {
      const { startFakeProvider } = await import('../support/fake-provider.js');
      const { compactionRequest, extractSummary } = await import('../../src/compaction/tool.js');
      const provider = await startFakeProvider();
      try {
        provider.script(message([toolUse(summary)], stopReason));
        const model = anthropicAdapter({
          client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
          model: 'claude-test',
        });
        const answer = await model(compactionRequest({ messages: [{ role: 'user', content: 'hi' }] }));
        expect(answer.finishReason).toBe(finishReason);
        expect(answer.toolCalls?.[0]?.input).toEqual(summary);
        expect(() => extractSummary(answer)).toThrow(expect.objectContaining({ code: 'SUMMARY_INCOMPLETE' }));
      } finally {
        await provider.close();
      }
    },
  );
});

describe("anthropicAdapter in structured mode: the Messages API's structured output is the forced tool", () => {
  /** One compaction of mode `structured` through compact, the provider answering `reply`. */
  async function structured(reply: Reply) {
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const { compact } = await import('../../src/compaction/compact.js');
    const { openLedger } = await import('../../src/ledger/open.js');
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const provider = await startFakeProvider();
    const base = await mkdtemp(join(tmpdir(), 'handoff-anthropic-'));
    const ledger = await openLedger({ root: join(base, 'store'), host: 'h1', onNotice: () => {} });
    const scope = { principal: 'alice', session: 's1', run: 'r1' };
    try {
      provider.script(reply);
      const outcome = await compact({
        ledger,
        scope,
        model: anthropicAdapter({
          client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
          model: 'claude-test',
        }),
        transcript: [
          { role: 'system', content: 'You are a coding assistant.' },
          { role: 'user', content: 'add retries to the uploader' },
        ],
        mode: 'structured',
      }).catch((e: unknown) => e);
      return { outcome, requests: [...provider.requests], resumed: await ledger.resume(scope) };
    } finally {
      await ledger.close();
      await provider.close();
      await rm(base, { recursive: true, force: true });
    }
  }

  it('sends submit_handoff with the summary schema as its input_schema, forced (one call), and reads its input', async () => {
    const { outcome, requests, resumed } = await structured(message([toolUse(summary)], 'tool_use'));
    expect(requests).toHaveLength(1);
    const body = requests[0]!.body;
    // The whole request: the Messages API's own fields, no response format of another API's dialect.
    expect(Object.keys(body).sort()).toEqual(['max_tokens', 'messages', 'model', 'system', 'tool_choice', 'tools']);
    expect(body.tools).toEqual([
      {
        name: 'submit_handoff',
        description: anthropicSubmitHandoffTool.description,
        input_schema: summarySchemaFor('anthropic'),
      },
    ]);
    expect(body.tool_choice).toEqual({ type: 'tool', name: 'submit_handoff', disable_parallel_tool_use: true });
    expect(outcome).toMatchObject({ summary });
    expect(resumed?.summary).toEqual(summary);
  });

  it.each([
    ['no content at all', [], 'SUMMARY_EMPTY'],
    ['only whitespace text', [{ type: 'text', text: ' \n' }], 'SUMMARY_EMPTY'],
    [
      'text that is not JSON',
      [{ type: 'text', text: 'Here is the summary: the uploader retries.' }],
      'SUMMARY_INVALID',
    ],
    [
      'text of a JSON string (the summary encoded twice)',
      [{ type: 'text', text: JSON.stringify(JSON.stringify(summary)) }],
      'SUMMARY_INVALID',
    ],
    [
      'another tool’s block',
      [{ type: 'tool_use', id: 'toolu_2', name: 'write_file', input: summary }],
      'SUMMARY_INVALID',
    ],
    ['two submit_handoff blocks', [toolUse(summary), { ...toolUse(summary), id: 'toolu_2' }], 'SUMMARY_INVALID'],
  ] as const)(
    'refuses a finished answer without one submit_handoff block (%s) with %s, publishing nothing',
    async (_, content, code) => {
      const stop = content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
      const { outcome, requests, resumed } = await structured(message([...content], stop));
      expect(outcome).toMatchObject({ name: 'LedgerError', code });
      expect(requests).toHaveLength(1);
      expect(resumed).toBeUndefined();
    },
  );
});

describe('anthropicAdapter: a refusal with stop_details', () => {
  it("names the refusal's category and explanation (stop_details) in MODEL_REFUSED, not the words of a partial answer", async () => {
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const { compactionRequest, extractSummary } = await import('../../src/compaction/tool.js');
    const provider = await startFakeProvider();
    try {
      // The classifier stopped the answer part way: the text before it is no explanation of the refusal.
      const reply = message([{ type: 'text', text: 'Here is the' }], 'refusal');
      (reply.body as Record<string, unknown>).stop_details = {
        type: 'refusal',
        category: 'cyber',
        explanation: 'The request could enable malware development.',
      };
      provider.script(reply);
      const model = anthropicAdapter({
        client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
        model: 'claude-test',
      });
      const answer = await model(compactionRequest({ messages: [{ role: 'user', content: 'hi' }] }));
      expect(answer).toEqual({
        finishReason: 'refusal',
        refusal: 'cyber: The request could enable malware development.',
      });
      expect(() => extractSummary(answer)).toThrow(
        expect.objectContaining({ code: 'MODEL_REFUSED', message: expect.stringMatching(/cyber: The request/) }),
      );
    } finally {
      await provider.close();
    }
  });
});

describe("anthropicAdapter: every block type of the SDK's ContentBlock", () => {
  /**
   * How the adapter reads each block an answer may hold: `answer` (its text), `reasoning` (the model's thinking, not
   * part of the answer: left out), `call` (a client tool call: named to extractSummary, SUMMARY_INVALID unless it is the
   * one submit_handoff), `server` (a tool the API ran itself during the summary turn, its call or its result: named as a
   * call of another tool is, SUMMARY_INVALID). Typed by the SDK's union, and held to its declarations below at run time:
   * a block type the SDK adds fails here until it is read on purpose.
   */
  const HOW: Record<ContentBlock['type'], 'answer' | 'reasoning' | 'call' | 'server'> = {
    text: 'answer',
    thinking: 'reasoning',
    redacted_thinking: 'reasoning',
    tool_use: 'call',
    server_tool_use: 'server',
    web_search_tool_result: 'server',
    web_fetch_tool_result: 'server',
    code_execution_tool_result: 'server',
    bash_code_execution_tool_result: 'server',
    text_editor_code_execution_tool_result: 'server',
    tool_search_tool_result: 'server',
    container_upload: 'server',
  };

  /** The `type` of each member of the installed SDK's `ContentBlock` union, read from its declarations. */
  function sdkBlockTypes(): string[] {
    const js = createRequire(import.meta.url).resolve('@anthropic-ai/sdk/resources/messages/messages');
    const file = js.replace(/\.js$/, '.d.ts');
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
    const declared = new Map<string, ts.Node>();
    source.forEachChild((node) => {
      if (ts.isTypeAliasDeclaration(node) || ts.isInterfaceDeclaration(node)) declared.set(node.name.text, node);
    });
    const union = declared.get('ContentBlock');
    if (!union || !ts.isTypeAliasDeclaration(union) || !ts.isUnionTypeNode(union.type))
      throw new Error(`no ContentBlock union in ${file}`);
    return union.type.types.map((member) => {
      const name = ts.isTypeReferenceNode(member) ? member.typeName.getText(source) : member.getText(source);
      const block = declared.get(name);
      const type =
        block && ts.isInterfaceDeclaration(block)
          ? block.members.find((m) => m.name?.getText(source) === 'type')
          : undefined;
      const literal =
        type && ts.isPropertySignature(type) && type.type && ts.isLiteralTypeNode(type.type)
          ? type.type.literal
          : undefined;
      if (!literal || !ts.isStringLiteral(literal)) throw new Error(`no literal type for ${name} in ${file}`);
      return literal.text;
    });
  }

  it("names every block type of the SDK's ContentBlock (a new one is noticed here)", () => {
    const types = sdkBlockTypes();
    expect(types.length).toBeGreaterThan(4);
    expect(Object.keys(HOW).sort()).toEqual([...types].sort());
  });

  /** A block of `type` with the fields its kind carries (the SDK reads a message's content as it comes). */
  const blockOf = (type: string): Record<string, unknown> => {
    if (type === 'text') return { type, text: 'Here is the summary.', citations: null };
    if (type === 'thinking') return { type, thinking: 'The summary should say {', signature: 'sig' };
    if (type === 'redacted_thinking') return { type, data: 'opaque' };
    if (type === 'tool_use') return { type, id: 'toolu_2', name: 'write_file', input: { path: 'a' } };
    if (type === 'server_tool_use')
      return { type, id: 'srvtoolu_1', name: 'web_search', input: { query: 'q' }, caller: { type: 'direct' } };
    if (type === 'mcp_tool_use') return { type, id: 'mcptoolu_1', name: 'fetch_page', server_name: 'web', input: {} };
    if (type === 'container_upload') return { type, file_id: 'file_1' };
    return { type, tool_use_id: 'srvtoolu_1', content: [] };
  };
  /** What extractSummary names for a block the answer may not hold. */
  const namedAs = (type: string) =>
    ({ tool_use: 'write_file', server_tool_use: 'web_search', mcp_tool_use: 'fetch_page' })[type] ?? type;

  async function outcomeOf(content: unknown[], stop: string) {
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const { compact } = await import('../../src/compaction/compact.js');
    const { countingLedger } = await import('../support/counting-ledger.js');
    const provider = await startFakeProvider();
    try {
      provider.script(message(content, stop));
      const ledger = countingLedger();
      const outcome = await compact({
        ledger,
        scope: { principal: 'alice', session: 's1', run: 'r1' },
        model: anthropicAdapter({
          client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
          model: 'claude-test',
        }),
        transcript: [{ role: 'user', content: 'hi' }],
      }).catch((e: unknown) => e as Error);
      return { outcome, published: ledger.published };
    } finally {
      await provider.close();
    }
  }

  it.each(Object.entries(HOW).filter(([, how]) => how === 'call' || how === 'server'))(
    'refuses an answer holding a %s block (%s) beside the submit_handoff call: SUMMARY_INVALID naming it, nothing published',
    async (type) => {
      // The block first, as the API orders a server tool's work before the answer written after it.
      const { outcome, published } = await outcomeOf([blockOf(type), toolUse(summary)], 'tool_use');
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toContain(`the model called "${namedAs(type)}"`);
      expect(published).toBe(0);
    },
  );

  it.each(['mcp_tool_use', 'mcp_tool_result', 'a_block_type_of_tomorrow'])(
    'refuses a block it does not know (%s, not in the SDK union it is built with) as it refuses a server tool block',
    async (type) => {
      const { outcome, published } = await outcomeOf([blockOf(type), toolUse(summary)], 'tool_use');
      expect(outcome).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect((outcome as Error).message).toContain(`the model called "${namedAs(type)}"`);
      expect(published).toBe(0);
    },
  );

  it('reads the submit_handoff call beside the blocks it leaves out (thinking), and an answer given as text', async () => {
    const { compactionRequest, extractSummary } = await import('../../src/compaction/tool.js');
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const provider = await startFakeProvider();
    try {
      const reasoning = Object.keys(HOW).filter((t) => HOW[t as ContentBlock['type']] === 'reasoning');
      provider.script(
        message([...reasoning.map(blockOf), toolUse(summary)], 'tool_use'),
        message([...reasoning.map(blockOf), { type: 'text', text: JSON.stringify(summary) }], 'end_turn'),
      );
      const model = anthropicAdapter({
        client: new Anthropic({ apiKey: 'k', baseURL: provider.url, maxRetries: 0 }),
        model: 'claude-test',
      });
      const request = compactionRequest({ messages: [{ role: 'user', content: 'hi' }] });
      expect(extractSummary(await model(request))).toEqual(summary);
      expect(extractSummary(await model(request))).toEqual(summary);
    } finally {
      await provider.close();
    }
  });
});
