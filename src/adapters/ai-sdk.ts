/**
 * `handoff-ledger/adapters/ai-sdk`: a `ModelAdapter` over the Vercel `ai` SDK (an optional peer
 * dependency, imported on the first call), for any provider the Harness has a `LanguageModel` for.
 * Tool mode forces the `submit_handoff` tool; structured mode asks for an object output. Which schema
 * form is sent depends on the provider underneath: `json-schema` by default, `openai-strict` for
 * OpenAI models (whose provider sends strict schemas; the answer's nulls are then normalised).
 */
import type { LanguageModel, ModelMessage as AiMessage, ToolSet } from 'ai';
import type {
  ModelAdapter,
  ModelFinishReason,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
} from '../compaction/model.js';
import { SUBMIT_HANDOFF } from '../compaction/tool.js';
import { isRecord, summarySchemaFor, type SummarySchemaForm } from '../summary/schema-forms.js';
import {
  adapterOptions,
  ANTHROPIC_LEFT_OUT,
  anthropicServerBlock,
  compactionOnly,
  finishReasonOf,
  geminiGroundedIn,
  geminiOtherParts,
  readJson,
  saysNothing,
  schemaFor,
  splitSystem,
  toolCall,
  toolInputObject,
  wholeNumberOption,
  withoutEmptyTurns,
  withProviderReason,
} from './shared.js';

export interface AiSdkAdapterOptions {
  /**
   * The model: an object of the SDK's providers (`v3`, or `v2` of the ai SDK 5's), or a model id string, resolved as
   * the SDK resolves one (`globalThis.AI_SDK_DEFAULT_PROVIDER`, else the AI Gateway).
   */
  model: LanguageModel;
  /** The summary schema form for the provider underneath (default `json-schema`). */
  schemaForm?: SummarySchemaForm | undefined;
  /** Retries of the `ai` SDK itself (default 2, the SDK's own default): a whole number from 0. */
  maxRetries?: number | undefined;
}

function messages(request: ModelRequest): AiMessage[] {
  const names = new Map<string, string>();
  const { rest } = splitSystem(request.messages);
  // Whichever provider is behind the SDK: what Anthropic's and Gemini's APIs refuse is left out for every one, as their
  // own adapters leave it out (a turn that says nothing), and a tool input goes as the object the SDK's parts take.
  return withoutEmptyTurns(rest).map((m): AiMessage => {
    if (m.role === 'tool') {
      const toolCallId = m.toolCallId ?? '';
      return {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId,
            toolName: names.get(toolCallId) ?? 'unknown',
            output: { type: 'text', value: m.content },
          },
        ],
      };
    }
    if (m.role === 'assistant' && m.toolCalls?.length) {
      for (const c of m.toolCalls) names.set(c.id, c.name);
      return {
        role: 'assistant',
        content: [
          ...(saysNothing(m.content) ? [] : [{ type: 'text' as const, text: m.content }]),
          ...m.toolCalls.map((c) => ({
            type: 'tool-call' as const,
            toolCallId: c.id,
            toolName: c.name,
            input: toolInputObject(c.input),
          })),
        ],
      };
    }
    return { role: m.role === 'assistant' ? 'assistant' : 'user', content: m.content };
  });
}

/**
 * What the raw body of an OpenAI Responses API answer (`{ object: 'response', status, output, … }`, as the ai SDK's
 * OpenAI provider keeps it in `response.body`) says did not finish: its `status` when not `completed` (`cancelled`,
 * `queued`, `in_progress`; for `incomplete`, its `incomplete_details.reason` when it gives one), else the first message
 * or call item whose own `status` is not `completed` (`function_call in_progress`), as openaiAdapter reads them.
 * `undefined` for a completed answer, and for a body of another shape (another API's, or none).
 * @throws Error for a `failed` status: the provider's failure (MODEL_FAILED), as openaiAdapter throws it (the provider
 *   itself throws for a body with an `error`)
 */
