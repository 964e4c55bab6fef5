/**
 * `handoff-ledger/adapters/openai`: a `ModelAdapter` over the official `openai` SDK (an optional peer
 * dependency; the Harness passes its client). The summary is asked for in OpenAI's strict form
 * (`summarySchemaFor('openai-strict')`): strict structured output, or the strict `submit_handoff`
 * function, on the Responses API (default) or Chat Completions. Nulls of the strict answer become
 * absent fields before validation.
 */
import type OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type {
  FunctionTool,
  Response,
  ResponseCreateParamsNonStreaming,
  ResponseInputItem,
} from 'openai/resources/responses/responses';
import type {
  ModelAdapter,
  ModelFinishReason,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
} from '../compaction/model.js';
import { summarySchemaFor } from '../summary/schema-forms.js';
import { LedgerError } from '../errors.js';
import { shownValue } from '../../store/errors.js';
import {
  adapterOptions,
  compactionOnly,
  finishReasonOf,
  readJson,
  requireClientMethod,
  schemaFor,
  toolArguments,
  toolCall,
  withProviderReason,
} from './shared.js';

export interface OpenAIAdapterOptions {
  /** The Harness's client (`new OpenAI({ apiKey })`). */
  client: OpenAI;
  model: string;
  /** `responses` (default) or `chat` (Chat Completions). */
  api?: 'responses' | 'chat' | undefined;
}

const FORM = 'openai-strict';

function responsesInput(request: ModelRequest): ResponseInputItem[] {
  const items: ResponseInputItem[] = [];
  for (const m of request.messages) {
    if (m.role === 'tool') {
      items.push({ type: 'function_call_output', call_id: m.toolCallId ?? '', output: m.content });
      continue;
    }
    if (m.content !== '' || !m.toolCalls?.length) items.push({ role: m.role, content: m.content });
    for (const c of m.toolCalls ?? []) {
      items.push({ type: 'function_call', call_id: c.id, name: c.name, arguments: toolArguments(c.input) });
    }
  }
  return items;
}

function responsesParams(model: string, request: ModelRequest): ResponseCreateParamsNonStreaming {
  // store: false: the transcript being summarised is not kept as a stored response on OpenAI's side.
  const params: ResponseCreateParamsNonStreaming = { model, input: responsesInput(request), store: false };
  if (request.tools?.length) {
    params.tools = request.tools.map((t): FunctionTool => ({
      type: 'function',
      name: t.name,
      description: t.description,
      strict: true,
      parameters: schemaFor(t.name, t.inputSchema, FORM),
    }));
    // Strict schemas are not guaranteed with parallel calls, and one call is wanted. Sent to the Responses API only:
    // Chat Completions refuses the field for OpenAI's o-series reasoning models (400 unsupported_parameter), below.
    params.parallel_tool_calls = false;
  }
  const choice = request.toolChoice;
  if (choice) params.tool_choice = typeof choice === 'string' ? choice : { type: 'function', name: choice.name };
  const f = request.responseFormat;
  if (f) {
    const schema = summarySchemaFor(FORM);
    params.text = {
      format: {
        type: 'json_schema',
        name: f.name,
        strict: true,
        schema,
        ...(f.description ? { description: f.description } : {}),
      },
    };
  }
  if (request.maxOutputTokens !== undefined) params.max_output_tokens = request.maxOutputTokens;
  return params;
}

/** Items of a Responses answer that are no part of it: the model's `reasoning` (its thinking, left out). */
const LEFT_OUT: ReadonlySet<string> = new Set(['reasoning']);

/**
 * Any output item but a `message`, a `function_call`, a `custom_tool_call` and `reasoning`, as a call named to
 * extractSummary by its type (`SUMMARY_INVALID`, as a call of another tool than submit_handoff is): a tool the API ran
 * itself or leaves to the caller during the summary turn (`web_search_call`, `file_search_call`, `code_interpreter_call`,
 * `image_generation_call`, `computer_call`, `local_shell_call`, `shell_call`, `apply_patch_call`, `mcp_call`,
 * `mcp_list_tools`, `mcp_approval_request`, `tool_search_call`, `program`, …), what it gave back (`*_output`,
 * `mcp_approval_response`), tools it made available part way (`additional_tools`), the context the API compacted itself
 * (`compaction`: the answer beside it was written from the API's own opaque summary of the transcript, which this
 * request never asks for), or an item this adapter does not know. The summary turn offers no such tool; an answer
 * written beside them is not a summary of the transcript alone, and is not taken for one. Read structurally: the item
 * may be none of the SDK's union.
 */
function otherItem(item: object, what = 'an output item'): ModelToolCall {
  const { type, id, call_id } = item as Record<string, unknown>;
  const named = typeof type === 'string' ? type : `${what} without a type`;
  const ref = typeof call_id === 'string' ? call_id : typeof id === 'string' ? id : '';
  return toolCall(ref, named, undefined, false, 'value');
}

