/**
 * `handoff-ledger/adapters/anthropic`: a `ModelAdapter` over the official `@anthropic-ai/sdk` (an
 * optional peer dependency; the Harness passes its client). The summary is always asked for through
 * the forced `submit_handoff` tool with `summarySchemaFor('anthropic')` as its `input_schema`, which is
 * Anthropic's way to a structured answer; a structured-output request is sent the same way, its instruction asking
 * for the call of `submit_handoff`, not JSON (`askedAs`).
 */
import type Anthropic from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  Message,
  MessageCreateParamsNonStreaming,
  MessageParam,
  Tool,
  ToolResultBlockParam,
} from '@anthropic-ai/sdk/resources/messages/messages';
import type { ModelAdapter, ModelFinishReason, ModelRequest, ModelResponse } from '../compaction/model.js';
import { SUBMIT_HANDOFF, submitHandoffTool } from '../compaction/tool.js';
import { summarySchemaFor } from '../summary/schema-forms.js';
import {
  adapterOptions,
  ANTHROPIC_LEFT_OUT,
  anthropicServerBlock,
  askedAs,
  compactionOnly,
  finishReasonOf,
  requireClientMethod,
  saysNothing,
  schemaFor,
  splitSystem,
  toolCall,
  toolInputObject,
  wholeNumberOption,
  withoutEmptyTurns,
  withProviderReason,
} from './shared.js';
import { MAX_TIMER_MS } from '../../store/abort.js';

export interface AnthropicAdapterOptions {
  /** The Harness's client (`new Anthropic({ apiKey })`). */
  client: Anthropic;
  model: string;
  /**
   * `max_tokens` when the request sets no output limit (the Messages API requires one; default 8192): a whole number
   * from 1 (else INVALID_ARGUMENT at the factory's call).
   */
  maxTokens?: number | undefined;
  /**
   * The request's timeout in ms (default: the client's own, `new Anthropic({ timeout })`, 10 minutes unless set). Always
   * passed with the request: without one the SDK refuses, before sending, a non-streaming request whose `max_tokens`
   * could take longer than 10 minutes (above ~21,000 tokens). A whole number from 1 to 2^31 − 1 (else INVALID_ARGUMENT
   * at the factory's call: a timer beyond fires at once).
   */
  timeoutMs?: number | undefined;
}

/** The `submit_handoff` tool in Anthropic's shape, for a Harness that calls the SDK itself. */
export const anthropicSubmitHandoffTool: Tool = Object.freeze({
  name: SUBMIT_HANDOFF,
  description: submitHandoffTool.description,
  input_schema: summarySchemaFor('anthropic'),
});

type RequestMessage = ModelRequest['messages'][number];

/**
 * A tool result as a `tool_result` block. One that holds nothing (a tool that printed nothing) goes without `content`,
 * which is optional: the API refuses an empty or whitespace-only text ("text content blocks must be non-empty").
 */
function toolResult(m: RequestMessage, idOf: (id: string) => string): ToolResultBlockParam {
  const block: ToolResultBlockParam = { type: 'tool_result', tool_use_id: idOf(m.toolCallId ?? '') };
  if (!saysNothing(m.content)) block.content = m.content;
  return block;
}

/** The content of a turn other than a tool result. */
function content(m: RequestMessage, idOf: (id: string) => string): string | ContentBlockParam[] {
  if (m.role === 'assistant' && m.toolCalls?.length) {
    const blocks: ContentBlockParam[] = saysNothing(m.content) ? [] : [{ type: 'text', text: m.content }];
    for (const c of m.toolCalls)
      blocks.push({ type: 'tool_use', id: idOf(c.id), name: c.name, input: toolInputObject(c.input) });
    return blocks;
  }
  return m.content;
}

/**
 * The Messages API's turns. The results of one assistant turn's tool calls go in ONE user message, the next one
 * (every `tool_use` id must be answered by a `tool_result` in the message right after it; a user message per
 * result is refused: "tool_use ids were found without tool_result blocks immediately after").
 */
function turns(messages: readonly RequestMessage[]): MessageParam[] {
  const out: MessageParam[] = [];
  const idOf = toolUseIds(messages);
  let results: ContentBlockParam[] | undefined; // the tool_result blocks of the user message being built
  for (const m of messages) {
    if (m.role === 'tool') {
      if (results) results.push(toolResult(m, idOf));
      else out.push({ role: 'user', content: (results = [toolResult(m, idOf)]) });
      continue;
    }
    results = undefined;
    out.push({ role: m.role === 'assistant' ? 'assistant' : 'user', content: content(m, idOf) });
  }
  return out;
}

/** What the Messages API takes as a `tool_use` id (and `tool_result.tool_use_id`). */
const TOOL_USE_ID = /^[a-zA-Z0-9_-]+$/;

/**
 * The `tool_use` id each call of the transcript is sent under. The Messages API refuses a request with an id outside
 * `^[a-zA-Z0-9_-]+$` (400 "tool_use.id: String should match pattern"), and a transcript's calls may carry ids another
 * provider or the Harness made (`functions.read_file:0`, `call|1`, an empty one): every compaction of it failed
 * MODEL_FAILED. An id the API takes goes as it is; another gets one it takes, the same for its call and its result,
 * and none that another id of the request has.
 */