function responsesUnfinished(body: unknown): string | undefined {
  if (!isRecord(body) || typeof body.status !== 'string' || !Array.isArray(body.output)) return undefined;
  const { status } = body;
  if (status === 'failed') {
    const id = typeof body.id === 'string' ? `${body.id} ` : '';
    throw Object.assign(new Error(`OpenAI response ${id}failed`), { error: body.error });
  }
  if (status === 'incomplete') {
    const reason = isRecord(body.incomplete_details) ? body.incomplete_details.reason : undefined;
    return typeof reason === 'string' && reason !== '' ? reason : status;
  }
  if (status !== 'completed') return status;
  for (const item of body.output as unknown[]) {
    if (!isRecord(item) || !['message', 'function_call', 'custom_tool_call'].includes(item.type as string)) continue;
    const own = item.status;
    if (own !== undefined && own !== null && own !== 'completed')
      return typeof own === 'string' ? `${String(item.type)} ${own}` : String(item.type);
  }
  return undefined;
}

/** The items of a Responses answer this adapter reads (`reasoning`: the model's thinking, left out), as openaiAdapter. */
const READ_ITEMS: ReadonlySet<string> = new Set(['message', 'function_call', 'custom_tool_call', 'reasoning']);

/**
 * The type of each other item of the raw body of an OpenAI Responses API answer, as openaiAdapter names them
 * (`SUMMARY_INVALID`): a tool the API ran itself or leaves to the caller, what it gave back, and the items the ai SDK's
 * OpenAI provider drops without a content part (`mcp_list_tools`: the tools an MCP server lists, which the model may have
 * called on). The provider refuses an item type its schema does not know (an `AI_APICallError`, MODEL_FAILED) before
 * this is read.
 */
function responsesOtherItems(output: readonly unknown[]): string[] {
  return output.flatMap((item) => {
    const type = isRecord(item) ? item.type : undefined;
    if (typeof type !== 'string') return ['an output item without a type'];
    return READ_ITEMS.has(type) ? [] : [type];
  });
}

/** Each block of a Messages API body but text, thinking and `tool_use`, named as anthropicAdapter names it. */
function messagesOtherBlocks(content: readonly unknown[]): string[] {
  return content.flatMap((b) => {
    if (!isRecord(b)) return ['a block without a type'];
    return b.type === 'tool_use' || ANTHROPIC_LEFT_OUT.has(b.type as string) ? [] : [anthropicServerBlock(b).name];
  });
}

/** Each part field and grounding of a generateContent body's candidate that geminiAdapter refuses, named as it does. */
function generatedOthers(candidates: readonly unknown[]): string[] {
  const candidate = candidates[0];
  if (!isRecord(candidate)) return [];
  const parts = isRecord(candidate.content) && Array.isArray(candidate.content.parts) ? candidate.content.parts : [];
  return [
    ...(parts as unknown[]).flatMap((p) => (isRecord(p) ? geminiOtherParts(p) : ['a part that is no object'])),
    ...geminiGroundedIn(candidate),
  ];
}

/**
 * What the raw body of an answer holds that the adapter does not read, named as the native adapter of its API names it
 * (none for a body of another shape): what the ai SDK's provider drops or folds into the answer is refused all the same.
 */
function bodyOthers(body: unknown): string[] {
  if (!isRecord(body)) return [];
  if (typeof body.status === 'string' && Array.isArray(body.output)) return responsesOtherItems(body.output);
  if (body.type === 'message' && Array.isArray(body.content)) return messagesOtherBlocks(body.content);
  if (Array.isArray(body.candidates)) return generatedOthers(body.candidates);
  return [];
}

/** A model object of the SDK (`v3`, or `v2` of the ai SDK 5's providers), as a `LanguageModel` is when not an id. */
type ModelObject = Exclude<LanguageModel, string>;

/**
 * The model a `LanguageModel` names, an id string resolved as the SDK documents it resolves one (its global provider,
 * else the AI Gateway), so that its body is read as any model object's.
 */
function resolvedModel(ai: typeof import('ai'), model: LanguageModel): ModelObject {
  if (typeof model !== 'string') return model;
  const global = (globalThis as { AI_SDK_DEFAULT_PROVIDER?: { languageModel(id: string): unknown } })
    .AI_SDK_DEFAULT_PROVIDER;
  return (global ?? ai.gateway).languageModel(model) as ModelObject;
}