/**
 * Names each annotation of an answer's text (Responses' output_text, a Chat Completions message) in `calls` by its
 * type, as a call of another tool is named; one that is no object, or has no type, as `an annotation without a type`.
 * Anything but a list (absent, null) is none, as is an empty one.
 */
function nameAnnotations(annotations: unknown, calls: ModelToolCall[]): void {
  if (!Array.isArray(annotations)) return;
  for (const a of annotations as unknown[])
    calls.push(otherItem(typeof a === 'object' && a !== null ? a : {}, 'an annotation'));
}

function fromResponse(r: Response, structured: boolean): ModelResponse {
  // A response the provider failed is the provider's error (compact reports MODEL_FAILED with it as the cause), not
  // a summary that stopped early.
  if (r.status === 'failed' || r.error)
    throw Object.assign(
      new Error(`OpenAI response ${r.id ?? ''} failed: ${r.error?.code ?? 'error'}: ${r.error?.message ?? ''}`),
      {
        error: r.error,
      },
    );
  const calls: ModelToolCall[] = [];
  const texts: string[] = [];
  let refusal: string | undefined;
  // A model that answers in phases (`phase` on its messages) writes `commentary` before its `final_answer`: the answer
  // is the final_answer's text alone (a preamble joined to the JSON of a structured answer would break it). Read
  // structurally: the SDK's types have `phase` only from a version above the lowest of the peer range.
  const phaseOf = (item: object): unknown => (item as { phase?: unknown }).phase;
  const phased = (r.output ?? []).some((item) => item.type === 'message' && phaseOf(item) === 'final_answer');
  // An item of the answer (a message, a call) carries its own status: one not `completed` in a response that says it
  // is (`in_progress`, `incomplete`) is no finished answer either, however whole it looks.
  let unfinishedItem: string | undefined; // the first such item's type and status, e.g. `function_call in_progress`
  for (const item of r.output ?? []) {
    if (item.type !== 'message' && item.type !== 'function_call' && item.type !== 'custom_tool_call') {
      if (!LEFT_OUT.has(item.type)) calls.push(otherItem(item));
      continue;
    }
    const itemStatus: unknown = (item as { status?: unknown }).status;
    if (itemStatus !== undefined && itemStatus !== null && itemStatus !== 'completed')
      unfinishedItem ??= typeof itemStatus === 'string' ? `${item.type} ${itemStatus}` : item.type;
    if (item.type === 'function_call') calls.push(toolCall(item.call_id, item.name, item.arguments, true));
    // A call of a custom (free-text) tool is a call all the same: named to extractSummary, which refuses any tool
    // but submit_handoff (SUMMARY_INVALID), never dropped unread beside it.
    if (item.type === 'custom_tool_call') calls.push(toolCall(item.call_id, item.name, item.input, true));
    if (item.type !== 'message') continue;
    for (const part of item.content) {
      if (part.type === 'output_text') {
        if (!phased || phaseOf(item) === 'final_answer') texts.push(part.text);
        // What the text cites (`url_citation`, `file_citation`, `container_file_citation`, `file_path`: the work of a
        // search or of code run, as the Chat Completions annotations below) is named by its type, SUMMARY_INVALID.
        nameAnnotations((part as { annotations?: unknown }).annotations, calls);
      } else if (part.type === 'refusal') refusal = part.refusal;
      // A content part this adapter does not know: named by its type, as an item it does not know is.
      else calls.push(otherItem(part, 'a content part'));
    }
  }
  if (refusal !== undefined) return { finishReason: 'refusal', refusal };
  let finishReason: ModelFinishReason = calls.length > 0 ? 'tool_calls' : 'stop';
  let providerReason: unknown; // the status, its incomplete_details.reason, or the unfinished item
  if (r.status === 'incomplete') {
    finishReason = r.incomplete_details?.reason === 'content_filter' ? 'content_filter' : 'length';
    providerReason = r.incomplete_details?.reason ?? r.status;
  } else if (r.status !== 'completed') {
    finishReason = 'other';
    providerReason = r.status;
  } else if (unfinishedItem !== undefined) {
    finishReason = 'other';
    providerReason = unfinishedItem;
  }
  const text = texts.join('');
  const out: ModelResponse = withProviderReason({ finishReason, text }, providerReason);
  if (calls.length > 0) out.toolCalls = calls;
  const value = structured ? readJson(text, true) : undefined;
  if (value !== undefined) out.output = value;
  return out;
}

function chatMessages(request: ModelRequest): ChatCompletionMessageParam[] {
  return request.messages.map((m): ChatCompletionMessageParam => {
    if (m.role === 'tool') return { role: 'tool', tool_call_id: m.toolCallId ?? '', content: m.content };
    if (m.role === 'assistant' && m.toolCalls?.length) {
      return {
        role: 'assistant',
        content: m.content === '' ? null : m.content,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.name, arguments: toolArguments(c.input) },
        })),
      };
    }
    return { role: m.role, content: m.content };
  });
}