function toolUseIds(messages: readonly RequestMessage[]): (id: string) => string {
  const taken = new Set<string>();
  for (const m of messages) {
    for (const id of [m.toolCallId, ...(m.toolCalls ?? []).map((c) => c.id)])
      if (id !== undefined && TOOL_USE_ID.test(id)) taken.add(id);
  }
  const given = new Map<string, string>();
  return (id) => {
    if (TOOL_USE_ID.test(id)) return id;
    let sent = given.get(id);
    if (sent === undefined) {
      const base = `toolu_${id.replace(/[^a-zA-Z0-9_-]/g, '_')}`;
      sent = base;
      for (let n = 2; taken.has(sent); n++) sent = `${base}_${n}`;
      taken.add(sent);
      given.set(id, sent);
    }
    return sent;
  };
}

function params(model: string, maxTokens: number | undefined, request: ModelRequest): MessageCreateParamsNonStreaming {
  const { system, rest } = splitSystem(request.messages);
  const messages = turns(withoutEmptyTurns(rest));
  const p: MessageCreateParamsNonStreaming = {
    model,
    max_tokens: request.maxOutputTokens ?? maxTokens ?? 8192,
    messages,
  };
  if (system !== undefined) p.system = system;
  const tools: Tool[] = (request.tools ?? []).map((t) => ({
    name: t.name,
    description: t.description,
    input_schema: schemaFor(t.name, t.inputSchema, 'anthropic') as Tool['input_schema'],
  }));
  if (request.responseFormat && !tools.some((t) => t.name === SUBMIT_HANDOFF)) tools.push(anthropicSubmitHandoffTool);
  if (tools.length > 0) p.tools = tools;
  const choice = request.responseFormat ? { name: SUBMIT_HANDOFF } : request.toolChoice;
  if (choice === 'auto' || choice === 'none') p.tool_choice = { type: choice };
  else if (choice) p.tool_choice = { type: 'tool', name: choice.name, disable_parallel_tool_use: true };
  return p;
}

const STOP: Record<string, ModelFinishReason> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_use: 'tool_calls',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  refusal: 'refusal',
};

/**
 * A refusal's reason as `stop_details` gives it (`{ type: 'refusal', category, explanation }`, each may be null): its
 * category and explanation, or `undefined` without either. Read structurally: the SDK's types have `stop_details` only
 * from a version above the lowest of the peer range.
 */
function refusalDetails(m: Message): string | undefined {
  const details: unknown = (m as { stop_details?: unknown }).stop_details;
  if (typeof details !== 'object' || details === null) return undefined;
  const { category, explanation } = details as { category?: unknown; explanation?: unknown };
  const said = [category, explanation].filter((s): s is string => typeof s === 'string' && s !== '');
  return said.length > 0 ? said.join(': ') : undefined;
}

function fromMessage(m: Message): ModelResponse {
  const text = m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
  const finishReason = finishReasonOf(STOP, m.stop_reason);
  if (finishReason === 'refusal') {
    // The API's reason for the refusal when it gives one; else the text, if any. A refusal stops an answer part way
    // (the streaming classifiers intervene), so the text may be the start of an answer, not words about the refusal.
    const refusal = refusalDetails(m) ?? text;
    return refusal === '' ? { finishReason } : { finishReason, refusal };
  }
  const calls = m.content.flatMap((b) => {
    if (b.type === 'tool_use') return [toolCall(b.id, b.name, b.input, false, 'value')];
    return ANTHROPIC_LEFT_OUT.has(b.type) ? [] : [anthropicServerBlock(b)];
  });
  const out = withProviderReason({ finishReason, text }, m.stop_reason);
  if (calls.length > 0) out.toolCalls = calls;
  return out;
}

/**
 * @throws LedgerError `INVALID_ARGUMENT` for options it does not take, or a client without `messages.create`, at this call
 * @example
 * const model = anthropicAdapter({ client: new Anthropic(), model: 'claude-sonnet-4-6' });
 * await compact({ ledger, scope, model, transcript });
 */
export function anthropicAdapter(given: AnthropicAdapterOptions): ModelAdapter {
  const options = adapterOptions('anthropicAdapter', given, [
    'client',
    'model',
    'maxTokens',
    'timeoutMs',
  ]) as AnthropicAdapterOptions;
  const maxTokens = wholeNumberOption('anthropicAdapter', 'maxTokens', options.maxTokens, 1);
  const timeoutMs = wholeNumberOption('anthropicAdapter', 'timeoutMs', options.timeoutMs, 1, MAX_TIMER_MS);
  requireClientMethod(
    'anthropicAdapter',
    options.client,
    ['messages', 'create'],
    'which it calls: pass the @anthropic-ai/sdk client (new Anthropic())',
  );
  return async (request) => {
    compactionOnly('anthropicAdapter', request);
    return fromMessage(
      // The instruction says what is asked: the forced tool, in structured mode too.
      await options.client.messages.create(params(options.model, maxTokens, askedAs(request, 'tool')), {
        timeout: timeoutMs ?? options.client.timeout ?? 600_000,
        ...(request.signal ? { signal: request.signal } : {}),
      }),
    );
  };
}