/**
 * The model, the raw body of its last answer read on the way into `seen` (`responsesUnfinished`, `bodyOthers`): the
 * finish reason does not carry all a Responses status says, and the providers drop some of what an answer holds. Read
 * in the model's own `doGenerate`, the one place every path sees it (a missing forced call throws before any step is
 * reported); the model is otherwise left as it is, its specification version too (the SDK takes a `v2` model as ever).
 */
function withBodyRead(model: ModelObject, seen: Seen): ModelObject {
  return new Proxy(model, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop !== 'doGenerate') return (value as (...a: unknown[]) => unknown).bind(target);
      return async (...args: unknown[]) => {
        const result: unknown = await (value as (...a: unknown[]) => unknown).apply(target, args);
        const body = isRecord(result) && isRecord(result.response) ? result.response.body : undefined;
        seen.unfinished = responsesUnfinished(body);
        seen.others = bodyOthers(body);
        return result;
      };
    },
  });
}

/** What the raw body of the model's last answer says (`withBodyRead`): not finished, or what it holds unread. */
interface Seen {
  unfinished?: string;
  others?: string[];
}

/** Whether the model may be one of OpenAI's Responses API: any but a chat or completion model of the OpenAI provider. */
function viaResponses(model: ModelObject): boolean {
  const { provider } = model as { provider?: unknown };
  return typeof provider !== 'string' || !/\.(chat|completion)$/.test(provider);
}

/**
 * The ai SDK's finish reasons. `content-filter` is what the SDK documents it to be, a content filter that stopped the
 * model (`content_filter`: SUMMARY_INCOMPLETE), as OpenAI's `content_filter` and Gemini's `SAFETY` are read by their
 * adapters. The SDK's providers also report a model's refusal so (OpenAI's `refusal`, Anthropic's stop reason
 * `refusal`), and the SDK does not tell the two apart where a refusal arrives (the errors of a missing forced tool call
 * or object carry only this reason): through the ai SDK a refusal is SUMMARY_INCOMPLETE, never MODEL_REFUSED. `error`,
 * `other` and anything else are `other` (SUMMARY_INCOMPLETE too).
 */
const FINISH: Record<string, ModelFinishReason> = {
  stop: 'stop',
  'tool-calls': 'tool_calls',
  length: 'length',
  'content-filter': 'content_filter',
};

/**
 * @example
 * import { openai } from '@ai-sdk/openai';
 * const model = aiSdkAdapter({ model: openai('gpt-5-mini'), schemaForm: 'openai-strict' });
 * await compact({ ledger, scope, model, transcript });
 */