function chatParams(model: string, request: ModelRequest): ChatCompletionCreateParamsNonStreaming {
  const params: ChatCompletionCreateParamsNonStreaming = { model, messages: chatMessages(request) };
  if (request.tools?.length) {
    params.tools = request.tools.map((t): ChatCompletionTool => ({
      type: 'function',
      function: {
        name: t.name,
        description: t.description,
        strict: true,
        parameters: schemaFor(t.name, t.inputSchema, FORM),
      },
    }));
    // No `parallel_tool_calls`: Chat Completions refuses it for the o-series reasoning models ("Unsupported parameter:
    // 'parallel_tool_calls' is not supported with this model", 400), which would make every compaction MODEL_FAILED.
    // One tool is offered and forced, and extractSummary refuses an answer that calls it twice (SUMMARY_INVALID).
  }
  const choice = request.toolChoice;
  if (choice) {
    params.tool_choice = typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
  }
  if (request.responseFormat) {
    const f = request.responseFormat;
    params.response_format = {
      type: 'json_schema',
      json_schema: { name: f.name, strict: true, schema: summarySchemaFor(FORM) },
    };
    if (f.description) params.response_format.json_schema.description = f.description;
  }
  if (request.maxOutputTokens !== undefined) params.max_completion_tokens = request.maxOutputTokens;
  return params;
}

const CHAT_FINISH: Record<string, ModelFinishReason> = {
  stop: 'stop',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  length: 'length',
  content_filter: 'content_filter',
};

function fromChat(c: ChatCompletion, structured: boolean): ModelResponse {
  const choice = c.choices[0];
  if (!choice) return { finishReason: 'other' };
  const message = choice.message;
  if (message.refusal) return { finishReason: 'refusal', refusal: message.refusal };
  const out = withProviderReason(
    { finishReason: finishReasonOf(CHAT_FINISH, choice.finish_reason) },
    choice.finish_reason,
  );
  if (message.content !== null) out.text = message.content;
  // A call of a custom (free-text) tool is named to extractSummary as any other tool (SUMMARY_INVALID), not dropped;
  // a call of a type the adapter does not know is named by its type. Read structurally: it may be none of the SDK's.
  const calls = (message.tool_calls ?? []).flatMap((t) => {
    if (t.type === 'function') return [toolCall(t.id, t.function.name, t.function.arguments, true)];
    const type: unknown = (t as { type?: unknown }).type;
    if (type !== 'custom') return [otherItem(t, 'a tool call')];
    const custom = (t as { custom?: { name?: unknown; input?: unknown } }).custom;
    return [toolCall(t.id, typeof custom?.name === 'string' ? custom.name : 'a custom tool', custom?.input, true)];
  });
  // The deprecated single call (finish_reason `function_call`, read as a finished call): named as the others are.
  const legacy = message.function_call;
  if (legacy) calls.push(toolCall('', legacy.name, legacy.arguments, true));
  // An annotation of the answer (`url_citation`: the web search that OpenAI's search models, gpt-4o-search-preview and
  // the like, run on a request without any tool) is named by its type, as a call of another tool is: an answer that
  // cites what the model searched for is no summary of the transcript alone. An empty list (the API's usual) is none.
  nameAnnotations(message.annotations, calls);
  if (calls.length > 0) out.toolCalls = calls;
  const value = structured && out.text !== undefined ? readJson(out.text, true) : undefined;
  if (value !== undefined) out.output = value;
  return out;
}

/**
 * @throws LedgerError `INVALID_ARGUMENT` for options it does not take, or a client without `responses.create` (with
 *   `api: 'chat'`, `chat.completions.create`), at this call
 * @example
 * const model = openaiAdapter({ client: new OpenAI(), model: 'gpt-5-mini' });
 * await compact({ ledger, scope, model, transcript });
 */
export function openaiAdapter(given: OpenAIAdapterOptions): ModelAdapter {
  const options = adapterOptions('openaiAdapter', given, ['client', 'model', 'api']) as OpenAIAdapterOptions;
  // A misspelt api ('Chat', 'completions') would silently send to the Responses API.
  if (
    options.api !== undefined &&
    (options.api as unknown) !== null &&
    options.api !== 'responses' &&
    options.api !== 'chat'
  )
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `openaiAdapter: api must be 'responses' or 'chat', not ${shownValue(options.api)}`,
    );
  const { client, model } = options;
  if (options.api === 'chat')
    requireClientMethod(
      'openaiAdapter',
      client,
      ['chat', 'completions', 'create'],
      "which api 'chat' calls: pass the openai SDK's client (new OpenAI())",
    );
  else
    requireClientMethod(
      'openaiAdapter',
      client,
      ['responses', 'create'],
      "which the Responses API (the default api) calls: pass the openai SDK's client (new OpenAI()), or api: 'chat' for a client with chat.completions.create() only",
    );
  return async (request) => {
    compactionOnly('openaiAdapter', request);
    const structured = request.responseFormat !== undefined;
    const signal = request.signal ? { signal: request.signal } : undefined;
    if (options.api === 'chat') {
      return fromChat(await client.chat.completions.create(chatParams(model, request), signal), structured);
    }
    return fromResponse(await client.responses.create(responsesParams(model, request), signal), structured);
  };
}