export function aiSdkAdapter(given: AiSdkAdapterOptions): ModelAdapter {
  const options = adapterOptions('aiSdkAdapter', given, ['model', 'schemaForm', 'maxRetries']) as AiSdkAdapterOptions;
  const form = options.schemaForm ?? 'json-schema';
  summarySchemaFor(form); // an unknown form is refused here (INVALID_ARGUMENT), not as a model failure at compaction
  const strict = form === 'openai-strict';
  const maxRetries = wholeNumberOption('aiSdkAdapter', 'maxRetries', options.maxRetries, 0);
  return async (request) => {
    compactionOnly('aiSdkAdapter', request);
    const ai = await import('ai');
    const { generateText, jsonSchema, tool, Output } = ai;
    const tools: ToolSet = {};
    for (const t of request.tools ?? []) {
      tools[t.name] = tool({
        description: t.description,
        inputSchema: jsonSchema(schemaFor(t.name, t.inputSchema, form)),
        ...(strict && t.name === SUBMIT_HANDOFF ? { strict: true } : {}),
      });
    }
    const choice = request.toolChoice;
    const f = request.responseFormat;
    const { system } = splitSystem(request.messages);
    let result: Awaited<ReturnType<typeof generateText>>;
    // The last step's content: where the SDK throws for want of an object, its error carries only the joined text.
    let lastStep: readonly TextPart[] | undefined;
    let lastRawReason: string | undefined; // and its provider's own finish reason
    // What the raw body of a Responses API answer says did not finish, which the finish reason does not carry (below).
    const seen: Seen = {};
    const model = resolvedModel(ai, options.model);
    try {
      result = await generateText({
        model: withBodyRead(model, seen),
        messages: messages(request),
        ...(system === undefined ? {} : { system }),
        ...(Object.keys(tools).length > 0 ? { tools } : {}),
        ...(choice === undefined
          ? {}
          : { toolChoice: typeof choice === 'string' ? choice : { type: 'tool' as const, toolName: choice.name } }),
        ...(f
          ? {
              output: Output.object({
                schema: jsonSchema(summarySchemaFor(form)),
                name: f.name,
                ...(f.description ? { description: f.description } : {}),
              }),
            }
          : {}),
        ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
        ...(request.signal ? { abortSignal: request.signal } : {}),
        ...(maxRetries === undefined ? {} : { maxRetries }),
        onStepFinish: (step) => {
          lastStep = step.content;
          lastRawReason = step.rawFinishReason;
        },
        // For the ai SDK's OpenAI provider (other providers ignore the key): `store: false` to its Responses models (the
        // provider's default), as openaiAdapter sends it — they otherwise keep the transcript being summarised as a
        // stored response on OpenAI's side (a chat model stores nothing unless asked, and the OpenAI-compatible servers
        // it also reaches need not know the field); and strict mode only for the openai-strict form, the one that meets
        // its rules (every field required, no patterns), which it asks for unless told otherwise.
        providerOptions: {
          openai: {
            ...(viaResponses(model) ? { store: false } : {}),
            ...(strict ? {} : { strictJsonSchema: false }),
          },
        },
      });
    } catch (err) {
      // The SDK throws where the model did not deliver (no forced tool call, no parseable object);
      // both errors carry the answer, which extractSummary then judges like any other.
      if (ai.ToolChoiceViolationError.isInstance(err)) {
        const text = answerText(err.content);
        // The calls it made instead (another tool): extractSummary names them, as for every other dialect.
        const calls = err.content.flatMap((p) =>
          p.type === 'tool-call' ? [toolCall(p.toolCallId, p.toolName, p.input, strict)] : [],
        );
        return answer(err.finishReason, text, [...calls, ...besides(err.content, seen)], undefined, undefined, seen);
      }
      if (ai.NoObjectGeneratedError.isInstance(err)) {
        const text = lastStep ? answerText(lastStep) : (err.text ?? '');
        // The calls of the step too (a tool the provider ran beside the text), which this error does not carry.
        const calls = (lastStep ?? []).flatMap((p) =>
          p.type === 'tool-call' ? [toolCall(p.toolCallId ?? '', p.toolName ?? '', p.input, strict, 'value')] : [],
        );
        const others = [...calls, ...besides(lastStep ?? [], seen)];
        return answer(err.finishReason ?? 'other', text, others, readJson(text, strict), lastRawReason, seen);
      }
      throw err;
    }
    // The SDK parsed each call's input, an invalid call's too (a call of a tool not offered: its JSON parsed, else
    // the text kept as a string). Parsed once only: a summary encoded twice reaches extractSummary as a string.
    const calls = result.toolCalls.map((c) => toolCall(c.toolCallId, c.toolName, c.input, strict, 'value'));
    // The text, not `result.output`: a cut-off or invalid answer must reach extractSummary, not throw here.
    const text = answerText(result.content);
    return answer(
      result.finishReason,
      text,
      [...calls, ...besides(result.content, seen)],
      f ? readJson(text, strict) : undefined,
      result.rawFinishReason,
      seen,
    );
  };
}

/** A text part of the SDK's content (a step's, or an error's), with the provider's metadata of it. */
interface TextPart {
  type: string;
  text?: string;
  /** A `tool-call` part's, a `tool-result`'s. */
  toolCallId?: string;
  toolName?: string;
  input?: unknown;
  providerMetadata?: Record<string, Record<string, unknown> | undefined> | undefined;
}

/**
 * The answer's text from the content parts of the model's reply. A model that answers in phases (OpenAI's Responses
 * models: the provider marks each text part's message with `providerMetadata.<provider>.phase`) writes `commentary`
 * before its `final_answer`, and the SDK's `text` joins the two: the answer is then the final_answer's text alone, as
 * openaiAdapter reads it (a preamble joined to the JSON of a structured answer would break it).
 */
function answerText(content: readonly TextPart[]): string {
  const texts = content.filter(
    (p): p is TextPart & { text: string } => p.type === 'text' && typeof p.text === 'string',
  );
  const phaseOf = (p: TextPart): unknown =>
    Object.values(p.providerMetadata ?? {}).find((m) => m?.phase !== undefined)?.phase;
  const phased = texts.some((p) => phaseOf(p) === 'final_answer');
  return texts
    .filter((p) => !phased || phaseOf(p) === 'final_answer')
    .map((p) => p.text)
    .join('');
}

/** The content parts of the model's reply this adapter reads: its text, its calls; `reasoning` is left out. */
const READ_PARTS: ReadonlySet<string> = new Set(['text', 'reasoning', 'tool-call']);

/**
 * Every other content part of the model's reply, and each item, block or part of its raw body that the adapter does not
 * read (`bodyOthers`), as calls named to extractSummary (`SUMMARY_INVALID`, as a call of another tool is): what a
 * tool gave back (`tool-result`, `tool-error`) or an approval it waits for (`tool-approval-request`) without its call
 * among the calls (with it, it goes with that call, which is named by its tool: a tool the provider ran itself is a
 * `tool-call` with `providerExecuted`, `web_search`, `mcp.fetch_page`), a `source` the answer cites (a web page or a document found by a search: OpenAI's
 * `url_citation` and `file_citation`, Google's grounding), a `file` the model made, or a part this adapter does not
 * know. The summary turn offers no such tool and asks for text or one call; an answer beside them is not a summary of
 * the transcript alone, and is not taken for one.
 */
function besides(content: readonly TextPart[], seen: Seen): ModelToolCall[] {
  // A result, an error or an approval request of a call among the calls goes with that call, named by it (the SDK
  // also adds a `tool-error` for a call of a tool not offered, its call among the calls as it came).
  const called = new Set(content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])));
  const parts = content.flatMap((p) =>
    READ_PARTS.has(p.type) || (p.toolCallId !== undefined && called.has(p.toolCallId))
      ? []
      : [toolCall(p.toolCallId ?? '', p.type, undefined, false, 'value')],
  );
  return [...parts, ...(seen.others ?? []).map((type) => toolCall('', type, undefined, false, 'value'))];
}

/**
 * Raw finish reasons that are no finished answer, whatever unified reason the SDK's provider gives them: Anthropic's
 * `pause_turn` ("we paused a long-running turn", to be sent back to continue), which the ai SDK's Anthropic provider
 * reads as `stop`; anthropicAdapter reads it as not finished (`other`), and so does this adapter.
 */
const UNFINISHED_RAW: ReadonlySet<string> = new Set(['pause_turn']);

/**
 * The answer as a `ModelResponse`: `raw`, the provider's own finish reason, named when it did not finish;
 * `seen.unfinished`, what a Responses body said did not finish (`responsesUnfinished`), which makes an answer the SDK
 * calls finished `other`.
 */
function answer(
  reason: string,
  text: string,
  calls: ModelToolCall[],
  value: unknown,
  raw?: unknown,
  seen?: Seen,
): ModelResponse {
  const unfinished = seen?.unfinished;
  const paused = typeof raw === 'string' && UNFINISHED_RAW.has(raw);
  let finishReason = paused ? 'other' : finishReasonOf(FINISH, reason);
  let named = raw;
  if (unfinished !== undefined && (finishReason === 'stop' || finishReason === 'tool_calls')) {
    finishReason = 'other';
    named = unfinished;
  }
  const out = withProviderReason({ finishReason, text }, named);
  if (calls.length > 0) out.toolCalls = calls;
  if (value !== undefined) out.output = value;
  return out;
}
